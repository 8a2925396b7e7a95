"""Config: the file, environment overrides, and every kind of error naming file and key."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel

from system1.core.config import load_config

from ..helpers import config_in


def test_defaults_follow_the_seeds(tmp_path):
    config = config_in(tmp_path)
    gateway, routing, skills = config.settings.gateway, config.settings.routing, config.settings.skills
    assert config.ok
    assert (gateway.provider, gateway.fallback, gateway.timeout_s, gateway.min_confidence) == ("laya", [], 5.0, 0.6)
    assert (gateway.log_level, gateway.log_file) == ("INFO", "")
    assert (routing.enabled, routing.hint, routing.log_dirs, routing.min_confidence) == (False, True, [], None)
    assert (skills.enabled, skills.hint, skills.min_confidence) == (False, False, 0.8)
    laya = config.settings.providers["laya"]
    assert (laya.endpoint, laya.model, laya.allow_remote) == ("http://127.0.0.1:8765", "typed-decisions", False)


def test_file_values_are_read(tmp_path):
    config = config_in(
        tmp_path,
        """
        [gateway]
        provider = "mock"
        fallback = ["laya"]
        timeout_s = 2.5
        min_confidence = 0.7
        log_level = "debug"
        [routing]
        enabled = true
        log_dirs = ["~/src/a"]
        [skills]
        min_confidence = 0.9
        [providers.mock]
        confidence = 0.4
        [providers.laya]
        endpoint = "http://localhost:9000/"
        model = ""
        """,
    )
    settings = config.settings
    assert config.ok, config.errors
    assert settings.chain == ["mock", "laya"]
    assert (settings.gateway.timeout_s, settings.gateway.min_confidence, settings.gateway.log_level) == (2.5, 0.7, "DEBUG")
    assert settings.routing.enabled and settings.routing.log_dirs == ["~/src/a"]
    assert settings.skills.min_confidence == 0.9
    assert settings.providers["mock"].confidence == 0.4
    assert settings.providers["laya"].endpoint == "http://localhost:9000"
    assert settings.providers["laya"].model == ""


def test_environment_overrides_the_file(tmp_path):
    config = config_in(
        tmp_path,
        '[gateway]\nprovider = "laya"\ntimeout_s = 9\n',
        SYSTEM1_PROVIDER="mock",
        SYSTEM1_FALLBACK="von, systemone",
        SYSTEM1_TIMEOUT_S="1.5",
        SYSTEM1_ROUTING_ENABLED="true",
        SYSTEM1_ROUTING_LOG_DIRS=os.pathsep.join(["/a/b", "/c"]),
        SYSTEM1_SKILLS_HINT="1",
        SYSTEM1_LAYA_ENDPOINT="http://127.0.0.1:1234",
        SYSTEM1_MOCK_CONFIDENCE="0.25",
        SYSTEM1_MOCK_RESPONSE='{"decision": "x"}',
    )
    settings = config.settings
    assert config.ok, config.errors
    assert settings.gateway.provider == "mock"
    assert settings.gateway.fallback == ["von", "systemone"]
    assert settings.gateway.timeout_s == 1.5
    assert settings.routing.enabled is True and settings.routing.log_dirs == ["/a/b", "/c"]
    assert settings.skills.hint is True
    assert settings.providers["mock"].confidence == 0.25
    assert settings.providers["mock"].response == {"decision": "x"}


def test_routing_threshold_can_be_cleared_from_the_environment(tmp_path):
    config = config_in(tmp_path, "[routing]\nmin_confidence = 0.7\n", SYSTEM1_ROUTING_MIN_CONFIDENCE="")
    assert config.ok and config.settings.routing.min_confidence is None


def test_default_path_uses_xdg_config_home(tmp_path):
    (tmp_path / "system1").mkdir()
    (tmp_path / "system1" / "config.toml").write_text('[gateway]\nprovider = "mock"\n')
    config = load_config({"XDG_CONFIG_HOME": str(tmp_path)})
    assert config.ok and config.settings.gateway.provider == "mock"
    assert config.path == tmp_path / "system1" / "config.toml"


def test_no_file_at_the_default_path_means_defaults(tmp_path):
    config = load_config({"XDG_CONFIG_HOME": str(tmp_path)})
    assert config.ok and config.path is None


def test_a_missing_file_named_by_system1_config_is_an_error(tmp_path):
    missing = tmp_path / "nope.toml"
    config = load_config({"SYSTEM1_CONFIG": str(missing)})
    assert config.errors == [f"{missing}: config file not found (named by SYSTEM1_CONFIG)"]


def test_toml_syntax_error_names_the_file(tmp_path):
    config = config_in(tmp_path, "[gateway\nprovider = ")
    assert len(config.errors) == 1
    assert config.errors[0].startswith(f"{tmp_path / 'config.toml'}: TOML syntax error")


def test_unknown_keys_and_tables_are_errors(tmp_path):
    config = config_in(tmp_path, "[gateway]\nprovder = 'mock'\n[routing]\nlog = 1\n[extras]\n")
    path = tmp_path / "config.toml"
    assert f"{path}: [gateway] provder: unknown key" in config.errors
    assert f"{path}: [routing] log: unknown key" in config.errors
    assert f"{path}: [extras]: unknown table" in config.errors


def test_timeout_must_be_above_zero_and_at_most_300(tmp_path):
    for bad in ("0", "-1", "301"):
        config = config_in(tmp_path, f"[gateway]\ntimeout_s = {bad}\n")
        assert len(config.errors) == 1 and "[gateway] timeout_s:" in config.errors[0]
    assert config_in(tmp_path, "[gateway]\ntimeout_s = 300\n").ok


def test_min_confidence_outside_unit_interval_is_an_error(tmp_path):
    config = config_in(tmp_path, "[gateway]\nmin_confidence = 1.5\n")
    assert "[gateway] min_confidence:" in config.errors[0]


def test_a_bad_environment_value_names_the_variable(tmp_path):
    config = config_in(tmp_path, SYSTEM1_TIMEOUT_S="soon")
    assert config.errors[0].startswith("SYSTEM1_TIMEOUT_S: [gateway] timeout_s:")


def test_unknown_provider_is_an_error_listing_the_available_ones(tmp_path):
    config = config_in(tmp_path, '[gateway]\nprovider = "gpt"\nfallback = ["mock", "nope"]\n')
    assert any("[gateway] provider: unknown provider 'gpt'" in e and "laya" in e for e in config.errors)
    assert any("[gateway] fallback: unknown provider 'nope'" in e for e in config.errors)
    assert any("[providers.x]: unknown provider" in e for e in config_in(tmp_path, "[providers.x]\n").errors)


def test_non_loopback_endpoint_needs_allow_remote(tmp_path):
    config = config_in(tmp_path, '[providers.laya]\nendpoint = "http://10.0.0.5:8765"\n')
    assert len(config.errors) == 1
    assert "[providers.laya]" in config.errors[0] and "allow_remote" in config.errors[0]
    allowed = config_in(tmp_path, '[providers.laya]\nendpoint = "http://laya:8765"\nallow_remote = true\n')
    assert allowed.ok


def test_secrets_in_the_file_are_errors_that_point_to_the_environment(tmp_path):
    config = config_in(tmp_path, '[providers.laya]\napi_key = "s3cret"\n')
    assert len(config.errors) == 1
    assert "SYSTEM1_LAYA_API_KEY" in config.errors[0]
    assert "s3cret" not in config.errors[0]


def test_unconfigured_providers_outside_the_chain_are_not_validated(tmp_path):
    assert config_in(tmp_path, '[gateway]\nprovider = "mock"\n').ok
    config = config_in(tmp_path, '[gateway]\nprovider = "mock"\nfallback = ["ollama"]\n')
    assert any("[providers.ollama] model: is required" in e for e in config.errors)


def test_install_dir_comes_from_the_environment(tmp_path):
    config = config_in(tmp_path)
    assert config.install_dir == Path(tmp_path / "state")
    assert config.routing_log == tmp_path / "state" / "logs" / "routing.jsonl"


def test_the_example_config_is_valid_and_documents_every_key(tmp_path):
    from system1.core.config import SECTIONS
    from system1.providers import REGISTRY
    from system1.providers.base import ProviderOptions

    example = Path(__file__).parents[3] / "deploy" / "config.example.toml"
    text = example.read_text(encoding="utf-8")
    assert load_config({"SYSTEM1_CONFIG": str(example)}).ok
    for table, model in SECTIONS.items():
        for key, field in model.model_fields.items():
            assert f"# {key} =" in text.split(f"\n[{table}]\n")[1], f"[{table}] {key} is not documented"
            if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):  # a sub-table
                section = text.split(f"\n# [{table}.{key}]")[1].split("\n\n")[0]
                for inner in field.annotation.model_fields:
                    assert f"# {inner} =" in section, f"[{table}.{key}] {inner} is not documented"
    common = set(ProviderOptions.model_fields)
    for key in common:
        assert f"# {key} =" in text, f"the lane key {key} is not documented"
    for name, provider in REGISTRY.items():
        section = text.split(f"[providers.{name}]")[1]
        for key in set(provider.Options.model_fields) - common:
            assert f"# {key} =" in section, f"[providers.{name}] {key} is not documented"
