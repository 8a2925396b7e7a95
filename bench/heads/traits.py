"""What the command traits add to the destructive-command head: the head fitted with and without
them, held out on its 712 training rows and asked about the blind sets' commands.

    .venv/bin/python bench/heads/traits.py      (make bench-traits; writes TRAITS.md beside this file)

Both heads are fitted as `system1 learn` fits them (`learn_kind`: grouped folds, 5 folds,
3 splits, the wording kept where it predicts held-out rows better), on MiniLM's vector of each
command as serve.py embeds it for a yes/no question (the state alone); "without" reads the
wording as it was before `core/command_traits.py` (its traits left out). Each head is then asked
about the rows of the `destructive` group of every blind set in bench/cascade/, which no fit
has seen; a row is answered when the head's top probability reaches 0.6.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE), str(ROOT / "engines" / "systemone"), str(ROOT / "services" / "gateway")]

from embedders import encoded, judged  # noqa: E402
from system1.core import lexical  # noqa: E402
from system1.core.rewording import DESTRUCTIVE  # noqa: E402
from system1.offline.learning import Example, learn_kind  # noqa: E402
from systemone_engine.backends import MiniLM  # noqa: E402

BLIND = ["blind.jsonl", "blind2.jsonl", "blind3.jsonl", "blind4.jsonl", "blind5.jsonl"]
THRESHOLD = 0.6


def rows_of(path: Path, group: str | None = None) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if r["question"] == DESTRUCTIVE and (group is None or r.get("group") == group)]


def examples_of(training: list[dict], vectors: np.ndarray) -> list[Example]:
    return [Example("destructive", ("yes", "no"), r["label"], [float(x) for x in v], {"yes": 0.5, "no": 0.5},
                    "systemone", "all-MiniLM-L6-v2", False, (r.get("meta") or {}).get("area"),
                    lexical.features(r["context"])) for r, v in zip(training, vectors)]


def fitted(examples: list[Example]):
    return learn_kind(examples, 5, THRESHOLD, curve=False, repeats=3)


def embedder() -> Callable[[list[dict]], np.ndarray]:
    """MiniLM's vectors of rows' commands, as serve.py embeds them (bench/heads/embedders.py)."""
    encoder = MiniLM().encoder

    def embedded(rows: list[dict]) -> np.ndarray:
        return encoded([judged(r)[0] for r in rows],
                       lambda texts: np.concatenate([encoder.encode(texts[i:i + 32]) for i in range(0, len(texts), 32)]))

    return embedded


def asked(head, rows: list[dict], vectors: np.ndarray) -> tuple[int, int, int]:
    """Rows, rows answered at the threshold, and right answers."""
    answered = right = 0
    for row, vector in zip(rows, vectors):
        p = head.probabilities([float(x) for x in vector], row["context"])
        top = max(p, key=p.get)
        if p[top] >= THRESHOLD:
            answered += 1
            right += top == row["label"]
    return len(rows), answered, right


def main() -> None:
    embedded = embedder()
    training = rows_of(ROOT / "calibration" / "yes-no-seed.jsonl")
    blind = {name: rows_of(ROOT / "bench" / "cascade" / name, "destructive") for name in BLIND}
    vectors = embedded(training)
    blind_vectors = {name: embedded(rows) for name, rows in blind.items()}
    lines = ["# The destructive-command head with and without the command traits", "",
             "`bench/heads/traits.py`: the head fitted on the 712 training rows as `system1 learn` fits it, with the "
             "traits of `core/command_traits.py` beside the wording and without them. Held out: grouped folds, means "
             f"of 3 splits. Blind: the `destructive` rows of each blind set (never fitted on), answered at "
             f"{THRESHOLD}.",
             "", "| head | held out: accuracy | held out: answered / right at 0.6 | ECE at 0.6 | "
             + " | ".join(f"{name}: answered / right" for name in BLIND) + " |", "|---" * (4 + len(BLIND)) + "|"]
    for label, traits in (("without traits", False), ("with traits", True)):
        with mock.patch.object(lexical, "traits", lexical.traits if traits else lambda command: set()):
            result = fitted(examples_of(training, vectors))
            cells = []
            for name, rows in blind.items():
                n, answered, right = asked(result.fitted, rows, blind_vectors[name])
                share, rate = answered / n, right / max(answered, 1)
                cells.append(f"{share:.0%} / {rate:.1%} ({right} of {answered}, {n} rows)")
        at = result.head["at_threshold"]
        lines.append(f"| {label} | {result.head['accuracy']:.1%} | {at['coverage']:.0%} / {at['accuracy']:.1%} | "
                     f"{at['ece']:.3f} | " + " | ".join(cells) + " |")
    (HERE / "TRAITS.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
