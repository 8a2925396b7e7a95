"""The seed article's catalogue, as TOML, for the router's tests.

Sonnet, Opus and Qwen are as the article lists them; the article gives only the skill and the
estimated cost of GPT Luna and DeepSeek for its worked example, so their prices here are ones
that reproduce those costs (40 tokens in, 2,000 out).
"""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

from system1.core.router_config import RouterSettings

SEED = """
enabled = true
confidence_threshold = 0.8
risk_offset = -0.3
fallback_model = "anthropic/claude-sonnet-5"

[upstreams.openrouter]
base_url = "https://openrouter.ai/api"
api_key_env = "OPENROUTER_API_KEY"

[upstreams.llama]
base_url = "http://llama:8080"  # local: a one-label name on the stack's network
apis = ["openai", "anthropic"]

[[models]]
id = "qwen/qwen3.7-flash"
upstream = "openrouter"
price = { in = 0.03, out = 0.13 }
output_multiplier = 3
default_skill = 0.45
skills = { chat = 0.75, writing = 0.60, docs = 0.55 }

[[models]]
id = "deepseek/deepseek-v4.1-flash"
upstream = "openrouter"
price = { in = 0.20, out = 0.636 }
default_skill = 0.62
tools = true

[[models]]
id = "openai/gpt-5.6-luna"
upstream = "openrouter"
price = { in = 0.20, out = 1.20 }
default_skill = 0.68
tools = true
vision = true

[[models]]
id = "anthropic/claude-sonnet-5"
upstream = "openrouter"
price = { in = 2.00, out = 10.00 }
default_skill = 0.82
skills = { code-gen = 0.88, code-review = 0.87, debugging = 0.87, security = 0.84, architecture = 0.82, infra-devops = 0.84, data-sql = 0.84 }
context = 200000
tools = true
vision = true

[[models]]
id = "anthropic/claude-opus-5.5"
upstream = "openrouter"
price = { in = 4.00, out = 20.00 }
default_skill = 0.92
skills = { architecture = 0.96, security = 0.95, code-review = 0.94, debugging = 0.94, code-gen = 0.94 }
context = 200000
tools = true
vision = true
daily_budget_usd = 10

[[models]]
id = "gemma-3-270m"
upstream = "llama"
price = { in = 0, out = 0 }
default_skill = 0.30
context = 8192
"""


def seed_table(**changes: Any) -> dict[str, Any]:
    table = tomllib.loads(SEED)
    table.update(changes)
    return table


def seed_catalogue(**changes: Any) -> RouterSettings:
    return RouterSettings.model_validate(seed_table(**changes))


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + " }"
    return repr(value)


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def router_toml(upstreams: dict[str, dict[str, Any]], models: list[dict[str, Any]], engine: str = "mock",
                learning: bool = False, **router: Any) -> str:
    """A gateway config whose engine is `engine` (with its learned heads when `learning`) and
    whose router is on with these upstreams and models (`router`: more `[router]` keys)."""
    lines = ["[gateway]", f"provider = {_value(engine)}", "[learning]", f"enabled = {_value(learning)}",
             "[router]", "enabled = true"]
    lines += [f"{k} = {_value(v)}" for k, v in router.items()]
    for name, upstream in upstreams.items():
        lines += [f"[router.upstreams.{name}]", *(f"{k} = {_value(v)}" for k, v in upstream.items())]
    for model in models:
        lines += ["[[router.models]]", *(f"{k} = {_value(v)}" for k, v in model.items())]
    return "\n".join(lines) + "\n"
