"""Engine benchmark: `serve.py --engine minilm` on this machine's CPUs.

Starts the engine server as users run it and measures over HTTP, one client:
- p50/p90 latency of a single decision with 2, 5 and 20 options, both with options the engine
  has seen before (their embeddings are cached, as for a fixed option list) and with fresh ones;
- one batch call of 32 decisions (`/v1/systemone/batch`) against the same 32 as single calls, in
  rounds run back to back (with the engine's own time in the batch pass, from its metrics);
- the encoder's forward pass alone, one text and 32 at once, on ONNX Runtime (the engine's) side
  by side with the NumPy forward pass it replaced (read from git history, revision
  `NUMPY_REVISION`), with the largest difference between their embeddings and the FLOP rate.

    python bench/engines/run.py

Writes results.json, RESULTS.md and engines.png beside this file.
"""

from __future__ import annotations

import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchlib import free_port, percentile  # noqa: E402
ROOT = HERE.parents[1]
SERVE = ROOT / "engines" / "systemone" / "serve.py"
NUMPY_REVISION = "ea55b1b"  # the last revision whose MiniLM forward pass ran in NumPy
CALLS = 60
BATCH_ROUNDS = 15  # each: the 32 decisions as single calls, then as one batch; this CPU's speed drifts within a run
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


def pass_seconds(client: httpx.Client) -> float:
    """Seconds the engine has spent in its passes so far (its `systemone_pass_seconds` sum)."""
    match = re.search(r"^systemone_pass_seconds_sum (\S+)$", client.get("/metrics").text, re.M)
    return float(match.group(1))


def timed(client: httpx.Client, path: str, body: dict) -> float:
    started = time.perf_counter()
    response = client.post(path, json=body)
    response.raise_for_status()
    return (time.perf_counter() - started) * 1000



def load_encoder(name: str):
    """The engine's encoder ("onnxruntime"), or the NumPy one of `NUMPY_REVISION` ("numpy")."""
    import importlib.util
    import tempfile

    sys.path.insert(0, str(SERVE.parent))
    from systemone_engine import bert
    from systemone_engine.backends import MiniLM

    module = bert
    if name == "numpy":
        source = subprocess.run(["git", "-C", str(ROOT), "show", f"{NUMPY_REVISION}:engines/systemone/systemone_engine/bert.py"],
                                capture_output=True, text=True, check=True).stdout
        with tempfile.NamedTemporaryFile("w", suffix=".py") as handle:
            handle.write(source)
            handle.flush()
            spec = importlib.util.spec_from_file_location("numpy_bert", handle.name)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
    return module.BertEncoder(MiniLM.default_model_dir())


FORWARD_TEXTS = [f"Which team should handle this ticket?\n{state}" for state in STATES]


def matmul_gflops(tokens: int, rounds: int = 50) -> float:
    """The rate ONNX Runtime's CPU kernels reach here on the encoder's largest product alone,
    tokens × 384 by 384 × 1536, with the engine's thread settings: what a batch could reach."""
    import numpy as np
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.random.default_rng(0).random((384, 1536), dtype=np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "product",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [tokens, 384])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [tokens, 1536])], [weight])
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = int(os.environ.get("OMP_NUM_THREADS") or 0)
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = onnxruntime.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
                                           .SerializeToString(), options, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).random((tokens, 384), dtype=np.float32)
    for _ in range(5):
        session.run(None, {"x": x})
    started = time.perf_counter()
    for _ in range(rounds):
        session.run(None, {"x": x})
    return 2 * tokens * 384 * 1536 / ((time.perf_counter() - started) / rounds) / 1e9


def forward_worker(name: str, rounds: int) -> None:
    """One encoder in this process (so neither's threads disturb the other): its timings and
    embeddings as JSON on stdout."""
    encoder = load_encoder(name)
    encoder.encode(FORWARD_TEXTS)
    one, batch = [], []
    for _ in range(rounds):
        for times, chunk in ((one, FORWARD_TEXTS[:1]), (batch, FORWARD_TEXTS)):
            started = time.perf_counter()
            encoder.encode(chunk)
            times.append((time.perf_counter() - started) * 1000)
    memory = {line.split(":")[0]: int(line.split()[1]) // 1024 for line in Path("/proc/self/status").read_text().splitlines()
              if line.startswith(("VmRSS", "VmHWM"))}
    tokens = encoder.count_tokens(FORWARD_TEXTS)
    print(json.dumps({"one": one, "batch": batch, "embeddings": encoder.encode(FORWARD_TEXTS).tolist(),
                      "tokens": tokens, "rss_mb": memory["VmRSS"], "peak_rss_mb": memory["VmHWM"],
                      "matmul_gflops": matmul_gflops(tokens) if name == "onnxruntime" else None}))


