"""The `system1` command: toggle, and smoke's verdicts and exit codes against real servers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from system1.cli import EXIT_DECISION, EXIT_HEALTH, EXIT_OK, EXIT_START, main

from .helpers import closed_port_url


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "system1", *args], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    config = tmp_path / "config.toml"
    config.write_text('[gateway]\nprovider = "mock"\n')
    return {**os.environ, "SYSTEM1_CONFIG": str(config), "SYSTEM1_INSTALL_DIR": str(tmp_path / "state")}


def test_toggle_off_pauses_on_resumes_and_status_reports(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SYSTEM1_INSTALL_DIR", str(tmp_path / "state"))
    assert main(["toggle", "status"]) == 0 and capsys.readouterr().out == "System-1 on\n"
    assert main(["toggle", "off"]) == 0
    assert (tmp_path / "state" / "paused").exists()
    main(["toggle", "status"])
    assert "paused since" in capsys.readouterr().out
    assert main(["toggle", "on"]) == 0 and not (tmp_path / "state" / "paused").exists()


def test_smoke_passes_with_a_decision(env):
    result = run_cli("smoke", "--standalone", "--question", "Rerun or block?", "--options", "rerun", "block", env=env)
    assert result.returncode == EXIT_OK, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["START", "HANDSHAKE", "TOOLS", "HEALTH", "DECISION", "RESULT"]
    assert "decided: rerun confidence 0.9 via mock" in result.stdout
    assert lines[-1].split() == ["RESULT", "PASS"]


def test_smoke_fails_on_health_when_the_engine_is_down(env):
    env = {**env, "SYSTEM1_PROVIDER": "laya", "SYSTEM1_LAYA_ENDPOINT": "http://127.0.0.1:9"}
    result = run_cli("smoke", "--standalone", env=env)
    assert result.returncode == EXIT_HEALTH
    assert "HEALTH    FAIL  down" in result.stdout and "127.0.0.1:9" in result.stdout


def test_smoke_against_a_stopped_service_says_which_gateway_and_why(env):
    url = closed_port_url()
    result = run_cli("smoke", "--url", url, env=env)
    assert result.returncode == EXIT_HEALTH
    assert f"GATEWAY         {url}" in result.stdout
    assert f"HEALTH    FAIL  down; the gateway service at {url} is unreachable" in result.stdout


def test_smoke_fails_on_a_decision_error(env):
    env = {**env, "SYSTEM1_MOCK_RESPONSE": '"not an answer"'}
    result = run_cli("smoke", "--standalone", "--question", "Is it safe?", "--options", "yes", "no", env=env)
    assert result.returncode == EXIT_DECISION
    assert "DECISION  FAIL  malformed_response" in result.stdout


def test_smoke_fails_on_a_server_that_does_not_start(env):
    result = run_cli("smoke", "--command", f"{sys.executable} -c 'import sys; sys.exit(3)'", "--timeout", "30", env=env)
    assert result.returncode == EXIT_START
    assert "HANDSHAKE FAIL" in result.stdout


def test_options_without_a_question_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["smoke", "--options", "a", "b"])
    assert caught.value.code == 2 and "--options needs --question" in capsys.readouterr().err


def test_keys_add_stores_only_the_hash_and_prints_the_key_once(tmp_path, capsys):
    from system1.service.auth import KeyRing

    keys = tmp_path / "keys"
    nobody = closed_port_url()  # no service to reload: the key waits for the next start
    assert main(["keys", "add", "frank", "--file", str(keys), "--url", nobody]) == 0
    out, err = capsys.readouterr()
    key = out.strip().splitlines()[-1]
    assert nobody in err and "takes effect when the service next starts" in err
    assert key.startswith("s1_") and key not in keys.read_text()
    assert oct(keys.stat().st_mode & 0o777) == "0o600"
    ring, errors = KeyRing.load(str(keys), {}, None)
    assert errors == [] and ring.identify(key) == "frank" and ring.identify("s1_other") is None
    assert main(["keys", "add", "no spaces", "--file", str(keys), "--url", nobody]) == EXIT_START


def test_the_stdio_bridge_does_not_import_fastapi():
    code = "import sys, system1.cli, system1.client.bridge, system1.service.mcp, system1.commands.service; print('fastapi' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.split() == ["False"]


def test_a_log_file_that_cannot_be_opened_is_reported_and_never_stops_the_gateway(env, tmp_path):
    env = {**env, "SYSTEM1_LOG_FILE": str(tmp_path / "missing" / "dir" / "gateway.log")}
    result = subprocess.run([sys.executable, "-m", "system1", "mcp", "--standalone"], input="", env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "Traceback" not in result.stderr
    assert "cannot be opened" in result.stderr and "logging to stderr only" in result.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["calibrate", "x.jsonl", "--folds", "0"], "--folds: 0 is not between 2 and 100"),
        (["calibrate", "x.jsonl", "--target-accuracy", "2"], "--target-accuracy: 2 is not between 0 and 1"),
        (["evaluate", "--threshold", "7"], "--threshold: 7 is not between 0 and 1"),
        (["report", "--days", "0"], "--days: 0 is not at least 1"),
        (["serve", "--port", "http"], "--port: 'http' is not a whole number"),
    ],
)
def test_numbers_out_of_range_are_refused_naming_the_bounds(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2 and message in capsys.readouterr().err
