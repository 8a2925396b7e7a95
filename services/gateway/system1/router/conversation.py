"""A chat request as the router reads it, from either API's body: its texts, its turns, whether
it carries tools or images, and the key that identifies its conversation.

Only what routing needs is read; the body itself is forwarded as the client sent it. A body the
router cannot read is a `RequestError` naming the field (`messages[2].content[0].type`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from ..core.schema import RequestError
from .readable import readable

#: Content parts that are images, in either API.
IMAGE_PARTS = frozenset({"image_url", "image", "input_image"})
#: Parts whose payload is not text the router reads (it still counts their size).
OPAQUE_PARTS = frozenset({"input_audio", "file", "document", "redacted_thinking"})


@dataclass(frozen=True)
class Conversation:
    #: The API the client spoke: "openai" or "anthropic".
    api: str
    model: str
    system: str
    #: (role, text) for every message, in order; tool calls and results as their JSON text.
    turns: tuple[tuple[str, str], ...]
    tools: bool
    images: bool
    stream: bool
    #: Characters of content the router does not read as text (images, audio, files).
    opaque_chars: int = 0
    #: Every part of the body an upstream would receive, as the pre-check reads it (`readable.py`).
    readable: tuple[str, ...] = ()

    @property
    def texts(self) -> list[str]:
        return [self.system, *(text for _, text in self.turns)]

    @property
    def last_user(self) -> str:
        return next((text for role, text in reversed(self.turns) if role == "user"), "")

    @property
    def key(self) -> str:
        """The conversation's identity: the system prompt and the first user message."""
        first = next((text for role, text in self.turns if role == "user"), "")
        return hashlib.sha256(json.dumps([self.system, first]).encode()).hexdigest()


def _object(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestError(f"{field}: must be an object")
    return value


def _string(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise RequestError(f"{field}: must be a string")
    return value


class _Reader:
    """Collects text and flags while walking one body."""

    def __init__(self) -> None:
        self.images = False
        self.opaque_chars = 0

    def content(self, value: Any, field: str) -> str:
        """The text of a message's content: a string, null, or a list of parts."""
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        if not isinstance(value, list):
            raise RequestError(f"{field}: must be a string or a list of content parts")
        return "\n".join(filter(None, (self.part(part, f"{field}[{i}]") for i, part in enumerate(value))))

    def part(self, value: Any, field: str) -> str:
        part = _object(value, field)
        kind = _string(part.get("type"), f"{field}.type")
        if kind in ("text", "input_text", "output_text"):
            return _string(part.get("text"), f"{field}.text")
        if kind in ("thinking",):
            return _string(part.get("thinking", ""), f"{field}.thinking")
        if kind == "tool_use":
            return json.dumps(part.get("input", {}), ensure_ascii=False)
        if kind == "tool_result":
            return self.content(part.get("content"), f"{field}.content")
        if kind in IMAGE_PARTS:
            self.images = True
            self.opaque_chars += len(json.dumps(part))
            return ""
        if kind in OPAQUE_PARTS:
            self.opaque_chars += len(json.dumps(part))
            return ""
        raise RequestError(f"{field}.type: unknown content part {kind!r}")


def _common(body: Any) -> tuple[dict[str, Any], str, list[Any]]:
    body = _object(body, "body")
    model = _string(body.get("model"), "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages: must be a non-empty list")
    if "stream" in body and not isinstance(body["stream"], bool):
        raise RequestError("stream: must be true or false")
    if body.get("tools") is not None and not isinstance(body["tools"], list):
        raise RequestError("tools: must be a list")
    return body, model, messages


def from_openai(body: Any) -> Conversation:
    """`POST /v1/chat/completions`: system and developer messages make the system prompt."""
    body, model, messages = _common(body)
    reader = _Reader()
    system, turns = [], []
    for i, raw in enumerate(messages):
        message = _object(raw, f"messages[{i}]")
        role = _string(message.get("role"), f"messages[{i}].role")
        text = reader.content(message.get("content"), f"messages[{i}].content")
        if message.get("tool_calls"):
            text = "\n".join(filter(None, [text, json.dumps(message["tool_calls"], ensure_ascii=False)]))
        if role in ("system", "developer"):
            system.append(text)
        elif role in ("user", "assistant", "tool", "function"):
            turns.append((role, text))
        else:
            raise RequestError(f"messages[{i}].role: unknown role {role!r}")
    return Conversation("openai", model, "\n".join(system), tuple(turns), bool(body.get("tools")), reader.images,
                        bool(body.get("stream")), reader.opaque_chars, readable(body))


def from_anthropic(body: Any) -> Conversation:
    """`POST /v1/messages`: the system prompt is its own field (a string or text blocks)."""
    body, model, messages = _common(body)
    reader = _Reader()
    system = [reader.content(body.get("system"), "system")]
    turns = []
    for i, raw in enumerate(messages):
        message = _object(raw, f"messages[{i}]")
        role = _string(message.get("role"), f"messages[{i}].role")
        text = reader.content(message.get("content"), f"messages[{i}].content")
        if role == "system":  # Claude Code sends some instructions as system messages between turns
            system.append(text)
        elif role in ("user", "assistant"):
            turns.append((role, text))
        else:
            raise RequestError(f"messages[{i}].role: must be \"user\", \"assistant\" or \"system\", not {role!r}")
    return Conversation("anthropic", model, "\n".join(filter(None, system)), tuple(turns), bool(body.get("tools")),
                        reader.images, bool(body.get("stream")), reader.opaque_chars, readable(body))
