"""The plugin's SessionStart hook, run as Claude Code runs it (stdin JSON in, stdout out) against
a real gateway: silent unless something needs the user, then one line saying what and the fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..helpers import closed_port_url
from ..service_harness import running_service

HOOK = Path(__file__).parents[3] / "plugin" / "hooks" / "system1_hook.py"
EVENT = {"hook_event_name": "SessionStart", "source": "startup", "session_id": "s1"}
MOCK = '[gateway]\nprovider = "mock"\n'


def session_start(url: str, tmp_path: Path, **env: str) -> str | None:
    """The hook's `systemMessage`, or None when it printed nothing (it must never fail)."""
    done = subprocess.run([sys.executable, "-S", str(HOOK)], input=json.dumps(EVENT), capture_output=True, text=True,
                          timeout=30, env={**os.environ, "SYSTEM1_GATEWAY_URL": url, "HOME": str(tmp_path), **env})
    assert done.returncode == 0 and done.stderr == ""
    return json.loads(done.stdout)["systemMessage"] if done.stdout else None


def test_a_healthy_gateway_starts_the_session_silently(tmp_path):
    with running_service(tmp_path, MOCK) as svc:
        assert session_start(svc.url, tmp_path) is None


def test_an_unreachable_gateway_points_to_starting_the_stack_or_setup(tmp_path):
    note = session_start(closed_port_url(), tmp_path)
    assert "not reachable" in note and "make up" in note and "/system1:setup" in note


def test_a_broken_config_is_named_with_the_fix(tmp_path):
    with running_service(tmp_path, MOCK + "[gateway.extra]\n") as svc:
        note = session_start(svc.url, tmp_path)
    assert note.startswith("System-1's config is broken (") and "system1 reload" in note


def test_an_engine_that_does_not_answer_is_named(tmp_path):
    toml = f'[gateway]\nprovider = "systemone"\n[providers.systemone]\nendpoint = "{closed_port_url()}"\n'
    with running_service(tmp_path, toml) as svc:
        note = session_start(svc.url, tmp_path)
    assert note.startswith("System-1's engine systemone is not answering") and "make up" in note


def test_a_paused_gateway_says_how_to_resume(tmp_path):
    with running_service(tmp_path, MOCK) as svc:
        (svc.state_dir / "paused").write_text("")
        note = session_start(svc.url, tmp_path)
    assert "paused" in note and "toggle on" in note


def test_a_key_is_asked_for_when_the_gateway_requires_one(tmp_path):
    with running_service(tmp_path, MOCK, SYSTEM1_API_KEYS="alice:alice-key-0123456789abc") as svc:
        refused = session_start(svc.url, tmp_path)
        allowed = session_start(svc.url, tmp_path, SYSTEM1_API_KEY="alice-key-0123456789abc")
    assert "SYSTEM1_API_KEY" in refused and allowed is None


@pytest.mark.parametrize(("waiting", "nudged"), [(29, False), (30, True)])
def test_calibrate_is_suggested_once_thirty_logged_prompts_wait_for_labels(tmp_path, waiting, nudged):
    with running_service(tmp_path, MOCK) as svc:
        log = svc.service.hook.log.path
        log.parent.mkdir(parents=True, exist_ok=True)
        entries = [{"source": "prompt", "prompt": f"p{i}"} for i in range(waiting)]
        entries += [{"source": "prompt", "prompt": "done", "labels": {"design": "yes"}}, {"source": "agent"}]
        log.write_text("".join(json.dumps(e) + "\n" for e in entries))
        note = session_start(svc.url, tmp_path)
    assert (note is not None) == nudged
    if nudged:
        assert note == "System-1: 30 logged prompts are waiting for labels; /system1:calibrate labels them with you."
