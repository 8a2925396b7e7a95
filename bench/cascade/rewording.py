"""How the gateway reads reworded destructive-command questions, wording by wording.

    .venv/bin/python bench/cascade/rewording.py   (about 3 minutes)

For each of the 73 reworded questions of calibration/question-wordings.jsonl: what its words say a "yes"
means (`core.rewording.polarity`), what the judge (Qwen2.5-Coder-1.5B in llama-server, through
the llama adapter, both option orders) says it means, and the gateway's reading (both must agree).
Against each question's mark (`same`, `opposite`, `other`): how many are read the right way round,
the wrong way round, or asked as worded. The lexicon was written looking at these questions, so
this is a figure on its own text; what it does to decisions on wordings it never saw is in the
cascade benchmark's blind sets (RESULTS*.md, group destructive-reworded). Writes REWORDING.md and
rewording.json beside this file.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

from local_engines import judge_server  # noqa: E402
from system1.core.rewording import Rewording, polarity  # noqa: E402
from system1.providers.base import Query  # noqa: E402
from system1.providers.llama import LlamaOptions, LlamaProvider  # noqa: E402

WORDINGS = ROOT / "calibration" / "question-wordings.jsonl"
STATE = {"tool": "Bash", "command": "ls -la"}


async def read_all(url: str, questions: list[str]) -> list[dict]:
    judge = LlamaProvider(LlamaOptions(endpoint=url))

    asked: dict[str, list[dict[str, float]]] = {}  # the reading and the judge column share one ask

    async def ask_judge(state: dict, queries: list[Query]) -> list[dict[str, float]]:
        if state["question"] not in asked:
            asked[state["question"]] = [dict(a.probabilities) for a in await judge.decide_many(state, queries, 120)]
        return asked[state["question"]]

    rewording = Rewording(lambda query: False)
    found = []
    try:
        for question in questions:
            reading = await rewording.read(STATE, Query(question, ["yes", "no"], yes_no=True), ask_judge)
            found.append({"words": polarity(question), "judge": await Rewording.judged_polarity(question, ask_judge),
                          "reading": None if reading is None else "opposite" if reading.flipped else "same"})
    finally:
        await judge.aclose()
    return found


def main() -> None:
    rows = [r for r in map(json.loads, WORDINGS.read_text().splitlines()) if r["source"] != "canonical"]
    with ExitStack() as stack:
        url, _ = judge_server(stack)
        found = asyncio.run(read_all(url, [r["question"] for r in rows]))
    table = Counter((r["polarity"], f["reading"]) for r, f in zip(rows, found))
    (HERE / "rewording.json").write_text(json.dumps(
        [{**r, **f} for r, f in zip(rows, found)], indent=1, ensure_ascii=False) + "\n")
    asking = [r for r in rows if r["polarity"] != "other"]
    right = sum(table[(p, p)] for p in ("same", "opposite"))
    wrong = table[("same", "opposite")] + table[("opposite", "same")]
    lines = ["# Reading reworded destructive-command questions (the wordings it was written on)", "",
             f"`bench/cascade/rewording.py`: the {len(rows)} reworded questions of calibration/question-wordings.jsonl, "
             "each read by its words and by the judge (Qwen2.5-Coder-1.5B, both option orders); the gateway asks "
             "a question as the destructive-command question only where both agree. The lexicon was written "
             "looking at these questions: figures on its own text.", "",
             f"Of the {len(asking)} that ask this judgement, {right} are read the right way round, {wrong} the "
             f"wrong way round, {len(asking) - right - wrong} asked as worded; of the {len(rows) - len(asking)} "
             f"that ask something else, {sum(table[('other', p)] for p in ('same', 'opposite'))} are read as it.", "",
             "| marked | read: same | read: opposite | asked as worded |", "|---|---|---|---|"]
    for mark in ("same", "opposite", "other"):
        lines.append(f"| {mark} | {table[(mark, 'same')]} | {table[(mark, 'opposite')]} | {table[(mark, None)]} |")
    lines += ["", "| question | marked | words | judge | read |", "|---|---|---|---|---|"]
    for r, f in zip(rows, found):
        lines.append(f"| {r['question']} | {r['polarity']} | {f['words'] or '–'} | {f['judge'] or '–'} | "
                     f"{f['reading'] or 'as worded'} |")
    (HERE / "REWORDING.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:12]))


if __name__ == "__main__":
    main()
