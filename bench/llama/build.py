"""The judge on two builds of llama-server: the one the stack ships and the portable one.

    .venv/bin/python bench/llama/build.py   (needs make contract-envs; builds the portable binary
                                             into build/llama-portable first if it is not there,
                                             about 11 CPU-minutes; then about 10 minutes)

`engines/llama/build_server.py` compiles llama-server for the CPU it runs on (`--cpu native`,
what the image and `make contract-envs` build) or for any x86-64 with AVX2 (`--cpu portable`).
Both serve the judge (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M) as the stack does: 2 threads, its
reading on, no polling. Each request goes to both servers in turn, the first server alternating
from one request to the next, one request at a time: the ratio of the two times is measured side
by side, on the same machine state. The requests are the judge's work in the stack, on training
rows (`calibration/`; latency and agreement only, no label is read):

- `decide, command`: the destructive-command question about a shell command (both option orders);
- `decide, choice`: a question with three to five options about a short text;
- `decide, private`: the router's private question about a chat prompt (both option orders);
- `reading, private`: the judge's reading of the same prompt (`/embedding`, the last hidden state).

Agreement: the largest difference in P(yes) or in the top option's probability, answers that
differ, and the lowest cosine between the two builds' readings. Writes BUILD.md, build.json and
build.png beside this file.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(ROOT / "services" / "gateway"))

from benchlib import percentile  # noqa: E402
from local_engines import LLAMA, judge_server  # noqa: E402
from system1.providers.base import Query  # noqa: E402
from system1.providers.llama import LlamaOptions, LlamaProvider  # noqa: E402
from system1.router.signals import PRIVATE_QUESTION  # noqa: E402

PORTABLE = ROOT / "build" / "llama-portable"
BUILDS = {"native": LLAMA / "bin" / "llama-server", "portable": PORTABLE / "bin" / "llama-server"}
PER_KIND = 40
SEED = 20261207
TIMEOUT_S = 120.0


def sample(name: str, count: int, keep=lambda row: True) -> list[dict]:
    rows = [json.loads(line) for line in (ROOT / "calibration" / name).read_text().splitlines() if line.strip()]
    rows = [row for row in rows if keep(row)]
    return random.Random(SEED).sample(rows, min(count, len(rows)))


def work() -> list[tuple[str, dict, Query]]:
    """(kind, judged text, question) for each request, the kinds interleaved."""
    commands = [("decide, command", row["context"], Query(row["question"], ["yes", "no"], yes_no=True))
                for row in sample("yes-no-seed.jsonl", PER_KIND)]
    choices = [("decide, choice", row["context"], Query(row["question"], row["options"]))
               for row in sample("many-questions-seed.jsonl", PER_KIND, lambda row: row.get("options"))]
    prompts = sample("privacy-seed.jsonl", PER_KIND)
    private = [("decide, private", row["context"], Query(PRIVATE_QUESTION, ["yes", "no"], yes_no=True)) for row in prompts]
    readings = [("reading, private", row["context"], Query(PRIVATE_QUESTION, ["yes", "no"], yes_no=True)) for row in prompts]
    return [item for group in zip(commands, choices, private, readings) for item in group]


async def timed(provider: LlamaProvider, kind: str, state: dict, query: Query) -> tuple[float, dict | list[float]]:
    started = time.perf_counter()
    if kind.startswith("reading"):
        _, vector = await provider.embed(state, query, TIMEOUT_S)
        return 1000 * (time.perf_counter() - started), vector
    answer = await provider.decide(state, query, TIMEOUT_S)
    return 1000 * (time.perf_counter() - started), {"decision": answer.decision, "probabilities": answer.probabilities}


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


async def measure(urls: dict[str, str]) -> list[dict]:
    providers = {name: LlamaProvider(LlamaOptions(endpoint=url)) for name, url in urls.items()}
    names = list(providers)
    rows = []
    try:
        for index, (kind, state, query) in enumerate(work()):
            order = names if index % 2 == 0 else names[::-1]
            results = {name: await timed(providers[name], kind, state, query) for name in order}
            row = {"kind": kind, **{f"{name}_ms": results[name][0] for name in names}}
            a, b = (results[name][1] for name in names)
            if kind.startswith("reading"):
                row["cosine"] = cosine(a, b)
            else:
                row["same_answer"] = a["decision"] == b["decision"]
                row["probability_gap"] = max(abs(a["probabilities"][k] - b["probabilities"][k]) for k in a["probabilities"])
            rows.append(row)
    finally:
        for provider in providers.values():
            await provider.aclose()
    return rows


def summary(rows: list[dict]) -> dict[str, dict]:
    table: dict[str, dict] = {}
    for kind in dict.fromkeys(row["kind"] for row in rows):
        mine = [row for row in rows if row["kind"] == kind]
        entry: dict = {"requests": len(mine)}
        for name in BUILDS:
            times = [row[f"{name}_ms"] for row in mine]
            entry[name] = {"p50_ms": percentile(times, 50), "p90_ms": percentile(times, 90)}
        ratios = [row["portable_ms"] / row["native_ms"] for row in mine]
        entry["speed-up p50"] = percentile(ratios, 50)
        if kind.startswith("reading"):
            entry["lowest cosine"] = min(row["cosine"] for row in mine)
        else:
            entry["answers that differ"] = sum(not row["same_answer"] for row in mine)
            entry["largest probability gap"] = max(row["probability_gap"] for row in mine)
        table[kind] = entry
    return table


def report(table: dict[str, dict], flags: dict[str, str]) -> str:
    lines = ["# The judge on the native and the portable llama-server", "",
             "`.venv/bin/python bench/llama/build.py` on x86_64, 2 CPUs: each request to both servers in turn, "
             "one at a time, the first alternating. Speed-up is the median over requests of portable time / "
             "native time.", "",
             "| request | requests | native p50 / p90 | portable p50 / p90 | speed-up (median ratio) | agreement |",
             "|---|---|---|---|---|---|"]
    for kind, entry in table.items():
        agree = (f"lowest cosine {entry['lowest cosine']:.4f}" if "lowest cosine" in entry else
                 f"{entry['answers that differ']} answers differ; largest probability gap {entry['largest probability gap']:.3f}")
        lines.append(f"| {kind} | {entry['requests']} | {entry['native']['p50_ms']:.0f} / {entry['native']['p90_ms']:.0f} ms | "
                     f"{entry['portable']['p50_ms']:.0f} / {entry['portable']['p90_ms']:.0f} ms | "
                     f"{entry['speed-up p50']:.2f}× | {agree} |")
    lines += ["", "Build flags (each binary's `BUILD` record):", ""]
    lines += [f"- **{name}**: {flags[name]}" for name in BUILDS]
    return "\n".join(lines) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(dict.fromkeys(row["kind"] for row in rows))
    fig, ax = plt.subplots(figsize=(6, 5))
    for kind in kinds:
        mine = [row for row in rows if row["kind"] == kind]
        ax.scatter([row["portable_ms"] for row in mine], [row["native_ms"] for row in mine], s=12, label=kind)
    top = max(max(row["portable_ms"], row["native_ms"]) for row in rows)
    ax.plot([0, top], [0, top], color="grey", linewidth=0.8, label="same time")
    ax.set_xlabel("portable build, ms")
    ax.set_ylabel("native build, ms")
    ax.set_title("The judge's requests on two builds of llama-server (2 CPUs)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    if not BUILDS["portable"].exists():
        subprocess.run([sys.executable, str(ROOT / "engines" / "llama" / "build_server.py"), str(PORTABLE),
                        "--cpu", "portable"], check=True, timeout=3 * 3600)
    with ExitStack() as stack:
        urls = {name: judge_server(stack, server=binary)[0] for name, binary in BUILDS.items()}
        rows = asyncio.run(measure(urls))
    flags = {name: " ".join((binary.parent / "BUILD").read_text().splitlines()[1:]) for name, binary in BUILDS.items()}
    table = summary(rows)
    (HERE / "build.json").write_text(json.dumps({"machine": "x86_64, 2 CPUs", "summary": table, "rows": rows}, indent=1) + "\n")
    (HERE / "BUILD.md").write_text(report(table, flags))
    plot(rows, HERE / "build.png")
    print(report(table, flags))


if __name__ == "__main__":
    main()
