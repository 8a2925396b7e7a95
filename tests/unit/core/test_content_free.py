"""The content-free correction: an engine's lean towards an option, whatever the text, divided out."""

from __future__ import annotations

import pytest

from system1.core.calibration import Baselines, Calibrator, Fit, Source, content_free, correct
from system1.core.gateway import Gateway
from system1.providers.base import Capabilities, EngineAnswer, HealthProbe, OneQuestionProvider, ProviderError, Query

from ..helpers import config_in

pytestmark = pytest.mark.anyio

QUESTION = "Is this tool call destructive or hard to reverse?"
LEANING_FIT = Fit(provider="leaning", model="lean-1", unseen=True, temperature=1.0, content_free=True)


class Leaning(OneQuestionProvider):
    """Says "yes" to everything, a little less surely about a real command than about none."""

    name = "leaning"

    def __init__(self, blank_fails: bool = False) -> None:
        super().__init__(OneQuestionProvider.Options(answers_without_context=True))
        self.blank_fails = blank_fails
        self.states: list[object] = []

    async def decide_one(self, state, query: Query, timeout_s: float) -> EngineAnswer:
        self.states.append(state)
        blank = not (state or {}).get("command")
        if blank and self.blank_fails:
            raise ProviderError("no answer about an empty context", provider=self.name)
        yes = 0.9 if blank else 0.7
        return EngineAnswer("yes", yes, {"yes": yes, "no": 1 - yes}, "leans to yes", "lean-1")

    async def health(self, timeout_s: float) -> HealthProbe:
        return HealthProbe(True, "leaning")

    def capabilities(self) -> Capabilities:
        return Capabilities(max_options=None, model="lean-1")


def leaning_gateway(tmp_path, provider: Leaning, fits: tuple[Fit, ...] = (LEANING_FIT,)) -> Gateway:
    config = config_in(tmp_path, '[gateway]\nprovider = "mock"\nmin_confidence = 0\n')
    config.settings.gateway.provider = provider.name
    config.settings.gateway.fallback = []
    return Gateway(config, providers={provider.name: provider}, calibrator=Calibrator([Source("local", tmp_path, fits)]))


def test_the_content_free_context_keeps_the_shape_and_empties_the_text():
    state = {"tool": "Bash", "command": "rm -rf build/", "args": ["-v"], "size": 3, "nested": {"path": "/etc"}}
    assert content_free(state) == {"tool": "", "command": "", "args": [], "size": None, "nested": {"path": ""}}
    assert content_free("a sentence") == "" and content_free(None) is None


def test_correction_divides_by_the_content_free_answer_and_renormalises():
    corrected = correct({"yes": 0.7, "no": 0.3}, {"yes": 0.9, "no": 0.1})
    # 0.7 / 0.9 = 0.778 and 0.3 / 0.1 = 3.0: "no" now wins with 3.0 / 3.778.
    assert corrected["no"] == pytest.approx(3.0 / (3.0 + 0.7 / 0.9))
    assert sum(corrected.values()) == pytest.approx(1.0)
    assert correct({"yes": 0.7, "no": 0.3}, {"yes": 1.0}) == {"yes": 0.7, "no": 0.3}  # options differ: unchanged


def test_remembered_baselines_forget_the_least_recently_used_beyond_their_size():
    baselines = Baselines(size=2)
    baselines.put(("a",), {"x": 1.0})
    baselines.put(("b",), {"x": 1.0})
    baselines.get(("a",))
    baselines.put(("c",), {"x": 1.0})
    assert baselines.get(("b",)) is None and baselines.get(("a",)) and baselines.get(("c",))


async def test_a_content_free_fit_divides_out_the_lean_and_may_change_the_winner(tmp_path):
    engine = Leaning()
    g = leaning_gateway(tmp_path, engine)
    decision = await g.decide({"question": QUESTION, "context": {"tool": "Bash", "command": "ls -la"}})
    assert decision.status == "decided" and decision.decision == "no" and decision.calibration == "unseen"
    assert decision.confidence == pytest.approx(3.0 / (3.0 + 0.7 / 0.9))
    assert "empty context" in decision.rationale and "the engine's own first choice was 'yes'" in decision.rationale
    assert engine.states == [{"tool": "Bash", "command": "ls -la"}, {"tool": "", "command": ""}]


async def test_the_content_free_answer_is_asked_once_per_question_and_context_shape(tmp_path):
    engine = Leaning()
    g = leaning_gateway(tmp_path, engine)
    for command in ("ls", "rm -rf /", "git push --force"):
        await g.decide({"question": QUESTION, "context": {"tool": "Bash", "command": command}})
    await g.decide({"question": QUESTION, "context": {"command": "ls"}})  # another shape: asked again
    blanks = [s for s in engine.states if not s.get("command")]
    assert blanks == [{"tool": "", "command": ""}, {"command": ""}]


async def test_without_a_context_a_content_free_fit_does_not_apply(tmp_path):
    engine = Leaning()
    decision = await leaning_gateway(tmp_path, engine).decide({"question": QUESTION})
    assert decision.calibration == "none" and decision.decision == "yes" and decision.confidence == 0.9
    assert engine.states == [None]


async def test_when_the_content_free_answer_cannot_be_had_the_answer_stands_uncalibrated_and_says_why(tmp_path):
    engine = Leaning(blank_fails=True)
    decision = await leaning_gateway(tmp_path, engine).decide(
        {"question": QUESTION, "context": {"command": "ls"}})
    assert decision.status == "decided" and decision.decision == "yes" and decision.calibration == "none"
    assert decision.confidence == pytest.approx(0.7) and "empty context" in decision.rationale
    assert "could not be had" in decision.rationale


async def test_fits_without_the_correction_never_ask_for_the_content_free_answer(tmp_path):
    engine = Leaning()
    plain = Fit(provider="leaning", model="lean-1", unseen=True, temperature=1.0)
    decision = await leaning_gateway(tmp_path, engine, (plain,)).decide(
        {"question": QUESTION, "context": {"command": "ls"}})
    assert decision.calibration == "unseen" and decision.decision == "yes"
    assert engine.states == [{"command": "ls"}]
