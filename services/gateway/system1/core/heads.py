"""Learned heads: per decision kind, a classifier on the embedding of the judged text.

A head is fitted by `system1 learn` from labelled rows of one kind and written only where its
held-out accuracy beat the raw engine's on the same rows. At decision time, when the request's
kind has a head, the options match and the embedder answers in time, the head's probabilities
(softmax of `weights · x + bias`, over its temperature) replace the engine's; otherwise the
engine's answer stands.

The kind of a request is its `kind` field or, without one, a key that recurs when the same
decision is asked again: the option set (order, case and spacing ignored), or the question for
a yes/no question (see `kind_of`).

Heads file, format version 1: `{"format": "system1-heads", "version": 1, "heads": [...]}`, each
head naming its kind, the embedder (provider and model id: a head for another embedder is
ignored), its options in order, `weights` (one row of `dim` numbers per option), `bias`,
`temperature`, optionally `lexical` (the weights of the wording features of `lexical.py` that
any training row had: bucket index to one weight per option), optionally `earlier` (a later
stage's head, stacked on the stage before: one weight per option on the log-probability the
earlier stage gave it), and for people `n`, `accuracy` and `engine_accuracy` (held-out). Two files are
read, as for calibration: the installation's own (`<install dir>/heads.json`) over the shipped
one. Serving is a few hundred multiply-adds per option, in plain Python.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from . import lexical
from .stored import VersionedFile, read_all

FORMAT = "system1-heads"
VERSION = 1
SHIPPED_HEADS = Path(__file__).with_name("heads.json")
LOCAL_HEADS_NAME = "heads.json"


def normalised(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def kind_of(question: str, choices: list[str], kind: str | None = None, yes_no: bool = False) -> str:
    """The request's kind: the one it names, else `options:` and its sorted normalised option
    set, else (yes/no) `question:` and its normalised question."""
    if kind:
        return kind
    if yes_no:
        return "question:" + normalised(question)
    return "options:" + "|".join(sorted(normalised(c) for c in choices))


class Head(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    kind: str = Field(min_length=1)
    embedder: str
    model: str
    options: list[str] = Field(min_length=2)
    weights: list[list[float]]
    bias: list[float]
    temperature: float = Field(default=1.0, gt=0.0)
    #: Wording features' weights, by bucket (see `lexical.py`); None: the head reads the embedding alone.
    lexical: dict[int, list[float]] | None = None
    #: For a later stage's head: the weight of the earlier stage's log-probability of each option.
    earlier: list[float] | None = None

    @model_validator(mode="after")
    def _shapes(self) -> Head:
        if len(self.weights) != len(self.options) or len(self.bias) != len(self.options):
            raise ValueError("a head needs one weight row and one bias per option")
        if len({len(row) for row in self.weights}) != 1:
            raise ValueError("every weight row must have the same length")
        for bucket, row in (self.lexical or {}).items():
            if not 0 <= bucket < lexical.DIM or len(row) != len(self.options):
                raise ValueError(f"lexical weights need buckets in [0, {lexical.DIM}) and one weight per option; "
                                 f"bucket {bucket} has {len(row)}")
        if self.earlier is not None and len(self.earlier) != len(self.options):
            raise ValueError("`earlier` needs one weight per option")
        return self

    @property
    def dim(self) -> int:
        return len(self.weights[0])

    def fits(self, choices: list[str]) -> bool:
        """Whether `choices` are this head's options, in any order, case and spacing, as the kind
        itself is keyed (`kind_of`): "read: show a file" is the option "Read: show a file"."""
        return sorted(normalised(o) for o in self.options) == sorted(normalised(c) for c in choices)

    def spelled(self, choices: list[str] | None) -> list[str]:
        """This head's options as `choices` (the request's) spell them; its own without them."""
        spelling = {normalised(c): c for c in choices or ()}
        return [spelling.get(normalised(o), o) for o in self.options]

    def probabilities(self, vector: list[float], context: Any = None, earlier: dict[str, float] | None = None,
                      choices: list[str] | None = None) -> dict[str, float] | None:
        """The head's calibrated probabilities for an embedding (and, for a head that reads the
        wording, the request's context; for a later stage's head, the earlier stage's
        probabilities), by option as `choices` spell them; None when the embedding's size is
        wrong or `earlier` is needed and missing an option."""
        if len(vector) != self.dim:
            return None
        options = self.spelled(choices)
        scores = [sum(w * x for w, x in zip(row, vector)) + b for row, b in zip(self.weights, self.bias)]
        if self.earlier is not None:
            if earlier is None or any(o not in earlier for o in options):
                return None
            scores = [s + w * math.log(min(max(earlier[o], 1e-6), 1.0))
                      for s, w, o in zip(scores, self.earlier, options)]
        if self.lexical:
            for bucket, value in lexical.features(context).items():
                row = self.lexical.get(bucket)
                if row is not None:
                    scores = [s + w * value for s, w in zip(scores, row)]
        logits = [s / self.temperature for s in scores]
        top = max(logits)
        powers = [math.exp(v - top) for v in logits]
        total = sum(powers)
        return {option: p / total for option, p in zip(options, powers)}

    def describe(self) -> str:
        extra = self.model_extra or {}
        facts = [f"{extra['n']} rows" if "n" in extra else "",
                 f"held-out accuracy {extra['accuracy']:.0%}" if "accuracy" in extra else "",
                 f"engine {extra['engine_accuracy']:.0%}" if "engine_accuracy" in extra else "",
                 "reads the wording" if self.lexical else ""]
        shown = ", ".join(f for f in facts if f)
        return f"the learned head for kind {self.kind!r} on {self.model}" + (f" ({shown})" if shown else "")


class HeadsFile(VersionedFile):
    FORMAT = FORMAT
    READABLE = (VERSION,)

    format: str = FORMAT
    version: int = VERSION
    heads: list[Head] = Field(default_factory=list)


class Heads:
    """The heads from the local and the shipped file, by (kind, embedder provider)."""

    def __init__(self, heads: list[Head] | None = None, errors: list[str] | None = None) -> None:
        self.errors = errors or []
        self._by_kind: dict[tuple[str, str], list[Head]] = {}
        for head in heads or []:
            self._by_kind.setdefault((head.kind, head.embedder), []).append(head)

    @classmethod
    def load(cls, local: Path | None, shipped: Path = SHIPPED_HEADS) -> Heads:
        files, errors = read_all(HeadsFile, [("shipped", shipped), ("local", local)], "learned heads")
        found = {(h.kind, h.embedder, h.model): h for _, _, parsed in files for h in parsed.heads}  # local last: it wins
        return cls(list(found.values()), errors)

    def candidates(self, kind: str, embedder: str, choices: list[str]) -> list[Head]:
        """Heads that could answer this kind with these options, one per embedder model."""
        return [h for h in self._by_kind.get((kind, embedder), []) if h.fits(choices)]

    def summary(self) -> list[dict[str, Any]]:
        return [{"kind": h.kind, "embedder": h.embedder, "model": h.model, "options": len(h.options),
                 **{k: v for k, v in (h.model_extra or {}).items() if k in ("n", "accuracy", "engine_accuracy")}}
                for group in self._by_kind.values() for h in group]
