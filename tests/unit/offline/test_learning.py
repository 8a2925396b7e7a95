"""Fitting learned heads: held-out figures, the gate against the raw engine, the head's shape."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from system1.core.heads import kind_of
from system1.offline.learning import Example, grouped_folds, learn, learn_kind, stratified_folds

KIND = kind_of("Is this destructive?", ["yes", "no"], yes_no=True)


def examples(count: int, separation: float, engine_right: float, seed: int = 0, dim: int = 8) -> list[Example]:
    """Yes/no rows whose embeddings sit around +/- `separation` on the first axis, with an
    engine that is right `engine_right` of the time at 0.7."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        label = "yes" if i % 2 else "no"
        centre = separation if label == "yes" else -separation
        vector = [rng.gauss(centre, 1.0)] + [rng.gauss(0, 1.0) for _ in range(dim - 1)]
        engine_pick = label if rng.random() < engine_right else ("no" if label == "yes" else "yes")
        engine = {engine_pick: 0.7, ("no" if engine_pick == "yes" else "yes"): 0.3}
        rows.append(Example(KIND, ("yes", "no"), label, vector, engine, "systemone", "minilm"))
    return rows


def test_stratified_folds_partition_the_rows_and_spread_each_label():
    labels = ["a"] * 10 + ["b"] * 5
    folds = stratified_folds(labels, 5)
    assert sorted(i for f in folds for i in f) == list(range(15))
    assert all(sum(labels[i] == "b" for i in f) == 1 for f in folds)


def test_grouped_folds_hold_each_group_whole_and_spread_each_label():
    groups = [f"g{i // 6}" for i in range(60)]  # ten groups of six rows
    labels = ["yes" if int(g[1:]) % 2 else "no" for g in groups]
    folds = grouped_folds(labels, groups, 5, seed=3)
    assert sorted(i for f in folds for i in f) == list(range(60))
    assert all(len({groups[i] for i in f}) == 2 for f in folds)  # two whole groups a fold
    assert all({groups[i] for i in f}.isdisjoint({groups[i] for i in g}) for f in folds for g in folds if f is not g)
    assert all(sorted(labels[i] for i in f) == ["no"] * 6 + ["yes"] * 6 for f in folds)


def grouped_examples(groups: int, per_group: int, seed: int = 0, dim: int = 64) -> list[Example]:
    """Rows that share their group's own point, each group of one label: the label can be told
    from a group seen before, not from a new one."""
    rng = random.Random(seed)
    rows = []
    for g in range(groups):
        label = "yes" if g % 2 else "no"
        centre = [rng.gauss(0, 3.0) for _ in range(dim)]
        for _ in range(per_group):
            rows.append(Example(KIND, ("yes", "no"), label, [c + rng.gauss(0, 0.3) for c in centre],
                                {"yes": 0.5, "no": 0.5}, "systemone", "minilm", group=f"seed.jsonl:g{g}"))
    return rows


@pytest.mark.needs_sklearn
def test_a_kind_with_enough_groups_is_judged_on_groups_it_never_saw():
    rows = grouped_examples(20, 8)
    grouped = learn_kind(rows, k=5, threshold=0.6, curve=False, repeats=1)
    mixed = learn_kind([replace(r, group=None) for r in rows], k=5, threshold=0.6, curve=False, repeats=1)
    assert grouped.groups == 20 and mixed.groups == 0
    # Rows of a group seen in training are easy; a new group's are guesswork.
    assert mixed.head["accuracy"] > 0.95 and grouped.head["accuracy"] < 0.8


@pytest.mark.needs_sklearn
def test_a_kind_naming_fewer_than_twice_k_groups_is_folded_by_label_alone():
    rows = [replace(r, group=f"seed.jsonl:g{i % 9}") for i, r in enumerate(examples(120, 2.0, 0.5))]
    assert learn_kind(rows, k=5, threshold=0.6, curve=False, repeats=1).groups == 0


