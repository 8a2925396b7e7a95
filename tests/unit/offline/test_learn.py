"""`system1 learn` against the service: rows asked live, heads gated, written, reloaded and used."""

from __future__ import annotations

import json

import pytest

from system1.cli import EXIT_DECISION, EXIT_OK, EXIT_START, main
from system1.client import headers
from system1.core.heads import kind_of
from system1.providers.mock import MockProvider

from ..service_harness import app_transport, call

QUESTION = "Is this tool call destructive or hard to reverse?"
CONFIG = '[gateway]\nprovider = "mock"\nmin_confidence = 0.6\n[learning]\nembedder = "mock"\n'
COMMANDS = {"yes": ["rm -rf build", "git push --force", "dropdb prod", "rm -r ~/old", "git reset --hard"],
            "no": ["ls -la", "git status", "cat README.md", "pwd", "git log"]}


@pytest.fixture(autouse=True)
def embedding_mock(monkeypatch):
    """The mock engine (always its first option) with an embedding that knows destructive words."""
    async def embed(self, state, query, timeout_s, model=None):
        text = json.dumps(state)
        return model or "mock-embedder", [1.0 if any(w in text for w in ("rm", "force", "drop", "reset")) else -1.0, 0.5]

    monkeypatch.setattr(MockProvider, "embed", embed, raising=False)


@pytest.fixture
def labelled(tmp_path):
    rows = [{"question": QUESTION, "context": {"command": f"{command} #{i}"}, "label": label}
            for i in range(2) for label, commands in COMMANDS.items() for command in commands]
    path = tmp_path / "destructive.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def learn(transport, tmp_path, monkeypatch, *args):
    monkeypatch.setenv("SYSTEM1_INSTALL_DIR", str(tmp_path / "state"))
    return main(["learn", *args], transport=transport)


def test_the_gateway_embeds_a_decide_request_and_names_its_kind(tmp_path):
    transport, _ = app_transport(tmp_path, CONFIG)
    reply = call(transport, "POST", "/v1/embed", {"question": QUESTION, "context": {"command": "rm -rf /"}}).json()
    assert reply == {"embedder": "mock", "model": "mock-embedder", "embedding": [1.0, 0.5],
                     "kind": kind_of(QUESTION, ["yes", "no"], yes_no=True)}
    bad = call(transport, "POST", "/v1/embed", {"question": ""})
    assert bad.status_code == 400 and "question" in bad.json()["error"]["message"]


def test_an_embedder_that_fails_is_a_provider_error_envelope_naming_it(tmp_path, monkeypatch):
    monkeypatch.delattr(MockProvider, "embed")
    transport, _ = app_transport(tmp_path, CONFIG)
    reply = call(transport, "POST", "/v1/embed", {"question": QUESTION})
    error = reply.json()["error"]
    assert reply.status_code == 200 and error["code"] == "provider_error" and "mock has no embeddings" in error["message"]


@pytest.mark.needs_sklearn
def test_learn_write_saves_a_head_that_beats_the_engine_and_the_service_then_decides_with_it(
        tmp_path, labelled, monkeypatch, capsys):
    transport, _ = app_transport(tmp_path, CONFIG)
    unseen = {"question": QUESTION, "context": {"command": "git clean -fdx && rm -rf ."}}
    before = call(transport, "POST", "/v1/decide", unseen).json()
    assert before["decision"] == "yes" and "learned head" not in before["rationale"]
    assert learn(transport, tmp_path, monkeypatch, str(labelled), "--folds", "4", "--write") == EXIT_OK
    report = capsys.readouterr().out
    assert "| yes |" in report and "engine accuracy" in report
    [head] = json.loads((tmp_path / "state" / "heads.json").read_text())["heads"]
    assert head["model"] == "mock-embedder" and head["n"] == 20 and head["accuracy"] > head["engine_accuracy"]
    safe = call(transport, "POST", "/v1/decide", {"question": QUESTION, "context": {"command": "ls -la /tmp"}}).json()
    assert safe["decision"] == "no" and "learned head" in safe["rationale"] and safe["calibrated"] is True


