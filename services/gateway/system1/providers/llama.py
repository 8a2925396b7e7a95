"""llama.cpp's `llama-server` with a decision GGUF, `POST /v1/systemone` (engines/llama).

The `systemone` mapping, with what this server does differently: it has no batch endpoint (the
lane sends one request per state), no `/v1/embed` (learned heads take their embeddings from
the `[learning]` embedder, the MiniLM service by default), and its option limit is the model's
(52 for openjev models, whose options are the letters A–Z and a–z; 255 for laya, lev, clef):
set `max_options` to it so that a longer list is refused before the call. The reply's `model`
is the server's `--alias`, else the model file's path: only its file name keys calibration, so
moving the file keeps the fits. Its key, if the server was started with `--api-key`, comes from
`SYSTEM1_LLAMA_API_KEY`.

A yes/no question is asked twice in one request: as `noul` (yes is option A) and as a choice
listing no first (yes is B), and the answer is the mean of the two log-odds. A small LLM that
reads option letters leans to whichever letter comes first, by an amount that varies with the
text, which one content-free correction per question cannot take out; the mean of both orders
can (bench/cascade/ORDERS.md). The second order shares the text's prompt prefix in
llama-server's cache, so it costs the question's tokens again, not the text's. The judge's
shipped calibration is fitted on these averaged answers. `both_orders = false` asks once: for
models that do not read letters (laya, lev, clef), whose `noul` and choice scores are not on one
scale, and for any model calibrated on single answers.

The judged text is cut here, before the call, to `max_text_chars` (its start and end kept): an
LLM reads every token of its prompt before it answers (the judge, Qwen2.5-Coder-1.5B, about 80
tokens a second on two CPU cores), so the text's length is the judge's latency: 1,000
characters, about 250 tokens, take about 3 s. The cut keeps a decision within the cascade's
budget and the prompt within the server's context.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import PurePath
from typing import Any, ClassVar, Literal

from pydantic import Field

from .base import EngineAnswer, MalformedResponse, Provider, Query, shares_rationale, shortened
from .jev import qid, read_choice, yes_no_shares
from .systemone import SystemOneOptions, SystemOneProvider


def other_order_id(index: int) -> str:
    return qid(index) + "_other_order"


def other_order(query: Query) -> Query:
    """A yes/no query asked as a choice listing no first (yes is option B)."""
    return replace(query, choices=["no", "yes"], yes_no=False)


def mean_log_odds(p_first: float, p_second: float) -> float:
    """P(yes) whose log-odds are the mean of the two answers': odds √(o₁·o₂)."""
    yes, no = math.sqrt(p_first * p_second), math.sqrt((1.0 - p_first) * (1.0 - p_second))
    return yes / (yes + no) if yes + no > 0 else 0.5  # one sure yes and one sure no: no lean left


class LlamaOptions(SystemOneOptions):
    endpoint: str = "http://127.0.0.1:8080"
    batch: Literal[False] = False  # llama-server has no batch endpoint
    #: The judged text's characters sent at most (about 4 a token): see the module's note.
    max_text_chars: int = Field(default=1000, ge=100, le=1_000_000)
    #: Ask a yes/no question in both option orders and average (letter-reading models such as
    #: the judge): see the module's note.
    both_orders: bool = True


class LlamaProvider(SystemOneProvider):
    name = "llama"
    Options: ClassVar[type[LlamaOptions]] = LlamaOptions
    secret_env = ("SYSTEM1_LLAMA_API_KEY",)

    @property
    def model_id(self) -> str:
        return self.options.model or "llama-server"

    def extra_body(self, queries: list[Query]) -> dict[str, Any]:
        return {}  # it would refuse serve.py's `embed` field

    embed = Provider.embed  # no embeddings: `ProviderError`

    async def decide_many(self, state: Any, queries: list[Query], timeout_s: float) -> list[EngineAnswer]:
        return await super().decide_many(shortened(state, self.options.max_text_chars), queries, timeout_s)

    def questions(self, queries: list[Query]) -> dict[str, Any]:
        asked = super().questions(queries)
        if self.options.both_orders:
            asked |= {other_order_id(i): self.question(other_order(q)) for i, q in enumerate(queries) if q.yes_no}
        return asked

    def read_reply(self, reply: Any, queries: list[Query]) -> list[EngineAnswer]:
        answers = super().read_reply(reply, queries)
        if not self.options.both_orders:
            return answers
        return [self._both_orders(reply["answers"], i, query, answer) if query.yes_no else answer
                for i, (query, answer) in enumerate(zip(queries, answers, strict=True))]

    def _both_orders(self, replies: dict[str, Any], index: int, query: Query, first: EngineAnswer) -> EngineAnswer:
        key = other_order_id(index)
        where = f"{self.name} {key}"
        if key not in replies:
            raise MalformedResponse(f"{self.name}: no answer for question {key}")
        _, shares = read_choice(replies[key], other_order(query), where)
        no_first = shares.get("yes")
        if no_first is None or not 0.0 <= no_first <= 1.0:
            raise MalformedResponse(f"{where}: P(yes) {no_first!r} is not a probability")
        yes_first = first.probabilities["yes"]
        choice, both = yes_no_shares(mean_log_odds(yes_first, no_first))
        label = f"{self.name} {first.model}, yes first {yes_first:.2f}, no first {no_first:.2f}, both"
        return replace(first, decision=choice, confidence=both[choice], probabilities=both,
                       rationale=shares_rationale(label, both))

    def answered_model(self, reply: dict[str, Any]) -> str:
        model = str(reply.get("model") or self.model_id)
        return PurePath(model).name if "/" in model else model
