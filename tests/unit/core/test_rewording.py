"""The destructive-command question in other words: read as the head's own question, turned
round where the wording is flipped, and asked as worded wherever the readings do not agree."""

from __future__ import annotations

import asyncio

import pytest

from system1.core.gateway import Gateway
from system1.core.rewording import DANGEROUS, DESTRUCTIVE, MEANING, SAFE, Rewording, polarity
from system1.providers.base import EngineAnswer, Query

from ..helpers import config_in
from .test_cascade import Engine

pytestmark = pytest.mark.anyio

COMMAND = {"tool": "Bash", "command": "git push --force origin main"}


class Judge(Engine):
    """The cascade's judge: reads a wording's meaning as `meaning` (an option text, or None:
    no preference), and answers every other question with its first option at `p`."""

    def __init__(self, meaning: str | None, p: float = 0.9, fail: str = "") -> None:
        super().__init__("mock", p=p, fail=fail)
        self.meaning = meaning

    async def decide_one(self, state, query: Query, timeout_s: float) -> EngineAnswer:
        if query.question != MEANING or self.fail:
            return await super().decide_one(state, query, timeout_s)
        self.asked.append((state, query.question))
        share = {c: (0.8 if c == self.meaning else 0.1) if self.meaning else 1 / 3 for c in query.choices}
        return EngineAnswer(max(share, key=share.__getitem__), max(share.values()), share, "", "mock-model")


def gateway(tmp_path, fast: Engine, judge: Judge | None) -> Gateway:
    cascade = '["mock"]' if judge else "[]"
    toml = f'[gateway]\nprovider = "systemone"\ncascade = {cascade}\nmin_confidence = 0.6\n'
    return Gateway(config_in(tmp_path, toml), providers={"systemone": fast, **({"mock": judge} if judge else {})})


@pytest.mark.parametrize(("question", "reading"), [
    ("Could running this command destroy data?", "same"),
    ("Would it be difficult or impossible to undo what this command does?", "same"),
    ("Should this command be blocked until someone approves it?", "same"),
    ("Is this command safe to run?", "opposite"),
    ("Can the agent auto-approve this command?", "opposite"),
    ("Is this command not dangerous?", "opposite"),
    ("Will this command not lose any data?", "opposite"),
    ("Is this command low risk?", "opposite"),
    ("Does this command use the network?", None),
    ("Is it safe, or could it destroy data?", None),
])
def test_the_words_of_a_question_say_which_way_round_a_yes_is(question, reading):
    assert polarity(question) == reading


async def test_a_reworded_question_is_asked_as_the_destructive_one_and_its_answer_kept(tmp_path):
    fast, judge = Engine("systemone", p=0.9), Judge(DANGEROUS)
    decision = await gateway(tmp_path, fast, judge).decide(
        {"question": "Could running this command destroy data?", "context": COMMAND})
    assert fast.asked == [(COMMAND, DESTRUCTIVE)]
    assert decision.status == "decided" and decision.decision == "yes"
    assert decision.probabilities == pytest.approx({"yes": 0.9, "no": 0.1})
    assert "a yes to 'Could running this command destroy data?' means the same as a yes to it" in decision.rationale


async def test_a_flipped_wording_gets_the_destructive_answer_turned_round(tmp_path):
    fast, judge = Engine("systemone", p=0.9), Judge(SAFE)
    decision = await gateway(tmp_path, fast, judge).decide(
        {"question": "Is this command safe to run?", "context": {"command": "rm -rf ~/photos"}})
    assert fast.asked == [({"command": "rm -rf ~/photos"}, DESTRUCTIVE)]
    assert decision.decision == "no" and decision.probabilities == pytest.approx({"yes": 0.1, "no": 0.9})
    assert decision.confidence == pytest.approx(0.9)
    assert f"asked as {DESTRUCTIVE!r}" in decision.rationale and "means the opposite of" in decision.rationale


@pytest.mark.parametrize("meaning", [DANGEROUS, None])
async def test_where_the_judge_reads_a_wording_otherwise_than_its_words_it_is_asked_as_worded(tmp_path, meaning):
    fast, judge = Engine("systemone", p=0.9), Judge(meaning)
    question = "Is this command safe to run?"
    decision = await gateway(tmp_path, fast, judge).decide({"question": question, "context": COMMAND})
    assert fast.asked == [(COMMAND, question)] and decision.decision == "yes"
    assert "asked as" not in decision.rationale


