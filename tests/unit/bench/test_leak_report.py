"""The leak benchmark's summary (bench/privacy/run.py): what `local_only` adds to a prompt is
read only where stage 1 cleared it and its twin under `private = "ignore"` was timed."""

from __future__ import annotations

from .modules import bench_module

leak = bench_module("leak_run", "privacy/run.py")


def answer(row: dict, **fields) -> dict:
    base = {"id": row["id"], "local_only": row["private"], "caught_by": None, "private_by": "stage 1: systemone",
            "findings": [], "dry_run_ms": 100.0, "decision_ms": 90.0, "precheck_ms": 0.2}
    return {**base, **fields}


def test_what_local_only_adds_is_each_cleared_prompts_time_less_its_twins_under_ignore():
    rows = leak.blind("blind.jsonl")[:5]
    answers = [
        answer(rows[0], dry_run_ms=103.0, ignore_dry_run_ms=100.0),
        answer(rows[1], dry_run_ms=90.0, ignore_dry_run_ms=99.0),
        answer(rows[4], dry_run_ms=105.0, ignore_dry_run_ms=100.0),
        # passed to the judge: not a cleared prompt, whatever its twin took
        answer(rows[2], dry_run_ms=2500.0, ignore_dry_run_ms=100.0, private_by="stage 2: llama"),
        # a pre-check finding: not cleared by stage 1
        answer(rows[3], dry_run_ms=400.0, ignore_dry_run_ms=100.0, findings=["GitHub token"]),
    ]
    summary = leak.summary({"blind": "blind.jsonl", "answers": answers})
    assert summary["added_n"] == 3  # differences 3, -9 and 5 ms
    assert (summary["added_p50_ms"], summary["added_p90_ms"]) == (3.0, 5.0)


def test_a_run_without_twins_reports_no_added_time():
    rows = leak.blind("blind.jsonl")[:2]
    summary = leak.summary({"blind": "blind.jsonl", "answers": [answer(r) for r in rows]})
    assert summary["added_n"] == 0
    assert summary["added_p50_ms"] is None
