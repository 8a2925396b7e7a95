"""The router's spend: totals saved soon after a charge, every charge on disk as it is made (a
`kill -9` loses none), no charge counted twice wherever a save was cut short, a new day from 0."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import textwrap

import pytest

from system1.router import spend as spending

pytestmark = pytest.mark.anyio
DAY = datetime.date(2026, 12, 1)


def charge(number: int, usd: float, model: str = "m", day: str = "2026-12-01") -> str:
    return json.dumps({"n": number, "date": day, "model": model, "usd": usd}) + "\n"


async def test_totals_are_saved_soon_after_a_charge_and_a_new_day_starts_at_zero(tmp_path, monkeypatch):
    monkeypatch.setattr(spending, "COMPACT_DELAY_S", 0.01)
    saved = threading.Event()
    save = spending.Spend._save

    def noted(self, totals):
        save(self, totals)
        saved.set()

    monkeypatch.setattr(spending.Spend, "_save", noted)
    day = [DAY]
    spend = spending.Spend(tmp_path / "spend.json", day=lambda: day[0])
    spend.add("m", 0.5)
    spend.add("m", 0.25)
    assert await asyncio.to_thread(saved.wait, 10)  # saved on a worker thread, both charges at once
    assert json.loads((tmp_path / "spend.json").read_text())["spent_usd"] == {"m": 0.75}
    assert not (tmp_path / "spend.charges.old").exists()
    assert spending.Spend(tmp_path / "spend.json", day=lambda: day[0]).today == {"m": 0.75}
    day[0] = datetime.date(2026, 12, 2)
    assert spending.Spend(tmp_path / "spend.json", day=lambda: day[0]).today == {}


@pytest.mark.parametrize("saved", ['{"date": "2026-12-01", "spent_usd": {"m": NaN}}',
                                   '{"date": "2026-12-01", "spent_usd": {"m": -3}}', "{not json", "[" * 100_000])
def test_a_spend_file_that_cannot_be_read_starts_the_day_at_0_and_says_so(tmp_path, saved):
    (tmp_path / "spend.json").write_text(saved)
    spend = spending.Spend(tmp_path / "spend.json", day=lambda: DAY)
    assert spend.today == {} and spend.error.startswith(f"{tmp_path / 'spend.json'} is unreadable")
    assert spending.Spend(tmp_path / "missing.json").error is None


CHARGING = textwrap.dedent("""
    import asyncio, datetime, sys
    from pathlib import Path
    from system1.router import spend as spending
    from system1.router.spend import Spend

    spending.COMPACT_DELAY_S = 3600  # the totals wait: only the charge file can have the charges

    async def main():
        spend = Spend(Path(sys.argv[1]), day=lambda: datetime.date(2026, 12, 1))
        for _ in range(40):
            spend.add("m", 0.25)
        print("charged", flush=True)
        await asyncio.to_thread(sys.stdin.read)  # held open until the test kills it

    asyncio.run(main())
""")


def test_a_process_killed_right_after_its_charges_loses_none_of_them(tmp_path):
    """Before the charge file, totals waited a second to be saved and a `kill -9` lost them."""
    path = tmp_path / "spend.json"
    child = subprocess.Popen([sys.executable, "-c", CHARGING, str(path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "charged"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        child.kill()
        child.stdin.close()
        child.stdout.close()
    assert not path.exists()
    assert spending.Spend(path, day=lambda: DAY).today == {"m": 10.0}
    assert json.loads(path.read_text())["spent_usd"] == {"m": 10.0}  # folded in at start-up
    assert not (tmp_path / "spend.charges").exists()


def test_charges_already_in_the_saved_totals_are_not_counted_again(tmp_path):
    """A process stopped between saving the totals and dropping the charges they hold."""
    (tmp_path / "spend.json").write_text(json.dumps({"date": "2026-12-01", "spent_usd": {"m": 3.0}, "last_charge": 3}))
    (tmp_path / "spend.charges.old").write_text("".join(charge(n, 1.0) for n in range(1, 6)))
    (tmp_path / "spend.charges").write_text(charge(6, 1.0, "other"))
    spend = spending.Spend(tmp_path / "spend.json", day=lambda: DAY)
    assert spend.today == {"m": 5.0, "other": 1.0}
    spend.add("m", 0.5)  # numbered after every charge read back
    assert spending.Spend(tmp_path / "spend.json", day=lambda: DAY).today == {"m": 5.5, "other": 1.0}


def test_a_torn_last_line_and_yesterdays_charges_do_not_count_today(tmp_path, caplog):
    (tmp_path / "spend.charges").write_text(charge(1, 2.0, day="2026-11-30") + charge(2, 1.0) + '{"n": 3, "da')
    spend = spending.Spend(tmp_path / "spend.json", day=lambda: DAY)
    assert spend.today == {"m": 1.0} and spend.error is None
    assert "not a charge was skipped" in caplog.text


def test_a_charge_file_that_cannot_be_written_leaves_the_answer_and_todays_totals_standing(tmp_path, caplog):
    (tmp_path / "spend.charges").mkdir()  # a directory where the charge file should be
    spend = spending.Spend(tmp_path / "spend.json", day=lambda: DAY)
    spend.add("m", 0.5)
    assert spend.today == {"m": 0.5}
    assert "could not be" in caplog.text
