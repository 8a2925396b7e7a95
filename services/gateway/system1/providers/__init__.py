"""The built-in engine adapters. Adding one: a module here and one line in `REGISTRY`."""

from __future__ import annotations

from .anthropic import AnthropicProvider
from .base import Provider
from .laya import LayaProvider
from .llama import LlamaProvider
from .mock import MockProvider
from .ollama import OllamaProvider
from .systemone import SystemOneProvider
from .von import VonProvider

REGISTRY: dict[str, type[Provider]] = {
    "laya": LayaProvider,
    "von": VonProvider,
    "systemone": SystemOneProvider,
    "llama": LlamaProvider,
    "ollama": OllamaProvider,
    "anthropic": AnthropicProvider,
    "mock": MockProvider,
}
