"""`system1 calibrate`: input checking, the live run through the service, and where it writes."""

from __future__ import annotations

import json

import anyio

import pytest

from system1.cli import EXIT_OK, EXIT_START, main
from system1.offline import calibrate
from system1.core import calibration

from ..service_harness import app_transport, call

QUESTION = "Rerun the flaky pipeline or block the merge?"


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"question": "q", "options": ["a", "b"], "label": "a"}\n{"question": "q", "options": ["a", "b"]}\n', ":2: the row has no 'label'"),
        ('{"question": "q", "options": ["a", "b"], "label": "c"}\n', ":1: label 'c' is not among the options ['a', 'b']"),
        ('{"question": "q", "label": "maybe"}\n', ":1: label 'maybe' is not among the options ['yes', 'no']"),
        ("\n\n", ": no labelled rows"),
        ("{not json\n", ":1: not JSON (Expecting property name enclosed in double quotes)"),
        ('{"question": "", "label": "yes"}\n', ":1: 'question' must be a non-empty string"),
        ('{"question": "q", "context": "text", "label": "yes"}\n', ":1: 'context' must be an object"),
        ('{"question": "q", "label": "yes", "meta": {"task": 3}}\n', ":1: 'meta.task' must be a non-empty string"),
    ],
)
def test_bad_input_is_a_clear_error_naming_the_line(tmp_path, content, message):
    data = tmp_path / "data.jsonl"
    data.write_text(content)
    with pytest.raises(calibrate.DataError) as caught:
        calibrate.load(data)
    assert str(caught.value) == f"{data}{message}"


def test_a_bad_file_stops_the_command_before_anything_is_asked(tmp_path, capsys):
    data = write_rows(tmp_path / "d.jsonl", [{"question": "q", "label": "perhaps"}])
    assert main(["calibrate", str(data)]) == EXIT_START
    assert "label 'perhaps' is not among" in capsys.readouterr().err


def test_rows_can_come_from_standard_input(monkeypatch):
    import io
    from pathlib import Path

    monkeypatch.setattr("sys.stdin", io.StringIO('{"question": "q", "label": "no"}\n'))
    assert calibrate.load(Path("-"))[0].label == "no"


def test_extra_keys_stay_out_of_the_request(tmp_path):
    data = write_rows(tmp_path / "d.jsonl", [{"question": "q", "context": {"prompt": "x"}, "label": "no", "meta": {"tier": "opus"}}])
    row = calibrate.load(data)[0]
    assert row.request() == {"question": "q", "min_confidence": 0, "context": {"prompt": "x"}}


def test_a_rows_group_is_named_with_its_file_and_stays_out_of_the_request(tmp_path):
    data = write_rows(tmp_path / "d.jsonl", [{"question": "q", "label": "no", "meta": {"group": "pay"}},
                                             {"question": "q", "label": "no", "meta": {"group": 3}},
                                             {"question": "q", "label": "yes"}])
    rows = calibrate.load(data)
    assert [r.group for r in rows] == ["d.jsonl:pay", None, None]
    assert rows[0].request() == {"question": "q", "min_confidence": 0}


@pytest.fixture
def labelled(tmp_path):
    rows = [{"question": QUESTION, "options": ["rerun", "block"], "label": "rerun" if i % 4 else "block"} for i in range(16)]
    return write_rows(tmp_path / "labelled.jsonl", rows)


@pytest.fixture
def shipped(tmp_path, monkeypatch):
    """Stand-ins for the repository's shipped fits and reports, so tests never touch the real ones."""
    fits = tmp_path / "repo" / "calibration.json"
    fits.parent.mkdir()
    fits.write_text('{"format": "system1-calibration", "version": 1, "fits": []}\n')
    monkeypatch.setattr("system1.core.calibration.SHIPPED_FITS", fits)
    monkeypatch.setattr(calibrate, "REPORTS", tmp_path / "repo" / "reports")
    return fits


def run(transport, tmp_path, monkeypatch, *args):
    monkeypatch.setenv("SYSTEM1_INSTALL_DIR", str(tmp_path / "state"))
    return main(["calibrate", *args], transport=transport)


def test_without_write_or_ship_nothing_is_written(tmp_path, labelled, shipped, monkeypatch, capsys):
    before = shipped.read_bytes()
    transport, _ = app_transport(tmp_path, '[gateway]\nprovider = "mock"\n')
    assert run(transport, tmp_path, monkeypatch, str(labelled), "--json") == EXIT_OK
    local = tmp_path / "state" / "calibration.json"
    report = json.loads(capsys.readouterr().out)
    assert report["overall"]["before"]["n"] == 16 and report["overall"]["before"]["accuracy"] == 0.75
    assert {f.get("question") or ("unseen" if f.get("unseen") else f.get("n_options")) for f in report["fits"]} == {QUESTION, "unseen"}
    assert not local.exists() and shipped.read_bytes() == before
    assert not (tmp_path / "repo" / "reports").exists()


