"""The router on a public router benchmark: RouteLLM's own per-prompt outcomes of a strong model
(gpt-4-1106-preview) and a weak one (Mixtral-8x7B-Instruct) on MMLU, GSM8K and MT-Bench
(`../shared/routellm-evals/`, Apache-2.0), replayed through the router's decision with no chat
model called, scored with RouteLLM's metrics.

Each prompt gets a score; sweeping a threshold over it sends 0-100 % of prompts to the strong
model, and at each share the quality is the mean outcome of the models chosen. PGR (performance
gap recovered) = (quality - weak's) / (strong's - weak's); CPT(x %) = the smallest share of
strong calls that reaches PGR x %; APGR = the area under PGR against that share. The curve is
exact: prompts with the same score are taken as a random order among themselves would take them
on average, so a router that cannot tell prompts apart scores like the random router (APGR 0.5,
CPT(50 %) = 50 %), which is computed exactly rather than sampled.

Regimes, reported apart:
- zero-shot: the router as shipped, MiniLM with its learned heads, asked its four questions
  through a served gateway's dry run (`POST /v1/router/route`) with a two-model catalogue. The
  score is the decision's expected complexity (0-3), the signal that moves a route up a tier;
  the catalogue's own choice at its skills is one point on the curve.
- learned: a head fitted from the outcomes on MiniLM's embedding of the prompt, scored only on
  prompts it was not fitted on: MMLU by domain (fit on 4/5 of the 57 domains, score the fifth),
  GSM8K by 5 folds. MT-Bench's 80 questions are too few to learn from. Two forms of head, each
  at two regularisation strengths, are candidates: "gain", one logistic regression of "the
  strong model right where the weak one is wrong", and "each model", one regression per model
  of its chance of being right, scored by the difference (the expected quality gained, as the
  router's expected-value rule reasons). Which candidate scores a held-out fold is chosen by
  cross-validation inside that fold's training prompts (nested: by domain on MMLU), never by the
  held-out fold; the report names each fold's choice.

RouteLLM's prompts that overlap its routers' training data (`contaminated_prompts.jsonl`) are
left out. Writes results.json, RESULTS.md and pgr.png beside this file.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

from benchlib import free_port, served_gateway  # noqa: E402
from local_engines import serve  # noqa: E402

DATA = Path(os.environ.get("ROUTELLM_EVALS", ROOT.parent / "shared" / "routellm-evals"))
WEAK, STRONG = "mistralai/Mixtral-8x7B-Instruct-v0.1", "gpt-4-1106-preview"
FOLDS = 5
IN_FLIGHT = 4  # dry runs in flight at once
EMBED_BATCH = 64
#: RouteLLM's published figures for its best routers (trained on Chatbot Arena preferences,
#: augmented): the cost saved at 95 % of GPT-4's quality.
PUBLISHED = {"mt_bench": "up to 85 % lower cost at 95 % of GPT-4's quality",
             "mmlu": "45 % lower cost at 95 % of GPT-4's quality",
             "gsm8k": "35 % lower cost at 95 % of GPT-4's quality"}
#: The two-model catalogue: the weak model good enough for routine work, the strong one for all.
CATALOGUE = f"""
[router]
enabled = true
private = "ignore"
retries = 0

[router.upstreams.hosted]
base_url = "https://api.example.invalid"
api_key_env = "ROUTELLM_BENCH_KEY"

[[router.models]]
id = "weak"
upstream = "hosted"
name = "{WEAK}"
price = {{ input = 0.6, output = 0.6 }}
default_skill = 0.62

