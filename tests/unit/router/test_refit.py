"""The learning loop's evidence and estimator: retries and feedback recorded, outcomes gathered
per model and topic from both logs, skills shrunk toward the catalogue's guesses, and an
overlay the router lays over its catalogue."""

from __future__ import annotations

import json
import logging
import re

import pytest

from system1.core.schema import RequestError
from system1.offline.refit import Outcome, evidence, fit, overlay, read_logs, tallies_for
from system1.core.router_config import RouterSettings
from system1.router.conversation import from_openai
from system1.router.outcomes import Outcomes
from system1.router.skills import Overlay, apply_skills, load_overlay, read_skills, write_skills

CHEAP, TOP = "cloud/cheap", "cloud/top"
NOW = 1_800_000_000.0


def catalogue(**changes) -> RouterSettings:
    return RouterSettings.model_validate({
        "enabled": True, "upstreams": {"cloud": {"base_url": "http://127.0.0.1:9", "local": False}},
        "models": [{"id": CHEAP, "upstream": "cloud", "price": {"in": 1, "out": 2}, "default_skill": 0.5,
                    "skills": {"debugging": 0.6}},
                   {"id": TOP, "upstream": "cloud", "price": {"in": 4, "out": 8}, "default_skill": 0.9}],
        **changes})


def turn(text: str, history: int = 0):
    messages = [{"role": "user", "content": f"earlier {i}"} for i in range(history)] + [{"role": "user", "content": text}]
    return from_openai({"model": "auto", "messages": messages})


def decided(request_id: str, model: str, topic: str = "debugging", ts: float = NOW - 3600, **extra) -> dict:
    return {"ts": ts, "id": request_id, "model": model, "signals": {"primary": topic}, "failed": [], "checks": [], **extra}


def test_the_same_turn_again_within_the_window_makes_the_earlier_answer_bad(tmp_path):
    outcomes = Outcomes()
    outcomes.configure(catalogue(outcomes={"retry_window_s": 60}), tmp_path)
    outcomes.answered("alice", turn("why does it crash?"), "a" * 32, CHEAP, now=NOW)
    assert outcomes.arrived("bob", turn("why does it crash?"), now=NOW + 5) is None  # another client
    assert outcomes.arrived("alice", turn("why does it crash?", history=2), now=NOW + 5) is None  # another turn
    assert outcomes.arrived("alice", turn("why does it crash?"), now=NOW + 5) == "a" * 32
    assert outcomes.arrived("alice", turn("why does it crash?"), now=NOW + 6) is None  # counted once
    outcomes.answered("alice", turn("and now?"), "b" * 32, TOP, now=NOW)
    assert outcomes.arrived("alice", turn("and now?"), now=NOW + 61) is None  # past the window
    outcomes.close()
    [line] = [json.loads(x) for x in (tmp_path / "logs" / "router-outcomes.jsonl").read_text().splitlines()]
    assert (line["id"], line["model"], line["outcome"], line["source"]) == ("a" * 32, CHEAP, "bad", "retry")


def test_feedback_is_recorded_by_request_id_and_bad_bodies_name_the_field(tmp_path):
    outcomes = Outcomes()
    outcomes.configure(catalogue(), tmp_path)
    outcomes.answered("alice", turn("hi"), "c" * 32, CHEAP)
    assert outcomes.feedback({"request_id": "c" * 32, "verdict": "good"}, "alice") == \
        {"recorded": True, "request_id": "c" * 32, "known": True}
    assert outcomes.feedback({"request_id": "d" * 32, "verdict": "bad"}, "alice")["known"] is False
    for body, field in [({"request_id": "nope", "verdict": "good"}, "request_id"), ({"request_id": "c" * 32}, "verdict"),
                        ({"request_id": "c" * 32, "verdict": "meh"}, "verdict"), ([], "feedback"),
                        ({"request_id": "c" * 32, "verdict": "good", "extra": 1}, "feedback")]:
        with pytest.raises(RequestError, match=f"^{field}"):
            outcomes.feedback(body, "alice")
    outcomes.close()
    sources = [json.loads(x)["outcome"] for x in (tmp_path / "logs" / "router-outcomes.jsonl").read_text().splitlines()]
    assert sources == ["good", "bad"]


