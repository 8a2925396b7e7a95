"""The parts every generated test checkpoint shares: a byte-level BPE tokenizer and a two-layer
ModernBERT of width 32, re-initialised with small random weights. The engines' code paths are
real; their probabilities mean nothing. Needs torch, tokenizers and transformers (the laya and
von environments have them)."""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import ModernBertConfig, PreTrainedTokenizerFast

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Byte-level BPE (GPT-2's pre-tokenizer over bytes), as ModernBERT's own tokenizer is: every text
# is encodable, and llama.cpp's converter and tokenizer accept it. Merges are learned from this
# line, so the vocabulary is the same on every run.
CORPUS = ["Rerun the flaky pipeline or block the merge? Is git push --force destructive? " * 4]


def tokenizer(out: Path, corpus: list[str] = CORPUS) -> int:
    """Save the tokenizer, its merges learned from `corpus`, to `out`; its vocabulary size."""
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=320, special_tokens=SPECIALS, show_progress=False,
                                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    vocab = tok.get_vocab()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=1024)
    fast.save_pretrained(out)
    return tok.get_vocab_size()


def encoder_config(vocab_size: int) -> ModernBertConfig:
    # Every third layer global, ModernBERT's own pattern: with every layer global and a window
    # set, this llama.cpp snapshot aborts on its first batch (engines/llama/README.md).
    return ModernBertConfig(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        max_position_embeddings=1024, pad_token_id=0, cls_token_id=2, sep_token_id=3, bos_token_id=2, eos_token_id=3,
        global_attn_every_n_layers=3, local_attention=128, reference_compile=False,
    )


def randomise(model: torch.nn.Module, seed: int = 0, std: float = 0.02) -> None:
    """Normal weights (small by default), unit norms, zero biases: a reproducible random model."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() > 1:
                torch.nn.init.normal_(parameter, std=std)
            elif "norm" in name.lower() and name.endswith("weight"):
                parameter.fill_(1.0)
            else:
                parameter.zero_()
