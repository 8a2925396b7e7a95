"""MCP through the service: streamable HTTP at `/mcp`, and `system1 mcp` as a subprocess (relaying
to the local socket, or bridging over HTTP)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from system1.service.auth import hash_key

from ..helpers import free_port
from ..service_harness import running_service

pytestmark = pytest.mark.anyio

SEED = {"question": "Rerun the flaky pipeline or block the merge?", "options": ["rerun the pipeline", "block the merge"]}


async def test_the_official_client_over_streamable_http(tmp_path):
    with running_service(tmp_path, '[gateway]\nprovider = "mock"\n') as svc:
        with anyio.fail_after(60):
            async with Client(f"{svc.url}/mcp", mode="legacy") as client:
                names = sorted(t.name for t in (await client.list_tools()).tools)
                assert names == ["system1_capabilities", "system1_decide", "system1_health"]
                decided = await client.call_tool("system1_decide", SEED)
                assert decided.structured_content["decision"] == "rerun the pipeline"
                health = await client.call_tool("system1_health", {})
                assert health.structured_content["status"] == "ok"
                caps = await client.call_tool("system1_capabilities", {})
                assert caps.structured_content["provider"] == "mock"
                metrics = httpx.get(f"{svc.url}/metrics").text
                assert "system1_mcp_sessions 1.0" in metrics


async def test_mcp_over_http_names_the_caller_by_key(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text(f"dana {hash_key('dana-key-0123456789')}\n")
    log = tmp_path / "requests.jsonl"
    toml = f'[gateway]\nprovider = "mock"\n[service]\napi_keys_file = "{keys}"\nrequest_log = "{log}"\n'
    with running_service(tmp_path, toml) as svc:
        http = httpx2.AsyncClient(headers={"Authorization": "Bearer dana-key-0123456789"})
        with anyio.fail_after(60):
            async with http, Client(streamable_http_client(f"{svc.url}/mcp", http_client=http)) as client:
                await client.call_tool("system1_decide", SEED)
        svc.service.request_log.close()
    assert json.loads(log.read_text().splitlines()[-1])["client"] == "dana"


def bridge_params(url: str, state_dir, client: str = "erin") -> StdioServerParameters:
    env = {**os.environ, "SYSTEM1_GATEWAY_URL": url, "SYSTEM1_INSTALL_DIR": str(state_dir), "SYSTEM1_CLIENT": client}
    return StdioServerParameters(command=sys.executable, args=["-m", "system1", "mcp"], env=env)


async def test_system1_mcp_beside_the_service_relays_to_it_with_the_callers_name(tmp_path):
    keys = tmp_path / "keys"
    keys.write_text(f"someone {hash_key('someone-key-0123456789')}\n")
    log = tmp_path / "requests.jsonl"
    toml = f'[gateway]\nprovider = "mock"\n[service]\napi_keys_file = "{keys}"\nrequest_log = "{log}"\n'
    with running_service(tmp_path, toml) as svc:
        with anyio.fail_after(60):
            async with Client(bridge_params(svc.url, svc.state_dir), mode="legacy") as client:
                decided = await client.call_tool("system1_decide", {**SEED, "request_id": "via-bridge"})
                invalid = await client.call_tool("system1_decide", {"question": ""})
                health = await client.call_tool("system1_health", {})
        svc.service.request_log.close()
    assert decided.structured_content["decision"] == "rerun the pipeline"
    assert invalid.is_error and invalid.structured_content["error"]["code"] == "invalid_request"
    assert health.structured_content["status"] == "ok"
    entry = json.loads(log.read_text().splitlines()[0])
    assert (entry["id"], entry["client"]) == ("via-bridge", "erin")  # trusted: it reached the private socket


async def test_the_bridge_reports_down_when_the_service_is_unreachable(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    with anyio.fail_after(60):
        async with Client(bridge_params(url, tmp_path)) as client:
            health = (await client.call_tool("system1_health", {})).structured_content
            decided = await client.call_tool("system1_decide", SEED)
    assert health["status"] == "down" and url in health["detail"] and "unreachable" in health["detail"]
    assert decided.is_error and decided.structured_content["error"]["code"] == "provider_error"


def test_the_bridge_exits_when_stdin_closes(tmp_path):
    env = {**os.environ, "SYSTEM1_GATEWAY_URL": f"http://127.0.0.1:{free_port()}", "SYSTEM1_INSTALL_DIR": str(tmp_path)}
    with subprocess.Popen([sys.executable, "-m", "system1", "mcp"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env) as process:
        process.stdin.close()
        assert process.wait(timeout=30) == 0
        assert process.stdout.read() == b""


def wait_until(condition, process: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """Until `condition()` holds, checking between tries that `process` is still running."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=0.05)
            raise AssertionError(f"the process exited with {process.returncode}")