def forward_passes(turns: int = 3, rounds: int = 10) -> dict:
    """The encoder alone, ONNX Runtime against NumPy, each in its own process, in turn."""
    import numpy as np

    runs: dict[str, list[dict]] = {"onnxruntime": [], "numpy": []}
    env = {**os.environ, "OMP_NUM_THREADS": str(len(os.sched_getaffinity(0)))}  # as serve.py sets it
    for _ in range(turns):
        for name in runs:
            done = subprocess.run([sys.executable, __file__, "--forward-worker", name, str(rounds)], env=env,
                                  capture_output=True, text=True, check=True)
            runs[name].append(json.loads(done.stdout))
    tokens = runs["onnxruntime"][0]["tokens"]
    # Two FLOPs per weight of the layers' matrices per token (attention scores are a small extra):
    # per layer, four 384x384 attention matrices and two 384x1536 feed-forward ones.
    per_token = 2 * 6 * (4 * 384 * 384 + 2 * 384 * 1536)
    difference = float(np.abs(np.array(runs["onnxruntime"][0]["embeddings"]) - np.array(runs["numpy"][0]["embeddings"])).max())
    result = {"numpy_revision": NUMPY_REVISION, "turns": turns, "rounds": rounds, "tokens_in_batch": tokens,
              "mflop_per_token": round(per_token / 1e6, 1), "max_embedding_difference": difference,
              "matmul_alone_gflops": round(statistics.median(run["matmul_gflops"] for run in runs["onnxruntime"]), 1)}
    for name, turns_of in runs.items():
        one = statistics.median(t for run in turns_of for t in run["one"])
        batch = statistics.median(t for run in turns_of for t in run["batch"])
        result[name] = {"one_text_ms": round(one, 2), "batch_32_ms": round(batch, 1), "speedup_32": round(32 * one / batch, 2),
                        "batch_gflops": round(per_token * tokens / batch / 1e6, 1),
                        "rss_mb": max(run["rss_mb"] for run in turns_of), "peak_rss_mb": max(run["peak_rss_mb"] for run in turns_of)}
    return result


