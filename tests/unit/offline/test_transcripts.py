"""Outcome labels and usage reports from small synthetic Claude Code transcripts."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta, timezone

import pytest

from system1.cli import main
from system1.hook.log import write_outcomes
from system1.offline.spawn_outcomes import judge, summary
from system1.offline.transcripts import HINT, read_sessions
from system1.hook.answer import hint_text
from system1.offline.usage import DEFAULT_PRICES, load_prices, render, report

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
SECRET = "the confidential merger codename is BLUEHERON"


class Transcript:
    """Builds one session file line by line, in Claude Code's JSONL shape."""

    def __init__(self, root, project="proj", session="s1"):
        self.path = root / project / f"{session}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.lines = []
        self.clock = NOW - timedelta(days=1)

    def _add(self, line):
        self.clock += timedelta(minutes=1)
        self.lines.append({"timestamp": self.clock.isoformat().replace("+00:00", "Z"), "sessionId": "s1", **line})
        return self

    def prompt(self, text):
        return self._add({"type": "user", "message": {"role": "user", "content": text}})

    def hint(self, tier):
        context = hint_text(tier)
        return self._add({"type": "system", "subtype": "hook", "content": context})

    def spawn(self, tool_id, description, prompt="", subagent="general-purpose", model=None):
        data = {"description": description, "prompt": prompt or description, "subagent_type": subagent}
        if model:
            data["model"] = model
        return self._add({"type": "assistant", "message": {"role": "assistant", "model": "claude-opus-5-5",
                          "content": [{"type": "tool_use", "id": tool_id, "name": "Task", "input": data}]}})

    def result(self, tool_id, text="done", is_error=False, resolved="claude-sonnet-5-5", usage=None):
        block = {"type": "tool_result", "tool_use_id": tool_id, "content": [{"type": "text", "text": text}]}
        if is_error:
            block["is_error"] = True
        extra = {"resolvedModel": resolved, "usage": usage or {"input_tokens": 1_000_000, "output_tokens": 0}}
        return self._add({"type": "user", "message": {"role": "user", "content": [block]}, "toolUseResult": extra})

    def notification(self, tool_id, status):
        text = f"<task-notification><task-id>{tool_id}</task-id><status>{status}</status></task-notification>"
        return self._add({"type": "user", "message": {"role": "user", "content": text}})

    def write(self):
        self.path.write_text("".join(json.dumps(line) + "\n" for line in self.lines))
        return self


@pytest.fixture
def projects(tmp_path):
    t = Transcript(tmp_path)
    t.prompt(f"Please handle the refactor; {SECRET}").hint("sonnet")
    t.spawn("t1", "rename helpers").result("t1", resolved="claude-sonnet-5-5")                      # followed the hint
    t.spawn("t2", "run migrations").result("t2", "Error: permission denied", is_error=True)          # error
    t.spawn("t3", "index docs", model="haiku").result("t3", resolved=None).notification("t3", "stopped")  # stopped, tier from request
    t.prompt("Next: the W4-P3 item, implement the cache layer as planned")
    t.spawn("t4", "W4-P3 cache layer").result("t4", "I am blocked by missing credentials", resolved="claude-opus-5-5")
    t.spawn("t5", "W4-P3 cache layer, retry after the previous attempt").result("t5", resolved="claude-opus-5-5")
    t.spawn("t6", "write tests", subagent="tester").result("t6")
    t.spawn("t7", "write tests", subagent="tester").result("t7")                                     # same-role redo of t6
    t.write()
    old = Transcript(tmp_path, session="old")
    old.clock = NOW - timedelta(days=40)
    old.prompt("an old prompt about something else entirely").spawn("t0", "old").result("t0").write()
    return tmp_path


def verdicts_of(projects):
    sessions = read_sessions(projects, days=30, now=NOW)
    return {v.tool_use_id: v for s in sessions.values() for v in judge(s.spawns)}


def test_outcome_rules(projects):
    v = verdicts_of(projects)
    assert "t0" not in v  # older than --days
    assert (v["t1"].outcome, v["t1"].tier) == ("succeeded", "sonnet")
    assert (v["t2"].outcome, v["t2"].reason) == ("failed", "the tool result was an error")
    assert (v["t3"].outcome, v["t3"].reason, v["t3"].tier) == ("failed", "the task notification said stopped", "haiku")
    assert (v["t4"].outcome, v["t4"].doubtful) == ("failed", True) and "blocked" in v["t4"].reason
    assert v["t5"].outcome == "succeeded"
    assert (v["t6"].outcome, v["t6"].reason, v["t6"].doubtful) == ("failed", "the same role was spawned again for the same task", True)
    assert v["t7"].outcome == "succeeded"