@pytest.mark.needs_sklearn
def test_a_kind_tied_to_another_embedding_model_is_fitted_on_its_vectors_and_reported_apart(
        tmp_path, labelled, monkeypatch, capsys):
    kind = kind_of(QUESTION, ["yes", "no"], yes_no=True)
    transport, _ = app_transport(tmp_path, CONFIG + f'[learning.models]\n"{kind}" = "mock-e5"\n')
    report = tmp_path / "heads.md"
    assert learn(transport, tmp_path, monkeypatch, str(labelled), "--folds", "4", "--write", "--report", str(report)) \
        == EXIT_OK
    [head] = json.loads((tmp_path / "state" / "heads.json").read_text())["heads"]
    assert head["model"] == "mock-e5"
    assert "# Learned heads: embedder mock mock-e5" in report.read_text()
    safe = call(transport, "POST", "/v1/decide", {"question": QUESTION, "context": {"command": "ls -la /tmp"}}).json()
    assert safe["decision"] == "no" and "learned head" in safe["rationale"]


@pytest.mark.needs_sklearn
def test_kind_fits_only_the_rows_of_the_kinds_it_names(tmp_path, labelled, monkeypatch, capsys):
    transport, _ = app_transport(tmp_path, CONFIG)
    assert learn(transport, tmp_path, monkeypatch, str(labelled), "--kind", "router-private") == EXIT_DECISION
    assert "no labelled rows of kind router-private" in capsys.readouterr().err
    kind = kind_of(QUESTION, ["yes", "no"], yes_no=True)
    assert learn(transport, tmp_path, monkeypatch, str(labelled), "--folds", "4", "--kind", kind) == EXIT_OK
    assert f"rows of kind {kind} only" in capsys.readouterr().out



@pytest.mark.needs_sklearn
def test_ship_with_kind_rewrites_its_rows_of_the_report_and_keeps_the_other_kinds(tmp_path, labelled, monkeypatch, capsys):
    from system1.offline import calibrate

    reports, heads = tmp_path / "repo" / "reports", tmp_path / "repo" / "heads.json"
    monkeypatch.setattr(calibrate, "REPORTS", reports)
    monkeypatch.setattr("system1.core.heads.SHIPPED_HEADS", heads)
    kind = kind_of(QUESTION, ["yes", "no"], yes_no=True)
    reports.mkdir(parents=True)
    report = reports / "heads-mock-mock-embedder.md"
    earlier_plot = report.with_suffix(".png")
    earlier_plot.write_bytes(b"the earlier plot")
    report.write_text("# Learned heads\n\n| kind | rows | options | engine accuracy |\n|---|---|---|---|\n"
                      f"| {kind} | 2 | 2 | 1% |\n| router-topic | 99 | 10 | 41% |\n\nearlier notes\n")
    transport, _ = app_transport(tmp_path, CONFIG)
    assert learn(transport, tmp_path, monkeypatch, str(labelled), "--folds", "4", "--kind", kind, "--ship") == EXIT_OK
    rows = [line for line in report.read_text().splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [row.split(" | ")[0][2:] for row in rows] == [kind, "router-topic"]
    assert rows[0].split(" | ")[1] == "20" and rows[1] == "| router-topic | 99 | 10 | 41% |"
    assert "did not redo (1) are the earlier report's" in report.read_text()
    assert earlier_plot.read_bytes() == b"the earlier plot" and "plot stays the earlier fit's" in capsys.readouterr().err
    assert [h["kind"] for h in json.loads(heads.read_text())["heads"]] == [kind]

@pytest.mark.needs_sklearn
def test_without_write_nothing_is_written_and_a_losing_head_is_reported_off(tmp_path, monkeypatch, capsys):
    async def useless(self, state, query, timeout_s, model=None):
        return "mock-embedder", [0.0, 0.0]

    monkeypatch.setattr(MockProvider, "embed", useless, raising=False)
    rows = [{"question": "Ship it?", "context": {"n": str(i)}, "label": "yes" if i % 5 else "no"} for i in range(40)]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    transport, _ = app_transport(tmp_path, CONFIG)
    assert learn(transport, tmp_path, monkeypatch, str(path), "--json") == EXIT_OK
    [result] = json.loads(capsys.readouterr().out)
    assert result["enabled"] is False and "does not beat the engine" in result["why_not"]
    assert not (tmp_path / "state" / "heads.json").exists()


@pytest.mark.needs_sklearn
def test_a_bad_kind_in_the_data_stops_learn_naming_the_line(tmp_path, capsys):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"question": "q", "label": "yes", "kind": "has space"}) + "\n")
    assert main(["learn", str(path)]) == EXIT_START
    assert f"{path}:1: 'kind' must be" in capsys.readouterr().err


