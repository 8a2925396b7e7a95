"""Learned heads at decision time: the kind key, which head applies, and the engine's answer
standing whenever a head cannot answer."""

from __future__ import annotations

import json
import logging
import math

import pytest

from system1.core.gateway import Gateway
from system1.core.heads import Head, Heads, kind_of
from system1.core.logs import Repeated
from system1.core.schema import RequestError, parse_request
from system1.providers.base import Capabilities, EngineAnswer, HealthProbe, OneQuestionProvider, ProviderError, Query

from ..helpers import config_in

pytestmark = pytest.mark.anyio

QUESTION = "Is this tool call destructive or hard to reverse?"
KIND = kind_of(QUESTION, ["yes", "no"], yes_no=True)
# On a 2-dimensional embedding: the first axis means "destructive".
DESTRUCTIVE = Head(kind=KIND, embedder="embedding", model="emb-1", options=["yes", "no"],
                   weights=[[4.0, 0.0], [-4.0, 0.0]], bias=[0.0, 0.0], temperature=1.0,
                   n=150, accuracy=0.9, engine_accuracy=0.5)


class Embedding(OneQuestionProvider):
    """Always answers "no" at 0.6; embeds `rm` commands on the first axis, others on the second."""

    name = "embedding"

    def __init__(self, model: str = "emb-1", down: bool = False, others: tuple[str, ...] = (),
                 relevance: bool = False) -> None:
        super().__init__(OneQuestionProvider.Options())
        self.model, self.down, self.others, self.relevance = model, down, others, relevance
        self.embedded: list[object] = []
        self.asked_models: list[str | None] = []

    async def decide_one(self, state, query: Query, timeout_s: float) -> EngineAnswer:
        return EngineAnswer("no", 0.6, {"yes": 0.4, "no": 0.6}, "engine says no", self.model,
                            relevance=self.relevance and query.yes_no)

    async def embed(self, state, query: Query, timeout_s: float, model: str | None = None) -> tuple[str, list[float]]:
        """Its own model's vector, or (`others`) another model's, which reads `rm` on the second axis."""
        self.embedded.append(state)
        self.asked_models.append(model)
        if self.down:
            raise ProviderError("connection refused", provider=self.name)
        if model not in (None, self.model, *self.others):
            raise ProviderError(f"model {model!r} is not an embedding model here", provider=self.name)
        rm = "rm" in json.dumps(state)
        if model in self.others:
            return model, [0.0, 1.0] if rm else [0.0, -1.0]
        return self.model, [1.0, 0.0] if rm else [-1.0, 0.0]

    async def health(self, timeout_s: float) -> HealthProbe:
        return HealthProbe(True, "embedding")

    def capabilities(self) -> Capabilities:
        return Capabilities(max_options=None, model=self.model)


def with_heads(tmp_path, engine: Embedding, *heads: Head, models: dict[str, str] | None = None) -> Gateway:
    config = config_in(tmp_path, '[gateway]\nprovider = "mock"\nmin_confidence = 0.6\n')
    config.settings.gateway.provider = engine.name
    config.settings.gateway.fallback = []
    config.settings.learning.embedder = engine.name
    if models is not None:
        config.settings.learning.models = models
    return Gateway(config, providers={engine.name: engine}, heads=Heads(list(heads)))


def test_the_default_kind_is_the_option_set_or_the_yes_no_question():
    assert kind_of("Which tier?", ["Opus ", "haiku", "sonnet"]) == kind_of("Pick a model", ["sonnet", "opus", "haiku"])
    assert kind_of("Which tier?", ["opus", "haiku"]) == "options:haiku|opus"
    assert kind_of("Is  this destructive?", ["yes", "no"], yes_no=True) == "question:is this destructive?"
    assert kind_of("Which tier?", ["opus", "haiku"], kind="model-tier") == "model-tier"


@pytest.mark.parametrize("kind", ["", "has space", "-leading", "x" * 101])
def test_a_malformed_kind_is_refused_naming_the_field(kind):
    with pytest.raises(RequestError) as caught:
        parse_request({"question": "q?", "kind": kind})
    assert "kind" in caught.value.message


