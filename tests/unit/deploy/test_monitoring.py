"""The alert rules and the Grafana dashboard, checked with Prometheus's own promtool: the rules
load and their unit tests pass, every panel's query parses, and every router metric the
gateway exports is watched by a panel or an alert."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from system1.service.metrics import Metrics
from tests import tools

ROOT = Path(__file__).resolve().parents[3]
METRICS = ROOT / "services" / "metrics"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "system1.json"


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """promtool `args`, for tests marked needs_promtool."""
    return subprocess.run([tools.promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def panel_queries() -> list[tuple[str, str]]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [(f"{p['title']} ({t['refId']})", t["expr"]) for p in panels for t in p.get("targets", [])]


@pytest.mark.needs_promtool
def test_the_alert_rules_load_and_their_unit_tests_pass():
    checked = run("check", "rules", str(METRICS / "alerts.yml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = run("test", "rules", "alerts.test.yml", cwd=METRICS)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


@pytest.mark.needs_promtool
def test_every_dashboard_query_is_valid_promql(tmp_path):
    queries = panel_queries()
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:query_{i}", "expr": expr}
                                                         for i, (_, expr) in enumerate(queries)]}]}
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(json.dumps(rules))  # JSON is YAML
    checked = run("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(queries)} rules found" in checked.stdout


def test_every_router_metric_is_watched_by_a_panel_or_an_alert():
    watched = " ".join(expr for _, expr in panel_queries()) + (METRICS / "alerts.yml").read_text()
    exported = {metric.name for metric in Metrics().registry.collect() if metric.name.startswith("system1_router_")}
    assert len(exported) >= 11
    unwatched = sorted(name for name in exported if not re.search(rf"\b{name}(_total|_bucket)?\b", watched))
    assert unwatched == []
