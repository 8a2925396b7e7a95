"""llama.cpp's `llama-server` with a decision GGUF, `POST /v1/systemone` (engines/llama).

The `systemone` mapping, with what this server does differently: it has no batch endpoint (the
lane sends one request per state), no `/v1/embed` (first-stage heads take their embeddings from
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
tokens a second on two CPU cores with a portable llama-server, about 1.4 times that with one
compiled for the CPU, bench/llama/BUILD.md), so the text's length is the judge's latency: 1,000
characters, about 250 tokens, take about 2–3 s. The cut keeps a decision within the cascade's
budget and the prompt within the server's context.

The model's reading (`embed`): a server started with `--embeddings --pooling last` also gives
the last hidden state of a prompt that puts the question and the judged text to the model as a
chat turn (`reading_prompt`), ending where the answer would be written. A cascade stage's own
learned heads read it in place of the answer (`core/stages.py`): a small LLM knows more than its
first answer token says (bench/privacy/PROBE.md). The same cut applies; one model pass, as an
answer in one order costs.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import PurePath
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from .base import EngineAnswer, MalformedResponse, Query, plain_text, shares_rationale, shortened
from .jev import qid, read_choice, state_of, yes_no_shares
from .systemone import SystemOneOptions, SystemOneProvider, finite_vector

#: The chat turn the model reads for `embed` (ChatML, the judge's format); ends where it answers.
READING_PROMPT = ("<|im_start|>user\n{question}\n\nText:\n{text}\n\n{answer}<|im_end|>\n"
                  "<|im_start|>assistant\n")


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
    #: The prompt `embed` reads (`{question}`, `{text}`, `{answer}`: how to answer).
    reading_prompt: str = READING_PROMPT

    @field_validator("reading_prompt")
    @classmethod
    def _fills(cls, template: str) -> str:
        """Refused at load, not at the first reading: a template must take the three fields alone."""
        try:
            template.format(question="", text="", answer="")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"reading_prompt takes {{question}}, {{text}} and {{answer}} only "
                             f"(double a literal brace): {exc!r}") from None
        return template


def reading_text(state: Any) -> str:
    """The judged text as the reading puts it: a context that is one text, that text alone."""
    if isinstance(state, dict) and len(state) == 1:
        (value,) = state.values()
        if isinstance(value, str):
            return value
    return plain_text(state)


def reading(options: LlamaOptions, state: Any, query: Query) -> str:
    """The prompt whose last hidden state `embed` returns: the question and the cut text."""
    text = reading_text(state_of(shortened(state, options.max_text_chars), [query]))
    answer = "Answer yes or no." if query.yes_no else "Answer with one of: " + ", ".join(query.choices) + "."
    return options.reading_prompt.format(question=query.question, text=text, answer=answer)


class LlamaProvider(SystemOneProvider):
    name = "llama"
    Options: ClassVar[type[LlamaOptions]] = LlamaOptions
    secret_env = ("SYSTEM1_LLAMA_API_KEY",)
    #: The model the server last named (its `--alias`, else the file's name), for `embed`.
    _served: str | None = None

    @property
    def model_id(self) -> str:
        return self.options.model or "llama-server"

    def extra_body(self, queries: list[Query]) -> dict[str, Any]:
        return {}  # it would refuse serve.py's `embed` field

    async def embed(self, state: Any, query: Query, timeout_s: float, model: str | None = None) -> tuple[str, list[float]]:
        """`POST /embedding`: the model's last hidden state after `reading` (the server must run
        with `--embeddings --pooling last`; its vector is of unit length). `model` is not asked:
        the server has one model, named by `GET /v1/models` once and by each answer's reply."""
        if self._served is None:
            listed = await self.engine.request("GET", "/v1/models", timeout_s, None, self.headers(timeout_s))
            data = listed.get("data") if isinstance(listed, dict) else None
            if not isinstance(data, list) or not data or not isinstance(data[0], dict) or not data[0].get("id"):
                raise MalformedResponse(f"{self.name}: /v1/models names no model", provider=self.name,
                                        url=self.engine.where)
            self._served = self._file_name(str(data[0]["id"]))
        body = {"content": reading(self.options, state, query)}
        reply = await self.engine.request("POST", "/embedding", timeout_s, body, self.headers(timeout_s))
        pooled = isinstance(reply, list) and len(reply) == 1 and isinstance(reply[0], dict)
        vectors = reply[0].get("embedding") if pooled else None
        # pooled: one vector, nested once; `--pooling none` would give one per token
        vector = finite_vector(vectors[0]) if isinstance(vectors, list) and len(vectors) == 1 else None
        if vector is None:
            raise MalformedResponse(f"{self.name}: /embedding gave no pooled vector (run llama-server with "
                                    "--embeddings --pooling last)", provider=self.name, url=self.engine.where)
        return self._served, vector

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
        self._served = self._file_name(str(reply.get("model") or self.model_id))
        return self._served

    @staticmethod
    def _file_name(model: str) -> str:
        return PurePath(model).name if "/" in model else model
