"""System 2: the cascade's stages after the chain, and no answer without evidence."""

from __future__ import annotations

import asyncio
import math

import pytest

from system1.core.calibration import Calibrator, Fit, Source
from system1.core.events import Observer
from system1.core.gateway import Gateway
from system1.core.heads import kind_of
from system1.providers.base import Capabilities, EngineAnswer, HealthProbe, OneQuestionProvider, ProviderError, Query

from ..helpers import config_in

pytestmark = pytest.mark.anyio

CHOICE = {"question": "Which team should handle a double charge?", "options": ["billing", "technical"]}
YES_NO = {"question": "Is this command destructive?", "context": {"command": "rm -rf build/"}}


class Engine(OneQuestionProvider):
    """Answers its first option with probability `p`, after `delay_s`; records what it read
    (`relevance`: its yes/no answers are relevance alone, as serve.py's MiniLM marks them;
    `refuse`: it abstains of its own accord, with that reason)."""

    def __init__(self, name: str, p: float = 0.9, delay_s: float = 0.0, fail: str = "",
                 without_context: bool = False, relevance: bool = False, refuse: str = "") -> None:
        super().__init__(OneQuestionProvider.Options(answers_without_context=without_context))
        self.name, self.p, self.delay_s, self.fail, self.relevance = name, p, delay_s, fail, relevance
        self.refuse = refuse
        self.asked: list[tuple[object, str]] = []

    async def decide_one(self, state, query: Query, timeout_s: float) -> EngineAnswer:
        self.asked.append((state, query.question))
        await asyncio.sleep(self.delay_s)
        if self.fail:
            raise ProviderError(self.fail, provider=self.name)
        if self.refuse:
            return EngineAnswer.abstained(self.refuse, f"{self.name}-model")
        rest = (1 - self.p) / (len(query.choices) - 1)
        shares = {c: self.p if i == 0 else rest for i, c in enumerate(query.choices)}
        return EngineAnswer(query.choices[0], self.p, shares, f"{self.name} read it", f"{self.name}-model",
                            relevance=self.relevance and query.yes_no)

    async def health(self, timeout_s: float) -> HealthProbe:
        return HealthProbe(not self.fail, self.fail or "up")

    def capabilities(self) -> Capabilities:
        return Capabilities(max_options=None, model=f"{self.name}-model")


def cascade(tmp_path, fast: Engine, judge: Engine | None, extra: str = "", fits: tuple[Fit, ...] = ()) -> Gateway:
    stages = '["mock"]' if judge else "[]"
    toml = f'[gateway]\nprovider = "systemone"\ncascade = {stages}\nmin_confidence = 0.6\n{extra}'
    providers = {"systemone": fast, **({"mock": judge} if judge else {})}
    calibrator = Calibrator([Source("local", tmp_path, fits)]) if fits else None
    return Gateway(config_in(tmp_path, toml), providers=providers, calibrator=calibrator)


async def test_a_sure_first_stage_answers_and_the_judge_is_never_asked(tmp_path):
    fast, judge = Engine("systemone", p=0.9), Engine("mock", p=0.95)
    decision = await cascade(tmp_path, fast, judge).decide(CHOICE)
    assert decision.status == "decided" and decision.provider == "systemone" and decision.stage == 1
    assert judge.asked == [] and [a.provider for a in decision.attempts] == ["systemone"]


async def test_an_unsure_first_stage_passes_to_the_judge_which_decides_and_says_why_the_first_passed(tmp_path):
    fast, judge = Engine("systemone", p=0.55), Engine("mock", p=0.9)
    decision = await cascade(tmp_path, fast, judge).decide(CHOICE)
    assert decision.status == "decided" and decision.decision == "billing" and decision.provider == "mock"
    assert decision.stage == 2 and decision.confidence == pytest.approx(0.9)
    assert [(a.provider, a.outcome, a.detail) for a in decision.attempts] == [
        ("systemone", "abstained", "confidence 0.55 below 0.60"), ("mock", "ok", None)]
    assert decision.rationale.endswith("[stage 2, mock, after systemone: confidence 0.55 below 0.60]")


