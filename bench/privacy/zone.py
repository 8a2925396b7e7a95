"""What the judge adds where the first stage is unsure of the private question, on training rows.

    .venv/bin/python bench/privacy/zone.py [--private N] [--ordinary M]   (about 30 minutes)

Under `local_only` a prompt the first stage (the e5 `router-private` head) does not clear, and
the pre-check finds nothing in, is asked of the judge, which must then be sure it is safe. This
takes the router-private training rows in that zone (held-out P(private) above the default
`max_leave_probability`, heldout.py), draws N private and M ordinary ones (seed 7), and asks the
judge (Qwen2.5-Coder-1.5B in llama-server, through the llama adapter, both option orders) the
router's private question and one narrower wording. It reports, in the zone, how well each ranks
the rows (AUROC of the raw answer), and what a logistic fit of the first stage's log-odds with
the judge's would clear at the bar (5 folds, whole groups held out): whether the judge, asked
there, carries anything the first stage does not. No blind row is read. Writes ZONE.md and
zone.json beside this file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
from contextlib import ExitStack

from heldout import FOLDS, HERE, HeldOut, held_out_rows

sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.model_selection import GroupKFold, cross_val_predict  # noqa: E402

from local_engines import judge_server  # noqa: E402
from system1.core.router_config import DecisionSettings, RouterSettings  # noqa: E402
from system1.offline.fitting import auroc  # noqa: E402
from system1.providers.base import Query  # noqa: E402
from system1.providers.llama import LlamaOptions, LlamaProvider  # noqa: E402
from system1.router.signals import PRIVATE_QUESTION, decision_state  # noqa: E402

QUESTIONS = {
    "router's question": PRIVATE_QUESTION,
    "narrower wording": "Does this text reveal something about a specific real person or company that they "
                        "would not want shared outside?",
}


async def judge(url: str, rows: list[HeldOut]) -> list[dict[str, float]]:
    """Each row's raw P(yes) (both orders' mean, as the adapter answers) for each question."""
    provider = LlamaProvider(LlamaOptions(endpoint=url))
    chars = DecisionSettings().chars
    queries = [Query(q, ["yes", "no"], yes_no=True) for q in QUESTIONS.values()]
    answers = []
    try:
        for index, r in enumerate(rows):
            replies = await provider.decide_many(decision_state(r.prompt, chars), queries, 120)
            answers.append({name: a.probabilities["yes"] for name, a in zip(QUESTIONS, replies)})
            if index % 25 == 0:
                print(f"{index} of {len(rows)}", flush=True)
    finally:
        await provider.aclose()
    return answers


def logit(p: float) -> float:
    p = min(max(p, 1e-6), 1 - 1e-6)
    return math.log(p / (1 - p))


def stacked(rows: list[HeldOut], features: list[list[float]]) -> list[float]:
    """Held-out P(private) from a logistic fit over `features` (whole groups held out)."""
    labels = [r.private for r in rows]
    fitted = cross_val_predict(LogisticRegression(), np.array(features), labels, groups=[r.row.group for r in rows],
                               cv=GroupKFold(FOLDS), method="predict_proba")
    return [float(p) for p in fitted[:, 1]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--private", type=int, default=80)
    parser.add_argument("--ordinary", type=int, default=120)
    args = parser.parse_args()
    bar = RouterSettings().max_leave_probability
    every = held_out_rows()
    zone = [r for r in every if r.p_private > bar and not r.caught]
    rng = random.Random(7)
    drawn = (rng.sample([r for r in zone if r.private], args.private)
             + rng.sample([r for r in zone if not r.private], args.ordinary))
    with ExitStack() as stack:
        url, _ = judge_server(stack)
        answers = asyncio.run(judge(url, drawn))
    labels = [r.private for r in drawn]
    first = [logit(r.p_private) for r in drawn]
    systems = {"first stage alone, refitted in the zone": stacked(drawn, [[f] for f in first])}
    for name in QUESTIONS:
        systems[f"first stage + judge ({name}), fitted in the zone"] = stacked(
            drawn, [[f, logit(a[name])] for f, a in zip(first, answers)])
    table: dict[str, dict] = {"first stage (held-out P)": {"auroc": auroc([r.p_private for r in drawn], labels)}}
    table |= {f"judge alone ({name}), raw": {"auroc": auroc([a[name] for a in answers], labels)} for name in QUESTIONS}
    for name, p in systems.items():
        table[name] = {"auroc": auroc(p, labels),
                       "ordinary_cleared": sum(1 for q, t in zip(p, labels) if q < bar and not t),
                       "private_leaving": sum(1 for q, t in zip(p, labels) if q < bar and t)}
    n_private, n_ordinary = sum(labels), len(labels) - sum(labels)
    out = {"bar": bar, "zone": {"rows": len(zone), "private": sum(r.private for r in zone)},
           "drawn": {"private": n_private, "ordinary": n_ordinary}, "questions": QUESTIONS, "systems": table,
           "rows": [{"group": r.row.group, "private": r.private, "p_private": r.p_private, **a}
                    for r, a in zip(drawn, answers)]}
    (HERE / "zone.json").write_text(json.dumps(out, indent=1) + "\n")
    lines = ["# What the judge adds where the first stage is unsure (training rows)", "",
             f"`bench/privacy/zone.py`: of the {len(every)} router-private training rows, {len(zone)} are in the zone "
             f"the judge is asked about under `local_only` (held-out first-stage P(private) above {bar:g}, nothing for "
             f"the pre-check), {out['zone']['private']} of them private. Drawn: {n_private} private, {n_ordinary} "
             "ordinary. The judge is asked through the llama adapter (both option orders): "
             + "; ".join(f"{n}: \"{q}\"" for n, q in QUESTIONS.items())
             + f". The fitted rows are logistic fits over log-odds, {FOLDS} folds with whole groups held out; "
             f"\"cleared\" is P(private) below {bar:g}. No blind row is read.", "",
             "| system | AUROC in the zone | ordinary cleared | private that would leave |", "|---|---|---|---|"]
    for name, t in table.items():
        cleared = f"{t['ordinary_cleared']} of {n_ordinary}" if "ordinary_cleared" in t else "–"
        leaving = f"{t['private_leaving']} of {n_private}" if "private_leaving" in t else "–"
        lines.append(f"| {name} | {t['auroc']:.3f} | {cleared} | {leaving} |")
    (HERE / "ZONE.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
