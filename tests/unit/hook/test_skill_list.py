"""Which skills the plugin's hook offers the skill picker: what Claude Code itself would load."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

HOOK = Path(__file__).parents[3] / "plugin" / "hooks" / "system1_hook.py"
spec = importlib.util.spec_from_file_location("system1_hook", HOOK)
hook = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hook)


def skill(root: Path, name: str, header: str) -> None:
    (root / name).mkdir(parents=True, exist_ok=True)
    (root / name / "SKILL.md").write_text(f"---\n{header}\n---\nbody\n", encoding="utf-8")


def install(home: Path, plugin_id: str, path: Path, entry: dict | None = None, version: int = 2) -> None:
    record = {"scope": "user", "installPath": str(path), **(entry or {})}
    file = home / ".claude" / "plugins" / "installed_plugins.json"
    file.parent.mkdir(parents=True, exist_ok=True)
    data = json.loads(file.read_text()) if file.exists() else {"version": version, "plugins": {}}
    data["plugins"][plugin_id] = [record] if version == 2 else record
    file.write_text(json.dumps(data))


def enable(settings: Path, **plugins: bool) -> None:
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps({"enabledPlugins": {k.replace("__", "@"): v for k, v in plugins.items()}}))


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def names(cwd: Path) -> list[str]:
    return sorted(s["name"] for s in hook.skills(str(cwd)))


def test_only_enabled_plugins_count_and_their_skills_carry_the_plugin_prefix(home, tmp_path):
    for plugin in ("tools", "idle", "gone"):
        skill(tmp_path / plugin / "skills", "doctor", "name: doctor\ndescription: checks")
    install(home, "tools@market", tmp_path / "tools")
    install(home, "idle@market", tmp_path / "idle")  # installed but disabled
    enable(home / ".claude" / "settings.json", tools__market=True, idle__market=False, gone__market=True)
    skill(home / ".claude" / "skills", "mine", "name: mine\ndescription: a user skill")
    assert names(tmp_path) == ["mine", "tools:doctor"]  # `gone` is enabled but not installed


def test_project_settings_override_the_users_and_project_installs_count_only_in_their_project(home, tmp_path):
    project, elsewhere = tmp_path / "repo", tmp_path / "other"
    skill(tmp_path / "p" / "skills", "lint", "name: lint\ndescription: lints")
    skill(tmp_path / "q" / "skills", "fmt", "name: fmt\ndescription: formats")
    install(home, "p@m", tmp_path / "p")
    install(home, "q@m", tmp_path / "q", {"scope": "project", "projectPath": str(project)})
    enable(home / ".claude" / "settings.json", p__m=True, q__m=True)
    enable(project / ".claude" / "settings.local.json", p__m=False, q__m=True)
    elsewhere.mkdir()
    assert names(project) == ["q:fmt"] and names(elsewhere) == ["p:lint"]


def test_the_first_install_format_is_read_too(home, tmp_path):
    skill(tmp_path / "old" / "skills", "probe", "name: probe\ndescription: probes")
    install(home, "old@m", tmp_path / "old", version=1)
    enable(home / ".claude" / "settings.json", old__m=True)
    assert names(tmp_path) == ["old:probe"]


@pytest.mark.parametrize("value", ["true", "True", "yes", "on", "1"])
def test_every_yaml_true_keeps_a_skill_from_the_model(home, tmp_path, value):
    skill(home / ".claude" / "skills", "deploy", f"name: deploy\ndisable-model-invocation: {value}")
    skill(home / ".claude" / "skills", "lint", "name: lint\ndisable-model-invocation: false")
    assert names(tmp_path) == ["lint"]


def test_folded_and_literal_descriptions_are_read_as_text(home, tmp_path):
    skill(home / ".claude" / "skills", "fold", "name: fold\ndescription: >\n  Reads PDF forms\n  and fills them.\nlicense: MIT")
    skill(home / ".claude" / "skills", "lit", "name: lit\ndescription: |-\n  line one\n  line two")
    found = {s["name"]: s["description"] for s in hook.skills(str(tmp_path))}
    assert found == {"fold": "Reads PDF forms and fills them.", "lit": "line one\nline two"}