async def test_when_the_last_stage_is_unsure_too_the_decision_abstains(tmp_path):
    fast, judge = Engine("systemone", p=0.55), Engine("mock", p=0.52)
    decision = await cascade(tmp_path, fast, judge).decide(CHOICE)
    assert decision.status == "abstained" and decision.abstain_reason == "threshold"
    assert decision.provider == "mock" and decision.stage == 2
    assert [a.outcome for a in decision.attempts] == ["abstained", "abstained"]


async def test_a_judge_that_fails_leaves_the_first_stage_abstention_with_its_try_added(tmp_path):
    fast, judge = Engine("systemone", p=0.55), Engine("mock", fail="model not loaded")
    decision = await cascade(tmp_path, fast, judge).decide(CHOICE)
    assert decision.status == "abstained" and decision.provider == "systemone" and decision.stage == 1
    assert decision.confidence == pytest.approx(0.55)
    assert [(a.provider, a.outcome) for a in decision.attempts] == [("systemone", "abstained"), ("mock", "error")]


async def test_a_judge_slower_than_the_cascade_budget_is_cut_off_and_the_abstention_stands(tmp_path):
    fast, judge = Engine("systemone", p=0.55), Engine("mock", delay_s=30)
    gateway = cascade(tmp_path, fast, judge, "cascade_budget_s = 0.2\n")
    decision = await asyncio.wait_for(gateway.decide(CHOICE), 10)
    assert decision.status == "abstained" and decision.provider == "systemone"
    assert [(a.provider, a.outcome) for a in decision.attempts] == [("systemone", "abstained"), ("mock", "timeout")]


async def test_a_judge_cut_off_by_the_cascade_budget_again_and_again_keeps_its_circuit_closed(tmp_path):
    fast, judge = Engine("systemone", p=0.55), Engine("mock", delay_s=30)
    gateway = cascade(tmp_path, fast, judge, "cascade_budget_s = 0.1\n")
    for _ in range(5):  # past the breaker's 3 consecutive failures
        decision = await asyncio.wait_for(gateway.decide(CHOICE), 10)
        assert decision.attempts[-1].provider == "mock" and decision.attempts[-1].outcome == "timeout"
    assert len(judge.asked) == 5


async def test_a_judge_that_fails_outright_again_and_again_is_skipped_once_its_circuit_opens(tmp_path):
    fast, judge = Engine("systemone", p=0.55), Engine("mock", fail="connection refused")
    gateway = cascade(tmp_path, fast, judge)
    for _ in range(5):
        decision = await gateway.decide(CHOICE)
    assert len(judge.asked) == 3 and "circuit is open" in (decision.attempts[-1].detail or "")


async def test_a_kind_that_skips_the_cascade_abstains_without_asking_the_judge(tmp_path):
    fast, judge = Engine("systemone", p=0.55), Engine("mock", p=0.9)
    gateway = cascade(tmp_path, fast, judge, 'cascade_skip_kinds = ["triage"]\n')
    decision = await gateway.decide({**CHOICE, "kind": "triage"})
    assert decision.status == "abstained" and judge.asked == []


async def test_a_provider_asked_by_name_answers_alone(tmp_path):
    fast, judge = Engine("systemone", p=0.55), Engine("mock", p=0.9)
    [decision] = await cascade(tmp_path, fast, judge).decide_many(
        None, [Query(CHOICE["question"], CHOICE["options"])], "local", threshold=0.6, only="systemone")
    assert decision.status == "abstained" and judge.asked == []


@pytest.mark.parametrize("context", [None, {}, {"command": ""}, {"command": " ", "args": [], "cwd": None},
                                     {"tool": "Bash", "command": ""}, {"tool": "Bash"}])
