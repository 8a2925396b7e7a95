"""Build a tiny random-initialised checkpoint for one of serve.py's torch engines, offline.

Run with the systemone-torch venv's Python: `python make_tiny_engines.py ENGINE OUT_DIR`, ENGINE
one of gte, qwen3-rerank, anyjev, openthai. Each is what the engine's loader reads, in the shape
its real model has, around the shared tiny tokenizer (tiny_modernbert.py):

- gte: a ModernBERT sequence classifier with one logit (as gte-reranker-modernbert-base);
- qwen3-rerank and anyjev: a two-layer Qwen3 causal LM (Qwen3-Reranker and the Tacit models are
  Qwen3 causal LMs), with "yes"/"no" and "Yes"/"No" as single tokens, which they read;
- openthai: that causal LM made a decision model by the package's own `from_causal_lm`.

Real code paths, meaningless answers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import ModernBertForSequenceClassification, Qwen3Config, Qwen3ForCausalLM

from tiny_modernbert import CORPUS, encoder_config, randomise, tokenizer

# The answer words the causal-LM engines read as single tokens.
ANSWER_WORDS = ["yes", "no", "Yes", "No"] * 50


def causal_lm(out: Path) -> None:
    vocab_size = tokenizer(out, CORPUS + ANSWER_WORDS)
    config = Qwen3Config(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=4096,
                         pad_token_id=0, bos_token_id=2, eos_token_id=3, tie_word_embeddings=False)
    model = Qwen3ForCausalLM(config)
    randomise(model, std=0.5)  # weights large enough that the answer tokens' logits differ
    model.save_pretrained(out)


def gte(out: Path) -> None:
    config = encoder_config(tokenizer(out))
    config.num_labels = 1
    model = ModernBertForSequenceClassification(config)
    randomise(model, std=0.5)
    model.save_pretrained(out)


def openthai(out: Path) -> None:
    from openthai_systemone.modeling import OpenThaiSystemOneForDecision

    causal_lm(out / "causal-lm")
    model, tok = OpenThaiSystemOneForDecision.from_causal_lm(str(out / "causal-lm"), torch_dtype=torch.float32)
    randomise(model.slot_head, seed=1, std=0.5)
    model.save_pretrained(out)
    tok.save_pretrained(out)


BUILDERS = {"gte": gte, "qwen3-rerank": causal_lm, "anyjev": causal_lm, "openthai": openthai}

if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in BUILDERS:
        sys.exit(f"usage: make_tiny_engines.py {{{','.join(BUILDERS)}}} OUT_DIR")
    target = Path(sys.argv[2])
    target.mkdir(parents=True, exist_ok=True)
    BUILDERS[sys.argv[1]](target)
