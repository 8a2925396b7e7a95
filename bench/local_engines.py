"""The decision engines that run on this machine, each started as its users start it, for the
benchmarks that compare them (bench/study, bench/router).

Each starter runs an engine server inside an `ExitStack` (files under a work folder) and gives
back the `[providers.*]` TOML that points the gateway at it, and the server's pid (for CPU
accounting; None for the mock, which lives in the gateway). Needs what `make contract-envs`
builds: the engine venvs, llama-server and its Gemma model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from benchlib import free_port, wait_http

ROOT = Path(__file__).resolve().parents[1]
VENVS = ROOT / ".venvs"
LLAMA = ROOT / "build" / "llama"
#: The judge: Qwen2.5-Coder-1.5B-Instruct as a decision GGUF (`make judge-model`).
JUDGE = LLAMA / "models" / "qwen2.5-coder-1.5b-decision.gguf"
TINY = ROOT / "tests" / "contract"
#: As the stack runs llama-server (compose.yaml): its threads do not spin waiting for work, which
#: on two cores slows whatever engine answers next (bench/cascade/POLL.md).
NO_POLLING = ("--poll", "0")
#: As the stack runs the judge: its reading (the last hidden state) at /embedding too.
READING = ("--embeddings", "--pooling", "last")


@dataclass(frozen=True)
class Engine:
    name: str
    provider: str
    random: bool  # random weights: cost, not skill
    #: Starts the engine server in `stack` (files under `work`); its provider TOML and its pid.
    start: Callable[[ExitStack, Path], tuple[str, int | None]]
    heads: bool = False


def serve(stack: ExitStack, argv: list[str], health: str, env: dict[str, str] | None = None,
          timeout_s: float = 300) -> int:
    process = subprocess.Popen(argv, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    stack.callback(lambda: (process.terminate(), process.wait(timeout=30)))
    wait_http(health, timeout_s)
    return process.pid


def judge_server(stack: ExitStack, slots: int = 1, polling: bool = False,
                 server: Path = LLAMA / "bin" / "llama-server") -> tuple[str, int]:
    """llama-server (`server`) with the judge on a free port, 2 threads, its reading on (as the
    stack runs it), stopped with `stack`: its URL and pid. `polling` leaves llama-server's own
    default (its threads poll for work after each answer)."""
    port = free_port()
    pid = serve(stack, [str(server), "-m", str(JUDGE), "--alias", "qwen2.5-coder-1.5b-decision",
                        "--host", "127.0.0.1", "--port", str(port), "-c", "4096", "-np", str(slots), "-t", "2",
                        *READING, *(() if polling else NO_POLLING)],
                f"http://127.0.0.1:{port}/health")
    return f"http://127.0.0.1:{port}", pid


def tiny(script: str, venv: str, out: Path, *args: str) -> Path:
    subprocess.run([str(VENVS / venv / "bin" / "python"), str(TINY / script), *args, str(out)], check=True,
                   capture_output=True, timeout=600)
    return out


def minilm(stack: ExitStack, work: Path) -> tuple[str, int]:
    port = free_port()
    # With the e5 embedder, as the stack's image runs it: the router-private head reads e5.
    pid = serve(stack, [sys.executable, str(ROOT / "engines" / "systemone" / "serve.py"), "--port", str(port)],
                f"http://127.0.0.1:{port}/health", {"SYSTEMONE_THREADS": "2", "SYSTEMONE_EMBEDDERS": "e5"})
    return f'[providers.systemone]\nendpoint = "http://127.0.0.1:{port}"\nmax_options = 256\nbatch = true\n', pid


def llama_gemma(stack: ExitStack, work: Path) -> tuple[str, int]:
    port = free_port()
    pid = serve(stack, [str(LLAMA / "bin" / "llama-server"), "-m", str(LLAMA / "models" / "gemma3-270m-decision.gguf"),
                        "--alias", "gemma3-270m-decision", "--host", "127.0.0.1", "--port", str(port), "-c", "4096",
                        "-np", "1", "-t", "2", *NO_POLLING], f"http://127.0.0.1:{port}/health")
    return f'[providers.llama]\nendpoint = "http://127.0.0.1:{port}"\nmax_options = 52\n', pid


def laya(stack: ExitStack, work: Path) -> tuple[str, int]:
    checkpoint = tiny("make_tiny_laya.py", "laya", work / "tiny-laya")
    port = free_port()
    models = json.dumps({"typed-decisions": str(checkpoint)})
    env = {"HF_HUB_OFFLINE": "1", "LAYA_HOST": "127.0.0.1", "LAYA_PORT": str(port), "LAYA_DEVICE": "cpu",
           "LAYA_MODELS": "typed-decisions", "LAYA_DEFAULT_MODEL": "typed-decisions", "LAYA_EXTRA_MODELS": models,
           "LAYA_LOG_LEVEL": "warning"}
    pid = serve(stack, [str(VENVS / "laya" / "bin" / "laya-serve")], f"http://127.0.0.1:{port}/health", env)
    return f'[providers.laya]\nendpoint = "http://127.0.0.1:{port}"\nmodel = "typed-decisions"\n', pid


def von(stack: ExitStack, work: Path) -> tuple[str, int]:
    checkpoint = tiny("make_tiny_von.py", "von", work / "tiny-von")
    port = free_port()
    env = {"HF_HUB_OFFLINE": "1", "VON_CHECKPOINT_DIR": str(checkpoint), "XDG_CACHE_HOME": str(work / "cache")}
    pid = serve(stack, [str(VENVS / "von" / "bin" / "von"), "serve", "--host", "127.0.0.1", "--port", str(port),
                        "--device", "cpu"], f"http://127.0.0.1:{port}/health", env)
    return f'[providers.von]\nendpoint = "http://127.0.0.1:{port}"\n', pid


def torch_engine(name: str) -> Callable[[ExitStack, Path], tuple[str, int]]:
    def start(stack: ExitStack, work: Path) -> tuple[str, int]:
        checkpoint = tiny("make_tiny_engines.py", "systemone-torch", work / f"tiny-{name}", name)
        port = free_port()
        pid = serve(stack, [str(VENVS / "systemone-torch" / "bin" / "python"), str(ROOT / "engines" / "systemone" / "serve.py"),
                            "--engine", name, "--model", str(checkpoint), "--port", str(port)],
                    f"http://127.0.0.1:{port}/health", {"SYSTEMONE_THREADS": "2"})
        return f'[providers.systemone]\nendpoint = "http://127.0.0.1:{port}"\nmax_options = 256\n', pid
    return start


def mock(stack: ExitStack, work: Path) -> tuple[str, None]:
    return "[providers.mock]\n", None


ENGINES = [
    Engine("minilm", "systemone", False, minilm),
    Engine("minilm+heads", "systemone", False, minilm, heads=True),
    Engine("llama-gemma", "llama", False, llama_gemma),
    Engine("laya", "laya", True, laya),
    Engine("von", "von", True, von),
    *(Engine(name, "systemone", True, torch_engine(name)) for name in ("gte", "qwen3-rerank", "anyjev", "openthai")),
    Engine("mock", "mock", False, mock),
]
