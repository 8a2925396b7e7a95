"""Any other `/v1/systemone` server: llama.cpp's `llama-server` with a decision GGUF, or
`engines/systemone/serve.py` for the Hugging Face engines.

Maps as `von`, except that `model` is sent only when set (llama-server answers with the model
it loaded, and the reply's `model` names the checkpoint for calibration). The option limit is
the server's (`max_options`, llama-server's 255 by default); `batch = true` says the server also
takes `POST /v1/systemone/batch` (serve.py and Laya do, llama-server does not). Health:
`GET /health`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from pydantic import Field

from .base import Capabilities, HealthProbe, MalformedResponse, Query, check_option_limit
from .jev import JevOptions, JevProvider, state_of


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

    async def embed(self, state: Any, query: Query, timeout_s: float) -> tuple[str, list[float]]:
        """`POST /v1/embed` (serve.py): the vector of the text the engine judges for `query`."""
        body = {"instructions": query.question, "states": [state_of(state, [query])]}
        reply = await self.engine.request("POST", "/v1/embed", timeout_s, body, self.headers(timeout_s))
        vectors = reply.get("embeddings") if isinstance(reply, dict) else None
        if (not isinstance(vectors, list) or len(vectors) != 1 or not isinstance(vectors[0], list)
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
                           for x in vectors[0])):
            raise MalformedResponse(f"{self.name}: embed reply has no finite vector", provider=self.name,
                                    url=self.engine.where)
        return str(reply.get("model") or self.model_id), [float(x) for x in vectors[0]]

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
