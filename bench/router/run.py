"""Router benchmark: what the `model: auto` router adds to a chat request, on this machine.

- The local work alone, in process: the pre-check and the scoring of a 2k-token prompt (code,
  and prose), p50/p99 over repeated runs.
- The whole plan over HTTP (`POST /v1/router/route`: pre-check, the four-question decision and
  scoring), p50/p99, with the mock engine, with MiniLM (`serve.py`) alone, and with MiniLM and
  the shipped heads of the router's questions, on MiniLM's vectors (`[learning] models = {}`)
  and on e5's (the default, as the stack runs it), and the decision's own share as the router
  measured it.
- Streaming time to first byte through the router (`model: auto`) against the same request sent
  straight to the upstream (the fake hosted chat API, served locally), interleaved in one run,
  and what the router adds beyond its decision (`X-Router-Decision-Ms`).

    python bench/router/run.py [--quick]

Writes results.json, RESULTS.md and router.png beside this file.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(HERE.parent), str(ROOT), str(ROOT / "services" / "gateway")]

from benchlib import free_port, percentile, process, served_gateway  # noqa: E402
from system1.core.router_config import RouterSettings  # noqa: E402
from system1.router.conversation import from_openai  # noqa: E402
from system1.router.precheck import precheck  # noqa: E402
from system1.router.scoring import Live, Signals, route  # noqa: E402
from tests.fakes.hosted_chat import hosted_chat  # noqa: E402

CODE = (ROOT / "services" / "gateway" / "system1" / "core" / "gateway.py").read_text()[:6500]
#: As in the stack's config: MiniLM reads 256 tokens, so the judged text is cut to about that.
DECISION_CHARS = 1000
PROSE = ("The quarterly report covers revenue, hiring and the roadmap for the next two releases, "
         "with a section on what went wrong in the migration and how the team will avoid it. ") * 44


def tokens_of(text: str) -> int:
    return precheck(from_openai({"model": "auto", "messages": [{"role": "user", "content": text}]})).needs.input_tokens


def catalogue(upstream_url: str = "http://127.0.0.1:9") -> RouterSettings:
    return RouterSettings.model_validate({
        "enabled": True, "private": "ignore",
        "upstreams": {"cloud": {"base_url": upstream_url, "apis": ["openai", "anthropic"], "local": False}},
        "models": [{"id": f"cloud/m{i}", "upstream": "cloud", "price": {"in": i, "out": 4 * i},
                    "default_skill": 0.3 + 0.1 * i, "context": 200_000, "tools": True} for i in range(1, 7)],
    })


def stats(times: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(times), 3), "p99": round(percentile(times, 99), 3), "n": len(times)}


def local_work(rounds: int) -> dict:
    settings = catalogue()
    signals = Signals(topics={"debugging": 0.7, "code-gen": 0.3}, confidence=0.9, complexity=2, risk=1)
    out = {}
    for name, text in (("code", CODE), ("prose", PROSE)):
        body = {"model": "auto", "messages": [{"role": "user", "content": text}]}
        precheck(from_openai(body))  # the detectors are built on the first call
        checks, scores = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            needs = precheck(from_openai(body)).needs
            checked = time.perf_counter()
            route(settings, signals, needs, Live())
            checks.append((checked - started) * 1000)
            scores.append((time.perf_counter() - checked) * 1000)
        total = [a + b for a, b in zip(checks, scores)]
        out[name] = {"input_tokens": tokens_of(text), "chars": len(text), "precheck_ms": stats(checks),
                     "scoring_ms": stats(scores), "total_ms": stats(total)}
    return out


#: The decision engines measured: the provider, and the `[learning]` section (heads off, or on
#: with the router's heads on MiniLM's or on e5's vectors).
ENGINES = {"mock": ("mock engine", "mock", "enabled = false\n"),
           "systemone": ("MiniLM (serve.py)", "systemone", "enabled = false\n"),
           "minilm-heads": ("MiniLM, heads on MiniLM", "systemone", "enabled = true\nmodels = {}\n"),
           "e5-heads": ("MiniLM, heads on e5", "systemone", "enabled = true\n")}


@contextmanager
def minilm_engine():
    port = free_port()
    with process([sys.executable, str(ROOT / "engines" / "systemone" / "serve.py"), "--port", str(port),
                  "--embedders", "e5"],
                 ready_url=f"http://127.0.0.1:{port}/health", ready_timeout_s=120):
        yield f"http://127.0.0.1:{port}"


def router_config(variant: str, engine_url: str, upstream_url: str) -> str:
    _, engine, learning = ENGINES[variant]
    table = catalogue(upstream_url)
    lines = [f'[gateway]\nprovider = "{engine}"\ntimeout_s = 30\n[learning]\n{learning}']
    if engine == "systemone":
        lines.append(f'[providers.systemone]\nendpoint = "{engine_url}"\n')
    lines.append(f'[router]\nenabled = true\nprivate = "ignore"\n[router.decision]\nchars = {DECISION_CHARS}\n')
    lines.append(f'[router.upstreams.cloud]\nbase_url = "{upstream_url}"\napis = ["openai", "anthropic"]\nlocal = false\n')
    for m in table.models:
        lines.append(f'[[router.models]]\nid = "{m.id}"\nupstream = "cloud"\nprice = {{ in = {m.price.input}, '
                     f'out = {m.price.output} }}\ndefault_skill = {m.default_skill}\ncontext = 200000\n')
    return "".join(lines)


def plan_latency(url: str, text: str, rounds: int) -> dict:
    body = {"model": "auto", "messages": [{"role": "user", "content": text}]}
    with httpx.Client(timeout=60) as client:
        for _ in range(5):
            client.post(f"{url}/v1/router/route", json=body)
        whole, decision = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            report = client.post(f"{url}/v1/router/route", json=body).raise_for_status().json()
            whole.append((time.perf_counter() - started) * 1000)
            decision.append(report["decision_ms"])
    return {"plan_http_ms": stats(whole), "decision_ms": stats(decision),
            "beyond_decision_ms": stats([w - d for w, d in zip(whole, decision)])}


def first_byte(client: httpx.Client, url: str, body: dict) -> tuple[float, float | None]:
    """Milliseconds to the first byte of the streamed body, and the router's decision time."""
    started = time.perf_counter()
    with client.stream("POST", url, json=body) as response:
        chunks = response.iter_raw()
        next(chunks)
        elapsed = (time.perf_counter() - started) * 1000
        decided = response.headers.get("x-router-decision-ms")
        for _ in chunks:
            pass
    return elapsed, (float(decided) if decided else None)


