"""One settings object from the TOML file and `SYSTEM1_*` environment variables.

The file is `SYSTEM1_CONFIG`, else `$XDG_CONFIG_HOME/system1/config.toml`, else
`~/.config/system1/config.toml`; every key is optional and the environment overrides the file.
Loading never raises: a broken config yields the defaults plus `errors`, each naming the file
(or variable) and the key, so health can say `down` and decide can say `config_error`.
Secrets (API keys) are read from the environment by the providers themselves; a secret key in
the file is an error.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..providers import REGISTRY
from ..providers.base import SECRET_KEYS, ProviderOptions
from .router_config import ROUTER_KINDS, RouterSettings
from .paths import install_dir

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class GatewaySettings(_Section):
    provider: str = "laya"
    fallback: list[str] = Field(default_factory=list)
    timeout_s: float = Field(default=5.0, gt=0.0, le=300.0)
    min_confidence: float = Field(default=0.6, ge=0.0, le=1.0)
    #: With no calibration fit for the answer: answer with the engine's own confidence, or abstain.
    uncalibrated: Literal["pass", "abstain"] = "pass"
    #: Characters one engine pass may read (see `core.work`); a larger request is refused.
    max_work: int = Field(default=100_000, ge=1_000, le=10_000_000)
    #: System 2 (see `core.cascade`): providers asked in turn after the chain when its answer
    #: abstains for want of confidence or of a text to judge, within `cascade_budget_s` in all.
    cascade: list[str] = Field(default_factory=list)
    cascade_budget_s: float = Field(default=5.0, gt=0.0, le=300.0)
    #: Kinds the chain alone answers: they abstain when it is unsure, and never wait for System 2.
    cascade_skip_kinds: list[str] = Field(default_factory=list)
    log_level: LogLevel = "INFO"
    log_file: str = ""

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value


class RoutingSettings(_Section):
    enabled: bool = False
    hint: bool = True
    log_dirs: list[str] = Field(default_factory=list)
    log_file: str = ""
    min_confidence: float | None = Field(default=None, ge=0.0, le=1.0)


class SkillsSettings(_Section):
    enabled: bool = False
    hint: bool = False
    min_confidence: float = Field(default=0.8, ge=0.0, le=1.0)


class LearningSettings(_Section):
    """Learned heads (`system1 learn`): which provider embeds the judged text for them."""

    enabled: bool = True
    embedder: str = "systemone"
    #: The embedding model a kind's heads read, by kind, asked of the embedder by name
    #: (`POST /v1/embed` with `model`); every other kind reads the embedder's own vector, the
    #: one that comes with its answer. The router's four questions read multilingual-e5-small
    #: (serve.py `--embedders e5`): its heads are right more often on held-out rows
    #: (bench/heads/EMBEDDERS.md) and rank unseen private prompts better (bench/privacy/STAGE1.md).
    models: dict[str, str] = Field(default_factory=lambda: dict.fromkeys(ROUTER_KINDS, "multilingual-e5-small"))
    #: Remember decisions so they can be labelled (`POST /v1/feedback`): every kind, or these kinds.
    collect: bool = False
    collect_kinds: list[str] = Field(default_factory=list)
    store_max_decisions: int = Field(default=10_000, ge=100, le=1_000_000)


class ServiceSettings(_Section):
    """The long-running gateway service (`system1 serve`)."""

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=1, le=65535)
    allowed_hosts: list[str] = Field(default_factory=list)
    #: Browser origins that may call the gateway; by default none (no web page may).
    allowed_origins: list[str] = Field(default_factory=list)
    api_keys_file: str = ""
    max_body_bytes: int = Field(default=1_048_576, ge=1024, le=64 * 1_048_576)
    header_timeout_s: float = Field(default=10.0, gt=0.0, le=600.0)
    clients: list[str] = Field(default_factory=list)
    batch_clients: list[str] = Field(default_factory=list)
    health_interval_s: float = Field(default=10.0, gt=0.0, le=3600.0)
    mcp_sessions_per_client: int = Field(default=16, ge=1, le=10_000)
    mcp_sessions_total: int = Field(default=256, ge=1, le=10_000)
    mcp_session_idle_s: float = Field(default=600.0, gt=0.0, le=86_400.0)
    request_log: str = ""
    request_log_questions: bool = False
    request_log_max_bytes: int = Field(default=10 * 1_048_576, ge=1024)
    request_log_backups: int = Field(default=3, ge=0, le=100)
    #: The folder of this installation's learned files (calibration.json, heads.json,
    #: router/skills.json); the state folder when empty. Several gateway replicas read one
    #: shared, read-only folder here (deploy/k8s/README.md).
    learned_dir: str = ""


SECTIONS: dict[str, type[BaseModel]] = {
    "gateway": GatewaySettings,
    "routing": RoutingSettings,
    "skills": SkillsSettings,
    "learning": LearningSettings,
    "service": ServiceSettings,
    "router": RouterSettings,
}
# Environment prefix per section: [gateway] keys are SYSTEM1_<KEY>.
ENV_PREFIX = {
    "gateway": "SYSTEM1_",
    "routing": "SYSTEM1_ROUTING_",
    "skills": "SYSTEM1_SKILLS_",
    "learning": "SYSTEM1_LEARNING_",
    "service": "SYSTEM1_SERVICE_",
    "router": "SYSTEM1_ROUTER_",
}
# List-valued keys that hold paths take the OS path separator in the environment.
PATH_LISTS = {("routing", "log_dirs")}


@dataclass
class Settings:
    gateway: GatewaySettings = field(default_factory=GatewaySettings)
    routing: RoutingSettings = field(default_factory=RoutingSettings)
    skills: SkillsSettings = field(default_factory=SkillsSettings)
    service: ServiceSettings = field(default_factory=ServiceSettings)
    providers: dict[str, ProviderOptions] = field(default_factory=dict)
    learning: LearningSettings = field(default_factory=LearningSettings)
    router: RouterSettings = field(default_factory=RouterSettings)

    @property
    def chain(self) -> list[str]:
        """Primary first, then the fallbacks, each once."""
        return list(dict.fromkeys([self.gateway.provider, *self.gateway.fallback]))

    @property
    def engines(self) -> list[str]:
        """Every provider a decision may ask: the chain, then the cascade's stages."""
        return list(dict.fromkeys([*self.chain, *self.gateway.cascade]))

    def options_for(self, name: str) -> ProviderOptions:
        return self.providers[name]


