"""Which model answers: arithmetic over the catalogue, no I/O, the same answer for the same inputs.

`[router] rule = "expected_value"` (the default) keeps the decision's distributions:
- a model's chance of success on work of topic t and complexity c = σ((skill(t) − min_skill[c])
  / skill_width): even odds where its skill meets the level's floor, or the chance refit
  measured for that topic and level (`RouterSettings.success`);
- its expected quality = Σ P(topic) P(complexity) × that chance; the floor it must clear is
  Σ P(risk) σ((risk_bonus[risk]) / skill_width), so on a sure decision a model clears it
  exactly where the step rule's skill ≥ min_skill + risk_bonus would;
- its expected cost = input tokens × price in + Σ P(complexity) est_output_tokens × output
  multiplier × price out; the effective cost adds `load_penalty` per request in flight.
Uncertainty enters through the probabilities, not through a rule on confidence.

`rule = "step"` is the older rule: complexity and risk rounded to a level (risk after
`risk_offset`), a topic confidence below `confidence_threshold` raising complexity one level,
floor = min_skill[complexity] + risk_bonus[risk] against skill = Σ P(topic) × skill(topic).

Either way, a model is capable when it takes the request (tools, images, context, budget,
privacy, an upstream it can reach); the cheapest capable model over the floor wins, and when none
clears it the best capable one does (escalation). With `quality_price_usd` above 0 the capable
model of best value (price × expected quality − cost) wins instead. Before all that, a topic
with a `model` takes the request to it when the decision gives that topic at least
`pin_probability` and the model is capable: the operator's word over the arithmetic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..core.router_config import COMPLEXITY_LEVELS, RISK_LEVELS, ModelEntry, RouterSettings, sigmoid

CHEAPEST = "cheapest model above quality floor"
PINNED = "the model named for topic {topic}"
BEST_VALUE = "best value at the price of quality"
ESCALATED = "no model clears the quality floor: the most skilled capable model"
BELOW_FLOOR = "below quality floor"


@dataclass(frozen=True)
class Signals:
    """What the decision said about the request."""

    topics: Mapping[str, float]
    #: The topic answer's confidence.
    confidence: float
    #: Scored 0..3 and 0..2; fractional where the engine gives an expected value.
    complexity: float
    risk: float
    #: Whether the decision leaves the prompt private (`signals.private_by_decision`), and the
    #: calibrated probability it gave (None: no answer).
    private: bool = False
    p_private: float | None = None
    #: Who answered the private question: "stage N: provider" ("" : no one).
    private_by: str = ""
    #: The probability of each complexity and risk level (empty: all on the score's level).
    complexity_p: tuple[float, ...] = ()
    risk_p: tuple[float, ...] = ()

    @property
    def primary(self) -> str:
        return max(self.topics, key=self.topics.__getitem__) if self.topics else ""


@dataclass(frozen=True)
class Needs:
    """What the request itself requires, from the local pre-check."""

    input_tokens: int
    tools: bool = False
    vision: bool = False
    #: The pre-check found secrets or personal data.
    private: bool = False
    #: The API the client speaks: only upstreams that speak it can answer.
    api: str = "openai"


@dataclass(frozen=True)
class Live:
    """The state outside the request: in-flight counts, today's spend, unusable models."""

    in_flight: Mapping[str, int] = field(default_factory=dict)
    spent_usd: Mapping[str, float] = field(default_factory=dict)
    #: Model id → why it cannot be used now (an upstream whose key is not set, say).
    unavailable: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Candidate:
    id: str
    skill: float
    est_cost_usd: float
    eff_cost_usd: float
    eligible: bool
    why: str = ""
    #: expected_value: the model's expected quality on this request (None under the step rule).
    expected_quality: float | None = None


@dataclass(frozen=True)
class Route:
    """The chosen model (None when no model can take the request), and how it was chosen."""

    model: str | None
    reason: str
    complexity: int
    risk: int
    required_skill: float
    private: bool
    local_only: bool
    reasoning_effort: str
    candidates: list[Candidate]
    #: The models to try in turn: the chosen one, then the next best (fall-through on 429/5xx).
    order: list[str]
    #: `[router] rule`: "expected_value" (required_skill is then the expected quality to clear)
    #: or "step".
    rule: str = "expected_value"


