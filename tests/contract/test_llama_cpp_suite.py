"""llama.cpp's own `/v1/systemone` tests (tools/server/tests/unit/test_systemone.py from the
pinned sdist), run with their own requirements against the llama-server we build and two local
models: a tiny laya GGUF for their `tinylaya` preset, and the stack's Gemma decision model for
`tinyopenjev` (llama_cpp_offline.py says how the Hub downloads are replaced)."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.processes import free_port

from .conftest import LLAMA, ROOT, built, venv_tool

pytestmark = pytest.mark.contract

# Two of their tests cannot pass with the local stand-in for their tinyopenjev model, and are
# left out: the image test needs a vision projector (Gemma 3 270M has none), and the
# shared-prompt test bounds the difference between shared and single-slot answers at 0.01 for
# their 8-bit model, where this 4-bit Gemma differs by 0.011 on one option. Every other runs.
LEFT_OUT = "(test_systemone_images and not not_supported) or test_systemone_shared_prompt"


def test_llama_cpps_own_systemone_tests_pass_against_our_build(tiny_laya, tmp_path):
    tests = built(LLAMA / "llama.cpp" / "tools" / "server" / "tests")
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": f"{tests}:{ROOT / 'tests' / 'contract'}",
        "LLAMA_SERVER_BIN_PATH": str(built(LLAMA / "bin" / "llama-server")),
        "TINYLAYA_LOCAL_MODEL": str(tiny_laya),
        "TINYOPENJEV_LOCAL_MODEL": str(built(LLAMA / "models" / "gemma3-270m-decision.gguf")),
        "LLAMA_CACHE": str(tmp_path / "cache"),
        "PORT": str(free_port()),
        "HF_HUB_OFFLINE": "1",
    }
    run = subprocess.run([str(venv_tool("llama-tests", "python")), "-m", "pytest", "-p", "llama_cpp_offline", "--noconftest",
                          "-p", "no:cacheprovider", "-q", "unit/test_systemone.py", "-k", f"not ({LEFT_OUT})"],
                         cwd=tests, env=env, capture_output=True, text=True, timeout=900)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-2000:]
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    # test_systemone for both presets, the JSON state, eight invalid requests, images refused.
    assert re.match(r"12 passed, 2 deselected", summary), summary
