"""The default stack, up once for the stack tests: `compose up` of the images `make images`
built (compose.ci.yaml where no registry is reachable), torn down with its volumes after."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
GATEWAY = "http://127.0.0.1:8080"
PROMETHEUS = "http://127.0.0.1:9090"
CONTAINERS = ("system1-gateway", "system1-systemone", "system1-metrics", "system1-llama")
# The gateway reads a copy of deploy/config.toml, which a test may edit as a user edits theirs.
STACK_CONFIG = ROOT / "build" / "stack" / "config.toml"


def compose_command() -> list[str]:
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        base = ["docker", "compose"]
    elif shutil.which("docker-compose"):
        base = ["docker-compose"]
    else:
        pytest.skip("no Docker Compose on this machine")
    files = os.environ.get("SYSTEM1_COMPOSE_FILES", "compose.yaml:compose.ci.yaml").split(":")
    return base + [arg for f in files for arg in ("-f", str(ROOT / f))]


def wait_until(predicate, timeout_s: float, what: str, interval_s: float = 0.5):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)  # allow-sleep: polling containers, bounded by the deadline


def gateway_status() -> str | None:
    """The gateway's own health status ("ok", "degraded", …), or None while it does not answer."""
    try:
        return httpx.get(f"{GATEWAY}/v1/health", timeout=5).json().get("status")
    except (httpx.HTTPError, ValueError):
        return None


def health_status(container: str) -> str | None:
    result = subprocess.run(["docker", "inspect", "-f", "{{.State.Health.Status}}", container], capture_output=True, text=True)
    return result.stdout.strip() if result.returncode == 0 else None


@pytest.fixture(scope="session")
def stack():
    compose = compose_command()
    STACK_CONFIG.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / "deploy" / "config.toml", STACK_CONFIG)
    os.environ["SYSTEM1_CONFIG_FILE"] = str(STACK_CONFIG)  # for every compose command of the session
    env = {**os.environ, "COMPOSE_PROJECT_NAME": "system1"}
    subprocess.run([*compose, "down", "-v", "--remove-orphans"], cwd=ROOT, env=env, capture_output=True, timeout=300)
    subprocess.run(["docker", "rm", "-f", *CONTAINERS], capture_output=True, timeout=120)
    subprocess.run([*compose, "up", "-d"], cwd=ROOT, env=env, check=True, timeout=600)
    try:
        for container in CONTAINERS:
            wait_until(lambda c=container: health_status(c) == "healthy", 180, f"{container} to be healthy")
        # Each container is healthy once it serves; the gateway says "ok" once its probes find
        # the primary engine and every cascade stage serving, which on a cold start can come a
        # little later (the first test once saw "degraded" here).
        wait_until(lambda: gateway_status() == "ok", 120, "the gateway's health to be ok")
        yield compose
    finally:
        logs = subprocess.run([*compose, "logs", "--no-color", "--tail=200"], cwd=ROOT, env=env, capture_output=True, text=True)
        (ROOT / "build" / "stack-logs.txt").write_text(logs.stdout + logs.stderr)
        subprocess.run([*compose, "down", "-v", "--remove-orphans"], cwd=ROOT, env=env, capture_output=True, timeout=300)
        os.environ.pop("SYSTEM1_CONFIG_FILE", None)


@pytest.fixture
def http():
    with httpx.Client(base_url=GATEWAY, timeout=30) as client:
        yield client
