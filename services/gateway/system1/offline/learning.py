"""Fitting learned heads, for `system1 learn` (needs NumPy and scikit-learn: the `learn` extra).

Per decision kind: a multinomial logistic regression on the embedder's vectors of the judged
texts, its regularisation chosen by cross-validation inside each training fold
(`LogisticRegressionCV`). Everything reported is held out: the rows are split into k stratified
folds (where a kind's rows name at least 2k groups, `meta.group` in their file, each group is
held out whole, so a figure says how a head does on a kind of text it never saw), each fold's probabilities come from a head fitted on the others, and each fold's
temperature from the other folds' held-out probabilities. On a hundred-odd rows one split's
figures swing with the split itself (ECE by 0.03 either way), so the split is repeated with
other seeds and the figures are their means, ECE with its range. A head is enabled only if its
mean held-out accuracy beats the raw engine's on the same rows and every option has enough
rows; the shipped head is then fitted on all rows, with the temperature fitted on every split's
held-out rows.

Where the rows carry their wording's features (`core/lexical.py`), a kind is fitted twice, on
the embedding alone and on the embedding and the wording, on the same splits; the head reads
the wording only where that lowers the held-out Brier score by more than twice its standard
error (each row's difference, over every split; on wording that carries nothing, a lower
score by a hair is common).

Teacher rows (labelled by a stronger engine's confident answers, `system1 learn --teacher`) join
every training fold and the final fit, but never a held-out fold: the gate and every figure
stay on human labels. With teacher rows, a kind is fitted twice, without them and with them, so
the report shows what they changed.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.calibration import temper
from ..core import lexical
from ..core.heads import Head
from ..core.router_config import TOPIC_KIND
from .fitting import Answered, fit_temperature, judged, measure, squared_error, threshold_table

MIN_ROWS_PER_OPTION = 8
REPEATS = 5  # fold assignments the held-out figures are averaged over
CURVE_FRACTIONS = (0.25, 0.5, 0.75, 1.0)
#: Kinds whose heads weigh every option alike: how many example prompts a topic has says how
#: much someone wrote, not how often it is asked, so an operator's topic of a dozen examples is
#: not outvoted by built-in topics of a hundred each (docs/router.md, "Topics of your own").
EVEN_PRIOR_KINDS = frozenset({TOPIC_KIND})


@dataclass(frozen=True)
class Example:
    """A labelled row with the embedder's vector of its judged text and the engine's raw answer."""

    kind: str
    options: tuple[str, ...]
    label: str
    embedding: list[float]
    engine: dict[str, float]
    embedder: str
    model: str
    #: Labelled by a teacher engine, not a person: trained on, never judged on.
    teacher: bool = False
    #: The group the row was written in (file and `meta.group`), held out whole where a kind
    #: has enough groups.
    group: str | None = None
    #: The wording's features of its judged text (`lexical.features`); None: not computed.
    lexical: dict[int, float] | None = None


@dataclass
class KindResult:
    kind: str
    options: tuple[str, ...]
    rows: int
    engine: dict[str, Any]
    head: dict[str, Any] | None = None
    enabled: bool = False
    why_not: str | None = None
    fitted: Head | None = None
    curve: list[tuple[float, float]] = field(default_factory=list)
    #: Teacher rows the head was trained with, and the head's figures without them.
    teacher_rows: int = 0
    without_teacher: dict[str, Any] | None = None
    #: The groups held out whole in the folds (0: the folds were stratified by label alone).
    groups: int = 0
    #: Whether the head reads the wording, and the head's figures on the embedding alone
    #: where it was fitted both ways.
    wording: bool = False
    embedding_only: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "options": list(self.options), "rows": self.rows, "engine": self.engine,
                "head": self.head, "enabled": self.enabled, "why_not": self.why_not,
                "curve": [{"rows_per_option": x, "accuracy": y} for x, y in self.curve],
                "teacher_rows": self.teacher_rows, "without_teacher": self.without_teacher, "groups": self.groups,
                "wording": self.wording, "embedding_only": self.embedding_only}


def stratified_folds(labels: Sequence[str], k: int, seed: int = 0) -> list[list[int]]:
    """k folds with each label spread across them as evenly as it can be."""
    by_label: dict[str, list[int]] = defaultdict(list)
    for index, label in enumerate(labels):
        by_label[label].append(index)
    rng = random.Random(seed)
    folds: list[list[int]] = [[] for _ in range(k)]
    offset = 0
    for label in sorted(by_label):
        members = by_label[label]
        rng.shuffle(members)
        for position, index in enumerate(members):
            folds[(position + offset) % k].append(index)
        offset += len(members)
    return [sorted(f) for f in folds if f]


def grouped_folds(labels: Sequence[str], groups: Sequence[str], k: int, seed: int = 0) -> list[list[int]]:
    """k folds that each hold whole groups, the groups dealt so every fold gets its share of each
    label: largest first (ties in an order drawn by `seed`), each to the fold with fewest rows
    of the group's most common label."""
    members: dict[str, list[int]] = defaultdict(list)
    for index, group in enumerate(groups):
        members[group].append(index)
    order = sorted(members)
    random.Random(seed).shuffle(order)
    order.sort(key=lambda g: -len(members[g]))
    folds: list[list[int]] = [[] for _ in range(k)]
    per_label: list[Counter[str]] = [Counter() for _ in range(k)]
    for group in order:
        label = Counter(labels[i] for i in members[group]).most_common(1)[0][0]
        target = min(range(k), key=lambda f: (per_label[f][label], len(folds[f])))
        folds[target] += members[group]
        per_label[target].update(labels[i] for i in members[group])
    return [sorted(f) for f in folds if f]


