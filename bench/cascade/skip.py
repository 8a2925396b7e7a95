"""Whether the destructive-command question should skip the judge, by the rule in SKIP.md.

    .venv/bin/python bench/cascade/skip.py      (writes skip.json and SKIP.md's result beside this file)

1. The destructive-command head, held out: fitted as `system1 learn` fits it (bench/heads/traits.py,
   with the command traits) on four of five grouped folds of its 712 training rows, asked about
   the fifth. The rows whose top probability is below 0.6 are the ones the cascade passes on.
2. The judge asked about each of those rows as the cascade asks it (run.py's `judge` system:
   llama-server with Qwen2.5-Coder-1.5B, its shipped fits, threshold 0.6).
3. The rule: the kind skips the judge if the judge is right on fewer than 90 % of those it answers.
4. The kind's blind-set figures with and without the skip, worked out from the stages' answers
   recorded by the cascade runs (results-blind*.json, `run.cascade_picks`): a skipped kind answers
   with stage 1 where it is sure, else abstains. Reported beside the decision; they do not make it.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(HERE.parent / "heads"), str(ROOT / "engines" / "systemone")]

from run import DESTRUCTIVE, cascade_picks, request, start_engines, suffix_of, system_gateway  # noqa: E402
from system1.offline.learning import folds_of  # noqa: E402
from traits import BLIND, THRESHOLD, embedder, examples_of, fitted, rows_of  # noqa: E402

BAR = 0.9


def held_out(training: list[dict]) -> list[dict[str, float]]:
    """Each training row's probabilities from a head fitted on the folds without it."""
    vectors = embedder()(training)
    examples = examples_of(training, vectors)
    probabilities: list[dict[str, float]] = [{} for _ in training]
    for fold in folds_of(examples, 5):
        inside = set(fold)
        head = fitted([e for i, e in enumerate(examples) if i not in inside]).fitted
        if head is None:
            raise RuntimeError("the head lost to the engine on a fold: nothing to pass on from")
        for i in fold:
            probabilities[i] = head.probabilities([float(x) for x in vectors[i]], training[i]["context"])
    return probabilities


async def judged(rows: list[dict]) -> list[dict]:
    """The judge's decision on each row, asked as the cascade's second stage asks it."""
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        minilm_url, judge_url, _, _ = start_engines(stack)
        gateway = system_gateway(Path(tmp), "judge", minilm_url, judge_url)
        try:
            answers = []
            for row in rows:
                decision = await gateway.decide(request(row), client="bench")
                answers.append({"status": decision.status, "decision": decision.decision,
                                "confidence": decision.confidence})
            return answers
        finally:
            await gateway.aclose()


def blind_figures(results: dict, skip: bool) -> dict[str, tuple[int, int, int]]:
    """Rows, answered and right, for the destructive-command rows (the question as the head asks
    it, or reworded and read as it) and for all blind rows of one recorded cascade run, the
    cascade's answers worked out from its stages' (`cascade_picks`) with or without the skip."""
    rows = results["systems"]["minilm+heads"]["rows"]
    blind = [i for i, r in enumerate(rows) if r["set"] == "blind" and r["label"] != "abstain"]
    asked = [json.loads(line) for line in (HERE / results.get("blind", "blind.jsonl")).read_text().splitlines() if line]
    again = {int(i) for i in results.get("read_again", {})}
    destructive = [i for i in blind if asked[i]["question"] == DESTRUCTIVE]
    reworded = [i for i in blind if i in again]
    picks = cascade_picks(results, blind, THRESHOLD, set(destructive + reworded) if skip else set())
    return {name: (len(index), sum(i in picks for i in index), sum(picks.get(i) == rows[i]["label"] for i in index))
            for name, index in (("destructive", destructive), ("reworded", reworded), ("all", blind))}


def cell(figures: tuple[int, int, int]) -> str:
    rows, answered, right = figures
    return f"{answered / rows:.0%} / {right / max(answered, 1):.1%} ({right} of {answered}, {rows} rows)"


def main() -> None:
    training = rows_of(ROOT / "calibration" / "yes-no-seed.jsonl")
    probabilities = held_out(training)
    tops = [max(p, key=p.get) for p in probabilities]
    passed = [i for i, (p, top) in enumerate(zip(probabilities, tops)) if p[top] < THRESHOLD]
    sure_rows = sorted(set(range(len(training))) - set(passed))
    head_right = sum(tops[i] == training[i]["label"] for i in sure_rows)
    answers = asyncio.run(judged([training[i] for i in passed]))
    decided = [(i, a) for i, a in zip(passed, answers) if a["status"] == "decided"]
    judge_right = sum(a["decision"] == training[i]["label"] for i, a in decided)
    rate = judge_right / len(decided) if decided else 0.0
    skip = rate < BAR
    recorded = {str(n): json.loads((HERE / f"results{suffix_of(name)}.json").read_text())
                for n, name in enumerate(BLIND, start=1)}
    blind = {n: {str(s): blind_figures(results, s) for s in (False, True)} for n, results in recorded.items()}
    (HERE / "skip.json").write_text(json.dumps({
        "rows": len(training), "head_sure": len(sure_rows), "head_right": head_right, "passed": len(passed),
        "judge_answered": len(decided), "judge_right": judge_right, "skip": skip,
        "judge": [{"row": training[i]["meta"]["id"], "label": training[i]["label"], **a} for i, a in zip(passed, answers)],
        "blind": blind}, indent=1) + "\n")
    lines = ["## Result", "",
             "`.venv/bin/python bench/cascade/skip.py` (skip.json beside this file).", "",
             f"- **The head, held out:** sure (≥ {THRESHOLD}) on {len(sure_rows)} of {len(training)} rows, right on "
             f"{head_right} of them ({head_right / len(sure_rows):.1%}); it passes on {len(passed)}.",
             f"- **The judge on the {len(passed)} passed rows:** answers {len(decided)}, right on {judge_right} "
             f"({rate:.1%}).",
             f"- **Decision:** {'skip the judge for this kind' if skip else 'keep the judge'} "
             f"({rate:.1%} {'<' if skip else '≥'} {BAR:.0%}).", "",
             "The kind's blind rows at 0.6, answered / right, worked out from the stages' answers the cascade runs "
             "recorded (not part of the decision):",
             "", "| set | " + " | ".join(f"{group}: {how}" for group in ("destructive", "reworded", "all blind rows")
                                         for how in ("judge asked", "judge skipped")) + " |", "|---" * 7 + "|"]
    for name, figures in blind.items():
        lines.append(f"| {name} | " + " | ".join(cell(figures[skipped][group]) for group in ("destructive", "reworded", "all")
                                                 for skipped in ("False", "True")) + " |")
    text = (HERE / "SKIP.md").read_text(encoding="utf-8")
    (HERE / "SKIP.md").write_text(text.split("## Result")[0] + "\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
