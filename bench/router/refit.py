"""The router's learning loop on logged outcomes: routed answers, feedback, `system1 router refit`,
and the routes before and after.

    python bench/router/refit.py [--rounds 20]      (make bench-router-refit)

A served gateway routes the 80 labelled prompts (`model: auto`, decided as the stack decides: by
MiniLM with the shipped learned heads) over the stack's local and OpenRouter tiers, both pointed
at the fake hosted chat API served locally. A simulated team judges each answer and posts
`good` or `bad` to `POST /v1/router/feedback`: good with the probability given by the answering
model's true skill on the prompt's gold topic. The true skills are the catalogue's guesses
except where TRUTH says the guess was wrong. Then `system1 router refit --write` fits the skills
from the logged outcomes, the service reloads them, and the same prompts are routed again (dry
runs). The same outcomes are also refitted as if every decision had named its prompt's gold
topic, which separates what the estimator learns from what the decision's topic errors cost.

Route agreement is measured against the true gold routes (the router fed the gold labels and
the true skills), for the engine's decisions and, to isolate the skills, for the gold labels
themselves. Writes REFIT.md and refit.json beside this file.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import tempfile
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE.parent), str(HERE), str(ROOT), str(ROOT / "services" / "gateway")]

from benchlib import served_gateway  # noqa: E402
from decisions import body, gold_signals, read, stack_router  # noqa: E402
from local_engines import minilm  # noqa: E402
from system1.offline.refit import evidence, fit, read_logs  # noqa: E402
from system1.core.router_config import RouterSettings  # noqa: E402
from system1.router.conversation import from_openai  # noqa: E402
from system1.router.precheck import precheck  # noqa: E402
from system1.router.scoring import route  # noqa: E402
from tests.fakes.hosted_chat import hosted_chat  # noqa: E402
from tests.unit.router.catalogues import router_toml  # noqa: E402

#: Where the catalogue's guesses are wrong: (model, topic) → the true skill, the probability that
#: an answer of that model on that topic satisfies the team.
TRUTH = {
    ("anthropic/claude-sonnet-4.5", "data-sql"): 0.55,
    ("anthropic/claude-sonnet-4.5", "infra-devops"): 0.60,
    ("anthropic/claude-opus-4.1", "writing"): 0.65,
    ("anthropic/claude-opus-4.1", "chat"): 0.65,
    ("deepseek/deepseek-chat-v3.1", "code-gen"): 0.45,
}
PRIOR_STRENGTH = 10


#: The tiers of a team with an OpenRouter key: the stack's direct Anthropic and OpenAI tiers list
#: the same models again (Sonnet at the same price), which only one of two entries would ever be
#: routed to and so learn about.
TIERS = ("llama", "openrouter")


def catalogue(fake_url: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The stack's local and OpenRouter tiers and their models, both upstreams at the fake (the
    local tier stays local)."""
    table = stack_router()
    upstreams = {name: {"base_url": fake_url, "apis": ["openai", "anthropic"], "local": name == "llama"} for name in TIERS}
    return upstreams, [m for m in table["models"] if m["upstream"] in TIERS]


def config(section: str, fake_url: str) -> str:
    upstreams, models = catalogue(fake_url)
    table = stack_router()
    return router_toml(upstreams, models, "systemone", learning=True, private=table["private"], fallback_model=table["fallback_model"],
                       decision={"chars": table["decision"]["chars"]}) + section


def settings(fake_url: str, skills: dict[tuple[str, str], float] | None = None) -> RouterSettings:
    """The catalogue as the gateway reads it, with `skills` laid over it."""
    upstreams, models = catalogue(fake_url)
    table = stack_router()
    changed = []
    for model in models:
        extra = {topic: s for (m, topic), s in (skills or {}).items() if m == model["id"]}
        changed.append({**model, "skills": {**model.get("skills", {}), **extra}})
    return RouterSettings.model_validate({**{k: v for k, v in table.items() if k not in ("upstreams", "models")},
                                          "upstreams": upstreams, "models": changed})


def true_skill(table: RouterSettings, model: str, topic: str) -> float:
    return TRUTH.get((model, topic), table.model(model).skill(topic))


def dry_routes(url: str, prompts: list[dict[str, Any]]) -> dict[str, str]:
    with httpx.Client(timeout=120) as client:
        return {p["id"]: client.post(f"{url}/v1/router/route", json=body(p["prompt"])).raise_for_status().json()["model"]
                for p in prompts}


