"""Hardening benchmark: the two failures the hostile test found, measured before and after.

1. H1, one client wedging the engine: ten valid requests, each with 256 distinct 500-character
   options, sent one per second at the MiniLM stack; then a small decision is asked once a
   second until one is answered in under a second. Reported: how the ten were answered and how
   long the engine path stayed unusable.
2. A hung engine (SIGSTOP for 10 s) under four clients, with the circuit breaker on (3
   failures) and off (0): decisions answered during the hang and their p50 latency.

"Before" runs the gateway and engine server of a git revision (default 2700f38, the last one
without these defences) from a temporary worktree; "after" runs this tree. Both use this
machine's .venv. Writes results.json and RESULTS.md beside this file.

    python bench/hardening/run.py [--before REV]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))

from benchlib import free_port, wait_http  # noqa: E402

SMALL = {"question": "Which team should handle this?", "context": {"message": "I was charged twice"},
         "options": ["billing: charges, refunds", "technical: bugs and outages", "sales: pricing"]}
RECOVERY_CAP_S = 180.0


def wedge_request(n: int) -> dict:
    return {"question": f"Which of these fits request {n}?",
            "options": [f"{n}-{i} " + (f"option {i} " * 60)[:490] for i in range(256)]}


@contextmanager
def stack(tree: Path, tmp: Path, gateway_toml: str, engine_env: dict[str, str] | None = None):
    """serve.py (MiniLM) and `system1 serve` from `tree`, on free ports."""
    engine_port, gateway_port = free_port(), free_port()
    config = tmp / f"config-{gateway_port}.toml"
    config.write_text(gateway_toml.format(engine=f"http://127.0.0.1:{engine_port}"))
    env = {**os.environ, "PYTHONPATH": str(tree / "services" / "gateway"), "SYSTEM1_CONFIG": str(config),
           "SYSTEM1_INSTALL_DIR": str(tmp / f"state-{gateway_port}")}
    python = str(ROOT / ".venv" / "bin" / "python")
    engine = subprocess.Popen([python, str(tree / "engines" / "systemone" / "serve.py"), "--port", str(engine_port)],
                              env={**env, **(engine_env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    gateway = subprocess.Popen([python, "-m", "system1", "serve", "--port", str(gateway_port)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{gateway_port}"
    try:
        wait_http(f"http://127.0.0.1:{engine_port}/health", 120)
        wait_http(f"{url}/healthz", 60)
        yield url, engine
    finally:
        for process in (gateway, engine):
            process.send_signal(signal.SIGCONT)
            process.terminate()
            process.wait(timeout=30)


async def wedge(url: str) -> dict:
    """Ten heavy requests, one a second; then how long until a small one is quick again."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        async def heavy(n: int) -> str:
            await asyncio.sleep(n)
            try:
                response = await http.post("/v1/decide", json=wedge_request(n))
                body = response.json()
                return f"{response.status_code} {body.get('status')} {(body.get('error') or {}).get('code', '')}".strip()
            except httpx.HTTPError as exc:
                return type(exc).__name__

        started = time.monotonic()
        heavies = asyncio.gather(*(heavy(n) for n in range(10)))
        await asyncio.sleep(10)
        probes = []
        while time.monotonic() - started < RECOVERY_CAP_S:
            asked = time.monotonic()
            try:
                ok = (await http.post("/v1/decide", json=SMALL, timeout=5)).json().get("status") == "decided"
            except httpx.HTTPError:
                ok = False
            took = time.monotonic() - asked
            probes.append(round(took, 3))
            if ok and took < 1.0:
                break
            await asyncio.sleep(max(0.0, 1.0 - took))
        unusable = time.monotonic() - started - 10
        outcomes = await heavies
    return {"heavy_requests": outcomes, "unusable_after_attack_s": round(unusable, 1),
            "recovered": bool(probes) and probes[-1] < 1.0, "probes": len(probes)}


