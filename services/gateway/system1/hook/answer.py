"""The routing hook's logic, served at `POST /v1/route`: features → rule → an advisory hint.

For a `UserPromptSubmit` event the engine answers the four routing features in one pass, the
rule turns them into a tier, and the hint is given only when routing is enabled, `hint` is not
false and every feature clears the routing threshold. It stays silent for slash commands,
prompts under ten words, subagent hand-backs, abstentions, failures and while paused. The skill
picker shares the 1.5 s budget and runs only when routing left time and the provider can hold
every candidate in one question. `PreToolUse` events on the Agent tool are recorded only.

Entries go to the routing log only for working directories inside `[routing] log_dirs`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..core.config import Settings
from ..core.gateway import Gateway
from ..core.lanes import INTERACTIVE
from ..core.result import Decision
from ..core.schema import RequestError, check_json_value, describe
from ..providers.base import Query
from .features import FEATURES
from .log import RoutingLog, logged_dir
from .rule import tier

logger = logging.getLogger(__name__)

BUDGET_S = 1.5
MIN_WORDS = 10
HAND_BACKS = ("<agent-message>", "<task-notification>")
SKILL_QUESTION = "Which skill fits this request?"
AGENT_TOOLS = frozenset({"Agent", "Task"})


class Skill(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    name: str = Field(min_length=1)
    description: str = ""
    disable_model_invocation: bool = Field(default=False, alias="disable-model-invocation")


class RouteEvent(BaseModel):
    """The Claude Code hook input, as far as routing reads it; other fields are ignored."""

    model_config = ConfigDict(extra="ignore", strict=True)

    hook_event_name: str = "UserPromptSubmit"
    prompt: str | None = None
    cwd: str = ""
    session_id: str | None = None
    tool_name: str | None = None
    tool_input: dict[str, Any] = Field(default_factory=dict)
    tool_use_id: str | None = None
    skills: list[Skill] = Field(default_factory=list)


def parse_event(payload: Any) -> RouteEvent:
    """Validate a hook event; raise `RequestError` naming every bad field."""
    if not isinstance(payload, dict):
        raise RequestError(f"request: the hook input must be a JSON object, not {type(payload).__name__}")
    check_json_value(payload)
    try:
        return RouteEvent.model_validate(payload)
    except ValidationError as exc:
        raise RequestError("; ".join(describe(e) for e in exc.errors(include_url=False))) from exc


@dataclass
class HookReply:
    """What the hook should print (`context`, or nothing) and why, for debugging."""

    context: str | None = None
    silent: str | None = None
    tier: str | None = None
    features: dict[str, dict[str, Any]] = field(default_factory=dict)
    skill: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"context": self.context, "silent": self.silent, "tier": self.tier,
                "features": self.features, "skill": self.skill}


def silence_reason(prompt: str) -> str | None:
    text = prompt.strip()
    if text.startswith("/"):
        return "slash command"
    if any(marker in text for marker in HAND_BACKS):
        return "subagent hand-back"
    if len(text.split()) < MIN_WORDS:
        return f"under {MIN_WORDS} words"
    return None


def hint_text(tier_name: str) -> str:
    # A statement of fact, not an instruction: clients treat instruction-like hook context as a
    # possible prompt injection.
    return f"System-1 routing hint: the local System-1 Gateway classifies this task as {tier_name}-tier work (model \"{tier_name}\")."


def parse_features(payload: Any) -> tuple[str, str | None]:
    """The prompt and optional provider of a `POST /v1/features` body; `RequestError` naming
    the field otherwise."""
    if not isinstance(payload, dict):
        raise RequestError('request: the body must be a JSON object {"prompt", "provider"?}')
    check_json_value(payload)
    for key in payload:
        if key not in ("prompt", "provider"):
            raise RequestError(f'{key[:60]}: unknown field; the body is {{"prompt", "provider"?}}')
    prompt, provider = payload.get("prompt"), payload.get("provider")
    if not isinstance(prompt, str) or not prompt.strip():
        raise RequestError("prompt: must be a non-empty string")
    if "provider" in payload and (not isinstance(provider, str) or not provider.strip()):
        raise RequestError("provider: must be the name of a configured provider")
    return prompt, provider


def feature_views(decisions: list[Decision]) -> dict[str, dict[str, Any]] | None:
    """The four features' decisions by feature name, or None when any failed."""
    if any(d.status == "error" for d in decisions):
        return None
    return {name: feature_view(d) for name, d in zip(FEATURES, decisions)}


def feature_view(decision: Decision) -> dict[str, Any]:
    """One feature's answer as `/v1/route` reports it."""
    return {"answer": decision.decision, "confidence": decision.confidence or 0.0,
            "abstain": decision.status == "abstained", "calibrated": decision.calibrated,
            "provider": decision.provider, "probabilities": decision.probabilities}