def test_evidence_counts_each_source_under_the_requests_main_topic():
    decisions = [
        decided("1" * 32, TOP, failed=[{"model": CHEAP, "why": "HTTP 503"}]),  # cheap failed upstream; top accepted
        decided("2" * 32, TOP, checks=[{"model": CHEAP, "p_yes": 0.2, "passed": False},
                                       {"model": TOP, "p_yes": 0.9, "passed": True}], escalated_from=[CHEAP]),
        decided("3" * 32, CHEAP),  # retried: bad
        decided("4" * 32, CHEAP, checks=[{"model": CHEAP, "p_yes": 0.95, "passed": True}]),  # feedback bad overrides
        decided("5" * 32, CHEAP, ts=NOW - 10),  # too recent to count as accepted
        {"ts": NOW - 3600, "id": "6" * 32, "model": TOP, "signals": {"primary": ""}},  # a sticky turn
        decided("7" * 32, CHEAP, checks=[{"model": CHEAP, "p_yes": None, "passed": True}]),  # no verdict: accepted
    ]
    outcomes = [{"ts": NOW - 100, "id": "3" * 32, "source": "retry", "outcome": "bad"},
                {"ts": NOW - 90, "id": "4" * 32, "source": "feedback", "outcome": "good"},
                {"ts": NOW - 80, "id": "4" * 32, "source": "feedback", "outcome": "bad"}]
    found, skipped = evidence(decisions, outcomes, retry_window_s=120, now=NOW)
    tallies = tallies_for(found, lambda model, key: 0.5)
    cheap, top = tallies[CHEAP, ("debugging", None)], tallies[TOP, ("debugging", None)]
    assert (cheap.successes, cheap.failures) == (1, 4)
    assert dict(cheap.sources) == {"upstream": 1, "check": 1, "retry": 1, "feedback": 1, "accepted": 1}
    assert (top.successes, top.failures) == (2, 0) and dict(top.sources) == {"accepted": 1, "check": 1}
    assert sum(skipped.values()) == 2


def test_an_outcome_is_shared_among_topics_by_their_probability_and_how_well_each_skill_explains_it():
    unsure = {"primary": "debugging", "topics": {"debugging": 0.5, "code-gen": 0.3, "docs": 0.2}}
    found, _ = evidence([decided("1" * 32, CHEAP, signals=unsure), decided("2" * 32, CHEAP, signals={"primary": "docs"})],
                        [{"ts": NOW - 100, "id": "1" * 32, "source": "feedback", "outcome": "bad"}], 120, now=NOW)
    assert found[0].topics == {"debugging": 0.5, "code-gen": 0.3, "docs": 0.2} and found[1].topics == {"docs": 1.0}
    equal = tallies_for(found[:1], lambda model, key: 0.5)
    assert [equal[CHEAP, (t, None)].failures for t in ("debugging", "code-gen", "docs")] == pytest.approx([0.5, 0.3, 0.2])
    # a failure goes mostly to the topic the model is weaker at
    weak_docs = tallies_for(found[:1], lambda model, key: 0.2 if key[0] == "docs" else 0.9)
    assert weak_docs[CHEAP, ("docs", None)].failures == pytest.approx(0.2 * 0.8 / (0.5 * 0.1 + 0.3 * 0.1 + 0.2 * 0.8))
    assert weak_docs[CHEAP, ("docs", None)].failures > weak_docs[CHEAP, ("debugging", None)].failures


def test_the_fit_tells_apart_a_weak_topic_from_a_strong_one_the_decision_confused_with_it():
    """Requests the decision split between debugging and data-sql: the model fails the data-sql
    ones and answers the debugging ones well; sure decisions about each topic pin it down."""
    mixed = {"primary": "debugging", "topics": {"debugging": 0.6, "data-sql": 0.4}}
    entries, verdicts = [], []
    for i in range(40):
        topic = "data-sql" if i % 2 else "debugging"
        signals = {"primary": topic} if i < 20 else mixed
        request_id = f"{i:032d}"
        entries.append(decided(request_id, CHEAP, signals=signals))
        verdicts.append({"ts": NOW - 100, "id": request_id, "source": "feedback", "outcome": "bad" if i % 2 else "good"})
    found, _ = evidence(entries, verdicts, 120, now=NOW)
    skills = {f.topic: f.new for f in fit(catalogue(), catalogue(), found, prior_strength=2)}
    assert skills["debugging"] > 0.75 and skills["data-sql"] < 0.25
    plain = tallies_for(found, lambda model, key: 0.5)  # shares by probability alone blur the two
    assert plain[CHEAP, ("debugging", None)].failures > 4


