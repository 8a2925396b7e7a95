"""The local pre-check: credentials and personal data found by the libraries that know them, the
request's needs read from either API's body, and nothing of what was found kept."""

from __future__ import annotations

import base64
import math
import threading
import time
from pathlib import Path

import pytest

from system1.core.schema import RequestError
from system1.router.conversation import from_anthropic, from_openai
from system1.router import precheck as precheck_module
from system1.router.personal import personal_data_in
from system1.router.readable import decoded
from system1.router.precheck import INLINE_CHARS, SEGMENT_CHARS, Budget, checked, findings_in, precheck, segments
from system1.router.secrets import secrets_in

# Test credentials in the documented example shapes (AWS's own example key id and so on).
CREDENTIALS = {
    "AWS Access Key": "export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE",
    "GitHub Token": "the token is ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "Secret Keyword": "db_password = 'hunter2hunter2'",
    "Basic Auth Credentials": "it connects to postgres://admin:S3cr3tPassw0rd@db.internal:5432/app",
    "JSON Web Token": "the session cookie is eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "Private Key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA",
    "Slack Token": "SLACK_BOT=xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx",
}
PERSONAL = {
    "US social security number": "Employee: John Smith, SSN 123-45-6789, salary 85000",
    "IBAN": "please pay DE89 3704 0044 0532 0130 00 by Friday",
    "payment card number": "card 4111 1111 1111 1111, expiry 12/27",
    "phone number": "call me at +44 20 7946 0958",
    "e-mail address": "write to jane.doe@fjordpost.no",
    "health record": "Patient: Maria Jensen, born 1984-03-12. Diagnosis: type 2 diabetes, HbA1c 8.1 %.",
}


@pytest.mark.parametrize("kind", CREDENTIALS)
def test_each_kind_of_credential_is_found(kind):
    assert secrets_in(CREDENTIALS[kind]) == {kind}


@pytest.mark.parametrize("kind", PERSONAL)
def test_each_kind_of_personal_data_is_found(kind):
    assert kind in personal_data_in(PERSONAL[kind])


@pytest.mark.parametrize("text", [
    "My Java service throws NullPointerException at OrderService.java:88 only in production",
    "password = get_password_from_vault()",  # a reference, not a value
    "password: ${DB_PASSWORD}",  # a template
    "order 000-12-3456 shipped",  # SSNs never start 000
    "invoice 4111 1111 1111 1112",  # fails the card checksum
    "GB82 WEST 1234 5698 7654 31",  # fails the IBAN checksum
    "see the build at 2026-11-30 and ticket 12345",
])
def test_ordinary_text_and_near_misses_are_not_flagged(text):
    assert secrets_in(text) == set() and personal_data_in(text) == set()


@pytest.mark.parametrize("text", ["MRN 0045821: prescribed metformin 500 mg twice daily",
                                  "DOB: March 3, 1990. Allergies: penicillin.",
                                  "patient name = Jo Smith; diagnosis: asthma"])
def test_an_identified_person_with_a_clinical_fact_is_a_health_record(text):
    assert "health record" in personal_data_in(text)


@pytest.mark.parametrize("text", [
    "How do I store a patient's date of birth and a diagnosis in SQL?",  # fields, no values
    "Ada Lovelace was born 10 December 1815 in London.",  # a person, no clinical fact
    "The patient was diagnosed with flu and given medication.",  # a clinical fact, nobody identified
    "Patient: chest pain, prescribed ibuprofen",  # no name after the label
])
def test_health_words_without_an_identified_person_and_a_clinical_fact_are_not_flagged(text):
    assert personal_data_in(text) == set()


@pytest.mark.parametrize("url", ["postgres://admin:S3cretPassw0rd!@db.internal:5432/billing",
                                 "redis://:p4ss;w0rd=x@cache:6379/0", "amqp://svc:a&b(c)*d@mq.internal/vhost"])
def test_a_password_in_a_url_counts_whatever_punctuation_it_holds(url):
    assert secrets_in(f"why is {url} slow?") == {"Basic Auth Credentials"}


@pytest.mark.parametrize("url", ["postgres://admin:${DB_PASSWORD}@db/app", "https://user:{password}@host/x",
                                 "see https://example.com/a:b@c", "mailto:jane@example.com"])
def test_a_placeholder_or_a_url_without_credentials_is_not_a_password(url):
    assert secrets_in(url) == set()


@pytest.mark.parametrize("address", ["jane.doe@example.com", "ops@EXAMPLE.ORG", "a.b@mail.example.net",
                                     "sam@acme.example", "ci@runner.test", "x@y.invalid", "dev@app.localhost"])
def test_an_address_at_a_domain_reserved_for_examples_is_a_placeholder(address):
    assert personal_data_in(f"send the invoice to {address} please") == set()


