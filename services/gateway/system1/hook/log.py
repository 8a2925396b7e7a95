"""The routing log: prompts and features, written only for directories that opted in.

Every entry has an `id`. Teacher labels for the four features (`labels`) are written into a
prompt's entry by id (`write_labels`, from `POST /v1/routing/labels`), outcomes into an Agent
spawn's entry by tool use id (`write_outcomes`, from `system1 outcomes --apply` or `POST /v1/outcomes`); `evaluate` reads both, and
`calibrate` and `learn` take the teacher labels as rows (`teacher_rows`).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..core.files import write_whole
from .features import FEATURES


def home_of(client: str) -> str:
    """Where `~` in `log_dirs` points for a caller: `/root` for root, else `/home/<client>`.
    The gateway never takes a home directory from the request itself."""
    return "/root" if client == "root" else f"/home/{client}"


def logged_dir(cwd: str, log_dirs: list[str], client: str) -> bool:
    """Whether `cwd` is one of `log_dirs` or below one, by whole path components (so
    `/src/app-2` is not inside `/src/app`). Paths are the client's, compared as text."""
    if not cwd:
        return False
    where = PurePosixPath(cwd)
    for entry in log_dirs:
        if entry.startswith("~"):
            entry = home_of(client) + entry[1:]
        base = PurePosixPath(entry)
        if where == base or base in where.parents:
            return True
    return False


def _entries(path: Path) -> Iterator[dict[str, Any] | None]:
    """Each line's entry, or None for a line that is not a JSON object; nothing for a missing log."""
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return
    with handle:
        for line in handle:
            if line.strip():
                try:
                    entry = json.loads(line)
                except ValueError:
                    entry = None
                yield entry if isinstance(entry, dict) else None


