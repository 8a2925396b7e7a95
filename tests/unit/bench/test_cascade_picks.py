"""The cascade benchmark's worked-out answers (bench/cascade/run.py `cascade_picks`) follow the
gateway's rule (core/cascade.py `after_stage`): a borrowed fit's answer is the judge's where the
judge is sure, none where it is unsure, and stands where it failed or could not judge."""

from __future__ import annotations

from .modules import bench_module

cascade = bench_module("cascade_run", "cascade/run.py")


def row(choice: str | None, confidence: float | None, status: str = "decided", calibration: str = "options",
        abstain_reason: str | None = None) -> dict:
    return {"set": "blind", "label": "a", "status": status, "choice": choice, "confidence": confidence,
            "calibration": calibration, "abstain_reason": abstain_reason}


# MiniLM sure through a borrowed fit on every row; the judge, row by row:
JUDGE = [
    row("a", 0.9, calibration="unseen"),                                     # 0: sure: its answer
    row("b", 0.5, status="abstained", abstain_reason="threshold"),          # 1: unsure: none
    row(None, None, status="error", calibration=None),                      # 2: failed: MiniLM's stands
    row("a", 0.9, status="abstained", abstain_reason="uncalibrated"),       # 3: could not judge: stands
]


def results(first: list[dict]) -> dict:
    return {"systems": {"minilm+heads": {"rows": first}, "judge": {"rows": JUDGE}}}


def test_a_borrowed_answer_is_the_judges_when_sure_none_when_unsure_and_stands_otherwise():
    first = [row("b", 0.8) for _ in JUDGE]
    picks = cascade.cascade_picks(results(first), list(range(len(JUDGE))), 0.6, skipped=set())
    assert picks == {0: "a", 2: "b", 3: "b"}


def test_the_earlier_rule_lets_every_borrowed_answer_the_judge_is_not_sure_of_stand():
    first = [row("b", 0.8) for _ in JUDGE]
    picks = cascade.cascade_picks(results(first), list(range(len(JUDGE))), 0.6, skipped=set(), stands=True)
    assert picks == {0: "a", 1: "b", 2: "b", 3: "b"}


def test_an_answer_through_the_questions_own_fit_or_a_skipped_kind_is_never_overruled():
    first = [row("b", 0.8, calibration="question"), row("b", 0.8), row("b", 0.8), row("b", 0.8)]
    picks = cascade.cascade_picks(results(first), [0, 1], 0.6, skipped={1})
    assert picks == {0: "b", 1: "b"}


def test_a_judge_answer_below_a_higher_threshold_counts_as_doubt():
    first = [row("b", 0.95), row("b", 0.95)]
    judge = [row("a", 0.75, calibration="unseen"), row("a", 0.95, calibration="unseen")]
    picks = cascade.cascade_picks({"systems": {"minilm+heads": {"rows": first}, "judge": {"rows": judge}}},
                                  [0, 1], 0.8, skipped=set())
    assert picks == {1: "a"}
