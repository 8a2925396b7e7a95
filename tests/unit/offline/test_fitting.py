"""Temperature fitting and the calibration measurements, against known values."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest

from system1.core.calibration import shift_yes, temper
from system1.offline import calibrate
from system1.offline.fitting import (
    Answered,
    auroc,
    brier,
    calibrated,
    cross_validated,
    ece,
    fit,
    fit_shift_and_temperature,
    fit_temperature,
    folds,
    measure,
    MIN_RANGE_QUESTIONS,
    question_held_out,
    recommend,
    threshold_table,
)


def synthetic(true_temperature: float, count: int = 3000, seed: int = 1) -> list[Answered]:
    """Rows whose labels are drawn from probabilities that are right at `true_temperature`:
    the engine reports p^(1/T) normalised back to... i.e. its output is miscalibrated by T."""
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        logits = [rng.gauss(0, 1.5) for _ in range(3)]
        truth = [math.exp(l) for l in logits]
        total = sum(truth)
        truth = [t / total for t in truth]
        label = rng.choices(["a", "b", "c"], weights=truth)[0]
        # What the engine reports: the true distribution tempered by 1/T (so T undoes it).
        reported = temper(dict(zip("abc", truth)), 1 / true_temperature)
        rows.append(Answered("q", ("a", "b", "c"), label, reported, "p", "m"))
    return rows


@pytest.mark.parametrize("temperature", [0.4, 1.0, 2.5])
def test_fitting_recovers_a_known_temperature(temperature):
    assert fit_temperature(synthetic(temperature)) == pytest.approx(temperature, rel=0.12)


def test_question_fits_need_enough_rows_and_the_unseen_question_fit_is_always_made():
    rows = synthetic(2.0, count=30)
    few = [Answered("rare", r.options, r.label, r.probabilities, "p", "m") for r in rows[:5]]
    fits = fit(rows + few, min_question_rows=10)
    assert {(f.kind, f.question, f.model_extra["n"]) for f in fits} == {("question", "q", 30), ("unseen", None, 35)}


def questions(temperature: float, n_options: int, names: str, count: int = 600, asked: int = 6) -> list[Answered]:
    """`count` rows spread over `asked` questions, on an engine miscalibrated by `temperature`."""
    rows = synthetic(temperature, count=count, seed=n_options)
    if n_options == 2:  # the same engine, asked two-option questions
        rows = [dataclasses.replace(r, options=("a", "b"), label="a" if r.label == "a" else "b",
                                    probabilities={"a": r.probabilities["a"], "b": 1 - r.probabilities["a"]})
                for r in rows]
    return [dataclasses.replace(r, question=f"{names} {i % asked}") for i, r in enumerate(rows)]


def test_option_count_ranges_are_fitted_only_where_they_beat_one_fit_on_questions_left_out():
    # Overconfident on three options, underconfident on two: one temperature cannot serve both.
    rows = questions(3.0, 3, "three") + questions(0.4, 2, "two")
    fits = fit(rows, min_question_rows=10_000)
    assert sorted((f.kind, f.n_options, f.n_options_max) for f in fits if f.kind == "options") == [
        ("options", 2, 2), ("options", 3, 3)]
    two, three = (f.temperature for f in fits if f.kind == "options")
    assert two < 1 < three  # sharpened where the engine is underconfident, softened where over
    # The unseen-question fit is always made, on every row, for the counts no range holds.
    assert [f.model_extra["n"] for f in fits if f.kind == "unseen"] == [1200]
    # One kind of engine behaviour: nothing to beat, so no ranges.
    alike = questions(2.0, 3, "alike") + questions(2.0, 2, "also alike")
    assert [f.kind for f in fit(alike, min_question_rows=10_000)] == ["unseen"]


def test_the_fit_for_new_questions_weighs_every_question_alike_not_every_row():
    # One large question the engine reads well (it has a fit of its own) beside six small ones
    # it is overconfident on: a new question is like the many, not like the large one's rows.
    large = questions(0.4, 3, "large", count=3000, asked=1)
    small = questions(3.0, 3, "small", count=300, asked=6)
    unseen = next(f for f in fit(large + small) if f.kind == "unseen")
    alone = next(f for f in fit(small) if f.kind == "unseen")
    assert unseen.temperature > 1  # softened, as the small questions need; row-weighted, it sharpens
    assert unseen.temperature == pytest.approx(alone.temperature, rel=0.35)


def test_the_fit_for_new_questions_weighs_every_task_alike_not_every_wording_of_one():
    # Twenty wordings of one judgement the engine reads well, beside three other questions it is
    # overconfident on: counted by question the wordings decide; named as one task, they weigh
    # as one question, and the fit softens as the other questions need.
    worded = questions(0.4, 3, "wording", count=2000, asked=20)
    others = questions(3.0, 3, "other", count=300, asked=3)
    as_questions = next(f for f in fit(worded + others) if f.kind == "unseen")
    one_task = [dataclasses.replace(r, task="the judgement") for r in worded]
    as_task = next(f for f in fit(one_task + others) if f.kind == "unseen")
    assert as_questions.temperature < 1 < as_task.temperature


def test_leaving_a_task_out_leaves_out_every_wording_of_it(monkeypatch):
    import system1.offline.fitting as fitting

    trained_on: list[list[str]] = []
    real_fit = fitting.fit

    def recording_fit(train, *args, **kwargs):
        trained_on.append(sorted({r.question for r in train}))
        return real_fit(train, *args, **kwargs)

    monkeypatch.setattr(fitting, "fit", recording_fit)
    wordings = [dataclasses.replace(r, task="one judgement") for r in questions(1.0, 3, "wording", count=60, asked=3)]
    fitting.question_held_out(wordings + questions(1.0, 3, "other", count=40, asked=2))
    assert sorted(trained_on) == [["other 0", "other 1"],
                                  ["other 0", "wording 0", "wording 1", "wording 2"],
                                  ["other 1", "wording 0", "wording 1", "wording 2"]]


def test_an_option_count_range_needs_enough_questions_to_be_judged():
    few = questions(3.0, 3, "three", asked=MIN_RANGE_QUESTIONS - 1) + questions(0.4, 2, "two")
    assert [f.kind for f in fit(few, min_question_rows=10_000)] == ["unseen"]


def test_ece_against_a_hand_computed_value():
    # Bin 0.9: confidences .9, .9 with 1 of 2 right → |0.5 − 0.9| = 0.4, weight 2/4.
    # Bin 0.6: confidences .6, .6 with 2 of 2 right → |1.0 − 0.6| = 0.4, weight 2/4.
    assert ece([0.9, 0.9, 0.6, 0.6], [True, False, True, True]) == pytest.approx(0.4)
    assert ece([0.75, 0.75, 0.75, 0.75], [True, True, True, False]) == pytest.approx(0.0)


def test_brier_against_a_hand_computed_value():
    rows = [Answered("q", ("a", "b"), "a", {}, "p", "m"), Answered("q", ("a", "b"), "b", {}, "p", "m")]
    # Row 1: (0.8−1)² + (0.2−0)² = 0.08; row 2: (0.8−0)² + (0.2−1)² = 1.28; mean 0.68.
    assert brier([{"a": 0.8, "b": 0.2}, {"a": 0.8, "b": 0.2}], rows) == pytest.approx(0.68)


def test_auroc_against_hand_computed_values():
    assert auroc([0.9, 0.8, 0.3, 0.2], [True, True, False, False]) == 1.0
    assert auroc([0.9, 0.8, 0.3, 0.2], [False, False, True, True]) == 0.0
    # Pairs (pos, neg): (0.7, 0.7) tie = 0.5, (0.7, 0.4) = 1, (0.2, 0.7) = 0, (0.2, 0.4) = 0 → 1.5 / 4.
    assert auroc([0.7, 0.2, 0.7, 0.4], [True, True, False, False]) == pytest.approx(0.375)
    assert auroc([0.5, 0.6], [True, True]) is None


def test_threshold_table_and_recommendation():
    table = threshold_table([0.95, 0.85, 0.7, 0.55], [True, True, False, True], thresholds=(0.5, 0.6, 0.8, 0.99))
    assert table == [
        {"threshold": 0.5, "coverage": 1.0, "accuracy": 0.75, "n": 4},
        {"threshold": 0.6, "coverage": 0.75, "accuracy": 2 / 3, "n": 3},
        {"threshold": 0.8, "coverage": 0.5, "accuracy": 1.0, "n": 2},
        {"threshold": 0.99, "coverage": 0.0, "accuracy": None, "n": 0},
    ]
    assert recommend(table, 0.7)["threshold"] == 0.5
    assert recommend(table, 0.9)["threshold"] == 0.8
    assert recommend(table, 1.01) is None


def test_folds_partition_the_rows():
    parts = folds(23, 5)
    assert sorted(i for part in parts for i in part) == list(range(23))
    assert all(set(a).isdisjoint(b) for a in parts for b in parts if a is not b)


def test_cross_validation_never_measures_a_row_with_a_fit_that_saw_it(monkeypatch):
    import system1.offline.fitting as fitting

    rows = synthetic(2.0, count=40)
    seen_by_fit: list[set[int]] = []
    real_fit = fitting.fit

    def recording_fit(train, *args, **kwargs):
        seen_by_fit.append({id(r) for r in train})
        return real_fit(train, *args, **kwargs)

    measured: list[set[int]] = []
    real_calibrated = fitting.calibrated

    def recording_calibrated(subset, fits):
        measured.append({id(r) for r in subset})
        return real_calibrated(subset, fits)

    monkeypatch.setattr(fitting, "fit", recording_fit)
    monkeypatch.setattr(fitting, "calibrated", recording_calibrated)
    result = fitting.cross_validated(rows, k=5)
    assert len(result) == len(rows) and len(seen_by_fit) == len(measured) == 5
    for trained, tested in zip(seen_by_fit, measured):
        assert trained.isdisjoint(tested)
        assert trained | tested == {id(r) for r in rows}


def test_leaving_a_question_out_never_fits_on_any_row_of_it(monkeypatch):
    import system1.offline.fitting as fitting

    rows = [dataclasses.replace(row, question=f"question {i % 4}") for i, row in enumerate(synthetic(2.0, count=80))]
    trained_on: list[set[str]] = []
    real_fit = fitting.fit

    def recording_fit(train, *args, **kwargs):
        trained_on.append({r.question for r in train})
        return real_fit(train, *args, **kwargs)

    measured: list[set[str]] = []
    real_calibrated = fitting.calibrated

    def recording_calibrated(subset, fits):
        measured.append({r.question for r in subset})
        return real_calibrated(subset, fits)

    monkeypatch.setattr(fitting, "fit", recording_fit)
    monkeypatch.setattr(fitting, "calibrated", recording_calibrated)
    result = fitting.question_held_out(rows)
    assert len(result) == len(rows) and len(trained_on) == 4
    for questions, tested in zip(trained_on, measured):
        assert len(tested) == 1 and questions.isdisjoint(tested) and len(questions) == 3


def test_an_unseen_question_gets_the_option_count_fit_of_the_others():
    rows = [dataclasses.replace(row, question=f"question {i % 4}") for i, row in enumerate(synthetic(2.5, count=1200))]
    before = measure(rows, [r.probabilities for r in rows])
    unseen = measure(rows, question_held_out(rows))
    assert unseen["ece"] < before["ece"] / 2  # the same engine on other questions calibrates this one


def test_calibration_lowers_the_error_of_an_overconfident_engine():
    rows = synthetic(2.5, count=1500)
    before = measure(rows, [r.probabilities for r in rows])
    after = measure(rows, cross_validated(rows, k=5))
    assert after["ece"] < before["ece"] / 2
    assert after["accuracy"] == pytest.approx(before["accuracy"])  # temperatures never re-rank


def leaning_rows(count: int = 160, seed: int = 3) -> list[Answered]:
    """Yes/no rows from an engine that leans whatever the text, each question its own way: its
    answer is the truth multiplied by its content-free answer for that question, so dividing that
    out recovers the truth, while one yes shift for every question cannot."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        lean = {"yes": (0.9, 0.2, 0.7, 0.95)[i % 4]}
        lean["no"] = 1 - lean["yes"]
        truth = rng.uniform(0.05, 0.95)
        label = "yes" if rng.random() < truth else "no"
        shown = {"yes": truth * lean["yes"], "no": (1 - truth) * lean["no"]}
        total = sum(shown.values())
        rows.append(Answered(f"question {i % 4}", ("yes", "no"), label, {k: v / total for k, v in shown.items()},
                             "p", "m", baseline=lean))
    return rows


