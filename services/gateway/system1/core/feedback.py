"""Decisions remembered so people can label them (`POST /v1/feedback`), and the labelled rows
they become for `system1 learn`."""

from __future__ import annotations

import asyncio
from typing import Any

from ..providers.base import Query
from .config import LearningSettings
from .heads import kind_of
from .labels import LabelStore, UnknownDecision
from .result import Decision
from .schema import DecideRequest, RequestError


class LabelsOff(Exception):
    """Feedback came, but this gateway remembers no decisions to label."""


class Feedback:
    def __init__(self, settings: LearningSettings, labels: LabelStore | None) -> None:
        self.settings = settings
        self.labels = labels

    def _collects(self, query: Query) -> bool:
        kinds = {query.kind, kind_of(query.question, query.choices, None, query.yes_no)}
        return self.settings.collect or bool(kinds & set(self.settings.collect_kinds))

    async def remember(self, request: DecideRequest, query: Query, decision: Decision) -> None:
        """Keep an answered decision for labelling, when its kind is collected."""
        if decision.provider is not None and self.labels is not None and self._collects(query):
            await asyncio.to_thread(self.labels.remember, decision.request_id, request.kind, request.question,
                                    request.options, request.context, decision.decision)

    def label(self, payload: Any, source: str) -> dict[str, Any]:
        """Label a remembered decision: `RequestError` for a bad body, an unknown request id or a
        label that is not among its options; `LabelsOff` when nothing is collected."""
        if self.labels is None:
            raise LabelsOff("no decisions are remembered: set [learning] collect or collect_kinds")
        if not isinstance(payload, dict) or set(payload) - {"request_id", "label"}:
            raise RequestError("feedback: the body must be {\"request_id\", \"label\"}")
        request_id, label = payload.get("request_id"), payload.get("label")
        if not isinstance(request_id, str) or not request_id.strip():
            raise RequestError("request_id: must be a non-empty string")
        if not isinstance(label, str) or not label.strip():
            raise RequestError("label: must be a non-empty string")
        try:
            return self.labels.label(request_id, label, source)
        except UnknownDecision:
            raise RequestError(f"request_id: no remembered decision {request_id!r} (not collected, or forgotten)") from None
        except ValueError as exc:
            raise RequestError(f"label: {exc}") from None

    def labelled(self, labelled: bool = True) -> list[dict[str, Any]]:
        """The labelled decisions (or, `labelled` False, the unlabelled ones), as `learn` rows."""
        return self.labels.labelled(labelled) if self.labels is not None else []

    def close(self) -> None:
        if self.labels is not None:
            self.labels.close()