def gold_routes(table: RouterSettings, prompts: list[dict[str, Any]]) -> dict[str, str]:
    return {p["id"]: route(table, gold_signals(p["gold"]), precheck(from_openai(body(p["prompt"])), table.phone_regions).needs).model
            for p in prompts}


def agreement(routes: dict[str, str], truth: dict[str, str]) -> float:
    return sum(routes[i] == truth[i] for i in truth) / len(truth)


def traffic(url: str, prompts: list[dict[str, Any]], rounds: int, table: RouterSettings, seed: int) -> dict[str, Any]:
    """Each prompt routed and answered `rounds` times (a new conversation each round), each
    answer judged by the simulated team through the feedback endpoint."""
    rng = random.Random(seed)
    served: dict[str, int] = {}
    asked: dict[str, str] = {}
    verdicts = {"good": 0, "bad": 0}
    with httpx.Client(timeout=120) as client:
        for round_number in range(rounds):
            for p in prompts:
                request = {"model": "auto", "messages": [{"role": "system", "content": f"Session {round_number}."},
                                                         {"role": "user", "content": p["prompt"]}]}
                reply = client.post(f"{url}/v1/chat/completions", json=request)
                reply.raise_for_status()
                model = reply.headers["x-router-model"]
                served[model] = served.get(model, 0) + 1
                asked[reply.headers["x-router-request-id"]] = p["id"]
                verdict = "good" if rng.random() < true_skill(table, model, p["gold"]["topic"]) else "bad"
                verdicts[verdict] += 1
                client.post(f"{url}/v1/router/feedback", json={"request_id": reply.headers["x-router-request-id"],
                                                               "verdict": verdict}).raise_for_status()
    return {"requests": rounds * len(prompts), "served": served, "verdicts": verdicts, "prompt_of": asked}


def refit_with_true_topics(state: Path, table: RouterSettings, prompts: list[dict[str, Any]],
                           prompt_of: dict[str, str]) -> dict[tuple[str, str], float]:
    """The same logged outcomes refitted as if every decision had named its prompt's gold topic
    with certainty: what the loop learns when the topics are right."""
    gold = {p["id"]: p["gold"]["topic"] for p in prompts}
    decisions = read_logs(state / "logs" / "router.jsonl").entries
    for entry in decisions:
        topic = gold[prompt_of[entry["id"]]]
        entry["signals"] = {"primary": topic, "topics": {topic: 1.0}}
    outcomes = read_logs(state / "logs" / "router-outcomes.jsonl").entries
    found, _ = evidence(decisions, outcomes, table.outcomes.retry_window_s)
    return {(f.model, f.topic): f.new for f in fit(table, table, found, PRIOR_STRENGTH)}