async def test_a_yes_no_question_with_nothing_to_judge_is_never_answered_by_an_engine_that_needs_a_text(
        tmp_path, context):
    fast = Engine("systemone", p=1.0)
    request = {"question": "Should I delete the production database?"}
    decision = await cascade(tmp_path, fast, None).decide(
        request if context is None else {**request, "context": context})
    assert decision.status == "abstained" and decision.abstain_reason == "no_evidence"
    assert decision.confidence is None and decision.decision is None and fast.asked == []
    assert "no context" in decision.rationale


@pytest.mark.parametrize("context", [{}, {"task": ""}, {"task": "  ", "notes": []}, {"tool": "Bash"}])
async def test_a_choice_given_a_context_with_nothing_in_it_is_never_answered_by_an_engine_that_needs_a_text(
        tmp_path, context):
    fast, judge = Engine("systemone", p=1.0), Engine("mock")
    decision = await cascade(tmp_path, fast, judge).decide(
        {"question": "Which model tier should handle this task?", "options": ["haiku", "sonnet", "opus"], "context": context})
    assert decision.status == "abstained" and decision.abstain_reason == "no_evidence"
    assert decision.decision is None and fast.asked == [] and judge.asked == []


async def test_a_choice_asked_with_no_context_at_all_is_judged_on_its_own_words(tmp_path):
    fast = Engine("systemone", p=0.9)
    decision = await cascade(tmp_path, fast, None).decide(
        {"question": "Rerun the flaky pipeline or block the merge?", "options": ["rerun the pipeline", "block the merge"]})
    assert decision.status == "decided" and len(fast.asked) == 1


async def test_a_choice_with_a_blank_context_goes_to_an_engine_that_answers_from_what_it_knows(tmp_path):
    fast, judge = Engine("systemone", p=1.0), Engine("mock", without_context=True)
    decision = await cascade(tmp_path, fast, judge).decide(
        {"question": "Which planet is closest to the Sun?", "options": ["Mercury", "Venus", "Mars"], "context": {}})
    assert fast.asked == [] and len(judge.asked) == 1 and decision.provider == "mock"


async def test_when_no_stage_can_judge_without_a_text_the_rationale_names_each(tmp_path):
    fast, judge = Engine("systemone"), Engine("mock")
    decision = await cascade(tmp_path, fast, judge).decide({"question": "Is the earth flat?"})
    assert decision.status == "abstained" and decision.abstain_reason == "no_evidence" and judge.asked == []
    assert [(a.provider, a.outcome) for a in decision.attempts] == [("systemone", "abstained"), ("mock", "abstained")]
    assert decision.rationale.endswith("[stage 2, mock, after systemone: no text to judge: a yes/no question, or a "
                                       "choice given a context, needs a text in it for this engine]")


async def test_a_yes_no_question_with_nothing_to_judge_goes_to_a_judge_that_answers_without_one(tmp_path):
    fast, judge = Engine("systemone", p=1.0), Engine("mock", p=0.8, without_context=True)
    decision = await cascade(tmp_path, fast, judge).decide({"question": "Is Paris the capital of Germany?"})
    assert fast.asked == [] and judge.asked == [(None, "Is Paris the capital of Germany?")]
    assert decision.status == "decided" and decision.provider == "mock" and decision.stage == 2
    assert [(a.provider, a.outcome) for a in decision.attempts] == [("systemone", "abstained"), ("mock", "ok")]
    assert "no text to judge" in decision.rationale


async def test_a_yes_no_question_with_a_text_and_a_choice_without_one_still_reach_the_first_stage(tmp_path):
    fast = Engine("systemone", p=0.9)
    gateway = cascade(tmp_path, fast, None)
    assert (await gateway.decide(YES_NO)).status == "decided"
    assert (await gateway.decide(CHOICE)).status == "decided"
    assert len(fast.asked) == 2


async def test_several_questions_about_one_text_split_by_what_each_engine_can_judge(tmp_path):
    fast, judge = Engine("systemone", p=0.9), Engine("mock", p=0.9, without_context=True)
    decisions = await cascade(tmp_path, fast, judge).decide_many(
        None, [Query("Is it risky?", ["yes", "no"], yes_no=True), Query(CHOICE["question"], CHOICE["options"])],
        "local", threshold=0.6)
    assert [(d.provider, d.stage) for d in decisions] == [("mock", 2), ("systemone", 1)]


