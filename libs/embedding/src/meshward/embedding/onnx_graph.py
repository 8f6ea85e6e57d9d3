"""The same encoder as an ONNX graph, for onnxruntime: built in memory from the weights the numpy encoder
prepared (no export step, no torch), so both runtimes compute one function and share one model version.

Inputs ``input_ids`` and ``attention_mask`` (int64, batch x sequence); output ``embedding`` (float32, batch x
384, unit-norm rows): BERT layers as in :meth:`MiniLMEncoder._forward`, mean pooling over the mask, L2 norm.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["OPSET", "build_graph"]

OPSET = 17  # LayerNormalization is a standard op from 17


class _Graph:
    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._n = 0

    def const(self, value: Any, name: str | None = None, dtype: Any = np.float32) -> str:
        self._n += 1
        name = name or f"c{self._n}"
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, kind: str, inputs: Sequence[str], **attrs: Any) -> str:
        self._n += 1
        out = f"{kind.lower()}{self._n}"
        self.nodes.append(helper.make_node(kind, list(inputs), [out], **attrs))
        return out

    def linear(self, x: str, w: np.ndarray, b: np.ndarray, prefix: str) -> str:
        return self.op("Add", [self.op("MatMul", [x, self.const(w, f"{prefix}.w")]), self.const(b, f"{prefix}.b")])

    def layer_norm(self, x: str, g: np.ndarray, b: np.ndarray, eps: float, prefix: str) -> str:
        return self.op("LayerNormalization", [x, self.const(g, f"{prefix}.g"), self.const(b, f"{prefix}.b")],
                       axis=-1, epsilon=eps)


def build_graph(word_emb: np.ndarray, pos_type_emb: np.ndarray, emb_ln: tuple[np.ndarray, np.ndarray],
                layers: Sequence[Any], heads: int, eps: float) -> bytes:
    """The serialised model. ``layers`` are the numpy encoder's prepared layers (query pre-scaled, QKV fused)."""
    hidden = int(word_emb.shape[1])
    head_dim = hidden // heads
    g = _Graph()
    ids, mask = "input_ids", "attention_mask"
    length = g.op("Unsqueeze", [g.op("Gather", [g.op("Shape", [ids]), g.const(1, dtype=np.int64)]),
                                g.const([0], dtype=np.int64)])
    positions = g.op("Slice", [g.const(pos_type_emb, "pos_type_emb"), g.const([0], dtype=np.int64), length,
                               g.const([0], dtype=np.int64)])
    x = g.op("Add", [g.op("Gather", [g.const(word_emb, "word_emb"), ids]), positions])  # (B, T, H)
    x = g.layer_norm(x, *emb_ln, eps, "emb_ln")
    maskf = g.op("Cast", [mask], to=TensorProto.FLOAT)
    # additive attention bias (B, 1, 1, T): 0 where attended, the float minimum where padded
    bias = g.op("Mul", [g.op("Sub", [g.const(1.0), maskf]), g.const(np.finfo(np.float32).min)])
    bias = g.op("Unsqueeze", [bias, g.const([1, 2], dtype=np.int64)])
    split_heads = g.const([0, 0, 3, heads, head_dim], dtype=np.int64)
    merge_heads = g.const([0, 0, hidden], dtype=np.int64)
    for i, layer in enumerate(layers):
        p = f"layer{i}"
        qkv = g.op("Reshape", [g.linear(x, layer.w_qkv, layer.b_qkv, f"{p}.qkv"), split_heads])
        qkv = g.op("Transpose", [qkv], perm=[2, 0, 3, 1, 4])  # (3, B, heads, T, head_dim)
        q, k, v = (g.op("Gather", [qkv, g.const(j, dtype=np.int64)], axis=0) for j in range(3))
        scores = g.op("Add", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]), bias])
        context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), merge_heads])
        y = g.op("Add", [g.linear(context, layer.w_attn_out, layer.b_attn_out, f"{p}.attn_out"), x])
        x = g.layer_norm(y, layer.ln1_g, layer.ln1_b, eps, f"{p}.ln1")
        inner = g.linear(x, layer.w_in, layer.b_in, f"{p}.in")
        # exact GELU: 0.5 * x * (1 + erf(x / sqrt(2)))
        gelu = g.op("Mul", [g.op("Mul", [inner, g.const(0.5)]),
                            g.op("Add", [g.const(1.0), g.op("Erf", [g.op("Div", [inner, g.const(np.sqrt(2.0))])])])])
        y = g.op("Add", [g.linear(gelu, layer.w_out, layer.b_out, f"{p}.out"), x])
        x = g.layer_norm(y, layer.ln2_g, layer.ln2_b, eps, f"{p}.ln2")
    weights = g.op("Unsqueeze", [maskf, g.const([2], dtype=np.int64)])  # (B, T, 1)
    summed = g.op("ReduceSum", [g.op("Mul", [x, weights]), g.const([1], dtype=np.int64)], keepdims=0)
    counts = g.op("Max", [g.op("ReduceSum", [weights, g.const([1], dtype=np.int64)], keepdims=0), g.const(1e-9)])
    pooled = g.op("Div", [summed, counts])
    # (ReduceSum takes its axes as an input from opset 13, ReduceL2 only from 18)
    norm = g.op("Max", [g.op("ReduceL2", [pooled], axes=[1], keepdims=1), g.const(1e-12)])
    g.nodes.append(helper.make_node("Div", [pooled, norm], ["embedding"]))
    graph = helper.make_graph(
        g.nodes, "minilm_mean_pooled",
        [helper.make_tensor_value_info(ids, TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info(mask, TensorProto.INT64, ["batch", "sequence"])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="meshward.embedding")
    onnx.checker.check_model(model)
    return model.SerializeToString()