async def test_a_head_for_the_requests_kind_decides_and_says_so(tmp_path):
    engine = Embedding()
    g = with_heads(tmp_path, engine, DESTRUCTIVE)
    decision = await g.decide({"question": QUESTION, "context": {"command": "rm -rf /"}})
    assert decision.status == "decided" and decision.decision == "yes" and decision.calibration == "head"
    assert decision.confidence == pytest.approx(1 / (1 + math.exp(-8)))
    assert "learned head for kind" in decision.rationale and "150 rows" in decision.rationale
    assert "learned head" in decision.attempts[-1].detail and decision.head == KIND
    safe = await g.decide({"question": QUESTION, "context": {"command": "ls -la"}})
    assert safe.decision == "no" and safe.calibration == "head"


async def test_a_head_reads_a_yes_no_question_for_an_engine_whose_own_answer_is_relevance_alone(tmp_path):
    g = with_heads(tmp_path, Embedding(relevance=True), DESTRUCTIVE)
    decision = await g.decide({"question": QUESTION, "context": {"command": "rm -rf /"}})
    assert decision.status == "decided" and decision.decision == "yes" and decision.calibration == "head"
    reworded = await g.decide({"question": "Is this command safe to run?", "context": {"command": "rm -rf /"}})
    assert reworded.status == "abstained" and reworded.abstain_reason == "no_evidence"


async def test_a_provider_asked_by_name_gives_its_own_answer_not_a_heads(tmp_path):
    # What `system1 learn --teacher` asks: a head answering in the teacher's place would make
    # the teacher's labels the heads' own.
    engine = Embedding()
    g = with_heads(tmp_path, engine, DESTRUCTIVE)
    request = {"question": QUESTION, "context": {"command": "rm -rf /"}, "min_confidence": 0.5}
    named = await g.decide(request, only="embedding")
    assert named.decision == "no" and named.calibration != "head" and named.head is None
    assert engine.embedded == []
    assert (await g.decide(request)).calibration == "head"


async def test_an_explicit_kind_picks_the_head_whatever_the_wording(tmp_path):
    head = DESTRUCTIVE.model_copy(update={"kind": "destructive-command"})
    g = with_heads(tmp_path, Embedding(), head)
    reworded = {"question": "Would running this lose work?", "kind": "destructive-command",
                "context": {"command": "rm -rf ~"}}
    assert (await g.decide(reworded)).decision == "yes"
    assert (await g.decide({**reworded, "kind": "other"})).calibration != "head"


async def test_a_head_that_reads_the_wording_tells_apart_contexts_the_embedding_cannot(tmp_path):
    from system1.core import lexical

    # The embedder puts every `rm` command at the same point; the flag `-i` (asks before each
    # file) carries the difference, and only the wording term sees it.
    asks = lexical.features({"command": "rm -i notes.txt"})
    forces = lexical.features({"command": "rm -rf notes.txt"})
    only_asks = sorted(set(asks) - set(forces))
    head = DESTRUCTIVE.model_copy(update={"lexical": {bucket: [-40.0, 40.0] for bucket in only_asks}})
    g = with_heads(tmp_path, Embedding(), head)
    forced = await g.decide({"question": QUESTION, "context": {"command": "rm -rf notes.txt"}})
    asked = await g.decide({"question": QUESTION, "context": {"command": "rm -i notes.txt"}})
    assert forced.decision == "yes" and forced.calibration == "head"
    assert asked.decision == "no" and asked.calibration == "head"


def test_lexical_weights_outside_the_buckets_or_short_of_an_option_are_refused():
    from system1.core import lexical

    with pytest.raises(ValueError, match="bucket"):
        DESTRUCTIVE.model_validate({**DESTRUCTIVE.model_dump(), "lexical": {lexical.DIM: [1.0, 0.0]}})
    with pytest.raises(ValueError, match="one weight per option"):
        DESTRUCTIVE.model_validate({**DESTRUCTIVE.model_dump(), "lexical": {"7": [1.0]}})
    read = DESTRUCTIVE.model_validate(json.loads(json.dumps({**DESTRUCTIVE.model_dump(), "lexical": {7: [1.0, 0.0]}})))
    assert read.lexical == {7: [1.0, 0.0]}  # JSON's string keys are read back as buckets