def test_skills_shrink_toward_the_catalogues_guess_when_outcomes_are_few():
    settings = catalogue()
    few = _outcomes(CHEAP, "debugging", good=0, bad=2)
    many = _outcomes(CHEAP, "debugging", good=180, bad=20)
    [slight] = fit(settings, settings, few, prior_strength=10)
    [measured] = fit(settings, settings, many, prior_strength=10)
    assert slight.guess == 0.6 and slight.new == pytest.approx(6 / 12, abs=1e-3)  # (10·0.6 + 0) / 12
    assert measured.new == pytest.approx((6 + 180) / 210, abs=1e-3)  # close to the measured 0.9
    [raw] = fit(settings, settings, many, prior_strength=0)
    assert raw.new == 0.9


def test_a_refit_starts_from_the_catalogue_not_from_the_skills_in_use():
    settings = catalogue()
    in_use = apply_skills(settings, Overlay({CHEAP: {"debugging": 0.2}}))
    [fitted] = fit(settings, in_use, _outcomes(CHEAP, "debugging", good=10, bad=0), prior_strength=10)
    assert (fitted.guess, fitted.current, fitted.new) == (0.6, 0.2, 0.8)


def test_the_overlay_is_laid_over_the_catalogue_and_a_broken_one_is_skipped(tmp_path, caplog):
    settings = catalogue()
    [fitted] = fit(settings, settings, _outcomes(TOP, "security", good=0, bad=10), prior_strength=10)
    document = overlay([fitted], 10)
    document["skills"]["gone/model"] = {"chat": 0.5}
    write_skills(tmp_path / "router" / "skills.json", document)
    with caplog.at_level(logging.WARNING):
        loaded, problem = load_overlay(settings, tmp_path)
    assert problem is None and loaded.model(TOP).skill("security") == 0.45 and loaded.model(TOP).skill("chat") == 0.9
    assert loaded.model(CHEAP).skill("debugging") == 0.6 and "gone/model is not in the catalogue" in caplog.text
    assert read_skills(tmp_path / "router" / "skills.json").skills[TOP] == {"security": 0.45}
    (tmp_path / "router" / "skills.json").write_text('{"skills": {"cloud/top": {"chat": 7}}}')
    with caplog.at_level(logging.ERROR):
        loaded, problem = load_overlay(settings, tmp_path)
    assert loaded.model(TOP).skill("chat") == 0.9
    assert "skills.cloud/top.chat: must be a number between 0 and 1" in caplog.text and "cloud/top.chat" in problem
    (tmp_path / "router" / "skills.json").write_text('{"skills": ' + "[" * 200_000 + "]" * 200_000 + "}")
    loaded, problem = load_overlay(settings, tmp_path)
    assert loaded.model(TOP).skill("chat") == 0.9 and "skills.json: nested too deeply to read" in problem


def test_rotated_logs_are_read_oldest_first_and_bad_lines_counted(tmp_path):
    log = tmp_path / "router.jsonl"
    (tmp_path / "router.jsonl.2").write_text('{"id": "a"}\n')
    (tmp_path / "router.jsonl.1").write_text('{"id": "b"}\nnot json\n')
    log.write_text('{"id": "c"}\n[1]\n')
    read = read_logs(log)
    assert [e["id"] for e in read.entries] == ["a", "b", "c"] and read.unreadable == 2
    assert read_logs(tmp_path / "absent.jsonl").entries == []


def _outcomes(model: str, topic: str, good: int, bad: int, level: int | None = None) -> list[Outcome]:
    return [Outcome(model, {topic: 1.0}, i < good, "feedback", {} if level is None else {level: 1.0})
            for i in range(good + bad)]


