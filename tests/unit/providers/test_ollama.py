"""The ollama adapter against `/api/chat` with logprobs and `/api/tags`."""

from __future__ import annotations

import math

import httpx
import pytest

from system1.providers.base import MalformedResponse, ProviderError, ProviderTimeout, Query
from system1.providers.ollama import OllamaOptions, OllamaProvider

from ..helpers import FakeWire, json_reply

pytestmark = pytest.mark.anyio

QUERY = Query("Which tool lists files?", ["ls", "rm", "cat"])
STATE = {"shell": "bash"}


def chat_reply(content="A", top=(("A", -0.1), ("B", -2.5), (" C", -4.0), ("Hello", -5.0))):
    return {
        "model": "gemma4:e4b", "message": {"role": "assistant", "content": content}, "done": True,
        "logprobs": [{"token": content, "logprob": top[0][1], "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top]}],
    }


def ollama(wire, model="gemma4:e4b") -> OllamaProvider:
    return OllamaProvider(OllamaOptions(model=model), client=wire.client())


async def test_options_are_letters_asked_at_temperature_zero_with_top_logprobs():
    wire = FakeWire(json_reply(chat_reply()))
    answer = await ollama(wire).decide(STATE, QUERY, 5)
    body = wire.bodies[0]
    assert wire.requests[0].url.path == "/api/chat"
    assert (body["model"], body["stream"], body["logprobs"], body["top_logprobs"], body["options"]) == (
        "gemma4:e4b", False, True, 20, {"temperature": 0})
    prompt = body["messages"][0]["content"]
    assert "A. ls\nB. rm\nC. cat" in prompt and '{"shell": "bash"}' in prompt and QUERY.question in prompt
    total = math.exp(-0.1) + math.exp(-2.5) + math.exp(-4.0)
    assert answer.decision == "ls"
    assert answer.confidence == pytest.approx(math.exp(-0.1) / total)
    assert answer.probabilities["cat"] == pytest.approx(math.exp(-4.0) / total)


async def test_yes_no_is_two_letters():
    wire = FakeWire(json_reply(chat_reply("B", (("B", -0.2), ("A", -1.8)))))
    answer = await ollama(wire).decide(None, Query("Is rm -rf reversible?", ["yes", "no"], yes_no=True), 5)
    assert "A. yes\nB. no" in wire.bodies[0]["messages"][0]["content"]
    assert answer.decision == "no"


async def test_a_reply_that_is_not_an_option_letter_is_malformed():
    with pytest.raises(MalformedResponse, match="not an option letter"):
        await ollama(FakeWire(json_reply(chat_reply("D")))).decide(STATE, QUERY, 5)
    with pytest.raises(MalformedResponse, match="not an option letter"):
        await ollama(FakeWire(json_reply(chat_reply("I think ls")))).decide(STATE, QUERY, 5)


async def test_a_reply_without_logprobs_is_malformed():
    reply = chat_reply()
    del reply["logprobs"]
    with pytest.raises(MalformedResponse, match="0.12 or later"):
        await ollama(FakeWire(json_reply(reply))).decide(STATE, QUERY, 5)


async def test_more_than_26_options_is_a_provider_error():
    wire = FakeWire(json_reply(chat_reply()))
    with pytest.raises(ProviderError, match="at most 26"):
        await ollama(wire).decide(None, Query("q", [f"o{i}" for i in range(27)]), 5)
    assert wire.requests == []


async def test_errors_and_timeouts_are_typed():
    with pytest.raises(ProviderError, match="HTTP 404: model 'x' not found"):
        await ollama(FakeWire(json_reply({"error": "model 'x' not found"}, 404))).decide(STATE, QUERY, 5)

    def stall(request):
        raise httpx.ReadTimeout("slow", request=request)

    with pytest.raises(ProviderTimeout):
        await ollama(FakeWire(stall)).decide(STATE, QUERY, 1)


def test_model_is_required():
    with pytest.raises(ValueError, match="is required"):
        OllamaOptions()


async def test_health_checks_that_the_model_is_installed():
    tags = {"models": [{"name": "gemma4:e4b", "model": "gemma4:e4b"}, {"name": "llama3:latest"}]}
    assert (await ollama(FakeWire(json_reply(tags))).health(2)).ok
    assert (await ollama(FakeWire(json_reply(tags)), model="llama3").health(2)).ok
    missing = await ollama(FakeWire(json_reply(tags)), model="qwen3").health(2)
    assert not missing.ok and "ollama pull qwen3" in missing.detail


def test_capabilities():
    caps = OllamaProvider(OllamaOptions(model="m")).capabilities()
    assert (caps.max_options, caps.multi_question, caps.batch) == (26, False, False)
