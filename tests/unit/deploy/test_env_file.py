"""The cloud tiers' keys live in .env, which git ignores: the repository ships only
.env.example, with no key in it, and `make up` makes .env from it."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_env_is_ignored_by_git_and_not_tracked():
    assert subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=ROOT).returncode == 0
    assert subprocess.run(["git", "ls-files", "--error-unmatch", ".env"], cwd=ROOT, capture_output=True).returncode != 0


def test_the_example_names_the_project_and_holds_no_key():
    lines = (ROOT / ".env.example").read_text().splitlines()
    assert "COMPOSE_PROJECT_NAME=system1" in lines
    settings = [line for line in lines if line and not line.startswith("#")]
    assert all(not line.endswith("_KEY=") and "_KEY=" not in line for line in settings)


def test_make_up_creates_env_from_the_example_once_and_never_overwrites_it(tmp_path):
    for name in ("Makefile", ".env.example"):
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    make = ["make", "--no-print-directory", "-C", str(tmp_path), ".env", "OFFLINE=1"]
    subprocess.run(make, check=True, capture_output=True)
    assert (tmp_path / ".env").read_text() == (ROOT / ".env.example").read_text()
    (tmp_path / ".env").write_text("OPENROUTER_API_KEY=sk-or-kept\n")
    subprocess.run(make, check=True, capture_output=True)
    assert (tmp_path / ".env").read_text() == "OPENROUTER_API_KEY=sk-or-kept\n"
    up = next(line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("up:"))
    assert ".env" in up.split("##")[0].split()
