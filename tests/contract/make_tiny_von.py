"""Build a tiny random-initialised Von checkpoint directory, for the real `von serve` offline.

Run with the von venv's Python: `python make_tiny_von.py OUT_DIR`. Von loads the first
directory holding `option_marker.pt` (`VON_CHECKPOINT_DIR`): a Hugging Face ModernBERT encoder
(`config.json`, weights, tokenizer) beside the state dict of its `OptionMarkerModel`. The
encoder is the shared tiny ModernBERT (tiny_modernbert.py); without a checkpoint Von refuses to
answer rather than score with a random head, so this one is random on purpose.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers import ModernBertModel
from von.models.option_marker import OptionMarkerModel

from tiny_modernbert import encoder_config, randomise, tokenizer


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    encoder = ModernBertModel(encoder_config(tokenizer(out)))
    randomise(encoder, std=0.5)
    encoder.save_pretrained(out)
    model = OptionMarkerModel(base_model_id=str(out))
    randomise(model.scorer, seed=1, std=1.0)  # weights large enough that options score apart
    torch.save(model.state_dict(), out / "option_marker.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
