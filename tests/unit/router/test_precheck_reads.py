"""What the pre-check reads: every part of a request an upstream would receive, normalised and
decoded, with each detector held to the filters meant for it."""

from __future__ import annotations

import base64
import json
from urllib.parse import quote

import pytest

from system1.router.conversation import from_anthropic, from_openai
from system1.router.personal import personal_data_in
from system1.router.precheck import precheck
from system1.router.secrets import secrets_in

GITHUB = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"


def openai(*messages: dict, **extra) -> dict:
    return {"model": "auto", "messages": list(messages), **extra}


def user(content) -> dict:
    return {"role": "user", "content": content}


def found(body: dict, api: str = "openai") -> tuple[str, ...]:
    return precheck((from_openai if api == "openai" else from_anthropic)(body)).findings


@pytest.mark.parametrize("text", [
    # The case: a key in a constructor call on a line shaped `x = f(...)`.
    "s3 = boto3.client('s3', aws_access_key_id='AKIAIOSFODNN7EXAMPLE', aws_secret_access_key='wJalrXUtnFEMI/K7MDENG')",
    f"client = Github(login_or_token=\"{GITHUB}\")",
    f'{{"service": "ci", "github": {{"token": "{GITHUB}"}}}}',  # JSON
    "database:\n  host: db.internal\n  password: Tr0ub4dor&3xyz\n",  # YAML
    "APP_ENV=production\nSTRIPE_SECRET=sk_live_51HcQ2xKd8Lm3Nq0pRz\nPORT=8080",  # .env
    "POSTGRES_PASSWORD=h4Ul4%1Evtj5",  # unquoted, outside any file the keyword detector knows
    "jdbc:sqlserver://sql-prod:1433;databaseName=sales;user=sa;password=4rKtx=qBneMB9R7Dx;encrypt=true",
    "mongodb://svc:S3cr3t-Passw0rd@mongo.internal:27017/orders",  # connection URL
    f"export GITHUB_TOKEN={GITHUB}",  # shell export
    "export VAULT_TOKEN=hvs.X1AwGa4XKi8FaxxljOXYXK88",
    "mysqldump -u backup -p'XKa9&fAFx^3RnD' -h 10.1.2.3 books",
    'curl -H "X-API-Key: 4c8261b1998b7e4717e5753af814ea80" https://api.vendor.example/v1/items',  # header
    "Authorization: Basic YWRtaW46c3VwZXJzZWNyZXQxMjM=",
    'proxy_set_header Authorization "Basic Z2VzdGlvbmU6cGFzc3dvcmQxMjM0";',
    "GET /export.csv?access_token=hU1TQg7yO8UyQw3kP2 HTTP/1.1",  # a log line's query string
    "ANTHROPIC_API_KEY=sk-ant-api03-" + "Ab9" * 30,
    "HF_TOKEN=hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeF",
    "curl -u elastic:Marmar642!Hexwo1 -X GET https://es.internal/_cat/indices",  # curl's user:password
    "define( 'DB_PASSWORD', 'Sunjun28%Marra7' );",  # PHP's define, a quoted name then a value
    '<Server><User>ftp</User><Pass encoding="base64">SnVuZG9yNjEkSGV4a28w</Pass></Server>',  # XML
    "machine artifactory.example.nl\nlogin j.doe\npassword Rawo5466*Zenzen2\n",  # .netrc
    "+ echo github_pat_" + "bT8RxbBHP2WFt8vehYYaeC" * 4,  # a fine-grained GitHub token in a CI log
])
def test_a_credential_is_found_in_code_config_logs_and_commands(text):
    assert found(openai(user(text))), text


@pytest.mark.parametrize("text", [
    "password = get_password_from_vault()",  # a reference
    "api_key: ${ACME_API_KEY}",  # a template
    "apiKey: process.env.ACME_API_KEY,",  # a reference by name
    "DB_PASSWORD=xxxxxxxx",  # redacted
    "secret: \"<your-secret-here>\"",
    "token_url = https://auth.example.com/oauth/token",  # about a credential, not one
    "password_min_length = 12345678",
    "docker run -p 8080:80 nginx",  # a port, not a password
    'API_KEY = "YOUR_API_KEY"',  # names what goes there
    'apiKey: "YOUR_FIREBASE_API_KEY",',
    'api_key = "DEIN_API_SCHLUESSEL"',
    'stripe.api_key = "sk_test_..."',  # elided
    "DATABASE_URL=postgres://user:password@localhost:5432/app_dev",  # every tutorial's pair
    "postgresql://USER:PASSWORD@HOST:PORT/NAME",
    "curl -u $USER:$TOKEN https://ci.example.com/api",
])
def test_placeholders_references_and_names_about_credentials_are_not_credentials(text):
    assert secrets_in(text) == set(), text


def test_a_credential_split_over_two_messages_and_one_in_an_earlier_turn_are_found():
    body = openai(user("Here is our AWS key id: AKIAIOSFODNN7EXAMPLE"), {"role": "assistant", "content": "Thanks."},
                  user("and the secret is below, can you check the IAM policy?"))
    assert "secret: AWS Access Key" in found(body)
    split = openai(user("my db password is part one"), user("DB_PASSWORD=Tr0ub4dor-3xyz, part two"))
    assert found(split)