def test_a_redo_by_task_id_fails_the_earlier_spawn(tmp_path):
    t = Transcript(tmp_path)
    t.prompt("go on with the sprint items as discussed earlier today please")
    t.spawn("a", "Task 12: build the exporter").result("a", "finished, all good")
    t.spawn("b", "Task 12: build the exporter again, retry").result("b")
    t.write()
    v = {x.tool_use_id: x for s in read_sessions(tmp_path, 30, NOW).values() for x in judge(s.spawns)}
    assert (v["a"].outcome, v["a"].reason, v["a"].doubtful) == ("failed", "a later spawn redid the same task", False)


def test_summary_counts_and_lists_doubtful_ones_by_id_only(projects):
    result = summary(list(verdicts_of(projects).values()))
    assert (result["spawns"], result["failed"], result["succeeded"]) == (7, 4, 3)
    assert {d["tool_use_id"] for d in result["doubtful"]} == {"t4", "t6"}


def test_apply_writes_outcomes_into_the_routing_log(projects, tmp_path):
    log = tmp_path / "routing.jsonl"
    log.write_text(json.dumps({"source": "agent", "tool_use_id": "t2", "prompt": "x"}) + "\n"
                   + json.dumps({"source": "agent", "tool_use_id": "t1", "outcome": "failed", "outcome_source": "manual"}) + "\n"
                   + json.dumps({"source": "prompt", "prompt": "y"}) + "\n")
    assert write_outcomes(log, list(verdicts_of(projects).values())) == 1
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert entries[0] == {"source": "agent", "tool_use_id": "t2", "prompt": "x", "outcome": "failed",
                               "outcome_reason": "the tool result was an error", "outcome_tier": "sonnet", "outcome_source": "auto"}
    assert entries[1]["outcome_source"] == "manual" and "outcome" not in entries[2]


@pytest.mark.parametrize("tier", ["haiku", "sonnet", "opus"])
def test_hints_are_read_in_the_current_and_the_previous_wording(tier):
    previous = (f"System-1 routing hint: the task reads like a {tier} task; use model \"{tier}\" "
                "for subagents you spawn for it, unless you know better.")
    assert [HINT.search(text).group(1) for text in (hint_text(tier), previous)] == [tier, tier]


def test_report_aggregates(projects):
    result = report(read_sessions(projects, 30, NOW), load_prices(DEFAULT_PRICES))
    assert (result["prompts"], result["hinted_prompts"], result["reach"]) == (2, 1, 0.5)
    assert result["spawns_after_hint"] == 3 and result["adherence"] == pytest.approx(2 / 3)
    assert result["spawns_by_tier"] == {"sonnet": 4, "haiku": 1, "opus": 2}
    assert result["cost_by_tier_usd"] == {"sonnet": 12.0, "haiku": 1.0, "opus": 10.0}
    assert result["hint_overhead_usd"] == pytest.approx(45 * 5.0 / 1e6, abs=1e-4)


def test_the_report_sums_up_agent_spawns_hints_failures_and_types(projects):
    agent = report(read_sessions(projects, 30, NOW), load_prices(DEFAULT_PRICES))["agent_spawns"]
    assert (agent["spawns"], agent["model_named"]) == (7, 1)  # only t3 asked for a model
    assert agent["after_hint"] == {"followed": 2, "upgraded": 0, "below_hint": 1}  # t3 ran haiku under a sonnet hint
    assert agent["by_tier"] == {"sonnet": 4, "haiku": 1, "opus": 2}
    assert agent["failed_by_tier"] == {"sonnet": 2, "haiku": 1, "opus": 1}  # t2, t6 (redone); t3; t4 (blocked)
    assert agent["by_subagent_type"] == {"general-purpose": 5, "tester": 2}
    text = render(report(read_sessions(projects, 30, NOW), load_prices(DEFAULT_PRICES)), 30)
    assert "Agent spawns: 7 (1 named a model); after a hint 2 followed it, 0 ran above it, 1 below it" in text
    assert "failed, by tier: haiku 1 of 1, sonnet 2 of 4, opus 1 of 2; subagent types: general-purpose 5, tester 2" in text


def test_the_commands_print_aggregates_and_never_prompt_text(projects, tmp_path, capsys):
    assert main(["outcomes", "--projects-dir", str(projects), "--days", "3650"]) == 0
    assert main(["report", "--projects-dir", str(projects), "--days", "3650"]) == 0
    assert main(["report", "--projects-dir", str(projects), "--json"]) == 0
    out = capsys.readouterr().out
    assert "spawns" in out and "hint reach" in out
    assert SECRET not in out and "BLUEHERON" not in out and "cache layer" not in out


def test_a_prices_file_without_a_tier_is_an_error(tmp_path, capsys):
    prices = tmp_path / "prices.json"
    prices.write_text('{"tiers": {"haiku": {"input": 1}}}')
    assert main(["report", "--projects-dir", str(tmp_path), "--prices", str(prices)]) != 0
    assert "no prices for sonnet, opus" in capsys.readouterr().err


