"""`Decision`: the one result the core returns, for a decision and for each routing feature.

Every fact about an answer is a public field here; the edges translate it once, with
`envelope()`, into the schema v1 response (REST, MCP, the request log), and read the rest
(`model`, `retry_after_s`, `abstain_reason`) for headers and metrics.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .schema import Attempt, DecideResponse, ErrorCode, ErrorInfo, Status, new_request_id

AbstainReason = Literal["engine", "threshold", "paused", "uncalibrated", "no_evidence"]
Calibration = Literal["question", "options", "unseen", "head", "none"]


@dataclass
class Decision:
    request_id: str
    status: Status
    decision: str | None = None
    confidence: float | None = None
    probabilities: dict[str, float] | None = None
    rationale: str | None = None
    provider: str | None = None
    #: The model or checkpoint that answered; calibration fits are keyed by it.
    model: str | None = None
    attempts: list[Attempt] = field(default_factory=list)
    error: ErrorInfo | None = None
    latency_ms: int = 0
    #: Why it abstained, for metrics.
    abstain_reason: AbstainReason | None = None
    #: Which calibration fit applied (see `core.calibration`); None when no engine answered.
    calibration: Calibration | None = None
    #: Set when every provider turned the request away at the door: seconds to wait.
    retry_after_s: int | None = None
    #: The kind whose learned head answered (see `core.heads`), for metrics.
    head: str | None = None
    #: The cascade stage that gave this answer (see `core.cascade`): 1 for the chain.
    stage: int = 1
    #: How a reworded question was asked (see `core.rewording`): "same" as the head's question,
    #: "opposite" (its answer turned back), or None: as worded.
    read_as: str | None = None

    @classmethod
    def failed(
        cls, code: ErrorCode, message: str, request_id: str | None = None, attempts: list[Attempt] | None = None
    ) -> Decision:
        return cls(request_id or new_request_id(), "error", attempts=list(attempts or []),
                   error=ErrorInfo(code=code, message=message))

    @property
    def calibrated(self) -> bool:
        return self.calibration not in (None, "none")

    @property
    def error_code(self) -> ErrorCode | None:
        return self.error.code if self.error else None

    def envelope(self) -> DecideResponse:
        """The schema v1 response."""
        return DecideResponse(
            request_id=self.request_id, status=self.status, decision=self.decision, confidence=self.confidence,
            rationale=self.rationale, provider=self.provider, probabilities=self.probabilities,
            calibrated=self.calibrated, latency_ms=self.latency_ms, attempts=self.attempts, error=self.error,
        )

    def envelope_json(self) -> dict[str, Any]:
        return self.envelope().model_dump(mode="json")

    def envelope_bytes(self) -> bytes:
        """The envelope serialised, as REST sends it (pydantic's own serialiser, no dict between)."""
        return self.envelope().model_dump_json().encode()
