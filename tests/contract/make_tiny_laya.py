"""Build a tiny random-initialised Laya checkpoint directory, for the real laya server offline.

Run with the laya venv's Python: `python make_tiny_laya.py OUT_DIR`. It writes what
`laya.agent` loads (`rl_agent_config.json`, `tokenizer/`, `encoder/config.json`,
`model.safetensors`) for a two-layer ModernBERT of width 32 with random weights: the server's
code paths are real, its probabilities mean nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from laya.common import build_model
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import ModernBertConfig, PreTrainedTokenizerFast

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Byte-level BPE (GPT-2's pre-tokenizer over bytes), as ModernBERT's own tokenizer is: every text
# is encodable, and llama.cpp's converter and tokenizer accept it. Merges are learned from this
# line, so the vocabulary is the same on every run.
CORPUS = ["Rerun the flaky pipeline or block the merge? Is git push --force destructive? " * 4]


def tokenizer(out: Path) -> int:
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=320, special_tokens=SPECIALS, show_progress=False,
                                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    vocab = tok.get_vocab()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=1024)
    fast.save_pretrained(out / "tokenizer")
    return tok.get_vocab_size()


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    vocab_size = tokenizer(out)
    encoder = ModernBertConfig(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        max_position_embeddings=1024, pad_token_id=0, cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3,
        global_attn_every_n_layers=3, local_attention=128, reference_compile=False,
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
