"""What `[router] max_leave_probability` trades, measured on the training rows alone.

    .venv/bin/python bench/privacy/bars.py   (the last step of make bench-privacy; about 10 CPU-minutes)

The router-private training rows, each with the first stage's P(private) from a fit that never
saw its group (heldout.py). For each bar: the private rows that would leave (P(private)
at most the bar and nothing for the pre-check to find) and the ordinary rows the first stage
alone lets leave. No blind row is read: this is how a bar is chosen without spending a blind set.
Writes BARS.md and bars.json beside this file.
"""

from __future__ import annotations

import json

from heldout import FOLDS, HERE, SEEDS, held_out_rows
from system1.offline.fitting import auroc

BARS = (0.01, 0.02, 0.03, 0.05, 0.1)


def main() -> None:
    rows = held_out_rows()
    p_private = [r.p_private for r in rows]
    private = [r.private for r in rows]
    caught = [r.caught for r in rows]
    n_private, n_ordinary = sum(private), len(private) - sum(private)
    table = []
    for bar in BARS:
        cleared = [p <= bar for p in p_private]
        table.append({"bar": bar,
                      "private_leaving": sum(c and t and not k for c, t, k in zip(cleared, private, caught)),
                      "ordinary_cleared": sum(c and not t and not k for c, t, k in zip(cleared, private, caught))})
    out = {"rows": len(rows), "private": n_private, "ordinary": n_ordinary, "folds": FOLDS,
           "auroc": auroc(p_private, private), "bars": table}
    (HERE / "bars.json").write_text(json.dumps(out, indent=1) + "\n")
    lines = ["# max_leave_probability on the training rows, held out", "",
             f"`bench/privacy/bars.py`: the {len(rows)} router-private rows of {' and '.join(SEEDS)} "
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