def test_write_saves_local_fits_and_the_service_applies_them(tmp_path, labelled, shipped, monkeypatch, capsys):
    transport, _ = app_transport(tmp_path, '[gateway]\nprovider = "mock"\nmin_confidence = 0\n')
    request = {"question": QUESTION, "options": ["rerun", "block"]}
    assert call(transport, "POST", "/v1/decide", request).json()["calibrated"] is False
    assert run(transport, tmp_path, monkeypatch, str(labelled), "--write") == EXIT_OK
    answer = call(transport, "POST", "/v1/decide", request).json()
    local = json.loads((tmp_path / "state" / "calibration.json").read_text())
    assert answer["calibrated"] is True and answer["confidence"] == pytest.approx(0.75, abs=0.02)
    assert {f["provider"] for f in local["fits"]} == {"mock"}
    assert json.loads(shipped.read_text())["fits"] == []


def test_ship_writes_the_shipped_fits_and_the_report(tmp_path, labelled, shipped, monkeypatch, capsys):
    transport, _ = app_transport(tmp_path, '[gateway]\nprovider = "mock"\n')
    assert run(transport, tmp_path, monkeypatch, str(labelled), "--ship") == EXIT_OK
    local = tmp_path / "state" / "calibration.json"
    fits = json.loads(shipped.read_text())["fits"]
    assert [f.get("question") for f in fits] == [QUESTION, None] and not local.exists()
    report = (tmp_path / "repo" / "reports" / "mock-mock.md").read_text()
    assert report.startswith("# Calibration report: mock mock") and "held-out" in report
    assert "| threshold | held-out coverage | held-out accuracy | unseen coverage | unseen accuracy |" in report
    # The mock is sure of "rerun" on every row and right on 12 of 16: all answered at 0.6, 75 % right.
    row = next(line for line in report.splitlines() if line.startswith(f"| {QUESTION} |"))
    assert "| 100% / 75% |" in row and "unseen at 0.60: answered / right" in report


def test_saved_answers_fit_later_to_the_same_fits_without_asking_anything(tmp_path, labelled, shipped, monkeypatch, capsys):
    transport, _ = app_transport(tmp_path, '[gateway]\nprovider = "mock"\n')
    answers = tmp_path / "answers.jsonl"
    assert run(transport, tmp_path, monkeypatch, str(labelled), "--json", "--save-answers", str(answers)) == EXIT_OK
    asked = json.loads(capsys.readouterr().out)
    # No transport: a request would fail, so the second fit reads the file alone.
    assert run(None, tmp_path, monkeypatch, "--answers", str(answers), "--json", "--url", "http://127.0.0.1:9") == EXIT_OK
    refitted = json.loads(capsys.readouterr().out)
    assert refitted["fits"] == asked["fits"] and refitted["overall"] == asked["overall"]
    assert json.loads(answers.read_text().splitlines()[0]) == {"sources": [str(labelled)]}


def test_a_rows_task_is_kept_with_its_answer_for_the_fits_that_leave_tasks_out(tmp_path, shipped, monkeypatch):
    rows = write_rows(tmp_path / "worded.jsonl", [
        {"question": f"wording {i % 2}", "options": ["rerun", "block"], "label": "rerun", "meta": {"task": "flaky test"}}
        for i in range(6)])
    transport, _ = app_transport(tmp_path, '[gateway]\nprovider = "mock"\n')
    answers = tmp_path / "answers.jsonl"
    assert run(transport, tmp_path, monkeypatch, str(rows), "--save-answers", str(answers)) == EXIT_OK
    _, saved = calibrate.load_answers(answers)
    assert {r.task for r in saved} == {"flaky test"}


@pytest.mark.parametrize("line, message", [
    ('{"question": "q", "options": ["a", "b"], "label": "c", "probabilities": {"a": 1.0}, "provider": "p", "model": "m"}',
     "label 'c' is not among the options"),
    ('{"question": "q", "options": ["a", "b"], "label": "a", "probabilities": {"a": 2}, "provider": "p", "model": "m"}',
     "'probabilities' must map options to numbers in [0, 1]"),
    ('{"question": "q", "options": "a", "label": "a", "probabilities": {"a": 1}, "provider": "p", "model": "m"}',
     "'options' must be a list of strings"),
    ('{"question": "q", "options": ["a"], "label": "a", "probabilities": {"a": 1}, "model": "m"}', "'provider' must be a string"),
    ("[1]", "an answer must be a JSON object"),
])
def test_a_bad_saved_answer_is_a_clear_error_naming_its_line(tmp_path, capsys, monkeypatch, line, message):
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"sources": ["x.jsonl"]}\n' + line + "\n")
    assert run(None, tmp_path, monkeypatch, "--answers", str(answers)) == EXIT_START
    assert f"{answers}:2: {message}" in capsys.readouterr().err


def test_saved_answers_take_no_data_files_beside_them(tmp_path, labelled, capsys, monkeypatch):
    assert run(None, tmp_path, monkeypatch, "--answers", str(labelled), str(labelled)) == EXIT_START
    assert "give no data files" in capsys.readouterr().err


