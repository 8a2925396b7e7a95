"""The router's catalogue and knobs: the `[router]` table of the gateway config (here, in the core,
because the config loader reads every table; the router imports it from here).

Prices are US dollars per million tokens; skills are 0..1 and start as guesses, to be refitted
from the router's decision log. Upstream keys are never in the file: `api_key_env` names the
environment variable that holds one.

    [router]
    enabled = true
    min_skill = [0.40, 0.55, 0.72, 0.86]

    [router.upstreams.openrouter]
    apis = ["openai"]
    base_url = "https://openrouter.ai/api"
    api_key_env = "OPENROUTER_API_KEY"

    [[router.models]]
    id = "anthropic/claude-sonnet-5"
    upstream = "openrouter"
    price = { in = 2.0, out = 10.0 }
    default_skill = 0.82
    skills = { debugging = 0.87 }
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..providers.base import SECRET_KEYS
from ..providers.hosts import stays_local

ApiKind = Literal["openai", "anthropic"]
PrivateMode = Literal["prefer_local", "local_only", "ignore"]
Effort = Literal["", "minimal", "low", "medium", "high"]
#: Complexity is scored 0..3 and risk 0..2: the per-level lists have one entry per level.
COMPLEXITY_LEVELS = 4
#: The decision kinds of the router's four questions (their learned heads are fitted per kind).
ROUTER_KINDS = TOPIC_KIND, COMPLEXITY_KIND, RISK_KIND, PRIVATE_KIND = (
    "router-topic", "router-complexity", "router-risk", "router-private")
RISK_LEVELS = 3
#: The main kinds of work a request can ask for (the topic question's options), with what each
#: means to the engine that reads them.
TOPICS = {
    "code-gen": "writing new code or a feature",
    "code-review": "reviewing code or a change for problems",
    "debugging": "finding and fixing the cause of an error or a failure",
    "security": "vulnerabilities, secrets, permissions or attacks",
    "architecture": "designing a system, its parts and their trade-offs",
    "infra-devops": "deployment, CI, containers, servers and cloud",
    "data-sql": "databases, queries and data pipelines",
    "writing": "prose: emails, posts, stories",
    "docs": "documentation, READMEs and comments",
    "chat": "small talk or a quick general question",
}


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Topic(_Table):
    """`[router.topics.<name>]`: one kind of work the topic question may answer."""

    #: What it means, in one line, as the engine reads it beside the name.
    description: str = Field(default="", max_length=300, pattern=r"^[^\n]*$")
    #: Prompts of this topic: `system1 learn --router-topics` fits the topic head from them.
    examples: list[str] = Field(default_factory=list, max_length=10_000)
    #: A model every request on this topic goes to, where it can take the request ("" : none).
    model: str = ""

    @field_validator("examples")
    @classmethod
    def _written(cls, examples: list[str]) -> list[str]:
        blank = [i for i, e in enumerate(examples) if not e.strip()]
        if blank:
            raise ValueError(f"example {blank[0]} is empty")
        return examples


#: A topic's name: a word or a few, as people and the engine read it.
TOPIC_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _./+-]{0,39}")


def topic_table(value: Any) -> Any:
    """`[router] topics` as name → Topic. The table form adds topics to the ten built-in ones
    (`builtin = "replace"`: instead of them), and may give a built-in one examples or a model;
    a list of names keeps those (built-in names with their descriptions)."""
    if value is None:
        return {name: Topic(description=text) for name, text in TOPICS.items()}
    if isinstance(value, list):
        if not all(isinstance(name, str) for name in value):
            raise ValueError("a list of topics must hold names (strings)")
        return {name: Topic(description=TOPICS.get(name, "")) for name in value}
    if not isinstance(value, dict):
        return value  # pydantic says what is wrong with it
    table = dict(value)
    mode = table.pop("builtin", "extend")
    if mode not in ("extend", "replace"):
        raise ValueError(f'builtin: must be "extend" (keep the built-in topics) or "replace", not {mode!r:.40}')
    topics: dict[str, Any] = {} if mode == "replace" else {n: {"description": d} for n, d in TOPICS.items()}
    for name, entry in table.items():
        if not TOPIC_NAME.fullmatch(name):
            raise ValueError(f"{name[:40]!r}: a topic's name is 1 to 40 letters, digits, spaces or _ . / + -, "
                             "starting with a letter or digit")
        if isinstance(entry, Topic):
            entry = entry.model_dump()
        if not isinstance(entry, dict):
            raise ValueError(f"{name}: must be a table of description, examples and model")
        topics[name] = {**topics.get(name, {}), **entry}
    return topics


class Price(_Table):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    input: float = Field(alias="in", ge=0)
    output: float = Field(alias="out", ge=0)


class Upstream(_Table):
    """A chat server the router forwards to, at `base_url` + `/v1/chat/completions` (the OpenAI
    API) or `/v1/messages` (Anthropic's). The router forwards; it does not translate, so a
    request goes only to upstreams that speak its API."""

    apis: list[ApiKind] = Field(default_factory=lambda: ["openai"], min_length=1)
    base_url: str = Field(min_length=1)
    #: The environment variable holding this upstream's key; empty for a server that takes none.
    api_key_env: str = ""
    #: Whether it is on this machine, so a private prompt may reach it; by default, as its URL
    #: says (loopback or one of the stack's one-label service names).
    local: bool | None = None
    #: Longest wait for a stream's status and first bytes: past it, the next candidate is tried.
    first_byte_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    #: Longest wait for a whole (not streamed) answer, and between two chunks of a stream.
    timeout_s: float = Field(default=300.0, gt=0, le=3600)
    #: Requests in flight to it at most (streams hold theirs to the end); past it a candidate on
    #: it is skipped, not counted against its model, and with none left the client gets a 503.
    max_connections: int = Field(default=100, ge=1, le=10_000)

    @model_validator(mode="before")
    @classmethod
    def _no_secrets(cls, values: Any) -> Any:
        if isinstance(values, dict):
            for key in values:
                if isinstance(key, str) and key.lower() in SECRET_KEYS:
                    raise ValueError(f"{key}: keys are read from the environment, never from the config file; "
                                     "name the variable with api_key_env")
        return values

    @field_validator("base_url")
    @classmethod
    def _http(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        if value.rstrip("/").endswith("/v1"):
            raise ValueError("is the server's root, without /v1 (the router adds /v1/chat/completions or /v1/messages)")
        return value.rstrip("/")


class ModelEntry(_Table):
    """One chat model the router may pick."""

    id: str = Field(min_length=1)
    upstream: str
    #: The name the upstream knows the model by, when it is not `id`.
    name: str = ""
    price: Price
    #: How many times more output tokens than the estimate this model spends (reasoning models).
    output_multiplier: float = Field(default=1.0, gt=0, le=100)
    default_skill: float = Field(ge=0, le=1)
    skills: dict[str, float] = Field(default_factory=dict)
    #: The measured chance of a good answer, per topic and complexity level (0..3), as
    #: `system1 router refit` fits it from outcomes: where given, it stands for the logistic of
    #: skill the expected-value rule otherwise uses (`RouterSettings.success`).
    success: dict[str, dict[int, float]] = Field(default_factory=dict)
    #: Context window in tokens.
    context: int = Field(default=128_000, ge=256)
    tools: bool = False
    vision: bool = False
    daily_budget_usd: float | None = Field(default=None, gt=0)

    @field_validator("skills")
    @classmethod
    def _skill_range(cls, skills: dict[str, float]) -> dict[str, float]:
        for topic, value in skills.items():
            if not 0 <= value <= 1:
                raise ValueError(f"{topic}: must be between 0 and 1, not {value}")
        return skills

    @field_validator("success")
    @classmethod
    def _success_range(cls, success: dict[str, dict[int, float]]) -> dict[str, dict[int, float]]:
        for topic, by_level in success.items():
            for level, value in by_level.items():
                if not 0 <= level < COMPLEXITY_LEVELS:
                    raise ValueError(f"{topic}: complexity levels are 0..{COMPLEXITY_LEVELS - 1}, not {level}")
                if not 0 <= value <= 1:
                    raise ValueError(f"{topic}.{level}: must be between 0 and 1, not {value}")
        return success

    @property
    def upstream_model(self) -> str:
        return self.name or self.id

    def skill(self, topic: str) -> float:
        return self.skills.get(topic, self.default_skill)


def _levels(values: list, count: int, what: str) -> list:
    if len(values) != count:
        raise ValueError(f"needs {count} values, one per {what} level 0..{count - 1}; got {len(values)}")
    return values


class DecisionSettings(_Table):
    """`[router.decision]`: who answers the four questions, about how much of the prompt, and
    the shadow engine asked the same in the background."""

    #: The provider that answers ("" for the gateway's chain), and the one for prompts the
    #: pre-check finds private ("" for the same); a private prompt under `local_only` never
    #: reaches one that is not on this machine.
    provider: str = ""
    private_provider: str = ""
    #: The prompt's text the engine judges, at most: its start and its end beyond that.
    chars: int = Field(default=4000, ge=200, le=100_000)
    #: Topic, complexity and risk answers less sure than this are asked of the gateway's
    #: cascade (the judge) before the route is chosen (0: never; the judge is weak on choices).
    min_confidence: float = Field(default=0.0, ge=0, le=1)
    #: A second provider asked the same four questions after the request is planned, off its
    #: path; its agreement is counted and logged ("" : none). A private prompt reaches it only
    #: where it could reach the decision engine.
    shadow: str = ""
    #: Shadow decisions waiting at most; past it, new ones are dropped (and counted).
    shadow_queue: int = Field(default=64, ge=1, le=10_000)
    #: The shadow log: JSONL ("" : <state>/logs/router-shadow.jsonl), rotated as the decision log.
    shadow_log: str = ""

    def shadow_log_path(self, install_dir: Path) -> Path:
        return Path(self.shadow_log).expanduser() if self.shadow_log else install_dir / "logs" / "router-shadow.jsonl"


class CheckSettings(_Table):
    """`[router.check]`: after a whole (not streamed) answer, one yes/no decision "does this
    output satisfy the request?"; below `min_probability` the request is sent again to the next
    stronger model that can take it."""

    enabled: bool = False
    #: "all" whole answers, or only requests sent with `X-Router-Check: on` ("marked").
    requests: Literal["all", "marked"] = "all"
    #: The provider asked ("" : the decision's). A private prompt's answer stays where its
    #: decision would.
    provider: str = ""
    min_probability: float = Field(default=0.5, ge=0, le=1)
    #: Further models one request may be sent to, at most.
    max_escalations: int = Field(default=1, ge=0, le=5)
    #: The estimated US dollars the escalations of one request may cost in all.
    max_cost_usd: float = Field(default=0.5, ge=0)
    #: Characters of the request and of the answer judged, each at most.
    chars: int = Field(default=4000, ge=200, le=100_000)
    #: A verdict less sure than this either way is asked of the gateway's cascade (the judge)
    #: before it is read (0: never).
    min_confidence: float = Field(default=0.0, ge=0, le=1)


class OutcomeSettings(_Table):
    """`[router.outcomes]`: the evidence `system1 router refit` fits skills from."""

    #: The same turn of a conversation sent again within this many seconds is a retry: the
    #: earlier answer counts as bad (0: no retry detection).
    retry_window_s: float = Field(default=120.0, ge=0, le=86_400)
    #: The outcome log: JSONL ("" : <state>/logs/router-outcomes.jsonl), rotated as the decision log.
    log_file: str = ""
    #: Refitted skills laid over the catalogue's ("" : <state>/router/skills.json), written by
    #: `system1 router refit --write` and read when the router is configured (start, reload).
    skills_file: str = ""


#: Keys that moved into a sub-table: the error says where to.
MOVED = {"decision_provider": "[router.decision] provider", "private_decision_provider": "[router.decision] private_provider",
         "decision_chars": "[router.decision] chars", "topic_descriptions": "[router.topics.<name>] description"}


class RouterSettings(_Table):
    """`[router]`: off unless enabled, and then only as good as its catalogue."""

    enabled: bool = False
    #: Model names that are routed; every other name is passed through to its upstream.
    aliases: list[str] = Field(default_factory=lambda: ["auto"])
    #: The topic question's options, name → Topic, in order (see `topic_table`).
    topics: dict[str, Topic] = Field(default_factory=lambda: topic_table(None), min_length=2)
    #: A topic's `model` takes its requests where the decision gives the topic at least this
    #: probability.
    pin_probability: float = Field(default=0.5, gt=0.0, le=1.0)
    decision: DecisionSettings = Field(default_factory=lambda: DecisionSettings())
    check: CheckSettings = Field(default_factory=lambda: CheckSettings())
    outcomes: OutcomeSettings = Field(default_factory=lambda: OutcomeSettings())
    private: PrivateMode = "prefer_local"
    #: Under `local_only`, a prompt leaves the machine only when the pre-check found nothing and
    #: the decision's calibrated probability that it is private is below this: an unsure
    #: decision, or none, keeps it here.
    max_leave_probability: float = Field(default=0.05, ge=0.0, le=0.5)
    #: Under `prefer_local`, a prompt whose probability of being private reaches this prefers a
    #: local model (where one can take it).
    prefer_local_probability: float = Field(default=0.5, ge=0.0, le=1.0)
    #: How a model is chosen: "expected_value", the cheapest whose expected quality (the
    #: decision's probabilities over topic, complexity and risk times the model's chance of
    #: success there) clears the floor; or "step", the older rule on the most likely levels,
    #: with complexity raised a level below `confidence_threshold`.
    rule: Literal["expected_value", "step"] = "expected_value"
    #: expected_value: how fast a model's chance of success falls as the work's `min_skill`
    #: passes its skill (a logistic of this width; at its skill, even odds).
    skill_width: float = Field(default=0.05, gt=0, le=1)
    #: expected_value: US dollars a unit of expected quality is worth; above 0, the capable model
    #: of best value (price x quality - cost) answers, floor or not.
    quality_price_usd: float = Field(default=0.0, ge=0)
    #: step: below this topic confidence, complexity goes up one level: when unsure, play safe.
    confidence_threshold: float = Field(default=0.8, ge=0, le=1)
    #: Added to the scored risk before it is rounded to a level (an engine that scores high).
    risk_offset: float = Field(default=0.0, ge=-2, le=2)
    min_skill: list[float] = Field(default_factory=lambda: [0.40, 0.55, 0.72, 0.86])
    risk_bonus: list[float] = Field(default_factory=lambda: [0.0, 0.04, 0.08])
    est_output_tokens: list[int] = Field(default_factory=lambda: [300, 800, 2000, 4000])
    #: Effective cost grows by this share per request in flight on a model.
    load_penalty: float = Field(default=0.25, ge=0, le=10)
    #: How long a conversation keeps its model, in seconds (0: no stickiness).
    sticky_ttl_s: float = Field(default=7200.0, ge=0, le=30 * 86_400)
    #: Tried last, after the scored candidates, when it can take the request.
    fallback_model: str = ""
    #: Further candidates tried when an upstream answers 429 or 5xx before the first byte.
    retries: int = Field(default=2, ge=0, le=10)
    #: Set on the forwarded request by complexity, only where the client set none ("" for none).
    reasoning_effort: list[Effort] = Field(default_factory=lambda: ["low", "low", "medium", "high"])
    #: The largest chat request body, in bytes (a long agent conversation runs to megabytes).
    max_body_bytes: int = Field(default=32 * 1_048_576, ge=1024, le=512 * 1_048_576)
    #: The largest upstream answer read whole, and the largest event of a stream, in bytes.
    max_answer_bytes: int = Field(default=16 * 1_048_576, ge=65_536, le=1_073_741_824)
    #: Where a model name that is neither an alias nor a catalogue id is passed through ("" : refused).
    passthrough_upstream: str = ""
    #: Regions whose national phone-number format the pre-check knows (e.g. ["US", "FR"]).
    phone_regions: list[str] = Field(default_factory=list)
    #: The pre-check's budget: a prompt longer than this, or one it cannot finish reading in this
    #: time, is treated as private (under `local_only` it stays on this machine).
    precheck_max_chars: int = Field(default=4_000_000, ge=10_000, le=100_000_000)
    precheck_timeout_s: float = Field(default=3.0, gt=0.0, le=60.0)
    #: The decision log: JSONL in the state volume ("" : <state>/logs/router.jsonl), rotated by size;
    #: the prompt's text is written only with `log_prompts`.
    log_file: str = ""
    log_prompts: bool = False
    log_max_bytes: int = Field(default=20 * 1_048_576, ge=1024)
    log_backups: int = Field(default=5, ge=0, le=100)
    upstreams: dict[str, Upstream] = Field(default_factory=dict)
    models: list[ModelEntry] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, values: Any) -> Any:
        if isinstance(values, dict):
            for key, where in MOVED.items():
                if key in values:
                    raise ValueError(f"{key}: moved to {where}")
            values = {**values, "topics": topic_table(values.get("topics"))}
        return values

    @field_validator("min_skill", "est_output_tokens", "reasoning_effort")
    @classmethod
    def _per_complexity(cls, values: list) -> list:
        return _levels(values, COMPLEXITY_LEVELS, "complexity")

    @field_validator("risk_bonus")
    @classmethod
    def _per_risk(cls, values: list) -> list:
        return _levels(values, RISK_LEVELS, "risk")

    @field_validator("min_skill")
    @classmethod
    def _skill_range(cls, values: list[float]) -> list[float]:
        if any(not 0 <= v <= 1 for v in values):
            raise ValueError("every floor must be between 0 and 1")
        return values

    @field_validator("est_output_tokens")
    @classmethod
    def _positive(cls, values: list[int]) -> list[int]:
        if any(v < 1 for v in values):
            raise ValueError("every estimate must be at least 1 token")
        return values

    @model_validator(mode="after")
    def _references(self) -> RouterSettings:
        ids = [m.id for m in self.models]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"models: duplicate id {', '.join(duplicates)}")
        for index, model in enumerate(self.models):
            if model.upstream not in self.upstreams:
                raise ValueError(f"models[{index}] ({model.id}): upstream {model.upstream!r} is not in "
                                 f"[router.upstreams]; configured: {', '.join(self.upstreams) or 'none'}")
            unknown = sorted((set(model.skills) | set(model.success)) - set(self.topics))
            if unknown:
                raise ValueError(f"models[{index}] ({model.id}): skills for unknown topics {', '.join(unknown)}; "
                                 f"topics are {', '.join(self.topics)}")
        for name, topic in self.topics.items():
            if topic.model and topic.model not in ids:
                raise ValueError(f"topics.{name}.model: {topic.model!r} is not one of the models")
        if self.passthrough_upstream and self.passthrough_upstream not in self.upstreams:
            raise ValueError(f"passthrough_upstream: {self.passthrough_upstream!r} is not in [router.upstreams]")
        if self.phone_regions:
            self._known_regions()
        if self.fallback_model and self.fallback_model not in ids:
            raise ValueError(f"fallback_model: {self.fallback_model!r} is not one of the models")
        clashes = sorted(set(self.aliases) & set(ids))
        if clashes:
            raise ValueError(f"aliases: {', '.join(clashes)} is also a model id")
        return self

    def _known_regions(self) -> None:
        import phonenumbers  # here, not at the top: every config load would pay its import

        unknown = sorted(r for r in self.phone_regions if r not in phonenumbers.SUPPORTED_REGIONS)
        if unknown:
            raise ValueError(f"phone_regions: {', '.join(unknown)} is not a region code (ISO 3166, e.g. US, FR)")

    def topic_text(self, topic: str) -> str:
        """A topic as the engine reads it: its name and what it means."""
        description = self.topics[topic].description
        return f"{topic}: {description}" if description else topic

    def success(self, model: ModelEntry, topic: str | None, complexity: int) -> float:
        """The model's chance of answering work of this topic (None: any) and complexity well:
        the measured one where refit has it, else even odds where its skill meets the level's
        floor, σ((skill − min_skill[complexity]) / skill_width)."""
        measured = model.success.get(topic, {}).get(complexity) if topic is not None else None
        if measured is not None:
            return measured
        skill = model.default_skill if topic is None else model.skill(topic)
        return sigmoid((skill - self.min_skill[complexity]) / self.skill_width)

    def decision_log(self, install_dir: Path) -> Path:
        return Path(self.log_file).expanduser() if self.log_file else install_dir / "logs" / "router.jsonl"

    def model(self, model_id: str) -> ModelEntry | None:
        return next((m for m in self.models if m.id == model_id), None)

    def is_local(self, model: ModelEntry) -> bool:
        return self.upstream_is_local(model.upstream)

    def upstream_is_local(self, name: str) -> bool:
        upstream = self.upstreams[name]
        return stays_local(upstream.base_url) if upstream.local is None else upstream.local