def _level(value: float, levels: int) -> int:
    return min(levels - 1, max(0, round(value)))


def levels(settings: RouterSettings, signals: Signals) -> tuple[int, int]:
    """Complexity and risk as levels, with the low-confidence bump and the risk offset."""
    complexity = _level(signals.complexity, COMPLEXITY_LEVELS)
    if signals.confidence < settings.confidence_threshold:
        complexity = min(COMPLEXITY_LEVELS - 1, complexity + 1)
    return complexity, _level(signals.risk + settings.risk_offset, RISK_LEVELS)


def skill_of(model: ModelEntry, topics: Mapping[str, float]) -> float:
    total = sum(topics.values())
    if total <= 0:
        return model.default_skill
    return sum(p * model.skill(topic) for topic, p in topics.items()) / total


def est_cost(model: ModelEntry, input_tokens: int, output_tokens: float) -> float:
    return (input_tokens * model.price.input + output_tokens * model.output_multiplier * model.price.output) / 1e6


def distribution(probabilities: tuple[float, ...], score: float, count: int) -> list[float]:
    """Each level's probability: the decision's, normalised, or all on the score's level."""
    total = sum(probabilities)
    if len(probabilities) == count and total > 0:
        return [p / total for p in probabilities]
    return [1.0 if i == _level(score, count) else 0.0 for i in range(count)]


def expected_quality(settings: RouterSettings, model: ModelEntry, signals: Signals) -> float:
    total = sum(signals.topics.values())
    topics = [(t, p / total) for t, p in signals.topics.items()] if total > 0 else [(None, 1.0)]
    levels_p = distribution(signals.complexity_p, signals.complexity, COMPLEXITY_LEVELS)
    return sum(pt * pc * settings.success(model, topic, c)
               for topic, pt in topics for c, pc in enumerate(levels_p) if pc > 0)


def quality_floor(settings: RouterSettings, signals: Signals) -> float:
    """The expected quality a model must reach: each risk level's, weighed by its probability."""
    risk_p = distribution(signals.risk_p, signals.risk + settings.risk_offset, RISK_LEVELS)
    return sum(p * sigmoid(settings.risk_bonus[r] / settings.skill_width) for r, p in enumerate(risk_p))


def _incapable(settings: RouterSettings, model: ModelEntry, needs: Needs, live: Live, cost: float,
               local_only: bool) -> str:
    """Why `model` cannot take the request at all ("" when it can)."""
    if model.id in live.unavailable:
        return live.unavailable[model.id]
    if needs.api not in settings.upstreams[model.upstream].apis:
        return f"its upstream does not speak the {needs.api} API"
    if local_only and not settings.is_local(model):
        return "private prompt: remote upstream"
    if needs.tools and not model.tools:
        return "no tool use"
    if needs.vision and not model.vision:
        return "no image input"
    if needs.input_tokens > model.context:
        return f"context too small ({needs.input_tokens} tokens > {model.context})"
    return over_budget(model, live, cost)


def over_budget(model: ModelEntry, live: Live, cost: float) -> str:
    """Why `model` may not take a request costing about `cost` today ("" when it may)."""
    spent = live.spent_usd.get(model.id, 0.0)
    if model.daily_budget_usd is not None and spent + cost > model.daily_budget_usd:
        return (f"over its daily budget (${spent:.4f} spent of ${model.daily_budget_usd:.4f}, "
                f"this request about ${cost:.4f})")
    return ""


def _local_only(settings: RouterSettings, private: bool, capable_locally: bool) -> bool:
    """Whether only local models may answer: always for a private prompt under `local_only`;
    under `prefer_local` when some local model can take it."""
    if not private or settings.private == "ignore":
        return False
    return settings.private == "local_only" or capable_locally


