"""`system1 report`: is System-1 used, and does it pay off? Totals from transcripts only.

- reach: the share of prompts that got a routing hint;
- adherence: of the spawns made after a hint, the share that ran on the hinted tier;
- subagent cost by tier, from each spawn's token usage and the prices file;
- Agent spawns: how many named a model, how the ones after a hint compare with it (followed,
  upgraded past it, run below it), failures by tier (the rules of `outcomes`) and subagent types;
- realised savings: spawns that followed a hint, against the same tokens at the usual tier mix
  (the mix of spawns made without a hint); missed savings: spawns upgraded past a hint,
  against the hinted tier; overhead: the hint text the orchestrator reads on each hinted prompt.
Prices are per million tokens per tier (`input`, `output`, `cache_read`, `cache_write`);
API list prices compare tiers, a subscription bills differently.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from ..hook.rule import rank
from .spawn_outcomes import judge
from .transcripts import Session, Spawn

DEFAULT_PRICES = Path(__file__).with_name("prices.json")
HINT_TOKENS = 45  # the hint line as the orchestrator reads it
USAGE_KEYS = {"input_tokens": "input", "output_tokens": "output",
              "cache_read_input_tokens": "cache_read", "cache_creation_input_tokens": "cache_write"}


def load_prices(path: Path) -> dict[str, Any]:
    prices = json.loads(path.read_text(encoding="utf-8"))
    missing = [t for t in ("haiku", "sonnet", "opus") if t not in prices.get("tiers", {})]
    if missing:
        raise ValueError(f"{path}: no prices for {', '.join(missing)}")
    return prices


def cost(spawn: Spawn, tier: str, prices: dict[str, Any]) -> float:
    table = prices["tiers"][tier]
    return sum(spawn.usage.get(key, 0) * table.get(kind, 0.0) for key, kind in USAGE_KEYS.items()) / 1_000_000


def report(sessions: dict[str, Session], prices: dict[str, Any]) -> dict[str, Any]:
    spawns = [s for session in sessions.values() for s in session.spawns if s.tier]
    prompts = sum(s.prompts for s in sessions.values())
    hinted_prompts = sum(s.hinted_prompts for s in sessions.values())
    after_hint = [s for s in spawns if s.hinted]
    followed = [s for s in after_hint if s.tier == s.hinted]
    upgraded = [s for s in after_hint if rank(s.tier) > rank(s.hinted)]
    unhinted = Counter(s.tier for s in spawns if not s.hinted)
    total = sum(unhinted.values())
    mix = {t: n / total for t, n in unhinted.items()} if total else {}

    def usual(spawn: Spawn) -> float:
        return sum(share * cost(spawn, t, prices) for t, share in mix.items()) if mix else cost(spawn, spawn.tier, prices)

    realised = sum(usual(s) - cost(s, s.tier, prices) for s in followed)
    missed = sum(cost(s, s.tier, prices) - cost(s, s.hinted, prices) for s in upgraded)
    reader = prices.get("hint_reader", "opus")
    overhead = hinted_prompts * HINT_TOKENS * prices["tiers"][reader]["input"] / 1_000_000
    by_tier = Counter()
    spawns_by_tier = Counter()
    for spawn in spawns:
        by_tier[spawn.tier] += cost(spawn, spawn.tier, prices)
        spawns_by_tier[spawn.tier] += 1
    return {
        "agent_spawns": agent_spawns(sessions),
        "sessions": len(sessions),
        "prompts": prompts,
        "hinted_prompts": hinted_prompts,
        "reach": hinted_prompts / prompts if prompts else None,
        "spawns": len(spawns),
        "spawns_after_hint": len(after_hint),
        "adherence": len(followed) / len(after_hint) if after_hint else None,
        "spawns_by_tier": dict(spawns_by_tier),
        "cost_by_tier_usd": {t: round(v, 4) for t, v in by_tier.items()},
        "realised_savings_usd": round(realised, 4),
        "missed_savings_usd": round(missed, 4),
        "hint_overhead_usd": round(overhead, 4),
        "net_usd": round(realised - overhead, 4),
    }


def agent_spawns(sessions: dict[str, Session]) -> dict[str, Any]:
    """Every Agent spawn, whatever its tier: models named, hints against the tier that ran,
    failures by tier, subagent types."""
    spawns = [s for session in sessions.values() for s in session.spawns]
    verdicts = [v for session in sessions.values() for v in judge(session.spawns)]
    hinted = [s for s in spawns if s.hinted and s.tier]
    return {
        "spawns": len(spawns),
        "model_named": sum(s.requested is not None for s in spawns),
        "after_hint": {"followed": sum(s.tier == s.hinted for s in hinted),
                       "upgraded": sum(rank(s.tier) > rank(s.hinted) for s in hinted),
                       "below_hint": sum(rank(s.tier) < rank(s.hinted) for s in hinted)},
        "by_tier": dict(Counter(v.tier or "unknown" for v in verdicts)),
        "failed_by_tier": dict(Counter(v.tier or "unknown" for v in verdicts if v.outcome == "failed")),
        "by_subagent_type": dict(Counter(s.subagent_type or "unknown" for s in spawns).most_common()),
    }


def render(r: dict[str, Any], days: int) -> str:
    def pct(v: float | None) -> str:
        return "-" if v is None else f"{v:.0%}"

    tiers = ", ".join(f"{t} {r['spawns_by_tier'].get(t, 0)} (${r['cost_by_tier_usd'].get(t, 0):.2f})" for t in ("haiku", "sonnet", "opus"))
    agent = r["agent_spawns"]
    hints = agent["after_hint"]
    failed = ", ".join(f"{t} {agent['failed_by_tier'].get(t, 0)} of {n}" for t, n in sorted(agent["by_tier"].items(), key=lambda x: rank(x[0]) if x[0] != "unknown" else 9))
    kinds = ", ".join(f"{name} {n}" for name, n in list(agent["by_subagent_type"].items())[:5])
    return "\n".join([
        f"System-1 over the last {days} days: {r['sessions']} sessions, {r['prompts']} prompts",
        f"hint reach: {r['hinted_prompts']} hinted prompts ({pct(r['reach'])})",
        f"adherence: {pct(r['adherence'])} of {r['spawns_after_hint']} spawns after a hint ran on the hinted tier",
        f"Agent spawns: {agent['spawns']} ({agent['model_named']} named a model); after a hint {hints['followed']} followed it, "
        f"{hints['upgraded']} ran above it, {hints['below_hint']} below it",
        f"failed, by tier: {failed or '-'}; subagent types: {kinds or '-'}",
        f"subagents by tier: {tiers}",
        f"savings: realised ${r['realised_savings_usd']:.2f}, missed ${r['missed_savings_usd']:.2f}, "
        f"hint overhead ${r['hint_overhead_usd']:.2f}, net ${r['net_usd']:.2f}",
        "(API list prices from the prices file; a subscription bills differently)",
    ])
