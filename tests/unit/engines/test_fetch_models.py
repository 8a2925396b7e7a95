"""The fetch-models job against the Hub's HTTP API, faked on the wire (no network here)."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parents[3] / "engines"))

import fetch_models  # noqa: E402

TREE = [
    {"type": "directory", "path": "typed-decisions/tokenizer"},
    {"type": "file", "path": "typed-decisions/rl_agent_config.json", "size": 2},
    {"type": "file", "path": "typed-decisions/model.safetensors", "size": 5},
    {"type": "file", "path": "typed-decisions/tokenizer/tokenizer.json", "size": 3},
    {"type": "file", "path": "typed-decisions/README.md", "size": 9},
]
BODIES = {"rl_agent_config.json": b"{}", "model.safetensors": b"12345", "tokenizer/tokenizer.json": b"abc"}


def hub(requests: list[str]):
    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request.url.path)
        if request.url.path == "/api/models/convaiinnovations/laya/tree/main/typed-decisions":
            return httpx.Response(200, json=TREE)
        name = request.url.path.removeprefix("/convaiinnovations/laya/resolve/main/typed-decisions/")
        return httpx.Response(200, content=BODIES[name])

    return httpx.Client(base_url="https://hub.test", transport=httpx.MockTransport(handler))


def test_laya_weights_land_in_the_models_volume_and_only_the_needed_files(tmp_path):
    requests: list[str] = []
    written = fetch_models.fetch("laya", hub(requests), tmp_path)
    target = tmp_path / "laya" / "typed-decisions"
    assert sorted(p.relative_to(target).as_posix() for p in written) == sorted(BODIES)
    assert (target / "model.safetensors").read_bytes() == b"12345"
    assert not (target / "README.md").exists() and not list(target.rglob("*.part"))


def test_files_already_present_are_not_downloaded_again(tmp_path):
    fetch_models.fetch("laya", hub([]), tmp_path)
    requests: list[str] = []
    assert fetch_models.fetch("laya", hub(requests), tmp_path) == []
    assert requests == ["/api/models/convaiinnovations/laya/tree/main/typed-decisions"]


def test_an_unknown_engine_is_refused():
    with pytest.raises(SystemExit, match="unknown engine 'gpt'"):
        fetch_models.fetch("gpt", hub([]))
