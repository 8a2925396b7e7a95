"""System 1, System 2 and the cascade, side by side on the same rows, as the stack ships them.

    python bench/cascade/run.py [--per-set 40]                     (make bench-cascade)

Three gateways in process, over one MiniLM server (serve.py) and one llama-server with the judge
(Qwen2.5-Coder-1.5B-Instruct, engines/llama/qwen_model.py), each with the shipped calibration
fits and learned heads and the default threshold (0.6):

- `minilm+heads`: the fast stage alone, as the stack ran before the cascade;
- `judge`: llama-server alone (no learned heads: a head answers whichever engine is asked);
- `cascade`: MiniLM first, the judge for what MiniLM is unsure of (`[gateway] cascade`), but
  not for the kinds the stack's config skips (`cascade_skip_kinds`, which abstain); a
  destructive-command question in other words is asked as the head's own (`core.rewording`),
  which takes a judge to read the wording, so the other two ask every question as worded.

Rows: the blind set (bench/cascade/blind.jsonl, written apart from every training row and never
fitted or tuned on) and a fixed sample of each seed set the fits were made from (`--per-set`
rows of each of calibration/{yes-no,tool-choice,tier,many-questions}-seed.jsonl; seen rows, so
flattering). Each row is asked once, one at a time. Measured per system and set: coverage
(rows answered), accuracy of the answers, ECE (10 bins) of the answers, the share of rows
whose no-evidence question abstained, the share of decisions that reached stage 2, p50/p90
latency through the gateway, and CPU per decision in the engine servers. Needs the host's
llama-server and judge model (`make llama-server judge-model`). Writes results.json,
RESULTS.md and cascade.png beside this file.
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
import tomllib
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE.parent), str(ROOT / "services" / "gateway")]

from benchlib import free_port, percentile  # noqa: E402
from local_engines import JUDGE, LLAMA, judge_server, serve  # noqa: E402
from system1.core.calibration import LOCAL_FITS_NAME  # noqa: E402
from system1.core.cascade import BORROWED  # noqa: E402
from system1.core.config import load_config  # noqa: E402
from system1.core.gateway import Gateway  # noqa: E402
from system1.core.heads import kind_of  # noqa: E402
from system1.core.result import Decision  # noqa: E402
from system1.core.rewording import DESTRUCTIVE, Reading  # noqa: E402
from system1.providers.base import Query  # noqa: E402

#: The kinds the stack's cascade leaves to stage 1 (deploy/config.toml).
SKIPPED: list[str] = tomllib.loads((ROOT / "deploy" / "config.toml").read_text())["gateway"].get("cascade_skip_kinds", [])
SEEDS = ("yes-no", "tool-choice", "tier", "many-questions")
# name: (primary, cascade, learned heads). The judge alone runs without heads: a head answers
# whichever engine is asked, so with them "the judge" would be MiniLM's heads on their kinds.
SYSTEMS = {"minilm+heads": ("systemone", [], True), "judge": ("llama", [], False),
           "cascade": ("systemone", ["llama"], True)}
TICK = os.sysconf("SC_CLK_TCK")


def rows(per_set: int, blind_file: str = "blind.jsonl") -> list[dict]:
    """The blind rows (set "blind", their own group), then a fixed sample of each seed set
    (group "seed NAME")."""
    blind = [{**json.loads(line), "set": "blind"} for line in (HERE / blind_file).read_text().splitlines() if line]
    sampled = []
    for name in SEEDS:
        lines = [json.loads(line) for line in (ROOT / "calibration" / f"{name}-seed.jsonl").read_text().splitlines() if line]
        for i in sorted(random.Random(0).sample(range(len(lines)), min(per_set, len(lines)))):
            # Named apart from the blind groups, some of which share a seed set's name ("tier").
            sampled.append({**lines[i], "set": "seed", "group": f"seed {name}"})
    return blind + sampled


def request(row: dict) -> dict:
    body = {"question": row["question"], "context": row.get("context")}
    if row.get("options"):
        body["options"] = row["options"]
    return {key: value for key, value in body.items() if value is not None}


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def ece(pairs: list[tuple[float, bool]], bins: int = 10) -> float | None:
    if not pairs:
        return None
    total = 0.0
    for b in range(bins):
        inside = [(c, ok) for c, ok in pairs if b / bins < c <= (b + 1) / bins or (b == 0 and c == 0)]
        if inside:
            total += len(inside) * abs(sum(c for c, _ in inside) / len(inside) - sum(ok for _, ok in inside) / len(inside))
    return total / len(pairs)


async def ask_all(gateway: Gateway, table: list[dict], pids: list[int]) -> tuple[list[dict], list[float], float]:
    await gateway.decide(request(table[0]), client="bench")  # warm-up
    before = sum(cpu_seconds(p) for p in pids)
    answers, latencies = [], []
    for row in table:
        started = time.perf_counter()
        decision = await gateway.decide(request(row), client="bench")
        latencies.append((time.perf_counter() - started) * 1000)
        answers.append(recorded(decision))
    return answers, latencies, (sum(cpu_seconds(p) for p in pids) - before) * 1000 / len(table)


def recorded(decision: Decision) -> dict:
    probabilities = decision.probabilities or {}
    return {"status": decision.status, "decision": decision.decision, "confidence": decision.confidence,
            # what the system would have answered at a lower threshold (threshold_sweep)
            "choice": max(probabilities, key=probabilities.__getitem__) if probabilities else None,
            "provider": decision.provider, "stage": decision.stage, "calibration": decision.calibration,
            "abstain_reason": decision.abstain_reason,
            "attempts": [a.provider for a in decision.attempts],
            "error": decision.error.message if decision.error else None}


def summary(table: list[dict], answers: list[dict], latencies: list[float]) -> dict:
    answerable = [i for i, r in enumerate(table) if r["label"] != "abstain"]
    blank = [i for i, r in enumerate(table) if r["label"] == "abstain"]
    decided = [i for i in answerable if answers[i]["status"] == "decided"]
    right = [i for i in decided if answers[i]["decision"] == table[i]["label"]]
    return {
        "rows": len(table), "answerable": len(answerable),
        "coverage": len(decided) / len(answerable) if answerable else None,
        "accuracy": len(right) / len(decided) if decided else None,
        "right_of_all": len(right) / len(answerable) if answerable else None,
        "ece": ece([(answers[i]["confidence"], answers[i]["decision"] == table[i]["label"]) for i in decided]),
        "no_evidence_abstained": (sum(answers[i]["status"] == "abstained" for i in blank) / len(blank)) if blank else None,
        "stage2_share": sum("llama" in a["attempts"] for a in answers) / len(answers),
        "errors": sum(a["status"] == "error" for a in answers),
        "p50_ms": percentile(latencies, 50), "p90_ms": percentile(latencies, 90),
    }


def start_engines(stack: ExitStack) -> tuple[str, str, int, int]:
    """The MiniLM server and llama-server with the judge on free ports, stopped with `stack`:
    their URLs and process ids."""
    minilm_port = free_port()
    minilm_pid = serve(stack, [sys.executable, str(ROOT / "engines" / "systemone" / "serve.py"), "--port", str(minilm_port)],
                       f"http://127.0.0.1:{minilm_port}/health", {"SYSTEMONE_THREADS": "2"})
    judge_url, judge_pid = judge_server(stack)
    return f"http://127.0.0.1:{minilm_port}", judge_url, minilm_pid, judge_pid


def system_gateway(work: Path, name: str, minilm_url: str, judge_url: str, fits: Path | None = None) -> Gateway:
    """The gateway of system `name` (SYSTEMS) over the two engine servers, its files in `work`;
    a cascade skips the judge for the kinds the stack's config says (deploy/config.toml).
    `fits`: a calibration file put in its installation, whose fits win over the shipped ones."""
    provider, cascade, heads = SYSTEMS[name]
    toml = (f'[gateway]\nprovider = "{provider}"\ncascade = {json.dumps(cascade)}\ntimeout_s = 60\n'
            f'cascade_skip_kinds = {json.dumps(SKIPPED if cascade else [])}\n'
            f'[learning]\nenabled = {str(heads).lower()}\n'
            f'[providers.systemone]\nendpoint = "{minilm_url}"\nmax_options = 256\nbatch = true\n'
            f'[providers.llama]\nendpoint = "{judge_url}"\nmax_options = 52\n')
    (work / f"{name}.toml").write_text(toml)
    if fits is not None:
        (work / name).mkdir(parents=True, exist_ok=True)
        (work / name / LOCAL_FITS_NAME).write_text(fits.read_text())
    config = load_config({"SYSTEM1_CONFIG": str(work / f"{name}.toml"), "SYSTEM1_INSTALL_DIR": str(work / name)})
    if config.errors:
        raise RuntimeError(f"{name}: {config.errors}")
    return Gateway(config)


async def run(per_set: int, blind_file: str, fits: Path | None = None) -> dict:
    table = rows(per_set, blind_file)
    results: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "rows": len(table), "blind": blind_file,
                     "systems": {}}
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        minilm_url, judge_url, minilm_pid, judge_pid = start_engines(stack)

        def gateway_for(name: str) -> Gateway:
            return system_gateway(work, name, minilm_url, judge_url, fits)

        readings: dict[int, Reading] = {}
        for name in SYSTEMS:
            gateway = gateway_for(name)
            try:
                answers, latencies, cpu_ms = await ask_all(gateway, table, [minilm_pid, judge_pid])
                if SYSTEMS[name][1]:
                    readings = await read_again(gateway, table)
            finally:
                await gateway.aclose()
            by_set = {}
            for label, keep in (("blind", lambda r: r["set"] == "blind"), ("seed", lambda r: r["set"] == "seed")):
                index = [i for i, r in enumerate(table) if keep(r)]
                by_set[label] = summary([table[i] for i in index], [answers[i] for i in index], [latencies[i] for i in index])
            groups = {}
            for group in dict.fromkeys(r["group"] for r in table):
                index = [i for i, r in enumerate(table) if r["group"] == group]
                groups[group] = summary([table[i] for i in index], [answers[i] for i in index], [latencies[i] for i in index])
            results["systems"][name] = {"sets": by_set, "groups": groups, "engine_cpu_ms": cpu_ms,
                                        "rows": [{"set": r["set"], "label": r["label"], "status": a["status"],
                                                  "choice": a["choice"], "confidence": a["confidence"],
                                                  "calibration": a["calibration"], "abstain_reason": a["abstain_reason"]}
                                                 for r, a in zip(table, answers)]}
            print(f"{name}: blind {by_set['blind']}", flush=True)
        # The rows whose kind, as the cascade asked them, skips the judge (threshold_sweep).
        results["skipped"] = [i for i, row in enumerate(table)
                              if kind_of(DESTRUCTIVE if i in readings else row["question"],
                                         row.get("options") or ["yes", "no"], None, not row.get("options")) in SKIPPED]
        results["read_again"] = {}
        for name in ("minilm+heads", "judge"):
            gateway = gateway_for(name)
            try:
                for i, reading in readings.items():
                    decision = reading.answer(await gateway.decide({**request(table[i]), "question": DESTRUCTIVE},
                                                                   client="bench"))
                    results["read_again"].setdefault(str(i), {})[name] = recorded(decision)
            finally:
                await gateway.aclose()
    return results


async def read_again(gateway: Gateway, table: list[dict]) -> dict[int, Reading]:
    """The rows whose question the cascade `gateway` asked as the destructive-command question
    (`core.rewording`), from the readings it keeps: by row index."""
    async def unasked(state: object, queries: list[Query]) -> None:
        return None  # every wording the cascade met is read by now; one it could not read stays unread

    found = {}
    for i, row in enumerate(table):
        if not row.get("options"):
            query = Query(row["question"], ["yes", "no"], yes_no=True)
            reading = await gateway.rewording.read(row.get("context"), query, unasked)
            if reading is not None:
                found[i] = reading
    return found


SWEEP = (0.6, 0.7, 0.8, 0.9)


def measured(row: dict) -> bool:
    """Whether a recorded answer's confidence speaks of the question: an answer, or an abstention
    for doubt alone (not an error, not one for want of a fit or a text; runs recorded before the
    reason was read as doubt)."""
    return row["status"] != "error" and row.get("abstain_reason") in (None, "threshold")


def sure(row: dict, threshold: float) -> bool:
    """Whether a recorded answer clears `threshold`."""
    return measured(row) and row["choice"] is not None and row["confidence"] is not None \
        and row["confidence"] >= threshold


def unsure(row: dict, threshold: float) -> bool:
    """Whether a recorded answer falls short of `threshold` for doubt alone: what makes an answer
    it was asked to confirm abstain (`cascade.after_stage`)."""
    return measured(row) and not sure(row, threshold)


def suffix_of(blind_file: str) -> str:
    """What a blind set's result files carry in their names: results{suffix}.json, RESULTS{suffix}.md."""
    return "" if blind_file == "blind.jsonl" else "-" + Path(blind_file).stem


