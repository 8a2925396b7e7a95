"""What only the containers show: the default stack answers with the real engine, publishes
on loopback only, serves MCP over `docker exec -i`, survives the loss of its engine, is scraped
by Prometheus, runs the commands the plugin's skills give it, passes what MiniLM is unsure of to
the llama judge (System 2), switches to llama-server as the primary with one config change and a
reload, routes chat between the llama tier and a cloud tier (falling through, keeping private
prompts local), has data for every dashboard panel after routed traffic, and the torch image
serves each torch engine."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import anthropic
import anyio
import docker
import httpx
import openai
import pytest
from mcp import Client, StdioServerParameters

from system1.core.schema import DecideResponse

from .conftest import PROMETHEUS, ROOT, STACK_CONFIG, compose_command, health_status, wait_until

pytestmark = [pytest.mark.stack, pytest.mark.needs_docker]
TEAMS = {"question": "Which team should handle this?",
         "options": ["billing: charges, refunds", "technical: bugs and outages", "sales: pricing and plans"]}
#: MiniLM alone, no cascade: TEAMS has no fit of its own, so with the judge in the stack a sure
#: answer of MiniLM's would be put to it to confirm (core/cascade.py).
MINILM_ALONE = {"X-System1-Provider": "systemone"}


def test_a_decision_is_answered_by_the_minilm_engine_in_its_container(stack, http):
    # Threshold 0 and MiniLM alone: this pins the engine in its container answering, not where
    # calibration puts an unseen three-option question or what the judge makes of it.
    response = http.post("/v1/decide", json={**TEAMS, "context": {"message": "I was charged twice for one order"},
                                             "min_confidence": 0}, headers=MINILM_ALONE)
    body = DecideResponse.model_validate(response.json())
    assert response.status_code == 200 and body.status == "decided" and body.calibrated
    assert body.decision == "billing: charges, refunds" and body.provider == "systemone"
    assert body.rationale.startswith("systemone all-MiniLM-L6-v2:")
    health = http.get("/v1/health").json()
    assert health["status"] == "ok" and "engine minilm" in health["providers"][0]["detail"]


def test_published_ports_bind_loopback_only_and_engines_are_internal(stack):
    client = docker.from_env()
    try:
        gateway, metrics, engine = (client.containers.get(n) for n in ("system1-gateway", "system1-metrics", "system1-systemone"))
        for container, port in ((gateway, "8080/tcp"), (metrics, "9090/tcp")):
            bindings = container.attrs["HostConfig"]["PortBindings"]
            assert list(bindings) == [port]
            assert {b["HostIp"] for b in bindings[port]} == {"127.0.0.1"}
            published = container.attrs["NetworkSettings"]["Ports"][port]
            assert {p["HostIp"] for p in published} == {"127.0.0.1"}
        assert not engine.attrs["HostConfig"]["PortBindings"]
        assert all(not v for v in (engine.attrs["NetworkSettings"]["Ports"] or {}).values())
        assert list(engine.attrs["NetworkSettings"]["Networks"]) == ["system1_engines"]
        assert client.networks.get("system1_engines").attrs["Internal"] is True
        assert client.networks.get("system1_front").attrs["Internal"] is False
        for container in (gateway, metrics, engine):
            assert container.attrs["HostConfig"]["Init"] is True
            assert container.attrs["Config"]["User"] not in ("", "root", "0")
    finally:
        client.close()


def mcp_processes() -> list[str]:
    top = subprocess.run(["docker", "top", "system1-gateway", "-eo", "pid,args"], capture_output=True, text=True, check=True)
    return [line for line in top.stdout.splitlines()[1:] if "system1 mcp" in line]


def test_mcp_over_docker_exec_with_the_official_client(stack, http):
    params = StdioServerParameters(command="docker", args=["exec", "-i", "-e", "SYSTEM1_CLIENT=stack-test",
                                                           "system1-gateway", "system1", "mcp"])

    async def session():
        with anyio.fail_after(120):
            async with Client(params, mode="legacy") as client:
                names = sorted(t.name for t in (await client.list_tools()).tools)
                decided = await client.call_tool("system1_decide", {**TEAMS, "context": {"message": "The app crashes on start"}})
                health = await client.call_tool("system1_health", {})
                # A session of the service itself: the relay reached its socket (the HTTP bridge opens none).
                sessions = http.get("/metrics").text
                return names, decided.structured_content, health.structured_content, sessions

    names, decided, health, sessions = anyio.run(session)
    assert "system1_mcp_sessions 1.0" in sessions
    assert names == ["system1_capabilities", "system1_decide", "system1_health"]
    assert decided["attempts"][0]["provider"] == "systemone" and decided["status"] in ("decided", "abstained")
    assert health["status"] == "ok"
    wait_until(lambda: not mcp_processes(), 30, "the MCP process to leave the container")


def test_losing_the_engine_under_load_fails_cleanly_and_recovers(stack, http):
    gateway_started = docker_started("system1-gateway")
    results: list[tuple[int, dict]] = []
    stop = threading.Event()

    def stream():
        with httpx.Client(base_url="http://127.0.0.1:8080", timeout=60) as client:
            while not stop.is_set():
                # Threshold 0, MiniLM alone: it answers every one, so the outage is MiniLM's alone.
                response = client.post("/v1/decide", json={**TEAMS, "min_confidence": 0}, headers=MINILM_ALONE)
                results.append((response.status_code, response.json()))

    worker = threading.Thread(target=stream)
    # Keep Docker from restarting it at once, so the outage is long enough to observe.
    subprocess.run(["docker", "update", "--restart=no", "system1-systemone"], check=True, capture_output=True)
    try:
        worker.start()
        wait_until(lambda: len(results) >= 5, 60, "decisions before the engine is killed")
        subprocess.run(["docker", "kill", "system1-systemone"], check=True, capture_output=True)
        before = len(results)
        wait_until(lambda: http.get("/v1/health").json()["status"] == "down", 60, "health to say down")
        wait_until(lambda: len(results) >= before + 5, 60, "decisions while the engine is down")
        subprocess.run(["docker", "start", "system1-systemone"], check=True, capture_output=True)
        wait_until(lambda: health_status("system1-systemone") == "healthy", 180, "the engine to be healthy again")
        wait_until(lambda: http.get("/v1/health").json()["status"] == "ok", 60, "health to recover")
        recovered = len(results)
        wait_until(lambda: len(results) >= recovered + 3, 60, "decisions after recovery")
    finally:
        stop.set()
        worker.join(120)
        subprocess.run(["docker", "update", "--restart=unless-stopped", "system1-systemone"], capture_output=True)
    assert not worker.is_alive()
    envelopes = [DecideResponse.model_validate(body) for _, body in results]  # every answer is schema v1
    assert all(status == 200 for status, _ in results)
    failed = [e for e in envelopes if e.status == "error"]
    # Refused connections fail at once; a pass cut off mid-flight runs into the 10 s timeout.
    assert failed and {e.error.code.value for e in failed} <= {"provider_error", "provider_timeout"}
    assert envelopes[-1].error is None and envelopes[-1].provider == "systemone"
    assert docker_started("system1-gateway") == gateway_started  # recovered without a restart


def docker_started(container: str) -> str:
    return subprocess.run(["docker", "inspect", "-f", "{{.State.StartedAt}}", container],
                          capture_output=True, text=True, check=True).stdout.strip()


def prometheus_decisions() -> float:
    body = httpx.get(f"{PROMETHEUS}/api/v1/query", params={"query": "sum(system1_decisions_total)"}, timeout=10).json()
    result = body["data"]["result"]
    return float(result[0]["value"][1]) if result else 0.0


def test_prometheus_scrapes_the_gateway_and_sees_the_decisions(stack, http):
    def gateway_up():
        targets = httpx.get(f"{PROMETHEUS}/api/v1/targets", timeout=10).json()["data"]["activeTargets"]
        return any(t["labels"]["job"] == "gateway" and t["health"] == "up" for t in targets)

    wait_until(gateway_up, 60, "Prometheus to scrape the gateway")
    served = sum(1 for _ in range(7) if http.post("/v1/decide", json=TEAMS).status_code == 200)
    total_at_gateway = sum(float(line.rsplit(" ", 1)[1]) for line in http.get("/metrics").text.splitlines()
                           if line.startswith("system1_decisions_total{"))
    assert served == 7 and total_at_gateway >= 7
    wait_until(lambda: prometheus_decisions() >= total_at_gateway, 60, "Prometheus to report the new decisions")


def test_the_compose_files_parse_with_the_gpu_layer():
    compose = compose_command()[:1] if compose_command()[0] == "docker-compose" else compose_command()[:2]
    for files in (["compose.yaml"], ["compose.yaml", "compose.gpu.yaml"], ["compose.yaml", "compose.ci.yaml"]):
        args = [arg for f in files for arg in ("-f", str(ROOT / f))]
        result = subprocess.run([*compose, *args, "config"], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
    gpu = subprocess.run([*compose, "-f", str(ROOT / "compose.yaml"), "-f", str(ROOT / "compose.gpu.yaml"), "config"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    assert "driver: nvidia" in gpu and "capabilities:" in gpu


@pytest.mark.parametrize(("variable", "cascade"), [(None, "llama"), ("", "''")])
def test_the_lean_stacks_variable_reaches_the_gateway_and_the_default_keeps_the_judge(variable, cascade):
    compose = compose_command()[:1] if compose_command()[0] == "docker-compose" else compose_command()[:2]
    env = {k: v for k, v in os.environ.items() if k != "SYSTEM1_CASCADE"}
    if variable is not None:
        env["SYSTEM1_CASCADE"] = variable  # as `make up ENGINES=minilm` sets it
    result = subprocess.run([*compose, "-f", str(ROOT / "compose.yaml"), "config"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60, check=True)
    assert f"SYSTEM1_CASCADE: {cascade}\n" in result.stdout


def test_a_fresh_stack_answers_the_seed_questions_calibrated(stack, http):
    row = json.loads((ROOT / "calibration" / "yes-no-seed.jsonl").read_text().splitlines()[0])
    body = http.post("/v1/decide", json={"question": row["question"], "context": row["context"], "min_confidence": 0}).json()
    assert body["calibrated"] is True and body["provider"] == "systemone"
    fits = http.get("/v1/capabilities").json()["calibration"]
    assert any(source["source"] == "shipped" and source["fits"] for source in fits)


@pytest.mark.parametrize(("command", "destructive"), [("rm -rf /", "yes"), ("git clean -fdx", "yes"), ("ls -la", "no")])
def test_the_default_stack_judges_commands_no_training_row_holds_with_the_shipped_head(stack, http, command, destructive):
    seeds = (ROOT / "calibration" / "yes-no-seed.jsonl").read_text().splitlines()
    assert all(json.loads(line)["context"]["command"] != command for line in seeds)
    body = http.post("/v1/decide", json={"question": "Is this tool call destructive or hard to reverse?",
                                         "context": {"tool": "Bash", "command": command}}).json()
    assert body["status"] == "decided" and body["decision"] == destructive
    assert "learned head" in body["rationale"]


@pytest.mark.parametrize(("prompt", "private"), [
    ("Tell payroll that Ines Duarte's salary drops to 41,200 from May after her demotion.", "yes"),
    ("Write a bash loop that renames every .jpeg file in a folder to .jpg.", "no")])
def test_the_stacks_private_question_is_decided_by_the_e5_head_the_engine_container_embeds_for(stack, http, prompt,
                                                                                               private):
    body = http.post("/v1/decide", json={"question": "Does the request contain secrets or personal or confidential data?",
                                         "kind": "router-private", "context": {"prompt": prompt}}).json()
    assert body["status"] == "decided" and body["decision"] == private
    assert "learned head for kind 'router-private' on multilingual-e5-small" in body["rationale"]


def in_gateway(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """A command a skill runs in the gateway's container, as the skill writes it."""
    command = ["docker", "exec", *(["-i"] if stdin is not None else []), "system1-gateway", "system1", *args]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=180)