def test_outcomes_applied_through_the_service_reach_evaluate_wherever_it_runs(projects, tmp_path, monkeypatch, capsys):
    from ..service_harness import app_transport, call

    transport, service = app_transport(tmp_path, '[gateway]\nprovider = "mock"\n')
    log = service.hook.log.path
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(json.dumps({"source": "agent", "tool_use_id": "t2", "prompt": "x"}) + "\n")
    monkeypatch.setenv("SYSTEM1_INSTALL_DIR", str(tmp_path / "host"))
    assert main(["outcomes", "--projects-dir", str(projects), "--days", "3650", "--apply"], transport=transport) == 0
    assert "labelled 1 routing log entries" in capsys.readouterr().out
    assert json.loads(log.read_text())["outcome"] == "failed"
    # ... and `evaluate`, run beside it or anywhere else, reads that label from the service.
    main(["evaluate", "--json"], transport=transport)
    assert json.loads(capsys.readouterr().out)["failures"] == 1
    bad = call(transport, "POST", "/v1/outcomes", {"verdicts": [{"tool_use_id": "t2", "outcome": "maybe"}]})
    assert bad.status_code == 400 and "verdicts.0.outcome" in bad.json()["error"]["message"]


def test_the_services_routing_entries_skip_and_count_lines_that_are_not_json(tmp_path, monkeypatch, capsys):
    from ..service_harness import app_transport, call

    transport, service = app_transport(tmp_path, '[gateway]\nprovider = "mock"\n')
    assert call(transport, "GET", "/v1/routing/entries").json() == {"entries": [], "unreadable_lines": 0}  # no log yet
    log = service.hook.log.path
    log.parent.mkdir(parents=True, exist_ok=True)
    labelled = {"prompt": "Design the cache", "labels": {"design": "yes"}}
    log.write_text(json.dumps(labelled) + "\n{not json\n" + json.dumps({"prompt": "no labels yet"}) + "\n")
    assert call(transport, "GET", "/v1/routing/entries").json() == {"entries": [labelled], "unreadable_lines": 1}
    monkeypatch.setenv("SYSTEM1_INSTALL_DIR", str(tmp_path / "host"))
    main(["evaluate", "--json"], transport=transport)
    assert "skipped 1 routing log lines that are not JSON" in capsys.readouterr().err


def test_teacher_labels_go_through_the_service_and_reach_evaluate_calibrate_and_learn_rows(tmp_path, monkeypatch, capsys):
    from system1.hook.features import FEATURES

    from ..service_harness import app_transport, call

    toml = '[gateway]\nprovider = "mock"\n[routing]\nenabled = true\nlog_dirs = ["/work/proj"]\n[learning]\nenabled = false\n'
    transport, service = app_transport(tmp_path, toml)
    prompt = "Design the storage layer for the audit trail and compare the two options from last week"
    call(transport, "POST", "/v1/route", {"hook_event_name": "UserPromptSubmit", "prompt": prompt, "cwd": "/work/proj"})
    monkeypatch.setenv("SYSTEM1_INSTALL_DIR", str(tmp_path / "host"))
    assert main(["prompts"], transport=transport) == 0
    [waiting] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert waiting["prompt"] == prompt and set(waiting["features"]) == set(FEATURES)
    labels = {"read_only": "no", "design": "yes", "review": "no", "specified": "no"}
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps({"id": waiting["id"], "labels": labels}) + "\n"))
    assert main(["prompts", "--label", "-"], transport=transport) == 0
    assert "labelled 1 logged prompts" in capsys.readouterr().out
    assert call(transport, "GET", "/v1/routing/waiting").json() == []  # nothing left to label
    main(["evaluate", "--json"], transport=transport)
    assert {name: f["n"] for name, f in json.loads(capsys.readouterr().out)["features"].items()} == dict.fromkeys(FEATURES, 1)
    assert main(["calibrate", "--from-routing-log", "--json"], transport=transport) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["overall"]["before"]["n"] == 4 and set(report["questions"]) == set(FEATURES.values())


@pytest.mark.parametrize(("body", "message"), [
    ({"labels": "yes"}, "labels: must be a list"),
    ({"labels": [{"id": "", "labels": {"design": "yes"}}]}, "labels.0.id: must be a non-empty string"),
    ({"labels": [{"id": "a", "labels": {"colour": "yes"}}]}, "labels.0.labels.colour: not a routing feature"),
    ({"labels": [{"id": "a", "labels": {"design": "maybe"}}]}, "labels.0.labels.design: must be 'yes' or 'no'"),
    ({"labels": [{"id": "a", "labels": {"design": "yes"}, "extra": 1}]}, "labels.0: must be an object with 'id' and 'labels'"),
])
def test_bad_teacher_labels_are_refused_naming_the_field(tmp_path, body, message):
    from ..service_harness import app_transport, call

    transport, _ = app_transport(tmp_path, '[gateway]\nprovider = "mock"\n')
    response = call(transport, "POST", "/v1/routing/labels", body)
    assert response.status_code == 400 and message in response.json()["error"]["message"]
