"""Which calibration fit applies to each answer, and the content-free answers those fits need
(remembered, or asked of the provider that answered, in one pass for every question not asked
yet)."""

from __future__ import annotations

import json
from typing import Any

from ..providers.base import EngineAnswer, Query, context_text
from .calibration import Baselines, Calibrator, Fit, content_free
from .chain import Chain
from .work import work_of


class AnswerCalibration:
    def __init__(self, calibrator: Calibrator, chain: Chain) -> None:
        self.calibrator = calibrator
        self.baselines = Baselines()
        self.chain = chain

    def fit(self, name: str, answer: EngineAnswer, query: Query, state: Any) -> Fit | None:
        """The calibration fit for this answer, or None (also for engines without probabilities)."""
        if not answer.probabilities or answer.decision not in answer.probabilities:
            return None
        return self.calibrator.lookup(name, answer.model, query.question, len(query.choices),
                                      has_context=context_text(state) is not None)

    async def content_free(
        self, state: Any, queries: list[Query], name: str, replies: list[EngineAnswer], fits: list[Fit | None],
        client: str, priority: int, budget_s: float | None,
    ) -> list[dict[str, float] | None]:
        """The content-free answers that the applying fits need, of the provider that answered."""
        if not any(fit is not None and fit.content_free for fit in fits):
            return [None] * len(queries)
        blank = content_free(state)
        shape = json.dumps(blank, sort_keys=True)
        keys = [(name, reply.model, query.question, tuple(query.choices), shape)
                if fit is not None and fit.content_free else None
                for fit, reply, query in zip(fits, replies, queries)]
        missing = [(i, key) for i, key in enumerate(keys) if key is not None and self.baselines.get(key) is None]
        if missing and (budget_s is None or budget_s > 0):
            asked = [queries[i] for i, _ in missing]
            probe = await self.chain.ask(blank, asked, client, priority, budget_s, work_of(blank, asked), names=[name])
            for (i, key), reply in zip(missing, probe.answers or []):
                if reply.model == replies[i].model and reply.probabilities and not reply.abstain:
                    self.baselines.put(key, reply.probabilities)
        return [self.baselines.get(key) if key is not None else None for key in keys]
