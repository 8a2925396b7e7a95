"""The destructive-command question read by the judge's hidden state instead of its answer.

    .venv/bin/python bench/heads/probe.py   (needs make llama-server judge-model; ~15 min the first time)

The 712 destructive-command training rows, each put to the judge as a chat turn with the
question (bench/judge_states.py) and pooled two ways; a head is fitted on each as `system1
learn` fits one (`held_out`: 5 grouped folds, 3 splits), beside the shipped form (MiniLM's
vector with the wording and the command traits). Then, per split, the rows the shipped form is
unsure of (top P below 0.6, the cascade's zone): how the head on the judge's state answers
them against the judge's own answer (asked through the llama adapter, both option orders, its
log-odds fitted on the other folds), and the cascade each makes. No blind row is read. Writes
PROBE.md beside this file.
"""

from __future__ import annotations

import asyncio
import math
import sys
from contextlib import ExitStack
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(HERE.parent), str(ROOT / "engines" / "systemone"), str(ROOT / "services" / "gateway")]

from embedders import encoded, judged  # noqa: E402
from judge_states import States, unit  # noqa: E402
from local_engines import judge_server  # noqa: E402
from system1.core import lexical  # noqa: E402
from system1.core.rewording import DESTRUCTIVE  # noqa: E402
from system1.offline.learning import Example, held_out  # noqa: E402
from system1.providers.base import Query  # noqa: E402
from system1.providers.llama import LlamaOptions, LlamaProvider, reading  # noqa: E402
from systemone_engine.backends import MiniLM  # noqa: E402
from traits import rows_of  # noqa: E402

THRESHOLD = 0.6
SPLITS = 3


def p_yes(rows: list[dict], vectors: np.ndarray, wording: bool, seed: int) -> np.ndarray:
    examples = [Example("destructive", ("yes", "no"), r["label"], [float(x) for x in v], {"yes": 0.5, "no": 0.5},
                        "probe", "probe", False, (r.get("meta") or {}).get("area"), lexical.features(r["context"]))
                for r, v in zip(rows, vectors)]
    return np.array([p["yes"] for p in held_out(examples, 5, seed=seed, wording=wording)[0]])


def answered_right(p: np.ndarray, yes: np.ndarray) -> tuple[float, float]:
    sure = np.maximum(p, 1 - p) >= THRESHOLD
    return float(sure.mean()), float(((p >= 0.5) == yes)[sure].mean())


async def judge_answers(url: str, rows: list[dict]) -> list[float]:
    provider = LlamaProvider(LlamaOptions(endpoint=url))
    question = Query(DESTRUCTIVE, ["yes", "no"], yes_no=True)
    try:
        return [(await provider.decide(r["context"], question, 120)).probabilities["yes"] for r in rows]
    finally:
        await provider.aclose()


def main() -> None:
    rows = rows_of(ROOT / "calibration" / "yes-no-seed.jsonl")
    yes = np.array([r["label"] == "yes" for r in rows])
    encoder = MiniLM().encoder
    minilm = encoded([judged(r)[0] for r in rows],
                     lambda t: np.concatenate([encoder.encode(t[i:i + 32]) for i in range(0, len(t), 32)]))
    with ExitStack() as stack:
        question = Query(DESTRUCTIVE, ["yes", "no"], yes_no=True)
        mean, last = States(stack, HERE.parent / ".judge-states" / "destructive.npz").of(
            [reading(LlamaOptions(), r["context"], question) for r in rows], "destructive")
    forms = {"MiniLM": (minilm, False), "MiniLM + wording and traits (shipped)": (minilm, True),
             "judge, mean of tokens": (unit(mean), False), "judge, last token": (unit(last), False),
             "judge, last token + wording and traits": (unit(last), True),
             "judge, mean and last": (np.hstack([unit(mean), unit(last)]), False)}
    held = {name: [p_yes(rows, x, wording, seed) for seed in range(SPLITS)] for name, (x, wording) in forms.items()}
    lines = ["# The destructive-command question on the judge's hidden state (training rows, held out)", "",
             f"`bench/heads/probe.py`: the {len(rows)} training rows, grouped folds, means of {SPLITS} splits. "
             "No blind row is read.", "", "| head | accuracy | answered / right at 0.6 |", "|---|---|---|"]
    for name, ps in held.items():
        accuracy = np.mean([((p >= 0.5) == yes).mean() for p in ps])
        covered, right = np.mean([answered_right(p, yes) for p in ps], axis=0)
        lines.append(f"| {name} | {accuracy:.1%} | {covered:.0%} / {right:.1%} |")
    shipped, state = held["MiniLM + wording and traits (shipped)"], held["judge, last token"]
    zones = [np.maximum(p, 1 - p) < THRESHOLD for p in shipped]
    asked = sorted(set(np.flatnonzero(np.any(zones, axis=0)).tolist()))
    with ExitStack() as stack:
        url, _ = judge_server(stack)
        answers = dict(zip(asked, asyncio.run(judge_answers(url, [rows[i] for i in asked]))))
    lines += ["", "Where the shipped head is unsure (its top P below 0.6), per split: right in the zone, and the "
              "cascade over all rows (answered / right) with each second stage. The judge's answer is its "
              "log-odds fitted on the other folds.", "",
              "| split | rows in the zone | shipped head | judge's answer | head on the judge's state | cascade with "
              "the judge's answer | cascade with the head on its state |", "|---|---|---|---|---|---|---|"]
    for seed, (first, probe, zone) in enumerate(zip(shipped, state, zones)):
        index = np.flatnonzero(zone)
        odds = np.zeros((len(rows), 1))
        odds[index, 0] = [math.log(answers[i] / (1 - answers[i])) for i in index]
        # the judge's fit: its log-odds as the only feature, the zone's rows held out by group
        zone_rows = [rows[i] for i in index]
        fitted = np.zeros(len(rows))
        fitted[index] = p_yes(zone_rows, odds[index], False, seed)
        cells = []
        for second in (fitted, probe):
            final = np.where(zone, second, first)
            answered = np.where(zone, np.maximum(second, 1 - second) >= THRESHOLD, True)
            cells.append(f"{answered.mean():.1%} / {((final >= 0.5) == yes)[answered].mean():.1%}")
        right = [f"{((p[index] >= 0.5) == yes[index]).mean():.0%}" for p in (first, fitted, probe)]
        lines.append(f"| {seed} | {len(index)} | {' | '.join(right)} | {' | '.join(cells)} |")
    (HERE / "PROBE.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
