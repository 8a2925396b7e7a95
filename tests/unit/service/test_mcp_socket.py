"""`system1 mcp` beside a running service: a relay to the service's local MCP socket, served by
the same SDK server as `/mcp`, and the HTTP bridge where there is no socket."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters

from system1.core.paths import mcp_socket_path
from system1.service import mcp_socket

from ..service_harness import running_service

SEED = {"question": "Rerun the flaky pipeline or block the merge?", "options": ["rerun the pipeline", "block the merge"]}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}


def relay(state_dir, client: str = "erin") -> subprocess.Popen:
    env = {**os.environ, "SYSTEM1_INSTALL_DIR": str(state_dir), "SYSTEM1_CLIENT": client,
           "SYSTEM1_GATEWAY_URL": "http://127.0.0.1:9"}  # never used while the socket answers
    return subprocess.Popen([sys.executable, "-m", "system1", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def send(process: subprocess.Popen, *lines: str | dict) -> None:
    for line in lines:
        process.stdin.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
    process.stdin.flush()


def receive(process: subprocess.Popen) -> dict:
    line = process.stdout.readline()
    assert line, "the relay closed stdout"
    return json.loads(line)


def initialized(process: subprocess.Popen) -> subprocess.Popen:
    send(process, INITIALIZE)
    assert receive(process)["result"]["serverInfo"]["name"] == "system1"
    send(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    return process


def test_the_socket_is_private_to_the_services_user_and_gone_when_it_stops(tmp_path):
    with running_service(tmp_path, '[gateway]\nprovider = "mock"\n') as svc:
        path = mcp_socket_path(svc.state_dir)
        assert stat.S_ISSOCK(path.stat().st_mode)
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not path.exists()


def test_bad_lines_are_answered_and_calls_in_flight_finish_after_stdin_closes(tmp_path):
    toml = '[gateway]\nprovider = "mock"\n[providers.mock]\ndelay_s = 0.3\n'
    with running_service(tmp_path, toml) as svc, initialized(relay(svc.state_dir)) as process:
        send(process, "this is not json", '{"not": "json-rpc"}',
             {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "system1_decide", "arguments": SEED}})
        process.stdin.close()  # before the engine (0.3 s) has answered
        replies = [json.loads(line) for line in process.stdout]
        assert process.wait(timeout=30) == 0
    assert [(r["id"], r["error"]["code"]) for r in replies[:2]] == [(None, -32700), (None, -32600)]
    assert replies[2]["id"] == 2 and replies[2]["result"]["structuredContent"]["status"] == "decided"


def test_a_line_over_the_body_limit_is_refused(tmp_path):
    toml = '[gateway]\nprovider = "mock"\n[service]\nmax_body_bytes = 4096\n'
    with running_service(tmp_path, toml) as svc, initialized(relay(svc.state_dir)) as process:
        for size in (5_000, 100_000):  # arriving whole, and in more reads than the limit allows
            send(process, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "system1_decide", "arguments": {"question": "x" * size, "options": ["a", "b"]}}}))
            reply = receive(process)
            assert reply["id"] is None and reply["error"]["code"] == -32600
            assert "longer than 4096 bytes" in reply["error"]["message"]
        assert process.wait(timeout=30) == 1  # after a line with no end in sight, the service closed the session


def test_local_sessions_count_against_the_per_client_cap_and_show_in_metrics(tmp_path):
    toml = '[gateway]\nprovider = "mock"\n[service]\nmcp_sessions_per_client = 1\n'
    with running_service(tmp_path, toml) as svc, initialized(relay(svc.state_dir)) as first:
        with relay(svc.state_dir) as refused:
            reply = receive(refused)
            assert refused.wait(timeout=30) == 1
            refused_said = refused.stderr.read()
        with initialized(relay(svc.state_dir, client="frank")) as other:
            metrics = httpx.get(f"{svc.url}/metrics").text
            other.stdin.close()
            assert other.wait(timeout=30) == 0
        first.stdin.close()
        assert first.wait(timeout=30) == 0
    assert reply["id"] is None and "session refused: erin already holds 1 MCP sessions" in reply["error"]["message"]
    assert "closed the session before stdin closed" in refused_said
    assert "system1_mcp_sessions 2.0" in metrics


def test_a_connection_without_a_hello_line_is_refused_and_a_bad_name_is_anonymous(tmp_path, monkeypatch):
    monkeypatch.setattr(mcp_socket, "HELLO_TIMEOUT_S", 0.2)
    log = tmp_path / "requests.jsonl"
    with running_service(tmp_path, f'[gateway]\nprovider = "mock"\n[service]\nrequest_log = "{log}"\n') as svc:
        replies = []
        for hello in (b"hello\n", b""):
            with socket.socket(socket.AF_UNIX) as sock:
                sock.settimeout(30)
                sock.connect(str(mcp_socket_path(svc.state_dir)))
                sock.sendall(hello)
                replies.append(json.loads(sock.makefile().readline())["error"]["message"])
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(30)
            sock.connect(str(mcp_socket_path(svc.state_dir)))
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "system1_decide", "arguments": SEED}}
            sock.sendall(b'{"system1_client": "no spaces allowed"}\n' + json.dumps(INITIALIZE).encode() + b"\n"
                         + json.dumps(call).encode() + b"\n")
            answers = sock.makefile()
            assert json.loads(answers.readline())["id"] == 1
            assert json.loads(answers.readline())["result"]["structuredContent"]["status"] == "decided"
        svc.service.request_log.close()
    assert replies == ['session refused: the first line must be {"system1_client": "<name>"}',
                       "session refused: no hello line within 0.2 s"]
    assert json.loads(log.read_text().splitlines()[-1])["client"] == "anonymous"


def test_the_relay_says_so_when_the_service_stops_under_it(tmp_path):
    with running_service(tmp_path, '[gateway]\nprovider = "mock"\n') as svc:
        process = initialized(relay(svc.state_dir))
    with process:
        assert process.wait(timeout=30) == 1
        assert "closed the session before stdin closed" in process.stderr.read()


@pytest.mark.anyio
async def test_without_a_socket_system1_mcp_bridges_over_http_with_the_bridge_token(tmp_path):
    # A state directory too deep for a socket address (108 bytes): the service serves without
    # the socket and `system1 mcp` falls back to forwarding each call over HTTP.
    deep = tmp_path / ("d" * 60) / ("e" * 40)
    with running_service(tmp_path, '[gateway]\nprovider = "mock"\n', SYSTEM1_INSTALL_DIR=str(deep)) as svc:
        assert not mcp_socket_path(deep).exists()
        env = {**os.environ, "SYSTEM1_INSTALL_DIR": str(deep), "SYSTEM1_CLIENT": "erin", "SYSTEM1_GATEWAY_URL": svc.url}
        params = StdioServerParameters(command=sys.executable, args=["-m", "system1", "mcp"], env=env)
        with anyio.fail_after(60):
            async with Client(params, mode="legacy") as client:
                decided = await client.call_tool("system1_decide", SEED)
                health = await client.call_tool("system1_health", {})
    assert decided.structured_content["decision"] == "rerun the pipeline"
    assert health.structured_content["status"] == "ok"


def test_a_client_that_hung_up_is_told_apart_from_a_session_that_failed():
    hung_up = mcp_socket.hung_up
    assert hung_up(anyio.BrokenResourceError()) and hung_up(BrokenPipeError())
    assert hung_up(ExceptionGroup("wire", [anyio.BrokenResourceError(), ExceptionGroup("inner", [ConnectionResetError()])]))
    assert not hung_up(ExceptionGroup("wire", [anyio.BrokenResourceError(), ValueError("a bug")]))
    assert not hung_up(RuntimeError("a bug"))