def time_to_first_byte(gateway_url: str, upstream_url: str, rounds: int) -> dict:
    """Each routed request starts a new conversation (a sticky one would skip the decision)."""
    def bodies(i: int) -> tuple[dict, dict]:
        prompt = [{"role": "user", "content": f"Why does test {i} fail on CI but not locally?"}]
        return ({"model": "auto", "stream": True, "messages": prompt},
                {"model": "cloud/m3", "stream": True, "messages": prompt, "stream_options": {"include_usage": True}})

    runs: dict[str, list[float]] = {"direct": [], "routed": [], "added_beyond_decision": [], "decision": []}
    with httpx.Client(timeout=60) as client:
        for i in range(5):
            routed, direct = bodies(-i - 1)
            first_byte(client, f"{upstream_url}/v1/chat/completions", direct)
            first_byte(client, f"{gateway_url}/v1/chat/completions", routed)
        for i in range(rounds):
            routed, direct = bodies(i)
            straight, _ = first_byte(client, f"{upstream_url}/v1/chat/completions", direct)
            through, decided = first_byte(client, f"{gateway_url}/v1/chat/completions", routed)
            runs["direct"].append(straight)
            runs["routed"].append(through)
            runs["decision"].append(decided)
            runs["added_beyond_decision"].append(through - straight - decided)
    return {name: stats(values) for name, values in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds = 40 if args.quick else 200
    results: dict = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
                     "date": time.strftime("%Y-%m-%d"), "local_work": local_work(rounds)}
    with hosted_chat() as upstream, minilm_engine() as engine_url:
        for engine in ENGINES:
            with served_gateway(router_config(engine, engine_url, upstream.url)) as (url, _, _):
                results[engine] = {"plan": plan_latency(url, CODE, rounds // 2),
                                   "ttfb": time_to_first_byte(url, upstream.url, rounds // 2)}
    (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (HERE / "RESULTS.md").write_text(report(results))
    plot(results)
    print(report(results))


def report(r: dict) -> str:
    local = r["local_work"]
    rows = [f"| {name} ({w['input_tokens']} tokens, {w['chars']} chars) | {w['precheck_ms']['p50']:.2f} / "
            f"{w['precheck_ms']['p99']:.2f} | {w['scoring_ms']['p50']:.3f} / {w['scoring_ms']['p99']:.3f} | "
            f"**{w['total_ms']['p50']:.2f}** / {w['total_ms']['p99']:.2f} |" for name, w in local.items()]
    engines = {variant: label for variant, (label, _, _) in ENGINES.items()}
    plans = [f"| {engines[e]} | {r[e]['plan']['plan_http_ms']['p50']:.1f} / {r[e]['plan']['plan_http_ms']['p99']:.1f} | "
             f"{r[e]['plan']['decision_ms']['p50']:.1f} / {r[e]['plan']['decision_ms']['p99']:.1f} | "
             f"{r[e]['plan']['beyond_decision_ms']['p50']:.1f} / {r[e]['plan']['beyond_decision_ms']['p99']:.1f} |"
             for e in engines]
    ttfb = [f"| {engines[e]} | {r[e]['ttfb']['direct']['p50']:.2f} | {r[e]['ttfb']['routed']['p50']:.2f} / "
            f"{r[e]['ttfb']['routed']['p99']:.2f} | {r[e]['ttfb']['decision']['p50']:.2f} | "
            f"**{r[e]['ttfb']['added_beyond_decision']['p50']:.2f}** / {r[e]['ttfb']['added_beyond_decision']['p99']:.2f} |"
            for e in engines]
    return "\n".join([
        "# Router benchmark: results", "",
        f"Measured {r['date']} with `python bench/router/run.py` on {r['machine']['cpus']} CPUs, Python "
        f"{r['machine']['python']}. Raw figures: `results.json`; chart: `router.png`. Times in ms, p50 / p99.", "",
        "The local work on a prompt of about 2k tokens, in process (target: pre-check + scoring ≤ 2 ms p50):", "",
        "| prompt | pre-check | scoring | both |", "|---|---|---|---|", *rows, "",
        "The whole plan over HTTP (`POST /v1/router/route`: pre-check, the four-question decision, scoring), on "
        "the code prompt:", "",
        "| decision engine | plan, whole round trip | the decision | the rest |", "|---|---|---|---|", *plans, "",
        "Streaming time to first byte, the same request straight to the upstream and through the router "
        "(`model: auto`), interleaved (target: added = decision + ≤ 3 ms p50):", "",
        "| decision engine | direct | through the router | its decision | added beyond the decision |",
        "|---|---|---|---|---|", *ttfb, "",
    ])


def plot(r: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    engines = list(ENGINES)
    labels = [label for label, _, _ in ENGINES.values()]
    direct = [r[e]["ttfb"]["direct"]["p50"] for e in engines]
    decision = [r[e]["ttfb"]["decision"]["p50"] for e in engines]
    rest = [max(0.0, r[e]["ttfb"]["added_beyond_decision"]["p50"]) for e in engines]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.barh(labels, direct, label="upstream's own first byte")
    ax.barh(labels, decision, left=direct, label="router: decision")
    ax.barh(labels, rest, left=[a + b for a, b in zip(direct, decision)], label="router: everything else")
    ax.set_xlabel("time to first byte, p50 (ms)")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "router.png", dpi=120)


if __name__ == "__main__":
    main()
