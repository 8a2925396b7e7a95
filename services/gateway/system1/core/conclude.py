"""One engine answer becomes one `Decision`: corrected and tempered by its fit, or replaced by a
learned head's probabilities, held to the threshold, with a rationale that says which."""

from __future__ import annotations

from typing import Any, Literal

from ..providers.base import EngineAnswer
from .calibration import Fit, correct
from .chain import ChainAnswer
from .learned import Learned
from .result import Decision
from .schema import Attempt

# What the rationale says about calibration, by the kind of fit that applied.
CALIBRATION_NOTES = {
    "question": "confidence calibrated by this question's fit",
    "options": "confidence calibrated by the fit for this many options",
    "unseen": "confidence calibrated by the engine's fit for questions it has no fit for",
    "none": "confidence uncalibrated: no fit for this engine and question",
    "no_baseline": "confidence uncalibrated: the engine's answer to an empty context, which this engine's fits "
                   "need, could not be had",
}
CONTENT_FREE_NOTE = ", after dividing out the engine's answer to an empty context"


def failed(request_id: str, found: ChainAnswer, tried: list[Attempt] | None = None) -> Decision:
    """The chain's failure as a decision (`tried`: the attempts of earlier stages)."""
    code, message = found.failure
    decision = Decision.failed(code, message, request_id, [*(tried or []), *found.attempts])
    decision.retry_after_s = found.retry_after_s
    return decision


def no_evidence(request_id: str, names: list[str], tried: list[Attempt]) -> Decision:
    """The abstention for a question with no text to judge, where none of `names` can answer
    without one (see `answers_without_context`)."""
    detail = "no text to judge: a yes/no question, or a choice given a context, needs a text in it for this engine"
    rationale = (f"nothing to judge: the question came with no context, or one with no text in it, and "
                 f"{', '.join(names)} can only weigh a question against a text. Give the text it is about, "
                 "or decide this yourself.")
    attempt = Attempt(provider=names[0], outcome="abstained", latency_ms=0, detail=detail)
    return Decision(request_id, "abstained", rationale=rationale, attempts=[*tried, attempt],
                    abstain_reason="no_evidence")


def relevance_only(request_id: str, name: str, answer: EngineAnswer, attempts: list[Attempt]) -> Decision:
    """The abstention for a yes/no answer that only says how related the text is to the question
    (`EngineAnswer.relevance`), with no head or fit of this question's own to read it as one."""
    detail = "a yes/no answer from relevance alone: no learned head or fit for this question reads it"
    rationale = (f"nothing this engine can judge: {name} {answer.model} only measures how related the text is to "
                 "the question, which reads the same for a question and its opposite, and no learned head or "
                 "calibration fit for this question turns that into an answer. Decide this yourself, or label "
                 "some answers to it (system1 learn).")
    attempts[-1] = attempts[-1].model_copy(update={"outcome": "abstained", "detail": detail})
    return Decision(request_id, "abstained", rationale=rationale, provider=name, model=answer.model,
                    attempts=attempts, abstain_reason="no_evidence")


def conclude(
    request_id: str, tried: list[Attempt], name: str, answer: EngineAnswer, threshold: float, calibrate: bool,
    fit: Fit | None, baseline: dict[str, float] | None, learned: Learned | None,
    uncalibrated: Literal["pass", "abstain"],
) -> Decision:
    """The decision for provider `name`'s `answer` (`tried`: the chain's attempts)."""
    attempts = list(tried)
    common: dict[str, Any] = {"request_id": request_id, "provider": name, "model": answer.model,
                              "attempts": attempts}
    if answer.abstain:
        return Decision(status="abstained", rationale=answer.rationale or f"{name} abstained",
                        abstain_reason="engine", **common)
    probabilities, choice = answer.probabilities, answer.decision
    confidence = float(answer.confidence)
    note = "none"
    if fit is not None and fit.content_free and baseline is None:
        fit, note = None, "no_baseline"
    if fit is not None:
        probabilities = fit.apply(correct(probabilities, baseline) if baseline else probabilities)
        choice = max(probabilities, key=probabilities.__getitem__)  # the correction may change the winner
        confidence, note = probabilities[choice], fit.kind
    common["calibration"] = fit.kind if fit else "none"
    if learned is not None:
        head, probabilities = learned
        choice = max(probabilities, key=probabilities.__getitem__)
        confidence, note = probabilities[choice], "head"
        common["calibration"], common["head"] = "head", head.kind
        attempts[-1] = attempts[-1].model_copy(update={"detail": f"answered by {head.describe()}"})
    if calibrate and answer.relevance and learned is None and (fit is None or fit.kind != "question"):
        return relevance_only(request_id, name, answer, attempts)
    if calibrate and fit is None and learned is None and uncalibrated == "abstain":
        rationale = (f"no calibration fit applies to {name} {answer.model} here, and [gateway] uncalibrated = "
                     f'"abstain": decide this yourself. {answer.rationale or ""}').strip()
        return Decision(status="abstained", confidence=confidence, probabilities=probabilities,
                        rationale=rationale, abstain_reason="uncalibrated", **common)
    rationale_tail = ""
    if calibrate:
        noted = f"decided by {learned[0].describe()}" if learned else CALIBRATION_NOTES[note]
        rationale_tail = f" ({noted}{CONTENT_FREE_NOTE if baseline and fit else ''}"
        rationale_tail += f"; the engine's own first choice was {answer.decision!r})" if choice != answer.decision else ")"
    if confidence < threshold:
        attempts[-1] = attempts[-1].model_copy(
            update={"outcome": "abstained", "detail": f"confidence {confidence:.2f} below {threshold:.2f}"}
        )
        rationale = (f"not sure enough: confidence {confidence:.2f} is below the threshold {threshold:.2f}, "
                     f"so decide this yourself. {answer.rationale or ''}").strip() + rationale_tail
        return Decision(status="abstained", confidence=confidence, probabilities=probabilities,
                        rationale=rationale, abstain_reason="threshold", **common)
    return Decision(status="decided", decision=choice, confidence=confidence, probabilities=probabilities,
                    rationale=(answer.rationale or "") + rationale_tail, **common)
