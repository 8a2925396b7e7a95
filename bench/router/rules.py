"""Expected value against the step rule: the router's routes on the 80 prompts and on the two
blind router sets (bench/router/blind.jsonl, 100 prompts, and blind2.jsonl, 120, each written
apart from the 80 and from every training row, never tuned on), with the shipped MiniLM heads and
the stack's catalogue, beside three baselines, on a cost-quality frontier.

    python bench/router/rules.py        (make bench-router)

Each prompt goes through a served gateway's dry run twice, `[router] rule = "expected_value"`
and `"step"`, the catalogue's `private` as the stack ships it (`prefer_local`), every cloud tier
configured. Gold: the router's scoring fed the prompt's gold labels (the same for both rules: on
a sure decision they agree). A route is below the floor when its model would not clear the gold
labels' floor. Cost is priced at the gold complexity's token estimate, so two routes differ in
cost only by their model. Baselines: always the cheapest paid model, always the priciest, and a
random capable model (its expected figures). Writes rules.json, RULES.md and frontier.png.
"""

from __future__ import annotations

import json
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

from benchlib import served_gateway  # noqa: E402
from decisions import PROMPTS, body, config, dry_runs, gateway_env, gold_signals, read, stack_router  # noqa: E402
from local_engines import ENGINES  # noqa: E402
from system1.core.router_config import RouterSettings  # noqa: E402
from system1.router.conversation import from_openai  # noqa: E402
from system1.router.precheck import precheck  # noqa: E402
from system1.router.scoring import est_cost, route  # noqa: E402

SETS = {"the 80": PROMPTS, "blind 100": HERE / "blind.jsonl", "blind2 120": HERE / "blind2.jsonl"}
RULES = ("expected_value", "step")


def table() -> RouterSettings:
    return RouterSettings.model_validate(stack_router())


def gold_of(settings: RouterSettings, prompts: list[dict]) -> dict[str, dict]:
    """Per prompt: the gold model, the models over the gold floor, and each model's cost."""
    out = {}
    for p in prompts:
        needs = precheck(from_openai(body(p["prompt"])), settings.phone_regions).needs
        gold = route(settings, gold_signals(p["gold"]), needs)
        tokens = settings.est_output_tokens[p["gold"]["complexity"]]
        out[p["id"]] = {"model": gold.model, "over_floor": [c.id for c in gold.candidates if c.eligible],
                        "capable": [c.id for c in gold.candidates if c.why in ("", "below quality floor")],
                        "costs": {m.id: est_cost(m, needs.input_tokens, tokens) for m in settings.models}}
    return out


def figures(chosen: dict[str, str], gold: dict[str, dict]) -> dict[str, Any]:
    ids = list(chosen)
    gold_cost = sum(gold[i]["costs"][gold[i]["model"]] for i in ids)
    cost = sum(gold[i]["costs"].get(chosen[i], 0.0) for i in ids)
    return {"route_gold": sum(chosen[i] == gold[i]["model"] for i in ids) / len(ids),
            "below_floor": sum(chosen[i] not in gold[i]["over_floor"] for i in ids),
            "cost_usd": cost, "cost_vs_gold": cost / gold_cost if gold_cost else None}


def baselines(settings: RouterSettings, gold: dict[str, dict]) -> dict[str, dict[str, Any]]:
    paid = [m for m in settings.models if m.price.input + m.price.output > 0]
    ids = list(gold)
    out = {}
    for name, pick in (("always the cheapest paid", min), ("always the priciest", max)):
        def choice(i: str) -> str:
            usable = [m.id for m in paid if m.id in gold[i]["capable"]] or [m.id for m in paid]
            return pick(usable, key=lambda m: gold[i]["costs"][m])
        out[name] = figures({i: choice(i) for i in ids}, gold)
    # A random capable model: the figures averaged over every choice it could make.
    route_gold = below = cost = 0.0
    for i in ids:
        usable = gold[i]["capable"] or [m.id for m in settings.models]
        route_gold += sum(m == gold[i]["model"] for m in usable) / len(usable)
        below += sum(m not in gold[i]["over_floor"] for m in usable) / len(usable)
        cost += sum(gold[i]["costs"][m] for m in usable) / len(usable)
    gold_cost = sum(gold[i]["costs"][gold[i]["model"]] for i in ids)
    out["random capable"] = {"route_gold": route_gold / len(ids), "below_floor": below, "cost_usd": cost,
                             "cost_vs_gold": cost / gold_cost}
    out["gold"] = {"route_gold": 1.0, "below_floor": 0, "cost_usd": gold_cost, "cost_vs_gold": 1.0}
    return out