async def test_health_names_the_cascade_stage_and_is_degraded_while_it_is_down(tmp_path):
    from system1.service.reports import health_report

    fast, judge = Engine("systemone"), Engine("mock", fail="model not loaded")
    report = await health_report(cascade(tmp_path, fast, judge))
    assert [(p["name"], p["role"], p["ok"]) for p in report["providers"]] == [
        ("systemone", "primary", True), ("mock", "cascade", False)]
    assert report["status"] == "degraded"


async def test_a_prompt_asked_of_the_chain_stays_local_only_if_every_cascade_stage_is_local(tmp_path):
    from system1.providers.anthropic import AnthropicOptions, AnthropicProvider

    assert cascade(tmp_path, Engine("systemone"), Engine("mock")).stays_local(None)
    toml = '[gateway]\nprovider = "systemone"\ncascade = ["anthropic"]\n'
    hosted = Gateway(config_in(tmp_path, toml), providers={
        "systemone": Engine("systemone"), "anthropic": AnthropicProvider(AnthropicOptions())})
    assert not hosted.stays_local(None) and hosted.stays_local("systemone")


async def test_a_question_with_its_own_threshold_is_held_to_it_and_passed_on_alone(tmp_path):
    fast, judge = Engine("systemone", p=0.9), Engine("mock", p=0.99)
    gateway = cascade(tmp_path, fast, judge)
    loose, strict = Query(CHOICE["question"], CHOICE["options"]), Query("Private?", ["yes", "no"], min_confidence=0.95)
    first, second = await gateway.decide_many({"text": "a note"}, [loose, strict], "local", threshold=0.0)
    assert first.status == "decided" and first.stage == 1  # 0.9 clears the call's threshold of 0
    assert second.status == "decided" and second.stage == 2 and second.provider == "mock"  # 0.9 < its own 0.95
    assert [q for _, q in judge.asked] == ["Private?"]


# A bi-encoder's yes/no answer is how related the text is to the question (see
# `EngineAnswer.relevance`): it decides only through a head or the question's own fit.
UNSEEN_FIT = Fit(provider="systemone", model="systemone-model", unseen=True, temperature=1.0)
QUESTION_FIT = Fit(provider="systemone", model="systemone-model", question=YES_NO["question"], temperature=1.0)
OPTIONS_FIT = Fit(provider="systemone", model="systemone-model", n_options=2, n_options_max=12, temperature=1.0)


async def test_a_yes_no_answer_that_is_relevance_alone_passes_to_the_judge_however_sure(tmp_path):
    fast, judge = Engine("systemone", p=0.99, relevance=True), Engine("mock", p=0.9)
    decision = await cascade(tmp_path, fast, judge, fits=(UNSEEN_FIT,)).decide(YES_NO)
    assert decision.status == "decided" and decision.provider == "mock" and decision.stage == 2
    assert [(a.provider, a.outcome) for a in decision.attempts] == [("systemone", "abstained"), ("mock", "ok")]
    assert "relevance alone" in decision.attempts[0].detail


async def test_a_yes_no_answer_that_is_relevance_alone_abstains_for_want_of_evidence_with_no_later_stage(tmp_path):
    fast = Engine("systemone", p=0.99, relevance=True)
    decision = await cascade(tmp_path, fast, None, fits=(UNSEEN_FIT,)).decide(YES_NO)
    assert decision.status == "abstained" and decision.abstain_reason == "no_evidence"
    assert decision.decision is None and decision.confidence is None
    assert "how related the text is to the question" in decision.rationale


async def test_a_yes_no_answer_that_is_relevance_alone_decides_through_the_questions_own_fit(tmp_path):
    fast, judge = Engine("systemone", p=0.99, relevance=True), Engine("mock", p=0.9)
    decision = await cascade(tmp_path, fast, judge, fits=(UNSEEN_FIT, QUESTION_FIT)).decide(YES_NO)
    assert decision.status == "decided" and decision.provider == "systemone" and judge.asked == []
    assert decision.calibration == "question"


