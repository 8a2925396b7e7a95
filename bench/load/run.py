"""Load benchmark of the gateway service: what the gateway costs and what batching buys.

Starts the service (`system1 serve`, one uvicorn worker) and a simulated engine as separate
processes, drives them with wrk (C, event-driven; its own CPU share is reported so it can be
seen not to be the bottleneck) and with small asyncio clients where a fixed request count or
two kinds of client are needed, then writes `results.json`, `RESULTS.md` and `load.png`.

    python bench/load/run.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchlib import free_port, percentile, process, served_gateway  # noqa: E402
SEED = {"question": "Rerun the flaky pipeline or block the merge?", "options": ["rerun the pipeline", "block the merge"]}
INTERACTIVE_Q = {"question": "Is this command destructive: rm -rf build/?"}
CLK_TCK = os.sysconf("SC_CLK_TCK")



def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


@contextmanager
def engine(base_ms: float, per_question_ms: float):
    port = free_port()
    args = [sys.executable, str(HERE / "sim_engine.py"), "--port", str(port),
            "--base-ms", str(base_ms), "--per-question-ms", str(per_question_ms)]
    with process(args, ready_url=f"http://127.0.0.1:{port}/health"):
        yield f"http://127.0.0.1:{port}"


@contextmanager
def bare_endpoint():
    """The reference endpoint (bare_endpoint.py) on the same server stack as the gateway."""
    port = free_port()
    with process([sys.executable, str(HERE / "bare_endpoint.py"), "--port", str(port)],
                 ready_url=f"http://127.0.0.1:{port}/readyz") as proc:
        yield f"http://127.0.0.1:{port}", proc


def side_by_side(seconds: int, rounds: int) -> dict:
    """The gateway on the mock engine against the bare endpoint, 16 connections, run in turn
    `rounds` times so that each pair sees the same machine; the median of the pairs' ratios."""
    from system1.service.server import server_stack

    runs: dict[str, list[dict]] = {"gateway": [], "bare": []}
    with served_gateway(MOCK_CONFIG) as (url, proc, _), bare_endpoint() as (bare_url, bare_proc):
        for _ in range(rounds):
            for name, base, pid in (("gateway", url, proc.pid), ("bare", bare_url, bare_proc.pid)):
                runs[name].append(wrk(base + "/v1/decide", SEED, 16, seconds, watch_pid=pid))
        one = {name: wrk(base + "/v1/decide", SEED, 1, seconds) for name, base in (("gateway", url), ("bare", bare_url))}
    ratios = [g["requests_per_s"] / b["requests_per_s"] for g, b in zip(runs["gateway"], runs["bare"])]
    return {
        "server_stack": " + ".join(server_stack()),
        "rounds": rounds,
        "connections": 16,
        "gateway_requests_per_s": [r["requests_per_s"] for r in runs["gateway"]],
        "bare_requests_per_s": [r["requests_per_s"] for r in runs["bare"]],
        "ratio": round(statistics.median(ratios), 3),
        "ratios": [round(r, 3) for r in ratios],
        "one_connection_p50_ms": {name: r["p50"] for name, r in one.items()},
        "non_2xx": sum(r["non_2xx"] for rs in runs.values() for r in rs),
    }


def systemone_config(endpoint: str, batch: bool, timeout_s: float = 30) -> str:
    return (f'[gateway]\nprovider = "systemone"\ntimeout_s = {timeout_s}\nmin_confidence = 0\n'
            f'[service]\nhealth_interval_s = 60\n'
            f'[providers.systemone]\nendpoint = "{endpoint}"\nbatch = {str(batch).lower()}\n'
            f'max_batch = 64\nmax_queue = 1000\n')


MOCK_CONFIG = '[gateway]\nprovider = "mock"\nmin_confidence = 0\n[service]\nhealth_interval_s = 60\n[providers.mock]\nmax_queue = 1000\n'

_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0}


def _ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()
    return float(value) * _UNITS[unit]


