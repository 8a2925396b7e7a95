"""Fitting temperatures and measuring calibration, for `system1 calibrate`.

Fits are made on the engine's probabilities as they are, or after the content-free correction
(`content_free=True`, see `core/calibration.py`): `system1 calibrate` makes both and keeps the
one that predicts questions left out better. Per engine (provider, model): one temperature per question with enough labelled rows; one for
questions no fit has seen, on all rows; and one per range of option counts only where leaving
whole tasks out shows that such ranges predict them better than one fit. Each minimises the
negative log-likelihood of the labels; the fits for questions without their own weigh every
task alike (`by_task`: a task is a question with its rewordings, where rows name it), since they
serve new questions, not the rows of the few large sets or many-worded judgements that have fits
of their own. Measurements: accuracy, expected calibration error (ECE, ten
equal-width bins), Brier score, AUROC of confidence for telling right from wrong, and a table
of coverage against accuracy by threshold. Cross-validation fits on k-1 folds and measures on
the held-out one, so the "after" figures are not measured on the rows they were fitted on;
leaving one task out at a time measures what a question no fit has seen gets.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import combinations
from dataclasses import dataclass, replace

from ..core.calibration import Calibrator, Fit, Source, correct

MIN_QUESTION_ROWS = 10
MAX_RANGES = 2  # option-count ranges per engine
MIN_RANGE_QUESTIONS = 5  # fewer questions cannot show that a range's own temperature transfers
THRESHOLDS = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
_EPS = 1e-12


@dataclass(frozen=True)
class Answered:
    """A labelled row and the engine's raw (uncalibrated) answer to it."""

    question: str
    options: tuple[str, ...]
    label: str
    probabilities: dict[str, float]
    provider: str
    model: str
    #: The engine's answer to the question about a content-free context; None without a context.
    baseline: dict[str, float] | None = None
    #: The judgement the question asks, shared by its rewordings (`meta.task`); None: its own.
    task: str | None = None

    @property
    def unit(self) -> str:
        """What a new question is new to: its task, or the question itself."""
        return self.task or self.question

    @property
    def n_options(self) -> int:
        return len(self.options)

    def corrected(self) -> Answered:
        """This row with the content-free correction applied to its probabilities (none without
        a baseline)."""
        return replace(self, probabilities=correct(self.probabilities, self.baseline)) if self.baseline else self


def top(probabilities: dict[str, float]) -> tuple[str, float]:
    option = max(probabilities, key=probabilities.get)
    return option, probabilities[option]


def judged(rows: Sequence[Answered], probabilities: Sequence[dict[str, float]]) -> tuple[list[float], list[bool]]:
    """Each row's confidence (its top probability) and whether that top option is its label."""
    picks = [top(p) for p in probabilities]
    return [c for _, c in picks], [option == row.label for (option, _), row in zip(picks, rows)]


@dataclass(frozen=True)
class _Prepared:
    """One row in log space: its options' log probabilities (those above 0), which of them is
    the label (None when the label's is 0), and which is "yes" in a yes/no answer."""

    logs: list[float]
    label: int | None
    yes: int | None
    weight: float = 1.0


def by_task(rows: Sequence[Answered]) -> list[float]:
    """Each row's weight when every task counts alike: one over its task's row count (a task is
    a question and its rewordings, `Answered.unit`), so ten wordings of one judgement do not
    outweigh one question asked once."""
    sizes: dict[str, int] = defaultdict(int)
    for row in rows:
        sizes[row.unit] += 1
    return [1 / sizes[row.unit] for row in rows]


def _log_shares(rows: Sequence[Answered], weights: Sequence[float] | None = None) -> list[_Prepared]:
    """`rows` in log space, their `weights` scaled to a mean of 1 (so a mean over rows is a
    weighted mean)."""
    weights = weights or [1.0] * len(rows)
    scale = len(rows) / sum(weights) if rows else 1.0
    prepared = []
    for row, weight in zip(rows, (w * scale for w in weights)):
        options = [o for o, p in row.probabilities.items() if p > 0]
        yes_no = set(row.probabilities) == {"yes", "no"} and len(options) == 2
        prepared.append(_Prepared([math.log(row.probabilities[o]) for o in options],
                                  options.index(row.label) if row.label in options else None,
                                  options.index("yes") if yes_no else None, weight))
    return prepared


