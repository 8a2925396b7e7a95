"""What a learned head costs per decision, when the embedder is the engine that answers.

One serve.py engine (MiniLM) and two gateways from this tree in front of it: one with learning
off (`[learning] enabled = false`: the question's calibration fit answers) and one with the
shipped heads (the destructive-command head answers, its embedding carried by the same engine
pass). The destructive-command question about the same commands is asked of each in turn, one
request at a time, so both see the same engine under the same load; timings are side by side in
one run. Reported: p50 and p95 of the client-side latency and of the gateway's `latency_ms`,
and the difference of the medians.

    python bench/heads/run.py [--rounds 300]     # writes results.json, RESULTS.md and heads.png here
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

from benchlib import free_port, percentile, wait_http  # noqa: E402

QUESTION = "Is this tool call destructive or hard to reverse?"
COMMANDS = ["rm -rf /", "git clean -fdx", "ls -la", "kubectl delete ns demo", "cat notes.txt", "git push -f",
            "make test", "docker volume rm data", "du -sh .", "DROP TABLE t;"]
GATEWAY = ('[gateway]\nprovider = "systemone"\nmin_confidence = 0\ntimeout_s = 10\n'
           '[providers.systemone]\nendpoint = "{engine}"\n[learning]\nenabled = {learning}\n')


def start(stack: ExitStack, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop() -> None:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)

    stack.callback(stop)
    return process


def measure(rounds: int) -> dict:
    python = str(ROOT / ".venv" / "bin" / "python")
    tmp = Path(tempfile.mkdtemp(prefix="system1-heads-bench-"))
    engine_port = free_port()
    engine = f"http://127.0.0.1:{engine_port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "services" / "gateway"), "SYSTEMONE_THREADS": "1"}
    with ExitStack() as stack:
        start(stack, [python, str(ROOT / "engines" / "systemone" / "serve.py"), "--port", str(engine_port)], env)
        gateways = {}
        for name, learning in (("heads off", "false"), ("heads on", "true")):
            port = free_port()
            config = tmp / f"{port}.toml"
            config.write_text(GATEWAY.format(engine=engine, learning=learning))
            start(stack, [python, "-m", "system1", "serve", "--port", str(port)],
                  {**env, "SYSTEM1_CONFIG": str(config), "SYSTEM1_INSTALL_DIR": str(tmp / f"state-{port}")})
            gateways[name] = f"http://127.0.0.1:{port}"
        wait_http(f"{engine}/health", 120)
        for url in gateways.values():
            wait_http(f"{url}/healthz", 60)
        samples: dict[str, dict[str, list[float]]] = {name: {"client_ms": [], "gateway_ms": []} for name in gateways}
        answered_by: dict[str, set[str]] = {name: set() for name in gateways}
        with httpx.Client(timeout=30, trust_env=False) as http:
            for round_ in range(rounds + 20):  # the first 20 rounds warm caches and are dropped
                command = COMMANDS[round_ % len(COMMANDS)]
                for name, url in gateways.items():
                    body = {"question": QUESTION, "context": {"tool": "Bash", "command": command}}
                    started = time.perf_counter()
                    reply = http.post(f"{url}/v1/decide", json=body).json()
                    elapsed = (time.perf_counter() - started) * 1000
                    if reply.get("error"):
                        raise RuntimeError(f"{name}: {reply['error']}")
                    answered_by[name].add("head" if "learned head" in reply["rationale"] else "fit")
                    if round_ >= 20:
                        samples[name]["client_ms"].append(elapsed)
                        samples[name]["gateway_ms"].append(float(reply["latency_ms"]))
    summary = {name: {key: {"p50": statistics.median(v), "p95": percentile(v, 95), "n": len(v)}
                      for key, v in s.items()} | {"answered_by": sorted(answered_by[name])}
               for name, s in samples.items()}
    return {"rounds": rounds, "summary": summary, "samples": samples,
            "added_p50_ms": {key: summary["heads on"][key]["p50"] - summary["heads off"][key]["p50"]
                             for key in ("client_ms", "gateway_ms")}}


def plot(results: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(6, 4))
    names = list(results["samples"])
    ax.boxplot([results["samples"][n]["client_ms"] for n in names], showfliers=False)
    ax.set_xticks(range(1, len(names) + 1), names)
    ax.set_ylabel("client-side latency per decision (ms)")
    ax.set_title("Destructive-command decision, MiniLM, one request at a time")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    results = measure(args.rounds)
    results["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version()}
    (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    drawn = plot(results, HERE / "heads.png")
    s, added = results["summary"], results["added_p50_ms"]
    rows = [f"| {name} | {', '.join(v['answered_by'])} | {v['client_ms']['p50']:.1f} | {v['client_ms']['p95']:.1f} | "
            f"{v['gateway_ms']['p50']:.0f} | {v['gateway_ms']['p95']:.0f} |" for name, v in s.items()]
    text = "\n".join([
        "# What a learned head costs", "",
        f"`python bench/heads/run.py --rounds {args.rounds}` on {os.cpu_count()} CPUs: the destructive-command "
        "question about ten commands, asked in turn of a gateway with learning off and one with the shipped heads, "
        "both in front of one serve.py MiniLM engine (one thread), one request at a time, after 20 warm-up rounds.", "",
        "| gateway | answered by | client p50 ms | client p95 ms | gateway p50 ms | gateway p95 ms |",
        "|---|---|---|---|---|---|", *rows, "",
        f"The head adds {added['client_ms']:+.2f} ms to the client-side median and {added['gateway_ms']:+.0f} ms to "
        "the gateway's own (whole milliseconds): the embedding comes back with the engine's answer, so no second "
        "engine call is made, and the head itself is a few thousand multiply-adds."
        + ("" if drawn else " (Install matplotlib for the plot.)"), "",
    ])
    (HERE / "RESULTS.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