def test_the_report_keeps_an_option_set_kind_inside_its_table_cell():
    from system1.offline.learn import render
    from system1.offline.learning import Example, KindResult

    engine = {"accuracy": 0.5, "ece": 0.2, "at_threshold": {"threshold": 0.6, "coverage": 0.5, "accuracy": 0.5, "ece": 0.1}}
    kind = "options:" + "|".join(f"option number {i}" for i in range(12))
    result = KindResult(kind, tuple(f"option number {i}" for i in range(12)), 40, engine, why_not="too few rows")
    first = Example(kind, result.options, "option number 0", [0.0], {}, "systemone", "minilm")
    row = next(line for line in render([result], first, ["d.jsonl"], [], 0.6, 5).splitlines() if "option number" in line)
    assert row.replace("\\|", "").count("|") == 10 and len(row) < 300


COLLECTING = CONFIG + 'collect_kinds = ["destructive"]\nstore_max_decisions = 100\n'


@pytest.mark.needs_sklearn
def test_feedback_labels_a_remembered_decision_and_learn_reads_it_from_the_store(tmp_path, monkeypatch, capsys):
    transport, _ = app_transport(tmp_path, COLLECTING)
    ids = {}
    for label, commands in COMMANDS.items():
        for i, command in enumerate(commands * 2):
            request = {"question": QUESTION, "kind": "destructive", "context": {"command": f"{command} {i}"}}
            ids[call(transport, "POST", "/v1/decide", request).json()["request_id"]] = label
    private = call(transport, "POST", "/v1/decide", {"question": QUESTION, "context": {"command": "secret"}}).json()
    for request_id, label in ids.items():
        monkeypatch.setenv("SYSTEM1_INSTALL_DIR", str(tmp_path / "state"))
        assert main(["feedback", request_id, label], transport=transport) == EXIT_OK
    assert "labelled" in capsys.readouterr().out
    unknown = call(transport, "POST", "/v1/feedback", {"request_id": private["request_id"], "label": "no"})
    assert unknown.status_code == 400 and "not collected, or forgotten" in unknown.json()["error"]["message"]
    wrong = call(transport, "POST", "/v1/feedback", {"request_id": next(iter(ids)), "label": "maybe"})
    assert wrong.status_code == 400 and "not among the decision's options" in wrong.json()["error"]["message"]
    rows = call(transport, "GET", "/v1/labels").json()
    assert len(rows) == 20 and rows[0]["kind"] == "destructive" and "secret" not in json.dumps(rows)
    assert learn(transport, tmp_path, monkeypatch, "--from-store", "--folds", "4", "--write") == EXIT_OK
    [head] = json.loads((tmp_path / "state" / "heads.json").read_text())["heads"]
    assert head["kind"] == "destructive" and head["n"] == 20


def test_feedback_without_collection_is_a_409_saying_how_to_turn_it_on(tmp_path):
    transport, _ = app_transport(tmp_path, CONFIG)
    reply = call(transport, "POST", "/v1/feedback", {"request_id": "x", "label": "yes"})
    assert reply.status_code == 409 and "collect" in reply.json()["error"]["message"]
    assert call(transport, "GET", "/v1/labels").json() == []