def run() -> dict[str, Any]:
    settings = table()
    engine = next(e for e in ENGINES if e.name == "minilm+heads")
    results: dict[str, Any] = {}
    with ExitStack() as stack, tempfile.TemporaryDirectory(prefix="router-rules-") as work:
        section, _ = engine.start(stack, Path(work))
        for rule in RULES:
            env = {k: v for k, v in gateway_env(settings).items() if k != "SYSTEM1_ROUTER_PRIVATE"}
            text = config(engine, section).replace("\n[router]\n", f'\n[router]\nrule = "{rule}"\n', 1)
            with served_gateway(text, env) as (url, _, _):
                for name, path in SETS.items():
                    prompts = read(path)
                    plans = dry_runs(url, prompts)
                    gold = gold_of(settings, prompts)
                    chosen = {p["id"]: plans[p["id"]].get("model", "") for p in prompts}
                    entry = results.setdefault(name, {"baselines": baselines(settings, gold), "rules": {}})
                    entry["rules"][rule] = {**figures(chosen, gold), "routes": chosen}
                    print(rule, name, {k: v for k, v in entry["rules"][rule].items() if k != "routes"}, flush=True)
    return results


def changed(results: dict[str, Any]) -> dict[str, dict[str, int]]:
    """How often the two rules chose differently, by the pair of models."""
    out = {}
    for name, entry in results.items():
        ev, step = entry["rules"]["expected_value"]["routes"], entry["rules"]["step"]["routes"]
        pairs: dict[str, int] = {}
        for i in ev:
            if ev[i] != step[i]:
                key = f"{step[i]} → {ev[i]}"
                pairs[key] = pairs.get(key, 0) + 1
        out[name] = dict(sorted(pairs.items(), key=lambda kv: -kv[1]))
    return out


def render(results: dict[str, Any]) -> str:
    lines = ["# Expected value against the step rule", "",
             "`make bench-router` (`bench/router/rules.py`): MiniLM with its shipped heads (the router's read e5), "
             "the stack's catalogue "
             "(`private = \"prefer_local\"`, every cloud tier configured), each prompt's dry run under each rule. "
             "Gold: the router's scoring fed the gold labels. Below the floor: the model would not clear the gold "
             "labels' floor. Cost at the gold complexity's token estimate. The blind 100 and blind2 120 were written "
             "apart from the 80 and from every training row and never tuned on.", ""]
    for name, entry in results.items():
        lines += [f"## {name}", "", "| router | route = gold | routes below the gold floor | routed cost | × gold |",
                  "|---|---|---|---|---|"]
        for label, f in [*((f"rule = {r}", entry["rules"][r]) for r in RULES), *entry["baselines"].items()]:
            below = f["below_floor"]
            lines.append(f"| {label} | {100 * f['route_gold']:.0f} % | {below:.1f} | ${f['cost_usd']:.3f} | "
                         f"{f['cost_vs_gold']:.2f} |" if isinstance(below, float) else
                         f"| {label} | {100 * f['route_gold']:.0f} % | {below} | ${f['cost_usd']:.3f} | "
                         f"{f['cost_vs_gold']:.2f} |")
        lines.append("")
    lines += ["## Where the rules differ (step → expected value)", ""]
    for name, pairs in changed(results).items():
        lines.append(f"- {name}: " + ("; ".join(f"{k}: {v}" for k, v in pairs.items()) or "no prompt"))
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5.2 * len(results), 4))
    for ax, (name, entry) in zip(axes, results.items()):
        prompts = len(entry["rules"]["step"]["routes"])
        points = {**{f"rule = {r}": entry["rules"][r] for r in RULES}, **entry["baselines"]}
        for label, f in points.items():
            ax.scatter(f["cost_usd"], 100 * (1 - f["below_floor"] / prompts), s=40)
            ax.annotate(label, (f["cost_usd"], 100 * (1 - f["below_floor"] / prompts)), fontsize=7,
                        xytext=(4, 3), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_xlabel("routed cost, USD (log)")
        ax.set_ylabel("routes that clear the gold floor (%)")
        ax.set_title(name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    results = run()
    (HERE / "rules.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    (HERE / "RULES.md").write_text(render(results), encoding="utf-8")
    plot(results, HERE / "frontier.png")
    print(render(results))


if __name__ == "__main__":
    main()