def evaluable_entries(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The log's entries worth evaluating (a prompt, and teacher labels or an outcome), and how
    many lines were not JSON objects (skipped)."""
    entries, unreadable = [], 0
    for entry in _entries(path):
        if entry is None:
            unreadable += 1
        elif isinstance(entry.get("prompt"), str) and (entry.get("labels") or entry.get("outcome")):
            entries.append(entry)
    return entries, unreadable


def waiting(entry: dict[str, Any] | None) -> bool:
    """A logged prompt with no teacher labels yet."""
    return entry is not None and entry.get("source") == "prompt" and not entry.get("labels")


def waiting_prompts(path: Path, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` prompts waiting for labels: id, prompt and the engine's features."""
    found = [{"id": e.get("id"), "prompt": e.get("prompt"), "features": e.get("features")}
             for e in _entries(path) if waiting(e) and e.get("id")]
    return found[-limit:] if limit else []


def rewrite_entries(path: Path, change: Callable[[dict[str, Any]], bool]) -> int:
    """Call `change` on every entry (True when it changed it) and replace the file whole, never
    half-written; lines that are not JSON objects stay as they were. How many entries changed."""
    if not path.exists():
        return 0
    lines, changed = [], 0
    for raw in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            entry = None
        if isinstance(entry, dict) and change(entry):
            raw, changed = json.dumps(entry, ensure_ascii=False), changed + 1
        lines.append(raw)
    write_whole(path, "\n".join(lines) + "\n")
    return changed


def write_labels(path: Path, labels: dict[str, dict[str, str]]) -> int:
    """Set the teacher labels of the prompt entries whose id is in `labels` (merged into any
    already there); how many entries changed."""

    def label(entry: dict[str, Any]) -> bool:
        if entry.get("source") != "prompt" or entry.get("id") not in labels:
            return False
        entry["labels"] = {**(entry.get("labels") or {}), **labels[entry["id"]]}
        return True

    return rewrite_entries(path, label)


def labels_of(raw: Any) -> dict[str, dict[str, str]]:
    """Teacher labels sent as JSON (`{"labels": [{"id", "labels": {feature: "yes" | "no"}}]}`),
    checked, by entry id; `ValueError` naming the item and field."""
    items = raw.get("labels") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        raise ValueError("labels: must be a list")
    found: dict[str, dict[str, str]] = {}
    for index, item in enumerate(items):
        where = f"labels.{index}"
        if not isinstance(item, dict) or set(item) - {"id", "labels"}:
            raise ValueError(f"{where}: must be an object with 'id' and 'labels'")
        entry_id, given = item.get("id"), item.get("labels")
        if not isinstance(entry_id, str) or not entry_id:
            raise ValueError(f"{where}.id: must be a non-empty string")
        if not isinstance(given, dict) or not given:
            raise ValueError(f"{where}.labels: must map features to 'yes' or 'no'")
        for name, value in given.items():
            if name not in FEATURES:
                raise ValueError(f"{where}.labels.{name}: not a routing feature ({', '.join(FEATURES)})")
            if value not in ("yes", "no"):
                raise ValueError(f"{where}.labels.{name}: must be 'yes' or 'no'")
        found[entry_id] = {**found.get(entry_id, {}), **given}
    return found


def teacher_rows(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Labelled rows for `calibrate` and `learn`: one per feature label of each entry, asked as
    the hook asks it (the feature's question about `{"prompt": ...}`)."""
    return [{"question": FEATURES[name], "context": {"prompt": entry["prompt"]}, "label": value}
            for entry in entries for name, value in (entry.get("labels") or {}).items()
            if name in FEATURES and value in ("yes", "no")]


#: The entries that hold a prompt the four features were asked about.
PROMPT_SOURCES = frozenset({"prompt", "agent"})


def pool_rows(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """Unlabelled rows for a teacher (`system1 learn --teacher … --pool`): each feature no label
    was written for, asked as the hook asks it, for an entry with a prompt."""
    prompt = entry.get("prompt")
    if entry.get("source") not in PROMPT_SOURCES or not isinstance(prompt, str) or not prompt.strip():
        return []
    labelled = entry.get("labels") if isinstance(entry.get("labels"), dict) else {}
    return [{"question": question, "context": {"prompt": prompt}}
            for name, question in FEATURES.items() if name not in labelled]


@dataclass(frozen=True)
class SpawnVerdict:
    """Whether an Agent spawn got its job done (`system1 outcomes`), by its tool use id."""

    tool_use_id: str
    outcome: str  # "failed" | "succeeded"
    reason: str
    tier: str | None
    doubtful: bool


def verdicts_of(raw: Any) -> list[SpawnVerdict]:
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
        found.append(SpawnVerdict(tool_use_id, outcome, reason, tier, doubtful))
    return found


def as_json(verdicts: list[SpawnVerdict]) -> dict[str, Any]:
    return {"verdicts": [{"tool_use_id": v.tool_use_id, "outcome": v.outcome, "reason": v.reason, "tier": v.tier,
                          "doubtful": v.doubtful} for v in verdicts]}


def write_outcomes(log: Path, verdicts: list[SpawnVerdict]) -> int:
    """Write outcomes into the routing log's Agent entries; returns how many were labelled."""
    by_id = {v.tool_use_id: v for v in verdicts}

    def label(entry: dict[str, Any]) -> bool:
        verdict = by_id.get(entry.get("tool_use_id"))
        if verdict is None or entry.get("outcome_source") == "manual":
            return False
        entry.update(outcome=verdict.outcome, outcome_reason=verdict.reason, outcome_tier=verdict.tier, outcome_source="auto")
        return True

    return rewrite_entries(log, label)


class RoutingLog:
    """Appends entries to the routing log; one writer per process, off the event loop."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = asyncio.Lock()
        self._waiting: tuple[tuple[int, int], int] | None = None  # ((mtime_ns, size), count)

    async def waiting_for_labels(self) -> int:
        """How many logged prompts have no feature labels yet (what `/system1:calibrate` labels);
        counted again only when the file has changed since the last count."""
        try:
            stat = self.path.stat()
        except OSError:
            return 0
        version = (stat.st_mtime_ns, stat.st_size)
        if self._waiting is None or self._waiting[0] != version:
            self._waiting = (version, await asyncio.to_thread(self._count_unlabelled))
        return self._waiting[1]

    def _count_unlabelled(self) -> int:
        return sum(waiting(entry) for entry in _entries(self.path))

    async def evaluable(self) -> tuple[list[dict[str, Any]], int]:
        """`evaluable_entries` of this log, read off the event loop."""
        return await asyncio.to_thread(evaluable_entries, self.path)

    async def waiting(self, limit: int) -> list[dict[str, Any]]:
        """`waiting_prompts` of this log, read off the event loop."""
        return await asyncio.to_thread(waiting_prompts, self.path, limit)

    async def append(self, entry: dict[str, Any]) -> None:
        line = json.dumps({"ts": round(time.time(), 3), "id": secrets.token_hex(8), **entry}, ensure_ascii=False) + "\n"
        async with self._lock:
            await asyncio.to_thread(self._write, line)

    async def rewrite(self, change: Callable[[Path], int]) -> int:
        """Run `change` on the log file with no append in between (it rewrites the file)."""
        async with self._lock:
            return await asyncio.to_thread(change, self.path)

    def _write(self, line: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line)
