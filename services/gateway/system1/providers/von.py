"""Von (`von serve` from `von-sdk` 1.3), `POST /v1/systemone`.

Options go as a `{option: option}` criteria map and yes/no as a `noul` question, read from
`noul_raw` (Von's `noul` is a banded decision by default). `confidence` is the probability of
the chosen option: Von's own `confidence` is Jev's margin. Von declares no option limit and
reads an 8,192-token window. Health: `GET /health`.
"""

from __future__ import annotations

from typing import ClassVar

from .jev import JevOptions, JevProvider


class VonOptions(JevOptions):
    endpoint: str = "http://127.0.0.1:8777"
    model: str = "von-1.3"


class VonProvider(JevProvider):
    name = "von"
    Options: ClassVar[type[VonOptions]] = VonOptions
    secret_env = ("SYSTEM1_VON_API_KEY",)

    def answered_model(self, reply: dict) -> str:
        # Von answers "von-1.3.0" whatever was asked; the configured name keys calibration.
        return self.model_id
