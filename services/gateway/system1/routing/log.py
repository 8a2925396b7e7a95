"""The routing log: prompts and features, written only for directories that opted in."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
import json
import time
from pathlib import Path, PurePosixPath
from typing import Any


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
        count = 0
        with self.path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                count += isinstance(entry, dict) and entry.get("source") == "prompt" and not entry.get("labels")
        return count

    async def append(self, entry: dict[str, Any]) -> None:
        line = json.dumps({"ts": round(time.time(), 3), **entry}, ensure_ascii=False) + "\n"
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
