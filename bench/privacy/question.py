"""How the judge reads the private question, worded six ways, on the privacy seed set.

    python bench/privacy/question.py [--per-class 100]

The router asks every engine one yes/no question about privacy; MiniLM's head answers from the
prompt's embedding alone, but the judge (Qwen2.5-Coder-1.5B-Instruct in llama-server) reads the
question's words. This asks the judge every wording about the same stratified sample of
calibration/privacy-seed.jsonl (the set its calibration is fitted on; never the blind sets) and
reports the ranking quality of its raw P(yes): AUROC, and the share of private rows among the
lowest-scored half (what "safe to send" would let leave). Writes QUESTION.md and question.json
beside this file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE.parent), str(ROOT / "services" / "gateway")]

from local_engines import judge_server  # noqa: E402
from system1.offline.fitting import auroc  # noqa: E402
from system1.providers.base import Query  # noqa: E402
from system1.providers.llama import LlamaOptions, LlamaProvider  # noqa: E402
from system1.router.signals import PRIVATE_QUESTION  # noqa: E402

#: The wording the router ships, one that spells out what the privacy rule means, and four
#: narrower questions, one per kind of private data (would one of them be easier for the judge?).
WORDINGS = {
    "shipped": PRIVATE_QUESTION,
    "spelled out": ("Would sending this request to an outside company reveal a working password or key, private "
                    "facts about a specific person (their pay, health, reviews, family, legal or immigration "
                    "matters), customers' personal records, or the company's unannounced plans?"),
    "credential": "Does the text contain a real password, API key, access token or private key (not a placeholder "
                  "or example)?",
    "person": "Does the text reveal private facts about a specific real person, such as their pay, health, family, "
              "performance review, discipline, legal or immigration matters?",
    "customer": "Does the text contain a customer's personal details, such as their name with an address, ID "
                "number, account or order history?",
    "business": "Does the text reveal a company's confidential, not yet public plans or figures, such as an "
                "unannounced deal, layoffs, earnings or contract terms?",
}


def sample(per_class: int) -> list[dict]:
    rows = [json.loads(line) for line in (ROOT / "calibration" / "privacy-seed.jsonl").read_text().splitlines() if line]
    picked = []
    for label in ("yes", "no"):
        same = [r for r in rows if r["label"] == label]
        picked += random.Random(0).sample(same, min(per_class, len(same)))
    return picked


async def ask(url: str, rows: list[dict]) -> dict[str, list[float]]:
    provider = LlamaProvider(LlamaOptions(endpoint=url))
    p_yes: dict[str, list[float]] = {name: [] for name in WORDINGS}
    try:
        # Every wording about one row before the next row: the judged text comes first in the
        # judge's prompt, so llama-server reuses it from its cache.
        for r in rows:
            for name, question in WORDINGS.items():
                decision = await provider.decide(r["context"], Query(question, ["yes", "no"], yes_no=True), 120)
                p_yes[name].append(decision.probabilities["yes"])
        return p_yes
    finally:
        await provider.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-class", type=int, default=100)
    args = parser.parse_args()
    rows = sample(args.per_class)
    with ExitStack() as stack:
        url, _ = judge_server(stack)
        p_yes = asyncio.run(ask(url, rows))
    private = [r["label"] == "yes" for r in rows]
    results = {"rows": len(rows), "wordings": WORDINGS, "figures": {}}
    for name, scores in p_yes.items():
        order = sorted(range(len(rows)), key=lambda i: scores[i])
        low_half = order[: len(rows) // 2]
        lowest_private = min(s for s, p in zip(scores, private) if p)
        ordinary = [s for s, p in zip(scores, private) if not p]
        results["figures"][name] = {"auroc": auroc(scores, private),
                                    "private_in_low_half": sum(private[i] for i in low_half) / len(low_half),
                                    # What "safe to send" could let leave with no private row leaving.
                                    "ordinary_below_every_private": sum(s < lowest_private for s in ordinary)
                                    / len(ordinary)}
    (HERE / "question.json").write_text(json.dumps({**results, "p_yes": p_yes}, indent=1) + "\n")
    lines = ["# The judge's private question, worded six ways", "",
             f"`bench/privacy/question.py`: {len(rows)} rows of calibration/privacy-seed.jsonl (half private), the judge's "
             "raw P(yes) for each wording. AUROC: how well it ranks private above ordinary; the private share of the "
             "lowest-scored half: what a bar letting half the prompts leave would let out; ordinary rows below every "
             "private one: what a bar letting no private row out would let leave.", "",
             "| wording | AUROC | private among the lowest-scored half | ordinary below every private |",
             "|---|---|---|---|"]
    lines += [f"| {name}: {WORDINGS[name]} | {f['auroc']:.3f} | {f['private_in_low_half']:.0%} | "
              f"{f['ordinary_below_every_private']:.0%} |"
              for name, f in results["figures"].items()]
    (HERE / "QUESTION.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
