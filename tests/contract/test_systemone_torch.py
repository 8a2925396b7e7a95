"""serve.py's torch engines (gte, Qwen3-Reranker, AnyJev, OpenThai), each loading a tiny random
checkpoint in the shape of its real model (make_tiny_engines.py), in the systemone-torch
environment (requirements-torch.lock), answering through the gateway's `systemone` adapter.
Real loaders and code paths, meaningless answers: shapes, not skill."""

from __future__ import annotations

import subprocess

import pytest

from tests import tools
from tests.processes import free_port, server

from .conftest import ROOT, choice_and_yes_no

pytestmark = [pytest.mark.contract, pytest.mark.needs_torch, pytest.mark.anyio]
ENGINES = ("gte", "qwen3-rerank", "anyjev", "openthai")


@pytest.fixture(scope="module", params=ENGINES)
def engine(request, tmp_path_factory):
    """(engine, endpoint): serve.py on the engine's tiny checkpoint, as its users start it."""
    name = request.param
    python = tools.torch_python()
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
    choice, _, health = await choice_and_yes_no(tmp_path, "systemone", endpoint)
    assert choice.model == f"tiny-{name}"  # the weights directory's name, wherever it is mounted
    assert health["status"] == "ok" and f"engine {name}" in health["providers"][0]["detail"]
