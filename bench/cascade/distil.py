"""Distillation measured on blind rows: MiniLM's heads fitted from the human-labelled seed sets
alone, and from the same rows plus the judge's confident labels on the unlabelled pools.

    python bench/cascade/distil.py                     (make bench-distil)

One MiniLM server (serve.py) and one llama-server with the judge (Qwen2.5-Coder-1.5B-Instruct);
for each arm a gateway served for real, its heads written into its own state folder by
`system1 learn --write`:

- `human`: `system1 learn` on the seed sets the shipped heads were fitted from;
- `distilled`: the same, with `--teacher llama --pool calibration/pools/*.jsonl`: the judge labels
  the pools' rows where it is sure at the gateway's threshold, and those rows train every fold
  (the gate and every held-out figure of the learn report are on human labels only).

Then MiniLM with each arm's heads (no cascade: the fast stage alone, as distillation is meant to
make it) answers both blind sets (bench/cascade/blind.jsonl and blind2.jsonl, written apart from
every training and pool row, never fitted or tuned on). Writes DISTIL.md, distil.json and the
learn reports (distil-learn-*.md) beside this file.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE.parent), str(HERE), str(ROOT / "services" / "gateway")]

from benchlib import served_gateway  # noqa: E402
from run import JUDGE, LLAMA, ask_all, pct, start_engines, summary  # noqa: E402
from system1.core.config import load_config  # noqa: E402
from system1.core.gateway import Gateway  # noqa: E402

SEEDS = ["many-questions", "routing", "tier", "tool-choice", "yes-no"]
POOLS = sorted((ROOT / "calibration" / "pools").glob("*.jsonl"))
BLINDS = ("blind.jsonl", "blind2.jsonl")
ARMS = {"human": [], "distilled": ["--teacher", "llama", *[a for p in POOLS for a in ("--pool", str(p))]]}


def config(minilm: str, judge: str) -> str:
    return (f'[gateway]\nprovider = "systemone"\ntimeout_s = 120\n[learning]\nenabled = true\n'
            f'[providers.systemone]\nendpoint = "{minilm}"\nmax_options = 256\nbatch = true\n'
            f'[providers.llama]\nendpoint = "{judge}"\nmax_options = 52\n')


def learn(toml: str, state: Path, extra: list[str]) -> str:
    """`system1 learn --write` on the seed sets (and `extra`), into `state`; its report."""
    report = HERE / f"distil-learn-{state.name}.md"
    with served_gateway(toml, state=state) as (url, _, env):
        args = [sys.executable, "-m", "system1", "learn", *[str(ROOT / "calibration" / f"{s}-seed.jsonl") for s in SEEDS],
                *extra, "--write", "--report", str(report), "--url", url]
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=4 * 3600)
    if done.returncode != 0:
        raise RuntimeError(f"learn ({state.name}) failed: {done.stderr[-2000:]}")
    return report.read_text(encoding="utf-8")


async def blind_figures(toml: str, state: Path, pids: list[int]) -> dict:
    """MiniLM with the heads in `state`, on each blind set: the cascade's summary, per set and group."""
    (state / "eval.toml").write_text(toml)
    gateway = Gateway(load_config({"SYSTEM1_CONFIG": str(state / "eval.toml"), "SYSTEM1_INSTALL_DIR": str(state)}))
    figures = {}
    try:
        for blind in BLINDS:
            table = [json.loads(line) for line in (HERE / blind).read_text().splitlines() if line]
            answers, latencies, _ = await ask_all(gateway, table, pids)
            groups = {}
            for group in dict.fromkeys(r["group"] for r in table):
                index = [i for i, r in enumerate(table) if r["group"] == group]
                groups[group] = summary([table[i] for i in index], [answers[i] for i in index], [latencies[i] for i in index])
            figures[blind] = {"all": summary(table, answers, latencies), "groups": groups}
    finally:
        await gateway.aclose()
    return figures


def teacher_table(report: str) -> str:
    """The learn report's teacher section, as it printed it."""
    start = report.find("## Teacher labels")
    return report[start:].strip() if start >= 0 else "(the report has no teacher section)"


def render(results: dict) -> str:
    lines = ["# Distillation: the judge's labels in MiniLM's heads, on blind rows", "",
             f"`make bench-distil` on {results['machine']}. Heads fitted by `system1 learn` on the seed sets "
             f"({', '.join(SEEDS)}); `distilled` adds the judge's confident labels on the pools "
             f"({', '.join(p.name for p in POOLS)}). MiniLM alone with each arm's heads, threshold 0.6, answers the "
             "blind sets, written apart from every training and pool row and never fitted or tuned on.", "",
             "| blind set | heads | coverage | accuracy of answers | right of all | ECE |", "|---|---|---|---|---|---|"]
    for blind in BLINDS:
        for arm in ARMS:
            s = results["arms"][arm]["blind"][blind]["all"]
            ece = "-" if s["ece"] is None else f"{s['ece']:.3f}"
            lines.append(f"| {blind} | {arm} | {pct(s['coverage'])} | {pct(s['accuracy'])} | {pct(s['right_of_all'])} | {ece} |")
    lines += ["", "## By group (coverage / accuracy of answers)", "", "| blind set | group | human | distilled |",
              "|---|---|---|---|"]
    for blind in BLINDS:
        for group, human in results["arms"]["human"]["blind"][blind]["groups"].items():
            distilled = results["arms"]["distilled"]["blind"][blind]["groups"][group]
            lines.append(f"| {blind} | {group} | {pct(human['coverage'])} / {pct(human['accuracy'])} | "
                         f"{pct(distilled['coverage'])} / {pct(distilled['accuracy'])} |")
    lines += ["", "## The teacher, from the distilled arm's learn report", "", results["arms"]["distilled"]["teacher"], ""]
    return "\n".join(lines)


def main() -> None:
    for needed in (LLAMA / "bin" / "llama-server", JUDGE):
        if not needed.exists():
            sys.exit(f"{needed} is missing: make llama-server judge-model")
    results: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "arms": {}}
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        minilm_url, judge_url, minilm_pid, judge_pid = start_engines(stack)
        toml = config(minilm_url, judge_url)
        for arm, extra in ARMS.items():
            state = Path(tmp) / arm
            report = learn(toml, state, extra)
            figures = asyncio.run(blind_figures(toml, state, [minilm_pid, judge_pid]))
            results["arms"][arm] = {"blind": figures, "teacher": teacher_table(report)}
            print(f"{arm}: {json.dumps({b: f['all'] for b, f in figures.items()})}", flush=True)
    (HERE / "distil.json").write_text(json.dumps(results, indent=1) + "\n")
    (HERE / "DISTIL.md").write_text(render(results))
    print(f"wrote {HERE / 'DISTIL.md'}")


if __name__ == "__main__":
    main()
