"""A hosted Claude model through the Messages API, `POST /v1/messages`.

The options go in a cached system block and the model answers through one forced tool call,
`choose`, with up to three options best first and its own `confidence`. The API gives no answer
probabilities, so there are none and no calibration applies. The key is read from
`ANTHROPIC_API_KEY` on every call and never logged, echoed or put in an error. The endpoint must
be https (plain http only on loopback); redirects are refused, so the key only reaches that
endpoint. Health: `GET /v1/models/{model}` (not billed). Every request leaves the machine and is
billed per token.
"""

from __future__ import annotations

import os
from typing import Any, ClassVar

import httpx
from pydantic import field_validator

from .base import (
    Capabilities,
    EngineAnswer,
    HealthProbe,
    MalformedResponse,
    OneQuestionProvider,
    ProviderError,
    ProviderOptions,
    Query,
    context_text,
)
from .http import HttpEngine, check_endpoint, make_client

API_VERSION = "2023-06-01"
KEY_ENV = "ANTHROPIC_API_KEY"
TOOL = "choose"
MAX_TOKENS = 256

INSTRUCTIONS = (
    "You make one fast multiple-choice decision. Read the question (and any context) in the "
    "user message and record your answer with the `choose` tool: up to three of the options "
    "below, best first, copied exactly, and your confidence (0 to 1) that the first is right."
)


class AnthropicOptions(ProviderOptions):
    endpoint: str = "https://api.anthropic.com"
    model: str = "claude-haiku-5-5"
    answers_without_context: bool = True  # a chat model answers from what it knows

    @field_validator("endpoint")
    @classmethod
    def _https(cls, value: str) -> str:
        return check_endpoint(value.strip(), allow_remote=True, require_https_remote=True)


def choose_tool(options: list[str]) -> dict[str, Any]:
    return {
        "name": TOOL,
        "description": "Record the decision: up to three options, best first, and a confidence.",
        "input_schema": {
            "type": "object",
            "properties": {
                "choices": {
                    "type": "array",
                    "items": {"type": "string", "enum": options},
                    "minItems": 1,
                    "maxItems": 3,
                },
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            },
            "required": ["choices", "confidence"],
        },
    }


class AnthropicProvider(OneQuestionProvider):
    name = "anthropic"
    Options: ClassVar[type[AnthropicOptions]] = AnthropicOptions
    secret_env = (KEY_ENV,)

    def __init__(self, options: AnthropicOptions, client: httpx.AsyncClient | None = None) -> None:
        super().__init__(options, client or make_client(options.endpoint))
        self.options: AnthropicOptions = options
        self.engine = HttpEngine(self._client, options.endpoint, self.name)

    def headers(self) -> dict[str, str]:
        key = os.environ.get(KEY_ENV, "")
        if not key:
            raise ProviderError(f"anthropic: {KEY_ENV} is not set", provider=self.name)
        return {"x-api-key": key, "anthropic-version": API_VERSION}

    def body(self, query: Query, state: Any = None) -> dict[str, Any]:
        listed = "\n".join(f"- {option}" for option in query.choices)
        user = query.question
        context = context_text(state)
        if context is not None:
            user += f"\n\nContext: {context}"
        return {
            "model": self.options.model,
            "max_tokens": MAX_TOKENS,
            "system": [
                {
                    "type": "text",
                    "text": f"{INSTRUCTIONS}\n\nOptions:\n{listed}",
                    "cache_control": {"type": "ephemeral"},
                }
            ],
            "tools": [choose_tool(query.choices)],
            "tool_choice": {"type": "tool", "name": TOOL},
            "messages": [{"role": "user", "content": user}],
        }

    async def decide_one(self, state: Any, query: Query, timeout_s: float) -> EngineAnswer:
        reply = await self.engine.request("POST", "/v1/messages", timeout_s, self.body(query, state), self.headers())
        content = reply.get("content") if isinstance(reply, dict) else None
        use = next(
            (b for b in content or [] if isinstance(b, dict) and b.get("type") == "tool_use" and b.get("name") == TOOL),
            None,
        )
        if use is None or not isinstance(use.get("input"), dict):
            raise MalformedResponse("anthropic reply has no `choose` tool call")
        choices = use["input"].get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], str):
            raise MalformedResponse("anthropic `choose` call has no choices")
        model = str(reply.get("model") or self.options.model)
        rationale = f"anthropic {model}: best first: {' > '.join(map(str, choices[:3]))}"
        return EngineAnswer(choices[0], use["input"].get("confidence"), None, rationale, self.options.model)

    async def health(self, timeout_s: float) -> HealthProbe:
        try:
            await self.engine.request("GET", f"/v1/models/{self.options.model}", timeout_s, headers=self.headers())
        except Exception as exc:
            return HealthProbe(False, str(exc))
        return HealthProbe(True, f"anthropic {self.options.model} reachable")

    def capabilities(self) -> Capabilities:
        return Capabilities(max_options=256, probabilities=False, model=self.model_id, extra={"remote": True})