def test_the_commands_the_skills_run_in_the_container_work_against_the_stack(stack, http):
    assert in_gateway("prompts", "--limit", "30").returncode == 0  # none logged: routing is off here
    labelled = in_gateway("prompts", "--label", "-", stdin='{"id": "0123abcd", "labels": {"design": "yes"}}\n')
    assert labelled.returncode == 0 and "labelled 0 logged prompts" in labelled.stdout
    evaluated = in_gateway("evaluate")
    assert evaluated.returncode == 2 and "NOT READY" in evaluated.stdout  # no labels yet
    rows = "".join(json.dumps({**TEAMS, "context": {"message": message}, "label": label}) + "\n" for message, label in [
        ("I was charged twice", TEAMS["options"][0]), ("The app crashes on start", TEAMS["options"][1]),
        ("How much is the team plan?", TEAMS["options"][2]), ("Refund my order", TEAMS["options"][0])])
    fitted = in_gateway("calibrate", "--from-routing-log", "--target-accuracy", "0.8", "-", stdin=rows)
    assert fitted.returncode == 0 and "Calibration report: systemone all-MiniLM-L6-v2" in fitted.stdout, fitted.stderr
    assert in_gateway("toggle", "off").returncode == 0
    assert http.get("/v1/health").json()["status"] == "paused"
    assert in_gateway("toggle", "on").returncode == 0
    assert in_gateway("reload").returncode == 0
    assert in_gateway("smoke", stdin="").returncode == 0
    assert http.get("/v1/health").json()["status"] == "ok"


