"""Real engine servers, started locally as their users start them, on free loopback ports."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENVS = ROOT / ".venvs"
LLAMA = ROOT / "build" / "llama"  # llama-server, its source tree and models (engines/llama)


def venv_tool(venv: str, tool: str) -> Path:
    path = VENVS / venv / "bin" / tool
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make contract-envs` first")
    return path


def built(path: Path) -> Path:
    if not path.exists():
        pytest.fail(f"{path} is missing: run `make contract-envs` first")
    return path


@pytest.fixture(scope="session")
def tiny_laya(tmp_path_factory) -> Path:
    """A tiny random laya checkpoint as a GGUF for llama-server (engines/llama/convert_laya.py)."""
    out = tmp_path_factory.mktemp("tiny-laya-gguf")
    python = venv_tool("laya", "python")
    subprocess.run([str(python), str(ROOT / "tests" / "contract" / "make_tiny_laya.py"), str(out / "checkpoint")],
                   check=True, timeout=300)
    subprocess.run([str(python), str(ROOT / "engines" / "llama" / "convert_laya.py"), str(out / "checkpoint"),
                    str(out / "tiny-laya.gguf"), "--llama-cpp", str(built(LLAMA / "llama.cpp"))],
                   check=True, timeout=300, capture_output=True)
    return out / "tiny-laya.gguf"
