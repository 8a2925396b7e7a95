"""The `/v1/systemone` ("Jev") wire contract shared by Laya, Von, llama-server and serve.py.

Request: `{"model"?, "state", "questions": {qid: {"type": "choice" | "score" | "noul",
"instructions", "criteria"}}}`; answer per qid: `{"type": "choice", "choice", "probabilities",
"confidence"}`, `{"type": "score", "score", "legend", "probabilities": {"0": p, …}}` or
`{"type": "noul", "noul": P(yes)}`. The engines' own `confidence` fields are on other scales
(Jev's margin, Laya's entropy), so adapters report the probability of the chosen option (for a
score, of the most likely level).
"""

from __future__ import annotations

import math
import os
from typing import Any, ClassVar

import httpx

from .base import (
    Capabilities,
    EngineAnswer,
    HealthProbe,
    MalformedResponse,
    Provider,
    ProviderError,
    Query,
    shares_rationale,
)
from .http import HttpEngine, HttpOptions, make_client

#: The time the gateway still waits for this answer, in milliseconds.
TIMEOUT_HEADER = "X-System1-Timeout-Ms"


def state_of(state: Any, queries: list[Query]) -> Any:
    """The text the engine reads: the given state, else a lone question itself."""
    if state not in (None, {}, ""):
        return state
    return queries[0].question if len(queries) == 1 else ""


def qid(index: int) -> str:
    return f"q{index}"


