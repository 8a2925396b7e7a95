"""Schemathesis against the gateway's own OpenAPI document, on the mock engine and on MiniLM:
every generated request, valid or not, gets an answer the document describes and never a
server error."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from system1.service.app import create_app
from system1.service.service import Service
from tests.unit.helpers import config_in

from .conftest import MINILM_PORT, TALLY

EXAMPLES = 200  # per operation and engine: bounded, about a minute in all
# Schemathesis' ASGI client calls itself `testserver`.
SERVICE = '[service]\nallowed_hosts = ["testserver"]\n'
# The router is on, with no models: every body it can read gets the 400 that says so.
MOCK = '[gateway]\nprovider = "mock"\n[router]\nenabled = true\n'
MINILM = (f'[gateway]\nprovider = "systemone"\ntimeout_s = 10\n[providers.systemone]\n'
          f'endpoint = "http://127.0.0.1:{MINILM_PORT}"\nbatch = true\n')
# What JSON Schema cannot say is left out: a valid request may still be refused for its work
# budget (400) or its size (413), so "valid data is accepted" is not checked.
EXCLUDED = [positive_data_acceptance]
# The token count is an estimate answered here, from whatever of the body it can read: it
# refuses no body its estimate can be made from, so one that breaks the schema may get a 200.
LENIENT = {"/v1/messages/count_tokens": [negative_data_rejection]}


def app_on(toml: str):
    return create_app(Service(config_in(Path(tempfile.mkdtemp(prefix="system1-fuzz-")), toml + SERVICE)))


on_mock = schemathesis.openapi.from_asgi("/openapi.json", app_on(MOCK))
on_minilm = schemathesis.openapi.from_asgi("/openapi.json", app_on(MINILM))


def call_and_check(case) -> None:
    TALLY.requests += 1
    response = case.call()
    if response.status_code >= 500:
        TALLY.server_errors.append(f"{case.method} {case.path}: {response.status_code}")
    case.validate_response(response, excluded_checks=EXCLUDED + LENIENT.get(case.path, []))


@on_mock.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_on_the_mock_engine_every_request_gets_a_documented_answer(case):
    call_and_check(case)


@pytest.mark.usefixtures("minilm_engine")
@on_minilm.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_on_minilm_every_request_gets_a_documented_answer(case):
    call_and_check(case)