def test_content_free_fits_are_made_on_corrected_rows_with_a_context_only():
    rows = leaning_rows()
    no_context = [dataclasses.replace(r, baseline=None, question="bare") for r in rows[:20]]
    fits = fit(rows + no_context, min_question_rows=10_000, content_free=True)
    [unseen] = fits
    assert unseen.content_free and unseen.model_extra["n"] == len(rows)
    assert unseen.temperature == pytest.approx(1.0, rel=0.25)  # corrected rows are already calibrated
    after = calibrated(no_context[:1] + rows[:1], fits)
    assert after[0] == no_context[0].probabilities  # the fit does not apply without a context
    assert after[1] == pytest.approx(temper(shift_yes(rows[0].corrected().probabilities, unseen.yes_shift or 0.0),
                                            unseen.temperature))
    assert abs(unseen.yes_shift or 0.0) < 0.3  # the correction has already taken the lean out


def test_calibrate_keeps_the_correction_only_when_it_predicts_questions_left_out_better():
    leaning = leaning_rows()
    report, curves = calibrate.results(leaning, 0.8, 5)
    losses = {c["content_free"]: c["unseen_question_log_loss"] for c in report["content_free_choice"]}
    assert report["content_free"] is True and losses[True] < losses[False]
    assert all(f["content_free"] for f in report["fits"])
    assert len(curves["after (unseen questions)"]) == len(leaning)
    fair = [dataclasses.replace(r, baseline={"yes": 0.5, "no": 0.5}) for r in synthetic_yes_no()]
    report, _ = calibrate.results(fair, 0.8, 5)
    assert report["content_free"] is False  # a lean-free engine gains nothing: the plain fit is kept
    bare = [dataclasses.replace(r, baseline=None) for r in leaning]
    report, _ = calibrate.results(bare, 0.8, 5)
    assert [c["content_free"] for c in report["content_free_choice"]] == [False]


