"""Whether llama-server's threads, waiting for work, slow the engine that answers next.

    .venv/bin/python bench/cascade/poll.py   (about 4 minutes)

On two cores the judge (llama-server, 2 threads) shares the CPU with MiniLM and e5. After each
answer llama-server's threads poll for more work for a while (`--poll`, 50 by default) before
they sleep. Here one e5 server (serve.py, as the stack runs it) embeds a fresh prompt right
after a judge request and again after a 0.7 s pause, 15 times, with llama-server started at its
default polling and with `--poll 0`, in the order default, 0, default, 0 so that drift shows.
Medians of each. Writes POLL.md and poll.json beside this file.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

from benchlib import free_port  # noqa: E402
from local_engines import judge_server, serve  # noqa: E402

ROUNDS = 15
PROMPT = "You are a careful reviewer. " + "Explain what this shell command does and whether it is risky: " \
         "rm -rf ./build && make -j2 all. " * 3


def embed_ms(e5: httpx.Client) -> float:
    text = f"{uuid.uuid4()} please refactor the billing module and add tests for the invoice totals"  # never cached
    started = time.perf_counter()
    e5.post("/v1/embed", json={"model": "multilingual-e5-small", "states": [{"prompt": text}]}).raise_for_status()
    return (time.perf_counter() - started) * 1000


def measure(e5: httpx.Client, polling: bool) -> dict:
    with ExitStack() as stack:
        url, _ = judge_server(stack, polling=polling)
        judge = stack.enter_context(httpx.Client(base_url=url, timeout=120))
        after, paused, judged = [], [], []
        for n in range(ROUNDS):
            started = time.perf_counter()
            judge.post("/completion", json={"prompt": f"{n} {PROMPT}", "n_predict": 1}).raise_for_status()
            judged.append((time.perf_counter() - started) * 1000)
            after.append(embed_ms(e5))
            time.sleep(0.7)
            paused.append(embed_ms(e5))
    return {"poll": "default" if polling else "0", "embed_after_judge_ms": statistics.median(after),
            "embed_after_pause_ms": statistics.median(paused), "judge_ms": statistics.median(judged)}


def main() -> None:
    with ExitStack() as stack:
        port = free_port()
        serve(stack, [sys.executable, str(ROOT / "engines" / "systemone" / "serve.py"), "--port", str(port)],
              f"http://127.0.0.1:{port}/health", {"SYSTEMONE_THREADS": "2", "SYSTEMONE_EMBEDDERS": "e5"})
        e5 = stack.enter_context(httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60))
        for _ in range(5):
            embed_ms(e5)  # warm-up
        runs = [measure(e5, polling) for polling in (True, False, True, False)]
    (HERE / "poll.json").write_text(json.dumps(runs, indent=1) + "\n")
    lines = ["# llama-server's polling and the engine that answers next", "",
             f"`bench/cascade/poll.py`: one e5 server and llama-server with the judge, 2 threads each, on this "
             f"machine's cores; medians of {ROUNDS} rounds per run, the runs in the order listed.", "",
             "| llama-server `--poll` | e5 embed right after a judge request | e5 embed after a 0.7 s pause "
             "| the judge request |", "|---|---|---|---|"]
    lines += [f"| {r['poll']} | {r['embed_after_judge_ms']:.1f} ms | {r['embed_after_pause_ms']:.1f} ms | "
              f"{r['judge_ms']:.0f} ms |" for r in runs]
    (HERE / "POLL.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
