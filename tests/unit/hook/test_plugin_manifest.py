"""The Claude Code plugin's manifests, as Claude Code reads them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[3]
PLUGIN = ROOT / "plugin"


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_manifest_does_not_name_the_hooks_file_claude_code_loads_by_itself():
    # Naming hooks/hooks.json again makes Claude Code report "Duplicate hooks file detected".
    manifest = load(PLUGIN / ".claude-plugin" / "plugin.json")
    assert "hooks" not in manifest and (PLUGIN / "hooks" / "hooks.json").is_file()
    assert manifest["author"]["name"] and manifest["license"] == "Apache-2.0"


def test_the_marketplace_describes_itself_and_lists_the_plugin_by_its_manifest_name():
    marketplace = load(ROOT / ".claude-plugin" / "marketplace.json")
    assert marketplace["metadata"]["description"] and marketplace["owner"]["name"]
    [entry] = marketplace["plugins"]
    assert entry["name"] == load(PLUGIN / ".claude-plugin" / "plugin.json")["name"]
    assert (ROOT / entry["source"] / ".claude-plugin" / "plugin.json").is_file()


def test_the_agent_spawn_recorder_runs_in_the_background_and_the_prompt_hook_does_not():
    hooks = load(PLUGIN / "hooks" / "hooks.json")["hooks"]
    [recorder] = [h for group in hooks["PreToolUse"] for h in group["hooks"]]
    [prompt] = [h for group in hooks["UserPromptSubmit"] for h in group["hooks"]]
    assert recorder["async"] is True  # an Agent spawn must not wait for the gateway
    assert not prompt.get("async")  # its hint is additional context, needed before the prompt runs


def test_setup_finds_the_clone_from_claude_codes_record_of_the_marketplace(tmp_path):
    # known_marketplaces.json as `claude plugin marketplace add <dir>` (2.1.332) writes it.
    record = {"system1-gateway": {"source": {"source": "directory", "path": str(ROOT)},
                                  "installLocation": str(ROOT), "lastUpdated": "2026-11-30T01:54:33.953Z"}}
    (tmp_path / ".claude" / "plugins").mkdir(parents=True)
    (tmp_path / ".claude" / "plugins" / "known_marketplaces.json").write_text(json.dumps(record))
    skill = (PLUGIN / "skills" / "setup" / "SKILL.md").read_text(encoding="utf-8")
    [line] = [line.strip() for line in skill.splitlines() if line.strip().startswith("CLONE=")]
    done = subprocess.run(["bash", "-c", f'{line}\necho "$CLONE"'], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "HOME": str(tmp_path)})
    assert done.returncode == 0 and Path(done.stdout.strip()) == ROOT
    assert (ROOT / "Makefile").is_file() and (ROOT / "deploy" / "config.toml").is_file()


def test_every_make_target_command_and_file_a_skill_names_exists():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][a-z-]*):", makefile, re.M))
    commands = set(re.findall(r"^  \{([^}]*)\}", subprocess.run(
        [sys.executable, "-m", "system1", "--help"], capture_output=True, text=True, timeout=60).stdout, re.M)[0].split(","))
    for skill in sorted(PLUGIN.glob("skills/*/SKILL.md")):
        text = skill.read_text(encoding="utf-8")
        for target in re.findall(r'make -C "\$CLONE" ([a-z-]+)', text):
            assert target in targets, f"{skill.parent.name}: make {target}"
        for command in re.findall(r"system1 ([a-z][a-z-]+)", text):
            assert command in commands, f"{skill.parent.name}: system1 {command}"
        for path in re.findall(r"\$CLONE/([\w./-]+\w)", text):
            made_by_setup = path == ".venv" or path.startswith(".venv/")  # absent until `make setup` runs
            assert (ROOT / path).exists() or made_by_setup, f"{skill.parent.name}: {path}"