def groups_of(examples: Sequence[Example], k: int) -> list[str] | None:
    """Each row's group for the folds, or None where the rows name fewer than 2k groups (too few
    to deal out; the folds are then stratified). A row without a group is a group of its own."""
    named = {e.group for e in examples if e.group}
    if len(named) < 2 * k:
        return None
    return [e.group or f"row {i}" for i, e in enumerate(examples)]


def folds_of(examples: Sequence[Example], k: int, seed: int = 0) -> list[list[int]]:
    labels = [e.label for e in examples]
    groups = groups_of(examples, k)
    return stratified_folds(labels, k, seed) if groups is None else grouped_folds(labels, groups, k, seed)


class _Pruned:
    """A classifier fitted on the columns some training row has (on the sparse wording features,
    fitting on thousands of empty columns costs ten times as long), seen as one on every column."""

    def __init__(self, model: Any, kept: Any, width: int) -> None:
        import numpy as np

        self.model, self.kept = model, kept
        self.classes_, self.intercept_ = model.classes_, model.intercept_
        self.coef_ = np.zeros((model.coef_.shape[0], width))
        self.coef_[:, kept] = model.coef_

    def predict_proba(self, x: Any) -> Any:
        return self.model.predict_proba(x[:, self.kept])

    def predict(self, x: Any) -> Any:
        return self.model.predict(x[:, self.kept])


def _classifier(x: Any, y: Any, kind: str) -> Any:
    from scipy.sparse import issparse

    if issparse(x):
        import numpy as np

        kept = np.unique(x.nonzero()[1])
        return _Pruned(logistic(x[:, kept], y, kind), kept, x.shape[1])
    return logistic(x, y, kind)


def logistic(x: Any, y: Any, kind: str) -> Any:
    from sklearn.linear_model import LogisticRegressionCV

    smallest = min(Counter(y.tolist()).values())
    inner = max(2, min(3, smallest))
    # L2 only, regularisation chosen by log-loss (what the temperature fit then builds on).
    return LogisticRegressionCV(Cs=8, cv=inner, max_iter=2000, l1_ratios=(0.0,), scoring="neg_log_loss",
                                class_weight="balanced" if kind in EVEN_PRIOR_KINDS else None,
                                use_legacy_attributes=False).fit(x, y)


def _probabilities(model: Any, x: Any, n_options: int) -> Any:
    import numpy as np

    full = np.zeros((x.shape[0], n_options))
    full[:, model.classes_] = model.predict_proba(x)
    return full