def wait_for_lines(path: Path, count: int, timeout_s: float = 30) -> None:
    """The logs are written in batches: until `path` holds `count` lines."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text(encoding="utf-8").splitlines()) >= count:
            return
        time.sleep(0.1)
    raise RuntimeError(f"{path} did not reach {count} lines")


def run(rounds: int, seed: int) -> dict[str, Any]:
    prompts = read(HERE / "prompts.jsonl")
    with ExitStack() as stack, hosted_chat() as fake:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="router-refit-")))
        section, _ = minilm(stack, work)
        guessed = settings(fake.url)
        truly = settings(fake.url, {(m.id, t): true_skill(guessed, m.id, t) for m in guessed.models for t in guessed.topics})
        true_gold = gold_routes(truly, prompts)
        state = work / "state"
        with served_gateway(config(section, fake.url), state=state) as (url, _, env):
            before = dry_routes(url, prompts)
            sent = traffic(url, prompts, rounds, truly, seed)
            wait_for_lines(state / "logs" / "router.jsonl", sent["requests"])
            wait_for_lines(state / "logs" / "router-outcomes.jsonl", sent["requests"])
            refit = subprocess.run([sys.executable, "-m", "system1", "router", "refit", "--write", "--json", "--url", url,
                                    "--prior-strength", str(PRIOR_STRENGTH)],
                                   env=env, capture_output=True, text=True, timeout=120, check=True)
            fitted = json.loads(refit.stdout)["refitted"]
            after = dry_routes(url, prompts)
        learned = settings(fake.url, {(f["model"], f["topic"]): f["new"] for f in fitted})
        right_topics = settings(fake.url, refit_with_true_topics(state, guessed, prompts, sent.pop("prompt_of")))
    return {
        "date": time.strftime("%Y-%m-%d"), "rounds": rounds, "seed": seed, "prior_strength": PRIOR_STRENGTH,
        "traffic": sent, "truth": [{"model": m, "topic": t, "true": s, "guess": guessed.model(m).skill(t)}
                                   for (m, t), s in TRUTH.items()],
        "refitted": fitted,
        "agreement": {"engine_before": agreement(before, true_gold), "engine_after": agreement(after, true_gold),
                      "gold_labels_before": agreement(gold_routes(guessed, prompts), true_gold),
                      "gold_labels_after": agreement(gold_routes(learned, prompts), true_gold),
                      "gold_labels_after_true_topics": agreement(gold_routes(right_topics, prompts), true_gold)},
        "refitted_true_topics": [{"model": m, "topic": t, "new": right_topics.model(m).skill(t)} for (m, t) in TRUTH],
        "changed_routes": sum(before[i] != after[i] for i in before),
        "gold_topics_misses": {i: {"routed": m, "true_gold": true_gold[i]}
                               for i, m in gold_routes(right_topics, prompts).items() if m != true_gold[i]},
        "guessed_misses": {i: {"routed": m, "true_gold": true_gold[i]}
                           for i, m in gold_routes(guessed, prompts).items() if m != true_gold[i]},
    }


def render(r: dict[str, Any]) -> str:
    truth = {(t["model"], t["topic"]): t["true"] for t in r["truth"]}
    a = r["agreement"]
    lines = [
        "# The router's learning loop on logged outcomes", "",
        f"Measured {r['date']} with `python bench/router/refit.py --rounds {r['rounds']}` (`make bench-router-refit`). "
        f"{r['traffic']['requests']} routed requests ({r['rounds']} rounds of the 80 prompts, decided by MiniLM with its "
        "learned heads, "
        "answers from the fake hosted chat API), each judged by a simulated team through `POST /v1/router/feedback`: "
        "good with the probability of the answering model's true skill on the prompt's gold topic "
        f"({r['traffic']['verdicts']['good']} good, {r['traffic']['verdicts']['bad']} bad). Then "
        f"`system1 router refit --write` (prior strength k = {r['prior_strength']}) and a reload. Raw figures: `refit.json`.", "",
        "Models that answered: " + ", ".join(f"{m} {n}" for m, n in sorted(r["traffic"]["served"].items(), key=lambda x: -x[1])) + ".", "",
        "| model | topic | guess | true | refitted | good / bad |", "|---|---|---|---|---|---|",
    ]
    for f in sorted(r["refitted"], key=lambda f: (f["model"], f["topic"])):
        true = truth.get((f["model"], f["topic"]), f["guess"])
        lines.append(f"| {f['model']} | {f['topic']} | {f['guess']:.2f} | {true:.2f}{' (wrong guess)' if (f['model'], f['topic']) in truth else ''} | "
                     f"**{f['new']:.3f}** | {f['good']:.1f} / {f['bad']:.1f} |")
    right = {(f["model"], f["topic"]): f["new"] for f in r["refitted_true_topics"]}
    lines += ["", "The wrongly guessed skills, refitted from the same outcomes as if every decision had named its "
              "prompt's gold topic with certainty:", "",
              "| model | topic | guess | true | refitted (decided topics) | refitted (gold topics) |", "|---|---|---|---|---|---|"]
    refitted = {(f["model"], f["topic"]): f["new"] for f in r["refitted"]}
    for t in r["truth"]:
        key = (t["model"], t["topic"])
        lines.append(f"| {t['model']} | {t['topic']} | {t['guess']:.2f} | {t['true']:.2f} | "
                     f"{refitted[key]:.3f} | {right[key]:.3f} |" if key in refitted else
                     f"| {t['model']} | {t['topic']} | {t['guess']:.2f} | {t['true']:.2f} | no outcomes | {right[key]:.3f} |")
    lines += ["", "Route agreement with the true gold routes (the router fed the gold labels and the true skills):", "",
              "| skills | routes from the gold labels (the skills alone) | routes from MiniLM with its heads (what the router decides) |",
              "|---|---|---|",
              f"| the catalogue's guesses | {a['gold_labels_before']:.0%} | {a['engine_before']:.0%} |",
              f"| refitted from the logged outcomes | {a['gold_labels_after']:.0%} | {a['engine_after']:.0%} |",
              f"| refitted from the same outcomes under their gold topics | {a['gold_labels_after_true_topics']:.0%} | - |", "",
              f"{r['changed_routes']} of the 80 routes changed after the refit. A model is measured only on the requests it was "
              "sent: a wrong guess about a model the router never picks for a topic is not corrected by this loop.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    results = run(args.rounds, args.seed)
    (HERE / "refit.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    (HERE / "REFIT.md").write_text(render(results), encoding="utf-8")
    print(render(results))


if __name__ == "__main__":
    main()
