"""The router's decision benchmark: the 80 labelled prompts through every decision engine that
runs on this machine, with the router and the catalogue of the stack's own config.

    python bench/router/decisions.py [--only minilm,mock] [--report]      (make bench-router)

Only decisions are measured: each prompt goes to the gateway's dry run (`POST /v1/router/route`,
served by `system1 serve`), which asks the engine the four questions and scores the catalogue;
no chat model is called. The catalogue is `[router]` of deploy/config.toml with
`private = "local_only"`, every cloud tier counted as configured (its key variable set to a
placeholder no request ever carries). Each prompt's gold route is the router's own scoring fed
the prompt's gold labels.

Engines (bench/local_engines.py): MiniLM (serve.py), MiniLM with the gateway's shipped learned
heads for the router's four kinds, llama-server with the Gemma 3 270M model, laya on a tiny
random checkpoint (labelled random: its decisions are chance) and the mock. The heads were
fitted by `system1 learn` on calibration/router-seed.jsonl, whose prompts are not among these
80: every prompt here is held out from them.

Every route is priced at the same token estimate, the gold complexity's, so two routes differ in
cost only by the model they chose. Writes decisions.json, DECISIONS.md, decisions.png and the
interactive report (report.html, with a screenshot, report.png) beside this file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import tomllib
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE.parent), str(HERE), str(ROOT / "services" / "gateway")]

from benchlib import percentile, served_gateway  # noqa: E402
from local_engines import ENGINES, Engine  # noqa: E402
from report import write_report  # noqa: E402
from system1.core.heads import SHIPPED_HEADS  # noqa: E402
from system1.core.router_config import RouterSettings  # noqa: E402
from system1.router.conversation import from_openai  # noqa: E402
from system1.router.precheck import precheck  # noqa: E402
from system1.router.scoring import Signals, est_cost, route  # noqa: E402

PROMPTS = HERE / "prompts.jsonl"
STACK_CONFIG = ROOT / "deploy" / "config.toml"
NAMES = ("minilm", "minilm+heads", "llama-gemma", "laya", "mock")


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def router_table() -> str:
    """The `[router]` part of the stack's config, as written there (it is the file's last part)."""
    text = STACK_CONFIG.read_text(encoding="utf-8")
    table = text[text.index("\n[router]\n") + 1:]
    if set(tomllib.loads(table)) != {"router"}:
        raise RuntimeError(f"{STACK_CONFIG}: expected [router] and its sub-tables to end the file")
    return table


def stack_router() -> dict[str, Any]:
    """The stack's `[router]` table, parsed."""
    return tomllib.loads(router_table())["router"]


def settings() -> RouterSettings:
    return RouterSettings.model_validate({**stack_router(), "private": "local_only"})


def config(engine: Engine, section: str) -> str:
    learning = 'enabled = true\nembedder = "systemone"' if engine.heads else "enabled = false"
    return (f'[gateway]\nprovider = "{engine.provider}"\nmin_confidence = 0\ntimeout_s = 120\n'
            f"[learning]\n{learning}\n{section}\n{router_table()}")


def gateway_env(table: RouterSettings) -> dict[str, str]:
    """`private = "local_only"`, and a placeholder for every cloud tier's key, so that each
    counts as configured (a dry run sends nothing upstream)."""
    keys = {u.api_key_env: "bench-placeholder" for u in table.upstreams.values() if u.api_key_env}
    return {"SYSTEM1_ROUTER_PRIVATE": "local_only", **keys}


def body(prompt: str) -> dict[str, Any]:
    return {"model": "auto", "messages": [{"role": "user", "content": prompt}]}


def gold_signals(gold: dict[str, Any]) -> Signals:
    return Signals({gold["topic"]: 1.0}, 1.0, gold["complexity"], gold["risk"], gold["private"])


