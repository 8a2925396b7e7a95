"""The MCP tools end to end: the official client over a real stdio subprocess, one raw
JSON-RPC exchange, and tool errors as results through the in-memory client."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anyio
import pytest
from mcp import Client, StdioServerParameters

from system1.core.gateway import Gateway
from system1.service.mcp import build_server
from system1.service.standalone import CoreBackend

from ..helpers import config_in

pytestmark = pytest.mark.anyio

SEED_REQUEST = {
    "question": "Rerun the flaky pipeline or block the merge?",
    "options": ["rerun the pipeline", "block the merge"],
    "request_id": "demo-1",
}


@pytest.fixture
def server_env(tmp_path) -> dict[str, str]:
    config = tmp_path / "config.toml"
    config.write_text('[gateway]\nprovider = "mock"\n')
    return {**os.environ, "SYSTEM1_CONFIG": str(config), "SYSTEM1_INSTALL_DIR": str(tmp_path / "state")}


def stdio_params(env) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "system1", "mcp", "--standalone"], env=env)


async def test_official_client_session_over_stdio(server_env):
    with anyio.fail_after(60):
        async with Client(stdio_params(server_env), mode="legacy") as client:
            assert client.server_info.name == "system1"
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert sorted(tools) == ["system1_capabilities", "system1_decide", "system1_health"]
            assert tools["system1_decide"].input_schema["required"] == ["question"]

            decided = await client.call_tool("system1_decide", SEED_REQUEST)
            assert not decided.is_error
            envelope = decided.structured_content
            assert (envelope["status"], envelope["decision"], envelope["confidence"]) == ("decided", "rerun the pipeline", 0.9)
            assert envelope["request_id"] == "demo-1" and envelope["provider"] == "mock"
            assert json.loads(decided.content[0].text) == envelope

            invalid = await client.call_tool("system1_decide", {"question": "q", "colour": "red"})
            assert invalid.is_error
            assert invalid.structured_content["error"]["code"] == "invalid_request"
            assert "colour" in invalid.structured_content["error"]["message"]

            health = (await client.call_tool("system1_health", {})).structured_content
            assert health["status"] == "ok" and health["providers"][0]["name"] == "mock"

            caps = (await client.call_tool("system1_capabilities", {})).structured_content
            assert caps["provider"] == "mock" and caps["schema_version"] == "1"


async def test_the_auto_negotiating_client_works_too(server_env):
    with anyio.fail_after(60):
        async with Client(stdio_params(server_env)) as client:
            result = await client.call_tool("system1_decide", SEED_REQUEST)
            assert result.structured_content["status"] == "decided"


def _send(process: subprocess.Popen, message: dict) -> None:
    process.stdin.write(json.dumps(message) + "\n")
    process.stdin.flush()


def _receive(process: subprocess.Popen) -> dict:
    line = process.stdout.readline()
    assert line, "server closed stdout"
    return json.loads(line)


def test_raw_json_rpc_exchange_and_exit_when_stdin_closes(server_env):
    with subprocess.Popen(
        [sys.executable, "-m", "system1", "mcp", "--standalone"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=server_env,
    ) as process:
        _exchange(process)


def _exchange(process: subprocess.Popen) -> None:
    try:
        _send(process, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
        init = _receive(process)
        assert init["id"] == 1 and init["result"]["serverInfo"]["name"] == "system1"
        assert "tools" in init["result"]["capabilities"]
        _send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(process, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = _receive(process)
        assert [t["name"] for t in listed["result"]["tools"]] == ["system1_decide", "system1_health", "system1_capabilities"]
        _send(process, {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                        "params": {"name": "system1_decide", "arguments": SEED_REQUEST}})
        called = _receive(process)
        assert called["id"] == 3 and called["result"]["isError"] is False
        assert called["result"]["structuredContent"]["decision"] == "rerun the pipeline"
        process.stdin.close()
        assert process.wait(timeout=30) == 0
        assert process.stdout.read() == ""  # nothing but protocol lines ever reached stdout
        assert "status=decided" in process.stderr.read()  # the log went to stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


async def test_tool_failures_come_back_as_results(tmp_path):
    server = build_server(CoreBackend(Gateway(config_in(tmp_path, '[gateway]\nprovider = "mock"\n'))), "tester")
    async with Client(server) as client:
        unknown = await client.call_tool("system1_guess", {})
        assert unknown.is_error and "unknown tool" in unknown.content[0].text
        extra = await client.call_tool("system1_health", {"verbose": True})
        assert extra.is_error and "takes no arguments" in extra.content[0].text


async def test_a_failing_backend_is_an_error_result_not_a_dead_server():
    class Broken:
        async def decide(self, arguments, client):
            raise RuntimeError("service unreachable")

        async def health(self):
            return {"status": "down"}

        async def capabilities(self):
            return {}

    async with Client(build_server(Broken(), "tester")) as client:
        result = await client.call_tool("system1_decide", {"question": "q"})
        assert result.is_error and "service unreachable" in result.content[0].text
        assert (await client.call_tool("system1_health", {})).structured_content == {"status": "down"}


async def test_a_config_error_is_an_error_result_with_the_envelope(tmp_path):
    server = build_server(CoreBackend(Gateway(config_in(tmp_path, '[gateway]\ntimeout_s = -1\n'))), "tester")
    async with Client(server) as client:
        result = await client.call_tool("system1_decide", {"question": "q"})
        assert result.is_error and result.structured_content["error"]["code"] == "config_error"
        health = (await client.call_tool("system1_health", {})).structured_content
        assert health["status"] == "down" and health["config_errors"]


def test_malformed_lines_get_a_json_rpc_error_and_calls_in_flight_finish_after_stdin_closes(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('[gateway]\nprovider = "mock"\n[providers.mock]\ndelay_s = 0.3\n')
    env = {**os.environ, "SYSTEM1_CONFIG": str(config), "SYSTEM1_INSTALL_DIR": str(tmp_path / "state")}
    with subprocess.Popen(
        [sys.executable, "-m", "system1", "mcp", "--standalone"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    ) as process:
        try:
            _send(process, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
            _receive(process)
            _send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            process.stdin.write("this is not json\n{\"not\": \"json-rpc\"}\n")
            _send(process, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                            "params": {"name": "system1_decide", "arguments": SEED_REQUEST}})
            process.stdin.close()  # before the engine (0.3 s) has answered
            replies = [json.loads(line) for line in process.stdout]
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()
    assert [(r["id"], r["error"]["code"]) for r in replies[:2]] == [(None, -32700), (None, -32600)]
    assert replies[2]["id"] == 2 and replies[2]["result"]["structuredContent"]["status"] == "decided"
