"""The judge's yes/no answer asked in one option order, the other, and both averaged.

    python bench/cascade/orders.py [--timing-rows N] [FILE.jsonl ...]

The judge (Qwen2.5-Coder-1.5B-Instruct in llama-server) reads a yes/no question as a choice
between letters, and a small LLM leans to the first letter by an amount that changes with the
text. The llama adapter therefore asks every yes/no question twice in one request, yes first
and no first, and answers the mean of the two log-odds (`both_orders`). This measures what that
buys on labelled seed rows (by default shell commands asked sixteen other ways than the
destructive-command question, calibration/command-questions-seed.jsonl; never the blind sets):
each question's AUROC of raw P(yes) for each order and for the mean, and with `--timing-rows N`
(on an otherwise idle machine) the median latency of one order against both over the first N
rows. Writes ORDERS.md and orders.json beside this file (`--out` names them otherwise).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE.parent), str(ROOT / "services" / "gateway")]

from local_engines import judge_server  # noqa: E402
from system1.offline.calibrate import Labelled, load  # noqa: E402
from system1.offline.fitting import auroc  # noqa: E402
from system1.providers.base import Query  # noqa: E402
from system1.providers.llama import LlamaOptions, LlamaProvider, mean_log_odds, other_order  # noqa: E402

DEFAULT_FILES = [ROOT / "calibration" / "command-questions-seed.jsonl"]
ORDERS = ("yes first", "no first", "both")


async def ask(url: str, rows: list[Labelled]) -> list[dict[str, float]]:
    """Each row's raw P(yes) in each order and their mean. Both orders go in one request through
    the adapter, as it asks them (the text cut, the prompt prefix shared), but each is read apart."""
    provider = LlamaProvider(LlamaOptions(endpoint=url, both_orders=False))
    scores = []
    try:
        for r in rows:
            query = Query(r.question, ["yes", "no"], yes_no=True)
            first, second = await provider.decide_many(r.context, [query, other_order(query)], 120)
            p_first, p_second = first.probabilities["yes"], second.probabilities["yes"]
            scores.append(dict(zip(ORDERS, (p_first, p_second, mean_log_odds(p_first, p_second)))))
    finally:
        await provider.aclose()
    return scores


async def latency(url: str, rows: list[Labelled]) -> dict[str, float]:
    """Median seconds a decision takes through the adapter asking one order, then both."""
    medians = {}
    for label, both in (("one order", False), ("both orders", True)):
        provider = LlamaProvider(LlamaOptions(endpoint=url, both_orders=both))
        seconds = []
        try:
            for r in rows:
                start = time.perf_counter()
                await provider.decide(r.context, Query(r.question, ["yes", "no"], yes_no=True), 120)
                seconds.append(time.perf_counter() - start)
        finally:
            await provider.aclose()
        medians[label] = statistics.median(seconds)
    return medians


def figures(rows: list[Labelled], scores: list[dict[str, float]]) -> dict[str, dict]:
    by_question: dict[str, list[int]] = defaultdict(list)
    for index, r in enumerate(rows):
        by_question[r.question].append(index)
    table = {}
    for question, members in by_question.items():
        labels = [rows[i].label == "yes" for i in members]
        table[question] = {"rows": len(members), **{order: auroc([scores[i][order] for i in members], labels)
                                                    for order in ORDERS}}
    return table


def render(table: dict[str, dict], medians: dict[str, float] | None, sources: list[str], timing_rows: int) -> str:
    def cell(value: float | None) -> str:
        return "–" if value is None else f"{value:.2f}"

    lines = ["# The judge's yes/no answer in one option order, the other, and both", "",
             f"`bench/cascade/orders.py` on {', '.join(sources)}: the judge's raw P(yes) with yes as option A, with no "
             "as option A, and the mean of the two log-odds (what the llama adapter answers, `both_orders`). AUROC per "
             "question: how well each ranks the yes rows above the no rows.", "",
             "| question | rows | yes first | no first | both |", "|---|---|---|---|---|"]
    lines += [f"| {q} | {f['rows']} | {cell(f['yes first'])} | {cell(f['no first'])} | {cell(f['both'])} |"
              for q, f in table.items()]
    usable = [f for f in table.values() if all(f[o] is not None for o in ORDERS)]
    if usable:
        means = {o: statistics.mean(f[o] for f in usable) for o in ORDERS}
        versus = {o: (sum(f["both"] > f[o] for f in usable), sum(f["both"] < f[o] for f in usable))
                  for o in ORDERS[:2]}
        lines += [f"| **unweighted mean over {len(usable)} questions** | {sum(f['rows'] for f in usable)} | "
                  f"{means['yes first']:.3f} | {means['no first']:.3f} | {means['both']:.3f} |", "",
                  "Both orders against yes first: better on {} questions, worse on {}; against no first: better on {}, "
                  "worse on {} (the rest tie).".format(*versus["yes first"], *versus["no first"])]
    if medians:
        lines += ["", f"Median latency through the adapter, the first {timing_rows} rows, one request at a time, 2 "
                  f"threads: one order {medians['one order'] * 1000:.0f} ms, both orders "
                  f"{medians['both orders'] * 1000:.0f} ms (the second order shares the text's prompt prefix in "
                  "llama-server's cache)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, default=DEFAULT_FILES)
    parser.add_argument("--timing-rows", type=int, default=0, help="also time one order against both on this many rows")
    parser.add_argument("--out", default="orders", help="the results' name beside this file: NAME.json and NAME.md, upper-cased")
    args = parser.parse_args()
    rows = [r for path in args.files for r in load(path) if r.options is None]
    if not rows:
        sys.exit("orders.py: no yes/no rows in " + ", ".join(map(str, args.files)))
    with ExitStack() as stack:
        url, _ = judge_server(stack)
        medians = asyncio.run(latency(url, rows[: args.timing_rows])) if args.timing_rows > 0 else None
        scores = asyncio.run(ask(url, rows))
    table = figures(rows, scores)
    sources = [str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(p) for p in args.files]
    (HERE / f"{args.out}.json").write_text(json.dumps({"sources": sources, "medians_s": medians, "questions": table,
                                                  "scores": scores}, indent=1) + "\n")
    text = render(table, medians, sources, args.timing_rows)
    (HERE / f"{args.out.upper()}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