def _rows(examples: Sequence[Example], probabilities: Sequence[Sequence[float]]) -> list[Answered]:
    return [Answered(e.kind, e.options, e.label, dict(zip(e.options, map(float, p))), e.embedder, e.model)
            for e, p in zip(examples, probabilities)]


def _matrix(examples: Sequence[Example], wording: bool = False) -> tuple[Any, Any]:
    """The rows' features (the embedding, then with `wording` the wording's, sparse) and labels."""
    import numpy as np

    options = examples[0].options
    x = np.array([e.embedding for e in examples])
    y = np.array([options.index(e.label) for e in examples])
    if not wording:
        return x, y
    from scipy.sparse import csr_matrix, hstack

    cells = [(i, bucket, value) for i, e in enumerate(examples) for bucket, value in (e.lexical or {}).items()]
    words = csr_matrix(([v for _, _, v in cells], ([i for i, _, _ in cells], [b for _, b, _ in cells])),
                       shape=(len(examples), lexical.DIM))
    return hstack([csr_matrix(x), words]).tocsr(), y


def _stacked(first: Any, second: Any) -> Any:
    """Two feature matrices, one above the other (dense or sparse alike)."""
    import numpy as np
    from scipy.sparse import issparse, vstack

    return vstack([first, second]).tocsr() if issparse(first) else np.concatenate([first, second])


def others(count: int, test: list[int]) -> list[int]:
    """The rows outside one fold."""
    tested = set(test)
    return [i for i in range(count) if i not in tested]


def _raw_probabilities(examples: Sequence[Example], groups: list[list[int]],
                       taught: Sequence[Example] = (), wording: bool = False) -> list[list[float]]:
    """Each row's probabilities from a head fitted on the other folds (and every teacher row),
    before any temperature."""
    import numpy as np

    x, y = _matrix(examples, wording)
    extra_x, extra_y = _matrix(taught, wording) if taught else (x[:0], y[:0])
    raw: list[list[float]] = [[] for _ in examples]
    for test in groups:
        train = others(len(examples), test)
        model = _classifier(_stacked(x[train], extra_x), np.concatenate([y[train], extra_y]), examples[0].kind)
        for index, p in zip(test, _probabilities(model, x[test], len(examples[0].options))):
            raw[index] = [float(v) for v in p]
    return raw


def held_out(examples: Sequence[Example], k: int, seed: int = 0, taught: Sequence[Example] = (),
             wording: bool = False) -> tuple[list[dict[str, float]], list[Answered]]:
    """Each row's calibrated probabilities from a head and a temperature that never saw it (one
    split into k folds, drawn by `seed`; `taught` rows train every fold; `wording`: on the
    embedding and the wording), and its held-out probabilities before the temperature."""
    groups = folds_of(examples, k, seed)
    raw = _rows(examples, _raw_probabilities(examples, groups, taught, wording))
    result: list[dict[str, float]] = [{} for _ in examples]
    for test in groups:
        temperature = fit_temperature([raw[i] for i in others(len(raw), test)])
        for index in test:
            result[index] = temper(raw[index].probabilities, temperature)
    return result, raw


def _summary(rows: list[Answered], probabilities: Sequence[dict[str, float]], threshold: float) -> dict[str, Any]:
    """Accuracy and ECE on every row, and coverage, accuracy and ECE on the rows answered at
    `threshold` (those whose top probability reaches it)."""
    measured = measure(rows, probabilities)
    confidences, correct = judged(rows, probabilities)
    [at] = threshold_table(confidences, correct, (threshold,))
    answered = [i for i, c in enumerate(confidences) if c >= threshold]
    ece_answered = measure([rows[i] for i in answered], [probabilities[i] for i in answered])["ece"] if answered else None
    return {"accuracy": measured["accuracy"], "ece": measured["ece"], "brier": measured["brier"],
            "at_threshold": {"threshold": threshold, "coverage": at["coverage"], "accuracy": at["accuracy"],
                             "ece": ece_answered}}