def cascade_picks(results: dict, index: list[int], threshold: float, skipped: set[int],
                  stands: bool = False) -> dict[int, str]:
    """The cascade's answer on each row of `index` it answers at `threshold`, worked out from the
    stages' recorded answers: MiniLM's heads where they clear it, else the judge where it does,
    unless the row is one of `skipped` (its kind skips the judge). An answer through a fit for
    questions with no fit of their own is the judge's where the judge is sure, none where it is
    unsure, and MiniLM's otherwise (`cascade.after_stage`; with `stands`, the earlier rule, MiniLM's
    wherever the judge is not sure). In runs recorded before each answer's calibration was, no
    answer reads as borrowed. The cascade's later stage asks
    the judge without heads, as the `judge` system does, and asks a reworded question as it read
    it (`read_again`). Exact as far as the judge repeats itself: asked the same prompt again in
    one server's life, its raw P(yes) moved by 0.01 in 3 of 5 probes (the first ask against later
    ones, which then repeated exactly with other prompts between), and a question's fit that
    sharpens steeply turns that into several hundredths of confidence, across the threshold for
    a row near it."""
    systems = results["systems"]
    first, second = list(systems["minilm+heads"]["rows"]), list(systems["judge"]["rows"])
    for i, again in results.get("read_again", {}).items():
        first[int(i)] = {**first[int(i)], **again["minilm+heads"]}
        second[int(i)] = {**second[int(i)], **again["judge"]}
    firsts = {i: first[i]["choice"] for i in index if sure(first[i], threshold)}
    seconds = {i: second[i]["choice"] for i in index if i not in skipped and sure(second[i], threshold)}
    kept = {i for i in firsts if i in skipped or first[i].get("calibration") not in BORROWED}
    unconfirmed = set() if stands else {i for i in firsts if i not in kept and unsure(second[i], threshold)}
    return {**{i: choice for i, choice in firsts.items() if i not in unconfirmed},
            **{i: choice for i, choice in seconds.items() if i not in kept}}