async def test_a_choice_from_an_engine_whose_yes_no_is_relevance_alone_still_decides(tmp_path):
    fast = Engine("systemone", p=0.99, relevance=True)
    decision = await cascade(tmp_path, fast, None, fits=(UNSEEN_FIT,)).decide(CHOICE)
    assert decision.status == "decided" and decision.provider == "systemone" and decision.calibration == "unseen"


@pytest.mark.parametrize("fit", [UNSEEN_FIT, OPTIONS_FIT], ids=["unseen-question fit", "option-count fit"])
async def test_a_sure_answer_through_a_fit_for_questions_without_their_own_is_put_to_the_judge(tmp_path, fit):
    fast, judge = Engine("systemone", p=0.99), Engine("mock", p=0.9)
    decision = await cascade(tmp_path, fast, judge, fits=(fit,)).decide(CHOICE)
    assert decision.status == "decided" and decision.provider == "mock" and decision.stage == 2
    assert "fit for questions with no fit of their own" in decision.rationale and len(judge.asked) == 1


async def test_an_unsure_judge_turns_a_borrowed_fits_answer_into_an_abstention_naming_that_answer(tmp_path):
    fast, judge = Engine("systemone", p=0.99), Engine("mock", p=0.4)
    decision = await cascade(tmp_path, fast, judge, fits=(UNSEEN_FIT,)).decide(CHOICE)
    assert decision.status == "abstained" and decision.abstain_reason == "threshold" and decision.decision is None
    assert decision.provider == "mock" and decision.stage == 2
    assert [(a.provider, a.outcome) for a in decision.attempts] == [("systemone", "ok"), ("mock", "abstained")]
    assert "after systemone: answered 'billing' at 0.99 through a fit for questions with no fit of their own" \
        in decision.rationale


@pytest.mark.parametrize(("judge", "extra"), [
    (Engine("mock", p=0.9), 'uncalibrated = "abstain"\n'),  # no fit of the judge's own
    (Engine("mock", refuse="cannot read this script"), ""),   # the engine's own abstention
], ids=["uncalibrated", "engine"])
async def test_a_judge_that_cannot_judge_the_question_leaves_a_borrowed_fits_answer_standing(tmp_path, judge, extra):
    # Such an abstention is about the judge, not the question.
    fast = Engine("systemone", p=0.99)
    decision = await cascade(tmp_path, fast, judge, extra, fits=(UNSEEN_FIT,)).decide(CHOICE)
    assert decision.status == "decided" and decision.provider == "systemone" and decision.decision == "billing"
    assert [a.provider for a in decision.attempts] == ["systemone", "mock"]
    assert "could not judge it: this answer stands" in decision.rationale


async def test_a_later_stages_own_borrowed_fit_answer_is_final_and_not_put_to_a_third_stage(tmp_path):
    fast, judge, third = Engine("systemone", p=0.55), Engine("mock", p=0.9), Engine("llama", p=0.4)
    fits = (UNSEEN_FIT, Fit(provider="mock", model="mock-model", unseen=True, temperature=1.0))
    toml = '[gateway]\nprovider = "systemone"\ncascade = ["mock", "llama"]\nmin_confidence = 0.6\n'
    gateway = Gateway(config_in(tmp_path, toml), providers={"systemone": fast, "mock": judge, "llama": third},
                      calibrator=Calibrator([Source("local", tmp_path, fits)]))
    decision = await gateway.decide(CHOICE)
    assert decision.status == "decided" and decision.provider == "mock" and decision.calibration == "unseen"
    assert decision.stage == 2 and third.asked == []


