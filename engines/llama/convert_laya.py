"""Turn a Laya checkpoint directory into a GGUF that llama-server serves at `/v1/systemone`.

    python3 convert_laya.py CHECKPOINT OUT.gguf --llama-cpp DIR [--outtype f32|f16|bf16|q8_0]

Runs llama.cpp's own converter (`convert_hf_to_gguf.py` from the source tree at DIR, e.g. the
one `build_server.py` extracts under build/llama/src/) on a Laya checkpoint (`rl_agent_config.json`,
`encoder/`, `tokenizer/`, `model.safetensors`), with two corrections for the pinned llama.cpp
snapshot, each applied only where it is needed:

- Its converter writes ModernBERT's `norm_eps` as `<arch>.attention.layer_norm_rms_epsilon`,
  while its ModernBERT loader reads `<arch>.attention.layer_norm_epsilon` and refuses the file
  without it. The value is written under the key the loader reads too.
- It names a byte-level BPE tokenizer's pre-tokenizer by hashing how a test text tokenizes, so
  a tokenizer it has never seen (a generated test checkpoint's) is refused. When the hash is
  unknown and the checkpoint's own tokenizer.json says it pre-tokenizes as GPT-2 does
  (ByteLevel with its regex), that is what is written; any other tokenizer is still refused.

Needs the Python of an environment with torch, transformers and safetensors (the laya one).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def gpt2_byte_level(checkpoint: Path) -> bool:
    """Whether the checkpoint's tokenizer pre-tokenizes exactly as GPT-2's ByteLevel does."""
    try:
        spec = json.loads((checkpoint / "tokenizer" / "tokenizer.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    pre = spec.get("pre_tokenizer") or {}
    model = spec.get("model") or {}
    return pre.get("type") == "ByteLevel" and pre.get("use_regex", True) and model.get("type") == "BPE"


def patch(checkpoint: Path) -> None:
    """Apply the two corrections to the converter's ModernBERT decision model class."""
    import gguf
    from conversion.bert import ModernBertDecisionModel

    set_parameters = ModernBertDecisionModel.set_gguf_parameters
    vocab_pre = ModernBertDecisionModel.get_vocab_base_pre

    def set_gguf_parameters(self) -> None:
        set_parameters(self)
        if (eps := self.hparams.get("norm_eps")) is not None:
            self.gguf_writer.add_layer_norm_eps(eps)

    def get_vocab_base_pre(self, tokenizer) -> str:
        try:
            return vocab_pre(self, tokenizer)
        except NotImplementedError:
            if not gpt2_byte_level(checkpoint):
                raise
            return "gpt-2"

    ModernBertDecisionModel.set_gguf_parameters = set_gguf_parameters
    ModernBertDecisionModel.get_vocab_base_pre = get_vocab_base_pre
    assert gguf.Keys.Attention.LAYERNORM_EPS.endswith("layer_norm_epsilon")  # the key the loader reads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--llama-cpp", type=Path, required=True, help="llama.cpp's source tree")
    parser.add_argument("--outtype", default="f32", choices=("f32", "f16", "bf16", "q8_0"))
    args = parser.parse_args()
    converter = args.llama_cpp / "convert_hf_to_gguf.py"
    if not converter.is_file():
        parser.error(f"{converter} does not exist: --llama-cpp must be llama.cpp's source tree")
    if not (args.checkpoint / "rl_agent_config.json").is_file():
        parser.error(f"{args.checkpoint} has no rl_agent_config.json: not a Laya checkpoint")

    # The converter imports its `conversion` package and the bundled gguf-py from its own tree.
    sys.path[:0] = [str(args.llama_cpp), str(args.llama_cpp / "gguf-py")]
    patch(args.checkpoint)
    import convert_hf_to_gguf

    sys.argv = [str(converter), str(args.checkpoint), "--outfile", str(args.out), "--outtype", args.outtype]
    convert_hf_to_gguf.main()


if __name__ == "__main__":
    main()
