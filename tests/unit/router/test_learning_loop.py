"""The learning loop through the gateway served for real: the shadow counted at /metrics, a
checked answer's headers, feedback by request id, and `system1 router refit --write` changing
the route of the next request once the running service has reloaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from tests.fakes.hosted_chat import hosted_chat

from ..service_harness import running_service
from .catalogues import router_toml

CHEAP, TOP = "cloud/cheap", "cloud/top"
CHAT = {"model": "auto", "messages": [{"role": "user", "content": "Write a function that reverses a list"}]}


def config(upstream_url: str) -> str:
    # The mock engine answers every question with its first option at 0.9: topic code-gen,
    # complexity and risk 0, private "yes" (ignored here), and "yes" the answer satisfies.
    cloud = {"base_url": upstream_url, "apis": ["openai"], "local": False}
    models = [{"id": CHEAP, "upstream": "cloud", "price": {"in": 0.5, "out": 1.5}, "default_skill": 0.6},
              {"id": TOP, "upstream": "cloud", "price": {"in": 5, "out": 25}, "default_skill": 0.95}]
    return router_toml({"cloud": cloud}, models, private="ignore", decision={"shadow": "mock"},
                       check={"enabled": True, "min_probability": 0.5})


@pytest.fixture
def gateway(tmp_path):
    with hosted_chat() as upstream, running_service(tmp_path, config(upstream.url)) as running:
        yield running


def metric(url: str, line_start: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_routed_answer_is_checked_shadowed_and_takes_feedback(gateway):
    reply = httpx.post(f"{gateway.url}/v1/chat/completions", json=CHAT, timeout=30)
    assert reply.status_code == 200 and reply.headers["x-router-model"] == CHEAP
    assert reply.headers["x-router-check"] == "0.900" and "x-router-escalated" not in reply.headers
    assert metric(gateway.url, f'system1_router_checks_total{{model="{CHEAP}",verdict="pass"}}') == 1
    agreed = f'system1_router_shadow_agreement_total{{agreed="true",model="{CHEAP}",signal="topic"}}'
    gateway.call(gateway.service.router.settle)  # the shadow answers after the request, off its path
    assert metric(gateway.url, agreed) == 1
    request_id = reply.headers["x-router-request-id"]
    recorded = httpx.post(f"{gateway.url}/v1/router/feedback", json={"request_id": request_id, "verdict": "bad"})
    assert recorded.status_code == 200 and recorded.json() == {"recorded": True, "request_id": request_id, "known": True}
    refused = httpx.post(f"{gateway.url}/v1/router/feedback", json={"request_id": request_id, "verdict": "so-so"})
    assert refused.status_code == 400 and refused.json()["error"]["message"].startswith("verdict:")


def test_refit_from_feedback_moves_the_next_route_once_the_service_reloads(gateway, tmp_path):
    for text in ("Write a function that reverses a list", "Write a class for a stack", "Write a CLI that greets"):
        reply = httpx.post(f"{gateway.url}/v1/chat/completions",
                           json={**CHAT, "messages": [{"role": "user", "content": text}]}, timeout=30)
        assert reply.headers["x-router-model"] == CHEAP
        httpx.post(f"{gateway.url}/v1/router/feedback",
                   json={"request_id": reply.headers["x-router-request-id"], "verdict": "bad"}).raise_for_status()
    gateway.call(gateway.service.router.settle)  # the logs are written off the request path
    env = {**os.environ, "SYSTEM1_CONFIG": str(gateway.config_path), "SYSTEM1_INSTALL_DIR": str(gateway.state_dir)}
    dry = subprocess.run([sys.executable, "-m", "system1", "router", "refit", "--url", gateway.url],
                         env=env, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert f"| {CHEAP} | code-gen | 0.600 | 0.600 → 0.462 | 3 (0 / 3) | feedback 3 |" in dry.stdout
    assert "Nothing written" in dry.stderr and not (gateway.state_dir / "router" / "skills.json").exists()
    wrote = subprocess.run([sys.executable, "-m", "system1", "router", "refit", "--write", "--json", "--prior-strength", "0",
                            "--url", gateway.url], env=env, capture_output=True, text=True, timeout=60)
    assert wrote.returncode == 0 and "reloaded" in wrote.stderr, wrote.stderr
    assert json.loads(wrote.stdout)["refitted"][0]["new"] == 0.0  # stdout is the JSON alone
    skills = json.loads((gateway.state_dir / "router" / "skills.json").read_text())
    assert skills["skills"] == {CHEAP: {"code-gen": 0.0}} and skills["evidence"] == {CHEAP: {"code-gen": 3}}
    plan = httpx.post(f"{gateway.url}/v1/router/route", json={**CHAT, "messages": [{"role": "user", "content": "Write a sort"}]})
    assert plan.json()["model"] == TOP