async def test_a_failing_judge_leaves_the_unseen_question_fit_answer_standing(tmp_path):
    fast, judge = Engine("systemone", p=0.99), Engine("mock", fail="connection refused")
    decision = await cascade(tmp_path, fast, judge, fits=(UNSEEN_FIT,)).decide(CHOICE)
    assert decision.status == "decided" and decision.provider == "systemone" and decision.calibration == "unseen"
    assert [(a.provider, a.outcome) for a in decision.attempts][-1][0] == "mock"
    assert "was asked to confirm it and failed: this answer stands" in decision.rationale


async def test_an_answer_through_the_questions_own_fit_or_a_skipped_kind_is_not_put_to_the_judge(tmp_path):
    fast, judge = Engine("systemone", p=0.99), Engine("mock", p=0.9)
    own = await cascade(tmp_path, fast, judge, fits=(UNSEEN_FIT, QUESTION_FIT)).decide(YES_NO)
    assert own.provider == "systemone" and own.calibration == "question"
    kind = kind_of(CHOICE["question"], CHOICE["options"])
    skipped = await cascade(tmp_path, fast, judge, f"cascade_skip_kinds = [{kind!r}]\n", fits=(UNSEEN_FIT,)).decide(CHOICE)
    assert skipped.provider == "systemone" and skipped.calibration == "unseen" and judge.asked == []


# A later stage's own head on its reading (core/reading.py): the judge's vector of the text,
# stacked on the first stage's head. On 2 dimensions: the first axis means "yes".
PAY = {"question": "Does the note disclose someone's pay?", "context": {"note": "rm: Priya's base goes to 104k"}}


