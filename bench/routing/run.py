"""Routing study on this project's seed sets, through the gateway, per engine available here.

For every prompt of calibration/routing-seed.jsonl (150, 50 per tier):
- direct choice: "which tier?" over three self-describing options;
- features + rule: the four features in one pass (`POST /v1/route`) and the rule's tier;
and for calibration/yes-no-seed.jsonl: is the tool call destructive?
Reports accuracy, "below" (a tier under the label, or no answer: the unsafe misses) and the
median latency, against always answering sonnet; and the host-side hook's cost from process
start to output with a warm engine.

    python bench/routing/run.py          # writes results.json and RESULTS.md here
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(ROOT / "services" / "gateway"))

from benchlib import free_port, percentile, wait_http as wait  # noqa: E402
from system1.hook.rule import rank  # noqa: E402

DIRECT = {"question": "Which Claude model tier does this task need?",
          "options": ["haiku: quick lookups and small mechanical edits",
                      "sonnet: well-specified implementation work",
                      "opus: design, architecture, reviews and subtle bugs"]}


def seeds():
    rows = [json.loads(line) for line in (ROOT / "calibration" / "routing-seed.jsonl").read_text().splitlines()]
    prompts = {}
    for row in rows:
        prompts.setdefault(row["meta"]["id"], (row["context"]["prompt"], row["meta"]["tier"]))
    yes_no = [json.loads(line) for line in (ROOT / "calibration" / "yes-no-seed.jsonl").read_text().splitlines()]
    return list(prompts.values()), yes_no


def run_engine(name: str, gateway: str, prompts, yes_no) -> dict:
    timings = {"direct": [], "features": [], "yes_no": []}
    direct_right = direct_below = feature_right = feature_below = yes_no_right = 0
    with httpx.Client(base_url=gateway, timeout=60) as client:
        for prompt, label in prompts:
            started = time.perf_counter()
            body = client.post("/v1/decide", json={**DIRECT, "context": {"prompt": prompt}, "min_confidence": 0}).json()
            timings["direct"].append((time.perf_counter() - started) * 1000)
            picked = (body.get("decision") or "").split(":", 1)[0] or None
            direct_right += picked == label
            direct_below += picked is None or rank(picked) < rank(label)
            started = time.perf_counter()
            routed = client.post("/v1/route", json={"hook_event_name": "UserPromptSubmit", "prompt": prompt}).json()
            timings["features"].append((time.perf_counter() - started) * 1000)
            feature_right += routed.get("tier") == label
            feature_below += routed.get("tier") is None or rank(routed["tier"]) < rank(label)
        for row in yes_no:
            started = time.perf_counter()
            body = client.post("/v1/decide", json={"question": row["question"], "context": row["context"], "min_confidence": 0}).json()
            timings["yes_no"].append((time.perf_counter() - started) * 1000)
            yes_no_right += body.get("decision") == row["label"]
    return {
        "engine": name, "prompts": len(prompts), "yes_no_rows": len(yes_no),
        "direct": direct_right, "direct_below": direct_below,
        "features_rule": feature_right, "features_rule_below": feature_below,
        "yes_no": yes_no_right,
        "median_ms": {k: round(statistics.median(v), 1) for k, v in timings.items()},
    }


PROMPT_EVENT = {"hook_event_name": "UserPromptSubmit", "cwd": str(ROOT),
                "prompt": "Design the storage layer for the audit trail and compare the two options we discussed"}
SESSION_EVENT = {"hook_event_name": "SessionStart", "source": "startup", "cwd": str(ROOT)}


def hook_latency(gateway: str, runs: int = 30, hook_event: dict = PROMPT_EVENT) -> dict:
    """Process start to exit of plugin/hooks/system1_hook.py for one event, and how often it
    printed something (a hint for a prompt; a note at session start only when something is wrong)."""
    event = json.dumps(hook_event)
    env = {**os.environ, "SYSTEM1_GATEWAY_URL": gateway, "HOME": tempfile.mkdtemp()}
    times, printed = [], 0
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-S", str(ROOT / "plugin" / "hooks" / "system1_hook.py")], input=event,
                              capture_output=True, text=True, env=env, timeout=30)
        times.append((time.perf_counter() - started) * 1000)
        printed += bool(done.stdout.strip())
    return {"runs": runs, "printed": printed, "p50_ms": round(percentile(times, 50), 1), "p90_ms": round(percentile(times, 90), 1)}


def start_gateway(state: Path, name: str, toml: str) -> tuple[subprocess.Popen, str]:
    """`system1 serve` with `toml` as its config, on a free port; the process and its URL."""
    port = free_port()
    (state / f"{name}.toml").write_text(toml)
    env = {**os.environ, "SYSTEM1_CONFIG": str(state / f"{name}.toml"), "SYSTEM1_INSTALL_DIR": str(state / name),
           "SYSTEM1_LOG_LEVEL": "WARNING"}
    process = subprocess.Popen([sys.executable, "-m", "system1", "serve", "--port", str(port)], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return process, f"http://127.0.0.1:{port}"


def main() -> None:
    prompts, yes_no = seeds()
    engine_port = free_port()
    state = Path(tempfile.mkdtemp(prefix="system1-routing-"))
    systemone = (f'[gateway]\nprovider = "systemone"\ntimeout_s = 30\n[routing]\nenabled = true\nmin_confidence = 0\n'
                 f'[providers.systemone]\nendpoint = "http://127.0.0.1:{engine_port}"\nbatch = true\nmax_options = 256\n')
    engine = subprocess.Popen([sys.executable, str(ROOT / "engines" / "systemone" / "serve.py"), "--port", str(engine_port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The shipped learned heads were fitted on these very prompts, so the accuracy runs go to a
    # gateway without them (the engine as it answers; heads are judged held-out in bench/heads)
    # and the hook's timing to one with the defaults, heads included.
    gateways = {name: start_gateway(state, name, toml) for name, toml in (
        ("engine", systemone + "[learning]\nenabled = false\n"),
        ("defaults", systemone),
        # The hook's own cost, without engine time.
        ("mock", '[gateway]\nprovider = "mock"\n[routing]\nenabled = true\nmin_confidence = 0\n'))}
    urls = {name: url for name, (_, url) in gateways.items()}
    try:
        wait(f"http://127.0.0.1:{engine_port}/health")
        for url in urls.values():
            wait(f"{url}/readyz")
        results = {"command": "python bench/routing/run.py", "date": time.strftime("%Y-%m-%d"), "cpus": os.cpu_count(),
                   "always_sonnet": {"direct": sum(t == "sonnet" for _, t in prompts),
                                     "below": sum(rank("sonnet") < rank(t) for _, t in prompts)},
                   "engines": [run_engine("minilm (systemone, CPU), no learned heads", urls["engine"], prompts, yes_no)],
                   "hook": hook_latency(urls["defaults"], 60),
                   "hook_mock_engine": hook_latency(urls["mock"], 60),
                   "session_start_hook": hook_latency(urls["defaults"], 60, SESSION_EVENT)}
    finally:
        for process in (engine, *(process for process, _ in gateways.values())):
            process.terminate()
            process.wait(timeout=30)
    (HERE / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    rows = [f"| {e['engine']} | {e['direct']}/{e['prompts']} | {e['direct_below']} | {e['features_rule']}/{e['prompts']} | "
            f"{e['features_rule_below']} | {e['yes_no']}/{e['yes_no_rows']} | "
            f"{e['median_ms']['direct']} / {e['median_ms']['features']} / {e['median_ms']['yes_no']} |" for e in results["engines"]]
    hook, bare, start = results["hook"], results["hook_mock_engine"], results["session_start_hook"]
    text = "\n".join([
        "# Routing study: results", "",
        f"`{results['command']}` on {results['cpus']} CPUs, {results['date']}, through the gateway service.", "",
        "| engine | direct choice | below | features + rule | below | yes/no (destructive) | median ms: direct / features / yes-no |",
        "|---|---|---|---|---|---|---|", *rows, "",
        f"Always answering sonnet: {results['always_sonnet']['direct']}/{results['engines'][0]['prompts']}, "
        f"below {results['always_sonnet']['below']}.", "",
        f"Host-side hook, process start to printed hint (warm engine, default config with the shipped learned heads, {hook['runs']} runs): p50 {hook['p50_ms']} ms, "
        f"p90 {hook['p90_ms']} ms; a hint was printed {hook['printed']} times. The same against a gateway on the "
        f"mock engine (the hook, its Python start and the gateway, without engine time): p50 {bare['p50_ms']} ms, "
        f"p90 {bare['p90_ms']} ms. MiniLM's share is one encoder pass of the prompt, which serves all four features "
        "and the learned heads.", "",
        f"SessionStart hook, process start to exit against the same healthy gateway ({start['runs']} runs): p50 "
        f"{start['p50_ms']} ms, p90 {start['p90_ms']} ms; it printed a note {start['printed']} times (silent when all is well).", "",
        "Only the default engine runs here (no GPU, no downloadable weights); other engines join with a row each.", "",
    ])
    (HERE / "RESULTS.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