def synthetic_yes_no() -> list[Answered]:
    return [dataclasses.replace(r, options=("yes", "no"), label="yes" if r.label == "a" else "no",
                                probabilities={"yes": r.probabilities["a"], "no": 1 - r.probabilities["a"]},
                                question=f"question {i % 4}")
            for i, r in enumerate(synthetic(1.5, count=160))]


def yes_leaning_rows(lean: float, count: int = 400, seed: int = 3) -> list[Answered]:
    """Yes/no rows from an engine that ranks well but adds `lean` to the log-odds of "yes"."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        truth = rng.uniform(0.02, 0.98)
        label = "yes" if rng.random() < truth else "no"
        shown = 1 / (1 + math.exp(-(math.log(truth / (1 - truth)) + lean)))
        rows.append(Answered(f"question {i % 4}", ("yes", "no"), label, {"yes": shown, "no": 1 - shown}, "p", "m"))
    return rows


def test_a_yes_lean_is_fitted_as_a_shift_that_moves_the_boundary_back():
    rows = yes_leaning_rows(1.5)
    [unseen] = fit(rows, min_question_rows=10_000)
    assert unseen.yes_shift == pytest.approx(-1.5, abs=0.35) and unseen.temperature == pytest.approx(1.0, rel=0.2)
    before = measure(rows, [r.probabilities for r in rows])
    after = measure(rows, calibrated(rows, [unseen]))
    assert after["accuracy"] > before["accuracy"] + 0.1 and after["ece"] < before["ece"]


@pytest.mark.parametrize("lean", [-2.0, 0.0, 1.5])
def test_the_fitted_shift_and_temperature_are_the_least_loss_every_neighbour_is_worse(lean):
    rows = yes_leaning_rows(lean, count=300) + synthetic(2.0, count=200)

    def loss(shift: float, temperature: float) -> float:
        probabilities = [temper(shift_yes(r.probabilities, shift), temperature) if r.options == ("yes", "no")
                         else temper(r.probabilities, temperature) for r in rows]
        return -sum(math.log(p[r.label]) for p, r in zip(probabilities, rows)) / len(rows)

    shift, temperature = fit_shift_and_temperature(rows)
    best = loss(shift, temperature)
    for d_shift, d_scale in [(0.05, 1), (-0.05, 1), (0, 1.02), (0, 0.98), (0.05, 1.02), (-0.05, 0.98)]:
        assert loss(shift + d_shift, temperature * d_scale) > best


def test_questions_with_other_options_get_no_shift():
    rows = [Answered("q", ("a", "b", "c"), "a", {"a": 0.5, "b": 0.3, "c": 0.2}, "p", "m") for _ in range(30)]
    [unseen] = fit(rows, min_question_rows=10_000)
    assert unseen.yes_shift is None and "yes_shift" not in unseen.model_dump(exclude_none=True)
