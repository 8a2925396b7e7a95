"""Schema v1: limits on both sides of every boundary, and the published JSON Schemas."""

from __future__ import annotations

import json

import pytest

from system1.core.schema import (
    SCHEMA_DIR,
    DecideResponse,
    RequestError,
    json_schemas,
    parse_request,
    render_schema,
)


def ok(**fields):
    return parse_request({"question": "Rerun or block?", **fields})


def rejected(payload) -> str:
    with pytest.raises(RequestError) as caught:
        parse_request(payload)
    return caught.value.message


def test_minimal_request_is_a_yes_no_question():
    request = ok()
    assert request.options is None
    assert request.choices == ["yes", "no"]
    assert request.schema_version == "1"


@pytest.mark.parametrize("question", ["?", "x" * 8000])
def test_question_lengths_within_limits_are_accepted(question):
    assert parse_request({"question": question}).question == question


@pytest.mark.parametrize(
    ("question", "needle"),
    [("", "question"), ("   ", "non-whitespace"), ("x" * 8001, "8000")],
)
def test_question_outside_limits_names_field_and_limit(question, needle):
    message = rejected({"question": question})
    assert message.startswith("question:")
    assert needle in message


def test_question_must_be_a_string():
    assert "question" in rejected({"question": 7})


def test_missing_question_is_named():
    assert rejected({"options": ["a", "b"]}) == "question: required"


@pytest.mark.parametrize("count", [2, 256])
def test_option_counts_at_the_limits_are_accepted(count):
    options = [f"o{i}" for i in range(count)]
    assert ok(options=options).choices == options


@pytest.mark.parametrize(("count", "limit"), [(1, "at least 2"), (257, "at most 256")])
def test_option_counts_outside_limits_are_rejected(count, limit):
    message = rejected({"question": "q", "options": [f"o{i}" for i in range(count)]})
    assert message.startswith("options:") and limit in message


def test_option_of_500_characters_is_accepted_and_501_is_not():
    assert ok(options=["x" * 500, "b"]).options[0] == "x" * 500
    message = rejected({"question": "q", "options": ["b", "x" * 501]})
    assert "options" in message and "option 1" in message and "500" in message


def test_duplicate_and_empty_options_are_rejected():
    assert "duplicate" in rejected({"question": "q", "options": ["a", "a"]})
    assert "option 1 is empty" in rejected({"question": "q", "options": ["a", " "]})


def test_options_must_be_strings():
    assert rejected({"question": "q", "options": ["a", 2]}).startswith("options.1:")


def test_context_must_be_an_object():
    assert ok(context={"repo": "x"}).context == {"repo": "x"}
    assert rejected({"question": "q", "context": "text"}).startswith("context:")


@pytest.mark.parametrize("value", [0, 0.0, 0.5, 1, 1.0])
def test_min_confidence_in_unit_interval_is_accepted(value):
    assert ok(min_confidence=value).min_confidence == value


@pytest.mark.parametrize("value", [-0.01, 1.01, "0.5", True])
def test_min_confidence_outside_unit_interval_or_not_a_number_is_rejected(value):
    assert rejected({"question": "q", "min_confidence": value}).startswith("min_confidence:")


@pytest.mark.parametrize("request_id", ["a", "r" * 128])
def test_request_id_lengths_within_limits_are_accepted(request_id):
    assert ok(request_id=request_id).request_id == request_id


@pytest.mark.parametrize("request_id", ["", "r" * 129])
def test_request_id_outside_limits_is_rejected(request_id):
    assert rejected({"question": "q", "request_id": request_id}).startswith("request_id:")


def test_other_schema_versions_are_rejected():
    assert rejected({"question": "q", "schema_version": "2"}).startswith("schema_version:")


def test_unknown_fields_are_rejected_by_name():
    assert rejected({"question": "q", "temperature": 0}) == (
        "temperature: unknown field (schema v1 does not accept it)"
    )


def test_every_bad_field_is_named_in_one_message():
    message = rejected({"question": "", "options": ["a"], "extra": 1})
    assert "question:" in message and "options:" in message and "extra:" in message


@pytest.mark.parametrize("payload", [None, [], "question", 3])
def test_a_request_that_is_not_an_object_is_rejected(payload):
    assert rejected(payload).startswith("request: must be a JSON object")


def test_an_invalid_request_keeps_its_usable_request_id():
    with pytest.raises(RequestError) as caught:
        parse_request({"question": "", "request_id": "abc"})
    assert caught.value.request_id == "abc"


def test_response_serialises_every_field_of_the_seed():
    fields = set(DecideResponse(request_id="r", status="decided").model_dump())
    assert fields == {
        "schema_version", "request_id", "status", "decision", "confidence", "rationale",
        "provider", "probabilities", "calibrated", "latency_ms", "attempts", "error",
    }


@pytest.mark.parametrize("name", ["request.json", "response.json"])
def test_committed_json_schemas_match_the_models(name):
    committed = (SCHEMA_DIR / name).read_text(encoding="utf-8")
    assert committed == render_schema(json_schemas()[name]), (
        f"schemas/{name} is stale: run `python -m system1.schema --write`"
    )


def test_request_schema_forbids_unknown_fields_and_states_the_limits():
    schema = json.loads((SCHEMA_DIR / "request.json").read_text())
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["question"]
    assert schema["properties"]["question"]["maxLength"] == 8000


@pytest.mark.parametrize("blank", ["\x1f", " \t", "\u00a0\u3000", "\ufeff"])
def test_blank_means_the_same_to_the_validator_and_the_published_schema(blank):
    import re

    from system1.core.schema import RequestError, json_schemas, parse_request

    schema = json_schemas()["request.json"]["properties"]
    pattern = schema["question"]["pattern"]
    assert re.search(pattern, blank) is None
    assert schema["options"]["anyOf"][0]["items"]["pattern"] == pattern
    assert schema["options"]["anyOf"][0]["uniqueItems"] is True
    with pytest.raises(RequestError, match="question: must contain non-whitespace text"):
        parse_request({"question": blank})