@dataclass
class LoadedConfig:
    settings: Settings
    path: Path | None
    errors: list[str]
    install_dir: Path
    #: The environment it was read from: a reload reads the same, and so do API keys.
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def learned_dir(self) -> Path:
        """Where the learned files are read from and `--write` writes them."""
        configured = self.settings.service.learned_dir
        return Path(configured).expanduser() if configured else self.install_dir

    @property
    def routing_log(self) -> Path:
        configured = self.settings.routing.log_file
        return Path(configured).expanduser() if configured else self.install_dir / "logs" / "routing.jsonl"



def config_path(env: Mapping[str, str]) -> tuple[Path, bool]:
    """The file to read, and whether it was named explicitly (then it must exist)."""
    if env.get("SYSTEM1_CONFIG"):
        return Path(env["SYSTEM1_CONFIG"]).expanduser(), True
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path("~/.config").expanduser()
    return base / "system1" / "config.toml", False


def _is_list(annotation: Any) -> bool:
    if get_origin(annotation) is list:
        return True
    return any(get_origin(arg) is list for arg in get_args(annotation))


def _env_value(model: type[BaseModel], key: str, raw: str, path_list: bool) -> Any:
    annotation = model.model_fields[key].annotation
    if _is_list(annotation):
        separator = os.pathsep if path_list else ","
        return [part.strip() for part in raw.split(separator) if part.strip()]
    if raw == "" and get_origin(annotation) is not None and type(None) in get_args(annotation):
        return None
    return raw


class _Collector:
    """Gathers values with where each came from, and the errors that name it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.errors: list[str] = []
        self.origin: dict[tuple[str, str], str] = {}

    def where(self, table: str, key: str) -> str:
        return self.origin.get((table, key), str(self.path))

    def validate(self, model: type[BaseModel], table: str, values: dict[str, Any]) -> BaseModel | None:
        try:
            return model.model_validate(values)
        except ValidationError as exc:
            for error in exc.errors(include_url=False):
                key = _key(error["loc"])
                message = error["msg"].removeprefix("Value error, ")
                if error["type"] == "extra_forbidden":
                    message = "unknown key"
                label = f"[{table}] {key}".strip() if key else f"[{table}]"
                self.errors.append(f"{self.where(table, str(error['loc'][0]) if error['loc'] else '')}: {label}: {message}")
            return None


def _key(loc: tuple[str | int, ...]) -> str:
    """A validation error's place as it is written in TOML terms: `models[2].price.in`."""
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")