# -- asking --------------------------------------------------------------------------------------
def dry_runs(url: str, prompts: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each prompt's plan from the dry run (or the refusal it got), by prompt id."""
    plans = {}
    with httpx.Client(timeout=300) as client:
        client.post(f"{url}/v1/router/route", json=body("warm-up: hello"))
        for p in prompts:
            response = client.post(f"{url}/v1/router/route", json=body(p["prompt"]))
            plans[p["id"]] = response.json() if response.status_code == 200 else {
                "refused": response.status_code, "error": response.json().get("error", {}).get("message")}
    return plans


def run_engine(engine: Engine, prompts: list[dict[str, Any]]) -> dict[str, Any]:
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix=f"router-bench-{engine.name}-") as work:
        section, _ = engine.start(stack, Path(work))
        with served_gateway(config(engine, section), gateway_env(settings())) as (url, _, _):
            plans = dry_runs(url, prompts)
    return {"name": engine.name, "random": engine.random, "plans": plans, "heads": shipped_heads() if engine.heads else []}


def shipped_heads() -> list[dict[str, Any]]:
    """The router's heads the gateway ships, with their held-out figures from `system1 learn`."""
    heads = json.loads(SHIPPED_HEADS.read_text(encoding="utf-8"))["heads"]
    return [{k: h.get(k) for k in ("kind", "n", "accuracy", "engine_accuracy")} for h in heads
            if h["kind"].startswith("router-")]