async def test_a_head_for_another_embedder_model_is_ignored(tmp_path):
    g = with_heads(tmp_path, Embedding(model="emb-2"), DESTRUCTIVE)
    decision = await g.decide({"question": QUESTION, "context": {"command": "rm -rf /"}})
    assert decision.calibration != "head" and decision.decision == "no" and decision.head is None


async def test_a_kind_tied_to_an_embedding_model_reads_that_models_vector_and_only_its_head(tmp_path):
    engine = Embedding(others=("emb-e5",))
    # The e5 head reads the second axis; the engine's own head (the first axis) is passed over.
    e5_head = DESTRUCTIVE.model_copy(update={"model": "emb-e5", "weights": [[0.0, 4.0], [0.0, -4.0]]})
    own_head = DESTRUCTIVE.model_copy(update={"weights": [[-4.0, 0.0], [4.0, 0.0]]})
    g = with_heads(tmp_path, engine, own_head, e5_head, models={KIND: "emb-e5"})
    decision = await g.decide({"question": QUESTION, "context": {"command": "rm -rf /"}})
    assert decision.calibration == "head" and decision.decision == "yes" and engine.asked_models == ["emb-e5"]
    assert "learned head for kind" in decision.rationale and "on emb-e5" in decision.rationale
    assert (await g.decide({"question": QUESTION, "context": {"command": "ls"}})).decision == "no"


async def test_a_kind_tied_to_a_model_the_embedder_lacks_keeps_the_engines_answer(tmp_path):
    engine = Embedding()
    g = with_heads(tmp_path, engine, DESTRUCTIVE, DESTRUCTIVE.model_copy(update={"model": "emb-e5"}),
                   models={KIND: "emb-e5"})
    decision = await g.decide({"question": QUESTION, "context": {"command": "rm -rf /"}})
    assert decision.calibration != "head" and decision.decision == "no" and engine.asked_models == ["emb-e5"]


async def test_a_head_whose_options_differ_is_ignored(tmp_path):
    engine = Embedding()
    g = with_heads(tmp_path, engine, DESTRUCTIVE.model_copy(update={"options": ["yes", "maybe"]}))
    decision = await g.decide({"question": QUESTION, "context": {"command": "rm -rf /"}})
    assert decision.calibration != "head" and engine.embedded == []


class ChoiceEmbedding(Embedding):
    """Answers a choice evenly among its options (the engine has no view of its own)."""

    async def decide_one(self, state, query: Query, timeout_s: float) -> EngineAnswer:
        even = {c: 1 / len(query.choices) for c in query.choices}
        return EngineAnswer(query.choices[0], even[query.choices[0]], even, "engine has no view", self.model)


async def test_a_head_answers_its_options_asked_in_another_case_and_order_in_the_askers_words(tmp_path):
    # `rm` commands embed on the first axis: the head picks "Delete" there, "List" elsewhere.
    tools = ["Delete: remove files", "List: show files"]
    head = Head(kind=kind_of("Which tool?", tools), embedder="embedding", model="emb-1", options=tools,
                weights=[[4.0, 0.0], [-4.0, 0.0]], bias=[0.0, 0.0])
    asked = ["list: show  files", "DELETE: remove files"]
    g = with_heads(tmp_path, ChoiceEmbedding(), head)
    decision = await g.decide({"question": "Which tool should handle this?", "options": asked,
                               "context": {"command": "rm -rf build"}})
    assert decision.calibration == "head" and decision.decision == "DELETE: remove files"
    assert set(decision.probabilities) == set(asked)
    other = await g.decide({"question": "Which tool should handle this?", "options": asked, "context": {"command": "ls"}})
    assert other.decision == "list: show  files"


async def test_when_the_embedder_is_down_the_engines_answer_stands(tmp_path):
    engine = Embedding(down=True)
    decision = await with_heads(tmp_path, engine, DESTRUCTIVE).decide(
        {"question": QUESTION, "context": {"command": "rm -rf /"}})
    assert decision.status == "decided" and decision.decision == "no" and decision.confidence == 0.6
    assert decision.calibration == "none" and engine.embedded == [{"command": "rm -rf /"}]


async def test_learning_off_never_asks_the_embedder(tmp_path):
    engine = Embedding()
    g = with_heads(tmp_path, engine, DESTRUCTIVE)
    g.learned.embedder = None  # as `[learning] enabled = false` leaves it
    assert (await g.decide({"question": QUESTION, "context": {"command": "rm -rf /"}})).decision == "no"
    assert engine.embedded == []