def test_learn_in_its_container_writes_heads_the_gateway_then_serves(stack, http):
    rows = (ROOT / "calibration" / "yes-no-seed.jsonl").read_text().splitlines()[:80]
    kind = "question:is this tool call destructive or hard to reverse?"
    learned = subprocess.run([*compose_command(), "--profile", "tools", "run", "--rm", "-T", "learn",
                              "system1", "learn", "-", "--write"], cwd=ROOT, input="\n".join(rows) + "\n",
                             env={**os.environ, "COMPOSE_PROJECT_NAME": "system1"}, capture_output=True, text=True, timeout=600)
    assert learned.returncode == 0, learned.stdout[-2000:] + learned.stderr[-2000:]
    heads = http.get("/v1/capabilities").json()["learning"]["heads"]
    assert [h["n"] for h in heads if h["kind"] == kind] == [80]  # this installation's head, over the shipped one


def test_what_minilm_is_unsure_of_is_decided_by_the_llama_judge_out_of_the_box(stack, http):
    # 0.99: no MiniLM answer is that sure, so the decision passes to stage 2 whatever its fit.
    response = http.post("/v1/decide", json={**TEAMS, "context": {"message": "I was charged twice for one order"},
                                             "min_confidence": 0.99})
    body = DecideResponse.model_validate(response.json())
    assert response.status_code == 200 and [a.provider for a in body.attempts] == ["systemone", "llama"], response.text
    assert body.attempts[0].outcome == "abstained" and body.attempts[1].outcome in ("ok", "abstained")
    assert "[stage 2, llama, after systemone: confidence" in body.rationale
    assert "llama qwen2.5-coder-1.5b-decision:" in body.rationale  # the server's alias names the model
    health = http.get("/v1/health").json()
    assert health["status"] == "ok"
    assert [(p["name"], p["role"], p["ok"]) for p in health["providers"]] == [
        ("systemone", "primary", True), ("llama", "cascade", True)]


