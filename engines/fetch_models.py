"""Download an engine's weights into the models volume, once, so the engines run offline.

    python3 fetch_models.py ENGINE        # laya | von | gte | qwen3-rerank | anyjev | openthai | llama

Run by the stack's `fetch-models` job (`make models ENGINE=laya`), the only container with
egress. Files come from the Hugging Face Hub's plain HTTP API (`HF_TOKEN` for gated repos) into
`/models/<engine>` (`/models/gguf` for llama), where the engine containers read them with
`HF_HUB_OFFLINE=1`. Files already there with the right size are kept.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

HUB = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
MODELS = Path(os.environ.get("MODELS_DIR", "/models"))


@dataclass(frozen=True)
class Source:
    repo: str
    target: str
    subfolder: str = ""
    patterns: tuple[str, ...] = ("*",)


SOURCES = {
    "laya": Source("convaiinnovations/laya", "laya/typed-decisions", "typed-decisions",
                   ("rl_agent_config.json", "model.safetensors", "tokenizer/*", "encoder/*")),
    "von": Source("wfzyx/von", "von"),
    "gte": Source("Alibaba-NLP/gte-reranker-modernbert-base", "gte"),
    "qwen3-rerank": Source("Qwen/Qwen3-Reranker-0.6B", "qwen3-rerank"),
    "anyjev": Source("morriszjm/Tacit-1.7B", "anyjev"),
    "openthai": Source("iapp/OpenThai-SystemOne", "openthai"),
    "llama": Source("LiquidAI/d1-3B-GGUF", "gguf", patterns=(os.environ.get("LLAMA_GGUF", "d1-3B-Q8_0.gguf"),)),
}


def listing(client: httpx.Client, source: Source) -> list[dict]:
    path = f"/api/models/{source.repo}/tree/main" + (f"/{source.subfolder}" if source.subfolder else "")
    response = client.get(path, params={"recursive": "true"})
    response.raise_for_status()
    prefix = f"{source.subfolder}/" if source.subfolder else ""
    files = []
    for entry in response.json():
        if entry.get("type") != "file":
            continue
        relative = entry["path"].removeprefix(prefix)
        if any(fnmatch.fnmatch(relative, p) for p in source.patterns):
            files.append({"path": entry["path"], "relative": relative, "size": entry.get("size")})
    return files


def fetch(engine: str, client: httpx.Client, root: Path = MODELS) -> list[Path]:
    if engine not in SOURCES:
        raise SystemExit(f"unknown engine {engine!r}; choose one of {', '.join(SOURCES)} (ollama pulls its own)")
    source = SOURCES[engine]
    target = root / source.target
    written = []
    for entry in listing(client, source):
        destination = target / entry["relative"]
        if destination.exists() and entry["size"] is not None and destination.stat().st_size == entry["size"]:
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        partial = destination.with_suffix(destination.suffix + ".part")
        with client.stream("GET", f"/{source.repo}/resolve/main/{entry['path']}") as response:
            response.raise_for_status()
            with partial.open("wb") as handle:
                for chunk in response.iter_bytes(1 << 20):
                    handle.write(chunk)
        partial.replace(destination)
        written.append(destination)
        print(f"{engine}: {entry['relative']}", flush=True)
    return written


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    token = os.environ.get("HF_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(base_url=HUB, headers=headers, follow_redirects=True, timeout=httpx.Timeout(60, read=300)) as client:
        fetch(sys.argv[1], client)
    print(f"{sys.argv[1]}: weights ready under {MODELS / SOURCES[sys.argv[1]].target}")


if __name__ == "__main__":
    main()
