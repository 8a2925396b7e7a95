"""An optional JSONL log of decisions, size-rotated, written off the request path. Question
text is recorded only when asked for."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..core.jsonl import RotatingJsonl


class RequestLog(RotatingJsonl):
    def __init__(self, path: Path, questions: bool, max_bytes: int, backups: int) -> None:
        super().__init__(path, max_bytes, backups)
        self.questions = questions

    def record(self, response: Any, client: str, payload: Any) -> None:
        entry = {
            "ts": round(time.time(), 3),
            "id": response.request_id,
            "client": client,
            "provider": response.provider,
            "status": response.status,
            "error": response.error.code.value if response.error else None,
            "decision": response.decision,
            "confidence": response.confidence,
            "calibrated": response.calibrated,
            "latency_ms": response.latency_ms,
        }
        if self.questions and isinstance(payload, dict) and isinstance(payload.get("question"), str):
            entry["question"] = payload["question"]
        self.write(entry)
