"""engines/systemone: the NumPy MiniLM encoder and the `/v1/systemone` server around it,
in process (the real model, served through its ASGI app)."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[3] / "engines" / "systemone"))

from systemone_engine.app import create_app  # noqa: E402
from systemone_engine.backends import E5, MiniLM, jev_confidence  # noqa: E402

pytestmark = pytest.mark.anyio
PORT = 8790
TEAM = {"type": "choice", "instructions": "Which team should handle this?",
        "criteria": {"billing": "billing: charges, refunds, payouts", "technical": "technical: bugs and outages",
                     "sales": "sales: pricing and plans"}}


@pytest.fixture(scope="module")
def minilm() -> MiniLM:
    return MiniLM()


@pytest.fixture(scope="module")
def e5() -> E5:
    return E5(threads=1)


def client_for(engine, api_key: str = "", hosts=(), embedders=()) -> httpx.AsyncClient:
    app = create_app(engine, PORT, hosts, api_key, embedders=embedders)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=f"http://127.0.0.1:{PORT}")


def test_the_encoder_reproduces_the_reference_similarity(minilm):
    # sentence-transformers' documentation gives 0.7553 for this pair with all-MiniLM-L6-v2.
    vectors = minilm.encoder.encode(["A man is eating food.", "A man is eating a piece of bread."])
    assert float(vectors[0] @ vectors[1]) == pytest.approx(0.7553, abs=5e-4)
    assert np.linalg.norm(vectors, axis=1) == pytest.approx([1.0, 1.0])


def test_the_encoder_matches_sentence_transformers(minilm):
    # Reference embeddings computed once with sentence-transformers (torch, CPU) on the same
    # packaged weights; the NumPy encoder's tanh GELU keeps it within 2e-3.
    import json

    reference = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text(encoding="utf-8"))
    vectors = minilm.encoder.encode(reference["texts"])
    assert np.allclose(vectors @ vectors.T, reference["cosine"], atol=2e-3)
    assert np.allclose(vectors[:, :8], reference["first_dims"], atol=2e-3)


def test_padding_does_not_change_an_embedding(minilm):
    alone = minilm.encoder.encode(["short"])
    padded = minilm.encoder.encode(["short", "a much longer sentence that forces padding of the first one"])
    assert np.allclose(alone[0], padded[0], atol=1e-5)


def test_jev_confidence_is_the_margin_formula():
    assert jev_confidence(np.array([0.5, 0.5])) == 0.0
    assert jev_confidence(np.array([1.0, 0.0, 0.0])) == 1.0
    assert jev_confidence(np.array([0.6, 0.2, 0.2])) == pytest.approx(0.4)


async def test_a_choice_is_answered_by_the_real_model(minilm):
    async with client_for(minilm) as client:
        reply = (await client.post("/v1/systemone", json={"state": "My payouts have been failing for three days.",
                                                          "questions": {"team": TEAM}})).json()
    answer = reply["answers"]["team"]
    assert reply["model"] == "all-MiniLM-L6-v2" and reply["usage"]["input_tokens"] > 0
    assert answer["type"] == "choice" and answer["choice"] == "billing"
    assert sum(answer["probabilities"].values()) == pytest.approx(1.0, abs=1e-5)
    assert set(answer["probabilities"]) == {"billing", "technical", "sales"}


async def test_a_score_is_answered_in_jevs_shape_with_the_expected_level(minilm):
    levels = ["a question about wording, no hurry", "a bug to fix this week", "an outage that blocks every customer now"]
    question = {"type": "score", "instructions": "How urgent is this?", "criteria": levels}
    async with client_for(minilm) as client:
        reply = (await client.post("/v1/systemone", json={"state": "Checkout is down for every customer since the deploy.",
                                                          "questions": {"urgency": question}})).json()
    answer = reply["answers"]["urgency"]
    probabilities = [answer["probabilities"][str(i)] for i in range(3)]
    assert answer["type"] == "score" and answer["legend"] == {"0": levels[0], "1": levels[1], "2": levels[2]}
    assert sum(probabilities) == pytest.approx(1.0, abs=1e-5)
    assert answer["score"] == pytest.approx(sum(i * p for i, p in enumerate(probabilities)), abs=1e-5)
    assert max(range(3), key=probabilities.__getitem__) == 2


async def test_options_without_descriptions_are_scored_as_their_labels(minilm):
    async with client_for(minilm) as client:
        reply = (await client.post("/v1/systemone", json={"state": "The site returns 500 errors since the deploy.",
                 "questions": {"q": {"type": "choice", "instructions": "Which team?",
                                     "criteria": ["refunds and invoices", "server errors and outages"]}}})).json()
    assert reply["answers"]["q"]["choice"] == "server errors and outages"


async def test_noul_and_several_questions_in_one_pass(minilm):
    questions = {"team": TEAM, "angry": {"type": "noul", "instructions": "Is the customer angry?",
                                         "criteria": {"true": "an angry, upset customer", "false": "a calm, polite customer"}}}
    async with client_for(minilm) as client:
        reply = (await client.post("/v1/systemone", json={"state": "This is outrageous, I want my money back NOW!",
                                                          "questions": questions})).json()
    assert list(reply["answers"]) == ["team", "angry"]
    assert reply["answers"]["angry"]["type"] == "noul" and reply["answers"]["angry"]["noul"] > 0.5


async def test_a_yes_no_answer_from_closeness_to_the_question_says_it_is_relevance_alone(minilm):
    questions = {"bare": {"type": "noul", "instructions": "Is this command destructive?"},
                 "texts": {"type": "noul", "instructions": "Is the customer angry?",
                           "criteria": {"true": "an angry, upset customer", "false": "a calm, polite customer"}},
                 "team": TEAM}
    async with client_for(minilm) as client:
        reply = (await client.post("/v1/systemone", json={"state": "rm -rf build/", "questions": questions})).json()
    assert reply["answers"]["bare"]["relevance"] is True
    assert "relevance" not in reply["answers"]["texts"] and "relevance" not in reply["answers"]["team"]


async def test_yes_no_questions_about_one_state_share_one_encoder_pass(minilm, monkeypatch):
    questions = {f"q{i}": {"type": "noul", "instructions": text} for i, text in enumerate(
        ["Does this task ask to review or audit existing work?", "Does this task change any files?",
         "Is this task about databases?", "Does this task name the exact files to work on?"])}
    questions["team"] = TEAM
    state = "Please review the migration in db/0042_users.sql before I merge it."
    async with client_for(minilm) as client:
        await client.post("/v1/systemone", json={"state": "warm the question cache", "questions": questions})
        encoded: list[str] = []
        encode = minilm.encoder.encode
        monkeypatch.setattr(minilm.encoder, "encode", lambda texts: encoded.extend(texts) or encode(texts))
        reply = (await client.post("/v1/systemone", json={"state": state, "questions": questions})).json()
    # The state once for the four yes/no questions, and once with the choice's instructions.
    assert sorted(encoded) == sorted([state, f"{TEAM['instructions']}\n{state}"])
    assert [reply["answers"][q]["type"] for q in questions] == ["noul"] * 4 + ["choice"]
    assert reply["usage"]["input_tokens"] == minilm.encoder.count_tokens(encoded)


async def test_a_yes_no_answer_reads_how_close_the_state_is_to_the_question(minilm):
    question = {"type": "noul", "instructions": "Does this task ask to review or audit existing work?"}
    async with client_for(minilm) as client:
        review, poem = [(await client.post("/v1/systemone", json={"state": state, "questions": {"q": question}})).json()
                        for state in ("Review my pull request and audit it for security problems.", "Write a short poem about autumn.")]
    assert review["answers"]["q"]["noul"] > 0.5 > poem["answers"]["q"]["noul"]


async def test_the_batch_endpoint_answers_each_state_as_a_single_call_would(minilm):
    states = ["Refund my double charge", "The app crashes on login", "How much is the team plan?"]
    async with client_for(minilm) as client:
        batch = (await client.post("/v1/systemone/batch", json={"states": states, "questions": {"team": TEAM}})).json()
        singles = [(await client.post("/v1/systemone", json={"state": s, "questions": {"team": TEAM}})).json() for s in states]
    assert [r["answers"]["team"]["choice"] for r in batch["results"]] == ["billing", "technical", "sales"]
    for batched, single in zip(batch["results"], singles):
        for label, p in single["answers"]["team"]["probabilities"].items():
            assert batched["answers"]["team"]["probabilities"][label] == pytest.approx(p, abs=1e-4)
    assert batch["total_usage"]["input_tokens"] > 0


async def test_health_names_engine_model_and_device(minilm):
    async with client_for(minilm) as client:
        health = (await client.get("/health")).json()
    assert health == {"status": "ok", "engine": "minilm", "model": "all-MiniLM-L6-v2", "device": "cpu",
                      "max_options": 256, "batch": True, "embeds": True,
                      "embedders": ["all-MiniLM-L6-v2"]}


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"state": "x", "questions": {"q": {"type": "rank", "instructions": "How urgent?", "criteria": ["a", "b"]}}}, 422, "questions.q.type"),
        ({"state": "x", "questions": {"q": {"type": "score", "instructions": "How urgent?", "criteria": ["only one"]}}}, 422, "questions.q.criteria"),
        ({"state": "x", "questions": {"q": {"type": "score", "instructions": "How urgent?", "criteria": {"0": "low", "1": "high"}}}}, 422, "questions.q.criteria"),
        ({"state": "x", "questions": {"q": {"type": "score", "instructions": "How urgent?", "criteria": ["low", ""]}}}, 422, "questions.q.criteria"),
        ({"state": "x", "questions": {}}, 422, "questions"),
        ({"state": "x", "questions": {f"q{i}": TEAM for i in range(17)}}, 413, "questions"),
        ({"state": "x", "questions": {"q": {"type": "choice", "instructions": "?", "criteria": [f"o{i}" for i in range(257)]}}}, 422, "questions.q.criteria"),
        ({"state": "x", "questions": {"q": {"type": "choice", "instructions": "", "criteria": ["a", "b"]}}}, 422, "questions.q.instructions"),
        ({"state": "x", "questions": {"q": {"type": "noul", "instructions": "?", "criteria": {"maybe": "x"}}}}, 422, "questions.q.criteria"),
        ({"questions": {"q": TEAM}}, 422, "state"),
    ],
)
async def test_what_the_engine_cannot_answer_is_a_clear_4xx(minilm, body, status, field):
    async with client_for(minilm) as client:
        response = await client.post("/v1/systemone", json=body)
    assert response.status_code == status and response.json()["error"]["field"] == field


async def test_256_options_are_accepted(minilm):
    criteria = [f"option number {i}" for i in range(256)]
    async with client_for(minilm) as client:
        response = await client.post("/v1/systemone", json={"state": "x", "questions": {"q": {"type": "choice", "instructions": "?", "criteria": criteria}}})
    assert response.status_code == 200 and len(response.json()["answers"]["q"]["probabilities"]) == 256


async def test_bodies_that_are_not_json_or_too_large_are_refused(minilm):
    async with client_for(minilm) as client:
        not_json = await client.post("/v1/systemone", content=b"state=x")
        array = await client.post("/v1/systemone", json=[1])
        huge = await client.post("/v1/systemone", content=b"{" + b" " * 1_048_600 + b"}")
    assert not_json.status_code == 400 and array.status_code == 400
    assert huge.status_code == 413


async def test_only_allowed_hosts_are_answered(minilm):
    async with client_for(minilm, hosts=["systemone"]) as client:
        evil = await client.get("/health", headers={"Host": "evil.example:8790"})
        internal = await client.get("/health", headers={"Host": "systemone:8790"})
        localhost = await client.get("/health", headers={"Host": "localhost:8790"})
        other_port = await client.get("/health", headers={"Host": "localhost:9999"})
    assert evil.status_code == 403 and internal.status_code == 200 and localhost.status_code == 200
    assert other_port.status_code == 403


async def test_a_bearer_token_is_required_when_configured(minilm):
    async with client_for(minilm, api_key="engine-secret") as client:
        missing = await client.post("/v1/systemone", json={"state": "x", "questions": {"q": TEAM}})
        wrong = await client.get("/health", headers={"Authorization": "Bearer nope"})
        right = await client.get("/health", headers={"Authorization": "Bearer engine-secret"})
    assert missing.status_code == 401 and wrong.status_code == 401 and right.status_code == 200
    assert "engine-secret" not in missing.text


async def test_metrics_count_requests_and_passes(minilm):
    async with client_for(minilm) as client:
        await client.post("/v1/systemone/batch", json={"states": ["a", "b"], "questions": {"q": TEAM}})
        text = (await client.get("/metrics")).text
    assert 'systemone_requests_total{endpoint="batch",status="200"} 1.0' in text
    assert "systemone_pass_states_bucket" in text


@pytest.mark.parametrize(
    ("raw", "field", "needle"),
    [
        (rb'{"state": "a \ud800", "questions": {"q": {"type": "noul", "instructions": "?"}}}', "state", "lone surrogate"),
        (rb'{"state": {"n": NaN}, "questions": {"q": {"type": "noul", "instructions": "?"}}}', None, "NaN is not a JSON number"),
        (b'{"state": ' + b"[" * 40 + b"]" * 40 + b', "questions": {}}', "state" + ".0" * 32, "deeper than 32"),
        (b"[" * 100_000, None, "deeper than 32"),
    ],
)
async def test_hostile_json_is_a_400_naming_the_field(minilm, raw, field, needle):
    async with client_for(minilm) as client:
        response = await client.post("/v1/systemone", content=raw)
    assert response.status_code == 400 and needle in response.json()["error"]["message"]
    assert response.json()["error"]["field"] == field


async def test_a_request_over_the_work_budget_is_refused_before_any_pass(minilm):
    criteria = [f"option {i}: " + "x" * 1000 for i in range(256)]
    body = {"state": "x", "questions": {"q": {"type": "choice", "instructions": "?", "criteria": criteria}}}
    async with client_for(minilm) as client:
        response = await client.post("/v1/systemone", json=body)
        text = (await client.get("/metrics")).text
    assert response.status_code == 413 and "over this engine's budget of 250,000" in response.json()["error"]["message"]
    assert "systemone_pass_states_count 0.0" in text


async def test_work_past_its_deadline_is_stopped_and_answered_503(minilm):
    async with client_for(minilm) as client:
        response = await client.post("/v1/systemone", json={"state": "x", "questions": {"q": TEAM}},
                                     headers={"X-System1-Timeout-Ms": "0"})
        text = (await client.get("/metrics")).text
    assert response.status_code == 503 and "deadline passed" in response.json()["error"]["message"]
    assert "systemone_abandoned_passes_total 1.0" in text


def test_a_long_pass_stops_between_encoder_steps(minilm, monkeypatch):
    from systemone_engine.backends import Abandoned, Question

    calls = []
    encode = minilm.encoder.encode
    monkeypatch.setattr(minilm.encoder, "encode", lambda texts: calls.append(len(texts)) or encode(texts))
    question = Question("q", "noul", "Is it urgent?", ("true", "false"), ("yes", "no"))
    with pytest.raises(Abandoned):
        minilm.answer([f"state {i}" for i in range(100)], [question], stop=lambda: len(calls) >= 1)
    assert calls == [32]  # one chunk of the 100 states, then it stopped


async def test_an_engine_failure_is_a_json_500():
    class Broken(MiniLM):
        def __init__(self) -> None:
            self.name, self.model = "broken", "none"

        def answer(self, states, questions, stop=None, embed=False):
            raise RuntimeError("out of memory")

    async with client_for(Broken()) as client:
        response = await client.post("/v1/systemone", json={"state": "x", "questions": {"q": TEAM}})
        wrong_method = await client.get("/v1/systemone")
    assert response.status_code == 500 and response.json()["error"]["message"] == "the engine failed (RuntimeError)"
    assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "POST"


async def test_metrics_need_the_token_too(minilm):
    async with client_for(minilm, api_key="engine-secret") as client:
        anonymous = await client.get("/metrics")
        keyed = await client.get("/metrics", headers={"Authorization": "Bearer engine-secret"})
    assert anonymous.status_code == 401 and keyed.status_code == 200


def test_blas_threads_follow_the_cpus_this_process_may_use(tmp_path, monkeypatch):
    from systemone_engine.threads import available_cpus, configure_threads

    quota = tmp_path / "cpu.max"
    quota.write_text("150000 100000\n")  # 1.5 CPUs
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(64)))
    assert available_cpus(quota) == 2
    quota.write_text("max 100000\n")
    assert available_cpus(quota) == 64
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(variable, raising=False)
    assert configure_threads("3") == 3
    import os
    assert os.environ["OPENBLAS_NUM_THREADS"] == "3" and os.environ["OMP_NUM_THREADS"] == "3"


async def test_embed_returns_the_vectors_an_answer_pass_judged_from(minilm):
    states = ["rm -rf build/", {"tool": "Bash", "command": "ls -la"}]
    async with client_for(minilm) as client:
        embedded = (await client.post("/v1/embed", json={"instructions": "Is this destructive?", "states": states})).json()
        answered = (await client.post("/v1/systemone/batch", json={
            "states": states, "embed": True,
            "questions": {"d": {"type": "choice", "instructions": "Is this destructive?", "criteria": ["yes", "no"]}}})).json()
    vectors = np.array(embedded["embeddings"])
    assert embedded["model"] == "all-MiniLM-L6-v2" and embedded["dim"] == 384 and vectors.shape == (2, 384)
    assert np.linalg.norm(vectors, axis=1) == pytest.approx([1.0, 1.0], abs=1e-5)
    one_pass = np.array([r["answers"]["d"]["embedding"] for r in answered["results"]])
    assert np.allclose(one_pass, vectors, atol=1e-5)
    assert answered["results"][0]["answers"]["d"]["choice"] in {"yes", "no"}


async def test_embed_of_a_yes_no_question_is_the_states_own_vector(minilm):
    states = ["rm -rf build/", {"tool": "Bash", "command": "ls -la"}]
    async with client_for(minilm) as client:
        embedded = (await client.post("/v1/embed", json={"instructions": "Is this destructive?", "type": "noul",
                                                         "states": states})).json()
        answered = (await client.post("/v1/systemone/batch", json={
            "states": states, "embed": True, "questions": {"d": {"type": "noul", "instructions": "Is this destructive?"}}})).json()
    one_pass = np.array([r["answers"]["d"]["embedding"] for r in answered["results"]])
    assert np.allclose(one_pass, embedded["embeddings"], atol=1e-5)
    assert np.allclose(one_pass, minilm.encoder.encode(["rm -rf build/", "tool: Bash\ncommand: ls -la"]), atol=1e-5)


async def test_answers_carry_no_embedding_unless_asked(minilm):
    async with client_for(minilm) as client:
        reply = (await client.post("/v1/systemone", json={"state": "x", "questions": {"team": TEAM}})).json()
    assert "embedding" not in reply["answers"]["team"]


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"states": []}, 422, "states"),
        ({"states": ["a"] * 65}, 413, "states"),
        ({"states": ["a"], "instructions": 3}, 422, "instructions"),
        ({"states": ["a"], "type": "rank"}, 422, "type"),
        ({"states": ["x" * 300_000]}, 413, "states"),
        ({"states": [None]}, 422, "states.0"),
    ],
)
async def test_embed_refuses_bad_input_naming_the_field(minilm, body, status, field):
    async with client_for(minilm) as client:
        reply = await client.post("/v1/embed", json=body)
    assert reply.status_code == status and reply.json()["error"]["field"] == field


async def test_an_engine_without_embeddings_says_so(minilm):
    class Reranker(MiniLM):
        def __init__(self) -> None:  # no weights needed: it never encodes
            self.model, self.embeds = "reranker", False

    async with client_for(Reranker()) as client:
        embed = await client.post("/v1/embed", json={"states": ["a"]})
        asked = await client.post("/v1/systemone", json={"state": "a", "embed": True, "questions": {"team": TEAM}})
    assert embed.status_code == 501 and "no embeddings" in embed.json()["error"]["message"]
    assert asked.status_code == 422 and asked.json()["error"]["field"] == "embed"


async def test_embed_names_an_embedder_by_its_model_and_the_engines_own_stays_the_default(minilm, e5):
    state = {"prompt": "Kasia is on sick leave for depression; move her reviews to Tomek."}
    async with client_for(minilm, embedders=[e5]) as client:
        own = (await client.post("/v1/embed", json={"type": "noul", "states": [state]})).json()
        other = (await client.post("/v1/embed", json={"type": "noul", "model": "multilingual-e5-small",
                                                      "states": [state]})).json()
        health = (await client.get("/health")).json()
    assert own["model"] == "all-MiniLM-L6-v2" and other["model"] == "multilingual-e5-small" and other["dim"] == 384
    # e5's own vector of the judged text (an e5 query), not MiniLM's under another name.
    assert np.allclose(other["embeddings"][0], e5.encoder.query("prompt: " + state["prompt"]), atol=1e-5)
    assert not np.allclose(own["embeddings"][0], other["embeddings"][0], atol=0.1)
    assert health["embedders"] == ["all-MiniLM-L6-v2", "multilingual-e5-small"]


async def test_e5_gives_one_vector_of_the_text_alone_for_every_question_and_encodes_it_once(minilm, e5, monkeypatch):
    state = {"prompt": "Which invoice run double-charged account 881?"}
    encoded = []
    query = e5.encoder.query
    monkeypatch.setattr(e5.encoder, "query", lambda text: encoded.append(text) or query(text))
    e5._query.cache_clear()
    async with client_for(minilm, embedders=[e5]) as client:
        replies = [(await client.post("/v1/embed", json={"instructions": question, "type": kind, "states": [state],
                                                         "model": "multilingual-e5-small"})).json()["embeddings"][0]
                   for question, kind in (("What is the main topic?", "choice"), ("How complex is it?", "score"),
                                          ("Does it hold private data?", "noul"))]
    assert encoded == ["prompt: " + state["prompt"]]
    assert all(np.allclose(reply, replies[0]) for reply in replies)


async def test_embed_by_a_model_the_server_lacks_is_refused_naming_the_models_it_has(minilm):
    async with client_for(minilm) as client:
        reply = await client.post("/v1/embed", json={"model": "multilingual-e5-small", "states": ["a"]})
    assert reply.status_code == 422 and reply.json()["error"]["field"] == "model"
    assert "all-MiniLM-L6-v2" in reply.json()["error"]["message"]


async def test_the_gateways_adapter_embeds_what_the_engine_judges(minilm):
    from system1.providers.base import Query
    from system1.providers.systemone import SystemOneOptions, SystemOneProvider

    async with client_for(minilm) as client:
        provider = SystemOneProvider(SystemOneOptions(endpoint=f"http://127.0.0.1:{PORT}"), client)
        model, vector = await provider.embed({"command": "rm -rf /"}, Query("Is this destructive?", ["yes", "no"], True),
                                             5.0)
        judged = (await client.post("/v1/systemone", json={"state": {"command": "rm -rf /"}, "embed": True,
                  "questions": {"q": {"type": "noul", "instructions": "Is this destructive?"}}})).json()
    assert model == "all-MiniLM-L6-v2" and len(vector) == 384
    assert np.allclose(vector, judged["answers"]["q"]["embedding"], atol=1e-6)


async def test_when_the_embedder_answers_one_pass_serves_the_head_and_the_answer(minilm, tmp_path):
    from system1.core.gateway import Gateway
    from system1.core.heads import Head, Heads, kind_of
    from system1.providers.systemone import SystemOneOptions, SystemOneProvider

    from ..helpers import config_in

    paths: list[str] = []

    class Recording(httpx.ASGITransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            paths.append(request.url.path)
            return await super().handle_async_request(request)

    question = "Is this tool call destructive or hard to reverse?"
    app = create_app(minilm, PORT)
    async with httpx.AsyncClient(transport=Recording(app=app), base_url=f"http://127.0.0.1:{PORT}") as client:
        provider = SystemOneProvider(SystemOneOptions(endpoint=f"http://127.0.0.1:{PORT}"), client)
        # "yes" on the side of `rm -rf /` of the plane halfway between it and `ls`.
        destructive, harmless = minilm.embed(question, [{"command": "rm -rf /"}, {"command": "ls"}], kind="noul")
        direction, middle = destructive - harmless, (destructive + harmless) / 2
        head = Head(kind=kind_of(question, ["yes", "no"], yes_no=True), embedder="systemone",
                    model="all-MiniLM-L6-v2", options=["yes", "no"], weights=[[float(x) * 40 for x in direction],
                    [0.0] * 384], bias=[-40.0 * float(direction @ middle), 0.0])
        config = config_in(tmp_path, '[gateway]\nprovider = "systemone"\nmin_confidence = 0.6\n')
        gateway = Gateway(config, providers={"systemone": provider}, heads=Heads([head]))
        decision = await gateway.decide({"question": question, "context": {"command": "rm -rf /"}})
    assert decision.calibration == "head" and decision.decision == "yes"
    assert paths == ["/v1/systemone"]  # no separate /v1/embed call
