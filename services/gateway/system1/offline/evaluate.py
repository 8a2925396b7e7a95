"""`system1 evaluate`: is an engine ready to route? Read-only.

It reads the routing log (the gateway service's, or a file), asks the engine the four routing features (through the gateway,
calibrated, as the hook would) for every entry that has teacher feature labels or an outcome,
and reports:
- per feature: accuracy and AUROC against the teacher labels, and coverage and accuracy at the
  routing threshold;
- the rule on outcome-labelled spawns: safety (the share of failed spawns where the rule would
  have picked a higher tier than the one that failed), with the engine's answers and with the
  teacher labels (the rule's ceiling), and agreement and savings on the successful ones;
- the verdict: READY only if every feature is accurate enough at the threshold, the safety with
  the engine's answers is high enough, and enough failures are labelled.

Log entries are JSON lines with `prompt`, optional `labels` ({feature: "yes"/"no"}) and optional
`outcome` ("failed"/"succeeded") with `outcome_tier` (the model that ran).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .fitting import auroc
from ..hook.features import FEATURES
from ..hook.rule import rank, tier


@dataclass(frozen=True)
class Bars:
    min_feature_accuracy: float = 0.85
    min_safety: float = 0.95
    min_failures: int = 30


@dataclass(frozen=True)
class FeatureAnswer:
    answer: str  # "yes" | "no"
    confidence: float
    p_yes: float


def _share(hits: int, total: int) -> float | None:
    return hits / total if total else None


def assess(entries: list[dict[str, Any]], answers: list[dict[str, FeatureAnswer]], threshold: float) -> dict[str, Any]:
    features: dict[str, Any] = {}
    for name in FEATURES:
        pairs = [(a[name], e["labels"][name]) for e, a in zip(entries, answers)
                 if name in a and name in (e.get("labels") or {})]
        covered = [(fa, label) for fa, label in pairs if fa.confidence >= threshold]
        features[name] = {
            "n": len(pairs),
            "accuracy": _share(sum(fa.answer == label for fa, label in pairs), len(pairs)),
            "auroc": auroc([fa.p_yes for fa, _ in pairs], [label == "yes" for _, label in pairs]),
            "coverage_at_threshold": _share(len(covered), len(pairs)),
            "accuracy_at_threshold": _share(sum(fa.answer == label for fa, label in covered), len(covered)),
        }

    spawns = [(e, a) for e, a in zip(entries, answers) if e.get("outcome") in ("failed", "succeeded") and e.get("outcome_tier")]
    failures = [(e, a) for e, a in spawns if e["outcome"] == "failed"]
    successes = [(e, a) for e, a in spawns if e["outcome"] == "succeeded"]

    def engine_tier(a: dict[str, FeatureAnswer]) -> str:
        return tier({name: fa.answer == "yes" for name, fa in a.items()})

    def teacher_tier(e: dict[str, Any]) -> str | None:
        labels = e.get("labels") or {}
        if not all(name in labels for name in ("read_only", "design", "review")):
            return None
        return tier({name: value == "yes" for name, value in labels.items()})

    def safety(tiers: list[tuple[str | None, str]]) -> float | None:
        known = [(t, ran) for t, ran in tiers if t is not None]
        return _share(sum(rank(t) > rank(ran) for t, ran in known), len(known))

    return {
        "threshold": threshold,
        "features": features,
        "failures": len(failures),
        "successes": len(successes),
        "safety_engine": safety([(engine_tier(a), e["outcome_tier"]) for e, a in failures]),
        "safety_teacher": safety([(teacher_tier(e), e["outcome_tier"]) for e, _ in failures]),
        "agreement": _share(sum(engine_tier(a) == e["outcome_tier"] for e, a in successes), len(successes)),
        "savings": _share(sum(rank(engine_tier(a)) < rank(e["outcome_tier"]) for e, a in successes), len(successes)),
    }


def verdict(report: dict[str, Any], bars: Bars) -> tuple[str, list[str]]:
    """READY or NOT READY, and every reason it is not."""
    reasons = []
    for name, feature in report["features"].items():
        accuracy = feature["accuracy_at_threshold"]
        if accuracy is None:
            reasons.append(f"{name}: no labelled answer clears the threshold {report['threshold']:.2f}")
        elif accuracy < bars.min_feature_accuracy:
            reasons.append(f"{name}: {accuracy:.0%} accurate at the threshold, below {bars.min_feature_accuracy:.0%}")
    if report["failures"] < bars.min_failures:
        reasons.append(f"only {report['failures']} failed spawns are labelled; {bars.min_failures} are needed")
    safety = report["safety_engine"]
    if safety is None or safety < bars.min_safety:
        shown = "unknown" if safety is None else f"{safety:.0%}"
        reasons.append(f"the rule's safety with the engine's answers is {shown}, below {bars.min_safety:.0%}")
    return ("READY" if not reasons else "NOT READY"), reasons


def render(report: dict[str, Any], state: str, reasons: list[str]) -> str:
    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value:.0%}"

    asked = f"provider {report['provider']}" if report.get("provider") else "the gateway's chain"
    lines = [f"Routing readiness of {asked} at threshold {report['threshold']:.2f}", "",
             f"{'feature':<10} {'n':>4} {'accuracy':>9} {'AUROC':>6} {'coverage@t':>11} {'accuracy@t':>11}"]
    for name, f in report["features"].items():
        auc = "-" if f["auroc"] is None else f"{f['auroc']:.2f}"
        lines.append(f"{name:<10} {f['n']:>4} {pct(f['accuracy']):>9} {auc:>6} {pct(f['coverage_at_threshold']):>11} {pct(f['accuracy_at_threshold']):>11}")
    lines += ["", f"spawns: {report['failures']} failed, {report['successes']} succeeded",
              f"rule safety on failures: {pct(report['safety_engine'])} with the engine, {pct(report['safety_teacher'])} with the teacher labels",
              f"on successes: agreement {pct(report['agreement'])}, cheaper tier {pct(report['savings'])}", "",
              f"verdict: {state}"]
    lines += [f"  - {reason}" for reason in reasons]
    return "\n".join(lines)