def wrk(url: str, body: dict, connections: int, seconds: int, threads: int = 1, priority: str = "",
        watch_pid: int | None = None) -> dict:
    """Run wrk; return throughput, latency percentiles, errors and the CPU used by wrk and `watch_pid`."""
    env = {**os.environ, "WRK_BODY": json.dumps(body), "WRK_PRIORITY": priority}
    args = ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{seconds}s", "--latency",
            "-s", str(HERE / "post.lua"), url]
    watched_before = cpu_seconds(watch_pid) if watch_pid else 0.0
    started = time.monotonic()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.monotonic() - started
    out = proc.stdout.read()
    proc.stdout.close()
    proc.returncode = os.waitstatus_to_exitcode(status)
    percentiles = {f"p{p}": _ms(v) for p, v in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", out, re.M)}
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    return {
        "requests_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),
        "requests": int(re.search(r"(\d+) requests in", out).group(1)),
        **percentiles,
        "non_2xx": int(non_2xx.group(1)) if non_2xx else 0,
        "socket_errors": errors.group(1) if errors else None,
        "wrk_cpu_share": round((usage.ru_utime + usage.ru_stime) / elapsed, 3),
        "server_cpu_share": round((cpu_seconds(watch_pid) - watched_before) / elapsed, 3) if watch_pid else None,
        "connections": connections,
        "seconds": seconds,
    }



async def timed_calls(url: str, body: dict, count: int, headers: dict | None = None) -> list[float]:
    async with httpx.AsyncClient(timeout=60) as client:
        times = []
        for _ in range(count):
            started = time.perf_counter()
            response = await client.post(url, json=body, headers=headers)
            response.raise_for_status()
            times.append((time.perf_counter() - started) * 1000)
        return times


async def flood(url: str, count: int) -> dict[str, int]:
    """`count` batch-priority requests at once from one client (run in its own process)."""
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=count + 8)) as client:
        async def one() -> int:
            r = await client.post(url, json=SEED, headers={"X-System1-Priority": "batch", "X-System1-Client": "bench"})
            return r.status_code

        statuses = await asyncio.gather(*(one() for _ in range(count)))
    return {str(s): statuses.count(s) for s in set(statuses)}


def flood_and_interactive(url: str, count: int, calls: int) -> dict:
    """A flood from another process while this one asks `calls` interactive questions in turn."""
    flooder = subprocess.Popen([sys.executable, __file__, "--flood", url, str(count)], stdout=subprocess.PIPE, text=True)
    metrics_url = url.replace("/v1/decide", "/metrics")
    while queue_depth(httpx.get(metrics_url)) < count // 2:  # the flood is queued
        time.sleep(0.05)
    times = asyncio.run(timed_calls(url, INTERACTIVE_Q, calls, {"X-System1-Client": "alice"}))
    still_queued = queue_depth(httpx.get(metrics_url))
    out, _ = flooder.communicate(timeout=300)
    return {"interactive_ms": times, "flood_still_queued_after": still_queued, "flood_statuses": json.loads(out)}


def queue_depth(response: httpx.Response, metric: str = "system1_lane_queue_depth") -> int:
    found = re.search(rf'^{metric}\{{provider="systemone"\}} ([\d.]+)', response.text, re.M)
    return int(float(found.group(1))) if found else 0


