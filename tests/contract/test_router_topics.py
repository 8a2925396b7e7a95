"""A topic of the operator's own, end to end: `[router.topics.billing]` with examples and a
model, `system1 learn --router-topics` fitting the topic head on the real MiniLM server, and the
served router sending an unseen billing prompt to that model once the service has reloaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from tests.fakes.hosted_chat import hosted_chat
from tests.processes import free_port, server

from ..unit.router.catalogues import router_toml
from ..unit.service_harness import running_service
from .conftest import ROOT

pytestmark = pytest.mark.contract
BILLING_MODEL, CHEAP, TOP = "local/billing-coder", "cloud/cheap", "cloud/top"
# Written for this test: the billing code of an imagined shop, in several wordings (two dozen:
# e5's topic head leaves a topic of a dozen examples unsure of prompts worded apart from them).
EXAMPLES = [
    "Why does the invoice job charge a customer twice when the payment webhook is retried?",
    "Add a proration line to the monthly invoice when a plan is upgraded mid-cycle",
    "The ledger balance for account 881 is off by one cent after the VAT rounding change",
    "Refunds issued through the admin panel never reach the payments ledger",
    "Write the dunning e-mail schedule for cards that fail to charge",
    "How should credit notes be numbered so they never collide with invoice numbers?",
    "Our Stripe webhook handler times out on invoice.payment_succeeded events",
    "Make the billing export include the tax jurisdiction of each line item",
    "Trial subscriptions are being invoiced on day one instead of after fourteen days",
    "Reconcile the payouts report with the ledger for last month",
    "Support currency conversion on invoices for customers billed in euros",
    "The coupon discount is applied after tax instead of before it on renewals",
    "Where does the billing service decide which price book an enterprise customer is charged from?",
    "A partial refund leaves the invoice marked unpaid even though the balance is zero",
    "Customers on annual plans get a renewal invoice a month early",
    "Which table holds the per-line tax amounts we send to the accounting export?",
    "The payment retry job marks an invoice as failed before the card issuer has answered",
    "Our chargeback handler does not reverse the ledger entry for the disputed amount",
    "How is the usage-based charge for API calls rolled up into the monthly bill?",
    "Invoices generated at midnight UTC carry the previous day's date for customers in Asia",
    "Add a field to the invoice PDF for the customer's VAT registration number",
    "The subscription downgrade credits the wrong amount back to the customer's balance",
    "Billing emails go out with the amount in cents instead of the currency format",
    "Reconcile failed payouts with the invoices they were meant to settle",
]
UNSEEN = ["A customer says they were billed for a seat they removed last week: where in the invoicing code would "
          "the seat count be read?",
          "The refund for order 5521 shows up twice in the ledger export"]


@pytest.fixture(scope="module")
def minilm():
    """serve.py as the stack's image runs it: MiniLM, and e5 for the router questions' heads."""
    port = free_port()
    with server([sys.executable, str(ROOT / "engines" / "systemone" / "serve.py"), "--port", str(port),
                 "--embedders", "e5"],
                f"http://127.0.0.1:{port}/health", timeout_s=180):
        yield f"http://127.0.0.1:{port}"


def config(engine_url: str, chat_url: str) -> str:
    local = {"base_url": chat_url, "apis": ["openai"], "local": True}
    cloud = {"base_url": chat_url, "apis": ["openai"], "local": False}
    models = [{"id": CHEAP, "upstream": "cloud", "price": {"in": 0.1, "out": 0.4}, "default_skill": 0.6},
              {"id": TOP, "upstream": "cloud", "price": {"in": 3, "out": 15}, "default_skill": 0.92},
              {"id": BILLING_MODEL, "upstream": "local", "price": {"in": 0, "out": 0}, "default_skill": 0.5}]
    toml = router_toml({"cloud": cloud, "local": local}, models, engine="systemone", learning=True, private="ignore")
    billing = ('[router.topics.billing]\ndescription = "our shop\'s billing code: invoices, the ledger, refunds, '
               f'payment webhooks"\nexamples = {json.dumps(EXAMPLES)}\nmodel = "{BILLING_MODEL}"\n')
    return toml + billing + f'[providers.systemone]\nendpoint = "{engine_url}"\n'


def planned(url: str, text: str) -> dict:
    reply = httpx.post(f"{url}/v1/router/route", timeout=60,
                       json={"model": "auto", "messages": [{"role": "user", "content": text}]})
    assert reply.status_code == 200, reply.text
    return reply.json()


def first_seed_prompts(tmp_path) -> str:
    """The router seed's first 156 prompts (groups `core` and `private`), about 15 a topic: the
    fit over all 1,216 takes several minutes here (docs/router.md, "Topics of your own")."""
    rows = [line for line in (ROOT / "calibration" / "router-seed.jsonl").read_text().splitlines()
            if json.loads(line)["meta"]["group"] in ("core", "private")]
    path = tmp_path / "router-seed-first.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def test_a_topic_learned_from_its_examples_takes_its_unseen_prompts_to_its_model(minilm, tmp_path):
    with hosted_chat() as chat, running_service(tmp_path, config(minilm, chat.url)) as gateway:
        env = {**os.environ, "SYSTEM1_CONFIG": str(gateway.config_path), "SYSTEM1_INSTALL_DIR": str(gateway.state_dir)}
        learned = subprocess.run([sys.executable, "-m", "system1", "learn", "--router-topics",
                                  first_seed_prompts(tmp_path), "--kind", "router-topic",
                                  "--repeats", "2", "--write",
                                  "--url", gateway.url], env=env, capture_output=True, text=True, timeout=900)
        assert learned.returncode == 0, learned.stderr
        [topic_row] = [line for line in learned.stdout.splitlines() if line.startswith("| router-topic |")]
        assert topic_row.endswith("| yes |"), topic_row  # the head beat the raw engine, held out
        heads = json.loads((gateway.state_dir / "heads.json").read_text())["heads"]
        [head] = [h for h in heads if h["kind"] == "router-topic"]
        assert head["options"][-1].startswith("billing: ") and len(head["options"]) == 11
        for text in UNSEEN:
            plan = planned(gateway.url, text)
            assert (plan["model"], plan["reason"]) == (BILLING_MODEL, "the model named for topic billing"), plan
        greeting = planned(gateway.url, "Say hi in three words")
        assert greeting["reason"] != "the model named for topic billing", greeting
        answered = httpx.post(f"{gateway.url}/v1/chat/completions", timeout=60,
                              json={"model": "auto", "messages": [{"role": "user", "content": UNSEEN[0]}]})
        assert answered.status_code == 200 and answered.headers["x-router-model"] == BILLING_MODEL