def test_a_yes_no_question_with_nothing_to_judge_abstains_instead_of_a_certain_yes(stack, http):
    body = http.post("/v1/decide", json={"question": "Should I delete the production database?"}).json()
    assert body["status"] == "abstained" and body["confidence"] is None and body["decision"] is None
    assert [(a["provider"], a["outcome"]) for a in body["attempts"]] == [("systemone", "abstained"), ("llama", "abstained")]


def test_the_llama_engine_answers_as_the_primary_after_one_config_change_and_a_reload(stack, http):
    original = STACK_CONFIG.read_text()
    try:
        STACK_CONFIG.write_text(original.replace('provider = "systemone"', 'provider = "llama"', 1))  # same file, in place
        assert in_gateway("reload").returncode == 0
        response = http.post("/v1/decide", json={**TEAMS, "context": {"message": "I was charged twice"}, "min_confidence": 0})
        body = DecideResponse.model_validate(response.json())
        assert response.status_code == 200 and body.status == "decided", response.text
        assert body.provider == "llama" and body.decision in TEAMS["options"]
        providers = {p["name"]: p for p in http.get("/v1/health").json()["providers"]}
        assert providers["llama"]["ok"] is True and providers["llama"]["role"] == "primary"
    finally:
        STACK_CONFIG.write_text(original)
        in_gateway("reload")
    assert http.post("/v1/decide", json={**TEAMS, "min_confidence": 0}).json()["attempts"][0]["provider"] == "systemone"


