"""The plugin in the real Claude Code CLI (the `claude` binary bundled in PyPI's
`claude-agent-sdk` wheel), with a throwaway HOME, a local stand-in for the Messages API and a
gateway service on the mock engine: installed from this clone as a user installs it, its hooks
run by Claude Code itself; and the CLI pointed at the gateway's `model: auto` router."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.fakes.hosted_chat import hosted_chat, reply_text
from tests.processes import free_port, server

from ..unit.router.catalogues import router_toml
from .conftest import ROOT, VENVS
from .messages_api import messages_api

pytestmark = pytest.mark.contract
PROMPT = "Design the storage layer for the audit trail and compare the two options we discussed last week"
HINT = 'System-1 routing hint: the local System-1 Gateway classifies this task as opus-tier work (model \\"opus\\").'


@pytest.fixture(scope="module")
def claude(tmp_path_factory) -> tuple[str, dict[str, str]]:
    """The CLI with the plugin installed into a throwaway HOME: its path and that environment."""
    binary = VENVS / "claude" / "claude"
    if not binary.exists():
        pytest.fail(f"{binary} is missing: run `make contract-envs` first")
    home = tmp_path_factory.mktemp("home")
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}

    def run(*args: str) -> str:
        done = subprocess.run([str(binary), "plugin", *args], env=env, cwd=home, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    assert "Successfully added marketplace: system1-gateway" in run("marketplace", "add", str(ROOT))
    assert "Successfully installed plugin: system1@system1-gateway" in run("install", "system1@system1-gateway")
    listed = run("list")
    entry = listed[listed.index("system1@system1-gateway"):]
    assert "enabled" in entry.split("\n\n")[0], listed
    return str(binary), env


@pytest.fixture(scope="module")
def gateway(tmp_path_factory) -> tuple[str, dict[str, str]]:
    """`system1 serve` on the mock engine with routing hints on: its URL and environment."""
    state = tmp_path_factory.mktemp("gateway")
    (state / "config.toml").write_text('[gateway]\nprovider = "mock"\n[routing]\nenabled = true\nmin_confidence = 0\n'
                                       '[learning]\nenabled = false\n')
    port = free_port()
    env = {"SYSTEM1_CONFIG": str(state / "config.toml"), "SYSTEM1_INSTALL_DIR": str(state / "state")}
    with server([sys.executable, "-m", "system1", "serve", "--port", str(port)], f"http://127.0.0.1:{port}/readyz", env):
        yield f"http://127.0.0.1:{port}", env


def ask(claude: tuple[str, dict[str, str]], gateway_url: str, api_url: str, cwd) -> list[dict]:
    """One `claude -p` turn; the hook events it reports."""
    binary, env = claude
    done = subprocess.run(
        [binary, "-p", PROMPT, "--output-format", "stream-json", "--verbose", "--include-hook-events"],
        env={**env, "ANTHROPIC_BASE_URL": api_url, "ANTHROPIC_API_KEY": "sk-local-test", "SYSTEM1_GATEWAY_URL": gateway_url},
        cwd=cwd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return [e for e in events if e.get("subtype") == "hook_response"]


def by_event(hooks: list[dict], name: str) -> dict:
    found = [h for h in hooks if h.get("hook_event") == name]
    assert len(found) == 1, hooks
    return found[0]


def test_the_prompt_hooks_hint_reaches_the_model_and_session_start_stays_quiet(claude, gateway, tmp_path):
    with messages_api() as (api_url, bodies):
        hooks = ask(claude, gateway[0], api_url, tmp_path)
    start, prompt = by_event(hooks, "SessionStart"), by_event(hooks, "UserPromptSubmit")
    assert (start["exit_code"], start["stdout"]) == (0, "")  # a healthy gateway: nothing to say
    assert prompt["exit_code"] == 0 and "opus-tier work" in prompt["stdout"]
    assert bodies and HINT in json.dumps(bodies[-1])  # in the request the model answers


def test_a_paused_gateway_is_named_at_session_start_and_no_hint_is_given(claude, gateway, tmp_path):
    url, env = gateway
    toggle = [sys.executable, "-m", "system1", "toggle"]
    subprocess.run([*toggle, "off"], env={**os.environ, **env}, check=True, capture_output=True, timeout=60)
    try:
        with messages_api() as (api_url, bodies):
            hooks = ask(claude, url, api_url, tmp_path)
    finally:
        subprocess.run([*toggle, "on"], env={**os.environ, **env}, check=True, capture_output=True, timeout=60)
    start, prompt = by_event(hooks, "SessionStart"), by_event(hooks, "UserPromptSubmit")
    assert start["exit_code"] == 0 and "System-1 is paused" in json.loads(start["stdout"])["systemMessage"]
    assert prompt["exit_code"] == 0 and prompt["stdout"] == ""  # the engine abstains: the hook is silent
    assert bodies and "System-1 routing hint" not in json.dumps(bodies[-1])


def test_the_cli_validates_the_plugin_with_its_three_hooks_and_every_skill(claude):
    binary, env = claude
    done = subprocess.run([binary, "plugin", "validate", str(ROOT / "plugin")], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "Validation passed" in done.stdout, done.stdout + done.stderr
    skills = sorted(p.parent.name for p in (ROOT / "plugin" / "skills").glob("*/SKILL.md"))
    assert len(skills) == 8 and all(f"skills: system1:{name}" in done.stdout for name in skills)
    assert all(f"hooks: {event}" in done.stdout for event in ("UserPromptSubmit", "PreToolUse", "SessionStart"))


def test_make_unregister_removes_the_mcp_server_the_readme_registers(claude):
    binary, env = claude
    on_path = {**env, "PATH": f"{VENVS / 'claude'}:{env['PATH']}"}
    mcp = [binary, "mcp"]
    add = [*mcp, "add", "--scope", "user", "--transport", "stdio", "system1", "--",
           "docker", "exec", "-i", "-e", "SYSTEM1_CLIENT=me", "system1-gateway", "system1", "mcp"]
    subprocess.run(add, env=env, cwd=env["HOME"], check=True, capture_output=True, timeout=60)
    assert subprocess.run([*mcp, "get", "system1"], env=env, cwd=env["HOME"], capture_output=True, timeout=60).returncode == 0
    done = subprocess.run(["make", "-s", "-C", str(ROOT), "unregister"], env=on_path, capture_output=True, text=True, timeout=60)
    assert "unregistered the system1 MCP server" in done.stdout, done.stdout + done.stderr
    assert subprocess.run([*mcp, "get", "system1"], env=env, cwd=env["HOME"], capture_output=True, timeout=60).returncode != 0


def test_claude_code_pointed_at_the_router_gets_the_routed_models_answer(claude, tmp_path):
    """`ANTHROPIC_BASE_URL` at the gateway and `model: auto`: the router decides (mock engine)
    and forwards to the cloud tier, here the fake hosted API, which only the gateway's key opens."""
    binary, env = claude
    with hosted_chat(key="sk-upstream-only") as upstream:
        state = tmp_path / "gateway"
        state.mkdir()
        cloud = {"base_url": upstream.url, "apis": ["anthropic"], "api_key_env": "CLOUD_KEY", "local": False}
        model = {"id": "cloud/sonnet", "upstream": "cloud", "price": {"in": 3, "out": 15}, "default_skill": 0.9,
                 "context": 200000, "tools": True}
        (state / "config.toml").write_text(router_toml({"cloud": cloud}, [model], private="ignore"))
        port = free_port()
        served = {"SYSTEM1_CONFIG": str(state / "config.toml"), "SYSTEM1_INSTALL_DIR": str(state / "state"),
                   "CLOUD_KEY": "sk-upstream-only"}
        with server([sys.executable, "-m", "system1", "serve", "--port", str(port)], f"http://127.0.0.1:{port}/readyz",
                    served):
            done = subprocess.run(
                [binary, "-p", "Say hi", "--output-format", "json"],
                env={**env, "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}", "ANTHROPIC_API_KEY": "sk-client-key",
                     "ANTHROPIC_MODEL": "auto", "ANTHROPIC_SMALL_FAST_MODEL": "auto",
                     "ANTHROPIC_DEFAULT_HAIKU_MODEL": "auto"},
                cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads(done.stdout)["result"] == reply_text("cloud/sonnet")
    assert upstream.received and all(r.headers["x-api-key"] == "sk-upstream-only" for r in upstream.received)
    assert all(r.body["model"] == "cloud/sonnet" for r in upstream.received)
