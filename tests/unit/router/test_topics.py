"""Topics of the operator's own: `[router.topics]` extends or replaces the built-in ones, gives
the topic head its examples, and may name the model a topic's requests go to."""

from __future__ import annotations

import pytest

from system1.core.router_config import TOPIC_KIND, TOPICS, RouterSettings
from system1.offline.calibrate import Labelled
from system1.router.scoring import CHEAPEST, Needs, Signals, route
from system1.router.signals import TOPIC_QUESTION
from system1.router.topics import example_rows, retopic

from .catalogues import SEED, seed_table
from .test_catalogue import loaded, router_section

SONNET, QWEN, GEMMA = "anthropic/claude-sonnet-5", "qwen/qwen3.7-flash", "gemma-3-270m"
BILLING = {"description": "our billing service: invoices, the ledger, payment webhooks",
           "examples": ["Why does the invoice job charge a customer twice?", "Add a refund line to the ledger export"],
           "model": GEMMA}


def settings(**topics) -> RouterSettings:
    """The seed catalogue with these topics, its skills per topic left out (they name built-ins)."""
    table = seed_table(topics=topics)
    return RouterSettings.model_validate({**table, "models": [{**m, "skills": {}} for m in table["models"]]})


def test_a_topics_table_adds_its_topics_after_the_built_in_ones():
    configured = settings(billing=BILLING)
    assert list(configured.topics) == [*TOPICS, "billing"]
    assert configured.topic_text("billing") == "billing: our billing service: invoices, the ledger, payment webhooks"
    assert configured.topic_text("debugging") == f"debugging: {TOPICS['debugging']}"


def test_builtin_replace_keeps_only_the_tables_topics():
    configured = settings(builtin="replace", billing=BILLING, support={"description": "customer tickets"})
    assert list(configured.topics) == ["billing", "support"]


def test_a_built_in_topic_given_examples_keeps_its_description():
    configured = settings(security={"examples": ["Is this JWT check safe?"]})
    assert configured.topics["security"].examples == ["Is this JWT check safe?"]
    assert configured.topic_text("security") == f"security: {TOPICS['security']}"


def test_a_list_of_names_keeps_those_topics():
    configured = settings().model_validate({**settings().model_dump(by_alias=True), "topics": ["chat", "debugging", "legal"]})
    assert list(configured.topics) == ["chat", "debugging", "legal"] and configured.topic_text("legal") == "legal"


@pytest.mark.parametrize("table, error", [
    ('[router.topics.billing]\nmodel = "nobody/none"\n', "topics.billing.model: 'nobody/none' is not one of the models"),
    ('[router.topics]\nbuiltin = "some"\n', 'builtin: must be "extend"'),
    ('[router.topics."bad:name"]\ndescription = "x"\n', "a topic's name is 1 to 40 letters"),
    ('[router.topics.billing]\nexamples = ["ok", "  "]\n', "example 1 is empty"),
    ('[router.topics.billing]\ndescription = "x"\ncolour = "red"\n', "colour"),
    ('[router.topics]\nbuiltin = "replace"\n[router.topics.only]\ndescription = "x"\n', "at least 2 items"),
])
def test_a_bad_topics_table_names_the_topic_and_the_field(tmp_path, table, error):
    config = loaded(tmp_path, router_section(SEED) + "\n" + table)
    assert not config.ok and any(error in e for e in config.errors), config.errors


def test_topic_descriptions_say_where_they_moved(tmp_path):
    config = loaded(tmp_path, "[router]\ntopic_descriptions = { legal = \"contracts\" }\n")
    assert any("topic_descriptions: moved to [router.topics.<name>] description" in e for e in config.errors)


def test_the_examples_are_labelled_rows_of_the_topic_question_over_the_configured_topics():
    configured = settings(billing=BILLING)
    rows = example_rows(configured)
    assert len(rows) == 2 and {r["kind"] for r in rows} == {TOPIC_KIND} and {r["question"] for r in rows} == {TOPIC_QUESTION}
    assert rows[0]["label"] == configured.topic_text("billing") and rows[0]["options"][-1] == rows[0]["label"]
    assert rows[0]["context"] == {"prompt": "Why does the invoice job charge a customer twice?"}


def test_topic_rows_written_for_other_topics_are_asked_over_the_configured_ones():
    configured = settings(builtin="replace", billing=BILLING, debugging={"description": "fixing what fails"})
    old_options = [f"{t}: {d}" for t, d in TOPICS.items()]
    rows = [Labelled(TOPIC_QUESTION, old_options, {"prompt": "Fix this crash"}, f"debugging: {TOPICS['debugging']}", TOPIC_KIND),
            Labelled(TOPIC_QUESTION, old_options, {"prompt": "Say hi"}, f"chat: {TOPICS['chat']}", TOPIC_KIND),
            Labelled("Is this destructive?", None, {"command": "ls"}, "no")]
    kept, dropped = retopic(configured, rows)
    assert dropped == 1 and [r.label for r in kept] == ["debugging: fixing what fails", "no"]
    assert kept[0].options == ["billing: " + BILLING["description"], "debugging: fixing what fails"]
    assert kept[1].options is None


def test_a_topic_sure_enough_goes_to_its_model_over_the_cheapest():
    configured = settings(billing=BILLING)
    sure = Signals(topics={"billing": 0.7, "debugging": 0.3}, confidence=0.7, complexity=2, risk=1)
    pinned = route(configured, sure, Needs(input_tokens=40))
    assert pinned.model == GEMMA and pinned.reason == "the model named for topic billing"
    assert pinned.order[0] == GEMMA and len(pinned.order) > 1  # the next best still fall through
    unsure = route(configured, Signals(topics={"billing": 0.4, "debugging": 0.6}, confidence=0.6, complexity=2, risk=1),
                   Needs(input_tokens=40))
    assert unsure.model != GEMMA and unsure.reason != pinned.reason


def test_a_topics_model_that_cannot_take_the_request_leaves_the_route_to_the_arithmetic():
    configured = settings(billing={**BILLING, "model": QWEN})
    private = route(configured.model_copy(update={"private": "local_only"}),
                    Signals(topics={"billing": 1.0}, confidence=1.0, complexity=0, risk=0, private=True),
                    Needs(input_tokens=40))
    assert private.model == GEMMA and "the model named" not in private.reason
    too_long = route(configured, Signals(topics={"billing": 1.0}, confidence=1.0, complexity=0, risk=0),
                     Needs(input_tokens=300_000))
    assert too_long.model != QWEN


def test_a_topic_without_a_model_routes_as_any_other():
    plain = route(settings(billing={"description": "invoices"}), Signals(topics={"billing": 1.0}, confidence=1.0,
                                                                        complexity=0, risk=0), Needs(input_tokens=40))
    assert plain.reason == CHEAPEST