@pytest.mark.needs_sklearn
def test_a_head_that_beats_the_engine_on_held_out_rows_is_enabled_with_a_usable_shape():
    result = learn_kind(examples(120, 2.0, 0.5), k=5, threshold=0.6, curve=False)
    assert result.enabled and result.head["accuracy"] > 0.85 > result.engine["accuracy"]
    head = result.fitted
    assert head.options == ["yes", "no"] and len(head.weights) == 2 and head.dim == 8
    probabilities = head.probabilities([3.0] + [0.0] * 7)
    assert probabilities["yes"] > 0.9
    assert head.model_extra["n"] == 120 and head.model_extra["engine_accuracy"] == pytest.approx(
        result.engine["accuracy"], abs=1e-4)


@pytest.mark.needs_sklearn
def test_a_head_that_does_not_beat_the_engine_stays_off_and_says_why():
    result = learn_kind(examples(120, 0.0, 0.95), k=5, threshold=0.6, curve=False)
    assert not result.enabled and result.fitted is None
    assert "does not beat the engine" in result.why_not


def worded(rows: list[Example], decisive: bool, seed: int = 0) -> list[Example]:
    """The rows with the wording of their commands: `decisive`, a destructive row's command has
    a flag the others lack; otherwise both labels draw their words alike."""
    from system1.core import lexical

    rng = random.Random(seed)
    flags = ["--verbose", "--color", "-q", "--dry-run-report"]
    out = []
    for r in rows:
        flag = "--force" if decisive and r.label == "yes" else rng.choice(flags)
        out.append(replace(r, lexical=lexical.features({"command": f"tool{rng.randrange(40)} {flag} target{rng.randrange(40)}"})))
    return out


@pytest.mark.needs_sklearn
def test_a_head_reads_the_wording_only_where_it_predicts_held_out_rows_better():
    base = examples(120, 0.5, 0.5)  # an embedding that barely separates the labels
    decided = learn_kind(worded(base, decisive=True), k=5, threshold=0.6, curve=False, repeats=2)
    assert decided.wording and decided.head["accuracy"] > 0.95 > decided.embedding_only["accuracy"]
    head = decided.fitted
    assert head.lexical and head.probabilities([0.0] * 8, {"command": "tool3 --force target9"})["yes"] > 0.8
    assert head.probabilities([0.0] * 8, {"command": "tool3 --color target9"})["yes"] < 0.2
    noise = learn_kind(worded(examples(120, 2.0, 0.5), decisive=False), k=5, threshold=0.6, curve=False, repeats=2)
    assert not noise.wording and noise.fitted.lexical is None and noise.embedding_only is not None


def test_a_kind_with_too_few_rows_for_an_option_gets_no_head():
    rows = [e for e in examples(60, 2.0, 0.5) if e.label == "no"] + examples(60, 2.0, 0.5)[1:8:2]
    result = learn_kind(rows, k=5, threshold=0.6, curve=False)
    assert not result.enabled and "too few rows for 'yes'" in result.why_not and result.head is None


@pytest.mark.needs_sklearn
def test_every_kind_is_learned_separately_and_the_curve_rises_with_rows():
    other = [Example("tier", ("haiku", "sonnet", "opus"), ("haiku", "sonnet", "opus")[i % 3],
                     [float(i % 3 == j) * 3 + random.Random(i).gauss(0, 0.5) for j in range(3)] + [0.0] * 5,
                     {"haiku": 0.4, "sonnet": 0.3, "opus": 0.3}, "systemone", "minilm") for i in range(90)]
    results = learn(examples(120, 1.0, 0.5) + other, k=5, threshold=0.6)
    assert [r.kind for r in results] == [KIND, "tier"] and all(r.enabled for r in results)
    tier = results[1].fitted
    assert len(tier.weights) == 3 and tier.options == ["haiku", "sonnet", "opus"]
    curve = results[0].curve
    assert len(curve) == 4 and curve[0][0] < curve[-1][0]