[[router.models]]
id = "strong"
upstream = "hosted"
name = "{STRONG}"
price = {{ input = 10.0, output = 30.0 }}
default_skill = 0.9
"""


def contaminated(name: str) -> set[str]:
    path = DATA / name / "contaminated_prompts.jsonl"
    return {json.loads(line)["eval_prompt"] for line in path.read_text(encoding="utf-8").splitlines() if line}


def outcome(value: str) -> float:
    return 1.0 if value.strip() == "True" else 0.0


def _outcomes(path: Path, group: str, skip: set[str]) -> list[dict]:
    """A responses CSV's prompts with each model's outcome (RouteLLM's `True`/`False`)."""
    with path.open(encoding="utf-8", newline="") as handle:
        return [{"prompt": row["prompt"], "group": group, "weak": outcome(row[WEAK]), "strong": outcome(row[STRONG])}
                for row in csv.DictReader(handle) if row["prompt"] not in skip]


def load() -> dict[str, list[dict]]:
    """Each benchmark's prompts: text, group (MMLU's domain), and each model's outcome."""
    csv.field_size_limit(10_000_000)
    skip = contaminated("mmlu")
    mmlu = [row for path in sorted((DATA / "mmlu" / "responses").glob("mmlu_*.csv"))
            for row in _outcomes(path, path.stem[len("mmlu_"):], skip)]
    gsm8k = _outcomes(DATA / "gsm8k" / "gsm8k_responses.csv", "gsm8k", contaminated("gsm8k"))
    skip = contaminated("mt_bench")
    scores: dict[tuple[str, str], list[float]] = {}
    for line in (DATA / "mt_bench" / "judgements.jsonl").read_text(encoding="utf-8").splitlines():
        if line:
            judged = json.loads(line)
            scores.setdefault((str(judged["question_id"]), judged["model"]), []).append(float(judged["score"]))
    mt_bench = []
    for line in (DATA / "mt_bench" / "question.jsonl").read_text(encoding="utf-8").splitlines():
        question = json.loads(line) if line else None
        if question and not set(question["turns"][:2]) & skip:
            qid = str(question["question_id"])
            # Routed on the first turn; its quality is the mean of both turns' judge scores.
            mt_bench.append({"prompt": question["turns"][0], "group": question["category"],
                             "weak": sum(scores[qid, WEAK]) / len(scores[qid, WEAK]),
                             "strong": sum(scores[qid, STRONG]) / len(scores[qid, STRONG])})
    return {"mmlu": mmlu, "gsm8k": gsm8k, "mt_bench": mt_bench}


# -- RouteLLM's metrics, exact -----------------------------------------------------------------
def gains_taken(scores: list[float], gains: list[float]) -> list[float]:
    """The expected total gain of sending the k highest-scored prompts to the strong model, for
    k = 0..n; prompts with equal scores share their block's gain evenly."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    taken, total, i = [0.0], 0.0, 0
    while i < len(order):
        j = i
        while j < len(order) and scores[order[j]] == scores[order[i]]:
            j += 1
        block = sum(gains[k] for k in order[i:j]) / (j - i)
        for _ in range(i, j):
            total += block
            taken.append(total)
        i = j
    return taken


def metrics(scores: list[float] | None, rows: list[dict]) -> dict:
    """PGR at every share of strong calls, CPT(50 %), CPT(80 %) and APGR (scores None: the
    random router, exactly)."""
    n = len(rows)
    weak = sum(r["weak"] for r in rows) / n
    strong = sum(r["strong"] for r in rows) / n
    gains = [r["strong"] - r["weak"] for r in rows]
    taken = gains_taken([0.0] * n if scores is None else scores, gains)
    pgr = [(t / n) / (strong - weak) for t in taken]
    shares = [k / n for k in range(n + 1)]
    apgr = sum((pgr[k] + pgr[k + 1]) / 2 / n for k in range(n))

    def cpt(target: float) -> float | None:
        for k in range(1, n + 1):
            if pgr[k] >= target:  # interpolated within the step that crosses it
                return (k - 1 + (target - pgr[k - 1]) / (pgr[k] - pgr[k - 1])) / n
        return None

    step = max(1, n // 100)
    return {"weak": weak, "strong": strong, "apgr": apgr, "cpt50": cpt(0.5), "cpt80": cpt(0.8), "cpt95": cpt(0.95),
            "curve": [[round(shares[k], 4), round(pgr[k], 4)] for k in range(0, n + 1, step)]}


# -- the router's decision, as shipped ---------------------------------------------------------
def decide(rows: list[dict], url: str) -> tuple[list[float], list[str]]:
    """Each prompt's expected complexity and the catalogue's model, from the dry run (a few
    requests in flight, as clients would send them, so the gateway batches the engine's work)."""
    def one(row: dict) -> tuple[float, str]:
        body = {"model": "auto", "messages": [{"role": "user", "content": row["prompt"]}]}
        report = client.post("/v1/router/route", json=body).raise_for_status().json()
        return report["signals"]["complexity_score"], report["model"]

    with httpx.Client(base_url=url, timeout=120) as client, ThreadPoolExecutor(IN_FLIGHT) as pool:
        answers = list(pool.map(one, rows))
    return [a[0] for a in answers], [a[1] for a in answers]


def embed(rows: list[dict], engine_url: str) -> list[list[float]]:
    """MiniLM's vector of each prompt, from the engine server's `/v1/embed` in batches."""
    vectors: list[list[float]] = []
    with httpx.Client(base_url=engine_url, timeout=300) as client:
        for start in range(0, len(rows), EMBED_BATCH):
            states = [{"prompt": r["prompt"]} for r in rows[start:start + EMBED_BATCH]]
            vectors += client.post("/v1/embed", json={"states": states}).raise_for_status().json()["embeddings"]
    return vectors


# -- the learned head, nested ------------------------------------------------------------------
#: The candidates: the head's form and its regularisation (C, scikit-learn's inverse strength).
CANDIDATES = [(form, c) for form in ("gain", "each model") for c in (0.1, 1.0)]


def fold_of(rows: list[dict], index: list[int], folds: int, by_group: bool, seed: int | None = None) -> list[int]:
    """A fold per row of `index`: whole groups (in name order, or shuffled by `seed`) or every
    `folds`-th row."""
    import random

    if not by_group:
        return [i % folds for i in range(len(index))]
    groups = sorted({rows[i]["group"] for i in index})
    if seed is not None:
        random.Random(seed).shuffle(groups)
    of_group = {g: n % folds for n, g in enumerate(groups)}
    return [of_group[rows[i]["group"]] for i in index]


def head_scores(candidate: tuple[str, float], x, strong, weak, train, test):
    """Held-out scores of `test` from a candidate head fitted on `train` (`strong`, `weak`: each
    model right, 1 or 0, per prompt)."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    form, c = candidate

    def chance(label: np.ndarray, balanced: bool = False) -> np.ndarray:
        fitted = LogisticRegression(C=c, max_iter=3000, class_weight="balanced" if balanced else None)
        return fitted.fit(x[train], label[train]).predict_proba(x[test])[:, 1]

    if form == "gain":
        return chance(strong * (1 - weak), balanced=True)
    return chance(strong) - chance(weak)


def learned(rows: list[dict], embeddings: list[list[float]], by_group: bool) -> tuple[list[float], list[str]]:
    """Each prompt's score from a head fitted on the other folds (whole groups per fold where
    `by_group`), its candidate chosen by APGR over an inner split of those folds alone; and each
    fold's choice."""
    import numpy as np

    x = np.array(embeddings)
    strong = np.array([r["strong"] > 0.5 for r in rows], dtype=int)
    weak = np.array([r["weak"] > 0.5 for r in rows], dtype=int)
    outer = np.array(fold_of(rows, list(range(len(rows))), FOLDS, by_group))
    scores = np.zeros(len(rows))
    chosen = []
    for fold in range(FOLDS):
        train, test = np.flatnonzero(outer != fold), np.flatnonzero(outer == fold)
        inner = np.array(fold_of(rows, list(train), FOLDS - 1, by_group, seed=1))

        def inner_apgr(candidate: tuple[str, float]) -> float:
            held = np.zeros(len(train))
            for part in range(FOLDS - 1):
                held[inner == part] = head_scores(candidate, x, strong, weak, train[inner != part],
                                                         train[inner == part])
            return metrics(list(held), [rows[i] for i in train])["apgr"]

        best = max(CANDIDATES, key=inner_apgr)
        scores[test] = head_scores(best, x, strong, weak, train, test)
        chosen.append(f"{best[0]}, C {best[1]:g}")
    return [float(s) for s in scores], chosen


def run(limit: int | None) -> dict:
    data = load()
    if limit:
        data = {name: rows[:: max(1, len(rows) // limit)] for name, rows in data.items()}
    results: dict = {"rows": {name: len(rows) for name, rows in data.items()}, "benchmarks": {}}
    with ExitStack() as stack:
        port = free_port()
        serve(stack, [sys.executable, str(ROOT / "engines" / "systemone" / "serve.py"), "--port", str(port)],
              f"http://127.0.0.1:{port}/health", {"SYSTEMONE_THREADS": "2"})
        config = (f'[gateway]\nprovider = "systemone"\ncascade = []\n'
                  f'[providers.systemone]\nendpoint = "http://127.0.0.1:{port}"\nmax_options = 256\nbatch = true\n'
                  + CATALOGUE)
        url, _, _ = stack.enter_context(served_gateway(config, {"ROUTELLM_BENCH_KEY": "placeholder"}))
        for name, rows in data.items():
            started = time.perf_counter()
            complexity, chosen = decide(rows, url)
            entry = {"random": metrics(None, rows), "zero-shot": metrics(complexity, rows)}
            strong_share = sum(c == "strong" for c in chosen) / len(rows)
            quality = sum(r["strong"] if c == "strong" else r["weak"] for r, c in zip(rows, chosen)) / len(rows)
            weak, strong = entry["random"]["weak"], entry["random"]["strong"]
            entry["as_shipped"] = {"strong_share": strong_share, "quality": quality,
                                   "pgr": (quality - weak) / (strong - weak)}
            if name != "mt_bench":
                scores, choices = learned(rows, embed(rows, f"http://127.0.0.1:{port}"), by_group=name == "mmlu")
                entry["learned"] = {**metrics(scores, rows), "chosen": choices}
            entry["seconds"] = time.perf_counter() - started
            results["benchmarks"][name] = entry
            print(name, {k: {m: v[m] for m in ("apgr", "cpt50", "cpt80")} for k, v in entry.items()
                         if isinstance(v, dict) and "apgr" in v}, entry["as_shipped"], flush=True)
    return results


def pct(value: float | None) -> str:
    return "not reached" if value is None else f"{100 * value:.1f} %"


def share_at_quality(entry: dict, regime: str, of_strong: float = 0.95) -> float | None:
    """The share of strong calls at which quality first reaches `of_strong` × the strong model's
    (RouteLLM's own yardstick), read off the curve's 1 % steps."""
    weak, strong = entry["random"]["weak"], entry["random"]["strong"]
    needed = (of_strong * strong - weak) / (strong - weak)
    return next((share for share, pgr in entry[regime]["curve"] if pgr >= needed), None)


def report(results: dict) -> str:
    lines = ["# The router on RouteLLM's benchmark", "",
             "`make bench-routellm`: RouteLLM's per-prompt outcomes of gpt-4-1106-preview (strong) and "
             "Mixtral-8x7B-Instruct (weak), replayed through the router's decision; no chat model is called. "
             "PGR: the share of the quality gap between the two recovered; CPT(x %): the share of strong calls "
             "that reaches PGR x %; APGR: the area under PGR against that share. The random router is exact. "
             "zero-shot: the router as shipped (MiniLM with its heads), scored by its expected complexity; "
             "learned: a head fitted on the outcomes, scored only on prompts it was not fitted on (MMLU: whole "
             "domains held out; GSM8K: 5 folds), its form and regularisation chosen inside each fold's training "
             "prompts (below). RouteLLM's contaminated prompts are left out.", "",
             "Strong calls at 95 % of the strong model's quality is RouteLLM's yardstick, read off the curve to 1 %; "
             "beside it, RouteLLM's published figures for its best routers.", "",
             "| benchmark | prompts | weak / strong quality | regime | APGR | CPT(50 %) | CPT(80 %) | CPT(95 %) "
             "| strong calls at 95 % of its quality | RouteLLM's published |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, entry in results["benchmarks"].items():
        base = entry["random"]
        for regime in ("random", "zero-shot", "learned"):
            if regime not in entry:
                continue
            m = entry[regime]
            lines.append(f"| {name} | {results['rows'][name]} | {base['weak']:.3f} / {base['strong']:.3f} | {regime} | "
                         f"{m['apgr']:.3f} | {pct(m['cpt50'])} | {pct(m['cpt80'])} | {pct(m['cpt95'])} | "
                         f"{pct(share_at_quality(entry, regime))} | "
                         f"{PUBLISHED[name] if regime == 'learned' or (name == 'mt_bench' and regime == 'zero-shot') else ''} |")
    lines += ["", "The catalogue's own choice (weak default skill 0.62, strong 0.9, the shipped floors):", "",
              "| benchmark | strong calls | PGR |", "|---|---|---|"]
    for name, entry in results["benchmarks"].items():
        shipped = entry["as_shipped"]
        lines.append(f"| {name} | {pct(shipped['strong_share'])} | {shipped['pgr']:.3f} |")
    lines += ["", "The learned head chosen for each held-out fold, by cross-validation on its training prompts "
              "(\"gain\": one regression of the strong model right where the weak one is wrong; \"each model\": "
              "each model's chance of being right, scored by their difference):", ""]
    lines += [f"- {name}: {'; '.join(entry['learned']['chosen'])}"
              for name, entry in results["benchmarks"].items() if "learned" in entry]
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results["benchmarks"])
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.8))
    for ax, name in zip(axes, names):
        entry = results["benchmarks"][name]
        for regime, style in (("random", "--"), ("zero-shot", "-"), ("learned", "-")):
            if regime in entry:
                xs, ys = zip(*entry[regime]["curve"])
                ax.plot([100 * x for x in xs], ys, style, label=f"{regime} (APGR {entry[regime]['apgr']:.2f})")
        shipped = entry["as_shipped"]
        ax.plot([100 * shipped["strong_share"]], [shipped["pgr"]], "o", color="black", label="as shipped")
        ax.set_title(name)
        ax.set_xlabel("strong-model calls (%)")
        ax.set_ylabel("PGR")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, help="about this many prompts of each benchmark (a quick run)")
    args = parser.parse_args()
    results = {**run(args.limit), "published": PUBLISHED}  # the router's HTML report shows them beside ours
    (HERE / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (HERE / "RESULTS.md").write_text(report(results))
    plot(results, HERE / "pgr.png")


if __name__ == "__main__":
    main()