def _tempered(row: _Prepared, a: float, offset: float) -> list[float]:
    """`row`'s log probabilities times 1/T (`a`), with `offset` added to "yes" in a yes/no answer:
    what `Fit.apply` computes, in log space, before normalising."""
    return [a * lp + (offset if i == row.yes else 0.0) for i, lp in enumerate(row.logs)]


def _nll(prepared: list[_Prepared], temperature: float, offset: float = 0.0) -> float:
    """Mean negative log-likelihood of the labels, each row's times its weight, after the
    temperature and the tempered yes `offset` (`_tempered`)."""
    a, total = 1.0 / temperature, 0.0
    for row in prepared:
        if row.label is None or not row.logs:
            total -= row.weight * math.log(_EPS)
            continue
        scaled = _tempered(row, a, offset)
        top_log = max(scaled)
        lse = top_log + math.log(sum(math.exp(s - top_log) for s in scaled))
        total -= row.weight * max(scaled[row.label] - lse, math.log(_EPS))
    return total / len(prepared)


# The box the fits stay in: temperatures 0.02-50 and tempered yes offsets of at most 10 either way.
_LOW_A, _HIGH_A, _MAX_OFFSET = 1 / 50.0, 1 / 0.02, 10.0


def _slopes(prepared: list[_Prepared], a: float, offset: float) -> tuple[list[float], list[list[float]]]:
    """The gradient and Hessian of `_nll` in (1/T, offset) at (a, offset). A row whose label is
    floored at _EPS (or has none) adds nothing: the floor is flat."""
    ga = gb = haa = hab = hbb = 0.0
    floor = math.log(_EPS)
    for row in prepared:
        if row.label is None or not row.logs:
            continue
        scaled = _tempered(row, a, offset)
        top_log = max(scaled)
        exps = [math.exp(v - top_log) for v in scaled]
        total = sum(exps)
        if scaled[row.label] - top_log - math.log(total) < floor:
            continue
        shares = [e / total for e in exps]
        mean = sum(p * lp for p, lp in zip(shares, row.logs))
        spread = sum(p * lp * lp for p, lp in zip(shares, row.logs)) - mean * mean
        ga += row.weight * (mean - row.logs[row.label])
        haa += row.weight * spread
        if row.yes is not None:
            p_yes = shares[row.yes]
            gb += row.weight * (p_yes - (1.0 if row.label == row.yes else 0.0))
            hbb += row.weight * p_yes * (1 - p_yes)
            hab += row.weight * p_yes * (row.logs[row.yes] - mean)
    n = len(prepared)
    return [ga / n, gb / n], [[haa / n, hab / n], [hab / n, hbb / n]]


def _newton(prepared: list[_Prepared], with_offset: bool, iterations: int = 100) -> tuple[float, float]:
    """The (1/T, offset) in the box with the least `_nll`: Newton steps on the coordinates not
    held at a bound, each backtracked until the loss falls. The NLL is convex in both (Platt
    scaling), so this finds the minimum in a few dozen passes over the rows where a nested
    one-dimensional search took hundreds."""
    point = [1.0, 0.0]
    bounds = [(_LOW_A, _HIGH_A), (-_MAX_OFFSET, _MAX_OFFSET) if with_offset else (0.0, 0.0)]

    def loss(x: list[float]) -> float:
        return _nll(prepared, 1 / x[0], x[1])

    current = loss(point)
    for _ in range(iterations):
        grad, hess = _slopes(prepared, *point)
        free = [i for i in (0, 1)
                if bounds[i][0] < bounds[i][1]
                and not (point[i] <= bounds[i][0] and grad[i] > 0) and not (point[i] >= bounds[i][1] and grad[i] < 0)]
        if not free:
            break
        step = _solve([[hess[i][j] for j in free] for i in free], [-grad[i] for i in free])
        moved = False
        for _ in range(60):
            trial = list(point)
            for i, d in zip(free, step):
                trial[i] = min(max(point[i] + d, bounds[i][0]), bounds[i][1])
            value = loss(trial)
            if value < current:
                point, moved = trial, current - value > 1e-13
                current = value
                break
            step = [d / 2 for d in step]
        if not moved:
            break
    return point[0], point[1]


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    """`matrix`⁻¹ `vector` for a 1×1 or 2×2 positive semi-definite `matrix`, a little ridge
    added so a flat direction (every row right, say) still gives a finite step."""
    ridge = 1e-9 + 1e-9 * max(abs(matrix[i][i]) for i in range(len(vector)))
    if len(vector) == 1:
        return [vector[0] / (matrix[0][0] + ridge)]
    (p, q), (r, t) = matrix
    p, t = p + ridge, t + ridge
    det = p * t - q * r
    return [(t * vector[0] - q * vector[1]) / det, (p * vector[1] - r * vector[0]) / det]


