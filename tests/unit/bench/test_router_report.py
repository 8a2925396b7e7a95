"""The router benchmark's interactive report (bench/router/report.html), in a real headless
Chromium driven by Selenium: the group filters and the "disagreements only" view show exactly
the prompts they should, the summary and charts are there, and the committed report is the one
its committed results render to, with its screenshot beside it."""

from __future__ import annotations

import importlib.util
import json
import struct
from pathlib import Path

import pytest

from tests import tools

ROUTER_BENCH = Path(__file__).resolve().parents[3] / "bench" / "router"
RESULTS = json.loads((ROUTER_BENCH / "decisions.json").read_text(encoding="utf-8"))


def load_report_module():
    spec = importlib.util.spec_from_file_location("router_report", ROUTER_BENCH / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


report = load_report_module()
ROUTELLM = report.routellm_results()


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium, driver = tools.chromium()  # the tests that use it are marked needs_chromium
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    profile = tmp_path_factory.mktemp("chromium-profile")  # not a folder of its own under /tmp, left behind
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    session = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    session.set_page_load_timeout(60)
    yield session
    session.quit()


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "report.html"
    path.write_text(report.render(RESULTS, ROUTELLM), encoding="utf-8")
    browser.get(path.as_uri())
    return browser


def visible_ids(browser) -> list[str]:
    return browser.execute_script(
        "return [...document.querySelectorAll('#rows tbody tr')].filter(r => !r.hidden).map(r => r.id)")


def click_group(browser, group: str) -> None:
    from selenium.webdriver.common.by import By

    browser.find_element(By.CSS_SELECTOR, f'#groups button[data-group="{group}"]').click()


def set_disagreements(browser, on: bool) -> None:
    from selenium.webdriver.common.by import By

    box = browser.find_element(By.ID, "disagreements")
    if box.is_selected() != on:
        box.click()


def disagreeing() -> set[str]:
    """Prompts where an engine with trained weights (not random, not the mock) routes away from gold."""
    engines = [e for e in RESULTS["engines"] if not e["random"] and e["name"] != "mock"]
    return {p["id"] for p in RESULTS["prompts"] if any(not e["rows"][p["id"]].get("route_right") for e in engines)}


def shown_text(browser) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.ID, "shown").text


@pytest.mark.needs_chromium
def test_every_prompt_is_shown_at_first_with_each_engines_decision(page):
    prompts = RESULTS["prompts"]
    assert visible_ids(page) == [p["id"] for p in prompts]
    assert shown_text(page) == f"{len(prompts)} of {len(prompts)} prompts"
    headers = page.execute_script("return [...document.querySelectorAll('#rows thead th')].map(h => h.textContent)")
    assert [h.split("random")[0].strip() for h in headers[2:]] == [e["name"] for e in RESULTS["engines"]]


@pytest.mark.needs_chromium
@pytest.mark.parametrize("group", sorted({p["group"] for p in RESULTS["prompts"]}))
def test_a_group_filter_shows_that_groups_prompts_only(page, group):
    set_disagreements(page, False)
    click_group(page, group)
    expected = [p["id"] for p in RESULTS["prompts"] if p["group"] == group]
    assert visible_ids(page) == expected
    assert shown_text(page) == f"{len(expected)} of {len(RESULTS['prompts'])} prompts"
    pressed = page.execute_script(
        "return [...document.querySelectorAll('#groups button[aria-pressed=true]')].map(b => b.dataset.group)")
    assert pressed == [group]


@pytest.mark.needs_chromium
def test_disagreements_only_shows_the_prompts_routed_away_from_gold_and_combines_with_a_group(page):
    click_group(page, "all")
    set_disagreements(page, True)
    assert set(visible_ids(page)) == disagreeing() and 0 < len(disagreeing()) < len(RESULTS["prompts"])
    click_group(page, "core")
    assert set(visible_ids(page)) == {p["id"] for p in RESULTS["prompts"] if p["group"] == "core"} & disagreeing()
    set_disagreements(page, False)
    click_group(page, "all")
    assert len(visible_ids(page)) == len(RESULTS["prompts"])


@pytest.mark.needs_chromium
def test_the_summary_table_and_charts_show_every_engine(page):
    summary = page.execute_script(
        "return [...document.querySelectorAll('table.summary tbody tr')].map(r => r.cells[0].textContent)")
    assert [s.split(" random")[0] for s in summary] == [e["name"] for e in RESULTS["engines"]]
    charts = page.execute_script("return [...document.querySelectorAll('.charts svg')].map(s => s.getAttribute('aria-label'))")
    assert charts == ["Route = gold route", "Topic right", "Cost of the routes (USD)"]
    bars = page.execute_script("return document.querySelectorAll('.charts svg rect').length")
    assert bars == 3 * len(RESULTS["engines"]) + 2  # the cost chart adds gold and the priciest model


@pytest.mark.needs_chromium
def test_the_public_benchmark_section_shows_each_regime_beside_the_published_figures_with_its_curves(page):
    rows = page.execute_script(
        "return [...document.querySelectorAll('table.routellm tbody tr')].map(r => [...r.cells].map(c => c.textContent))")
    expected = [(name, regime, f"{r['apgr']:.3f}") for name, regimes in ROUTELLM["benchmarks"].items()
                for regime, r in regimes.items() if regime in report.REGIMES]
    assert [(r[0], r[2], r[3]) for r in rows] == expected and len(expected) >= 8
    published = {r[0]: r[6] for r in rows if r[6]}
    assert published == ROUTELLM["published"]
    charts = page.execute_script("return [...document.querySelectorAll('.pgr svg')].map(s => s.getAttribute('aria-label'))")
    assert charts == [f"PGR {name}" for name in ROUTELLM["benchmarks"]]
    lines = page.execute_script("return [...document.querySelectorAll('.pgr svg')].map(s => s.querySelectorAll('polyline').length)")
    assert lines == [sum(regime in regimes for regime in report.REGIMES) for regimes in ROUTELLM["benchmarks"].values()]


def test_without_public_benchmark_results_the_report_has_no_such_section():
    assert "Public benchmark" not in report.render(RESULTS, None)


@pytest.mark.needs_chromium
def test_the_page_renders_to_a_screenshot(page, tmp_path):
    shot = tmp_path / "shot.png"
    assert page.save_screenshot(str(shot))
    width, height = png_size(shot.read_bytes())
    assert width >= 1000 and height >= 600


def test_the_committed_report_is_what_the_committed_results_render_to_with_its_screenshot():
    assert (ROUTER_BENCH / "report.html").read_text(encoding="utf-8") == report.render(RESULTS, ROUTELLM)
    width, height = png_size((ROUTER_BENCH / "report.png").read_bytes())
    assert (width, height) == report.SHOT_SIZE
