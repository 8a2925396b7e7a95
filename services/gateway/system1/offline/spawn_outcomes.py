"""`system1 outcomes`: did each Agent spawn get its job done? Labels from transcripts.

A spawn is `failed` when its tool result was an error, its task notification said `failed` or
`stopped`, its report says it was blocked, or a later spawn redid the same task (the same task
id, such as `W4-P3` or `Task 12`, with "previous attempt" or "retry", or the same role
re-spawned with the same description); otherwise `succeeded`. The tier is the model that
actually ran. Verdicts resting on wording (blocked, same-role redo) are listed as doubtful.
`--apply` writes them into the routing log (`hook.log.write_outcomes`).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from ..hook.log import SpawnVerdict
from .transcripts import Spawn

BLOCKED = re.compile(r"\b(i am|i'm|i was|got|am) blocked\b|\bblocked by\b|\bcannot proceed\b|\bunable to (complete|finish)\b", re.I)
TASK_ID = re.compile(r"\b([A-Z]\d+-[A-Z]\d+|Task \d+)\b")
REDO = re.compile(r"previous attempt|\bretry\b|try again", re.I)


def judge(spawns: list[Spawn]) -> list[SpawnVerdict]:
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
        verdicts.append(SpawnVerdict(spawn.tool_use_id, "failed" if reason else "succeeded", reason or "", spawn.tier, doubtful))
    return verdicts


def summary(verdicts: list[SpawnVerdict]) -> dict[str, Any]:
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
