"""A deterministic in-process stand-in for tests and for trying the gateway.

It always picks the first option with the configured `confidence` (the rest share what is
left), sleeps `delay_s` first, raises a provider error with the text of `fail`, or returns
`response` verbatim (any JSON value, for malformed-answer tests). `max_options` sets a limit.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar

from pydantic import Field, field_validator

from .base import (
    Capabilities,
    EngineAnswer,
    HealthProbe,
    OneQuestionProvider,
    ProviderError,
    ProviderOptions,
    Query,
    check_option_limit,
)

RATIONALE = "mock provider: always picks the first option"


class MockOptions(ProviderOptions):
    confidence: float = Field(default=0.9, ge=0.0, le=1.0)
    delay_s: float = Field(default=0.0, ge=0.0, le=300.0)
    fail: str = ""
    response: Any = None
    max_options: int | None = Field(default=None, ge=2)

    @field_validator("response", mode="before")
    @classmethod
    def _json_from_env(cls, value: Any) -> Any:
        # Environment overrides arrive as text; a JSON document there means its value.
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value


class MockProvider(OneQuestionProvider):
    name = "mock"
    Options: ClassVar[type[MockOptions]] = MockOptions

    def __init__(self, options: MockOptions, client: Any = None) -> None:
        super().__init__(options, None)
        self.options: MockOptions = options

    @property
    def model_id(self) -> str:
        return "mock"

    async def decide_one(self, state: Any, query: Query, timeout_s: float) -> EngineAnswer:
        if self.options.delay_s:
            await asyncio.sleep(self.options.delay_s)
        if self.options.fail:
            raise ProviderError(self.options.fail, provider=self.name)
        if self.options.response is not None:
            return EngineAnswer.from_mapping(self.options.response)
        check_option_limit(query, self.options.max_options, self.name)
        first = self.options.confidence
        rest = (1.0 - first) / (len(query.choices) - 1)
        probabilities = {option: (first if i == 0 else rest) for i, option in enumerate(query.choices)}
        return EngineAnswer(query.choices[0], first, probabilities, RATIONALE, "mock")

    async def health(self, timeout_s: float) -> HealthProbe:
        if self.options.fail:
            return HealthProbe(False, f"mock provider set to fail: {self.options.fail}")
        return HealthProbe(True, "mock provider: always answers")

    def capabilities(self) -> Capabilities:
        return Capabilities(max_options=self.options.max_options, model="mock")
