"""The stages of one decision: the chain (stage 1), then each `[gateway] cascade` provider
for what the stages before passed on (`cascade.py` says what passes and how the answers become
one), each stage's answers checked, answered by a learned head or calibrated, and held to the
threshold. A later stage with a head of its own for the question reads instead (`reading.py`)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..providers.base import Provider, Query, has_evidence
from .calibrating import AnswerCalibration
from .cascade import after_stage, passes_on
from .chain import Chain
from .conclude import conclude, failed, no_evidence
from .config import GatewaySettings
from .heads import kind_of
from .learned import LearnedHeads
from .reading import read_one
from .result import Decision
from .schema import Attempt
from .work import work_of


@dataclass(frozen=True)
class Asking:
    """What every stage of one `decide_many` call shares."""

    state: Any
    client: str
    priority: int
    threshold: float
    calibrate: bool
    request_id: str
    deadline: float | None


class Stages:
    def __init__(self, providers: Mapping[str, Provider], chain: Chain, learned: LearnedHeads,
                 calibration: AnswerCalibration, settings: GatewaySettings) -> None:
        self.providers = providers
        self.chain = chain
        self.learned = learned
        self.calibration = calibration
        self.settings = settings

    async def cascade(self, asked: Asking, queries: list[Query], decisions: list[Decision]) -> list[Decision]:
        """Each `[gateway] cascade` stage in turn, for the decisions the stages before passed on."""
        gateway = self.settings
        loop = asyncio.get_running_loop()
        ends = loop.time() + gateway.cascade_budget_s
        deadline = ends if asked.deadline is None else min(ends, asked.deadline)
        later = replace(asked, deadline=deadline)
        for stage, name in enumerate((n for n in gateway.cascade if n in self.providers), start=2):
            passing = [i for i, (query, decision) in enumerate(zip(queries, decisions))
                       if passes_on(decision, kind_of(query.question, query.choices, query.kind, query.yes_no),
                                    gateway.cascade_skip_kinds)]
            if not passing or deadline - loop.time() <= 0:
                break
            read = await asyncio.gather(*(self.read(later, name, queries[i], decisions[i]) for i in passing))
            for i, decision in zip(passing, read):
                if isinstance(decision, Decision):
                    decisions[i] = after_stage(decisions[i], decision, stage)
            # A failed reading's attempt stays in the decision's tries: a stage left with no time
            # to answer after it must not look as though it was never asked.
            unread = {i: [] if reading is None else [reading] for i, reading in zip(passing, read)
                      if not isinstance(reading, Decision)}
            if unread:
                answers = await self.ask(later, [queries[i] for i in unread], [name],
                                            [[*decisions[i].attempts, *tried] for i, tried in unread.items()],
                                            heads=False)
                for i, answer in zip(unread, answers):
                    decisions[i] = after_stage(decisions[i], answer, stage)
        return decisions

    async def read(self, asked: Asking, name: str, query: Query, before: Decision) -> Decision | Attempt | None:
        """Stage `name`'s own head on its reading of `query` (`reading.py`); else ask it."""
        if not asked.calibrate or asked.deadline is None:
            return None
        budget_s = asked.deadline - asyncio.get_running_loop().time()
        return await read_one(self.chain.lanes[name], self.learned.heads, asked.state, query, before,
                              asked.request_id, asked.threshold, budget_s, asked.client, asked.priority)

    async def ask(self, asked: Asking, queries: list[Query], names: list[str], tried: list[list[Attempt]],
                     heads: bool) -> list[Decision]:
        """One stage: `queries` asked of the chain `names`, each concluded after `tried` (the
        attempts of earlier stages). A question with no text to judge goes only to engines that
        answer without one, and abstains where none is left; uncalibrated asks (for fitting,
        which needs the engine's answer to an empty text) go to `names` as they are."""
        decisions: list[Decision | None] = [None] * len(queries)
        groups: dict[tuple[str, ...], list[int]] = {}
        for i, query in enumerate(queries):
            judges = self.askable(asked.state, query, names) if asked.calibrate else names
            groups.setdefault(tuple(judges), []).append(i)
        for group, indexes in groups.items():
            if group:
                answers = await self._answer(asked, [queries[i] for i in indexes], list(group),
                                          [tried[i] for i in indexes], heads)
            else:
                answers = [no_evidence(asked.request_id, names, tried[i]) for i in indexes]
            for i, answer in zip(indexes, answers):
                decisions[i] = answer
        return [d for d in decisions if d is not None]

    def askable(self, state: Any, query: Query, names: list[str]) -> list[str]:
        """The engines of `names` that can judge `query` about `state`. With nothing to judge,
        those that answer from what they know: a text matcher would weigh a yes/no question
        against itself ("yes" for certain), and a choice against a blank text (whichever option
        sits nearest it: a model tier at 0.98 for an empty task). A choice asked with no context
        at all is asked about its own words ("Rerun the flaky pipeline or block the merge?")."""
        if has_evidence(state) or (not query.yes_no and state is None):
            return names
        return [n for n in names if self.providers[n].options.answers_without_context]

    async def _answer(self, asked: Asking, queries: list[Query], names: list[str], tried: list[list[Attempt]],
                   heads: bool) -> list[Decision]:
        """`queries` asked of `names`, the answers checked, calibrated (or answered by a learned
        head) and held to the threshold."""
        loop = asyncio.get_running_loop()

        def left() -> float | None:
            return None if asked.deadline is None else asked.deadline - loop.time()

        state, calibrate = asked.state, asked.calibrate
        found = [self.learned.candidates(q) if heads and calibrate else [] for q in queries]
        if self.learned.answers_with(names):
            # Where the embedder may be the one answering, one pass can carry the embedding too.
            queries = [replace(q, embed=True) if head else q for q, head in zip(queries, found)]
        answer = await self.chain.ask(state, queries, asked.client, asked.priority, left(), work_of(state, queries),
                                      names=names)
        if answer.answers is None or answer.provider is None:
            return [failed(asked.request_id, answer, before) for before in tried]
        learned = await self.learned.apply(state, queries, found, answer.provider, answer.answers, left(),
                                           asked.client, asked.priority)
        fits = [self.calibration.fit(answer.provider, reply, query, state) if calibrate and not head else None
                for reply, query, head in zip(answer.answers, queries, learned)]
        baselines = await self.calibration.content_free(state, queries, answer.provider, answer.answers, fits,
                                                        asked.client, asked.priority, left())
        uncalibrated = self.settings.uncalibrated
        return [conclude(asked.request_id, [*before, *answer.attempts], answer.provider, reply,
                         asked.threshold if query.min_confidence is None else query.min_confidence,
                         calibrate, fit, baseline, head, uncalibrated)
                for reply, query, fit, baseline, head, before
                in zip(answer.answers, queries, fits, baselines, learned, tried)]
