"""Engine benchmark: `serve.py --engine minilm` on this machine's CPUs.

Starts the engine server as users run it and measures over HTTP, one client:
- p50/p90 latency of a single decision with 2, 5 and 20 options, both with options the engine
  has seen before (their embeddings are cached, as for a fixed option list) and with fresh ones;
- one batch pass of 32 decisions (`/v1/systemone/batch`) against the same 32 as single calls.

    python bench/engines/run.py

Writes results.json, RESULTS.md and engines.png beside this file.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchlib import free_port, percentile  # noqa: E402
SERVE = HERE.parents[1] / "engines" / "systemone" / "serve.py"
CALLS = 60
STATES = [f"Ticket {i}: the customer writes that {topic}." for i, topic in enumerate([
    "the invoice shows a double charge", "the app crashes when opening settings", "they want a quote for 40 seats",
    "the parcel never arrived", "the password reset email is missing", "the dashboard is slow since Monday",
    "a refund is two weeks late", "the API returns 502 errors"] * 4)]



def options(count: int, salt: str = "") -> dict[str, str]:
    topics = ["billing and refunds", "bugs and crashes", "sales and pricing", "shipping and delivery", "account access",
              "performance", "integrations", "security", "legal", "feedback", "onboarding", "data export", "mobile app",
              "notifications", "reporting", "permissions", "localisation", "accessibility", "outages", "other"]
    return {f"team{i}{salt}": f"{topics[i]} {salt}".strip() for i in range(count)}


def question(count: int, salt: str = "") -> dict:
    return {"team": {"type": "choice", "instructions": "Which team should handle this ticket?", "criteria": options(count, salt)}}


def timed(client: httpx.Client, path: str, body: dict) -> float:
    started = time.perf_counter()
    response = client.post(path, json=body)
    response.raise_for_status()
    return (time.perf_counter() - started) * 1000



def main() -> None:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(SERVE), "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results: dict = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
                     "command": "python bench/engines/run.py", "date": time.strftime("%Y-%m-%d"), "engine": "minilm (NumPy, CPU)"}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            for _ in range(300):
                try:
                    if client.get("/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            for count in (2, 5, 20):
                timed(client, "/v1/systemone", {"state": STATES[0], "questions": question(count)})  # warm the cache
                warm = [timed(client, "/v1/systemone", {"state": STATES[i % len(STATES)], "questions": question(count)})
                        for i in range(CALLS)]
                cold = [timed(client, "/v1/systemone", {"state": STATES[i % len(STATES)], "questions": question(count, f"v{i}")})
                        for i in range(CALLS // 3)]
                results[f"options_{count}"] = {
                    "p50_ms_cached_options": round(percentile(warm, 50), 2), "p90_ms_cached_options": round(percentile(warm, 90), 2),
                    "p50_ms_fresh_options": round(percentile(cold, 50), 2), "p90_ms_fresh_options": round(percentile(cold, 90), 2),
                }
            body = question(5)
            singles, batches = [], []
            for _ in range(5):
                started = time.perf_counter()
                for state in STATES:
                    client.post("/v1/systemone", json={"state": state, "questions": body}).raise_for_status()
                singles.append((time.perf_counter() - started) * 1000)
                batches.append(timed(client, "/v1/systemone/batch", {"states": STATES, "questions": body}))
            results["batch_32"] = {
                "single_calls_ms_median": round(statistics.median(singles), 1),
                "batch_pass_ms_median": round(statistics.median(batches), 1),
                "speedup": round(statistics.median(singles) / statistics.median(batches), 2),
            }
    finally:
        process.terminate()
        process.wait(timeout=30)
    (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (HERE / "RESULTS.md").write_text(report(results))
    plot(results)
    print((HERE / "RESULTS.md").read_text())


def report(r: dict) -> str:
    rows = [f"| {n} | {r[f'options_{n}']['p50_ms_cached_options']:.1f} / {r[f'options_{n}']['p90_ms_cached_options']:.1f} | "
            f"{r[f'options_{n}']['p50_ms_fresh_options']:.1f} / {r[f'options_{n}']['p90_ms_fresh_options']:.1f} |" for n in (2, 5, 20)]
    b = r["batch_32"]
    return "\n".join([
        "# Engine benchmark: results", "",
        f"`serve.py --engine minilm` on {r['machine']['cpus']} CPUs, Python {r['machine']['python']}, measured {r['date']} with "
        f"`{r['command']}`; one client over HTTP on loopback. Raw figures: `results.json`; chart: `engines.png`.", "",
        "Latency of one decision (ms, p50 / p90); \"seen\" options have cached embeddings, \"fresh\" ones are embedded on the call:", "",
        "| options | seen options | fresh options |", "|---|---|---|", *rows, "",
        f"32 decisions (5 options each): 32 single calls {b['single_calls_ms_median']:.0f} ms, one batch pass "
        f"{b['batch_pass_ms_median']:.0f} ms: **{b['speedup']}×** (median of 5).", "",
        "Targets: p50 at most 30 ms for 5 options; a batch pass at least 3 times the throughput of single calls. "
        "On a CPU the encoder is compute-bound: a batch saves the per-call HTTP and Python overhead and shares the option "
        "embeddings, but every state still costs its own forward pass, so the gain stays well under 3×.", "",
    ])


def plot(r: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    counts = [2, 5, 20]
    ax.plot(counts, [r[f"options_{n}"]["p50_ms_cached_options"] for n in counts], marker="o", label="p50, seen options")
    ax.plot(counts, [r[f"options_{n}"]["p50_ms_fresh_options"] for n in counts], marker="o", label="p50, fresh options")
    ax.axhline(30, color="grey", linestyle="--", linewidth=1, label="30 ms target (5 options)")
    ax.set_xlabel("options per decision")
    ax.set_ylabel("latency (ms)")
    ax.set_title("minilm engine, one decision, CPU")
    ax.legend()
    fig.tight_layout()
    fig.savefig(HERE / "engines.png", dpi=110)


if __name__ == "__main__":
    main()
