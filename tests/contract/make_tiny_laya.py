"""Build a tiny random-initialised Laya checkpoint directory, for the real laya server offline.

Run with the laya venv's Python: `python make_tiny_laya.py OUT_DIR`. It writes what
`laya.agent` loads (`rl_agent_config.json`, `tokenizer/`, `encoder/config.json`,
`model.safetensors`) for a two-layer ModernBERT of width 32 with random weights: the server's
code paths are real, its probabilities mean nothing.
"""

from __future__ import annotations

import json
import string
import sys
from pathlib import Path

import torch
from laya.common import build_model
from safetensors.torch import save_file
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
from transformers import ModernBertConfig, PreTrainedTokenizerFast

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tokenizer(out: Path) -> int:
    pieces = list(string.ascii_lowercase + string.digits + string.punctuation)
    vocab = {token: i for i, token in enumerate(SPECIALS + pieces + [f"##{p}" for p in pieces])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=1024)
    fast.save_pretrained(out / "tokenizer")
    return len(vocab)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    vocab_size = tokenizer(out)
    encoder = ModernBertConfig(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        max_position_embeddings=1024, pad_token_id=0, cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3,
        global_attn_every_n_layers=1, local_attention=128, reference_compile=False,
    )
    encoder.save_pretrained(out / "encoder")
    config = {"encoder": str(out / "encoder"), "head_layers": 1, "act_costs": {"escalate": 0.5},
              "max_len": 256, "head_max_len": 96, "temperature": [1, 1, 1]}
    (out / "rl_agent_config.json").write_text(json.dumps(config, indent=2))
    torch.manual_seed(0)
    model = build_model(config, encoder_dir=str(out / "encoder"), pretrained=False)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() > 1:
                torch.nn.init.normal_(parameter, std=0.02)
            elif "norm" in name.lower() and name.endswith("weight"):
                parameter.fill_(1.0)
            else:
                parameter.zero_()
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(out / "model.safetensors"))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
