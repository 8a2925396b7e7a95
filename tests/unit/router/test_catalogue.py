"""The `[router]` table: read from the gateway config, with errors that name the key."""

from __future__ import annotations

from system1.core.config import load_config

from .catalogues import SEED


def loaded(tmp_path, router_table: str):
    path = tmp_path / "config.toml"
    path.write_text('[gateway]\nprovider = "mock"\n' + router_table, encoding="utf-8")
    return load_config({"SYSTEM1_CONFIG": str(path), "SYSTEM1_INSTALL_DIR": str(tmp_path / "state")})


def router_section(text: str) -> str:
    """The seed catalogue as a `[router]` table of a whole config file."""
    return "\n".join(line.replace("[upstreams.", "[router.upstreams.").replace("[[models]]", "[[router.models]]")
                     for line in ("[router]\n" + text).splitlines())


def test_the_seed_catalogue_loads_from_the_gateway_config(tmp_path):
    config = loaded(tmp_path, router_section(SEED))
    assert config.ok, config.errors
    router = config.settings.router
    assert router.enabled and len(router.models) == 6
    sonnet = router.model("anthropic/claude-sonnet-5")
    assert (sonnet.price.input, sonnet.price.output, sonnet.skill("debugging"), sonnet.skill("chat")) == (2.0, 10.0, 0.87, 0.82)
    assert router.is_local(router.model("gemma-3-270m")) and not router.is_local(sonnet)


def test_the_router_is_off_without_a_table(tmp_path):
    config = loaded(tmp_path, "")
    assert config.ok and not config.settings.router.enabled and config.settings.router.models == []


def test_a_bad_price_names_the_model_and_the_field(tmp_path):
    config = loaded(tmp_path, router_section(SEED.replace("price = { in = 0.03, out = 0.13 }", "price = { in = -1, out = 0.13 }")))
    assert any("[router] models[0].price.in: Input should be greater than or equal to 0" in e for e in config.errors)


def test_a_model_on_an_unknown_upstream_is_an_error_naming_both(tmp_path):
    config = loaded(tmp_path, router_section(SEED.replace('upstream = "llama"', 'upstream = "lama"')))
    assert any("models[5] (gemma-3-270m): upstream 'lama' is not in [router.upstreams]" in e for e in config.errors)


def test_a_skill_for_a_topic_that_is_not_configured_is_an_error(tmp_path):
    config = loaded(tmp_path, router_section(SEED.replace("docs = 0.55", "dcos = 0.55")))
    assert any("skills for unknown topics dcos" in e for e in config.errors)


def test_per_level_lists_need_one_value_per_level(tmp_path):
    config = loaded(tmp_path, "[router]\nmin_skill = [0.4, 0.5]\nrisk_bonus = [0, 0.1]\n")
    assert any("[router] min_skill: needs 4 values, one per complexity level 0..3; got 2" in e for e in config.errors)
    assert any("[router] risk_bonus: needs 3 values, one per risk level 0..2; got 2" in e for e in config.errors)


def test_an_upstream_key_in_the_file_is_refused(tmp_path):
    config = loaded(tmp_path, '[router.upstreams.openrouter]\nbase_url = "https://openrouter.ai/api"\napi_key = "sk-x"\n')
    assert any("[router] upstreams.openrouter: api_key: keys are read from the environment" in e for e in config.errors)
    assert not any("sk-x" in e for e in config.errors)


def test_a_fallback_model_and_aliases_must_fit_the_catalogue(tmp_path):
    config = loaded(tmp_path, router_section(SEED.replace('fallback_model = "anthropic/claude-sonnet-5"',
                                                          'fallback_model = "gpt-9"\naliases = ["auto"]')))
    assert any("fallback_model: 'gpt-9' is not one of the models" in e for e in config.errors)
    clash = loaded(tmp_path, router_section(SEED + '\n').replace("[router]\n", '[router]\naliases = ["gemma-3-270m"]\n', 1))
    assert any("aliases: gemma-3-270m is also a model id" in e for e in clash.errors)


def test_an_upstream_url_is_the_servers_root(tmp_path):
    config = loaded(tmp_path, '[router.upstreams.openai]\nbase_url = "https://api.openai.com/v1"\n')
    assert any("upstreams.openai.base_url: is the server's root, without /v1" in e for e in config.errors)
