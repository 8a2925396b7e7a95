"""Model routing: the rule, silence, the log's opt-in, the hint threshold, the skill picker,
and the host-side hook against a running and a stopped gateway."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from system1.hook.answer import silence_reason
from system1.hook.log import logged_dir
from system1.hook.rule import tier

from ..helpers import closed_port_url
from ..service_harness import in_process, running_service

HOOK = Path(__file__).parents[3] / "plugin" / "hooks" / "system1_hook.py"
LONG = "Please design the storage layer for the new audit trail and compare the two options we discussed"


@pytest.mark.parametrize(
    ("features", "expected"),
    [
        ({}, "sonnet"),
        ({"read_only": True}, "haiku"),
        ({"design": True}, "opus"),
        ({"review": True}, "opus"),
        ({"read_only": True, "design": True}, "opus"),
        ({"read_only": True, "review": True}, "opus"),
        ({"specified": True}, "sonnet"),
        ({"read_only": True, "specified": True}, "haiku"),
    ],
)
def test_the_rule_table(features, expected):
    assert tier(features) == expected


@pytest.mark.parametrize(
    ("prompt", "reason"),
    [
        ("/system1:toggle off", "slash command"),
        ("Plan is ok, implement it", "under 10 words"),
        ("<task-notification>status: completed, the agent found three callers of parse_config</task-notification>", "subagent hand-back"),
        ("<agent-message>I renamed the helper and updated all nine call sites in the package</agent-message>", "subagent hand-back"),
        (LONG, None),
    ],
)
def test_silence_conditions(prompt, reason):
    assert silence_reason(prompt) == reason


@pytest.mark.parametrize(
    ("cwd", "expected"),
    [
        ("/home/ana/src/app", True),
        ("/home/ana/src/app/services/api", True),
        ("/home/ana/src/app-2", False),
        ("/home/ana/src/ap", False),
        ("/home/ana/src", False),
        ("/work/other", False),
        ("", False),
    ],
)
def test_the_log_is_opt_in_by_directory(cwd, expected):
    assert logged_dir(cwd, ["~/src/app"], "ana") is expected


def test_a_tilde_entry_is_the_calling_clients_home_never_one_the_request_names():
    assert logged_dir("/home/ana/src/app", ["~/src/app"], "bob") is False
    assert logged_dir("/root/src/app", ["~/src/app"], "root") is True
    assert logged_dir("/srv/app", ["/srv/app"], "anyone") is True


def config(tmp_path, enabled=True, hint=True, threshold="", skills="", mock=""):
    return (f'[gateway]\nprovider = "mock"\n[routing]\nenabled = {str(enabled).lower()}\nhint = {str(hint).lower()}\n'
            f'log_dirs = ["{tmp_path}/repo"]\n{threshold}\n{skills}\n[providers.mock]\n{mock}\n')


async def post(svc, **event):
    return (await svc.http.post("/v1/route", json={"hook_event_name": "UserPromptSubmit", **event})).json()


@pytest.mark.anyio
async def test_a_confident_engine_gives_the_hint_and_the_log_records_it(tmp_path):
    async with in_process(tmp_path, config(tmp_path)) as svc:
        answer = await post(svc, prompt=LONG, cwd=f"{tmp_path}/repo/sub", session_id="s1")
        outside = await post(svc, prompt=LONG, cwd=f"{tmp_path}/repo-other")
        log = svc.service.config.routing_log
    # The mock answers "yes" to every feature: design → opus.
    assert answer["tier"] == "opus" and "opus" in answer["context"] and answer["silent"] is None
    assert outside["context"] == answer["context"]
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(entries) == 1 and entries[0]["source"] == "prompt" and entries[0]["rule_tier"] == "opus"
    assert set(entries[0]["features"]) == {"read_only", "design", "review", "specified"} and entries[0]["hinted"] is True


@pytest.mark.anyio
async def test_no_hint_unless_every_feature_clears_the_threshold(tmp_path):
    async with in_process(tmp_path, config(tmp_path, threshold="min_confidence = 0.95")) as svc:
        answer = await post(svc, prompt=LONG, cwd="/elsewhere")
    assert answer["context"] is None and "not sure enough" in answer["silent"] and answer["tier"] == "opus"


@pytest.mark.anyio
async def test_record_only_when_hint_is_false_and_silent_when_disabled_or_paused(tmp_path):
    async with in_process(tmp_path, config(tmp_path, hint=False)) as svc:
        record_only = await post(svc, prompt=LONG, cwd=f"{tmp_path}/repo")
        svc.service.gateway.pause_file.parent.mkdir(parents=True, exist_ok=True)
        svc.service.gateway.pause_file.write_text("now")
        paused = await post(svc, prompt=LONG)
        assert len(svc.service.config.routing_log.read_text().splitlines()) == 1
        svc.service.gateway.pause_file.unlink()
    assert record_only["context"] is None and record_only["silent"] == "record only (hint = false)"
    assert paused["silent"] == "paused"
    async with in_process(tmp_path, config(tmp_path, enabled=False)) as svc:
        assert (await post(svc, prompt=LONG))["silent"] == "routing and the skill picker are off"


@pytest.mark.anyio
async def test_an_engine_failure_is_silent(tmp_path):
    async with in_process(tmp_path, config(tmp_path, mock='fail = "down"')) as svc:
        answer = await post(svc, prompt=LONG)
    assert answer["context"] is None and "failed" in answer["silent"]


@pytest.mark.anyio
async def test_agent_spawns_are_recorded_next_to_the_chosen_model(tmp_path):
    async with in_process(tmp_path, config(tmp_path)) as svc:
        answer = (await svc.http.post("/v1/route", json={
            "hook_event_name": "PreToolUse", "tool_name": "Agent", "tool_use_id": "toolu_1", "cwd": f"{tmp_path}/repo",
            "tool_input": {"prompt": "Review the migration script for data loss", "subagent_type": "reviewer", "model": "sonnet"}})).json()
        entry = json.loads(svc.service.config.routing_log.read_text())
    assert answer["context"] is None
    assert (entry["source"], entry["chosen"], entry["subagent_type"], entry["tool_use_id"]) == ("agent", "sonnet", "reviewer", "toolu_1")


SKILLS = [{"name": "pdf", "description": "fill and read PDF forms"}, {"name": "xlsx", "description": "edit spreadsheets"},
          {"name": "deploy", "description": "release to production", "disable-model-invocation": True}]


@pytest.mark.anyio
async def test_the_skill_picker_hints_when_sure_and_is_dormant_when_the_list_is_too_long(tmp_path):
    skills = "[skills]\nenabled = true\nhint = true\n"
    async with in_process(tmp_path, config(tmp_path, enabled=False, skills=skills)) as svc:
        picked = await post(svc, prompt=LONG, skills=SKILLS)
    assert picked["skill"]["name"] == "pdf" and "`pdf` skill" in picked["context"]
    async with in_process(tmp_path, config(tmp_path, enabled=False, skills=skills, mock="max_options = 2")) as svc:
        many = [{"name": f"s{i}", "description": f"skill {i}"} for i in range(3)]
        dormant = await post(svc, prompt=LONG, skills=many)
    assert dormant["context"] is None and dormant["skill"]["silent"].startswith("dormant: 3 skills")


def run_hook(url: str, event: dict, tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "SYSTEM1_GATEWAY_URL": url, "HOME": str(tmp_path), "SYSTEM1_CLIENT": "hook-test"}
    return subprocess.run([sys.executable, str(HOOK)], input=json.dumps(event), capture_output=True, text=True, env=env, timeout=30)


def test_the_host_hook_prints_the_hint_from_a_running_gateway(tmp_path):
    skill_dir = tmp_path / ".claude" / "skills" / "pdf"
    skill_dir.mkdir(parents=True)
    (skill_dir / "SKILL.md").write_text("---\nname: pdf\ndescription: fill PDF forms\n---\nbody\n")
    with running_service(tmp_path, config(tmp_path)) as svc:
        done = run_hook(svc.url, {"hook_event_name": "UserPromptSubmit", "prompt": LONG, "cwd": str(tmp_path)}, tmp_path)
        quiet = run_hook(svc.url, {"hook_event_name": "UserPromptSubmit", "prompt": "/clear", "cwd": str(tmp_path)}, tmp_path)
    printed = json.loads(done.stdout)
    assert done.returncode == 0 and printed["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert "opus" in printed["hookSpecificOutput"]["additionalContext"]
    assert quiet.returncode == 0 and quiet.stdout == ""


def test_the_host_hook_is_silent_when_the_gateway_is_down(tmp_path):
    done = run_hook(closed_port_url(), {"hook_event_name": "UserPromptSubmit", "prompt": LONG}, tmp_path)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""
    garbage = subprocess.run([sys.executable, str(HOOK)], input="not json", capture_output=True, text=True, timeout=30)
    assert garbage.returncode == 0 and garbage.stdout == ""