def test_local_heads_win_over_shipped_ones_and_a_broken_file_is_reported(tmp_path):
    def write(path, heads):
        path.write_text(json.dumps({"format": "system1-heads", "version": 1,
                                    "heads": [h.model_dump() for h in heads]}))
        return path

    shipped = write(tmp_path / "shipped.json", [DESTRUCTIVE])
    local = write(tmp_path / "local.json", [DESTRUCTIVE.model_copy(update={"temperature": 2.0})])
    [head] = Heads.load(local, shipped).candidates(KIND, "embedding", ["no", "yes"])
    assert head.temperature == 2.0
    local.write_text('{"format": "system1-heads", "version": 9, "heads": []}')
    heads = Heads.load(local, shipped)
    assert heads.candidates(KIND, "embedding", ["yes", "no"]) == [DESTRUCTIVE]
    assert "version 9" in heads.errors[0]


def test_a_reload_parses_a_heads_file_again_only_when_it_changed(tmp_path):
    path = tmp_path / "heads.json"
    path.write_text(json.dumps({"format": "system1-heads", "version": 1, "heads": [DESTRUCTIVE.model_dump()]}))
    [first] = Heads.load(None, path).candidates(KIND, "embedding", ["yes", "no"])
    [again] = Heads.load(None, path).candidates(KIND, "embedding", ["yes", "no"])
    assert again is first  # the same parsed head: nothing was read again
    changed = DESTRUCTIVE.model_copy(update={"temperature": 3.0})
    path.write_text(json.dumps({"format": "system1-heads", "version": 1, "heads": [changed.model_dump()]}))
    [now] = Heads.load(None, path).candidates(KIND, "embedding", ["yes", "no"])
    assert now.temperature == 3.0


def test_a_head_with_mismatched_shapes_is_refused():
    with pytest.raises(ValueError, match="one weight row and one bias per option"):
        Head(kind="k", embedder="e", model="m", options=["a", "b"], weights=[[1.0]], bias=[0.0, 0.0])
    assert DESTRUCTIVE.probabilities([1.0, 0.0, 0.0]) is None  # an embedding of another size


def test_a_later_stages_head_adds_the_earlier_stages_log_probabilities_and_needs_them():
    head = Head(kind=KIND, embedder="llama", model="judge", options=["yes", "no"], weights=[[2.0, 0.0], [0.0, 0.0]],
                bias=[0.0, 0.0], earlier=[1.5, 1.5])
    p = head.probabilities([1.0, 0.0], None, {"yes": 0.3, "no": 0.7})
    assert p["yes"] == pytest.approx(1 / (1 + math.exp(-(2.0 + 1.5 * math.log(0.3 / 0.7)))))
    assert head.probabilities([1.0, 0.0], None, None) is None
    assert head.probabilities([1.0, 0.0], None, {"yes": 1.0}) is None  # an option's probability missing
    assert head.probabilities([1.0, 0.0], None, {"yes": 1.0, "no": 0.0})["yes"] > 0.999  # log 0 bounded
    with pytest.raises(ValueError, match="earlier"):
        Head(kind=KIND, embedder="llama", model="judge", options=["yes", "no"], weights=[[1.0], [0.0]],
             bias=[0.0, 0.0], earlier=[1.0])


async def test_the_routing_hooks_features_use_a_head_for_their_question(tmp_path):
    from system1.hook.features import FEATURES

    design = DESTRUCTIVE.model_copy(update={"kind": kind_of(FEATURES["design"], ["yes", "no"], yes_no=True)})
    g = with_heads(tmp_path, Embedding(), design)
    from system1.hook.answer import RoutingHook

    hook = RoutingHook(g, None)  # type: ignore[arg-type]  # features() never logs
    features = await hook.features("rm the old design and plan a new one", "local", 5.0)
    assert features["design"]["answer"] == "yes" and features["design"]["calibrated"] is True
    assert features["review"]["answer"] == "no"  # no head: the engine's answer


