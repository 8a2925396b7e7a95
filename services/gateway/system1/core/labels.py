"""The label store: recent decisions remembered so that a person (or an outcome) can label them
later, for `system1 learn --from-store`.

Nothing is remembered unless `[learning] collect = true` (every kind) or the decision's kind is
in `[learning] collect_kinds`: a question and its context can be private, as in the request log.
The store is one SQLite file in the state volume (`<install dir>/labels.sqlite3`); it keeps the
newest `store_max_decisions` decisions and forgets the oldest, labelled or not. Labels are rows
in the `calibrate` format, with `kind` where the request named one (a default kind is worked
out again from the question and options, see `core/heads.py`).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from .schema import YES_NO

STORE_NAME = "labels.sqlite3"


class UnknownDecision(KeyError):
    """No remembered decision has this request id (never collected, or forgotten)."""


class LabelStore:
    def __init__(self, path: Path, max_decisions: int = 10_000) -> None:
        self.path, self.max_decisions = path, max_decisions
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False, timeout=5)
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS decisions (request_id TEXT PRIMARY KEY, at REAL, kind TEXT,"
                " question TEXT, options TEXT, context TEXT, decision TEXT, label TEXT, source TEXT)")
            self._db.execute("CREATE INDEX IF NOT EXISTS decisions_at ON decisions (at)")  # for pruning

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def remember(self, request_id: str, kind: str | None, question: str, options: list[str] | None,
                 context: dict[str, Any] | None, decision: str | None) -> None:
        with self._lock, self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO decisions VALUES (?, ?, ?, ?, ?, ?, ?, NULL, NULL)",
                (request_id, time.time(), kind, question, json.dumps(options), json.dumps(context), decision))
            self._db.execute(
                "DELETE FROM decisions WHERE request_id NOT IN"
                " (SELECT request_id FROM decisions ORDER BY at DESC LIMIT ?)", (self.max_decisions,))

    def label(self, request_id: str, label: str, source: str) -> dict[str, Any]:
        """Label a remembered decision; `UnknownDecision`, or `ValueError` naming the options."""
        with self._lock, self._db:
            found = self._db.execute("SELECT options FROM decisions WHERE request_id = ?", (request_id,)).fetchone()
            if found is None:
                raise UnknownDecision(request_id)
            options = json.loads(found[0])
            choices = options or list(YES_NO)
            if label not in choices:
                raise ValueError(f"label {label!r} is not among the decision's options {choices}")
            self._db.execute("UPDATE decisions SET label = ?, source = ? WHERE request_id = ?",
                             (label, source, request_id))
        return {"request_id": request_id, "label": label}

    def labelled(self, labelled: bool = True) -> list[dict[str, Any]]:
        """Every labelled decision as a `learn` row, oldest first; with `labelled` False, every
        decision no one labelled yet (a pool for `learn --teacher`), without a label."""
        with self._lock:
            rows = self._db.execute("SELECT kind, question, options, context, label FROM decisions"
                                    f" WHERE label IS {'NOT ' if labelled else ''}NULL ORDER BY at").fetchall()
        result = []
        for kind, question, options, context, label in rows:
            row: dict[str, Any] = {"question": question, "label": label, "kind": kind,
                                   "options": json.loads(options), "context": json.loads(context)}
            result.append({key: value for key, value in row.items() if value})
        return result
