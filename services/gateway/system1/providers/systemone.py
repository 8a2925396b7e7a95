"""Any `/v1/systemone` server, `engines/systemone/serve.py` (the Hugging Face engines) first.

Maps as `von`, except that `model` is sent only when set (the reply's `model` names the
checkpoint the server loaded, which keys calibration). The option limit is the server's
(`max_options`); `batch = true` says the server also takes `POST /v1/systemone/batch` (serve.py
and Laya do). serve.py also returns embeddings for learned heads (`embed`, `POST /v1/embed`).
llama.cpp's llama-server has its own adapter, `llama`. Health: `GET /health`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, ClassVar

from pydantic import Field

from .base import Capabilities, EngineAnswer, HealthProbe, MalformedResponse, Query, check_option_limit
from .jev import JevOptions, JevProvider, state_of


def finite_vector(value: Any) -> list[float] | None:
    """`value` as a list of finite floats, or None when it is not one."""
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in value):
        return None
    return [float(x) for x in value]


class SystemOneOptions(JevOptions):
    endpoint: str = "http://127.0.0.1:8790"
    max_options: int = Field(default=255, ge=2, le=256)
    batch: bool = False


class SystemOneProvider(JevProvider):
    name = "systemone"
    Options: ClassVar[type[SystemOneOptions]] = SystemOneOptions
    secret_env = ("SYSTEM1_SYSTEMONE_API_KEY",)

    @property
    def model_id(self) -> str:
        return self.options.model or "systemone"

    def check(self, query: Query) -> None:
        check_option_limit(query, self.options.max_options, self.name)

    def extra_body(self, queries: list[Query]) -> dict[str, Any]:
        # serve.py returns each answer's embedding with `embed`; other servers are never asked.
        return {"embed": True} if any(q.embed for q in queries) else {}

    def read_answer(self, answer: Any, query: Query, model: str, where: str) -> EngineAnswer:
        read = super().read_answer(answer, query, model, where)
        if query.yes_no and isinstance(answer, dict) and answer.get("relevance") is True:
            read = replace(read, relevance=True)  # serve.py's MiniLM: see `EngineAnswer.relevance`
        vector = answer.get("embedding") if query.embed and isinstance(answer, dict) else None
        return replace(read, embedding=finite_vector(vector)) if vector is not None else read

    async def embed(self, state: Any, query: Query, timeout_s: float, model: str | None = None) -> tuple[str, list[float]]:
        """`POST /v1/embed` (serve.py): the vector of the text the engine judges for `query`,
        by the server's embedding model `model` (None: the engine's own)."""
        # The question's type too: the engine may judge another text for a yes/no question.
        body = {"instructions": query.question, "type": self.question(query)["type"], "states": [state_of(state, [query])],
                **({"model": model} if model else {})}
        reply = await self.engine.request("POST", "/v1/embed", timeout_s, body, self.headers(timeout_s))
        vectors = reply.get("embeddings") if isinstance(reply, dict) else None
        vector = finite_vector(vectors[0]) if isinstance(vectors, list) and len(vectors) == 1 else None
        if vector is None:
            raise MalformedResponse(f"{self.name}: embed reply has no finite vector", provider=self.name,
                                    url=self.engine.where)
        return str(reply.get("model") or self.model_id), vector

    def read_health(self, body: Any) -> HealthProbe:
        probe = super().read_health(body)
        if probe.ok and isinstance(body, dict) and body.get("model"):
            extra = ", ".join(f"{k} {body[k]}" for k in ("engine", "model", "device") if body.get(k))
            return HealthProbe(True, f"{probe.detail}; {extra}")
        return probe

    def capabilities(self) -> Capabilities:
        return Capabilities(
            max_options=self.options.max_options,
            multi_question=True,
            batch=self.options.batch,
            model=self.model_id,
        )
