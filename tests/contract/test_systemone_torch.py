"""serve.py's torch engines (gte, Qwen3-Reranker, AnyJev, OpenThai), each loading a tiny random
checkpoint in the shape of its real model (make_tiny_engines.py), in the systemone-torch
environment (requirements-torch.lock), answering through the gateway's `systemone` adapter.
Real loaders and code paths, meaningless answers: shapes, not skill."""

from __future__ import annotations

import subprocess

import pytest

from system1.core.gateway import Gateway
from system1.service.reports import health_report
from tests.processes import free_port, server

from ..unit.helpers import config_in
from .conftest import ROOT, venv_tool

pytestmark = [pytest.mark.contract, pytest.mark.anyio]
ENGINES = ("gte", "qwen3-rerank", "anyjev", "openthai")
TEAMS = ["billing: charges and refunds", "technical: bugs and outages", "sales: plans and prices"]


@pytest.fixture(scope="module", params=ENGINES)
def engine(request, tmp_path_factory):
    """(engine, endpoint): serve.py on the engine's tiny checkpoint, as its users start it."""
    name = request.param
    python = venv_tool("systemone-torch", "python")
    checkpoint = tmp_path_factory.mktemp("tiny-engines") / f"tiny-{name}"
    subprocess.run([str(python), str(ROOT / "tests" / "contract" / "make_tiny_engines.py"), name, str(checkpoint)],
                   check=True, timeout=300, capture_output=True)
    port = free_port()
    args = [str(python), str(ROOT / "engines" / "systemone" / "serve.py"), "--engine", name, "--model", str(checkpoint),
            "--port", str(port)]
    with server(args, f"http://127.0.0.1:{port}/health", {"SYSTEMONE_THREADS": "2"}, timeout_s=180):
        yield name, f"http://127.0.0.1:{port}"


async def test_each_torch_engine_answers_a_choice_and_a_yes_no_question_through_the_gateway(engine, tmp_path):
    name, endpoint = engine
    toml = (f'[gateway]\nprovider = "systemone"\nmin_confidence = 0\ntimeout_s = 60\n'
            f'[providers.systemone]\nendpoint = "{endpoint}"\n')
    gateway = Gateway(config_in(tmp_path, toml))
    try:
        choice = await gateway.decide({"question": "Which team should handle this?", "options": TEAMS,
                                       "context": {"ticket": "I was charged twice"}})
        yes_no = await gateway.decide({"question": "Is `git push --force` to main destructive?"})
        health = await health_report(gateway)
    finally:
        await gateway.aclose()
    assert choice.status == "decided" and choice.decision in TEAMS, choice
    assert set(choice.probabilities) == set(TEAMS) and sum(choice.probabilities.values()) == pytest.approx(1, abs=1e-3)
    assert choice.model == f"tiny-{name}"  # the weights directory's name, wherever it is mounted
    assert yes_no.status == "decided" and yes_no.decision in ("yes", "no"), yes_no
    assert health["status"] == "ok" and f"engine {name}" in health["providers"][0]["detail"]
