"""llama.cpp's `llama-server` with a decision GGUF, `POST /v1/systemone` (engines/llama).

The `systemone` mapping, with what this server does differently: it has no batch endpoint (the
lane sends one request per state), no `/v1/embed` (learned heads take their embeddings from
the `[learning]` embedder, the MiniLM service by default), and its option limit is the model's
(52 for openjev models, whose options are the letters A–Z and a–z; 255 for laya, lev, clef):
set `max_options` to it so that a longer list is refused before the call. The reply's `model`
is the server's `--alias`, else the model file's path: only its file name keys calibration, so
moving the file keeps the fits. Its key, if the server was started with `--api-key`, comes from
`SYSTEM1_LLAMA_API_KEY`.

The judged text is cut here, before the call, to `max_text_chars` (its start and end kept): an
LLM reads every token of its prompt before it answers (the judge, Qwen2.5-Coder-1.5B, about 80
tokens a second on two CPU cores), so the text's length is the judge's latency: 1,000
characters, about 250 tokens, take about 3 s. The cut keeps a decision within the cascade's
budget and the prompt within the server's context.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any, ClassVar, Literal

from pydantic import Field

from .base import EngineAnswer, Provider, Query, shortened
from .systemone import SystemOneOptions, SystemOneProvider


class LlamaOptions(SystemOneOptions):
    endpoint: str = "http://127.0.0.1:8080"
    batch: Literal[False] = False  # llama-server has no batch endpoint
    #: The judged text's characters sent at most (about 4 a token): see the module's note.
    max_text_chars: int = Field(default=1000, ge=100, le=1_000_000)


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

    def answered_model(self, reply: dict[str, Any]) -> str:
        model = str(reply.get("model") or self.model_id)
        return PurePath(model).name if "/" in model else model
