"""A later stage's head stacked on the stage before (offline/stacking.py)."""

from __future__ import annotations

import numpy as np

from system1.core.heads import HeadsFile
from system1.offline.fitting import auroc
from system1.offline.learn import merge
from system1.offline.stacking import held_out_stacked, stacked_head


def rows(n: int = 400, seed: int = 0):
    """Labels that two independent signals decide: one the earlier stage sees, one only the
    vectors carry (on their first axis, the rest noise)."""
    rng = np.random.default_rng(seed)
    seen, unseen = rng.normal(size=n), rng.normal(size=n)
    yes = seen + unseen + 0.3 * rng.normal(size=n) > 0
    earlier = 1 / (1 + np.exp(-2 * seen))
    vectors = np.column_stack([unseen, rng.normal(size=(n, 7))])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    labels = ["yes" if y else "no" for y in yes]
    groups = [f"g{i % 40}" for i in range(n)]
    return vectors, list(earlier), labels, groups, yes


def test_a_stacked_head_adds_what_only_the_vectors_know_to_the_earlier_stage():
    vectors, earlier, labels, groups, yes = rows()
    stacked = held_out_stacked("k", ("yes", "no"), vectors, earlier, labels, groups)
    assert auroc(stacked, list(yes)) > auroc(earlier, list(yes)) + 0.05


def test_the_folded_head_answers_as_the_fit_and_survives_the_heads_file(tmp_path):
    vectors, earlier, labels, groups, yes = rows(seed=1)
    head = stacked_head("k", ("yes", "no"), vectors, earlier, labels, groups, "llama", "judge")
    assert head.embedder == "llama" and head.earlier is not None and head.earlier[0] > 0
    p = [head.probabilities(list(v), None, {"yes": e, "no": 1 - e})["yes"] for v, e in zip(vectors, earlier)]
    assert auroc(p, list(yes)) > auroc(earlier, list(yes))
    merge(tmp_path / "heads.json", [head])
    (read,) = HeadsFile.model_validate_json((tmp_path / "heads.json").read_text()).heads
    assert read.probabilities(list(vectors[0]), None, {"yes": earlier[0], "no": 1 - earlier[0]})["yes"] == p[0]
