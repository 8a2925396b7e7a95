"""The engine study: every decision engine that runs on this machine, side by side, on the same
labelled rows, through the gateway as users run it.

    python bench/study/run.py [--per-set 40] [--only minilm,llama-gemma]      (make study)

Rows: up to `--per-set` rows of each labelled seed set (calibration/*.jsonl, a fixed random
sample) and every row of the blind set (blind.jsonl, written for this study and never fitted).
Each engine server is started as its users start it, alone on the machine, and every row is
asked through an in-process gateway three times: as labelled, again unchanged (does a retry
change the answer?) and, for choices, with the options in reverse order (does the answer follow
the position?). Measured per engine:

- top-1 accuracy, and top-3 on rows with more than three options;
- the share of retries and of reversed orders that change the answer;
- after calibration on unseen questions (a temperature fitted with every row of the question
  left out, `system1 calibrate`'s method): the share answered at the default threshold (0.6)
  and the accuracy of those answers; for MiniLM with learned heads, the gateway's own answer
  with its shipped heads and fits, on the blind set only (the heads were fitted on seed rows);
- p50/p90 latency of one decision through the gateway, and CPU per decision in the engine's
  process (and in the gateway's, which includes the mock engine).

Engines with random weights (laya, von and serve.py's torch engines on tiny generated
checkpoints) are labelled so: they show cost, not skill. Needs `make contract-envs` (the engine
environments, llama-server and its model) and bench/requirements.txt. Writes results.json,
RESULTS.md and pareto.png beside this file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE.parent), str(ROOT / "services" / "gateway")]

from benchlib import percentile  # noqa: E402
from local_engines import ENGINES, Engine  # noqa: E402
from system1.core.config import load_config  # noqa: E402
from system1.core.gateway import Gateway  # noqa: E402
from system1.core.lanes import BATCH  # noqa: E402
from system1.offline.calibrate import Labelled, load  # noqa: E402
from system1.offline.fitting import Answered, question_held_out, top  # noqa: E402

THRESHOLD = 0.6  # the gateway's default min_confidence
TICK = os.sysconf("SC_CLK_TCK")


# -- rows ------------------------------------------------------------------------------------------
def study_rows(per_set: int) -> list[tuple[str, Labelled]]:
    """(set name, row): a fixed sample of each seed set, then the whole blind set."""
    rows = []
    for path in sorted((ROOT / "calibration").glob("*.jsonl")):
        labelled = load(path)
        sample = sorted(random.Random(0).sample(range(len(labelled)), min(per_set, len(labelled))))
        rows += [(path.stem, labelled[i]) for i in sample]
    return rows + [("blind", row) for row in load(HERE / "blind.jsonl")]


def group(row: Labelled) -> str:
    """The kind of question a row is, for "which engine for which kind"."""
    if not row.options:
        return "yes/no"
    return f"{len(row.options)} options" if len(row.options) <= 3 else "4-12 options"


def reversed_request(row: Labelled) -> dict:
    return {**row.request(), "options": list(reversed(row.options))}


# -- one engine ------------------------------------------------------------------------------------
def cpu_seconds(pid: int | None) -> float:
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


async def ask(gateway: Gateway, request: dict, calibrate: bool) -> tuple[dict, float]:
    started = time.perf_counter()
    decision = await gateway.decide(request, client="study", priority=BATCH, calibrate=calibrate)
    return decision.envelope_json(), (time.perf_counter() - started) * 1000


async def run_engine(engine: Engine, rows: list[tuple[str, Labelled]], work: Path) -> dict:
    with ExitStack() as stack:
        section, pid = engine.start(stack, work)
        toml = (f'[gateway]\nprovider = "{engine.provider}"\nmin_confidence = 0\ntimeout_s = 120\n'
                f'[learning]\nenabled = {str(engine.heads).lower()}\n{section}')
        (work / "config.toml").write_text(toml)
        config = load_config({"SYSTEM1_CONFIG": str(work / "config.toml"), "SYSTEM1_INSTALL_DIR": str(work / "state")})
        if config.errors:
            raise RuntimeError(f"{engine.name}: {config.errors}")
        gateway = Gateway(config)
        try:
            await ask(gateway, rows[0][1].request(), engine.heads)  # warm-up: loads, caches
            engine_cpu, own_cpu = cpu_seconds(pid), time.process_time()
            answers, latencies = [], []
            for _, row in rows:
                body, elapsed = await ask(gateway, row.request(), engine.heads)
                answers.append(body)
                latencies.append(elapsed)
            engine_cpu, own_cpu = cpu_seconds(pid) - engine_cpu, time.process_time() - own_cpu
            retries = [(await ask(gateway, row.request(), engine.heads))[0] for _, row in rows]
            reversals = [(await ask(gateway, reversed_request(row), engine.heads))[0] if row.options else None
                         for _, row in rows]
        finally:
            await gateway.aclose()
    return {"answers": answers, "retries": retries, "reversals": reversals, "latency_ms": latencies,
            "engine_cpu_ms": 1000 * engine_cpu / len(rows), "gateway_cpu_ms": 1000 * own_cpu / len(rows)}


# -- scoring ---------------------------------------------------------------------------------------
def score(engine: Engine, rows: list[tuple[str, Labelled]], run: dict) -> dict:
    answers = run["answers"]
    ok = [i for i, a in enumerate(answers) if a.get("probabilities")]
    failed = len(rows) - len(ok)

    def right(i: int) -> bool:
        return answers[i]["decision"] == rows[i][1].label

    def top3(i: int) -> bool:
        ranked = sorted(answers[i]["probabilities"], key=answers[i]["probabilities"].get, reverse=True)
        return rows[i][1].label in ranked[:3]

    def share(indices: list[int], test: Callable[[int], bool]) -> float | None:
        return sum(map(test, indices)) / len(indices) if indices else None

    many = [i for i in ok if len(rows[i][1].choices) > 3]
    choice = [i for i in ok if rows[i][1].options and run["reversals"][i] and run["reversals"][i].get("decision")]
    result = {
        "name": engine.name, "random": engine.random, "rows": len(rows), "failed": failed,
        "top1": share(ok, right), "top1_blind": share([i for i in ok if rows[i][0] == "blind"], right),
        "top3_over_3_options": share(many, top3), "n_over_3_options": len(many),
        "retry_changes": share(ok, lambda i: run["retries"][i].get("decision") != answers[i]["decision"]),
        "reversal_changes": share(choice, lambda i: run["reversals"][i]["decision"] != answers[i]["decision"]),
        "n_reversed": len(choice),
        "latency_p50_ms": percentile(run["latency_ms"], 50), "latency_p90_ms": percentile(run["latency_ms"], 90),
        "engine_cpu_ms": run["engine_cpu_ms"], "gateway_cpu_ms": run["gateway_cpu_ms"],
        "by_set": {}, "by_group": {},
    }
    for name in dict.fromkeys(s for s, _ in rows):
        result["by_set"][name] = share([i for i in ok if rows[i][0] == name], right)
    for kind in ("yes/no", "2 options", "3 options", "4-12 options"):
        for part, test in (("seed", lambda s: s != "blind"), ("blind", lambda s: s == "blind")):
            indices = [i for i in ok if group(rows[i][1]) == kind and test(rows[i][0])]
            result["by_group"][f"{kind} ({part})"] = share(indices, right)
    if engine.heads:  # the gateway's own calibrated answers (heads and shipped fits), blind rows only
        blind = [i for i in ok if rows[i][0] == "blind"]
        sure = [i for i in blind if answers[i]["status"] == "decided" and answers[i]["confidence"] >= THRESHOLD]
        result.update(calibration="the gateway's shipped heads and fits, blind rows",
                      answered=share(blind, lambda i: i in sure), answered_accuracy=share(sure, right))
    else:  # a temperature fitted on the other questions' rows (what a new question gets)
        fitted = [Answered(rows[i][1].question, tuple(rows[i][1].choices), rows[i][1].label, answers[i]["probabilities"],
                           engine.provider, answers[i]["provider"]) for i in ok]
        unseen = question_held_out(fitted) if len({a.question for a in fitted}) > 1 else []
        sure = [j for j, p in enumerate(unseen) if top(p)[1] >= THRESHOLD]
        result.update(calibration="temperature fitted on the other questions' rows, all rows",
                      answered=len(sure) / len(unseen) if unseen else None,
                      answered_accuracy=(sum(top(unseen[j])[0] == fitted[j].label for j in sure) / len(sure)) if sure else None)
    return result


# -- report ----------------------------------------------------------------------------------------
def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def plot(results: list[dict], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for r in results:
        colour = "0.6" if r["random"] else "tab:blue"
        ax.scatter(r["latency_p50_ms"], r["top1_blind"], color=colour, s=40)
        if not r["random"]:  # the random ones cluster at chance and are named together below
            ax.annotate(r["name"], (r["latency_p50_ms"], r["top1_blind"]), textcoords="offset points",
                        xytext=(6, 4), fontsize=8, color=colour)
    randoms = [r["name"] for r in results if r["random"]]
    if randoms:
        ax.text(0.98, 0.45, "grey, random weights (cost, not skill):\n" + ", ".join(randoms), transform=ax.transAxes,
                ha="right", va="center", fontsize=8, color="0.4")
    real = sorted((r for r in results if not r["random"]), key=lambda r: r["latency_p50_ms"])
    front, best = [], -1.0
    for r in real:
        if r["top1_blind"] > best:
            front.append(r)
            best = r["top1_blind"]
    ax.plot([r["latency_p50_ms"] for r in front], [r["top1_blind"] for r in front], color="tab:blue", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("p50 latency of one decision through the gateway (ms, log scale)")
    ax.set_ylabel("top-1 accuracy on the blind set")
    ax.set_title("Engines on this machine (2 CPUs): accuracy against latency")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def render(results: list[dict], meta: dict) -> str:
    lines = [
        "# Engine study: results", "",
        f"Measured {meta['date']} on {meta['cpus']} CPUs, Python {meta['python']}, with "
        f"`python bench/study/run.py --per-set {meta['per_set']}` (`make study`). Rows: {meta['rows']} "
        f"({meta['seed_rows']} sampled from the seed sets in `calibration/`, {meta['blind_rows']} from the blind set, "
        "`blind.jsonl`, written for this study and never fitted). Raw figures: `results.json`; chart: `pareto.png`.", "",
        "Engines marked *random* run real server code on tiny generated checkpoints with random weights: "
        "their accuracy is chance and means nothing; their latency and CPU show what the engine's code costs "
        "at that size, not at a real model's.", "",
        "| engine | top-1 blind | top-1 all | top-3 (>3 options) | retry changes | reversed options change | answered at 0.6 | right when answered | p50 / p90 ms | engine CPU ms | gateway CPU ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        name = r["name"] + (" *(random)*" if r["random"] else "")
        lines.append(
            f"| {name} | {pct(r['top1_blind'])} | {pct(r['top1'])} | {pct(r['top3_over_3_options'])} | {pct(r['retry_changes'])} | "
            f"{pct(r['reversal_changes'])} | {pct(r['answered'])} | {pct(r['answered_accuracy'])} | "
            f"{r['latency_p50_ms']:.1f} / {r['latency_p90_ms']:.1f} | {r['engine_cpu_ms']:.1f} | {r['gateway_cpu_ms']:.1f} |")
    lines += ["", "\"top-1 all\" includes the seed sample, on which minilm+heads was fitted (its heads' kinds "
              "are in-sample there); \"top-1 blind\" is the fair comparison.", "",
              "\"answered at 0.6\" and \"right when answered\": for every engine but minilm+heads, after a "
              "temperature fitted with all rows of the row's own question left out (what a question nobody "
              "calibrated gets); for minilm+heads, the gateway's own answers with its shipped heads and fits, "
              "on the blind rows only, since the heads were fitted on the seed sets. Failed rows: "
              + ", ".join(f"{r['name']} {r['failed']}" for r in results) + ".", "",
              "Top-1 accuracy by kind of question (seed sample / blind set):", ""]
    lines += ["| engine | " + " | ".join(KINDS) + " |", "|---|" + "---|" * len(KINDS)]
    for r in results:
        cells = [f"{pct(r['by_group'][f'{k} (seed)'])} / {pct(r['by_group'][f'{k} (blind)'])}" for k in KINDS]
        lines.append(f"| {r['name']}{' *(random)*' if r['random'] else ''} | " + " | ".join(cells) + " |")
    return "\n".join(lines + ["", *advice(results)]) + "\n"


KINDS = ("yes/no", "2 options", "3 options", "4-12 options")


def advice(results: list[dict]) -> list[str]:
    """Which engine to pick for each kind of question, from the blind set: the most accurate
    engine with real weights, against chance (the mock, which always takes the first option)."""
    real = [r for r in results if not r["random"] and r["name"] != "mock"]
    chance = next((r for r in results if r["name"] == "mock"), None)
    lines = ["## Which engine for which question", "",
             "From the blind set (questions and rows no fit has seen), engines with real weights only:", ""]
    for kind in KINDS:
        key = f"{kind} (blind)"
        ranked = sorted((r for r in real if r["by_group"].get(key) is not None),
                        key=lambda r: (-r["by_group"][key], r["latency_p50_ms"]))
        if not ranked:
            continue
        best, rest = ranked[0], ranked[1:]
        others = ", ".join(f"{r['name']} {pct(r['by_group'][key])}" for r in rest)
        floor = f"; chance (the first option) {pct(chance['by_group'][key])}" if chance and chance["by_group"].get(key) is not None else ""
        lines.append(f"- **{kind}**: {best['name']}, {pct(best['by_group'][key])} right at "
                     f"{best['latency_p50_ms']:.0f} ms p50 ({others}{floor}).")
    following = ", ".join(f"{r['name']} {pct(r['reversal_changes'])}" for r in [*real, *([chance] if chance else [])])
    return lines + ["", "Learned heads help only the kinds they were fitted for (the destructive-command, "
                    "tier, tool-choice and routing questions); on any other question minilm+heads answers as "
                    "minilm does. How often reversing the order of the options changes the answer (an engine "
                    f"that reads the position rather than the content changes it every time): {following}. "
                    "Engines with random weights show what their code costs at a tiny size, nothing about "
                    "what their trained models would decide."]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-set", type=int, default=40)
    parser.add_argument("--only", default="", help="comma-separated engine names (default: all)")
    parser.add_argument("--report", action="store_true", help="only write RESULTS.md and the chart from results.json")
    args = parser.parse_args()
    if args.report:
        saved = json.loads((HERE / "results.json").read_text())
        (HERE / "RESULTS.md").write_text(render(saved["engines"], saved["meta"]))
        plot(saved["engines"], HERE / "pareto.png")
        return
    wanted = set(filter(None, args.only.split(",")))
    rows = study_rows(args.per_set)
    results = []
    for engine in ENGINES:
        if wanted and engine.name not in wanted:
            continue
        print(f"{engine.name}: {len(rows)} rows", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix=f"study-{engine.name}-") as work:
            results.append(score(engine, rows, await run_engine(engine, rows, Path(work))))
    meta = {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "python": platform.python_version(),
            "per_set": args.per_set, "rows": len(rows), "blind_rows": sum(s == "blind" for s, _ in rows),
            "seed_rows": sum(s != "blind" for s, _ in rows)}
    (HERE / "results.json").write_text(json.dumps({"meta": meta, "engines": results}, indent=2) + "\n")
    (HERE / "RESULTS.md").write_text(render(results, meta))
    plot(results, HERE / "pareto.png")
    print((HERE / "RESULTS.md").read_text())


if __name__ == "__main__":
    asyncio.run(main())