def _read_file(path: Path, required: bool, errors: list[str]) -> dict[str, Any]:
    if not path.exists():
        if required:
            errors.append(f"{path}: config file not found (named by SYSTEM1_CONFIG)")
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        errors.append(f"{path}: TOML syntax error: {exc}")
    except (OSError, UnicodeDecodeError) as exc:
        errors.append(f"{path}: cannot read: {exc}")
    return {}


def load_config(env: Mapping[str, str] | None = None) -> LoadedConfig:
    """Read the config; never raises. Errors name the file or variable and the key."""
    env = os.environ if env is None else env
    path, required = config_path(env)
    collect = _Collector(path)
    data = _read_file(path, required, collect.errors)

    for name in data:
        if name not in (*SECTIONS, "providers"):
            collect.errors.append(f"{path}: [{name}]: unknown table")

    sections: dict[str, Any] = {}
    for table, model in SECTIONS.items():
        values = data.get(table, {})
        if not isinstance(values, dict):
            collect.errors.append(f"{path}: [{table}]: must be a table")
            values = {}
        values = dict(values)
        prefix = ENV_PREFIX[table]
        for key in model.model_fields:
            variable = prefix + key.upper()
            if variable in env:
                values[key] = _env_value(model, key, env[variable], (table, key) in PATH_LISTS)
                collect.origin[(table, key)] = variable
        sections[table] = collect.validate(model, table, values) or model()

    gateway: GatewaySettings = sections["gateway"]
    for key in ("provider", "fallback", "cascade"):
        names = [gateway.provider] if key == "provider" else getattr(gateway, key)
        for name in names:
            if name not in REGISTRY:
                collect.errors.append(
                    f"{collect.where('gateway', key)}: [gateway] {key}: unknown provider {name!r}; "
                    f"available: {', '.join(REGISTRY)}"
                )

    learning: LearningSettings = sections["learning"]
    if learning.embedder not in REGISTRY:
        collect.errors.append(f"{collect.where('learning', 'embedder')}: [learning] embedder: unknown provider "
                              f"{learning.embedder!r}; available: {', '.join(REGISTRY)}")
    router: RouterSettings = sections["router"]
    named = {("decision", "provider"): router.decision.provider, ("decision", "private_provider"): router.decision.private_provider,
             ("decision", "shadow"): router.decision.shadow, ("check", "provider"): router.check.provider}
    for (table, key), name in named.items():
        if name and name not in REGISTRY:
            collect.errors.append(f"{collect.where('router', table)}: [router.{table}] {key}: unknown provider {name!r}; "
                                  f"available: {', '.join(REGISTRY)}")
    chain = [gateway.provider, *gateway.fallback, *gateway.cascade]
    needed = chain + ([learning.embedder] if learning.enabled else [])
    if router.enabled:
        needed += [name for name in named.values() if name]
    providers = _load_providers(data.get("providers") or {}, env, needed, collect)
    settings = Settings(
        sections["gateway"], sections["routing"], sections["skills"], sections["service"], providers,
        sections["learning"], sections["router"],
    )
    return LoadedConfig(settings, path if path.exists() else None, collect.errors, install_dir(env), dict(env))


def _load_providers(
    tables: Any, env: Mapping[str, str], chain: list[str], collect: _Collector
) -> dict[str, ProviderOptions]:
    """Validate every provider that is configured (file or environment) or in the chain."""
    if not isinstance(tables, dict):
        collect.errors.append(f"{collect.path}: [providers]: must be a table of [providers.<name>] tables")
        tables = {}
    for name in tables:
        if name not in REGISTRY:
            collect.errors.append(f"{collect.path}: [providers.{name}]: unknown provider")
    result: dict[str, ProviderOptions] = {}
    for name, provider in REGISTRY.items():
        table = f"providers.{name}"
        values = dict(tables.get(name) or {})
        for key in list(values):
            if key.lower() in SECRET_KEYS:
                variable = provider.secret_env[0] if provider.secret_env else f"SYSTEM1_{name.upper()}_API_KEY"
                collect.errors.append(
                    f"{collect.path}: [{table}] {key}: secrets are read from the environment "
                    f"({variable}), never from the config file"
                )
                del values[key]
        for key in provider.Options.model_fields:
            variable = f"SYSTEM1_{name.upper()}_{key.upper()}"
            if variable in env:
                values[key] = _env_value(provider.Options, key, env[variable], False)
                collect.origin[(table, key)] = variable
        if name not in tables and not values and name not in chain:
            continue
        options = collect.validate(provider.Options, table, values)
        if options is not None:
            result[name] = options
    return result
