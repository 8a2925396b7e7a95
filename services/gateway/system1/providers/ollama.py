"""Any local chat model through Ollama (0.12 or later, for logprobs), `POST /api/chat`.

The options are shown as letters and the model answers one letter at temperature 0; the
probabilities are the letters' shares of the first token's top logprobs. A reply that is not an
option letter, or one without logprobs, is malformed. At most 26 options; one call per question.
Health: `GET /api/tags` and the configured `model` must be installed.
"""

from __future__ import annotations

import math
import string
from typing import Any, ClassVar

import httpx
from pydantic import Field, field_validator

from .base import (
    Capabilities,
    EngineAnswer,
    HealthProbe,
    MalformedResponse,
    OneQuestionProvider,
    Query,
    check_option_limit,
    context_text,
    shares_rationale,
)
from .http import HttpEngine, HttpOptions, make_client

LETTERS = string.ascii_uppercase
TOP_LOGPROBS = 20  # Ollama's maximum


class OllamaOptions(HttpOptions):
    endpoint: str = "http://127.0.0.1:11434"
    model: str = Field(default="", validate_default=True)
    answers_without_context: bool = True  # a chat model answers from what it knows

    @field_validator("model")
    @classmethod
    def _required(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is required: name an installed model (see `ollama list`)")
        return value.strip()


def prompt_for(query: Query, state: Any = None) -> str:
    lines = [query.question.strip(), ""]
    context = context_text(state)
    if context is not None:
        lines += [f"Context: {context}", ""]
    lines.append("Options:")
    lines += [f"{LETTERS[i]}. {option}" for i, option in enumerate(query.choices)]
    lines += ["", "Answer with the letter of one option only."]
    return "\n".join(lines)


def _letter(token: Any) -> str:
    return str(token).strip().strip(".):*").upper()


def letter_shares(reply: dict[str, Any], letters: str) -> dict[str, float]:
    logprobs = reply.get("logprobs")
    if not isinstance(logprobs, list) or not logprobs:
        raise MalformedResponse("ollama reply carries no logprobs (Ollama 0.12 or later is needed)")
    first = next((e for e in logprobs if isinstance(e, dict) and _letter(e.get("token", ""))), None)
    if first is None:
        raise MalformedResponse("ollama logprobs hold no token")
    candidates = list(first.get("top_logprobs") or []) + [first]
    mass: dict[str, float] = {}
    seen: set[tuple[str, float]] = set()
    for entry in candidates:
        if not isinstance(entry, dict) or not isinstance(entry.get("logprob"), (int, float)):
            continue
        letter = _letter(entry.get("token", ""))
        key = (str(entry.get("token")), float(entry["logprob"]))
        if len(letter) == 1 and letter in letters and key not in seen:
            seen.add(key)
            mass[letter] = mass.get(letter, 0.0) + math.exp(entry["logprob"])
    total = sum(mass.values())
    if total <= 0:
        raise MalformedResponse("ollama logprobs give no option letter")
    return {letter: share / total for letter, share in mass.items()}


class OllamaProvider(OneQuestionProvider):
    name = "ollama"
    Options: ClassVar[type[OllamaOptions]] = OllamaOptions

    def __init__(self, options: OllamaOptions, client: httpx.AsyncClient | None = None) -> None:
        super().__init__(options, client or make_client(options.endpoint))
        self.options: OllamaOptions = options
        self.engine = HttpEngine(self._client, options.endpoint, self.name)

    async def decide_one(self, state: Any, query: Query, timeout_s: float) -> EngineAnswer:
        check_option_limit(query, len(LETTERS), self.name)
        letters = LETTERS[: len(query.choices)]
        body = {
            "model": self.options.model,
            "messages": [{"role": "user", "content": prompt_for(query, state)}],
            "stream": False,
            "logprobs": True,
            "top_logprobs": TOP_LOGPROBS,
            "options": {"temperature": 0},
        }
        reply = await self.engine.request("POST", "/api/chat", timeout_s, body)
        if not isinstance(reply, dict) or not isinstance(reply.get("message"), dict):
            raise MalformedResponse("ollama reply has no 'message'")
        answer = _letter(reply["message"].get("content", ""))[:1]
        if not answer or answer not in letters:
            raise MalformedResponse(f"ollama answered {reply['message'].get('content', '')!r:.60}, not an option letter")
        shares = letter_shares(reply, letters)
        probabilities = {query.choices[letters.index(k)]: v for k, v in shares.items()}
        decision = query.choices[letters.index(answer)]
        rationale = shares_rationale(f"ollama {self.options.model}", probabilities)
        return EngineAnswer(decision, probabilities.get(decision, 0.0), probabilities, rationale, self.options.model)

    async def health(self, timeout_s: float) -> HealthProbe:
        try:
            body = await self.engine.request("GET", "/api/tags", timeout_s)
        except Exception as exc:
            return HealthProbe(False, str(exc))
        models = body.get("models") if isinstance(body, dict) else None
        names = {str(m.get("name") or m.get("model")) for m in models or [] if isinstance(m, dict)}
        wanted = self.options.model
        if wanted in names or f"{wanted}:latest" in names:
            return HealthProbe(True, f"ollama at {self.engine.where}: {wanted} installed")
        return HealthProbe(False, f"ollama at {self.engine.where}: model {wanted!r} is not installed (ollama pull {wanted})")

    def capabilities(self) -> Capabilities:
        return Capabilities(max_options=len(LETTERS), model=self.model_id)