def fit_temperature(rows: Sequence[Answered], weights: Sequence[float] | None = None) -> float:
    """The temperature with the least negative log-likelihood, each row counted by its weight."""
    a, _ = _newton(_log_shares(rows, weights), with_offset=False)
    return 1 / a


def fit_shift_and_temperature(rows: Sequence[Answered], weights: Sequence[float] | None = None) -> tuple[float, float]:
    """The yes shift and the temperature with the least negative log-likelihood together, each
    row counted by its weight: the shift is fitted only where the rows hold yes/no answers (else
    0). The shift is the offset before the temperature, offset × T."""
    prepared = _log_shares(rows, weights)
    a, offset = _newton(prepared, with_offset=any(row.yes is not None for row in prepared))
    return offset / a, 1 / a


# Temperatures tried when choosing option-count ranges: log-spaced over fit_temperature's range.
GRID = tuple(math.exp(-math.log(_HIGH_A) + i * math.log(_HIGH_A / _LOW_A) / 159) for i in range(160))


def _loss_curve(rows: Sequence[Answered]) -> list[float]:
    """The mean negative log-likelihood of one question's `rows` at each temperature of GRID."""
    prepared = _log_shares(rows)
    return [_nll(prepared, t) for t in GRID]


def _partitions(counts: Sequence[int], most: int) -> Iterable[list[tuple[int, int]]]:
    """Every split of the sorted `counts` into at most `most` contiguous ranges (first, last)."""
    for parts in range(1, min(most, len(counts)) + 1):
        for cuts in combinations(range(1, len(counts)), parts - 1):
            edges = (0, *cuts, len(counts))
            yield [(counts[a], counts[b - 1]) for a, b in zip(edges, edges[1:])]


def option_ranges(engine_rows: Sequence[Answered]) -> list[tuple[int, int]]:
    """The option-count ranges, one temperature each, that predict new questions best.

    Every split into at most MAX_RANGES contiguous ranges of the option counts seen, each holding
    at least MIN_RANGE_QUESTIONS tasks (`Answered.unit`), is judged by leaving one task out at a
    time and fitting its range's temperature on the other tasks, every task weighing alike, as the
    fits do; a single range (the unseen-question fit alone) wins ties. The sums of per-task mean
    loss curves make each of those fits a lookup.
    """
    grouped: dict[tuple[str, int], list[Answered]] = defaultdict(list)
    for row in engine_rows:
        grouped[(row.unit, row.n_options)].append(row)
    curves = {q: _loss_curve(group) for q, group in grouped.items()}
    counts_of = {q: group[0].n_options for q, group in grouped.items()}
    best: tuple[float, list[tuple[int, int]]] | None = None
    for ranges in _partitions(sorted(set(counts_of.values())), MAX_RANGES):
        members = [[q for q, n in counts_of.items() if low <= n <= high] for low, high in ranges]
        if len(ranges) > 1 and min(map(len, members)) < MIN_RANGE_QUESTIONS:
            continue
        loss = 0.0
        for questions in members:
            total = [sum(column) for column in zip(*(curves[q] for q in questions))]
            for q in questions:
                curve = curves[q]
                others = [t - c for t, c in zip(total, curve)]
                loss += curve[others.index(min(others))] if len(questions) > 1 else min(curve)
        if best is None or loss < best[0] - 1e-9:
            best = (loss, ranges)
    return best[1] if best else []