def route(settings: RouterSettings, signals: Signals, needs: Needs, live: Live = Live()) -> Route:
    expected = settings.rule == "expected_value"
    if expected:
        complexity_p = distribution(signals.complexity_p, signals.complexity, COMPLEXITY_LEVELS)
        complexity = _level(sum(i * p for i, p in enumerate(complexity_p)), COMPLEXITY_LEVELS)
        risk = _level(signals.risk + settings.risk_offset, RISK_LEVELS)
        floor = round(quality_floor(settings, signals), 6)
        output_tokens = sum(p * settings.est_output_tokens[c] for c, p in enumerate(complexity_p))
    else:
        complexity, risk = levels(settings, signals)
        floor = round(settings.min_skill[complexity] + settings.risk_bonus[risk], 6)
        output_tokens = settings.est_output_tokens[complexity]
    private = needs.private or signals.private
    costs = {m.id: est_cost(m, needs.input_tokens, output_tokens) for m in settings.models}
    capable_locally = any(settings.is_local(m) and not _incapable(settings, m, needs, live, costs[m.id], False)
                          for m in settings.models)
    local_only = _local_only(settings, private, capable_locally)

    candidates = []
    for model in settings.models:
        skill = round(skill_of(model, signals.topics), 6)
        quality = round(expected_quality(settings, model, signals), 6) if expected else None
        cost = costs[model.id]
        why = _incapable(settings, model, needs, live, cost, local_only)
        eligible = not why and (quality if quality is not None else skill) >= floor
        candidates.append(Candidate(model.id, skill, cost, cost * (1 + settings.load_penalty * live.in_flight.get(model.id, 0)),
                                    eligible, why or ("" if eligible else BELOW_FLOOR), quality))

    def merit(c: Candidate) -> float:
        return c.skill if c.expected_quality is None else c.expected_quality

    over_floor = sorted((c for c in candidates if c.eligible), key=lambda c: (c.eff_cost_usd, -merit(c), c.id))
    escalation = sorted((c for c in candidates if c.why == BELOW_FLOOR), key=lambda c: (-merit(c), c.eff_cost_usd, c.id))
    by_value = expected and settings.quality_price_usd > 0
    if by_value:
        capable = [c for c in candidates if c.why in ("", BELOW_FLOOR)]
        over_floor = sorted(capable, key=lambda c: (c.eff_cost_usd - settings.quality_price_usd * merit(c), c.id))
    pin = pinned(settings, signals, candidates)
    if pin is not None:
        over_floor = [pin[0], *(c for c in over_floor if c is not pin[0])]
    order = _fall_through([c.id for c in over_floor or escalation], [c.id for c in escalation], settings)
    if pin is not None:
        model, reason = pin[0].id, PINNED.format(topic=pin[1])
    elif over_floor:
        model, reason = over_floor[0].id, BEST_VALUE if by_value else CHEAPEST
    elif escalation:
        model, reason = escalation[0].id, ESCALATED
    else:
        model, reason = None, _refusal(candidates, local_only)
    chosen = {c.id for c in over_floor}
    listed = over_floor + sorted((c for c in candidates if c.id not in chosen), key=lambda c: (-merit(c), c.id))
    return Route(model, reason, complexity, risk, floor, private, local_only, settings.reasoning_effort[complexity],
                 listed, order if model else [], settings.rule)


def pinned(settings: RouterSettings, signals: Signals, candidates: list[Candidate]) -> tuple[Candidate, str] | None:
    """The capable candidate a topic names, and the topic, where the decision gives that topic
    at least `pin_probability` (the likeliest such topic when several do)."""
    total = sum(signals.topics.values())
    if total <= 0:
        return None
    by_id = {c.id: c for c in candidates}
    likely = sorted(((p / total, t) for t, p in signals.topics.items()
                     if t in settings.topics and settings.topics[t].model), reverse=True)
    for share, topic in likely:
        candidate = by_id.get(settings.topics[topic].model)
        if share >= settings.pin_probability and candidate is not None and candidate.why in ("", BELOW_FLOOR):
            return candidate, topic
    return None


def _fall_through(ranked: list[str], below_floor: list[str], settings: RouterSettings) -> list[str]:
    """The first `retries + 1` of the ranked models (those over the floor, or when none is, the
    capable ones by skill), with the fallback model, when capable, in the last place if it is
    not among them (never the first: that is the choice)."""
    order = ranked[: settings.retries + 1]
    fallback = settings.fallback_model
    if settings.retries and fallback in ranked + below_floor and fallback not in order:
        if len(order) > settings.retries:
            order[-1] = fallback
        else:
            order.append(fallback)
    return order


def _refusal(candidates: list[Candidate], local_only: bool) -> str:
    if not candidates:
        return "no models are configured in [router] models"
    if local_only:
        return "no local model can take this private prompt (private = \"local_only\")"
    return "no model can take this request: " + "; ".join(f"{c.id}: {c.why}" for c in candidates)