@pytest.mark.parametrize("engine", ["gte", "qwen3-rerank", "anyjev", "openthai"])
def test_the_torch_image_serves_each_torch_engine_from_a_models_directory(engine, tmp_path):
    image = "system1/systemone:torch"  # make torch-image
    if subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode != 0:
        pytest.fail(f"{image} is missing: run `make torch-image`")
    models = tmp_path / "models"
    models.mkdir(mode=0o777)
    models.chmod(0o777)  # the image's user writes the checkpoint, made in the image itself
    made = subprocess.run(["docker", "run", "--rm", "--entrypoint", "python3", "-v", f"{ROOT / 'tests' / 'contract'}:/tiny:ro",
                           "-v", f"{models}:/out", image, "/tiny/make_tiny_engines.py", engine, f"/out/{engine}"],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-2000:]
    name = f"system1-torch-{engine}"
    subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    subprocess.run(["docker", "run", "-d", "--name", name, "-p", "127.0.0.1::8790", "-v", f"{models}:/models:ro",
                    "-e", f"SYSTEMONE_ENGINE={engine}", "-e", f"SYSTEMONE_MODEL=/models/{engine}", image],
                   check=True, capture_output=True, timeout=120)
    try:
        wait_until(lambda: health_status(name) == "healthy", 180, f"{name} to be healthy")
        port = subprocess.run(["docker", "port", name, "8790"], capture_output=True, text=True).stdout.split(":")[-1].strip()
        question = {"q0": {"type": "choice", "instructions": "Which team?", "criteria": {o: o for o in TEAMS["options"]}},
                    "q1": {"type": "noul", "instructions": "Is the customer angry?"}}
        reply = httpx.post(f"http://127.0.0.1:{port}/v1/systemone", json={"state": "I was charged twice", "questions": question},
                           headers={"Host": "systemone"}, timeout=60).json()  # the name it answers on the stack's network
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60)
    assert reply["model"] == engine  # the mounted directory's name
    assert reply["answers"]["q0"]["choice"] in TEAMS["options"]
    assert sum(reply["answers"]["q0"]["probabilities"].values()) == pytest.approx(1, abs=1e-3)
    assert 0 <= reply["answers"]["q1"]["noul"] <= 1


def _fake_cloud(script: str) -> subprocess.CompletedProcess:
    """Python run in the gateway's container, which reaches the fake cloud on the stack's network."""
    return subprocess.run(["docker", "exec", "system1-gateway", "python3", "-c", f"import httpx; {script}"],
                          capture_output=True, text=True, timeout=60)


def _inject(model: str, *faults: str) -> None:
    body = json.dumps({"model": model, "faults": list(faults)})
    assert _fake_cloud(f"httpx.post('http://fakecloud:8000/_faults', content={body!r}, timeout=5).raise_for_status()"
                       ).returncode == 0


def _fake_cloud_asked() -> list[str] | None:
    """The models the fake cloud tier was asked for, read from inside the stack's network (None
    while it does not answer)."""
    read = _fake_cloud("print(httpx.get('http://fakecloud:8000/_received', timeout=5).text)")
    return json.loads(read.stdout)["models"] if read.returncode == 0 else None


ROUTER_TIERS = '''
[[router.models]]
id = "cloud/fake"
upstream = "fakecloud"
price = { in = 1, out = 2 }
default_skill = 0.99

[router.upstreams.fakecloud]
base_url = "http://fakecloud:8000"
apis = ["openai", "anthropic"]
local = false
'''


def _start_fake_cloud() -> None:
    """The fake hosted chat API as `fakecloud` on the stack's engine network."""
    subprocess.run(["docker", "rm", "-f", "system1-fakecloud"], capture_output=True, timeout=60)
    fake = ["docker", "run", "-d", "--name", "system1-fakecloud", "--network", "system1_engines", "--network-alias",
            "fakecloud", "-v", f"{ROOT / 'tests' / 'fakes'}:/fakes:ro", "--entrypoint", "python3", "system1/gateway:dev",
            "/fakes/hosted_chat.py", "--port", "8000"]
    subprocess.run(fake, check=True, capture_output=True, timeout=60)


def test_the_readmes_router_example_is_answered_by_the_local_tier_without_any_key(stack):
    with openai.OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="unused", max_retries=0, timeout=120) as chat:
        raw = chat.chat.completions.with_raw_response.create(
            model="auto", max_tokens=16, messages=[{"role": "user", "content": "Say hi in three words"}])
    assert raw.headers["x-router-model"] == "local/qwen2.5-coder-1.5b", raw.headers
    assert raw.parse().choices[0].message.content