async def test_capabilities_list_the_heads_and_health_the_heads_file_errors(tmp_path):
    from system1.service.reports import capabilities_report, health_report

    g = with_heads(tmp_path, Embedding(), DESTRUCTIVE)
    g.heads.errors.append("heads.json: learned heads ignored: version 9")
    learning = capabilities_report(g)["learning"]
    assert learning["embedder"] == "embedding"
    assert learning["heads"] == [{"kind": KIND, "embedder": "embedding", "model": "emb-1", "options": 2, "n": 150,
                                  "accuracy": 0.9, "engine_accuracy": 0.5}]
    assert (await health_report(g))["heads_errors"] == ["heads.json: learned heads ignored: version 9"]


async def test_the_routers_four_kinds_can_be_served_by_learned_heads(tmp_path):
    """The router asks its questions with explicit kinds; a head for one answers it, the others
    stay the engine's."""
    from system1.core.router_config import RouterSettings
    from system1.router.signals import ask

    class LastOption(Embedding):
        """Picks each question's last option at 0.6 (for yes/no: "no")."""

        async def decide_one(self, state, query: Query, timeout_s: float) -> EngineAnswer:
            rest = 0.4 / (len(query.choices) - 1)
            return EngineAnswer(query.choices[-1], 0.6, {o: 0.6 if o == query.choices[-1] else rest for o in query.choices},
                                "engine", self.model)

    # The private question's head reads e5's vector, as the default [learning] models says.
    private = Head(kind="router-private", embedder="embedding", model="multilingual-e5-small", options=["yes", "no"],
                   weights=[[0.0, 4.0], [0.0, -4.0]], bias=[0.0, 0.0], temperature=1.0,
                   n=120, accuracy=0.9, engine_accuracy=0.5)
    settings = RouterSettings(enabled=True)
    with_head = with_heads(tmp_path, LastOption(others=("multilingual-e5-small",)), private)
    (tmp_path / "plain").mkdir()
    without = with_heads(tmp_path / "plain", LastOption())
    try:
        asked = await ask(with_head, settings, "rm -rf the customer table", "alice", False, True)
        plain = await ask(without, settings, "rm -rf the customer table", "alice", False, True)
    finally:
        await with_head.aclose()
        await without.aclose()
    assert asked.signals.private and not plain.signals.private  # the engine alone says "no"
    assert asked.signals.primary == plain.signals.primary == "chat"  # the topic stays the engine's


def test_the_learned_files_are_read_from_learned_dir_when_one_is_named(tmp_path):
    """Several gateway replicas read one shared, read-only folder of learned files; the state
    folder (one per replica) holds none of them."""
    shared = tmp_path / "learned"
    shared.mkdir()
    (shared / "heads.json").write_text(json.dumps({"format": "system1-heads", "version": 1,
                                                   "heads": [DESTRUCTIVE.model_dump()]}))
    named = config_in(tmp_path, f'[service]\nlearned_dir = "{shared}"\n')
    assert named.learned_dir == shared and named.install_dir != shared
    assert Gateway(named).heads.candidates(KIND, "embedding", ["yes", "no"]) == [DESTRUCTIVE]
    (tmp_path / "other").mkdir()
    default = config_in(tmp_path / "other")
    assert default.learned_dir == default.install_dir
    assert Gateway(default).heads.candidates(KIND, "embedding", ["yes", "no"]) == []


async def test_an_embedder_that_stays_down_is_warned_about_once_and_named_until_it_answers(tmp_path, caplog):
    engine = Embedding(down=True)
    g = with_heads(tmp_path, engine, DESTRUCTIVE)
    for _ in range(4):
        await g.decide({"question": QUESTION, "context": {"command": "rm -rf /"}})
    assert [r.levelname for r in caplog.records if "answer stands" in r.getMessage()] == ["WARNING"]
    assert g.learned.error == "connection refused"
    engine.down = False
    await g.decide({"question": QUESTION, "context": {"command": "rm -rf /"}})
    assert g.learned.error is None


def test_a_repeated_warning_says_how_many_were_held_back(caplog):
    now = [0.0]
    warned = Repeated(logging.getLogger("test"), every_s=60, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING):
        for t in (0, 1, 2, 61):
            now[0] = t
            warned.warning("down: %s", "x")
    assert [r.getMessage() for r in caplog.records] == ["down: x", "down: x (and 2 more like it in the last 60 s)"]
