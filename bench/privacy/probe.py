"""The private question's second stage: a head on the judge's reading, stacked on the first stage.

    .venv/bin/python bench/privacy/probe.py [--ship]   (needs make llama-server judge-model; on two
                                                         cores the judge reads about 15 zone rows a
                                                         minute the first time, minutes after)

ZONE.md found the judge's answer adds nothing where the first stage is unsure (AUROC 0.71-0.80;
fitted with the first stage, 34 of 120 ordinary rows cleared against 32 without it). A model
holds more than its first answer token says. This takes the router-private training rows in
that zone (held-out first-stage P(private) above the bar, nothing for the pre-check;
heldout.py), reads the judge's last hidden state for each as the llama adapter's `embed` asks
it (bench/judge_states.py), and measures, held out with whole groups (5 folds): the first stage
alone refitted in the zone, a head on the judge's reading alone, and the two stacked as
`offline/stacking.py` fits them (the form the gateway serves, `core/reading.py`). "Cleared":
P(private) below the bar. No blind row is read. Writes PROBE.md and probe.json beside this file;
with --ship, also the stacked head fitted on every zone row into core/heads.json (embedder
`llama`, the judge's model), replacing the one there.
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import ExitStack

from heldout import FOLDS, HERE, ROOT, held_out_rows

sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from judge_states import States, unit  # noqa: E402
from system1.core.heads import SHIPPED_HEADS  # noqa: E402
from system1.core.router_config import PRIVATE_KIND, DecisionSettings, RouterSettings  # noqa: E402
from system1.offline.fitting import auroc  # noqa: E402
from system1.offline.learn import merge  # noqa: E402
from system1.offline.learning import grouped_folds, logistic, others  # noqa: E402
from system1.offline.stacking import held_out_stacked, log_odds, stacked_head  # noqa: E402
from system1.providers.base import Query  # noqa: E402
from system1.providers.llama import LlamaOptions, reading  # noqa: E402
from system1.router.signals import PRIVATE_QUESTION, decision_state  # noqa: E402

JUDGE_MODEL = "qwen2.5-coder-1.5b-decision"  # the stack's --alias


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ship", action="store_true", help="write the stacked head into core/heads.json")
    args = parser.parse_args()
    bar = RouterSettings().max_leave_probability
    every = held_out_rows()
    zone = [r for r in every if r.p_private > bar and not r.caught]
    chars, question = DecisionSettings().chars, Query(PRIVATE_QUESTION, ["yes", "no"], yes_no=True)
    prompts = [reading(LlamaOptions(), decision_state(r.prompt, chars), question) for r in zone]
    with ExitStack() as stack:
        _, last = States(stack, HERE.parent / ".judge-states" / "privacy-zone-last.npz", mean=False).of(
            prompts, "privacy zone")
    vectors = unit(last)
    labels = [r.row.label for r in zone]
    private = np.array([r.private for r in zone])
    groups = [r.row.group for r in zone]
    first = [r.p_private for r in zone]
    y = private.astype(int)
    systems = {
        "first stage alone, refitted in the zone": held_out(
            labels, groups, lambda train, test: LogisticRegression().fit(
                log_odds(first)[train, None], y[train]).predict_proba(log_odds(first)[test, None])[:, 1]),
        "head on the judge's reading alone": held_out(
            labels, groups, lambda train, test: logistic(vectors[train], y[train], PRIVATE_KIND).predict_proba(
                vectors[test])[:, 1]),
        "first stage + head on the judge's reading, stacked (served)": np.array(
            held_out_stacked(PRIVATE_KIND, ("yes", "no"), vectors, first, labels, groups, FOLDS)),
    }
    table = {name: {"auroc": auroc(list(p), list(private)), "ordinary_cleared": int(sum((p < bar) & ~private)),
                    "private_leaving": int(sum((p < bar) & private))} for name, p in systems.items()}
    n_private, n_ordinary = int(private.sum()), int((~private).sum())
    (HERE / "probe.json").write_text(json.dumps({"bar": bar, "zone": [n_private, n_ordinary], "systems": table},
                                                indent=1) + "\n")
    lines = ["# The private question's second stage: a head on the judge's reading (training rows, held out)", "",
             f"`bench/privacy/probe.py`: of the {len(every)} router-private training rows, {len(zone)} are in the zone "
             f"the judge is asked about under `local_only` ({n_private} private, {n_ordinary} ordinary). Held out: "
             f"{FOLDS} folds, whole groups. \"Cleared\": P(private) below {bar:g}. No blind row is read.", "",
             "| system | AUROC in the zone | ordinary cleared | private that would leave |", "|---|---|---|---|"]
    lines += [f"| {name} | {t['auroc']:.3f} | {t['ordinary_cleared']} of {n_ordinary} | "
              f"{t['private_leaving']} of {n_private} |" for name, t in table.items()]
    (HERE / "PROBE.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if args.ship:
        head = stacked_head(PRIVATE_KIND, ("yes", "no"), vectors, first, labels, groups, "llama", JUDGE_MODEL, FOLDS)
        merge(SHIPPED_HEADS, [head])
        print(f"wrote {head.describe()} into {SHIPPED_HEADS.relative_to(ROOT)}")


def held_out(labels: list[str], groups: list[str], fit_predict) -> np.ndarray:
    """Each row's P(private) from `fit_predict(train, test)` on the grouped folds stacking.py uses."""
    out = np.zeros(len(labels))
    for fold in grouped_folds(labels, groups, FOLDS):
        out[fold] = fit_predict(others(len(labels), fold), fold)
    return out


if __name__ == "__main__":
    main()