def test_the_label_store_keeps_only_the_newest_decisions(tmp_path):
    from system1.core.labels import LabelStore, UnknownDecision

    store = LabelStore(tmp_path / "labels.sqlite3", max_decisions=3)
    for i in range(5):
        store.remember(f"r{i}", None, "q?", None, {"n": i}, "yes")
    with pytest.raises(UnknownDecision):
        store.label("r0", "yes", "test")
    assert store.label("r4", "no", "test") == {"request_id": "r4", "label": "no"}
    assert store.labelled() == [{"question": "q?", "label": "no", "context": {"n": 4}}]


@pytest.mark.needs_sklearn
def test_a_teacher_labels_the_pool_with_its_sure_answers_and_the_report_says_how_it_agrees_with_people(
        tmp_path, labelled, monkeypatch, capsys):
    pool = tmp_path / "pool.jsonl"
    pool.write_text("".join(json.dumps({"question": QUESTION, "context": {"command": f"make target{i}"}}) + "\n"
                            for i in range(6)))
    transport, _ = app_transport(tmp_path, CONFIG)
    assert learn(transport, tmp_path, monkeypatch, str(labelled), "--teacher", "mock", "--pool", str(pool),
                 "--folds", "4", "--repeats", "1", "--write") == EXIT_OK
    report = capsys.readouterr().out
    # The mock teacher says "yes" at 0.9 to everything: every pool row is labelled, and it
    # agrees with the 10 human "yes" labels of 20.
    assert "## Teacher labels from mock" in report and "6 pool rows asked at 0.60: 6 labelled, 0 left unlabelled" in report
    assert "| 20 | 6 | 10/20 (50%) |" in report
    [head] = json.loads((tmp_path / "state" / "heads.json").read_text())["heads"]
    assert head["n"] == 26


def test_a_teacher_needs_a_pool_and_a_pool_row_may_not_carry_a_label(tmp_path, labelled, capsys):
    assert main(["learn", str(labelled), "--teacher", "mock"]) == EXIT_START
    assert "--teacher and --pool (or --pool-from-store) go together" in capsys.readouterr().err
    pool = tmp_path / "pool.jsonl"
    pool.write_text(json.dumps({"question": QUESTION, "label": "yes"}) + "\n")
    assert main(["learn", str(labelled), "--teacher", "mock", "--pool", str(pool)]) == EXIT_START
    assert f"{pool}:1: a pool row is unlabelled" in capsys.readouterr().err


def test_a_decision_asked_of_one_provider_by_header_skips_the_chain_and_an_unknown_one_is_refused(tmp_path):
    transport, _ = app_transport(tmp_path, '[gateway]\nprovider = "systemone"\n[providers.mock]\n')
    request = {"question": "Ship it?", "options": ["yes", "later"]}
    named = call(transport, "POST", "/v1/decide", request, {headers.PROVIDER: "mock"}).json()
    assert named["provider"] == "mock" and [a["provider"] for a in named["attempts"]] == ["mock"]
    unknown = call(transport, "POST", "/v1/decide", request, {headers.PROVIDER: "nobody"})
    assert unknown.status_code == 400 and "'nobody' cannot be asked" in unknown.json()["error"]["message"]


@pytest.mark.needs_sklearn
def test_the_decisions_no_one_labelled_are_a_pool_the_teacher_labels(tmp_path, labelled, monkeypatch, capsys):
    transport, _ = app_transport(tmp_path, COLLECTING)
    for i in range(4):
        call(transport, "POST", "/v1/decide", {"question": QUESTION, "kind": "destructive", "context": {"command": f"x{i}"}})
    pool = call(transport, "GET", "/v1/labels?unlabelled=true").json()
    assert len(pool) == 4 and all("label" not in row for row in pool) and call(transport, "GET", "/v1/labels").json() == []
    assert learn(transport, tmp_path, monkeypatch, str(labelled), "--teacher", "mock", "--pool-from-store",
                 "--folds", "4", "--repeats", "1") == EXIT_OK
    report = capsys.readouterr().out
    assert "4 pool rows asked at 0.60: 4 labelled" in report and "the label store's unlabelled decisions" in report
