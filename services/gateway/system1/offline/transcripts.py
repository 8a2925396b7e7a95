"""Reading Claude Code transcripts (`~/.claude/projects/<project>/<session>.jsonl`).

What is read, line by line (other lines and fields are ignored):
- `type: "assistant"` lines: `message.content[]` blocks `{"type": "tool_use", "name": "Task" |
  "Agent", "id", "input": {"description", "prompt", "subagent_type", "model"?}}` are spawns;
  `message.model` and `message.usage` are the orchestrator's own turns.
- `type: "user"` lines: `message.content[]` blocks `{"type": "tool_result", "tool_use_id",
  "content", "is_error"?}` are a spawn's result, with the line's `toolUseResult` (`usage`,
  `resolvedModel`) when present; a text containing `<task-notification>` reports a background
  agent's `<status>`; other text is a user prompt.
- any line whose text carries the routing hook's hint marks the prompt it answered as hinted.
Every line has a `timestamp` (ISO 8601). Only aggregates leave this module's callers; prompt
text is read for matching, never printed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..hook.rule import TIERS

AGENT_TOOLS = {"Task", "Agent"}
# The current wording, and the one before it (older transcripts).
HINT = re.compile(r"System-1 routing hint: (?:the local System-1 Gateway classifies this task as |the task reads like an? )"
                  r"(haiku|sonnet|opus)\b")
NOTIFICATION = re.compile(r"<task-notification>.*?</task-notification>", re.S)
STATUS = re.compile(r"<status>\s*(\w+)\s*</status>")


def tier_of(model: str | None) -> str | None:
    if not model:
        return None
    lowered = model.lower()
    return next((t for t in TIERS if t in lowered), None)


@dataclass
class Spawn:
    tool_use_id: str
    session: str
    when: datetime
    description: str
    prompt: str
    subagent_type: str
    requested: str | None  # the model the orchestrator asked for, if any
    hinted: str | None = None  # the tier the last routing hint suggested, if one was given
    result_text: str = ""
    is_error: bool = False
    status: str | None = None  # from a task notification
    resolved: str | None = None  # the model that actually ran
    usage: dict[str, int] = field(default_factory=dict)

    @property
    def tier(self) -> str | None:
        return tier_of(self.resolved) or tier_of(self.requested)


@dataclass
class Session:
    prompts: int = 0
    hinted_prompts: int = 0
    spawns: list[Spawn] = field(default_factory=list)


def _when(line: dict[str, Any]) -> datetime:
    raw = line.get("timestamp") or "1970-01-01T00:00:00Z"
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return datetime.fromtimestamp(0, timezone.utc)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(c.get("text") if isinstance(c, dict) and "text" in c else c.get("content") if isinstance(c, dict) else c) for c in content)
    return "" if content is None else str(content)


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8", errors="replace") as handle:
        for raw in handle:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict):
                yield line


def read_sessions(projects_dir: Path, days: int, now: datetime | None = None) -> dict[str, Session]:
    """Every session with activity in the last `days` days."""
    since = (now or datetime.now(timezone.utc)) - timedelta(days=days)
    sessions: dict[str, Session] = {}
    for path in sorted(projects_dir.glob("*/*.jsonl")):
        session = Session()
        spawns: dict[str, Spawn] = {}
        hinted: str | None = None
        for line in _lines(path):
            when = _when(line)
            if when < since:
                continue
            message = line.get("message") if isinstance(line.get("message"), dict) else {}
            content = message.get("content")
            blocks = content if isinstance(content, list) else []
            text = _text(content)
            results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
            if line.get("type") == "user" and not results and text.strip() and "<task-notification>" not in text:
                session.prompts += 1
                hinted = None  # a new prompt: an earlier hint no longer applies
            match = HINT.search(json.dumps(line))
            if match:
                hinted = match.group(1)
                session.hinted_prompts += 1
            if line.get("type") == "assistant":
                for block in blocks:
                    if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") in AGENT_TOOLS:
                        data = block.get("input") or {}
                        spawn = Spawn(str(block.get("id")), path.stem, when, str(data.get("description", "")),
                                      str(data.get("prompt", "")), str(data.get("subagent_type", "")), data.get("model"),
                                      hinted)
                        spawns[spawn.tool_use_id] = spawn
                        session.spawns.append(spawn)
            elif line.get("type") == "user":
                for block in results:
                    spawn = spawns.get(str(block.get("tool_use_id")))
                    if spawn is None:
                        continue
                    spawn.result_text = _text(block.get("content"))
                    spawn.is_error = bool(block.get("is_error"))
                    extra = line.get("toolUseResult") if isinstance(line.get("toolUseResult"), dict) else {}
                    spawn.resolved = extra.get("resolvedModel") or spawn.resolved
                    spawn.usage = {k: int(v) for k, v in (extra.get("usage") or {}).items() if isinstance(v, (int, float))}
                for note in NOTIFICATION.findall(text):
                    status = STATUS.search(note)
                    for spawn in spawns.values():
                        if spawn.tool_use_id in note and status:
                            spawn.status = status.group(1).lower()
        if session.prompts or session.spawns:
            sessions[path.stem] = session
    return sessions