def test_the_router_routes_between_the_llama_tier_and_a_cloud_tier_and_keeps_private_prompts_local(stack, http):
    original = STACK_CONFIG.read_text()
    _start_fake_cloud()
    chat = openai.OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="unused", max_retries=0, timeout=120)
    # Not the README's words: that conversation already stays with the local tier (sticky routes).
    hello = [{"role": "user", "content": "Greet me in three words"}]
    try:
        # The cloud tier clears every floor; the local Qwen tier is the fallback.
        config = original.replace('fallback_model = "anthropic/claude-sonnet-4.5"', 'fallback_model = "local/qwen2.5-coder-1.5b"')
        STACK_CONFIG.write_text(config.replace('private = "prefer_local"', 'private = "ignore"') + ROUTER_TIERS)
        assert in_gateway("reload").returncode == 0
        wait_until(lambda: _fake_cloud_asked() is not None, 60, "the fake cloud tier to answer")
        raw = chat.chat.completions.with_raw_response.create(model="auto", max_tokens=8, messages=hello)
        assert raw.headers["x-router-model"] == "cloud/fake", raw.headers
        assert raw.parse().choices[0].message.content == "answer from cloud/fake"
        with anthropic.Anthropic(base_url="http://127.0.0.1:8080", api_key="unused", max_retries=0, timeout=120) as m, \
                m.messages.stream(model="auto", max_tokens=8, messages=hello) as stream:
            assert "".join(stream.text_stream) == "answer from cloud/fake"
        # A 429, then a 503 on a stream, before any byte: each falls through to llama-server...
        _inject("cloud/fake", "429")
        raw = chat.chat.completions.with_raw_response.create(model="auto", max_tokens=8,
                                                              messages=[{"role": "user", "content": "Say hi, 429"}])
        assert (raw.headers["x-router-model"], raw.headers["x-router-failed"]) == ("local/qwen2.5-coder-1.5b", "cloud/fake")
        _inject("cloud/fake", "503")
        with chat.chat.completions.with_streaming_response.create(
                model="auto", max_tokens=8, stream=True, messages=[{"role": "user", "content": "Say hi, 503"}]) as streamed:
            assert (streamed.headers["x-router-model"], streamed.headers["x-router-failed"]) == \
                ("local/qwen2.5-coder-1.5b", "cloud/fake")
            assert b"data: [DONE]" in b"".join(streamed.iter_bytes())
        # ...but a stream that breaks after it started is not sent again: the client gets an error.
        _inject("cloud/fake", "break")
        asked = len(_fake_cloud_asked())
        with pytest.raises(openai.APIError, match="the stream broke"):
            list(chat.chat.completions.create(model="auto", max_tokens=8, stream=True,
                                              messages=[{"role": "user", "content": "Say hi, broken"}]))
        assert len(_fake_cloud_asked()) == asked + 1
        # With the cloud tier gone, the request falls through as well.
        subprocess.run(["docker", "stop", "system1-fakecloud"], check=True, capture_output=True, timeout=60)
        raw = chat.chat.completions.with_raw_response.create(model="auto", max_tokens=8, messages=hello)
        assert raw.headers["x-router-model"] == "local/qwen2.5-coder-1.5b" and raw.headers["x-router-failed"] == "cloud/fake"
        assert raw.parse().choices[0].message.content
        # Under local_only, a prompt holding a credential never reaches the cloud tier.
        subprocess.run(["docker", "start", "system1-fakecloud"], check=True, capture_output=True, timeout=60)
        STACK_CONFIG.write_text(config.replace('private = "prefer_local"', 'private = "local_only"') + ROUTER_TIERS)
        assert in_gateway("reload").returncode == 0
        wait_until(lambda: _fake_cloud_asked() is not None, 60, "the fake cloud tier to answer again")
        asked_before = _fake_cloud_asked()
        secret = [{"role": "user", "content": "Why does `AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE terraform apply` fail?"}]
        raw = chat.chat.completions.with_raw_response.create(model="auto", max_tokens=8, messages=secret)
        assert raw.headers["x-router-model"] == "local/qwen2.5-coder-1.5b"
        assert _fake_cloud_asked() == asked_before
        log = subprocess.run(["docker", "exec", "system1-gateway", "tail", "-n", "1", "/var/lib/system1/logs/router.jsonl"],
                             capture_output=True, text=True, timeout=60)
        entry = json.loads(log.stdout)
        assert entry["findings"] == ["secret: AWS Access Key"] and "AKIA" not in log.stdout
    finally:
        chat.close()
        STACK_CONFIG.write_text(original)
        in_gateway("reload")
        subprocess.run(["docker", "rm", "-f", "system1-fakecloud"], capture_output=True, timeout=60)


