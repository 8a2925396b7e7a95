"""The judge's reading of many prompts: llama-server in embedding mode with the judge
(Qwen2.5-Coder-1.5B-Instruct), each token's last hidden state, pooled two ways, cached on disk.

The prompts are the llama adapter's `reading` (the question and the judged text as a chat turn,
ending where the answer would be written); the last token's state, of unit length, is the
vector `LlamaProvider.embed` gets from a server run with `--pooling last`; the mean over every
token is the other pooling, which needs every token's state (`--pooling none`). About 60 tokens a
second on two cores.
"""

from __future__ import annotations

import hashlib
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
import numpy as np

from benchlib import free_port
from local_engines import JUDGE, LLAMA, NO_POLLING, serve


class States:
    """Pooled states of prompts, from the cache file `cache` where it has them. `mean=False`: the
    last token's state alone, pooled and scaled to unit length by the server (`--pooling last`,
    as the stack runs it), one vector a prompt instead of one a token."""

    def __init__(self, stack: ExitStack, cache: Path, mean: bool = True) -> None:
        self.stack = stack
        self.cache = cache
        self.mean = mean
        self.url: str | None = None
        self.client: httpx.Client | None = None

    def _start(self) -> None:
        port = free_port()
        serve(self.stack, [str(LLAMA / "bin" / "llama-server"), "-m", str(JUDGE), "--host", "127.0.0.1",
                           "--port", str(port), "-c", "4096", "-b", "2048", "-ub", "2048", "-np", "1", "-t", "2",
                           "--embeddings", "--pooling", "none" if self.mean else "last", *NO_POLLING], f"http://127.0.0.1:{port}/health")
        self.url = f"http://127.0.0.1:{port}/embedding"
        self.client = self.stack.enter_context(httpx.Client(timeout=300))

    def _pooled(self, turn: str) -> tuple[np.ndarray, np.ndarray]:
        if self.client is None:
            self._start()
        assert self.client is not None and self.url is not None
        reply = self.client.post(self.url, json={"content": turn})
        reply.raise_for_status()
        states = np.asarray(reply.json()[0]["embedding"], dtype=np.float32)
        return (states.mean(axis=0), states[-1]) if self.mean else (np.zeros(0, np.float32), states[0])

    def of(self, turns: list[str], label: str = "") -> tuple[np.ndarray, np.ndarray]:
        """Mean-pooled (empty without `mean`) and last-token states of each prompt (of unit length
        only where the server pooled them: see `unit`)."""
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in turns]
        cached: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        if self.cache.exists():
            data = np.load(self.cache)
            cached = {str(k): (m, last) for k, m, last in zip(data["keys"], data["mean"], data["last"])}
        missing = list(dict.fromkeys((k, t) for k, t in zip(keys, turns) if k not in cached))
        started = time.monotonic()
        for n, (key, turn) in enumerate(missing, 1):
            cached[key] = self._pooled(turn)
            if n % 50 == 0 or n == len(missing):
                print(f"{label}: {n}/{len(missing)} in {time.monotonic() - started:.0f} s", flush=True)
                self.cache.parent.mkdir(parents=True, exist_ok=True)
                np.savez(self.cache, keys=np.array(list(cached)), mean=np.array([v[0] for v in cached.values()]),
                         last=np.array([v[1] for v in cached.values()]))
        return np.array([cached[k][0] for k in keys]), np.array([cached[k][1] for k in keys])


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)
