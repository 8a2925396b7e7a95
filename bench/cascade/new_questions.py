"""The blind set's new questions split into yes/no and choice questions, per system, from the
rows a `run.py` results file recorded: what WEIGHTING.md's ship rule reads.

    .venv/bin/python bench/cascade/new_questions.py results-blind9.json [results-blind9-LABEL.json …]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import ece, rows  # noqa: E402


def split(results: dict) -> dict[str, dict[str, str]]:
    """For each system, 'yes/no' and 'choice': answered / rows, right / answered and ECE of the
    blind set's `unseen` rows."""
    blind = rows(0, results["blind"])
    table = {}
    for name, system in results["systems"].items():
        table[name] = {}
        for kind in ("yes/no", "choice"):
            asked = [(row, answer) for row, answer in zip(blind, system["rows"])
                     if row["group"] == "unseen" and (row["options"] is None) == (kind == "yes/no")]
            answered = [(row, a) for row, a in asked if a["status"] == "decided"]
            right = sum(a["choice"] == row["label"] for row, a in answered)
            calibration = ece([(a["confidence"], a["choice"] == row["label"]) for row, a in answered])
            table[name][kind] = (f"{len(answered)} / {len(asked)} answered, {right} right"
                                 + (f" ({right / len(answered):.0%}), ECE {calibration:.3f}" if answered else ""))
    return table


def main() -> None:
    for name in sys.argv[1:]:
        print(name)
        for system, kinds in split(json.loads((HERE / name).read_text())).items():
            for kind, line in kinds.items():
                print(f"  {system:13} {kind:7} {line}")


if __name__ == "__main__":
    main()
