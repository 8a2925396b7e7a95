"""System 2: what passes from one stage to the next, and how the stages' answers become one.

Stage 1 is the chain (the primary with its error fallbacks, learned heads, calibration). A
decision it abstains on for want of confidence or of a text to judge, or answers only through a
fit for questions with no fit of their own (by option count, or for any question), is asked
again of each `[gateway] cascade` provider in turn; the first sure answer decides. If the last
stage is unsure too, the decision abstains: a borrowed fit's answer stands only where the later
stages failed or could not judge the question. The fallback chain stays apart: an engine that
fails is the fallback's case, an engine that is unsure is the cascade's.

The attempts carry every stage's tries, and the rationale names the stage that decided and why
the earlier ones passed.
"""

from __future__ import annotations

from dataclasses import replace

from .result import Decision

#: The abstentions a later stage may resolve: unsure, no fit, no text to judge, the engine's own.
PASSED_ON = frozenset({"threshold", "uncalibrated", "no_evidence", "engine"})


#: Fits for questions with no fit of their own (by option count, or for any unseen question),
#: borrowed by questions that have none: an answer through one is passed on although it cleared
#: the threshold, with the reason below.
BORROWED = frozenset({"options", "unseen"})
WHY_BORROWED = ("through a fit for questions with no fit of their own, which a later stage must confirm: on "
                "new questions the judge is right more often, and where it is not sure either, such answers "
                "were right a third of the time (bench/cascade/UNSEEN.md)")


def passes_on(decision: Decision, kind: str, skip_kinds: list[str]) -> bool:
    """Whether a later stage is asked about `decision` (of question kind `kind`): an abstention
    it may resolve, or the chain's answer calibrated only by a fit for questions with no fit of
    their own. On the blind sets' new questions MiniLM's such answers were right 35–68 % of the
    time at 0.6 and above, the judge more often on the same questions (`after_stage` says what
    comes of it). A later stage's own answer is final: what confirms it was measured for no engine."""
    if kind in skip_kinds:
        return False
    if decision.status == "decided":
        return decision.stage == 1 and decision.calibration in BORROWED
    return decision.status == "abstained" and decision.abstain_reason in PASSED_ON


def why_passed(decision: Decision) -> str:
    """The earlier stage's reason for passing, from its last attempt."""
    if decision.status == "decided":
        return (f"{decision.provider or 'stage 1'}: answered {decision.decision!r} at {decision.confidence:.2f} "
                f"{WHY_BORROWED}")
    last = decision.attempts[-1] if decision.attempts else None
    detail = last.detail if last is not None and last.detail else decision.abstain_reason
    return f"{decision.provider or (last.provider if last else 'stage 1')}: {detail}"


def after_stage(before: Decision, after: Decision, stage: int) -> Decision:
    """One decision from an earlier stage's `before` (an abstention, or an answer through a
    borrowed fit) and stage `stage`'s answer `after` (whose attempts already include `before`'s).
    A stage that failed leaves `before` standing, with the failed tries added; so does one that
    abstained for any reason but doubt (no fit, no text for it, the engine's own refusal), which
    says nothing of the question. A stage that is sure decides; one that is unsure (below the
    threshold) makes an answer it was asked to confirm an abstention."""
    asked = after.provider or (after.attempts[-1].provider if after.attempts else "?")
    if before.status == "decided" and (after.status == "error" or
                                       (after.status == "abstained" and after.abstain_reason != "threshold")):
        why = "failed" if after.status == "error" else "could not judge it"
        note = f"[stage {stage}, {asked}, was asked to confirm it and {why}: this answer stands]"
        return replace(before, attempts=after.attempts, rationale=f"{before.rationale} {note}".strip())
    if after.status == "error":
        return replace(before, attempts=after.attempts)
    note = f"[stage {stage}, {asked}, after {why_passed(before)}]"
    return replace(after, rationale=f"{after.rationale} {note}".strip(), stage=stage)