def wait_idle(url: str, timeout_s: float = 60) -> None:
    """Until the systemone lane has nothing queued or running (earlier load has drained)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        metrics = httpx.get(url + "/metrics")
        if queue_depth(metrics) == 0 and queue_depth(metrics, "system1_lane_in_flight") == 0:
            return
        time.sleep(0.05)
    raise RuntimeError("the lane did not drain")


def stdio_costs(env: dict[str, str], calls: int) -> dict:
    """Spawn-to-first-answer of `system1 mcp` in `env`, and its per-call cost against REST."""
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "system1", "mcp"], env=env)

    async def spawn_once() -> float:
        started = time.perf_counter()
        async with Client(params, mode="legacy") as client:
            await client.call_tool("system1_decide", SEED)
            return (time.perf_counter() - started) * 1000

    async def per_call() -> tuple[list[float], list[float]]:
        async with Client(params, mode="legacy") as client:
            await client.call_tool("system1_decide", SEED)
            mcp_times = []
            for _ in range(calls):
                started = time.perf_counter()
                await client.call_tool("system1_decide", SEED)
                mcp_times.append((time.perf_counter() - started) * 1000)
        rest_times = await timed_calls(env["SYSTEM1_GATEWAY_URL"] + "/v1/decide", SEED, calls)
        return mcp_times, rest_times

    spawns = [asyncio.run(spawn_once()) for _ in range(5)]
    mcp_times, rest_times = asyncio.run(per_call())
    return {
        "spawn_to_first_answer_ms_median": round(statistics.median(spawns), 1),
        "spawn_to_first_answer_ms": [round(s, 1) for s in spawns],
        "per_call_ms_p50_mcp": round(percentile(mcp_times, 50), 3),
        "per_call_ms_p50_rest": round(percentile(rest_times, 50), 3),
        "per_call_ms_added": round(percentile(mcp_times, 50) - percentile(rest_times, 50), 3),
    }


def mcp_entry_costs(env: dict[str, str], calls: int) -> dict:
    """`system1 mcp` both ways, in turn: relaying to the service's socket, and (given only the
    bridge token, in a state directory without the socket) serving the tools itself over HTTP."""
    bridge_dir = Path(tempfile.mkdtemp(prefix="system1-bridge-"))
    try:
        shutil.copy(Path(env["SYSTEM1_INSTALL_DIR"]) / "bridge.token", bridge_dir / "bridge.token")
        return {"relay": stdio_costs(env, calls),
                "http_bridge": stdio_costs({**env, "SYSTEM1_INSTALL_DIR": str(bridge_dir)}, calls)}
    finally:
        shutil.rmtree(bridge_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short runs, for checking the harness")
    args = parser.parse_args()
    seconds = 3 if args.quick else 10
    results: dict = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "load_tool": "wrk " + subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout.split()[1],
        "command": "python bench/load/run.py" + (" --quick" if args.quick else ""),
        "date": time.strftime("%Y-%m-%d"),
    }

    print("the gateway against a bare FastAPI endpoint, in turn", flush=True)
    results["against_bare_endpoint"] = side_by_side(seconds, 3 if args.quick else 5)

    print("mock: latency with one client, throughput with 64", flush=True)
    with served_gateway(MOCK_CONFIG) as (url, proc, env):
        time.sleep(1)
        results["rss_idle_mb"] = round(rss_mb(proc.pid), 1)
        results["mock_one_client"] = wrk(url + "/v1/decide", SEED, 1, seconds, watch_pid=proc.pid)
        results["mock_64_clients"] = wrk(url + "/v1/decide", SEED, 64, seconds, watch_pid=proc.pid)
        print("system1 mcp: spawn and per-call cost, relay and HTTP bridge", flush=True)
        results["mcp_entry"] = mcp_entry_costs(env, 200 if not args.quick else 50)

    print("HTTP adapter: direct engine call against the same call through the gateway", flush=True)
    with engine(0, 0) as endpoint, served_gateway(systemone_config(endpoint, batch=False)) as (url, proc, _):
        direct_body = {"state": SEED["question"], "questions": {"q0": {"type": "choice", "instructions": SEED["question"],
                       "criteria": {o: o for o in SEED["options"]}}}}
        results["engine_direct_one_client"] = wrk(endpoint + "/v1/systemone", direct_body, 1, seconds)
        results["gateway_http_one_client"] = wrk(url + "/v1/decide", SEED, 1, seconds, watch_pid=proc.pid)

    for batch in (False, True):
        label = "batching_on" if batch else "batching_off"
        print(f"simulated engine (20 ms + 0.25 ms/question), 64 clients, {label}", flush=True)
        with engine(20, 0.25) as endpoint, served_gateway(systemone_config(endpoint, batch)) as (url, proc, _):
            results[f"sim_64_{label}"] = wrk(url + "/v1/decide", SEED, 64, seconds, watch_pid=proc.pid)
            results[f"rss_under_64_clients_{label}_mb"] = round(rss_mb(proc.pid, "VmHWM"), 1)
            if not batch:  # one request per pass, so the flood lasts about 500 passes
                print("flood of 500 batch requests against interactive calls", flush=True)
                wait_idle(url)
                alone = asyncio.run(timed_calls(url + "/v1/decide", INTERACTIVE_Q, 30, {"X-System1-Client": "alice"}))
                mixed = flood_and_interactive(url + "/v1/decide", 500, 30)
                results["fairness"] = {
                    "engine_pass_ms": 20.25,
                    "interactive_p50_alone_ms": round(percentile(alone, 50), 2),
                    "interactive_p50_during_flood_ms": round(percentile(mixed["interactive_ms"], 50), 2),
                    "interactive_p99_during_flood_ms": round(percentile(mixed["interactive_ms"], 99), 2),
                    "flood_statuses": mixed["flood_statuses"],
                    "flood_still_queued_after_interactive_calls": mixed["flood_still_queued_after"],
                }

    summarise(results)
    (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (HERE / "RESULTS.md").write_text(report(results))
    plot(results)
    print((HERE / "RESULTS.md").read_text())


def summarise(r: dict) -> None:
    r["summary"] = {
        "added_latency_mock_p50_ms": r["mock_one_client"]["p50"],
        "added_latency_mock_p99_ms": r["mock_one_client"]["p99"],
        "added_latency_http_adapter_p50_ms": round(r["gateway_http_one_client"]["p50"] - r["engine_direct_one_client"]["p50"], 3),
        "added_latency_http_adapter_p99_ms": round(r["gateway_http_one_client"]["p99"] - r["engine_direct_one_client"]["p99"], 3),
        "mock_decisions_per_s": r["mock_64_clients"]["requests_per_s"],
        "batching_speedup": round(r["sim_64_batching_on"]["requests_per_s"] / r["sim_64_batching_off"]["requests_per_s"], 1),
        "batching_on_p99_ms": r["sim_64_batching_on"]["p99"],
        # One pass as the gateway sees it: engine time plus the HTTP call, from the unbatched run.
        "pass_as_seen_ms": round(1000 / r["sim_64_batching_off"]["requests_per_s"], 1),
        "interactive_p50_rise_ms": round(r["fairness"]["interactive_p50_during_flood_ms"] - r["fairness"]["interactive_p50_alone_ms"], 2),
        "rss_idle_mb": r["rss_idle_mb"],
        "rss_peak_64_clients_mb": max(r["rss_under_64_clients_batching_on_mb"], r["rss_under_64_clients_batching_off_mb"]),
    }


def report(r: dict) -> str:
    s = r["summary"]
    relay, bridge = r["mcp_entry"]["relay"], r["mcp_entry"]["http_bridge"]
    bare = r["against_bare_endpoint"]
    rows = [
        (f"Gateway (mock) against a bare FastAPI endpoint, {bare['server_stack']}, 16 connections, {bare['rounds']} pairs run in turn",
         f"median ratio {bare['ratio']:.2f}× (pairs {', '.join(f'{x:.2f}' for x in bare['ratios'])}; median "
         f"{statistics.median(bare['gateway_requests_per_s']):.0f} / {statistics.median(bare['bare_requests_per_s']):.0f} /s); p50 at one connection {bare['one_connection_p50_ms']['gateway']:.2f} / {bare['one_connection_p50_ms']['bare']:.2f} ms",
         "≥ 0.5×"),
        ("Added latency, mock (whole HTTP round trip), p50 / p99", f"{s['added_latency_mock_p50_ms']:.2f} / {s['added_latency_mock_p99_ms']:.2f} ms", "p50 ≤ 1 ms"),
        ("Added latency over a direct HTTP engine call, p50 / p99", f"{s['added_latency_http_adapter_p50_ms']:.2f} / {s['added_latency_http_adapter_p99_ms']:.2f} ms", "p50 ≤ 2 ms"),
        ("Decisions per second, mock, one worker, 64 clients", f"{s['mock_decisions_per_s']:.0f} /s (wrk CPU {r['mock_64_clients']['wrk_cpu_share']:.0%}, gateway CPU {r['mock_64_clients']['server_cpu_share']:.0%})", "≥ 1,000"),
        ("Batching on / off, simulated engine, 64 clients", f"{r['sim_64_batching_on']['requests_per_s']:.0f} / {r['sim_64_batching_off']['requests_per_s']:.0f} /s = {s['batching_speedup']}×", "≥ 10×"),
        ("p99 latency at that load, batching on / off", f"{r['sim_64_batching_on']['p99']:.1f} / {r['sim_64_batching_off']['p99']:.1f} ms", ""),
        ("Interactive p50 alone → during a 500-request batch flood", f"{r['fairness']['interactive_p50_alone_ms']:.1f} → {r['fairness']['interactive_p50_during_flood_ms']:.1f} ms (rise {s['interactive_p50_rise_ms']:.1f} ms; one pass: 20.25 ms in the engine, {s['pass_as_seen_ms']:.1f} ms as the gateway sees it)", "rise ≤ one pass"),
        ("`system1 mcp` beside the service (socket relay): spawn to first answer, median of 5", f"{relay['spawn_to_first_answer_ms_median']:.0f} ms", "≤ 500 ms"),
        ("… per call, p50, against REST", f"{relay['per_call_ms_p50_mcp']:.2f} vs {relay['per_call_ms_p50_rest']:.2f} ms ({relay['per_call_ms_added']:+.2f} ms)", ""),
        ("`system1 mcp` without the socket (HTTP bridge): spawn to first answer, median of 5", f"{bridge['spawn_to_first_answer_ms_median']:.0f} ms", ""),
        ("… per call, p50, against REST", f"{bridge['per_call_ms_p50_mcp']:.2f} vs {bridge['per_call_ms_p50_rest']:.2f} ms ({bridge['per_call_ms_added']:+.2f} ms)", ""),
        ("Resident memory idle / peak under 64 clients", f"{s['rss_idle_mb']:.0f} / {s['rss_peak_64_clients_mb']:.0f} MB", "≤ 150 / 250 MB"),
    ]
    lines = [
        "# Gateway load benchmark: results",
        "",
        f"Measured {r['date']} with `{r['command']}` on {r['machine']['cpus']} CPUs, Python {r['machine']['python']}; "
        f"load from {r['load_tool']} (one thread) and asyncio clients. Raw figures: `results.json`; chart: `load.png`.",
        "",
        "| figure | measured | target |",
        "|---|---|---|",
        *[f"| {a} | {b_} | {c} |" for a, b_, c in rows],
        "",
        "Errors: " + ", ".join(f"{k}: {v['non_2xx']} non-2xx" for k, v in r.items() if isinstance(v, dict) and "non_2xx" in v),
        "",
        f"Fairness run (batching off, so each flood request is its own 20.25 ms pass): flood statuses "
        f"{r['fairness']['flood_statuses']}; {r['fairness']['flood_still_queued_after_interactive_calls']} flood "
        "requests were still queued when the last interactive call returned. Each interactive call is sent as the "
        "previous one returns, which is when the lane starts the next flood pass, so it waits out nearly a whole "
        "pass before its own: the rise is one pass, not half of one.",
        "",
    ]
    return "\n".join(lines)


def plot(r: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = ["mock", "sim engine\nbatching off", "sim engine\nbatching on"]
    rates = [r["mock_64_clients"]["requests_per_s"], r["sim_64_batching_off"]["requests_per_s"], r["sim_64_batching_on"]["requests_per_s"]]
    left.bar(names, rates, color=["#888", "#c55", "#3a7"])
    left.set_ylabel("decisions per second (64 clients)")
    left.set_title("Throughput, one gateway worker")
    for x, v in enumerate(rates):
        left.text(x, v, f"{v:.0f}", ha="center", va="bottom")
    cases = [("mock, 1 client", r["mock_one_client"]), ("engine direct, 1 client", r["engine_direct_one_client"]),
             ("gateway → engine, 1 client", r["gateway_http_one_client"])]
    ps = ["p50", "p75", "p90", "p99"]
    for label, case in cases:
        right.plot(ps, [case[p] for p in ps], marker="o", label=label)
    right.set_ylabel("latency (ms)")
    right.set_title("Latency of one client, zero-cost engine")
    right.legend()
    fig.tight_layout()
    fig.savefig(HERE / "load.png", dpi=110)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--flood"]:
        print(json.dumps(asyncio.run(flood(sys.argv[2], int(sys.argv[3])))))
    else:
        main()
