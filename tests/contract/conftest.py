"""Real engine servers, started locally as their users start them, on free loopback ports."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from system1.core.gateway import Gateway
from system1.core.result import Decision
from system1.providers.base import Provider, Query
from system1.service.reports import health_report

from ..unit.helpers import config_in

ROOT = Path(__file__).resolve().parents[2]
VENVS = ROOT / ".venvs"
LLAMA = ROOT / "build" / "llama"  # llama-server, its source tree and models (engines/llama)
TEAMS = ["billing: charges and refunds", "technical: bugs and outages", "sales: plans and prices"]


def venv_tool(venv: str, tool: str) -> Path:
    path = VENVS / venv / "bin" / tool
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make contract-envs` first")
    return path


def built(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make contract-envs` first")
    return path


@pytest.fixture(scope="session")
def tiny_laya(tmp_path_factory) -> Path:
    """A tiny random laya checkpoint as a GGUF for llama-server (engines/llama/convert_laya.py)."""
    out = tmp_path_factory.mktemp("tiny-laya-gguf")
    python = venv_tool("laya", "python")
    subprocess.run([str(python), str(ROOT / "tests" / "contract" / "make_tiny_laya.py"), str(out / "checkpoint")],
                   check=True, timeout=300)
    subprocess.run([str(python), str(ROOT / "engines" / "llama" / "convert_laya.py"), str(out / "checkpoint"),
                    str(out / "tiny-laya.gguf"), "--llama-cpp", str(built(LLAMA / "llama.cpp"))],
                   check=True, timeout=300, capture_output=True)
    return out / "tiny-laya.gguf"


async def choice_and_yes_no(tmp_path: Path, provider: str, endpoint: str, extra: str = "") -> tuple[Decision, Decision, dict[str, Any]]:
    """A three-team choice and a yes/no question through a gateway on `provider` at `endpoint`
    (`extra`: more keys of its table), and the gateway's health report; both answers checked for
    the contract's shape."""
    toml = (f'[gateway]\nprovider = "{provider}"\nmin_confidence = 0\ntimeout_s = 60\n'
            f'[providers.{provider}]\nendpoint = "{endpoint}"\n{extra}')
    gateway = Gateway(config_in(tmp_path, toml))
    try:
        choice = await gateway.decide({"question": "Which team should handle this?", "options": TEAMS,
                                       "context": {"ticket": "I was charged twice"}})
        yes_no = await gateway.decide({"question": "Is this command destructive?",
                                       "context": {"command": "git push --force origin main"}})
        health = await health_report(gateway)
    finally:
        await gateway.aclose()
    assert choice.status == "decided" and choice.provider == provider and choice.decision in TEAMS, choice
    assert set(choice.probabilities) == set(TEAMS) and sum(choice.probabilities.values()) == pytest.approx(1, abs=1e-3)
    assert yes_no.status == "decided" and yes_no.decision in ("yes", "no"), yes_no
    return choice, yes_no, health


#: The router's four questions about one prompt: a topic choice, two scores and a yes/no.
ROUTER_QUESTIONS = [
    Query("What is the main kind of work this request asks for?", ["debugging", "docs", "chat"]),
    Query("How much reasoning capability does this request need?",
          ["trivial", "routine", "substantial", "expert"], score=True),
    Query("How costly would a wrong answer be?", ["harmless", "annoying", "damaging"], score=True),
    Query("Does the request contain secrets or personal data?", ["yes", "no"], yes_no=True),
]


async def router_questions(provider: Provider) -> None:
    """The four questions in one request to `provider`, each answer checked for its type's shape."""
    try:
        answers = await provider.decide_many("My Java service throws a NullPointerException in production",
                                             ROUTER_QUESTIONS, 60)
    finally:
        await provider.aclose()
    for answer, query in zip(answers, ROUTER_QUESTIONS, strict=True):
        assert answer.decision in query.choices, (query.question, answer)
        assert set(answer.probabilities) <= set(query.choices)
        assert sum(answer.probabilities.values()) == pytest.approx(1, abs=1e-3)