# -- scoring -------------------------------------------------------------------------------------
def gold_routes(table: RouterSettings, prompts: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per prompt: the gold route, and every model's cost at the gold complexity's token estimate."""
    out = {}
    for p in prompts:
        check = precheck(from_openai(body(p["prompt"])), table.phone_regions)
        needs = check.needs
        gold = route(table, gold_signals(p["gold"]), needs)
        tokens = table.est_output_tokens[p["gold"]["complexity"]]
        costs = {m.id: est_cost(m, needs.input_tokens, tokens) for m in table.models}
        out[p["id"]] = {"model": gold.model, "costs": costs, "findings": list(check.findings)}
    return out


def judged(table: RouterSettings, prompt: dict[str, Any], plan: dict[str, Any], gold: dict[str, Any]) -> dict[str, Any]:
    """One engine's decision on one prompt, against the gold labels and route."""
    if "refused" in plan:
        return {"refused": plan["refused"], "error": plan["error"], "left_machine": False}
    signals, labels = plan["signals"], prompt["gold"]
    model = plan["model"]
    cost, gold_cost = gold["costs"].get(model, 0.0), gold["costs"][gold["model"]]
    remote = [m for m in plan["order"] if not table.is_local(table.model(m))]
    return {
        "topic": signals["primary"], "confidence": signals["confidence"], "topic_right": signals["primary"] == labels["topic"],
        "complexity": round(signals["complexity_score"]), "risk": round(signals["risk_score"]),
        "private": signals["private"], "model": model, "reason": plan["reason"],
        "route_right": model == gold["model"], "cost": cost,
        "direction": "same" if model == gold["model"] else "pricier" if cost > gold_cost else "cheaper" if cost < gold_cost else "other, same price",
        "left_machine": labels["private"] and bool(remote), "decision_ms": plan["decision_ms"],
        "decision_error": plan["decision_error"],
    }


def share(values: list[bool]) -> float | None:
    return sum(values) / len(values) if values else None


def summary(table: RouterSettings, prompts: list[dict[str, Any]], rows: dict[str, dict[str, Any]],
            gold: dict[str, dict[str, Any]]) -> dict[str, Any]:
    answered = [rows[p["id"]] for p in prompts if "refused" not in rows[p["id"]]]
    labels = {p["id"]: p["gold"] for p in prompts}
    confident = [r for r in answered if r["confidence"] >= table.confidence_threshold]
    by_group: dict[str, Any] = {}
    for group in dict.fromkeys(p["group"] for p in prompts):
        mine = [rows[p["id"]] for p in prompts if p["group"] == group and "refused" not in rows[p["id"]]]
        by_group[group] = {"topic": share([r["topic_right"] for r in mine]), "route": share([r["route_right"] for r in mine])}
    private = [p["id"] for p in prompts if p["gold"]["private"]]
    latencies = [r["decision_ms"] for r in answered if r["decision_ms"] is not None]
    return {
        "prompts": len(prompts), "refused": len(prompts) - len(answered),
        "topic_accuracy": share([r["topic_right"] for r in answered]),
        "complexity_accuracy": share([r["complexity"] == labels[i]["complexity"] for i, r in rows.items() if "refused" not in r]),
        "risk_accuracy": share([r["risk"] == labels[i]["risk"] for i, r in rows.items() if "refused" not in r]),
        "private_found": sum(bool(rows[i].get("private")) for i in private), "private_prompts": len(private),
        "private_false_alarms": sum(bool(r.get("private")) for i, r in rows.items() if not labels[i]["private"]),
        "route_agreement": share([r["route_right"] for r in answered]),
        "confident_share": share([r["confidence"] >= table.confidence_threshold for r in answered]),
        "confident_accuracy": share([r["topic_right"] for r in confident]), "confident_count": len(confident),
        "pricier": sum(r["direction"] == "pricier" for r in answered),
        "cheaper": sum(r["direction"] == "cheaper" for r in answered),
        "other_same_price": sum(r["direction"] == "other, same price" for r in answered),
        "cost_usd": sum(r["cost"] for r in answered),
        "gold_cost_usd": sum(gold[p["id"]]["costs"][gold[p["id"]]["model"]] for p in prompts),
        "most_expensive_usd": sum(max(gold[p["id"]]["costs"].values()) for p in prompts),
        "left_machine": sum(r["left_machine"] for r in rows.values()),
        "decision_errors": sum(bool(r.get("decision_error")) for r in answered),
        "decision_ms_p50": percentile(latencies, 50) if latencies else None,
        "by_group": by_group,
    }


# -- report --------------------------------------------------------------------------------------
def pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def render(results: dict[str, Any]) -> str:
    meta, engines = results["meta"], results["engines"]
    lines = [
        "# Router decision benchmark: results", "",
        f"Measured {meta['date']} on {meta['cpus']} CPUs, Python {meta['python']}, with `python bench/router/decisions.py` "
        f"(`make bench-router`): {meta['prompts']} labelled prompts (`prompts.jsonl`), the catalogue of "
        "`deploy/config.toml` with `private = \"local_only\"` and every cloud tier counted as configured. Only "
        "decisions are made (the dry run); no chat model is called. Raw figures: `decisions.json`; chart: "
        "`decisions.png`; every prompt and every engine's decision: [report.html](report.html) (a screenshot: "
        "`report.png`).", "",
        "Engines marked *random* run their real server code on a tiny checkpoint with random weights: their "
        "decisions are chance. The mock answers every question with its first option.", "",
        f"| engine | topic right | route = gold | confident (≥ {meta['confidence_threshold']}) | right when confident | "
        "pricier / cheaper than gold | routed cost | private prompts that left the machine | decision p50 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for e in engines:
        s = e["summary"]
        name = e["name"] + (" *(random)*" if e["random"] else "")
        latency = "-" if s["decision_ms_p50"] is None else f"{s['decision_ms_p50']:.0f} ms"
        lines.append(f"| {name} | {pct(s['topic_accuracy'])} | {pct(s['route_agreement'])} | {pct(s['confident_share'])} | "
                     f"{pct(s['confident_accuracy'])} of {s['confident_count']} | {s['pricier']} / {s['cheaper']} | ${s['cost_usd']:.3f} | "
                     f"{s['left_machine']} of {s['private_prompts']} | {latency} |")
    first = engines[0]["summary"]
    lines += ["", f"Cost of the {meta['prompts']} routes, each priced at the gold complexity's token estimate: gold routes "
              f"${first['gold_cost_usd']:.3f}; always the most expensive model ${first['most_expensive_usd']:.3f}.", "",
              "Topic and route agreement by group:", "",
              "| engine | " + " | ".join(meta["groups"]) + " |", "|---|" + "---|" * len(meta["groups"])]
    for e in engines:
        cells = [f"{pct(e['summary']['by_group'][g]['topic'])} / {pct(e['summary']['by_group'][g]['route'])}" for g in meta["groups"]]
        lines.append(f"| {e['name']} | " + " | ".join(cells) + " |")
    lines += ["", "Private data found by the decision (the pre-check finds the credentials and identifiers on its own), "
              "and complexity and risk levels equal to gold:", "",
              "| engine | private found | false alarms | complexity = gold | risk = gold |", "|---|---|---|---|---|"]
    for e in engines:
        s = e["summary"]
        lines.append(f"| {e['name']} | {s['private_found']} of {s['private_prompts']} | {s['private_false_alarms']} | "
                     f"{pct(s['complexity_accuracy'])} | {pct(s['risk_accuracy'])} |")
    heads = next((e for e in engines if e["heads"]), None)
    if heads:
        lines += ["", f"The learned heads of {heads['name']} (shipped in `core/heads.json`, fitted by `system1 learn` on "
                  "`calibration/router-seed.jsonl`, none of whose prompts is one of these 80): held-out accuracy on "
                  "their own rows, raw engine → head (`calibration/reports/heads-systemone-all-MiniLM-L6-v2.md`):", "",
                  "| kind | rows | raw engine → head |", "|---|---|---|"]
        for h in heads["heads"]:
            lines.append(f"| {h['kind']} | {h['n']} | {pct(h['engine_accuracy'])} → {pct(h['accuracy'])} |")
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    engines = results["engines"]
    names = [e["name"] + (" (random)" if e["random"] else "") for e in engines]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
    measures = (("topic_accuracy", "topic right"), ("route_agreement", "route = gold"),
                ("confident_accuracy", "right when confident"))
    width = 0.25
    for offset, (key, label) in enumerate(measures):
        left.barh([i + offset * width for i in range(len(engines))], [e["summary"][key] or 0 for e in engines],
                  height=width, label=label)
    left.set_yticks([i + width for i in range(len(engines))], names)
    left.invert_yaxis()
    left.set_xlim(0, 1)
    left.set_xlabel("share of the 80 prompts")
    left.legend(fontsize=8, loc="lower right")
    first = engines[0]["summary"]
    bars = [*names, "gold routes", "always the priciest"]
    costs = [e["summary"]["cost_usd"] for e in engines] + [first["gold_cost_usd"], first["most_expensive_usd"]]
    right.barh(bars, costs, color=["tab:blue"] * len(engines) + ["tab:green", "tab:red"])
    right.invert_yaxis()
    right.set_xlabel("cost of the 80 routes (USD, same token estimate)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def results_of(runs: list[dict[str, Any]], prompts: list[dict[str, Any]]) -> dict[str, Any]:
    table = settings()
    gold = gold_routes(table, prompts)
    engines = []
    for run in runs:
        rows = {p["id"]: judged(table, p, run["plans"][p["id"]], gold[p["id"]]) for p in prompts}
        engines.append({"name": run["name"], "random": run["random"], "heads": run["heads"],
                        "summary": summary(table, prompts, rows, gold), "rows": rows})
    meta = {"date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(), "python": platform.python_version(),
            "prompts": len(prompts), "groups": list(dict.fromkeys(p["group"] for p in prompts)),
            "confidence_threshold": table.confidence_threshold, "private": "local_only"}
    return {"meta": meta, "prompts": prompts, "gold": gold, "engines": engines}


def write(results: dict[str, Any]) -> None:
    (HERE / "decisions.json").write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (HERE / "DECISIONS.md").write_text(render(results), encoding="utf-8")
    plot(results, HERE / "decisions.png")
    write_report(results, HERE / "report.html", HERE / "report.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated engine names (default: " + ",".join(NAMES) + ")")
    parser.add_argument("--report", action="store_true", help="only write the reports from decisions.json")
    args = parser.parse_args()
    if args.report:
        write(json.loads((HERE / "decisions.json").read_text(encoding="utf-8")))
        return
    wanted = [n for n in NAMES if n in set(filter(None, args.only.split(",")))] or list(NAMES)
    prompts = read(PROMPTS)
    runs = []
    for engine in (e for name in wanted for e in ENGINES if e.name == name):
        print(f"{engine.name}: {len(prompts)} prompts", file=sys.stderr, flush=True)
        started = time.monotonic()
        runs.append(run_engine(engine, prompts))
        print(f"{engine.name}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    results = results_of(runs, prompts)
    write(results)
    print(render(results))


if __name__ == "__main__":
    main()
