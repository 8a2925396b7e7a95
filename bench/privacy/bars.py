"""What `[router] max_leave_probability` trades, measured on the training rows alone.

    .venv/bin/python bench/privacy/bars.py   (the last step of make bench-privacy; about 10 CPU-minutes)

The router-private rows of calibration/router-seed.jsonl and calibration/privacy-seed.jsonl are
embedded as the first stage embeds them (serve.py's e5, the judged text as the router cuts it)
and judged by a head and a temperature fitted, as `system1 learn` fits them, on the other folds
(5 folds, whole groups held out). For each bar: the private rows that would leave (P(private)
at most the bar and nothing for the pre-check to find) and the ordinary rows the first stage
alone lets leave. No blind row is read: this is how a bar is chosen without spending a blind set.
Writes BARS.md and bars.json beside this file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT / "engines" / "systemone"), str(ROOT / "services" / "gateway")]

from system1.core.router_config import PRIVATE_KIND, DecisionSettings  # noqa: E402
from system1.offline.calibrate import load  # noqa: E402
from system1.offline.fitting import auroc  # noqa: E402
from system1.offline.learning import Example, held_out  # noqa: E402
from system1.router.precheck import findings_in  # noqa: E402
from system1.router.signals import decision_state  # noqa: E402
from systemone_engine.backends import E5  # noqa: E402

SEEDS = ("router-seed.jsonl", "privacy-seed.jsonl")
BARS = (0.01, 0.02, 0.03, 0.05, 0.1)
FOLDS = 5


def main() -> None:
    labelled = [row for name in SEEDS for row in load(ROOT / "calibration" / name) if row.kind == PRIVATE_KIND]
    prompts = [row.context["prompt"] for row in labelled]
    chars = DecisionSettings().chars
    vectors = E5().embed("", [decision_state(prompt, chars) for prompt in prompts], kind="noul")
    examples = [Example(kind=PRIVATE_KIND, options=("yes", "no"), label=row.label,
                        embedding=[float(v) for v in vector], engine={}, embedder="systemone",
                        model=E5.model, group=row.group)
                for row, vector in zip(labelled, vectors)]
    probabilities, _ = held_out(examples, FOLDS)
    p_private = [p["yes"] for p in probabilities]
    private = [row.label == "yes" for row in labelled]
    caught = [bool(findings_in(prompt, ())) for prompt in prompts]
    n_private, n_ordinary = sum(private), len(private) - sum(private)
    table = []
    for bar in BARS:
        cleared = [p <= bar for p in p_private]
        table.append({"bar": bar,
                      "private_leaving": sum(c and t and not k for c, t, k in zip(cleared, private, caught)),
                      "ordinary_cleared": sum(c and not t and not k for c, t, k in zip(cleared, private, caught))})
    out = {"rows": len(labelled), "private": n_private, "ordinary": n_ordinary, "folds": FOLDS,
           "auroc": auroc(p_private, private), "bars": table}
    (HERE / "bars.json").write_text(json.dumps(out, indent=1) + "\n")
    lines = ["# max_leave_probability on the training rows, held out", "",
             f"`bench/privacy/bars.py`: the {len(labelled)} router-private rows of {' and '.join(SEEDS)} "
             f"({n_private} private), each judged by an e5 head and a temperature fitted on the other folds "
             f"({FOLDS} folds, groups held out whole; AUROC {out['auroc']:.3f}). Leaving: P(private) at most the "
             "bar and nothing for the pre-check to find. No blind row is read.", "",
             "| max_leave_probability | private rows that leave | ordinary rows the first stage lets leave |",
             "|---|---|---|"]
    lines += [f"| {t['bar']:g} | {t['private_leaving']} of {n_private} ({t['private_leaving'] / n_private:.1%}) | "
              f"{t['ordinary_cleared']} of {n_ordinary} ({t['ordinary_cleared'] / n_ordinary:.0%}) |" for t in table]
    (HERE / "BARS.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
