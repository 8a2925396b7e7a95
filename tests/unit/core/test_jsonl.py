"""The JSONL writer the logs share: inside an event loop, entries wait for one batched write;
`flush` writes them at once and `close` writes what waits."""

from __future__ import annotations

import asyncio
import json

from system1.core.jsonl import RotatingJsonl


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def test_entries_written_in_a_loop_wait_for_their_batch_until_flushed(tmp_path):
    path = tmp_path / "logs" / "x.jsonl"

    async def main() -> tuple[list[dict], list[dict]]:
        log = RotatingJsonl(path, 1_000_000, 1)
        log.write({"n": 1})
        log.write({"n": 2})
        waiting = lines(path)
        log.flush()
        flushed = lines(path)
        log.write({"n": 3})
        log.close()
        return waiting, flushed

    waiting, flushed = asyncio.run(main())
    assert waiting == [] and flushed == [{"n": 1}, {"n": 2}]
    assert lines(path) == [{"n": 1}, {"n": 2}, {"n": 3}]