def fit(rows: Sequence[Answered], min_question_rows: int = MIN_QUESTION_ROWS, content_free: bool = False) -> list[Fit]:
    """Per engine: question fits where a question has enough rows, option-count fits for the
    ranges `option_ranges` chooses when it splits them, and the fit for unseen questions on all
    rows. With `content_free`, on the corrected probabilities of the rows that have a context."""
    by_engine: dict[tuple[str, str], list[Answered]] = defaultdict(list)
    for row in rows:
        if content_free and row.baseline is None:
            continue  # the gateway does not apply these fits without a context
        by_engine[(row.provider, row.model)].append(row.corrected() if content_free else row)
    fits = []
    for (provider, model), engine_rows in by_engine.items():
        grouped: dict[str, list[Answered]] = defaultdict(list)
        for row in engine_rows:
            grouped[row.question].append(row)
        engine = {"provider": provider, "model": model, "content_free": content_free}
        fits += [Fit(**engine, question=q, **_scaling(group), n=len(group))
                 for q, group in grouped.items() if len(group) >= min_question_rows]
        ranges = option_ranges(engine_rows)
        for low, high in ranges if len(ranges) > 1 else ():
            served = [r for r in engine_rows if low <= r.n_options <= high]
            fits.append(Fit(**engine, n_options=low, n_options_max=high, **_scaling(served, alike=True),
                            n=len(served), questions=len({r.question for r in served})))
        fits.append(Fit(**engine, unseen=True, **_scaling(engine_rows, alike=True), n=len(engine_rows),
                        questions=len(grouped)))
    return fits


def _scaling(rows: Sequence[Answered], alike: bool = False) -> dict[str, float]:
    """A fit's fitted numbers: its temperature, and its yes shift where it has one; `alike`:
    every task of `rows` weighing the same (`by_task`)."""
    shift, temperature = fit_shift_and_temperature(rows, weights=by_task(rows) if alike else None)
    return {"temperature": round(temperature, 4), **({"yes_shift": round(shift, 4)} if round(shift, 4) else {})}


def calibrated(rows: Sequence[Answered], fits: Iterable[Fit]) -> list[dict[str, float]]:
    """Each row's probabilities after the fits, chosen as the gateway chooses them."""
    calibrator = Calibrator([Source("fitted", None, tuple(fits))])
    result = []
    for row in rows:
        chosen = calibrator.lookup(row.provider, row.model, row.question, row.n_options,
                                   has_context=row.baseline is not None)
        if chosen is None:
            result.append(dict(row.probabilities))
        else:
            source = row.corrected() if chosen.content_free else row
            result.append(chosen.apply(source.probabilities))
    return result


def folds(count: int, k: int, seed: int = 0) -> list[list[int]]:
    order = list(range(count))
    random.Random(seed).shuffle(order)
    return [sorted(order[i::k]) for i in range(k)]


def _held_out(rows: Sequence[Answered], groups: Iterable[list[int]], content_free: bool) -> list[dict[str, float]]:
    """Every row's probabilities from fits on the rows outside its group."""
    held_out: list[dict[str, float] | None] = [None] * len(rows)
    for test in groups:
        tested = set(test)
        train = [row for i, row in enumerate(rows) if i not in tested]
        fitted = fit(train, content_free=content_free) if train else []
        for index, probabilities in zip(test, calibrated([rows[i] for i in test], fitted)):
            held_out[index] = probabilities
    return [p for p in held_out if p is not None]