class RoutingHook:
    def __init__(self, gateway: Gateway, log: RoutingLog) -> None:
        self.gateway = gateway
        self.log = log

    @property
    def settings(self) -> Settings:
        return self.gateway.config.settings

    async def route(self, event: RouteEvent, client: str) -> HookReply:
        started = time.monotonic()
        if event.hook_event_name == "PreToolUse":
            return await self._agent(event, client)
        routing = self.settings.routing
        prompt = event.prompt
        if prompt is None:
            return HookReply(silent="no prompt in the hook input")
        if self.gateway.paused:
            return HookReply(silent="paused")
        if not routing.enabled and not self.settings.skills.enabled:
            return HookReply(silent="routing and the skill picker are off")
        reason = silence_reason(prompt)
        if reason:
            return HookReply(silent=reason)
        outcome = HookReply()
        if routing.enabled:
            await self._route(prompt, client, outcome, event)
        remaining = BUDGET_S - (time.monotonic() - started)
        if self.settings.skills.enabled:
            await self._pick_skill(prompt, event, client, remaining, outcome)
        return outcome

    def _threshold(self) -> float:
        routing = self.settings.routing
        return routing.min_confidence if routing.min_confidence is not None else self.settings.gateway.min_confidence

    async def feature_decisions(self, prompt: str, client: str, budget_s: float | None, priority: int = INTERACTIVE,
                                only: str | None = None) -> list[Decision]:
        """The four features' decisions, in one engine pass of the chain (or of provider `only`)."""
        queries = [Query(question, ["yes", "no"], yes_no=True) for question in FEATURES.values()]
        return await self.gateway.decide_many({"prompt": prompt}, queries, client, priority, budget_s=budget_s,
                                              only=only)

    async def features(self, prompt: str, client: str, budget_s: float) -> dict[str, dict[str, Any]] | None:
        """The four features as `/v1/route` reports them; None when no engine answered in time."""
        return feature_views(await self.feature_decisions(prompt, client, budget_s))

    def _logged(self, event: RouteEvent, client: str) -> bool:
        return logged_dir(event.cwd, self.settings.routing.log_dirs, client)

    async def _route(self, prompt: str, client: str, outcome: HookReply, event: RouteEvent) -> None:
        routing = self.settings.routing
        features = await self.features(prompt, client, BUDGET_S)
        if features is None:
            outcome.silent = "the engine failed or did not answer in time"
            return
        outcome.features = features
        threshold = self._threshold()
        if any(f["abstain"] for f in features.values()):
            outcome.silent = "the engine abstained"
        outcome.tier = tier({name: f["answer"] == "yes" for name, f in features.items()})
        unsure = [name for name, f in features.items() if f["confidence"] < threshold]
        if unsure and not outcome.silent:
            outcome.silent = f"not sure enough about {', '.join(unsure)} (below {threshold:.2f})"
        if not outcome.silent and routing.hint:
            outcome.context = hint_text(outcome.tier)
        elif not outcome.silent:
            outcome.silent = "record only (hint = false)"
        if self._logged(event, client):
            await self.log.append({
                "source": "prompt", "client": client, "cwd": event.cwd, "session_id": event.session_id,
                "prompt": prompt, "features": _compact(features), "rule_tier": outcome.tier,
                "decision": outcome.tier, "hinted": outcome.context is not None,
            })

    async def _pick_skill(self, prompt: str, event: RouteEvent, client: str, remaining: float, outcome: HookReply) -> None:
        skills = self.settings.skills
        candidates = [s for s in event.skills if not s.disable_model_invocation]
        if len(candidates) < 2:
            return
        limit = self.gateway.max_options()
        if limit is not None and len(candidates) > limit:
            outcome.skill = {"silent": f"dormant: {len(candidates)} skills, the engine takes at most {limit} options"}
            return
        if remaining <= 0.05:
            outcome.skill = {"silent": "routing used the time budget"}
            return
        options = [f"{s.name}: {s.description}".strip().rstrip(":")[:500] for s in candidates]
        options = list(dict.fromkeys(options))
        [answer] = await self.gateway.decide_many({"prompt": prompt}, [Query(SKILL_QUESTION, options)], client,
                                                  budget_s=remaining)
        if answer.status != "decided" or answer.decision is None or answer.confidence is None:
            outcome.skill = {"silent": "the engine failed or abstained"}
            return
        name = answer.decision.split(":", 1)[0]
        outcome.skill = {"name": name, "confidence": answer.confidence}
        if answer.confidence < skills.min_confidence:
            outcome.skill["silent"] = f"below the picker's threshold {skills.min_confidence:.2f}"
        elif skills.hint:
            hint = f"System-1 skill hint: the `{name}` skill matches this prompt."
            outcome.context = f"{outcome.context}\n{hint}" if outcome.context else hint
        else:
            outcome.skill["silent"] = "record only (hint = false)"
        if self._logged(event, client):
            await self.log.append({"source": "skill", "client": client, "cwd": event.cwd,
                                   "session_id": event.session_id, "prompt": prompt, "skill": name,
                                   "confidence": answer.confidence, "hinted": "silent" not in outcome.skill})

    async def _agent(self, event: RouteEvent, client: str) -> HookReply:
        """Record an Agent spawn next to the model the orchestrator chose; never changes it."""
        if event.tool_name not in AGENT_TOOLS:
            return HookReply(silent="not an Agent spawn")
        if not self.settings.routing.enabled or not self._logged(event, client):
            return HookReply(silent="not logged here")
        tool_input = event.tool_input
        brief = str(tool_input.get("prompt") or tool_input.get("description") or "")
        features = await self.features(brief, client, BUDGET_S) if brief else None
        outcome = HookReply(silent="record only", features=features or {})
        if features:
            outcome.tier = tier({name: f["answer"] == "yes" for name, f in features.items()})
        await self.log.append({
            "source": "agent", "client": client, "cwd": event.cwd, "session_id": event.session_id,
            "prompt": brief, "features": _compact(features or {}), "rule_tier": outcome.tier,
            "chosen": tool_input.get("model"), "subagent_type": tool_input.get("subagent_type"),
            "tool_use_id": event.tool_use_id,
        })
        return outcome


def _compact(features: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {name: {"answer": f["answer"], "confidence": round(f["confidence"], 4)} for name, f in features.items()}