@pytest.mark.parametrize("address", ["jane@example.de", "jane@example.company.com", "jane@notexample.com",
                                     "jane@test.io"])
def test_an_address_at_a_domain_that_merely_looks_reserved_counts(address):
    assert personal_data_in(f"send the invoice to {address} please") == {"e-mail address"}


def test_one_real_address_among_reserved_ones_counts():
    assert personal_data_in("cc a@example.com, b@example.org and priya.n@fastmail.com") == {"e-mail address"}


def test_a_national_phone_number_counts_only_for_a_configured_region():
    text = "call 415-555-2671 after lunch"
    assert personal_data_in(text) == set()
    assert personal_data_in(text, ["US"]) == {"phone number"}


def test_the_code_of_a_long_prompt_holds_no_false_findings():
    source = (Path(__file__).parents[3] / "services" / "gateway" / "system1" / "core" / "gateway.py").read_text()
    assert precheck(from_openai({"model": "auto", "messages": [{"role": "user", "content": source}]})).findings == ()


def test_findings_name_kinds_and_never_the_value():
    body = {"model": "auto", "messages": [{"role": "user", "content": CREDENTIALS["AWS Access Key"] + "\n" + PERSONAL["e-mail address"]}]}
    result = precheck(from_openai(body))
    assert result.findings == ("personal: e-mail address", "secret: AWS Access Key")
    assert result.needs.private
    assert "AKIA" not in repr(result) and "jane" not in repr(result)


def test_secrets_in_tool_results_and_the_system_prompt_count():
    anthropic = {"model": "auto", "system": [{"type": "text", "text": CREDENTIALS["GitHub Token"]}],
                 "messages": [{"role": "user", "content": "hi"}]}
    assert precheck(from_anthropic(anthropic)).findings == ("secret: GitHub Token",)
    tool = {"model": "auto", "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": CREDENTIALS["Slack Token"]}]}]}
    assert precheck(from_anthropic(tool)).findings == ("secret: Slack Token",)


def test_needs_come_from_the_body_of_either_api():
    openai = {"model": "auto", "stream": True, "tools": [{"type": "function", "function": {"name": "ls"}}],
              "messages": [{"role": "system", "content": "be brief"},
                           {"role": "user", "content": [{"type": "text", "text": "what is in this picture?"},
                                                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]}
    conversation = from_openai(openai)
    needs = precheck(conversation).needs
    assert (needs.tools, needs.vision, needs.private) == (True, True, False)
    assert conversation.stream and conversation.system == "be brief" and conversation.last_user == "what is in this picture?"
    anthropic = {"model": "auto", "max_tokens": 10, "messages": [
        {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}]}]}
    assert precheck(from_anthropic(anthropic)).needs.vision


def test_the_input_estimate_grows_with_the_text():
    short = precheck(from_openai({"model": "auto", "messages": [{"role": "user", "content": "hi"}]})).needs.input_tokens
    long = precheck(from_openai({"model": "auto", "messages": [{"role": "user", "content": "word " * 3000}]})).needs.input_tokens
    assert short < 20 and 4000 < long < 6000


def test_a_conversation_keeps_its_key_as_it_grows():
    first = [{"role": "system", "content": "s"}, {"role": "user", "content": "fix the bug"}]
    later = first + [{"role": "assistant", "content": "done"}, {"role": "user", "content": "and the test"}]
    assert from_openai({"model": "auto", "messages": first}).key == from_openai({"model": "auto", "messages": later}).key
    other = [{"role": "system", "content": "s"}, {"role": "user", "content": "write docs"}]
    assert from_openai({"model": "auto", "messages": other}).key != from_openai({"model": "auto", "messages": first}).key


