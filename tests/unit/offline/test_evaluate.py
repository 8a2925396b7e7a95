"""`system1 evaluate`: the readiness measures and the verdict at and around each bar."""

from __future__ import annotations

import json

import pytest

from system1.cli import EXIT_HEALTH, main
from system1.offline.evaluate import Bars, FeatureAnswer, assess, verdict
from system1.hook.features import FEATURES

from ..service_harness import app_transport


def answers(read_only="no", design="no", review="no", specified="no", confidence=0.9):
    values = {"read_only": read_only, "design": design, "review": review, "specified": specified}
    return {k: FeatureAnswer(v, confidence, confidence if v == "yes" else 1 - confidence) for k, v in values.items()}


def labels(**overrides):
    return {"labels": {name: overrides.get(name, "no") for name in FEATURES}}


def test_feature_accuracy_auroc_and_the_threshold():
    entries = [{"prompt": "a", **labels(design="yes")}, {"prompt": "b", **labels()}, {"prompt": "c", **labels(design="yes")}]
    given = [answers(design="yes"), answers(design="yes", confidence=0.55), answers(design="no", confidence=0.95)]
    report = assess(entries, given, threshold=0.6)
    design = report["features"]["design"]
    assert design["n"] == 3 and design["accuracy"] == pytest.approx(1 / 3)
    assert design["coverage_at_threshold"] == pytest.approx(2 / 3) and design["accuracy_at_threshold"] == 0.5
    # P(yes): a 0.9 (yes), b 0.55 (no), c 0.05 (yes): pairs (.9 > .55) win, (.05 < .55) lose.
    assert design["auroc"] == 0.5


def test_safety_counts_failures_the_rule_would_have_sent_higher():
    entries = [
        {"prompt": "p1", "outcome": "failed", "outcome_tier": "haiku", **labels(design="yes")},
        {"prompt": "p2", "outcome": "failed", "outcome_tier": "sonnet", **labels()},
        {"prompt": "p3", "outcome": "succeeded", "outcome_tier": "sonnet", **labels()},
        {"prompt": "p4", "outcome": "succeeded", "outcome_tier": "opus", **labels(read_only="yes")},
    ]
    given = [answers(design="yes"), answers(), answers(), answers(read_only="yes")]
    report = assess(entries, given, 0.6)
    assert (report["failures"], report["successes"]) == (2, 2)
    assert report["safety_engine"] == 0.5  # opus > haiku for p1; sonnet == sonnet for p2
    assert report["safety_teacher"] == 0.5
    assert report["agreement"] == 0.5 and report["savings"] == 0.5  # p4: haiku < opus


def ready_report(accuracy=0.85, safety=0.95, failures=30):
    feature = {"n": 40, "accuracy": accuracy, "auroc": 0.9, "coverage_at_threshold": 0.8, "accuracy_at_threshold": accuracy}
    return {"threshold": 0.6, "features": {name: dict(feature) for name in FEATURES},
            "failures": failures, "successes": 100, "safety_engine": safety, "safety_teacher": 1.0,
            "agreement": 0.7, "savings": 0.2}


def test_ready_exactly_at_every_bar():
    assert verdict(ready_report(), Bars()) == ("READY", [])


@pytest.mark.parametrize(
    ("report", "reason"),
    [
        (ready_report(accuracy=0.849), "below 85%"),
        (ready_report(safety=0.949), "safety with the engine's answers is 95%, below 95%"),
        (ready_report(failures=29), "only 29 failed spawns"),
        (ready_report(safety=None), "is unknown"),
    ],
)
def test_not_ready_just_below_any_bar(report, reason):
    state, reasons = verdict(report, Bars())
    assert state == "NOT READY" and any(reason in r for r in reasons)


def test_the_bars_can_be_changed():
    assert verdict(ready_report(accuracy=0.8, failures=10), Bars(min_feature_accuracy=0.8, min_failures=10))[0] == "READY"


def test_the_command_asks_the_engine_and_prints_the_verdict(tmp_path, monkeypatch, capsys):
    log = tmp_path / "routing.jsonl"
    log.write_text("\n".join(json.dumps(e) for e in [
        {"prompt": "Rename a variable in utils.py", **labels(specified="yes")},
        {"prompt": "Design the cache", "outcome": "failed", "outcome_tier": "sonnet", **labels(design="yes")},
        {"prompt": "not labelled, skipped"},
    ]) + "\n")
    transport, _ = app_transport(tmp_path, '[gateway]\nprovider = "mock"\n')
    monkeypatch.setenv("SYSTEM1_INSTALL_DIR", str(tmp_path / "state"))
    code = main(["evaluate", "--log", str(log), "--json", "--min-failures", "1"], transport=transport)
    report = json.loads(capsys.readouterr().out)
    # The mock says "yes" to everything with confidence 0.9.
    assert report["features"]["specified"]["accuracy"] == 0.5 and report["features"]["design"]["accuracy"] == 0.5
    assert report["failures"] == 1 and report["safety_engine"] == 1.0  # yes to design → opus > sonnet
    assert report["verdict"] == "NOT READY" and code == EXIT_HEALTH
