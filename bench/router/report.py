"""The router decision benchmark's interactive report: one static HTML file, no server, no
network (styles, script and charts inline).

A row per prompt with the gold labels and route and each engine's decision (topic, a confidence
chip, complexity and risk levels, private, the model it routes to and whether that costs more
or less than gold); filters by group and a "disagreements only" view (prompts where an engine
with trained weights routes away from gold); the summary table and two charts as inline SVG.

    python bench/router/report.py      # report.html and report.png from decisions.json
"""

from __future__ import annotations

import html
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
#: `make bench-routellm`'s results, shown in their own section when they are there.
ROUTELLM = HERE.parent / "routellm" / "results.json"
#: The PGR chart's regimes, in the order drawn, with their colours.
REGIMES = {"random": "#9aa5b1", "zero-shot": "#b45309", "learned": "#1d4ed8"}
#: Chromium from Debian's package; its own headless mode takes the screenshot.
CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
SHOT_SIZE = (1400, 1100)

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1d2430; }
h1 { font-size: 1.4rem; margin: 0 0 .3rem; } h2 { font-size: 1.1rem; margin: 1.4rem 0 .5rem; }
p.meta { color: #555; max-width: 70rem; }
table { border-collapse: collapse; }
th, td { border-bottom: 1px solid #e3e6ea; padding: .3rem .5rem; text-align: left; vertical-align: top; }
th { background: #f4f6f8; position: sticky; top: 0; }
table.summary td.n, table.routellm td.n { text-align: right; font-variant-numeric: tabular-nums; }
.charts, .pgr { display: flex; gap: 2rem; flex-wrap: wrap; margin: 1rem 0; }
.controls { display: flex; gap: 1rem; align-items: center; flex-wrap: wrap; margin: .5rem 0; }
.controls button { border: 1px solid #9aa5b1; background: #fff; border-radius: 1rem; padding: .2rem .7rem; cursor: pointer; }
.controls button[aria-pressed="true"] { background: #1d4ed8; color: #fff; border-color: #1d4ed8; }
#rows td.prompt { max-width: 26rem; } #rows .text { color: #333; }
#rows td.gold { background: #f0fdf4; }
.tag { font-size: .75rem; color: #555; border: 1px solid #cbd2d9; border-radius: .3rem; padding: 0 .3rem; }
.chip { font-size: .75rem; border-radius: .6rem; padding: 0 .4rem; color: #fff; }
.chip.high { background: #15803d; } .chip.mid { background: #b45309; } .chip.low { background: #b91c1c; }
.model { font-family: ui-monospace, monospace; font-size: .8rem; }
td.miss .model { color: #b91c1c; font-weight: 600; } td.hit .model { color: #15803d; }
.wrong { text-decoration: line-through; color: #b91c1c; }
.private { color: #7c3aed; font-weight: 600; } .refused { color: #b91c1c; }
.random { color: #888; font-weight: normal; font-size: .8rem; }
"""

SCRIPT = """
const rows = [...document.querySelectorAll('#rows tbody tr')];
const shown = document.getElementById('shown');
const only = document.getElementById('disagreements');
let group = 'all';
function apply() {
  let count = 0;
  for (const row of rows) {
    const visible = (group === 'all' || row.dataset.group === group) && (!only.checked || row.dataset.disagree === '1');
    row.hidden = !visible;
    if (visible) count++;
  }
  shown.textContent = count + ' of ' + rows.length + ' prompts';
}
for (const button of document.querySelectorAll('#groups button')) {
  button.addEventListener('click', () => {
    group = button.dataset.group;
    for (const other of document.querySelectorAll('#groups button')) other.setAttribute('aria-pressed', String(other === button));
    apply();
  });
}
only.addEventListener('change', apply);
apply();
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def trained(engine: dict[str, Any]) -> bool:
    """An engine whose weights were trained (not random, not the mock): the disagreements view's."""
    return not engine["random"] and engine["name"] != "mock"


def disagrees(engines: list[dict[str, Any]], prompt_id: str) -> bool:
    return any(not e["rows"][prompt_id].get("route_right", False) for e in engines if trained(e))


def bars(title: str, items: list[tuple[str, float, str]], scale: float, colour: str = "#1d4ed8") -> str:
    """A horizontal bar chart as inline SVG: (label, value, text shown) per bar."""
    width, label_w, bar_h, gap = 460, 150, 18, 6
    height = 28 + len(items) * (bar_h + gap)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" aria-label="{esc(title)}">',
             f'<text x="0" y="16" font-weight="600" font-size="13">{esc(title)}</text>']
    for i, (label, value, shown) in enumerate(items):
        y = 28 + i * (bar_h + gap)
        length = 0 if scale <= 0 else (width - label_w - 60) * max(0.0, value) / scale
        parts += [f'<text x="0" y="{y + 13}" font-size="12">{esc(label)}</text>',
                  f'<rect x="{label_w}" y="{y}" width="{length:.1f}" height="{bar_h}" fill="{colour}" rx="2"/>',
                  f'<text x="{label_w + length + 4:.1f}" y="{y + 13}" font-size="12">{esc(shown)}</text>']
    return "".join(parts) + "</svg>"


def charts(results: dict[str, Any]) -> str:
    engines = results["engines"]
    first = engines[0]["summary"]
    label = [e["name"] + (" (random)" if e["random"] else "") for e in engines]
    agreement = bars("Route = gold route", [(n, e["summary"]["route_agreement"] or 0, pct(e["summary"]["route_agreement"]))
                                            for n, e in zip(label, engines)], 1.0)
    topic = bars("Topic right", [(n, e["summary"]["topic_accuracy"] or 0, pct(e["summary"]["topic_accuracy"]))
                                 for n, e in zip(label, engines)], 1.0)
    costs = [(n, e["summary"]["cost_usd"], f"${e['summary']['cost_usd']:.2f}") for n, e in zip(label, engines)]
    costs += [("gold routes", first["gold_cost_usd"], f"${first['gold_cost_usd']:.2f}"),
              ("always the priciest", first["most_expensive_usd"], f"${first['most_expensive_usd']:.2f}")]
    cost = bars("Cost of the routes (USD)", costs, max(c for _, c, _ in costs), "#b45309")
    return f'<div class="charts">{agreement}{topic}{cost}</div>'


def summary_table(results: dict[str, Any]) -> str:
    threshold = results["meta"]["confidence_threshold"]
    head = ("<tr><th>engine</th><th>topic right</th><th>route = gold</th><th>confident (≥ "
            f"{threshold})</th><th>right when confident</th><th>pricier / cheaper than gold</th><th>routed cost</th>"
            "<th>private prompts that left the machine</th><th>decision p50</th></tr>")
    body = []
    for e in results["engines"]:
        s = e["summary"]
        latency = "-" if s["decision_ms_p50"] is None else f"{s['decision_ms_p50']:.0f} ms"
        name = esc(e["name"]) + (' <span class="random">random weights</span>' if e["random"] else "")
        cells = [pct(s["topic_accuracy"]), pct(s["route_agreement"]), pct(s["confident_share"]),
                 f"{pct(s['confident_accuracy'])} of {s['confident_count']}",
                 f"{s['pricier']} / {s['cheaper']}", f"${s['cost_usd']:.3f}", f"{s['left_machine']} of {s['private_prompts']}",
                 latency]
        body.append(f"<tr><td>{name}</td>" + "".join(f'<td class="n">{esc(c)}</td>' for c in cells) + "</tr>")
    return f'<table class="summary"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'


def routellm_results() -> dict[str, Any] | None:
    return json.loads(ROUTELLM.read_text(encoding="utf-8")) if ROUTELLM.exists() else None


def pgr_chart(name: str, regimes: dict[str, Any]) -> str:
    """PGR against the share of strong-model calls, one line per regime, as inline SVG."""
    size, pad = 220, 34
    lines = []
    for regime, colour in REGIMES.items():
        curve = (regimes.get(regime) or {}).get("curve")
        if curve:
            points = " ".join(f"{pad + x * size:.1f},{pad + (1 - y) * size:.1f}" for x, y in curve)
            lines.append(f'<polyline points="{points}" fill="none" stroke="{colour}" stroke-width="2"/>')
    legend = "".join(f'<text x="{pad + 6}" y="{pad + 16 + 15 * i}" font-size="11" fill="{c}">{esc(r)}</text>'
                     for i, (r, c) in enumerate((r, c) for r, c in REGIMES.items() if r in regimes))
    return (f'<svg role="img" aria-label="PGR {esc(name)}" width="{size + 2 * pad}" height="{size + 2 * pad}" '
            f'viewBox="0 0 {size + 2 * pad} {size + 2 * pad}">'
            f'<text x="{pad}" y="16" font-weight="600" font-size="13">{esc(name)}</text>'
            f'<rect x="{pad}" y="{pad}" width="{size}" height="{size}" fill="none" stroke="#cbd2d9"/>'
            f'<text x="{pad}" y="{pad + size + 16}" font-size="11">share of strong-model calls, 0 → 100 %</text>'
            f'<text x="4" y="{pad + 10}" font-size="11">PGR 1</text>{"".join(lines)}{legend}</svg>')


def routellm_section(results: dict[str, Any] | None) -> str:
    """The public router benchmark: APGR and CPT per benchmark and regime beside RouteLLM's
    published figures, and the PGR curves ("" without results)."""
    if results is None:
        return ""
    head = ("<tr><th>benchmark</th><th>prompts</th><th>regime</th><th>APGR</th><th>CPT(50 %)</th><th>CPT(80 %)</th>"
            "<th>RouteLLM's published figure</th></tr>")
    body, charts = [], []
    for name, regimes in results["benchmarks"].items():
        for regime in REGIMES:
            r = regimes.get(regime)
            if r is None:
                continue
            published = results.get("published", {}).get(name, "") if regime == "learned" or (
                regime == "zero-shot" and "learned" not in regimes) else ""
            cells = [name, results["rows"][name], regime, f"{r['apgr']:.3f}", pct(r["cpt50"]), pct(r["cpt80"]), published]
            body.append("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
        charts.append(pgr_chart(name, regimes))
    return f"""<h2>Public benchmark: RouteLLM</h2>
<p class="meta">RouteLLM's own per-prompt outcomes of gpt-4-1106 (strong) and Mixtral-8x7B (weak), replayed through the
router's decision with no chat model called (<code>make bench-routellm</code>,
<a href="../routellm/RESULTS.md">RESULTS.md</a>). zero-shot: the router as shipped, scored by its expected complexity;
learned: a head fitted from the outcomes (its form and regularisation chosen inside each training fold), scored on MMLU
domains and GSM8K folds it was not fitted on. Random is exact:
APGR 0.5. RouteLLM's figures are cost saved at 95 % of GPT-4's quality by routers trained on Chatbot Arena preferences,
not the same metric as APGR.</p>
<table class="routellm"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>
<div class="pgr">{"".join(charts)}</div>
"""


def chip(confidence: float, threshold: float) -> str:
    level = "high" if confidence >= threshold else "mid" if confidence >= 0.5 else "low"
    return f'<span class="chip {level}" title="topic confidence">{confidence:.2f}</span>'


def engine_cell(row: dict[str, Any], threshold: float) -> str:
    if "refused" in row:
        return f'<td class="miss"><span class="refused">refused ({row["refused"]})</span> {esc(row["error"] or "")}</td>'
    topic = esc(row["topic"] or "none")
    topic = topic if row["topic_right"] else f'<span class="wrong">{topic}</span>'
    arrow = {"pricier": " ↑", "cheaper": " ↓"}.get(row["direction"], "")
    private = ' <span class="private">private</span>' if row["private"] else ""
    left = ' <span class="refused">left the machine</span>' if row["left_machine"] else ""
    return (f'<td class="{"hit" if row["route_right"] else "miss"}">{topic} {chip(row["confidence"], threshold)} '
            f'c{row["complexity"]} r{row["risk"]}{private}<br><span class="model">{esc(row["model"])}{arrow}</span>{left}</td>')


def prompt_rows(results: dict[str, Any]) -> str:
    engines, gold, threshold = results["engines"], results["gold"], results["meta"]["confidence_threshold"]
    out = []
    for p in results["prompts"]:
        labels, route = p["gold"], gold[p["id"]]
        text = p["prompt"] if len(p["prompt"]) <= 240 else p["prompt"][:240] + " …"
        found = f' <span class="tag">pre-check: {esc(", ".join(route["findings"]))}</span>' if route["findings"] else ""
        cells = "".join(engine_cell(e["rows"][p["id"]], threshold) for e in engines)
        private = ' <span class="private">private</span>' if labels["private"] else ""
        out.append(
            f'<tr id="{esc(p["id"])}" data-group="{esc(p["group"])}" data-disagree="{int(disagrees(engines, p["id"]))}">'
            f'<td class="prompt"><b>{esc(p["id"])}</b> <span class="tag">{esc(p["group"])}</span>{found}'
            f'<div class="text" title="{esc(p["prompt"])}">{esc(text)}</div></td>'
            f'<td class="gold">{esc(labels["topic"])} c{labels["complexity"]} r{labels["risk"]}{private}<br>'
            f'<span class="model">{esc(route["model"])}</span></td>{cells}</tr>')
    return "".join(out)


def render(results: dict[str, Any], routellm: dict[str, Any] | None = None) -> str:
    meta, engines = results["meta"], results["engines"]
    groups = meta["groups"]
    counts = {g: sum(p["group"] == g for p in results["prompts"]) for g in groups}
    buttons = [f'<button data-group="all" aria-pressed="true">all ({len(results["prompts"])})</button>']
    buttons += [f'<button data-group="{esc(g)}" aria-pressed="false">{esc(g)} ({counts[g]})</button>' for g in groups]
    heads = "".join(f"<th>{esc(e['name'])}{' <span class=random>random</span>' if e['random'] else ''}</th>" for e in engines)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Router decision benchmark</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style></head>
<body>
<h1>Router decision benchmark</h1>
<p class="meta">{meta['prompts']} labelled prompts through every decision engine that runs on this machine, measured
{esc(meta['date'])} on {meta['cpus']} CPUs. Only decisions: each prompt goes to the gateway's dry run; no chat model is
called. Catalogue: the stack's <code>deploy/config.toml</code> with <code>private = "local_only"</code>. The gold route is
the router fed the gold labels; every route is priced at the gold complexity's token estimate. Confidence chips: green at
or above the router's threshold ({meta['confidence_threshold']}), amber from 0.5, red below. Engines marked random run
their real server code on random weights.</p>
<h2>Summary</h2>
{summary_table(results)}
{charts(results)}
{routellm_section(routellm)}<h2>Every prompt</h2>
<div class="controls"><div id="groups" role="group" aria-label="group">{"".join(buttons)}</div>
<label><input type="checkbox" id="disagreements"> disagreements only (an engine with trained weights routes away from gold)</label>
<span id="shown" aria-live="polite"></span></div>
<table id="rows"><thead><tr><th>prompt</th><th>gold</th>{heads}</tr></thead><tbody>{prompt_rows(results)}</tbody></table>
<script>{SCRIPT}</script>
</body></html>
"""


def chromium() -> str | None:
    return next((path for name in CHROMIUM if (path := shutil.which(name))), None)


def screenshot(page: Path, png: Path) -> None:
    """The page as Chromium's headless mode draws it (a throwaway profile; no sandbox as root)."""
    browser = chromium()
    if browser is None:
        raise RuntimeError("no Chromium on PATH: apt-get install chromium")
    with tempfile.TemporaryDirectory(prefix="report-shot-") as profile:
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--user-data-dir={profile}", f"--window-size={SHOT_SIZE[0]},{SHOT_SIZE[1]}",
                        f"--screenshot={png}", page.resolve().as_uri()],
                       check=True, capture_output=True, timeout=120)


def write_report(results: dict[str, Any], page: Path, png: Path) -> None:
    page.write_text(render(results, routellm_results()), encoding="utf-8")
    screenshot(page, png)


if __name__ == "__main__":
    write_report(json.loads((HERE / "decisions.json").read_text(encoding="utf-8")), HERE / "report.html",
                 HERE / "report.png")
    print(HERE / "report.html", file=sys.stderr)