def threshold_sweep(results: dict, set_name: str) -> dict[str, list[dict]]:
    """Coverage and accuracy on `set_name`'s answerable rows at each threshold in SWEEP, worked
    out from the rows' recorded answers: a system alone answers where its confidence clears the
    threshold, the cascade as `cascade_picks` says (the kinds the run skipped, `skipped`, never
    reach the judge). The 0.6 column is set beside the cascade's own run in the report."""
    systems = results["systems"]
    first, second = systems["minilm+heads"]["rows"], systems["judge"]["rows"]
    skipped = set(results.get("skipped", []))
    index = [i for i, r in enumerate(first) if r["set"] == set_name and r["label"] != "abstain"]
    sweep: dict[str, list[dict]] = {}
    for threshold in SWEEP:
        picks = {"minilm+heads": {i: first[i]["choice"] for i in index if sure(first[i], threshold)},
                 "judge": {i: second[i]["choice"] for i in index if sure(second[i], threshold)},
                 "cascade": cascade_picks(results, index, threshold, skipped),
                 "cascade, an unconfirmed borrowed answer standing": cascade_picks(results, index, threshold, skipped,
                                                                                   stands=True)}
        for name, answered in picks.items():
            right = sum(choice == first[i]["label"] for i, choice in answered.items())
            sweep.setdefault(name, []).append({"threshold": threshold, "coverage": len(answered) / len(index),
                                               "accuracy": right / len(answered) if answered else None})
    return sweep


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f} %"