@pytest.mark.needs_sklearn
def test_the_held_out_figures_are_means_over_splits_drawn_with_different_seeds():
    rows = examples(80, 1.0, 0.5, seed=3)
    once = [learn_kind(rows, k=5, threshold=0.6, curve=False, repeats=1) for _ in range(2)]
    assert once[0].head == once[1].head  # a split is drawn by its seed: the same seed, the same figures
    result = learn_kind(rows, k=5, threshold=0.6, curve=False, repeats=4)
    head = result.head
    assert head["splits"] == 4 and once[0].head["splits"] == 1
    low, high = head["ece_range"]
    assert low <= head["ece"] <= high and low < high  # another split, another ECE: hence the mean
    assert head["ece_range"][0] <= once[0].head["ece"] <= head["ece_range"][1]  # seed 0 is one of the four


def test_ece_at_the_threshold_counts_only_the_rows_answered_there():
    from system1.offline.fitting import Answered
    from system1.offline.learning import _summary

    rows = [Answered(KIND, ("yes", "no"), "yes", {}, "systemone", "minilm")] * 4
    probabilities = [{"yes": 0.9, "no": 0.1}, {"yes": 0.9, "no": 0.1},  # answered at 0.6; both right
                     {"yes": 0.45, "no": 0.55}, {"yes": 0.45, "no": 0.55}]  # not answered (0.55 < 0.6); wrong
    summary = _summary(rows, probabilities, 0.6)
    assert summary["at_threshold"]["coverage"] == 0.5 and summary["at_threshold"]["accuracy"] == 1.0
    assert summary["at_threshold"]["ece"] == pytest.approx(0.1)  # |0.9 - 1| on the two answered rows
    assert summary["ece"] == pytest.approx((0.1 * 2 + 0.55 * 2) / 4)  # every row: the unanswered add |0.55 - 0|


@pytest.mark.needs_sklearn
def test_teacher_rows_train_every_fold_and_the_final_head_but_every_figure_is_on_human_rows():
    human = examples(24, 1.0, 0.5)
    right = [replace(e, teacher=True) for e in examples(200, 1.0, 0.5, seed=1)]
    wrong = [replace(e, label="no" if e.label == "yes" else "yes") for e in right]
    taught = learn_kind(human, k=4, threshold=0.6, curve=False, taught=right, repeats=1)
    misled = learn_kind(human, k=4, threshold=0.6, curve=False, taught=wrong, repeats=1)
    assert taught.rows == 24 and taught.teacher_rows == 200
    assert taught.without_teacher == learn_kind(human, k=4, threshold=0.6, curve=False, repeats=1).head
    # Flipped teacher labels drag the held-out accuracy on the human rows below chance: they are trained on.
    assert misled.head["accuracy"] < 0.5 < taught.head["accuracy"]
    assert taught.fitted is not None and taught.fitted.model_extra["n"] == 224


def test_a_kind_with_teacher_rows_and_no_human_row_is_not_fitted():
    taught = [replace(e, teacher=True) for e in examples(40, 2.0, 0.5)]
    [result] = learn(taught, 4, 0.6)
    assert not result.enabled and result.teacher_rows == 40 and "no human-labelled row" in result.why_not


@pytest.mark.needs_sklearn
def test_a_topic_of_few_examples_is_not_outvoted_by_topics_of_many():
    """The topic head weighs every topic alike, however many examples each has; another kind's
    head keeps the rows' own proportions."""
    rng = random.Random(3)
    centres = {"billing": 0.0, "code-gen": 1.5, "debugging": -1.5}
    sizes = {"billing": 12, "code-gen": 120, "debugging": 120}
    rows = [(label, [rng.gauss(centres[label], 1.0), rng.gauss(0, 1.0)])
            for label, size in sizes.items() for _ in range(size)]

    def head_for(kind: str):
        result = learn_kind([Example(kind, tuple(centres), label, vector, {"code-gen": 0.4}, "systemone", "minilm")
                             for label, vector in rows], k=3, threshold=0.5, curve=False, repeats=1)
        return result.fitted

    topic, other = head_for("router-topic"), head_for("choice:3")
    assert topic.probabilities([0.0, 0.0])["billing"] > 0.5 > other.probabilities([0.0, 0.0])["billing"]
