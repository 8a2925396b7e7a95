"""Any other `/v1/systemone` server: llama.cpp's `llama-server` with a decision GGUF, or
`engines/systemone/serve.py` for the Hugging Face engines.

Maps as `von`, except that `model` is sent only when set (llama-server answers with the model
it loaded, and the reply's `model` names the checkpoint for calibration). The option limit is
the server's (`max_options`, llama-server's 255 by default); `batch = true` says the server also
takes `POST /v1/systemone/batch` (serve.py and Laya do, llama-server does not). Health:
`GET /health`.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from .base import Capabilities, HealthProbe, Query, check_option_limit
from .jev import JevOptions, JevProvider


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
