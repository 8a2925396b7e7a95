"""The router-private training rows, each with the first stage's held-out P(private).

Shared by bars.py and zone.py. The router-private rows of calibration/router-seed.jsonl and
calibration/privacy-seed.jsonl are embedded as the first stage embeds them (serve.py's e5, the
judged text as the router cuts it) and judged by a head and a temperature fitted, as `system1
learn` fits them (on the wording too where the shipped head reads it), on the other folds (5 folds, whole groups held out). No blind row is read.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT / "engines" / "systemone"), str(ROOT / "services" / "gateway")]

from system1.core import lexical  # noqa: E402
from system1.core.heads import Heads  # noqa: E402
from system1.core.router_config import PRIVATE_KIND, DecisionSettings  # noqa: E402
from system1.offline.calibrate import Labelled, load  # noqa: E402
from system1.offline.learning import Example, held_out  # noqa: E402
from system1.router.precheck import findings_in  # noqa: E402
from system1.router.signals import decision_state  # noqa: E402
from systemone_engine.backends import E5  # noqa: E402

SEEDS = ("router-seed.jsonl", "privacy-seed.jsonl")
FOLDS = 5


@dataclass(frozen=True)
class HeldOut:
    row: Labelled
    #: The first stage's P(private) from a fit that never saw this row's group.
    p_private: float
    #: Whether the pre-check finds something (then no decision is needed to keep it here).
    caught: bool

    @property
    def prompt(self) -> str:
        return self.row.context["prompt"]

    @property
    def private(self) -> bool:
        return self.row.label == "yes"


def shipped_reads_wording() -> bool:
    """Whether the shipped e5 head reads the wording as well as the embedding (then so do the
    held-out fits here)."""
    heads = Heads.load(None).candidates(PRIVATE_KIND, "systemone", ["yes", "no"])
    return any(h.model == E5.model and h.lexical for h in heads)


def held_out_rows() -> list[HeldOut]:
    labelled = [row for name in SEEDS for row in load(ROOT / "calibration" / name) if row.kind == PRIVATE_KIND]
    prompts = [row.context["prompt"] for row in labelled]
    chars = DecisionSettings().chars
    states = [decision_state(prompt, chars) for prompt in prompts]
    vectors = E5().embed("", states, kind="noul")
    examples = [Example(kind=PRIVATE_KIND, options=("yes", "no"), label=row.label,
                        embedding=[float(v) for v in vector], engine={}, embedder="systemone",
                        model=E5.model, group=row.group, lexical=lexical.features(state))
                for row, vector, state in zip(labelled, vectors, states)]
    probabilities, _ = held_out(examples, FOLDS, wording=shipped_reads_wording())
    return [HeldOut(row, p["yes"], bool(findings_in(prompt, ())))
            for row, prompt, p in zip(labelled, prompts, probabilities)]
