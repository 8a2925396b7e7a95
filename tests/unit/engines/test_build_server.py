"""engines/llama/build_server.py: which binary counts as built for this machine (no compiler run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[3] / "engines" / "llama"))

import build_server  # noqa: E402

SCRIPT = Path(build_server.__file__)


def built(work: Path, record: str) -> Path:
    (work / "bin").mkdir(parents=True)
    (work / "bin" / "llama-server").write_bytes(b"\x7fELF")
    (work / "bin" / "BUILD").write_text(record)
    return work


def is_current(work: Path, *args: str) -> bool:
    checked = subprocess.run([sys.executable, str(SCRIPT), str(work), "--check", *args], timeout=60)
    return checked.returncode == 0


def test_a_native_binary_is_current_only_on_the_cpu_its_record_names(tmp_path):
    native = build_server.stamp_of(build_server.flags_for(None, cuda=False))
    assert f"for {build_server.this_cpu()}\n" in native
    assert is_current(built(tmp_path / "here", native))
    elsewhere = native.replace(build_server.this_cpu(), "Other CPU, flags 0000000000000000")
    assert not is_current(built(tmp_path / "elsewhere", elsewhere))


def test_a_portable_binary_names_no_cpu_and_is_not_taken_for_a_native_one(tmp_path):
    portable = build_server.stamp_of(build_server.flags_for("portable", cuda=False))
    assert "-DGGML_NATIVE=OFF" in portable and "\nfor " not in portable
    work = built(tmp_path, portable)
    assert is_current(work, "--cpu", "portable")
    assert not is_current(work)


def test_a_cuda_build_targets_any_cpu_since_an_image_build_sees_no_gpu():
    assert build_server.flags_for(None, cuda=True) == build_server.flags_for("portable", cuda=True)
    assert "-DGGML_CUDA=ON" in build_server.flags_for(None, cuda=True)


def test_the_native_build_leaves_amx_out():
    flags = " ".join(build_server.flags_for(None, cuda=False))
    assert "-DGGML_NATIVE=ON" in flags
    assert "-mno-amx-tile" in flags and "-mno-amx-int8" in flags