@pytest.mark.parametrize("disguise", [
    lambda key: key.translate({c: c + 0xFEE0 for c in range(0x21, 0x7F)}),  # full-width
    lambda key: "\u200d".join(key),  # zero-width joiners between every character
    lambda key: "\u200b".join(key[i:i + 4] for i in range(0, len(key), 4)),  # zero-width spaces
    lambda key: base64.b64encode(f"token={key}".encode()).decode(),
    lambda key: base64.urlsafe_b64encode(f"export GITHUB_TOKEN={key}\n".encode()).decode(),
    lambda key: quote(f"?token={key}&x=1", safe=""),  # URL-encoded
])
def test_a_credential_disguised_by_encoding_or_invisible_characters_is_found(disguise):
    assert "secret: GitHub Token" in found(openai(user(f"what is this? {disguise(GITHUB)}")))


def test_a_credential_in_every_part_of_a_request_an_upstream_receives_is_found():
    token = f"token={GITHUB}"
    places = {
        "system prompt": openai({"role": "system", "content": token}, user("hi")),
        "developer message": openai({"role": "developer", "content": token}, user("hi")),
        "tool result": openai(user("hi"), {"role": "tool", "tool_call_id": "c1", "content": token}),
        "tool call": openai(user("hi"), {"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "push", "arguments": json.dumps({"token": GITHUB})}}]}),
        "tool definition": openai(user("hi"), tools=[{"type": "function", "function": {
            "name": "push", "description": f"push with {token}", "parameters": {"type": "object"}}}]),
        "message name": openai({"role": "user", "name": GITHUB, "content": "hi"}),
        "metadata": openai(user("hi"), metadata={"note": token}),
        "image URL": openai(user([{"type": "text", "text": "what is this?"},
                                  {"type": "image_url", "image_url": {"url": f"https://img.example.com/a.png?{token}"}}])),
        "file part": openai(user([{"type": "file", "file": {
            "filename": "notes.txt", "file_data": "data:text/plain;base64," + base64.b64encode(token.encode()).decode()}}])),
    }
    for place, body in places.items():
        assert "secret: GitHub Token" in found(body), place
    anthropic = {
        "document, text source": [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": token}}],
        "document, base64 source": [{"type": "document", "source": {
            "type": "base64", "media_type": "text/plain", "data": base64.b64encode(token.encode()).decode()}}],
        "tool result": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": token}]}],
    }
    for place, content in anthropic.items():
        body = {"model": "auto", "max_tokens": 10, "messages": [user(content)]}
        assert "secret: GitHub Token" in found(body, "anthropic"), place
    tools = {"model": "auto", "max_tokens": 10, "messages": [user("hi")], "metadata": {"user_id": GITHUB},
             "tools": [{"name": "push", "description": "d", "input_schema": {"type": "object"}}]}
    assert "secret: GitHub Token" in found(tools, "anthropic")


def test_an_images_bytes_are_not_read_as_text_and_raise_no_false_finding():
    pixels = base64.b64encode(bytes(range(256)) * 400).decode()
    body = openai(user([{"type": "image_url", "image_url": {"url": f"data:image/png;base64,{pixels}"}}]))
    check = precheck(from_openai(body))
    assert check.findings == () and check.needs.vision
    assert all(pixels not in text for text in from_openai(body).readable)


@pytest.mark.parametrize("text", [
    "Can you make this shorter? Priya Raman's base goes from 96,000 to 104,500 in July, plus a bonus.",
    "My colleague Jonas told me he was diagnosed with depression and is on sick leave until May.",
    "Draft a note: Lena Fischer is on a performance improvement plan after the last two sprints.",
    "Tom's hourly rate is 43.75 and he worked 212 hours last month.",
    "Help me write to HR that Daniel Okafor was arrested last weekend and will miss his shift.",
    "My teammate Sofia is going through a divorce; how do I cover her on-call week kindly?",
    "Unser Kollege Herr Brandt hat eine Abmahnung bekommen, wie formuliere ich das?",
    "Ayúdame a escribir que Lucía Ferrer tiene un permiso de residencia que vence en marzo.",
])
def test_a_named_person_next_to_their_pay_health_review_legal_or_family_facts_is_personal_data(text):
    assert "a named person's sensitive facts" in personal_data_in(text), text


@pytest.mark.parametrize("text", [
    "What is a fair salary range for a senior data engineer in Berlin?",  # nobody named
    "Write a function that computes overtime pay at time and a half.",
    "Priya Raman reviewed the pull request and left two comments.",  # a name, nothing sensitive
    "Should our sick leave policy count half days?",
])
def test_pay_or_health_words_without_a_named_person_or_a_name_without_them_are_not_flagged(text):
    assert "a named person's sensitive facts" not in personal_data_in(text), text


def test_a_body_nested_as_deep_as_json_allows_is_read_without_exhausting_the_stack():
    deep: object = f"token={GITHUB}"
    for _ in range(50_000):
        deep = [deep]
    assert "secret: GitHub Token" in found(openai(user("hi"), metadata={"note": deep}))
