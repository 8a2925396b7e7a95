"""The chat routes' request bodies as the OpenAPI document publishes them: the fields of
OpenAI's chat completions and Anthropic's messages that the router reads, so a client (and the
fuzz tier) knows what to send. Other fields are allowed and passed upstream as sent; the router
reads bodies itself and names any field it cannot use."""

from __future__ import annotations

from typing import Any

_TEXT_OR_PARTS = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}]}
_TOOLS = {"type": "array", "items": {"type": "object"}}

OPENAI_CHAT: dict[str, Any] = {
    "type": "object",
    "required": ["model", "messages"],
    "properties": {
        "model": {"type": "string", "description": "`auto` (or another alias) is routed; a catalogue id or any "
                                                   "other name is passed through"},
        "messages": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["role"],
            "properties": {"role": {"enum": ["system", "developer", "user", "assistant", "tool"]},
                           "content": {"anyOf": [*_TEXT_OR_PARTS["anyOf"], {"type": "null"}]},
                           "name": {"type": "string"}}}},
        "stream": {"type": "boolean"},
        "stream_options": {"type": "object"},
        "max_tokens": {"type": "integer", "minimum": 1},
        "max_completion_tokens": {"type": "integer", "minimum": 1},
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        "tools": _TOOLS,
        "metadata": {"type": "object"},
    },
}

ANTHROPIC_MESSAGES: dict[str, Any] = {
    "type": "object",
    "required": ["model", "messages", "max_tokens"],
    "properties": {
        "model": OPENAI_CHAT["properties"]["model"],
        "messages": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["role", "content"],
            "properties": {"role": {"enum": ["user", "assistant"]}, "content": _TEXT_OR_PARTS}}},
        "system": _TEXT_OR_PARTS,
        "max_tokens": {"type": "integer", "minimum": 1},
        "stream": {"type": "boolean"},
        "temperature": {"type": "number", "minimum": 0, "maximum": 1},
        "tools": _TOOLS,
        "metadata": {"type": "object"},
    },
}

#: Anthropic's token count: the fields of a messages body it reads (`max_tokens` not needed).
ANTHROPIC_COUNT: dict[str, Any] = {
    "type": "object",
    "required": ["model", "messages"],
    "properties": {key: ANTHROPIC_MESSAGES["properties"][key] for key in ("model", "messages", "system", "tools")},
}


def request_body(schema: dict[str, Any]) -> dict[str, Any]:
    """`openapi_extra` for a route that takes this body."""
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}