class Reader(Engine):
    """An engine that also gives its reading: `rm` texts on the first axis, others on the second."""

    def __init__(self, *args, model: str = "mock-model", down: bool = False, read_s: float = 0.0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.model, self.down, self.read_s = model, down, read_s
        self.read: list[object] = []

    async def embed(self, state, query: Query, timeout_s: float, model: str | None = None):
        self.read.append(state)
        await asyncio.sleep(self.read_s)
        if self.down:
            raise ProviderError("HTTP 501: This server does not support embeddings", provider=self.name)
        return self.model, [1.0, 0.0] if "rm" in str(state) else [0.0, 1.0]


def reading_cascade(tmp_path, judge: Reader, first_head: bool = True, observer: Observer | None = None,
                    extra: str = "") -> Gateway:
    from system1.core.heads import Head, Heads, kind_of

    kind = kind_of(PAY["question"], ["yes", "no"], yes_no=True)
    # Stage 1's head answers P(yes) = σ(0.2) ≈ 0.55 for an `rm` text: unsure at 0.6.
    first = Head(kind=kind, embedder="systemone", model="systemone-model", options=["yes", "no"],
                 weights=[[0.2, 0.0], [0.0, 0.0]], bias=[0.0, 0.0])
    second = Head(kind=kind, embedder="mock", model="mock-model", options=["yes", "no"],
                  weights=[[3.0, -3.0], [0.0, 0.0]], bias=[0.0, 0.0], earlier=[1.0, 1.0])
    toml = f'[gateway]\nprovider = "systemone"\ncascade = ["mock"]\nmin_confidence = 0.6\n{extra}'
    fast = Reader("systemone", p=0.55, model="systemone-model")
    return Gateway(config_in(tmp_path, toml), providers={"systemone": fast, "mock": judge},
                   heads=Heads([first, second] if first_head else [second]), observer=observer)


class Passes(Observer):
    def __init__(self) -> None:
        self.passes: list[str] = []

    def engine_pass(self, provider: str, size: int, seconds: float) -> None:
        self.passes.append(provider)


async def test_a_stage_with_a_head_of_its_own_reads_the_text_instead_of_answering_stacked_on_the_first_stage(tmp_path):
    judge = Reader("mock", p=0.99)
    decision = await reading_cascade(tmp_path, judge).decide(PAY)
    expected = 1 / (1 + math.exp(-(3.0 + 0.2)))  # the judge's head plus stage 1's log-odds
    assert decision.status == "decided" and decision.decision == "yes" and decision.stage == 2
    assert decision.confidence == pytest.approx(expected) and decision.calibration == "head"
    assert judge.asked == [] and judge.read == [PAY["context"]]  # one pass: read, never asked
    assert [(a.provider, a.outcome) for a in decision.attempts] == [("systemone", "abstained"), ("mock", "ok")]
    assert "learned head" in decision.attempts[-1].detail and decision.rationale.endswith(
        "[stage 2, mock, after systemone: confidence 0.55 below 0.60]")


async def test_a_stages_reading_is_a_pass_of_its_lane_like_its_answers(tmp_path):
    # Through the lane, a reading waits behind interactive work and counts against the slots;
    # so does stage 1's vector for its head, which did not come with its answer.
    judge, observer = Reader("mock", p=0.99), Passes()
    decision = await reading_cascade(tmp_path, judge, observer=observer).decide(PAY)
    assert decision.stage == 2 and judge.asked == [] and judge.read == [PAY["context"]]
    assert observer.passes == ["systemone", "systemone", "mock"]  # answer, vector; the judge's reading


async def test_a_stage_whose_reading_fails_or_is_of_another_model_is_asked_for_its_answer(tmp_path):
    for judge, tries in ((Reader("mock", p=0.9, down=True), ["abstained", "error", "ok"]),
                         (Reader("mock", p=0.9, model="another-model"), ["abstained", "ok"])):
        decision = await reading_cascade(tmp_path, judge).decide(PAY)
        assert decision.status == "decided" and decision.stage == 2 and decision.confidence == pytest.approx(0.9)
        assert judge.read and judge.asked == [(PAY["context"], PAY["question"])]
        assert [a.outcome for a in decision.attempts] == tries  # the failed reading is one of the tries


async def test_a_reading_that_outlasts_the_cascade_budget_is_a_timeout_in_the_abstention_it_leaves(tmp_path):
    judge = Reader("mock", p=0.99, read_s=30)
    gateway = reading_cascade(tmp_path, judge, extra="cascade_budget_s = 0.2\n")
    decision = await asyncio.wait_for(gateway.decide(PAY), 10)
    assert decision.status == "abstained" and decision.stage == 1 and judge.asked == []
    assert [(a.provider, a.outcome) for a in decision.attempts] == [("systemone", "abstained"), ("mock", "timeout")]
    assert decision.attempts[-1].detail.startswith("no reading: the embedder mock did not answer within")


async def test_a_stacked_head_is_not_used_where_stage_1_answered_without_its_head(tmp_path):
    judge = Reader("mock", p=0.9)
    decision = await reading_cascade(tmp_path, judge, first_head=False).decide(PAY)
    assert decision.stage == 2 and judge.read == [] and judge.asked == [(PAY["context"], PAY["question"])]


async def test_a_question_the_stages_head_is_not_for_is_asked_without_a_reading(tmp_path):
    judge = Reader("mock", p=0.9)
    decision = await reading_cascade(tmp_path, judge).decide(CHOICE)
    assert decision.stage == 2 and judge.read == [] and len(judge.asked) == 1


async def test_the_stacks_config_lets_an_unsure_destructive_command_answer_abstain_without_the_judge(tmp_path):
    # bench/cascade/SKIP.md: the judge is right less often than the head on what the head is unsure
    # of; the kind named in deploy/config.toml must be the one the destructive question has.
    from pathlib import Path

    from system1.core.rewording import DESTRUCTIVE

    stack = (Path(__file__).resolve().parents[3] / "deploy" / "config.toml").read_text()
    fast, judge = Engine("systemone", p=0.55), Engine("llama", p=0.99)
    gateway = Gateway(config_in(tmp_path, stack), providers={"systemone": fast, "llama": judge})
    unsure = await gateway.decide({**YES_NO, "question": DESTRUCTIVE})
    assert unsure.status == "abstained" and unsure.stage == 1 and judge.asked == []
    other = await gateway.decide(CHOICE)  # another kind still reaches the judge
    assert other.status == "decided" and other.stage == 2 and judge.asked == [(None, CHOICE["question"])]