async def hang(url: str, engine: subprocess.Popen, seconds: float = 10.0) -> dict:
    """Four clients ask while the engine is stopped for `seconds`."""
    latencies: list[float] = []
    stop = time.monotonic() + seconds

    async def client(http: httpx.AsyncClient) -> None:
        while time.monotonic() < stop:
            asked = time.monotonic()
            try:
                await http.post("/v1/decide", json=SMALL)
                if time.monotonic() <= stop:
                    latencies.append(time.monotonic() - asked)
            except httpx.HTTPError:
                pass

    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        await http.post("/v1/decide", json=SMALL)  # warm
        engine.send_signal(signal.SIGSTOP)
        try:
            await asyncio.gather(*(client(http) for _ in range(4)))
        finally:
            engine.send_signal(signal.SIGCONT)
    return {"answered_during_hang": len(latencies),
            "p50_ms": round(statistics.median(latencies) * 1000, 1) if latencies else None}


def worktree(rev: str, tmp: Path) -> Path:
    path = tmp / f"tree-{rev}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev], check=True,
                   capture_output=True)
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", default="2700f38", help="the revision measured as 'before'")
    args = parser.parse_args()
    results: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "before_revision": args.before}
    minilm = ('[gateway]\nprovider = "systemone"\ntimeout_s = 10\n[providers.systemone]\nendpoint = "{engine}"\nbatch = true\n'
              'max_options = 256\n')
    hung = ('[gateway]\nprovider = "systemone"\nfallback = ["mock"]\ntimeout_s = 2\n[providers.systemone]\n'
            'endpoint = "{engine}"\nbatch = true\nbreaker_failures = %d\n')
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        old = worktree(args.before, tmp)
        try:
            # "after, no budget": both budgets raised out of the way, so only the engine's
            # stopping of abandoned work is left to defend it.
            unbounded = minilm.replace("[providers.systemone]", "max_work = 10000000\n[providers.systemone]")
            variants = (("before", old, minilm, None), ("after", ROOT, minilm, None),
                        ("after_no_budget", ROOT, unbounded, {"SYSTEMONE_MAX_WORK": "10000000"}))
            for label, tree, toml, engine_env in variants:
                with stack(tree, tmp, toml, engine_env) as (url, _):
                    results[f"wedge_{label}"] = asyncio.run(wedge(url))
                print(label, "wedge", results[f"wedge_{label}"], flush=True)
            for label, failures in (("breaker_off", 0), ("breaker_on", 3)):
                with stack(ROOT, tmp, hung % failures) as (url, engine):
                    results[f"hang_{label}"] = asyncio.run(hang(url, engine))
                print(label, results[f"hang_{label}"], flush=True)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=False)
    (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    write_report(results)


def write_report(r: dict) -> None:
    before, after = r["wedge_before"], r["wedge_after"]

    def heavy(w: dict) -> str:
        counts: dict[str, int] = {}
        for outcome in w["heavy_requests"]:
            counts[outcome] = counts.get(outcome, 0) + 1
        return ", ".join(f"{n}× {k}" for k, n in counts.items())

    def recovery(w: dict) -> str:
        if not w["recovered"]:
            return f"not within {RECOVERY_CAP_S - 10:.0f} s"
        return f"{max(0.0, w['unusable_after_attack_s']):.1f} s"

    lines = [
        "# Hardening benchmark", "",
        f"`python bench/hardening/run.py` on {r['machine']}; \"before\" is revision {r['before_revision']}.", "",
        "## One client wedging the engine (H1)", "",
        "Ten requests with 256 distinct 500-character options each, one a second, at the MiniLM stack; then a",
        "small decision once a second until one is answered in under a second.", "",
        "| | the ten heavy requests | engine path unusable after the last one |", "|---|---|---|",
        f"| before | {heavy(before)} | {recovery(before)} |",
        f"| after | {heavy(after)} | {recovery(after)} |",
        f"| after, both budgets raised to 10M (only the engine's stopping of abandoned work left) | "
        f"{heavy(r['wedge_after_no_budget'])} | {recovery(r['wedge_after_no_budget'])} |", "",
        "## A hung engine (SIGSTOP 10 s, four clients, fallback `mock`, timeout 2 s)", "",
        "| circuit breaker | decisions answered during the hang | p50 latency |", "|---|---|---|",
        f"| off (`breaker_failures = 0`) | {r['hang_breaker_off']['answered_during_hang']} | {r['hang_breaker_off']['p50_ms']} ms |",
        f"| on (3 failures, 30 s cool-down) | {r['hang_breaker_on']['answered_during_hang']} | {r['hang_breaker_on']['p50_ms']} ms |",
    ]
    (HERE / "RESULTS.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