@pytest.mark.parametrize("body, field", [
    ([], "body: must be an object"),
    ({"messages": [{"role": "user", "content": "x"}]}, "model: must be a string"),
    ({"model": "auto", "messages": []}, "messages: must be a non-empty list"),
    ({"model": "auto", "messages": ["x"]}, "messages[0]: must be an object"),
    ({"model": "auto", "messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role: unknown role 'wizard'"),
    ({"model": "auto", "messages": [{"role": "user", "content": [{"type": "hologram"}]}]},
     "messages[0].content[0].type: unknown content part 'hologram'"),
    ({"model": "auto", "messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]},
     "messages[0].content[0].text: must be a string"),
    ({"model": "auto", "stream": "yes", "messages": [{"role": "user", "content": "x"}]}, "stream: must be true or false"),
])
def test_an_unreadable_body_is_an_error_naming_the_field(body, field):
    with pytest.raises(RequestError) as caught:
        from_openai(body)
    assert caught.value.message == field


def test_anthropic_roles_are_user_assistant_and_system_messages_join_the_system_prompt():
    with pytest.raises(RequestError, match=r'messages\[0\].role: must be "user", "assistant" or "system"'):
        from_anthropic({"model": "auto", "messages": [{"role": "tool", "content": "x"}]})
    # As Claude Code sends them: a system message between the turns.
    conversation = from_anthropic({"model": "auto", "system": "be brief", "messages": [
        {"role": "user", "content": "hi"}, {"role": "system", "content": "the date is today"}]})
    assert conversation.system == "be brief\nthe date is today" and conversation.turns == (("user", "hi"),)


# Inputs that made a pattern scan a long run again from each of its characters, or split one
# run of spaces between two repeats: each grows to `n` characters.
ADVERSARIAL = {
    "hex": lambda n: ("0123456789abcdef" * n)[:n],
    "one letter": lambda n: "A" * n,
    "dotted": lambda n: "a." * (n // 2),
    "dotted, then @": lambda n: "a." * (n // 2) + "@",
    "schemes": lambda n: "a://" * (n // 4),
    "url without @": lambda n: "a://x:" + "y" * n,
    "spaces after DOB": lambda n: "DOB" + " " * n,
    "spaces after MRN": lambda n: "MRN" + " " * n,
    "digits and spaces": lambda n: "1 " * (n // 2),
    "keywords": lambda n: "key=" * (n // 4),
    "at signs": lambda n: "@" * n,
    "assignments": lambda n: "password=" * (n // 9),
    "a name with pay, again and again": lambda n: "Ana Bo salary " * (n // 14),
    "possessives": lambda n: "Ana's " * (n // 6),
    "percent escapes": lambda n: "%41" * (n // 3),
    "base64 of text": lambda n: base64.b64encode(b"token=ghp_x " * (n // 16)).decode(),
    "flags": lambda n: "-u a -p " * (n // 8),
}


def per_byte(text: str) -> float:
    """The pre-check's time per character of `text`, the best of three readings."""
    best = math.inf
    for _ in range(3):
        started = time.perf_counter()
        secrets_in(text)
        personal_data_in(text, ["US"])
        list(decoded(text))
        best = min(best, time.perf_counter() - started)
    return best / len(text)


@pytest.mark.parametrize("shape", ADVERSARIAL)
def test_the_pre_check_reads_adversarial_input_in_time_linear_in_its_length(shape):
    # A ratio of two readings taken side by side, not a time: sixteen times the input takes
    # about sixteen times as long (a quadratic pattern would take 256 times).
    small, large = (per_byte(ADVERSARIAL[shape](n)) for n in (4_096, 65_536))
    assert large < 4 * small, f"{shape}: {small * 1e9:.0f} ns per character at 4 KB, {large * 1e9:.0f} at 64 KB"


def test_a_long_line_is_read_in_windows_that_overlap_so_a_credential_on_a_boundary_is_found():
    token = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
    text = "x" * (SEGMENT_CHARS - 10) + " " + token + " " + "y" * SEGMENT_CHARS
    windows = list(segments(text))
    assert len(windows) == 3 and all(len(w) <= SEGMENT_CHARS for w in windows)
    assert not any(token in w for w in windows[:1]) and any(token in w for w in windows)
    assert findings_in(text, [], Budget(max_chars=1_000_000, seconds=60)) == {"secret: GitHub Token"}


def test_segments_keep_whole_lines_and_lose_no_text():
    lines = [f"line {i} " + "z" * (i * 37 % 900) for i in range(400)]
    text = "\n".join(lines)
    assert "\n".join(segments(text, size=4_096, overlap=64)) == text


def chat_of(text: str):
    return from_openai({"model": "auto", "messages": [{"role": "user", "content": text}]})


def test_a_prompt_over_the_size_budget_is_treated_as_private_without_being_read():
    check = precheck(chat_of("harmless words " * 2_000), budget=Budget(max_chars=10_000, seconds=60))
    [finding] = check.findings
    assert check.needs.private and finding.startswith("unchecked: 300") and finding.endswith("limit of 10000")


def test_a_prompt_the_pre_check_cannot_finish_in_time_is_treated_as_private():
    check = precheck(chat_of("harmless words"), budget=Budget(max_chars=10_000, seconds=0))
    assert check.needs.private and check.findings == ("unchecked: not read within 0 s",)


@pytest.mark.anyio
async def test_a_long_prompt_is_checked_off_the_event_loop_and_a_short_one_on_it(monkeypatch):
    threads = []
    real = precheck_module.precheck

    def recording(*args):
        threads.append(threading.current_thread() is threading.main_thread())
        return real(*args)

    monkeypatch.setattr(precheck_module, "precheck", recording)
    budget = Budget(max_chars=1_000_000, seconds=60)
    await checked(chat_of("hello"), [], budget)
    await checked(chat_of("hello " * INLINE_CHARS), [], budget)
    assert threads == [True, False]