LEARNING_LOOP = '''
[[router.models]]
id = "cloud/cheap"
upstream = "fakecloud"
price = { in = 0.1, out = 0.2 }
default_skill = 0.5
daily_budget_usd = 5

[router.check]
enabled = true
min_probability = 1.0
provider = "mock"  # a verdict every time: MiniLM's yes/no answer is relevance, which decides nothing

[providers.mock]
confidence = 0.9
'''


def prometheus_query(query: str) -> list[dict]:
    body = httpx.get(f"{PROMETHEUS}/api/v1/query", params={"query": query}, timeout=10).json()
    assert body["status"] == "success", body
    return body["data"]["result"]


def test_every_dashboard_panel_returns_data_from_prometheus_after_real_traffic(stack, http):
    """Routed chat with the llama tier down (a fall-through), a check no answer passes (an
    escalation to the strongest model), the shadow engine on, and decisions that abstain; then
    each panel's query of deploy/grafana, asked of the stack's Prometheus, has a number."""
    original = STACK_CONFIG.read_text()
    _start_fake_cloud()
    subprocess.run(["docker", "stop", "system1-llama"], check=True, capture_output=True, timeout=60)
    config = (original.replace('fallback_model = "anthropic/claude-sonnet-4.5"',
                               'fallback_model = "cloud/fake"\nmin_skill = [0.1, 0.1, 0.1, 0.1]\nrisk_bonus = [0.0, 0.0, 0.0]')
              .replace('private = "prefer_local"', 'private = "ignore"')
              .replace("[router.decision]\nchars = 1000", '[router.decision]\nshadow = "systemone"\nchars = 1000'))
    chat = openai.OpenAI(base_url="http://127.0.0.1:8080/v1", api_key="unused", max_retries=0, timeout=120)
    try:
        STACK_CONFIG.write_text(config + ROUTER_TIERS + LEARNING_LOOP)
        assert in_gateway("reload").returncode == 0
        wait_until(lambda: _fake_cloud_asked() is not None, 60, "the fake cloud tier to answer")
        for round_ in range(2):  # two rounds a scrape apart, so every rate has an increase to show
            for i in range(3):
                raw = chat.chat.completions.with_raw_response.create(
                    model="auto", max_tokens=8, messages=[{"role": "user", "content": f"Write a haiku, take {round_}.{i}"}])
                assert raw.headers["x-router-failed"] == "local/qwen2.5-coder-1.5b", raw.headers  # llama is stopped
                assert raw.headers["x-router-escalated"] == "cloud/cheap -> cloud/fake", raw.headers
            abstained = http.post("/v1/decide", json={**TEAMS, "min_confidence": 0.999}).json()
            assert abstained["status"] == "abstained"
            wait_until(lambda: prometheus_query("sum(system1_router_escalations_total)") and
                       float(prometheus_query("sum(system1_router_escalations_total)")[0]["value"][1]) >= 3 * (round_ + 1),
                       60, "Prometheus to scrape the round's traffic")
        wait_until(lambda: float(prometheus_query("sum(system1_router_shadow_agreement_total)")[0]["value"][1]) >= 30,
                   60, "the shadow's decisions to be scraped")
        # One more scrape of the gateway after the traffic, so its last increases fall inside every window.
        traffic_ended = time.time()
        wait_until(lambda: float(prometheus_query('max(timestamp(up{job="gateway"}))')[0]["value"][1]) > traffic_ended,
                   30, "one more scrape of the gateway")
        panels = json.loads((ROOT / "deploy" / "grafana" / "dashboards" / "system1.json").read_text())["panels"]
        empty = []
        for panel in panels:
            for target in panel.get("targets", []):
                values = [float(r["value"][1]) for r in prometheus_query(target["expr"])]
                if not any(v == v for v in values):  # no series, or only NaN
                    empty.append(f"{panel['title']} ({target['refId']}): {target['expr']}")
        assert empty == []
    finally:
        chat.close()
        STACK_CONFIG.write_text(original)
        in_gateway("reload")
        subprocess.run(["docker", "rm", "-f", "system1-fakecloud"], capture_output=True, timeout=60)
        subprocess.run(["docker", "start", "system1-llama"], capture_output=True, timeout=60)
        wait_until(lambda: health_status("system1-llama") == "healthy", 180, "system1-llama to be healthy again")