def cross_validated(rows: Sequence[Answered], k: int = 5, seed: int = 0,
                    content_free: bool = False) -> list[dict[str, float]]:
    """Every row's probabilities from fits that never saw it (k row-level folds). Other rows of
    its question may have been fitted, so this flatters a question the fits know."""
    return _held_out(rows, folds(len(rows), max(2, min(k, len(rows))), seed), content_free)


def question_held_out(rows: Sequence[Answered], content_free: bool = False) -> list[dict[str, float]]:
    """Every row's probabilities from fits that never saw any row of its task (leave one task
    out: a question with the rewordings that share its `task`): the calibration a new question
    gets."""
    groups: dict[str, list[int]] = defaultdict(list)
    for index, row in enumerate(rows):
        groups[row.unit].append(index)
    return _held_out(rows, groups.values(), content_free)


def log_loss(rows: Sequence[Answered], probabilities: Sequence[dict[str, float]]) -> float:
    """Mean negative log-likelihood of the labels under `probabilities`."""
    return -sum(math.log(max(p.get(row.label, 0.0), _EPS)) for row, p in zip(rows, probabilities)) / len(rows)


# -- measurements --------------------------------------------------------------------------------
def ece(confidences: Sequence[float], correct: Sequence[bool], bins: int = 10,
        weights: Sequence[float] | None = None) -> float:
    """Expected calibration error: |accuracy − mean confidence| per bin, weighted by bin size
    (by the rows' `weights` when given)."""
    weights = weights or [1.0] * len(confidences)
    total = sum(weights)
    grouped: dict[int, list[int]] = defaultdict(list)
    for index, confidence in enumerate(confidences):
        grouped[min(int(confidence * bins), bins - 1)].append(index)
    return sum(abs(sum(weights[i] * (correct[i] - confidences[i]) for i in members)) for members in grouped.values()) / total


def question_weighted_ece(rows: Sequence[Answered], probabilities: Sequence[dict[str, float]]) -> float:
    """ECE with every task counting once, however many rows it has: what a new question can
    expect when a few questions (or one question in many wordings) hold most of the rows."""
    return ece(*judged(rows, probabilities), weights=by_task(rows))


def squared_error(probabilities: dict[str, float], options: Sequence[str], label: str) -> float:
    """One row's Brier score: the squared error of the whole probability vector against the label."""
    return sum((probabilities.get(option, 0.0) - (option == label)) ** 2 for option in options)


def brier(probabilities: Sequence[dict[str, float]], rows: Sequence[Answered]) -> float:
    """Mean over rows of the squared error of the whole probability vector against the label."""
    return sum(squared_error(p, row.options, row.label) for p, row in zip(probabilities, rows)) / len(rows)


def auroc(scores: Sequence[float], positive: Sequence[bool]) -> float | None:
    """Probability that a positive scores above a negative (ties count half); None with one class."""
    pos = [s for s, y in zip(scores, positive) if y]
    neg = [s for s, y in zip(scores, positive) if not y]
    if not pos or not neg:
        return None
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def threshold_table(confidences: Sequence[float], correct: Sequence[bool], thresholds: Sequence[float] = THRESHOLDS) -> list[dict]:
    table = []
    for threshold in thresholds:
        kept = [c for conf, c in zip(confidences, correct) if conf >= threshold]
        table.append({
            "threshold": threshold,
            "coverage": len(kept) / len(confidences) if confidences else 0.0,
            "accuracy": sum(kept) / len(kept) if kept else None,
            "n": len(kept),
        })
    return table


def recommend(table: Sequence[dict], target_accuracy: float) -> dict | None:
    """The lowest threshold (so the widest coverage) whose accuracy reaches the target."""
    return next((row for row in table if row["accuracy"] is not None and row["accuracy"] >= target_accuracy), None)


def measure(rows: Sequence[Answered], probabilities: Sequence[dict[str, float]]) -> dict:
    confidences, correct = judged(rows, probabilities)
    return {
        "n": len(rows),
        "accuracy": sum(correct) / len(rows),
        "ece": ece(confidences, correct),
        "brier": brier(probabilities, rows),
        "auroc": auroc(confidences, correct),
        "thresholds": threshold_table(confidences, correct),
    }