async def test_metrics_count_reworded_decisions_by_how_they_were_asked(tmp_path):
    from prometheus_client import generate_latest

    from system1.service.metrics import Metrics

    metrics = Metrics()
    toml = '[gateway]\nprovider = "systemone"\ncascade = ["mock"]\n'
    core = Gateway(config_in(tmp_path, toml), providers={"systemone": Engine("systemone"), "mock": Judge(SAFE)},
                   observer=metrics)
    for command in ("ls", "rm -rf /srv"):
        await core.decide({"question": "Is this command safe to run?", "context": {"command": command}})
    await core.decide({"question": DESTRUCTIVE, "context": COMMAND})
    text = generate_latest(metrics.registry).decode()
    assert 'system1_reworded_decisions_total{read_as="opposite"} 2.0' in text
    assert 'read_as="same"' not in text


async def test_a_wording_is_read_once_and_remembered(tmp_path):
    fast, judge = Engine("systemone", p=0.9), Judge(SAFE)
    core = gateway(tmp_path, fast, judge)
    for command in ("ls -la", "rm -rf /srv/data", "git status"):
        await core.decide({"question": "Is this command safe to run?", "context": {"command": command}})
    assert [q for _, q in judge.asked] == [MEANING, MEANING]  # both option orders, once
    assert [q for _, q in fast.asked] == [DESTRUCTIVE] * 3


async def test_requests_waiting_on_a_new_wording_share_one_reading(tmp_path):
    fast, judge = Engine("systemone", p=0.9), Judge(SAFE)
    core = gateway(tmp_path, fast, judge)
    await asyncio.gather(*(core.decide({"question": "Is this command safe to run?", "context": {"command": c}})
                           for c in ("ls", "pwd", "df -h", "rm -rf /")))
    assert [q for _, q in judge.asked] == [MEANING, MEANING]


async def test_with_the_judge_down_a_wording_is_asked_as_worded_and_read_again_later(tmp_path):
    fast, judge = Engine("systemone", p=0.9), Judge(SAFE, fail="connection refused")
    core = gateway(tmp_path, fast, judge)
    request = {"question": "Is this command safe to run?", "context": COMMAND}
    assert (await core.decide(request)).decision == "yes"
    judge.fail = ""
    assert (await core.decide(request)).decision == "no"
    assert [q for _, q in fast.asked] == ["Is this command safe to run?", DESTRUCTIVE]


@pytest.mark.parametrize("request_", [
    {"question": "Is this command safe to run?", "context": {"text": "rm -rf /"}},  # no command to judge
    {"question": "Is this command safe to run?", "context": {"command": "  "}},
    {"question": "Is this command safe to run?", "context": COMMAND, "kind": "my-safety-check"},
    {"question": DESTRUCTIVE.upper(), "context": COMMAND},
    {"question": "Is this command safe to run?", "options": ["yes", "no"], "context": COMMAND},
])
async def test_only_a_yes_no_question_without_a_kind_about_a_command_is_read_again(tmp_path, request_):
    judge = Judge(SAFE)
    await gateway(tmp_path, Engine("systemone", p=0.9), judge).decide(request_)
    assert MEANING not in [q for _, q in judge.asked]


async def test_a_question_known_as_worded_is_asked_as_worded():
    asked: list[object] = []

    async def ask_judge(state, queries):
        asked.append(state)
        return [{SAFE: 0.9, DANGEROUS: 0.05}, {SAFE: 0.9, DANGEROUS: 0.05}]

    query = Query("Is this command safe to run?", ["yes", "no"], yes_no=True)
    assert await Rewording(lambda q: True).read(COMMAND, query, ask_judge) is None
    reading = await Rewording(lambda q: False).read(COMMAND, query, ask_judge)
    assert reading is not None and reading.flipped and asked == [{"question": "Is this command safe to run?"}]


async def test_without_a_cascade_stage_no_question_is_read_again(tmp_path):
    fast = Engine("systemone", p=0.9)
    await gateway(tmp_path, fast, None).decide({"question": "Is this command safe to run?", "context": COMMAND})
    assert fast.asked == [(COMMAND, "Is this command safe to run?")]
