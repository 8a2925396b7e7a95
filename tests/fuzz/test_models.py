"""Hypothesis over what callers send: any JSON-shaped value, with the text JSON allows but
Unicode does not (lone surrogates), non-finite numbers and deep nesting. The core and the routing
hook answer every one without raising, with an envelope that is valid schema v1 and valid UTF-8
JSON; the engine server refuses what it cannot read with a 4xx."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from system1.core.gateway import Gateway
from system1.core.schema import DecideResponse, RequestError
from system1.hook.answer import parse_event
from system1.router.conversation import from_openai
from system1.router.precheck import Budget, precheck
from tests.unit.helpers import config_in

from .conftest import TALLY

sys.path.insert(0, str(Path(__file__).parents[2] / "engines" / "systemone"))
from systemone_engine.app import BadRequest, read_json  # noqa: E402

EXAMPLES = 400
# Any code point, lone surrogates included.
TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=40)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | TEXT
JSONISH = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
                       max_leaves=30)


def nested(depth: int) -> object:
    value: object = "deep"
    for _ in range(depth):
        value = [value]
    return value


REQUEST_KEYS = ["question", "options", "context", "min_confidence", "request_id", "schema_version", "colour"]
REQUESTS = (
    st.fixed_dictionaries({"question": TEXT}, optional={key: JSONISH for key in REQUEST_KEYS[1:]})
    | st.fixed_dictionaries({"question": TEXT, "options": st.lists(TEXT, min_size=2, max_size=6)},
                            optional={"context": st.dictionaries(TEXT, JSONISH | st.integers(30, 40).map(nested))})
    | JSONISH
)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory) -> Gateway:
    return Gateway(config_in(tmp_path_factory.mktemp("fuzz"), '[gateway]\nprovider = "mock"\n'))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(payload=REQUESTS)
def test_the_core_answers_anything_with_a_valid_utf8_schema_v1_envelope(gateway, payload):
    TALLY.requests += 1
    decision = anyio.run(gateway.decide, payload)
    body = json.dumps(decision.envelope_json(), ensure_ascii=False).encode("utf-8")  # never a lone surrogate
    envelope = DecideResponse.model_validate_json(body)
    assert envelope.status in ("decided", "abstained") or envelope.error.code.value == "invalid_request"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(event=st.fixed_dictionaries({}, optional={key: JSONISH for key in (
    "hook_event_name", "prompt", "cwd", "session_id", "tool_name", "tool_input", "tool_use_id", "skills")}) | JSONISH)
def test_the_routing_hook_takes_a_valid_event_or_names_what_is_wrong(event):
    TALLY.requests += 1
    try:
        parsed = parse_event(event)
    except RequestError as exc:
        exc.message.encode("utf-8")
        assert exc.message
    else:
        json.dumps(parsed.model_dump(), ensure_ascii=False).encode("utf-8")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=st.binary(max_size=200) | JSONISH.map(lambda v: json.dumps(v).encode()))
def test_the_engine_server_reads_a_body_or_refuses_it_with_a_4xx(body):
    TALLY.requests += 1
    try:
        read_json(body)
    except BadRequest as exc:
        assert 400 <= exc.status < 500 and exc.message.encode("utf-8")


# Short pieces of what credentials, addresses and records are made of, repeated into long runs:
# the inputs on which a backtracking pattern takes time quadratic in their length.
PIECES = st.sampled_from(["a", "A", "1", ".", ":", "/", "@", "+", "-", "=", " ", "\n", "://", "DOB", "MRN", "key=",
                          "ghp_", "AKIA", "\u200b", "ａ"])
RUNS = st.lists(st.tuples(PIECES, st.integers(1, 20_000)), min_size=1, max_size=6).map(
    lambda runs: "".join(piece * count for piece, count in runs))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=RUNS)
def test_the_pre_check_reads_any_long_run_within_its_budget_or_says_it_did_not(text):
    budget = Budget(max_chars=200_000, seconds=5)
    check = precheck(from_openai({"model": "auto", "messages": [{"role": "user", "content": text}]}), ["US"], budget)
    assert all(f.split(": ", 1)[0] in ("secret", "personal", "unchecked") for f in check.findings)
    assert check.needs.private == bool(check.findings)
