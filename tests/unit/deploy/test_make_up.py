"""`make up` starts the judge beside MiniLM, and `ENGINES=minilm` starts the lean stack: the
commands make would run (`make -n`), and the gateway's config under the lean stack's variable."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ..helpers import config_in

ROOT = Path(__file__).resolve().parents[3]


def planned(*args: str) -> list[str]:
    """The shell lines `make up` would run, without running them (no daemon is asked: OFFLINE=1)."""
    result = subprocess.run(["make", "-n", "--no-print-directory", "-C", str(ROOT), "up", "OFFLINE=1", *args],
                            capture_output=True, text=True, check=True, timeout=60)
    return result.stdout.splitlines()


def test_make_up_builds_and_starts_the_llama_judge_and_waits_for_it():
    lines = planned()
    build = next(line for line in lines if " build " in line and "compose" in line)
    start = next(line for line in lines if " up -d " in line)
    wait = next(line for line in lines if "wait-healthy.sh" in line)
    assert build.split(" build ")[1].split() == ["gateway", "systemone", "llama", "metrics"]
    assert start.split(" up -d ")[1].split() == ["gateway", "systemone", "metrics", "llama"]
    assert "SYSTEM1_CASCADE=" not in start and "system1-llama" in wait


def test_make_up_with_minilm_alone_leaves_llama_out_and_empties_the_cascade(tmp_path):
    lines = planned("ENGINES=minilm")
    start = next(line for line in lines if " up -d " in line)
    assert start.startswith("SYSTEM1_CASCADE= ") and "llama" not in start
    assert not any("llama" in line for line in lines if " build " in line or "wait-healthy" in line)
    # What the gateway then reads: the stack's config, with the cascade emptied by the variable.
    stack = (ROOT / "deploy" / "config.toml").read_text()
    assert config_in(tmp_path, stack).settings.gateway.cascade == ["llama"]
    assert config_in(tmp_path, stack, SYSTEM1_CASCADE="").settings.gateway.cascade == []