def test_chances_of_success_are_fitted_per_topic_and_complexity_level_from_the_logged_probabilities():
    """The model answers routine debugging well and expert debugging badly: one skill per topic
    averages the two; the fit per level tells them apart, each from its own prior."""
    entries, verdicts = [], []
    for i in range(60):
        level = 1 if i % 2 else 3
        request_id = f"{i:032d}"
        p = [0.0, 0.9, 0.0, 0.1] if level == 1 else [0.0, 0.1, 0.0, 0.9]
        entries.append(decided(request_id, CHEAP, signals={"primary": "debugging", "complexity_p": p, "complexity": level}))
        verdicts.append({"ts": NOW - 100, "id": request_id, "source": "feedback", "outcome": "good" if level == 1 else "bad"})
    found, _ = evidence(entries, verdicts, 120, now=NOW)
    assert found[1].levels == pytest.approx({1: 0.9, 3: 0.1})
    settings = catalogue()
    [topic] = fit(settings, settings, found, prior_strength=2)
    by_level = {f.level: f for f in fit(settings, settings, found, prior_strength=2, by_level=True)}
    assert 0.4 < topic.new < 0.6 and set(by_level) == {1, 3}
    assert by_level[1].guess == pytest.approx(settings.success(settings.model(CHEAP), "debugging", 1))
    assert by_level[1].new > 0.85 and by_level[3].new < 0.15
    document = overlay([topic], 2, list(by_level.values()))
    assert document["success"] == {CHEAP: {"debugging": {"1": by_level[1].new, "3": by_level[3].new}}}
    laid = apply_skills(settings, Overlay(document["skills"], {CHEAP: {"debugging": {1: by_level[1].new, 3: 0.05}}}))
    assert laid.success(laid.model(CHEAP), "debugging", 3) == 0.05
    assert laid.success(laid.model(CHEAP), "debugging", 0) == pytest.approx(
        settings.model_copy(update={"models": laid.models}).success(laid.model(CHEAP), "debugging", 0))


def test_a_log_without_complexity_probabilities_counts_its_level_whole_or_not_at_all():
    found, _ = evidence([decided("1" * 32, CHEAP, signals={"primary": "docs", "complexity": 2}),
                         decided("2" * 32, CHEAP, signals={"primary": "docs"})], [], 120, now=NOW)
    assert [o.levels for o in found] == [{2: 1.0}, {}]
    settings = catalogue()
    [cell] = fit(settings, settings, found, prior_strength=0, by_level=True)
    assert (cell.topic, cell.level, cell.tally.n) == ("docs", 2, 1.0)


def test_the_overlays_chances_of_success_are_checked_when_read(tmp_path):
    path = tmp_path / "skills.json"
    for body, error in [({"skills": {}, "success": {CHEAP: {"docs": {"7": 0.5}}}}, "complexity level (0, 1, 2, 3)"),
                        ({"skills": {}, "success": {CHEAP: {"docs": {"1": 1.5}}}}, "success.cloud/cheap.docs.1: must be"),
                        ({"skills": {}, "success": [1]}, "success: must be an object")]:
        path.write_text(json.dumps(body))
        with pytest.raises(ValueError, match=re.escape(error)):
            read_skills(path)
    path.write_text(json.dumps({"skills": {}, "success": {CHEAP: {"docs": {"0": 0.9}}}}))
    assert read_skills(path).success == {CHEAP: {"docs": {0: 0.9}}}


def test_refit_reads_and_writes_the_skills_in_learned_dir_and_says_so_when_it_cannot(tmp_path, capsys):
    import tomllib

    from system1.cli import main

    from .catalogues import router_toml

    state = tmp_path / "state"
    (state / "logs").mkdir(parents=True)
    (state / "logs" / "router.jsonl").write_text(json.dumps(decided("1" * 32, CHEAP)) + "\n")
    (state / "logs" / "router-outcomes.jsonl").write_text(
        json.dumps({"ts": NOW, "id": "1" * 32, "source": "feedback", "outcome": "bad"}) + "\n")
    table = catalogue()
    models = [{"id": m.id, "upstream": m.upstream, "price": {"in": m.price.input, "out": m.price.output},
               "default_skill": m.default_skill, "skills": m.skills} for m in table.models]
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    for learned, ok in ((tmp_path / "shared", True), (blocked / "learned", False)):
        config = router_toml({"cloud": {"base_url": "http://127.0.0.1:9", "local": False}}, models)
        config += f'[service]\nlearned_dir = "{learned}"\n'
        assert tomllib.loads(config)["service"]["learned_dir"] == str(learned)
        (tmp_path / "config.toml").write_text(config)
        env = {"SYSTEM1_CONFIG": str(tmp_path / "config.toml"), "SYSTEM1_INSTALL_DIR": str(state)}
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            code = main(["router", "refit", "--write", "--url", "http://127.0.0.1:9"])
        err = capsys.readouterr().err
        if ok:
            assert code == 0 and read_skills(learned / "router" / "skills.json").skills == {CHEAP: {"debugging": round(6 / 11, 3)}}
            assert not (state / "router" / "skills.json").exists()
        else:
            assert code == 1 and f"cannot write {blocked / 'learned' / 'router' / 'skills.json'}" in err
