"""Faults under load: the engine hung (SIGSTOP) and killed while clients keep asking, through a
real `system1 serve` with a fallback. Every request gets an answer, and every answer is a valid
schema v1 envelope; none is lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import httpx
import pytest

from system1.core.schema import DecideResponse
from tests.processes import free_port, server

from .conftest import ENGINE, TALLY

pytestmark = pytest.mark.anyio
CLIENTS = 6
REQUEST = {"question": "Which team should handle this?", "context": {"message": "I was charged twice"},
           "options": ["billing: charges, refunds", "technical: bugs and outages", "sales: pricing"]}


@dataclass
class Load:
    answers: list[tuple[str, str | None]] = field(default_factory=list)  # (phase, provider)
    lost: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)
    phase: str = "warm"
    changed: anyio.Event = field(default_factory=anyio.Event)

    def count(self, phase: str, provider: str | None = None) -> int:
        return sum(1 for p, who in self.answers if p == phase and (provider is None or who == provider))

    async def until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            self.changed = anyio.Event()
            await self.changed.wait()


async def client(url: str, load: Load, done: anyio.Event) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        while not done.is_set():
            phase = load.phase
            try:
                response = await http.post("/v1/decide", json=REQUEST)
                envelope = DecideResponse.model_validate_json(response.content)
            except httpx.HTTPError as exc:
                load.lost.append(f"{phase}: {type(exc).__name__}")
            except ValueError as exc:
                load.invalid.append(f"{phase}: {exc}")
            else:
                if envelope.status == "error" and response.status_code != 429:
                    load.invalid.append(f"{phase}: {envelope.error.code.value}: {envelope.error.message}")
                load.answers.append((phase, envelope.provider))
            TALLY.requests += 1
            load.changed.set()


def start_engine(port: int) -> subprocess.Popen:
    env = {**os.environ, "SYSTEMONE_THREADS": "1"}
    return subprocess.Popen([sys.executable, str(ENGINE), "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def test_a_hung_then_killed_engine_loses_no_answer_and_garbles_none(tmp_path):
    engine_port, gateway_port = free_port(), free_port()
    config = tmp_path / "config.toml"
    config.write_text(
        '[gateway]\nprovider = "systemone"\nfallback = ["mock"]\ntimeout_s = 2\n'
        f'[providers.systemone]\nendpoint = "http://127.0.0.1:{engine_port}"\nbatch = true\n'
        'breaker_failures = 2\nbreaker_cooldown_s = 1\n[service]\nhealth_interval_s = 0.5\n')
    env = {"SYSTEM1_CONFIG": str(config), "SYSTEM1_INSTALL_DIR": str(tmp_path / "state")}
    url = f"http://127.0.0.1:{gateway_port}"
    engine = start_engine(engine_port)
    load, done = Load(), anyio.Event()
    try:
        with server([sys.executable, "-m", "system1", "serve", "--port", str(gateway_port)], f"{url}/healthz", env):
            with anyio.fail_after(240):
                async with anyio.create_task_group() as tasks:
                    for _ in range(CLIENTS):
                        tasks.start_soon(client, url, load, done)
                    await load.until(lambda: load.count("warm", "systemone") >= 20)

                    load.phase = "hung"
                    engine.send_signal(signal.SIGSTOP)
                    await load.until(lambda: load.count("hung", "mock") >= 40)
                    engine.send_signal(signal.SIGCONT)
                    load.phase = "resumed"
                    await load.until(lambda: load.count("resumed", "systemone") >= 20)

                    load.phase = "killed"
                    engine.kill()
                    engine.wait(timeout=30)
                    await load.until(lambda: load.count("killed", "mock") >= 40)
                    engine = start_engine(engine_port)
                    load.phase = "restarted"
                    await load.until(lambda: load.count("restarted", "systemone") >= 20)
                    done.set()
    finally:
        if engine.poll() is None:
            engine.send_signal(signal.SIGCONT)
            engine.terminate()
            engine.wait(timeout=30)
    assert load.lost == [] and load.invalid == []
    # The faults were real: the fallback answered while the engine was hung and while it was gone.
    assert load.count("hung", "mock") >= 40 and load.count("killed", "mock") >= 40
