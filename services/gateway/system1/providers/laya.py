"""Laya (`laya[serve]` 0.4.x, also `laya-serve` 0.2.1), `POST /v1/systemone`.

- Every request pins `model` (`""` sends `jev-latest`, Laya's "route it yourself"). Laya
  silently auto-routes a name it does not know, so a reply whose `routing.model` is another
  checkpoint is rejected as malformed. Servers that report no routing (the strict Jev shape)
  cannot be checked and are taken at their word.
- Options go as a choice whose criteria are the labels without descriptions; yes/no goes as
  a two-option choice `yes`/`no`: Laya's `noul` head follows its labels rather than the text.
- More than 20 options exhausts the decision head: refused as a provider error, so a fallback
  can take over.
- English-only checkpoints are confidently wrong on non-Latin text: the adapter abstains when
  more than 30% of the letters are not Latin.
- `confidence` is `answer_confidence` (probability of the answer); Laya's own `confidence` is
  an entropy score.
- Health: `GET /health` (`/healthz` on laya-serve 0.2.1); warns when the pinned checkpoint is
  not preloaded.
"""

from __future__ import annotations

import unicodedata
from typing import Any, ClassVar

from .base import Capabilities, EngineAnswer, HealthProbe, MalformedResponse, ProviderError, Query, check_option_limit
from .jev import JevOptions, JevProvider

MAX_OPTIONS = 20
NON_LATIN_LIMIT = 0.30
ENGLISH_ONLY = frozenset({"english", "typed-decisions"})
AUTO_ROUTE = "jev-latest"


def non_latin_fraction(text: str) -> float:
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return 0.0
    foreign = sum(1 for ch in letters if "LATIN" not in unicodedata.name(ch, ""))
    return foreign / len(letters)


def _text_of(value: Any) -> str:
    if isinstance(value, dict):
        return " ".join(_text_of(v) for v in value.values())
    if isinstance(value, list):
        return " ".join(_text_of(v) for v in value)
    return str(value)


class LayaOptions(JevOptions):
    endpoint: str = "http://127.0.0.1:8765"
    model: str = "typed-decisions"


class LayaProvider(JevProvider):
    name = "laya"
    Options: ClassVar[type[LayaOptions]] = LayaOptions
    secret_env = ("SYSTEM1_LAYA_API_KEY",)
    yes_no_as_noul = False

    def criteria(self, query: Query) -> Any:
        # Labels with no description: laya-serve 0.2.1 refuses the list form that laya 0.4 takes.
        return {option: None for option in query.choices}

    def model_field(self) -> dict[str, str]:
        return {"model": self.options.model or AUTO_ROUTE}

    def check(self, query: Query) -> None:
        check_option_limit(query, MAX_OPTIONS, self.name)

    def answered_model(self, reply: dict[str, Any]) -> str:
        routing = reply.get("routing")
        answered = routing.get("model") if isinstance(routing, dict) else None
        if answered is None:
            return self.options.model or str(reply.get("model") or AUTO_ROUTE)
        if self.options.model and answered != self.options.model:
            raise MalformedResponse(
                f"laya answered with checkpoint {answered!r}, not the pinned {self.options.model!r}",
                provider=self.name, url=self.engine.where,
            )
        return str(answered)

    def confidence(self, answer: dict[str, Any], choice: str, shares: dict[str, float]) -> float:
        if "answer_confidence" in answer:
            value = answer["answer_confidence"]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise MalformedResponse(f"laya answer_confidence is not a number: {value!r}")
            return float(value)
        return super().confidence(answer, choice, shares)

    def _foreign_text(self, state: Any, queries: list[Query]) -> str | None:
        """Why an English-only checkpoint must abstain on this text, or None."""
        if self.options.model not in ENGLISH_ONLY:
            return None
        parts = [_text_of(state) if state is not None else ""]
        parts += [q.question + " " + " ".join(q.choices) for q in queries]
        share = non_latin_fraction(" ".join(parts))
        if share <= NON_LATIN_LIMIT:
            return None
        return (
            f"laya {self.options.model} is English-only and {share:.0%} of the letters are not "
            'Latin; use model = "multilingual" for such text'
        )

    async def decide_many(self, state: Any, queries: list[Query], timeout_s: float) -> list[EngineAnswer]:
        reason = self._foreign_text(state, queries)
        if reason is None:
            return await super().decide_many(state, queries, timeout_s)
        self.questions(queries)  # the option limit still applies
        return [EngineAnswer.abstained(reason) for _ in queries]

    async def decide_batch(self, states: list[Any], queries: list[Query], timeout_s: float) -> list[list[EngineAnswer]]:
        reasons = [self._foreign_text(state, queries) for state in states]
        sent = [i for i, reason in enumerate(reasons) if reason is None]
        answered = await super().decide_batch([states[i] for i in sent], queries, timeout_s) if sent else []
        results: list[list[EngineAnswer]] = [[EngineAnswer.abstained(r) for _ in queries] if r else [] for r in reasons]
        for index, answers in zip(sent, answered):
            results[index] = answers
        self.questions(queries)
        return results

    async def health(self, timeout_s: float) -> HealthProbe:
        try:
            body = await self.engine.request("GET", "/health", timeout_s, headers=self.headers())
        except ProviderError as exc:
            if exc.status != 404:
                return HealthProbe(False, str(exc))
            try:  # laya-serve 0.2.1 serves /healthz instead
                body = await self.engine.request("GET", "/healthz", timeout_s, headers=self.headers())
            except Exception as inner:
                return HealthProbe(False, str(inner))
        except Exception as exc:
            return HealthProbe(False, str(exc))
        if not isinstance(body, dict) or body.get("status") != "ok":
            return HealthProbe(False, f"laya at {self.engine.where}: unexpected health {body!r:.100}")
        detail = f"laya at {self.engine.where}: ok"
        loaded = body.get("loaded")
        pinned = self.options.model
        if pinned and isinstance(loaded, list) and pinned not in loaded:
            detail += f"; checkpoint {pinned!r} is not preloaded, so the first decision will be slow"
        if isinstance(body.get("device"), str):
            detail += f"; device {body['device']}"
        return HealthProbe(True, detail)

    def capabilities(self) -> Capabilities:
        return Capabilities(max_options=MAX_OPTIONS, multi_question=True, batch=True, model=self.model_id)