def test_merging_replaces_fits_for_the_same_key_and_keeps_the_rest(tmp_path):
    path = tmp_path / "fits.json"
    calibrate.merge(path, [{"provider": "a", "model": "m", "question": "q", "temperature": 2.0},
                                {"provider": "a", "model": "m", "n_options": 2, "temperature": 1.5}])
    calibrate.merge(path, [{"provider": "a", "model": "m", "question": "q", "temperature": 0.5}])
    fits = json.loads(path.read_text())["fits"]
    assert sorted((f.get("question") or "", f["temperature"]) for f in fits) == [("", 1.5), ("q", 0.5)]


def test_a_run_replaces_its_engines_option_count_and_unseen_fits_and_keeps_other_questions(tmp_path):
    path = tmp_path / "fits.json"
    calibrate.merge(path, [{"provider": "a", "model": "m", "question": "old", "temperature": 2.0},
                                {"provider": "a", "model": "m", "n_options": 2, "temperature": 1.5},
                                {"provider": "b", "model": "m", "n_options": 2, "temperature": 9.0}])
    calibrate.merge(path, [{"provider": "a", "model": "m", "unseen": True, "temperature": 0.7}])
    fits = json.loads(path.read_text())["fits"]
    assert sorted((f["provider"], f.get("question", ""), f.get("n_options", 0), f["unseen"]) for f in fits) == [
        ("a", "", 0, True), ("a", "old", 0, False), ("b", "", 2, False)]
    assert json.loads(path.read_text())["version"] == calibration.VERSION


def test_a_run_with_the_other_content_free_choice_replaces_every_fit_of_its_engine(tmp_path):
    path = tmp_path / "fits.json"
    calibrate.merge(path, [{"provider": "a", "model": "m", "question": "old", "temperature": 2.0},
                                {"provider": "b", "model": "m", "question": "old", "temperature": 9.0}])
    calibrate.merge(path, [{"provider": "a", "model": "m", "unseen": True, "temperature": 0.7,
                                 "content_free": True}])
    fits = json.loads(path.read_text())["fits"]
    assert sorted((f["provider"], f.get("question", ""), f["content_free"]) for f in fits) == [
        ("a", "", True), ("b", "old", False)]


def test_each_question_with_a_context_is_also_asked_once_about_its_content_free_version(tmp_path):
    transport, _ = app_transport(tmp_path, '[gateway]\nprovider = "mock"\n')
    rows = calibrate.load(write_rows(tmp_path / "d.jsonl", [
        {"question": "q", "context": {"command": c}, "label": "yes"} for c in ("ls", "rm -rf /", "cat x")
    ] + [{"question": "bare", "options": ["yes", "no"], "label": "no"}]))
    asked: list[dict] = []

    async def ask():
        from system1.client.service_client import ServiceClient

        async with ServiceClient("http://gateway", transport=transport) as service:
            real = service.decide

            async def recording(body, **kwargs):
                asked.append(body)
                return await real(body, **kwargs)

            service.decide = recording  # type: ignore[method-assign]
            return await calibrate.ask_all(service, rows, progress=False)

    answered, problems = anyio.run(ask)
    assert problems == [] and [a.baseline is not None for a in answered] == [True, True, True, False]
    assert [b.get("context") for b in asked] == [{"command": "ls"}, {"command": ""}, {"command": "rm -rf /"},
                                                 {"command": "cat x"}, None]


def test_the_shipped_seed_sets_load_and_ask_the_routing_features_exactly():
    from pathlib import Path

    from system1.hook.features import FEATURES

    root = Path(__file__).parents[3] / "calibration"
    routing = calibrate.load(root / "routing-seed.jsonl")
    assert len(routing) == 600 and {r.question for r in routing} == set(FEATURES.values())
    assert len(calibrate.load(root / "yes-no-seed.jsonl")) >= 24
    tools = calibrate.load(root / "tool-choice-seed.jsonl")
    assert all(row.label in row.options for row in tools)


def test_a_routing_log_is_a_pool_of_the_features_no_one_labelled(tmp_path):
    from system1.hook.features import FEATURES

    log = write_rows(tmp_path / "routing.jsonl", [
        {"id": "a", "source": "prompt", "prompt": "fix the flaky test", "features": {}},
        {"id": "b", "source": "agent", "prompt": "review the diff", "labels": {next(iter(FEATURES)): "yes"}},
        {"id": "c", "source": "skill", "prompt": "use the pdf skill", "skill": "pdf"},  # no features asked
        {"id": "d", "source": "prompt", "prompt": "  "},
    ])
    rows = calibrate.load(log, labelled=False)
    assert len(rows) == 2 * len(FEATURES) - 1
    assert {r.context["prompt"] for r in rows} == {"fix the flaky test", "review the diff"}
    assert all(r.label == "" and r.question in FEATURES.values() for r in rows)
    assert next(iter(FEATURES.values())) not in {r.question for r in rows if r.context["prompt"] == "review the diff"}