def main() -> None:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(SERVE), "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results: dict = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
                     "command": "python bench/engines/run.py", "date": time.strftime("%Y-%m-%d"), "engine": "minilm (ONNX Runtime, CPU)"}
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
            rounds = []
            for _ in range(BATCH_ROUNDS):
                started = time.perf_counter()
                for state in STATES:
                    client.post("/v1/systemone", json={"state": state, "questions": body}).raise_for_status()
                singles_ms = (time.perf_counter() - started) * 1000
                engine_before = pass_seconds(client)
                batch_ms = timed(client, "/v1/systemone/batch", {"states": STATES, "questions": body})
                rounds.append({"single_calls_ms": round(singles_ms, 1), "batch_call_ms": round(batch_ms, 1),
                               "batch_engine_ms": round((pass_seconds(client) - engine_before) * 1000, 1)})
            # Each round's single calls and batch call run back to back, so their ratio is the fair one.
            speedups = sorted(round(r["single_calls_ms"] / r["batch_call_ms"], 2) for r in rounds)
            results["batch_32"] = {
                "rounds": rounds,
                "single_calls_ms_median": round(statistics.median(r["single_calls_ms"] for r in rounds), 1),
                "batch_pass_ms_median": round(statistics.median(r["batch_call_ms"] for r in rounds), 1),
                "batch_engine_ms_median": round(statistics.median(r["batch_engine_ms"] for r in rounds), 1),
                "round_speedups": speedups,
                "speedup": statistics.median(speedups),
            }
    finally:
        process.terminate()
        process.wait(timeout=30)
    results["forward_pass"] = forward_passes()
    (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (HERE / "RESULTS.md").write_text(report(results))
    plot(results)
    print((HERE / "RESULTS.md").read_text())


def report(r: dict) -> str:
    rows = [f"| {n} | {r[f'options_{n}']['p50_ms_cached_options']:.1f} / {r[f'options_{n}']['p90_ms_cached_options']:.1f} | "
            f"{r[f'options_{n}']['p50_ms_fresh_options']:.1f} / {r[f'options_{n}']['p90_ms_fresh_options']:.1f} |" for n in (2, 5, 20)]
    b, f = r["batch_32"], r["forward_pass"]
    single_call = b["single_calls_ms_median"] / 32
    floor = f["mflop_per_token"] * f["tokens_in_batch"] / f["matmul_alone_gflops"]  # MFLOP / (GFLOP/s): ms at the best rate
    overhead = max(0.0, b["batch_pass_ms_median"] - b["batch_engine_ms_median"])
    bound = b["single_calls_ms_median"] / (floor + overhead)
    speedups = b["round_speedups"]
    return "\n".join([
        "# Engine benchmark: results", "",
        f"`serve.py --engine minilm` on {r['machine']['cpus']} CPUs, Python {r['machine']['python']}, measured {r['date']} with "
        f"`{r['command']}`; one client over HTTP on loopback. Raw figures: `results.json`; chart: `engines.png`.", "",
        "Latency of one decision (ms, p50 / p90); \"seen\" options have cached embeddings, \"fresh\" ones are embedded on the call:", "",
        "| options | seen options | fresh options |", "|---|---|---|", *rows, "",
        f"32 decisions (5 options each), {len(b['rounds'])} rounds of the 32 as single calls and then as one batch call "
        f"(medians): single calls {b['single_calls_ms_median']:.0f} ms, the batch call {b['batch_pass_ms_median']:.0f} ms "
        f"(its pass in the engine {b['batch_engine_ms_median']:.0f} ms). Each round's single calls against its batch call: "
        f"**{b['speedup']:.2f}×** (median), {speedups[0]}–{speedups[-1]}× over the rounds, {sum(x >= 3 for x in speedups)} "
        f"of {len(speedups)} at 3× or more.", "",
        "Targets: p50 at most 30 ms for 5 options; a batch pass at least 3 times the throughput of single calls.", "",
        f"The encoder's forward pass alone (median over {f['turns']} turns of {f['rounds']} rounds, each encoder in its own process, in turn), ONNX Runtime as the engine runs it "
        f"against the NumPy forward pass of revision {f['numpy_revision']}; largest difference between their embeddings "
        f"{f['max_embedding_difference']:.1e}:", "",
        "| forward pass | one text | 32 texts | 32 alone / 32 at once | batch compute rate | process memory after / peak |",
        "|---|---|---|---|---|---|",
        *[f"| {name} | {f[name]['one_text_ms']:.2f} ms | {f[name]['batch_32_ms']:.1f} ms | {f[name]['speedup_32']}× | "
          f"{f[name]['batch_gflops']} GFLOP/s | {f[name]['rss_mb']} / {f[name]['peak_rss_mb']} MB |" for name in ("onnxruntime", "numpy")],
        "", "ONNX Runtime holds its own copy of the weights and briefly the graph being loaded, so it costs more memory.", "",
        f"The 32 texts are {f['tokens_in_batch']} tokens, {f['mflop_per_token']} MFLOP each in the encoder's layers. Inside the "
        f"encoder a batch gains {f['onnxruntime']['speedup_32']}× (larger matrix products keep both cores busier). A single "
        f"call over HTTP costs {single_call:.1f} ms, of which {f['onnxruntime']['one_text_ms']:.1f} ms is the forward pass.", "",
        f"What a batch could reach: the encoder's largest matrix product alone, at the batch's size, runs at "
        f"{f['matmul_alone_gflops']} GFLOP/s here; the batch pass runs its layers at {f['onnxruntime']['batch_gflops']} GFLOP/s, "
        f"{f['onnxruntime']['batch_gflops'] / f['matmul_alone_gflops']:.0%} of that (the rest of its time is the small per-layer "
        f"work: adds, layer norms, GELU, attention). With all of its products at that rate ({floor:.0f} ms) plus what the "
        f"batch call costs outside the engine's pass ({overhead:.0f} ms: HTTP, parsing and answers), a batch could be {bound:.1f}× the single calls"
        + (": 3× is within what this CPU allows, and a run's figure moves most with the single calls' cost."
           if bound >= 3 else ": 3× is out of reach on this CPU."), "",
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
    if sys.argv[1:2] == ["--forward-worker"]:
        forward_worker(sys.argv[2], int(sys.argv[3]))
    else:
        main()