def report(results: dict) -> str:
    lines = ["# The cascade: MiniLM, the judge, and MiniLM then the judge", "",
             f"`make bench-cascade` on {results['machine']}, {results['rows']} rows (blind: "
             f"`{results.get('blind', 'blind.jsonl')}`), one decision at a time, the "
             "shipped fits and heads, threshold 0.6. The blind rows were written apart from every training row and "
             "never fitted or tuned on; the seed rows are samples of the sets the fits were made from.", ""]
    for set_name in ("blind", "seed"):
        lines += [f"## {set_name} rows", "",
                  "| system | coverage | accuracy of answers | right of all | ECE | no-evidence abstained | reached stage 2 "
                  "| p50 | p90 | engine CPU / decision |", "|---|---|---|---|---|---|---|---|---|---|"]
        for name, system in results["systems"].items():
            s = system["sets"][set_name]
            calibration_error = "–" if s["ece"] is None else f"{s['ece']:.3f}"
            lines.append(f"| {name} | {pct(s['coverage'])} | {pct(s['accuracy'])} | {pct(s['right_of_all'])} | "
                         f"{calibration_error} | "
                         f"{pct(s['no_evidence_abstained'])} | {pct(s['stage2_share'])} | {s['p50_ms']:.0f} ms | "
                         f"{s['p90_ms']:.0f} ms | {system['engine_cpu_ms']:.0f} ms |")
        lines.append("")
    if all("rows" in system for system in results["systems"].values()):
        lines += ["## blind rows at higher thresholds (coverage / accuracy of answers)", "",
                  "Worked out from each row's recorded answers (`threshold_sweep`); the shipped threshold is 0.6, and "
                  "its cascade column should match the cascade's own run above, up to the few rows the judge answers "
                  "differently from one run to the next. Where no column reaches 70 % at 90 %, no threshold makes "
                  "these engines meet the target.", "",
                  "| system | " + " | ".join(str(t) for t in SWEEP) + " |", "|---|" + "---|" * len(SWEEP)]
        for name, points in threshold_sweep(results, "blind").items():
            lines.append(f"| {name} | " + " | ".join(f"{pct(p['coverage'])} / {pct(p['accuracy'])}" for p in points) + " |")
        lines.append("")
    lines += ["## by group (coverage / accuracy of answers)", "",
              "| group | " + " | ".join(results["systems"]) + " |", "|---|" + "---|" * len(results["systems"])]
    groups = next(iter(results["systems"].values()))["groups"]
    for group in groups:
        cells = []
        for system in results["systems"].values():
            g = system["groups"][group]
            cells.append(f"abstained {pct(g['no_evidence_abstained'])}" if g["answerable"] == 0
                         else f"{pct(g['coverage'])} / {pct(g['accuracy'])}")
        lines.append(f"| {group} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    colours = dict(zip(results["systems"], ("tab:blue", "tab:green", "tab:purple")))
    for name, system in results["systems"].items():
        for set_name, marker in (("blind", "o"), ("seed", "s")):
            s = system["sets"][set_name]
            if s["coverage"] is not None and s["accuracy"] is not None:
                ax.scatter(s["coverage"], s["accuracy"], marker=marker, s=60, color=colours[name],
                           label=f"{name} ({set_name})")
    if all("rows" in system for system in results["systems"].values()):
        for name, points in threshold_sweep(results, "blind").items():
            shown = [p for p in points if p["accuracy"] is not None]
            ax.plot([p["coverage"] for p in shown], [p["accuracy"] for p in shown], lw=0.8, alpha=0.6,
                    color=colours.get(name, "tab:grey"), label=f"{name} (blind), threshold {SWEEP[0]}–{SWEEP[-1]}")
    ax.axhline(0.9, color="grey", lw=0.8, ls="--")
    ax.axvline(0.7, color="grey", lw=0.8, ls="--")
    ax.set_xlabel("coverage (rows answered)")
    ax.set_ylabel("accuracy of the answers")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0.3, 1.02)
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title("threshold 0.6 (marks) and higher (lines); dashed: the targets (70 % at 90 %)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-set", type=int, default=40)
    parser.add_argument("--blind", default="blind.jsonl", help="the blind set beside this file (blind2.jsonl, "
                        "blind3.jsonl … blind5.jsonl: each written after the ones before were measured); results "
                        "get its name")
    parser.add_argument("--fits", type=Path, help="a calibration file to use instead of the shipped fits (an "
                        "earlier version, to compare on the same rows)")
    parser.add_argument("--label", default="", help="added to the result files' names (with --fits)")
    args = parser.parse_args()
    for needed in (LLAMA / "bin" / "llama-server", JUDGE):
        if not needed.exists():
            sys.exit(f"{needed} is missing: make llama-server judge-model")
    results = asyncio.run(run(args.per_set, args.blind, args.fits))
    suffix = suffix_of(args.blind) + (f"-{args.label}" if args.label else "")
    (HERE / f"results{suffix}.json").write_text(json.dumps(results, indent=1) + "\n")
    (HERE / f"RESULTS{suffix}.md").write_text(report(results))
    plot(results, HERE / f"cascade{suffix}.png")
    print(f"wrote {HERE / f'RESULTS{suffix}.md'}")


if __name__ == "__main__":
    main()
