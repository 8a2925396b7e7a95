"""Build a tiny random-initialised Laya checkpoint directory, for the real laya server offline.

Run with the laya venv's Python: `python make_tiny_laya.py OUT_DIR`. It writes what
`laya.agent` loads (`rl_agent_config.json`, `tokenizer/`, `encoder/config.json`,
`model.safetensors`) around the shared tiny ModernBERT (tiny_modernbert.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from laya.common import build_model
from safetensors.torch import save_file

from tiny_modernbert import encoder_config, randomise, tokenizer


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    encoder_config(tokenizer(out / "tokenizer")).save_pretrained(out / "encoder")
    config = {"encoder": str(out / "encoder"), "head_layers": 1, "act_costs": {"escalate": 0.5},
              "max_len": 256, "head_max_len": 96, "temperature": [1, 1, 1]}
    (out / "rl_agent_config.json").write_text(json.dumps(config, indent=2))
    model = build_model(config, encoder_dir=str(out / "encoder"), pretrained=False)
    randomise(model)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(out / "model.safetensors"))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