def _mean_summary(summaries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The mean of each figure over repeated splits, with the range of both ECEs."""
    def mean(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return sum(present) / len(present) if present else None

    at = [s["at_threshold"] for s in summaries]
    answered_ece = [a["ece"] for a in at if a["ece"] is not None]
    return {"accuracy": mean([s["accuracy"] for s in summaries]), "ece": mean([s["ece"] for s in summaries]),
            "brier": mean([s["brier"] for s in summaries]),
            "ece_range": [min(s["ece"] for s in summaries), max(s["ece"] for s in summaries)],
            "at_threshold": {"threshold": at[0]["threshold"], "coverage": mean([a["coverage"] for a in at]),
                             "accuracy": mean([a["accuracy"] for a in at]), "ece": mean(answered_ece),
                             "ece_range": [min(answered_ece), max(answered_ece)] if answered_ece else None},
            "splits": len(summaries)}


def learning_curve(examples: Sequence[Example], k: int, seed: int = 0,
                   wording: bool = False) -> list[tuple[float, float]]:
    """Held-out accuracy against training rows per option, training on growing shares of each fold."""
    x, y = _matrix(examples, wording)
    groups = folds_of(examples, k)
    rng = random.Random(seed)
    curve = []
    for fraction in CURVE_FRACTIONS:
        right = total = per_option = 0.0
        for test in groups:
            chosen = [i for i in others(len(examples), test) if fraction >= 1 or rng.random() < fraction]
            present = Counter(y[chosen].tolist())
            if len(present) < 2 or min(present.values()) < 2:  # too few to fit (and cross-validate) on
                continue
            model = _classifier(x[chosen], y[chosen], examples[0].kind)
            right += float((model.predict(x[test]) == y[test]).sum())
            total += len(test)
            per_option += len(chosen) / len(examples[0].options)
        if total:
            curve.append((round(per_option / len(groups), 1), right / total))
    return curve


def learn_kind(examples: Sequence[Example], k: int, threshold: float,
               min_rows_per_option: int = MIN_ROWS_PER_OPTION, curve: bool = True, repeats: int = REPEATS,
               taught: Sequence[Example] = ()) -> KindResult:
    """The held-out comparison of a head with the engine for one kind (over `repeats` splits
    into k folds of the human-labelled `examples`; the `taught` rows train every fold), and the
    head if it wins."""
    first = examples[0]
    options = first.options
    engine_rows = _rows(examples, [[e.engine.get(o, 0.0) for o in options] for e in examples])
    result = KindResult(first.kind, options, len(examples),
                        _summary(engine_rows, [r.probabilities for r in engine_rows], threshold))
    counts = Counter(e.label for e in examples)
    thin = [o for o in options if counts[o] < min_rows_per_option]
    if thin:
        result.why_not = (f"too few rows for {', '.join(repr(o) for o in thin)} "
                          f"(each option needs {min_rows_per_option}; has {', '.join(str(counts[o]) for o in thin)})")
        return result
    folds = min(k, min(counts.values()))
    named = groups_of(examples, folds)
    result.groups = 0 if named is None else len(set(named))
    if taught:
        result.teacher_rows = len(taught)
        result.without_teacher = learn_kind(examples, k, threshold, min_rows_per_option, False, repeats).head
    ways = (False, True) if all(e.lexical is not None for e in [*examples, *taught]) else (False,)
    runs = {wording: _held_out_runs(examples, folds, repeats, taught, wording, engine_rows, threshold)
            for wording in ways}
    result.wording = len(ways) > 1 and _clearly_lower(runs[True][2], runs[False][2])
    result.head, raw, _ = runs[result.wording]
    if len(ways) > 1:
        result.embedding_only = runs[False][0]
    temperature = fit_temperature(raw)
    if curve:
        result.curve = learning_curve(examples, folds, wording=result.wording)
    if result.head["accuracy"] <= result.engine["accuracy"]:
        result.why_not = (f"held-out accuracy {result.head['accuracy']:.0%} does not beat the engine's "
                          f"{result.engine['accuracy']:.0%}")
        return result
    x, y = _matrix([*examples, *taught], result.wording)
    weights, bias = _head_weights(_classifier(x, y, first.kind), len(options), x.shape[1])
    dim = len(first.embedding)
    words = {bucket: [row[dim + bucket] for row in weights] for bucket in range(len(weights[0]) - dim)
             if any(row[dim + bucket] for row in weights)}
    result.fitted = Head(kind=first.kind, embedder=first.embedder, model=first.model, options=list(options),
                         weights=[row[:dim] for row in weights], bias=bias, temperature=round(temperature, 4),
                         lexical=words if result.wording else None, n=len(examples) + len(taught),
                         accuracy=round(result.head["accuracy"], 4),
                         engine_accuracy=round(result.engine["accuracy"], 4))
    result.enabled = True
    return result


def _held_out_runs(examples: Sequence[Example], folds: int, repeats: int, taught: Sequence[Example], wording: bool,
                   engine_rows: list[Answered], threshold: float) -> tuple[dict[str, Any], list[Answered], list[float]]:
    """The head's held-out figures (means over `repeats` splits), every split's held-out
    probabilities before the temperature (what the shipped temperature is fitted on), and each
    row's Brier score over the splits."""
    summaries, raw = [], []
    scores = [0.0] * len(examples)
    for seed in range(repeats):
        probabilities, uncalibrated = held_out(examples, folds, seed, taught, wording)
        summaries.append(_summary(engine_rows, probabilities, threshold))
        raw.extend(uncalibrated)
        for index, (row, p) in enumerate(zip(examples, probabilities)):
            scores[index] += squared_error(p, row.options, row.label) / repeats
    return _mean_summary(summaries), raw, scores


def _clearly_lower(scores: list[float], than: list[float]) -> bool:
    """Whether `scores` are lower than `than`, row by row, by more than twice the standard error
    of the mean difference."""
    differences = [a - b for a, b in zip(scores, than)]
    n = len(differences)
    mean = sum(differences) / n
    spread = (sum((d - mean) ** 2 for d in differences) / max(n - 1, 1)) ** 0.5
    return mean < -2 * spread / n ** 0.5


def _head_weights(model: Any, n_options: int, dim: int) -> tuple[list[list[float]], list[float]]:
    """One weight row and bias per option (a binary model's single row becomes [0, w])."""
    import numpy as np

    coef = np.asarray(model.coef_)
    weights = [[0.0] * dim for _ in range(n_options)]
    bias = [0.0] * n_options
    classes = [int(c) for c in model.classes_]
    if len(classes) == 2 and coef.shape[0] == 1:
        weights[classes[1]] = [round(float(w), 6) for w in coef[0]]
        bias[classes[1]] = round(float(model.intercept_[0]), 6)
        return weights, bias
    for row, cls in enumerate(classes):
        weights[cls] = [round(float(w), 6) for w in coef[row]]
        bias[cls] = round(float(model.intercept_[row]), 6)
    return weights, bias


def learn(examples: Sequence[Example], k: int, threshold: float,
          progress: Callable[[int, int], None] | None = None, repeats: int = REPEATS) -> list[KindResult]:
    """Every kind's result, kinds with most human-labelled rows first; rows whose options differ
    from their kind's most common option set are left out (the report counts them). A kind with
    teacher rows and no human ones has nothing to be judged on and is not fitted."""
    by_kind: dict[str, list[Example]] = defaultdict(list)
    for example in examples:
        by_kind[example.kind].append(example)
    results = []
    ordered = sorted(by_kind.items(), key=lambda item: -sum(not e.teacher for e in item[1]))
    for done, (kind, rows) in enumerate(ordered, 1):
        usual = Counter(r.options for r in rows).most_common(1)[0][0]
        human = [r for r in rows if r.options == usual and not r.teacher]
        taught = [r for r in rows if r.options == usual and r.teacher]
        if human:
            results.append(learn_kind(human, k, threshold, repeats=repeats, taught=taught))
        else:
            results.append(KindResult(kind, usual, 0, {}, why_not=f"{len(taught)} teacher rows and no human-labelled "
                                      "row to judge a head on", teacher_rows=len(taught)))
        if progress:
            progress(done, len(by_kind))
    return results
