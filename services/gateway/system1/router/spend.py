"""Each model's spend today, kept in the state volume so that neither a restart nor a `kill -9`
resets a budget.

Two files under `<state>/router/`:
- `spend.json`, the day's totals and the number of the last charge they include, replaced whole;
- `spend.charges`, one line per charge, appended as the charge is made. A process killed at any
  point has written every charge it made (the kernel keeps what was written; only a power cut
  can lose the last lines, as it can for any file not synced).

The totals are rewritten at most `COMPACT_DELAY_S` after a charge, off the event loop, and the
charges they hold are then dropped: the charge file is renamed to `spend.charges.old` before the
totals are taken, and that file is deleted once the totals are saved. Reading both files back
replays only the charges numbered after the totals, so no charge is lost or counted twice
wherever the process stopped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

from ..core.files import write_whole

logger = logging.getLogger(__name__)
#: How long after a charge the totals are rewritten (charges in between are folded in together).
COMPACT_DELAY_S = 1.0


def today() -> date:
    return datetime.now(timezone.utc).date()


def _amount(value: Any) -> float:
    usd = float(value)
    if not (math.isfinite(usd) and usd >= 0):
        raise ValueError("a spend that is not a finite amount of 0 or more")
    return usd


@dataclass(frozen=True)
class _Totals:
    day: date
    spent: dict[str, float]
    #: The last charge they include.
    number: int
    #: Whether the charge file was moved aside for them (and is dropped once they are saved).
    moved: bool


class Spend:
    """US dollars spent per model today (UTC), with what the answers in flight may still cost."""

    def __init__(self, path: Path, day: Callable[[], date] = today) -> None:
        self.path = path
        self.charges = path.with_name(f"{path.stem}.charges")
        self.old_charges = path.with_name(f"{path.stem}.charges.old")
        self._day = day
        #: Why the saved spend could not be read (today's then starts at 0), for health to say.
        self.error: str | None = None
        self._date, self._spent, self._number = self._load()
        self._replay()
        self._journal: int | None = None
        self._pending: asyncio.TimerHandle | None = None
        self._compacting = False
        self._saving = threading.Lock()
        self._saved = 0
        #: What the answers in flight may cost at most, per model, until their usage is known.
        self.reserved: dict[str, float] = {}
        if self.old_charges.exists() or self.charges.exists():
            self._compact()

    def _load(self) -> tuple[date, dict[str, float], int]:
        try:
            saved = json.loads(self.path.read_text(encoding="utf-8"))
            spent = {str(k): _amount(v) for k, v in saved["spent_usd"].items()}
            return date.fromisoformat(saved["date"]), spent, int(saved.get("last_charge", 0))
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            self.error = f"{self.path} is unreadable ({type(exc).__name__}: {exc}); today's spend started at 0"
            logger.error("router spend: %s", self.error)
        return self._day(), {}, 0

    def _replay(self) -> None:
        """Fold in the charges made after the saved totals, the older file first."""
        for path in (self.old_charges, self.charges):
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except FileNotFoundError:
                continue
            except (OSError, UnicodeDecodeError) as exc:
                logger.error("router spend: %s is unreadable (%s); its charges are not counted", path, exc)
                continue
            for line in lines:
                try:
                    charge = json.loads(line)
                    number, day = int(charge["n"]), date.fromisoformat(charge["date"])
                    model, usd = str(charge["model"]), _amount(charge["usd"])
                except (ValueError, KeyError, TypeError, RecursionError):
                    logger.warning("router spend: a line of %s that is not a charge was skipped", path)
                    continue
                if number <= self._number:
                    continue
                self._number = number
                if day > self._date:
                    self._date, self._spent = day, {}
                if day == self._date:
                    self._spent[model] = self._spent.get(model, 0.0) + usd

    @property
    def today(self) -> dict[str, float]:
        if self._date != self._day():
            self._date, self._spent = self._day(), {}
        return self._spent

    def committed(self) -> dict[str, float]:
        """Today's spend with what the answers in flight may still cost: what a budget is held to."""
        spent = dict(self.today)
        for model, usd in self.reserved.items():
            spent[model] = spent.get(model, 0.0) + usd
        return spent

    def reserve(self, model: str, usd: float) -> None:
        self.reserved[model] = self.reserved.get(model, 0.0) + usd

    def release(self, model: str, usd: float) -> None:
        if usd <= 0:
            return
        left = self.reserved.get(model, 0.0) - usd
        if left > 1e-12:
            self.reserved[model] = left
        else:
            self.reserved.pop(model, None)

    def add(self, model: str, usd: float) -> None:
        if usd <= 0:
            return
        spent = self.today
        spent[model] = spent.get(model, 0.0) + usd
        self._number += 1
        self._append({"n": self._number, "date": self._date.isoformat(), "model": model, "usd": usd})
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a script, a test): fold it in now
            self._compact()
            return
        if self._pending is None:
            self._pending = loop.call_later(COMPACT_DELAY_S, self._compact_soon, loop)

    def _append(self, charge: dict[str, Any]) -> None:
        """One line, one write: a small append is whole, and costs the event loop a system call."""
        try:
            if self._journal is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._journal = os.open(self.charges, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.write(self._journal, (json.dumps(charge) + "\n").encode())
        except OSError as exc:  # the request was answered; the totals still carry the charge
            logger.error("router spend: a charge could not be written to %s: %s", self.charges, exc)

    def _rotate(self) -> _Totals:
        """The totals to save, and the charges they hold moved aside (unless an earlier save
        has not yet dropped its file: the new charges then stay where they are, numbered)."""
        if self._journal is not None:
            os.close(self._journal)
            self._journal = None
        moved = not self.old_charges.exists() and self.charges.exists()
        if moved:
            os.replace(self.charges, self.old_charges)
        return _Totals(self._date, dict(self._spent), self._number, moved)

    def _save(self, totals: _Totals) -> None:
        """Write the totals unless newer ones are saved already (a save at close may overtake one
        in the worker thread), then drop the charges this save moved aside."""
        with self._saving:
            if totals.number < self._saved:
                return
            try:
                write_whole(self.path, json.dumps({"date": totals.day.isoformat(), "spent_usd": totals.spent,
                                                   "last_charge": totals.number}))
            except OSError as exc:  # the charges stay on disk and are folded in next time
                logger.error("router spend could not be saved to %s: %s", self.path, exc)
                return
            self._saved = totals.number
            if totals.moved:
                self.old_charges.unlink(missing_ok=True)

    def _compact(self) -> None:
        try:
            self._save(self._rotate())
        except OSError as exc:
            logger.error("router spend could not be saved to %s: %s", self.path, exc)

    def _compact_soon(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._compacting:  # one save at a time; try again a little later
            self._pending = loop.call_later(COMPACT_DELAY_S, self._compact_soon, loop)
            return
        self._pending = None
        try:
            totals = self._rotate()
        except OSError as exc:
            logger.error("router spend could not be saved to %s: %s", self.path, exc)
            return
        self._compacting = True
        done = loop.run_in_executor(None, self._save, totals)
        done.add_done_callback(lambda _: setattr(self, "_compacting", False))

    def close(self) -> None:
        """Fold in every charge (the service is stopping)."""
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        if self._journal is not None or self.charges.exists():
            self._compact()
