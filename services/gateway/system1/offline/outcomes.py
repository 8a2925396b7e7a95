"""`system1 outcomes`: did each Agent spawn get its job done? Labels from transcripts.

A spawn is `failed` when its tool result was an error, its task notification said `failed` or
`stopped`, its report says it was blocked, or a later spawn redid the same task (the same task
id, such as `W4-P3` or `Task 12`, with "previous attempt" or "retry", or the same role
re-spawned with the same description); otherwise `succeeded`. The tier is the model that
actually ran. Verdicts resting on wording (blocked, same-role redo) are listed as doubtful.
`--apply` writes `outcome`, `outcome_reason`, `outcome_tier` and `outcome_source: "auto"` into
the routing log's entries for the same `tool_use_id`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..routing.log import rewrite_entries
from .transcripts import Spawn

BLOCKED = re.compile(r"\b(i am|i'm|i was|got|am) blocked\b|\bblocked by\b|\bcannot proceed\b|\bunable to (complete|finish)\b", re.I)
TASK_ID = re.compile(r"\b([A-Z]\d+-[A-Z]\d+|Task \d+)\b")
REDO = re.compile(r"previous attempt|\bretry\b|try again", re.I)


@dataclass(frozen=True)
class Verdict:
    tool_use_id: str
    outcome: str  # "failed" | "succeeded"
    reason: str
    tier: str | None
    doubtful: bool


def judge(spawns: list[Spawn]) -> list[Verdict]:
    """One verdict per spawn, in order; `spawns` are one session's, oldest first."""
    verdicts = []
    for index, spawn in enumerate(spawns):
        later = spawns[index + 1:]
        reason, doubtful = None, False
        if spawn.is_error:
            reason = "the tool result was an error"
        elif spawn.status in ("failed", "stopped"):
            reason = f"the task notification said {spawn.status}"
        elif BLOCKED.search(spawn.result_text):
            reason, doubtful = "the report says it was blocked", True
        else:
            ids = set(TASK_ID.findall(spawn.prompt + " " + spawn.description))
            for other in later:
                text = other.prompt + " " + other.description
                if ids & set(TASK_ID.findall(text)) and REDO.search(text):
                    reason = "a later spawn redid the same task"
                    break
                if other.subagent_type == spawn.subagent_type and other.description and other.description == spawn.description:
                    reason, doubtful = "the same role was spawned again for the same task", True
                    break
        verdicts.append(Verdict(spawn.tool_use_id, "failed" if reason else "succeeded", reason or "", spawn.tier, doubtful))
    return verdicts


def summary(verdicts: list[Verdict]) -> dict[str, Any]:
    failed = [v for v in verdicts if v.outcome == "failed"]
    return {
        "spawns": len(verdicts),
        "failed": len(failed),
        "succeeded": len(verdicts) - len(failed),
        "failed_by_tier": dict(Counter(v.tier or "unknown" for v in failed)),
        "spawns_by_tier": dict(Counter(v.tier or "unknown" for v in verdicts)),
        "failure_reasons": dict(Counter(v.reason for v in failed)),
        "doubtful": [{"tool_use_id": v.tool_use_id, "outcome": v.outcome, "reason": v.reason} for v in verdicts if v.doubtful],
    }


def verdicts_of(raw: Any) -> list[Verdict]:
    """Verdicts sent as JSON (`{"verdicts": [{tool_use_id, outcome, reason, tier}]}`), checked;
    `ValueError` naming the item and field."""
    items = raw.get("verdicts") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        raise ValueError("verdicts: must be a list")
    found = []
    for index, item in enumerate(items):
        where = f"verdicts.{index}"
        if not isinstance(item, dict):
            raise ValueError(f"{where}: must be an object")
        tool_use_id, outcome = item.get("tool_use_id"), item.get("outcome")
        reason, tier = item.get("reason", ""), item.get("tier")
        if not isinstance(tool_use_id, str) or not tool_use_id:
            raise ValueError(f"{where}.tool_use_id: must be a non-empty string")
        if outcome not in ("failed", "succeeded"):
            raise ValueError(f"{where}.outcome: must be 'failed' or 'succeeded'")
        if not isinstance(reason, str) or (tier is not None and not isinstance(tier, str)):
            raise ValueError(f"{where}: reason and tier must be strings")
        doubtful = item.get("doubtful", False)
        if not isinstance(doubtful, bool):
            raise ValueError(f"{where}.doubtful: must be true or false")
        found.append(Verdict(tool_use_id, outcome, reason, tier, doubtful))
    return found


def as_json(verdicts: list[Verdict]) -> dict[str, Any]:
    return {"verdicts": [{"tool_use_id": v.tool_use_id, "outcome": v.outcome, "reason": v.reason, "tier": v.tier,
                          "doubtful": v.doubtful} for v in verdicts]}


def apply(log: Path, verdicts: list[Verdict]) -> int:
    """Write outcomes into the routing log's Agent entries; returns how many were labelled."""
    by_id = {v.tool_use_id: v for v in verdicts}

    def label(entry: dict[str, Any]) -> bool:
        verdict = by_id.get(entry.get("tool_use_id"))
        if verdict is None or entry.get("outcome_source") == "manual":
            return False
        entry.update(outcome=verdict.outcome, outcome_reason=verdict.reason, outcome_tier=verdict.tier, outcome_source="auto")
        return True

    return rewrite_entries(log, label)