def answers(client: httpx.Client, path: str = "/healthz") -> bool:
    try:
        return client.get(path).status_code == 200
    except httpx.TransportError:
        return False


def test_sighup_and_system1_reload_re_read_the_config(tmp_path):
    """A real `system1 serve` process: only it shows signals and the CLI's own reload."""
    port = free_port()
    config = tmp_path / "config.toml"
    config.write_text('[gateway]\nprovider = "mock"\n')
    env = {**os.environ, "SYSTEM1_CONFIG": str(config), "SYSTEM1_INSTALL_DIR": str(tmp_path / "state"),
           "SYSTEM1_GATEWAY_URL": f"http://127.0.0.1:{port}"}
    with (tmp_path / "serve.log").open("w") as log, subprocess.Popen(
        [sys.executable, "-m", "system1", "serve", "--port", str(port)], env=env, stdout=log, stderr=log
    ) as server:
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
                wait_until(lambda: answers(client), server)  # the port answers, not just a log line
                assert client.post("/v1/decide", json=SEED).json()["confidence"] == 0.9

                config.write_text('[gateway]\nprovider = "mock"\n[providers.mock]\nconfidence = 0.8\n')
                server.send_signal(signal.SIGHUP)
                wait_until(lambda: client.post("/v1/decide", json=SEED).json()["confidence"] == 0.8, server)

                config.write_text('[gateway]\nprovider = "mock"\n[providers.mock]\nconfidence = 0.75\n')
                done = subprocess.run([sys.executable, "-m", "system1", "reload"], env=env, capture_output=True, text=True, timeout=60)
                assert done.returncode == 0, done.stderr
                assert f"gateway: http://127.0.0.1:{port}" in done.stderr
                assert client.post("/v1/decide", json=SEED).json()["confidence"] == 0.75

                config.write_text("[gateway]\nnonsense = 1\n")
                refused = subprocess.run([sys.executable, "-m", "system1", "reload"], env=env, capture_output=True, text=True, timeout=60)
                assert refused.returncode != 0 and "nonsense" in refused.stderr
        finally:
            server.terminate()
            server.wait(timeout=30)


def test_sighup_during_start_up_never_kills_the_service(tmp_path):
    """As the image starts it: SIGHUP ignored until the service catches it itself."""
    port = free_port()
    config = tmp_path / "config.toml"
    config.write_text('[gateway]\nprovider = "mock"\n')
    env = {**os.environ, "SYSTEM1_CONFIG": str(config), "SYSTEM1_INSTALL_DIR": str(tmp_path / "state")}
    with (tmp_path / "serve.log").open("w") as log, subprocess.Popen(
        [sys.executable, "-m", "system1", "serve", "--port", str(port)], env=env, stdout=log, stderr=log,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),
    ) as server:
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
                def hup_and_check() -> bool:
                    server.send_signal(signal.SIGHUP)
                    return answers(client)

                wait_until(hup_and_check, server)  # SIGHUP over and over until it serves
                assert server.poll() is None and client.get("/v1/health").json()["status"] == "ok"
        finally:
            server.terminate()
            server.wait(timeout=30)
    assert "reloaded" in (tmp_path / "serve.log").read_text()


# The production stack where uvloop and httptools import, and the fallback with them hidden.
SERVER_STACKS = {
    "uvloop and httptools": [sys.executable, "-m", "system1"],
    "asyncio and h11": [sys.executable, "-c", "import sys; sys.modules.update(uvloop=None, httptools=None); "
                        "from system1.cli import main; sys.exit(main())"],
}


@pytest.mark.parametrize("stack", SERVER_STACKS)
def test_a_connection_that_never_finishes_its_request_head_is_closed(tmp_path, stack):
    port = free_port()
    config = tmp_path / "config.toml"
    config.write_text('[gateway]\nprovider = "mock"\n[service]\nheader_timeout_s = 0.5\n')
    env = {**os.environ, "SYSTEM1_CONFIG": str(config), "SYSTEM1_INSTALL_DIR": str(tmp_path / "state")}
    log_path = tmp_path / "serve.log"
    with log_path.open("w") as log, subprocess.Popen([*SERVER_STACKS[stack], "serve", "--port", str(port)], env=env,
                                                     stdout=log, stderr=log) as server:
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
                wait_until(lambda: answers(client), server)
            with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
                slow.sendall(b"GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
                assert slow.recv(1024) == b""  # the server hung up on it (well before the 10 s timeout)
        finally:
            server.terminate()
            server.wait(timeout=30)
    loop, parser = stack.split(" and ")
    assert f"with the {loop} event loop and the {parser} HTTP parser" in log_path.read_text()