def _probability(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise MalformedResponse(f"{where} is not a number: {value!r}")
    return float(value)


def read_choice(answer: Any, query: Query, where: str) -> tuple[str, dict[str, float]]:
    """The chosen option and per-option probabilities of a `choice` answer."""
    if not isinstance(answer, dict):
        raise MalformedResponse(f"{where}: answer is not an object")
    choice = answer.get("choice")
    probabilities = answer.get("probabilities")
    if not isinstance(choice, str):
        raise MalformedResponse(f"{where}: no 'choice' in the answer")
    if not isinstance(probabilities, dict) or not probabilities:
        raise MalformedResponse(f"{where}: no 'probabilities' in the answer")
    shares = {str(k): _probability(v, f"{where}: probability of {k!r}") for k, v in probabilities.items()}
    unknown = set(shares) - set(query.choices)
    if unknown:
        raise MalformedResponse(f"{where}: probabilities for unknown options {sorted(unknown)!r}")
    return choice, shares


def read_score(answer: Any, query: Query, where: str) -> dict[str, float]:
    """Each level's probability, keyed by the level's text, from a `score` answer (whose
    probabilities are keyed by level index, "0" first)."""
    if not isinstance(answer, dict):
        raise MalformedResponse(f"{where}: answer is not an object")
    probabilities = answer.get("probabilities")
    if not isinstance(probabilities, dict) or not probabilities:
        raise MalformedResponse(f"{where}: no 'probabilities' in the score answer")
    shares = {}
    for key, value in probabilities.items():
        index = int(key) if isinstance(key, str) and key.isdigit() else -1
        if not 0 <= index < len(query.choices):
            raise MalformedResponse(f"{where}: probability for level {key!r}, which is not one of the "
                                    f"{len(query.choices)} levels")
        shares[query.choices[index]] = _probability(value, f"{where}: probability of level {key}")
    return shares


def read_noul(answer: Any, where: str) -> float:
    """P(yes) of a `noul` answer; Von's `noul` is a banded decision, its `noul_raw` the probability."""
    if not isinstance(answer, dict):
        raise MalformedResponse(f"{where}: answer is not an object")
    value = answer.get("noul_raw", answer.get("noul"))
    p_yes = _probability(value, f"{where}: noul")
    if not 0.0 <= p_yes <= 1.0:
        raise MalformedResponse(f"{where}: noul {p_yes} outside [0, 1]")
    return p_yes


def yes_no_shares(p_yes: float) -> tuple[str, dict[str, float]]:
    """The answer and both shares of a yes/no question whose P(yes) is `p_yes`."""
    return ("yes" if p_yes >= 0.5 else "no"), {"yes": p_yes, "no": 1.0 - p_yes}


class JevOptions(HttpOptions):
    model: str = ""


class JevProvider(Provider):
    """An engine speaking `/v1/systemone`; subclasses choose the mapping details."""

    Options: ClassVar[type[JevOptions]] = JevOptions
    #: Ask yes/no as Jev's `noul` (True) or as a two-option choice (False).
    yes_no_as_noul: ClassVar[bool] = True
    #: The most levels a score may have (Jev's contract: 2 to 10).
    max_levels: ClassVar[int] = 10
    health_path: ClassVar[str] = "/health"

    def __init__(self, options: JevOptions, client: httpx.AsyncClient | None = None) -> None:
        super().__init__(options, client or make_client(options.endpoint))
        self.options: JevOptions = options
        self.engine = HttpEngine(self._client, options.endpoint, self.name)

    # -- request -----------------------------------------------------------------------------
    def headers(self, timeout_s: float | None = None) -> dict[str, str]:
        # Read on every call so a rotated key needs no restart; never logged.
        key = os.environ.get(self.secret_env[0], "") if self.secret_env else ""
        sent = {"Authorization": f"Bearer {key}"} if key else {}
        if timeout_s is not None:  # engines that know it (serve.py) stop work nobody waits for
            sent[TIMEOUT_HEADER] = str(max(1, int(timeout_s * 1000)))
        return sent

    def criteria(self, query: Query) -> Any:
        """Each option as its own description, so text-matching engines can read it."""
        return {option: option for option in query.choices}

    def question(self, query: Query) -> dict[str, Any]:
        if query.yes_no and self.yes_no_as_noul:
            return {"type": "noul", "instructions": query.question}
        if query.score:
            return {"type": "score", "instructions": query.question, "criteria": list(query.choices)}
        return {"type": "choice", "instructions": query.question, "criteria": self.criteria(query)}

    def model_field(self) -> dict[str, str]:
        return {"model": self.options.model} if self.options.model else {}

    def check(self, query: Query) -> None:
        """Refuse what the engine cannot take, before calling it."""

    def questions(self, queries: list[Query]) -> dict[str, Any]:
        for query in queries:
            if query.score and not 2 <= len(query.choices) <= self.max_levels:
                raise ProviderError(f"{self.name} takes scores of 2 to {self.max_levels} levels; this one has "
                                    f"{len(query.choices)}", provider=self.name)
            self.check(query)
        return {qid(i): self.question(q) for i, q in enumerate(queries)}

    # -- reply -------------------------------------------------------------------------------
    def answered_model(self, reply: dict[str, Any]) -> str:
        return str(reply.get("model") or self.model_id)

    def confidence(self, answer: dict[str, Any], choice: str, shares: dict[str, float]) -> float:
        if choice not in shares:
            raise MalformedResponse(f"{self.name}: no probability for the chosen option {choice!r}")
        return shares[choice]

    def read_answer(self, answer: Any, query: Query, model: str, where: str) -> EngineAnswer:
        if query.yes_no and self.yes_no_as_noul:
            choice, shares = yes_no_shares(read_noul(answer, where))
            confidence = shares[choice]
        elif query.score:
            shares = read_score(answer, query, where)
            choice = max(shares, key=shares.__getitem__)
            confidence = shares[choice]
        else:
            choice, shares = read_choice(answer, query, where)
            confidence = self.confidence(answer, choice, shares)
        return EngineAnswer(choice, confidence, shares, shares_rationale(f"{self.name} {model}", shares), model)

    def read_reply(self, reply: Any, queries: list[Query]) -> list[EngineAnswer]:
        if not isinstance(reply, dict) or not isinstance(reply.get("answers"), dict):
            raise MalformedResponse(f"{self.name}: reply has no 'answers' object")
        model = self.answered_model(reply)
        answers = reply["answers"]
        results = []
        for index, query in enumerate(queries):
            key = qid(index)
            if key not in answers:
                raise MalformedResponse(f"{self.name}: no answer for question {key}")
            results.append(self.read_answer(answers[key], query, model, f"{self.name} {key}"))
        return results

    # -- contract ----------------------------------------------------------------------------
    def extra_body(self, queries: list[Query]) -> dict[str, Any]:
        """Further request fields this engine takes (none by default)."""
        return {}

    async def decide_many(self, state: Any, queries: list[Query], timeout_s: float) -> list[EngineAnswer]:
        body = {**self.model_field(), "state": state_of(state, queries), "questions": self.questions(queries),
                **self.extra_body(queries)}
        reply = await self.engine.request("POST", "/v1/systemone", timeout_s, body, self.headers(timeout_s))
        return self.read_reply(reply, queries)

    async def decide_batch(self, states: list[Any], queries: list[Query], timeout_s: float) -> list[list[EngineAnswer]]:
        """`POST /v1/systemone/batch`: several states under one set of questions, one pass."""
        if not self.capabilities().batch:
            return await super().decide_batch(states, queries, timeout_s)
        body = {
            **self.model_field(),
            "states": [state_of(state, queries) for state in states],
            "questions": self.questions(queries),
            **self.extra_body(queries),
        }
        reply = await self.engine.request("POST", "/v1/systemone/batch", timeout_s, body, self.headers(timeout_s))
        results = reply.get("results") if isinstance(reply, dict) else None
        if not isinstance(results, list) or len(results) != len(states):
            raise MalformedResponse(f"{self.name}: batch reply has no 'results' for each of {len(states)} states",
                                    provider=self.name, url=self.engine.where)
        return [self.read_reply(result, queries) for result in results]

    async def health(self, timeout_s: float) -> HealthProbe:
        try:
            body = await self.engine.request("GET", self.health_path, timeout_s, headers=self.headers())
        except Exception as exc:  # a probe reports, it never raises
            return HealthProbe(False, str(exc))
        return self.read_health(body)

    def read_health(self, body: Any) -> HealthProbe:
        status = body.get("status", "ok") if isinstance(body, dict) else "ok"
        return HealthProbe(status == "ok", f"{self.name} at {self.engine.where}: {status}")

    def capabilities(self) -> Capabilities:
        return Capabilities(
            max_options=None, multi_question=True, batch=False, model=self.model_id
        )
