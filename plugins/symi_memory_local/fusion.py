"""Rewriting an exported BERT-style encoder into ONNX Runtime's fused CPU operators.

PyTorch's exporter writes each layer's self-attention as some twenty small operators: three
projections, head reshapes and transposes, a mask turned into ``-inf`` scores by ``Where``, a
``Softmax`` and an ``IsNaN``/``Where`` pass over its output, and the merge of the heads. ONNX
Runtime's own graph optimiser does not recognise that form (its attention fusion matches the
older exporter), so every batch walks the full score tensor several times. The GELU is written
as ``x * 0.5 * (1 + erf(x / sqrt 2))`` in an order its GELU fusion does not match either.

:func:`fuse_encoder` replaces each such attention block by one ``com.microsoft.Attention`` node
(the three projections as one matrix product, the key-padding mask applied inside the kernel),
each GELU after a biased projection by ``com.microsoft.BiasGelu``, and each layer normalisation
by its reductions and elementwise steps (faster than ONNX Runtime's CPU kernel for it): the same
arithmetic in fewer, or faster, passes over memory. Weights keep their stored form (the int8 weights and their scales stay
as they are; ONNX Runtime folds them, now concatenated, when it optimises the session).

The rewrite only touches blocks that match the pattern exactly and returns None when it found
nothing to fuse; the caller checks the rewritten graph against the plain one on real input
before using it (see ``onnx_embedder._fused_session``).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["FUSION_VERSION", "fuse_encoder"]

#: Part of the optimised-graph cache key: a change to the rewrite invalidates graphs built by an older one.
FUSION_VERSION = 1
_MS = "com.microsoft"


class _Graph:
    """Producer/consumer look-ups over an ONNX graph and its constant values."""

    def __init__(self, graph: Any) -> None:
        from onnx import numpy_helper

        self.graph = graph
        self.producer = {out: n for n in graph.node for out in n.output}
        self.consumers: dict[str, list[Any]] = {}
        for n in graph.node:
            for name in n.input:
                self.consumers.setdefault(name, []).append(n)
        self.init = {i.name: i for i in graph.initializer}
        self._numpy = numpy_helper

    def op(self, name: str, op_type: str) -> Any | None:
        """The node producing ``name`` when it is an ``op_type``."""
        node = self.producer.get(name)
        return node if node is not None and node.op_type == op_type else None

    def only_consumer(self, name: str, op_type: str) -> Any | None:
        users = self.consumers.get(name, [])
        return users[0] if len(users) == 1 and users[0].op_type == op_type else None

    def const(self, name: str) -> Any | None:
        """The value of an initializer or a ``Constant`` node's output, else None."""
        if name in self.init:
            return self._numpy.to_array(self.init[name])
        node = self.op(name, "Constant")
        if node is not None:
            for attr in node.attribute:
                if attr.name == "value":
                    return self._numpy.to_array(attr.t)
        return None

    def weight_shape(self, name: str) -> tuple[int, ...] | None:
        """Shape of a constant weight, also when it is stored quantised (``Mul(Cast(int8), scale)``)."""
        value = self.const(name)
        if value is not None:
            return tuple(value.shape)
        mul = self.op(name, "Mul")
        if mul is not None:
            for term in mul.input:
                cast = self.op(term, "Cast")
                stored = self.const(cast.input[0]) if cast is not None else None
                if stored is not None:
                    return tuple(stored.shape)
        return None

    def attribute(self, node: Any, name: str, default: Any = None) -> Any:
        from onnx import helper

        for attr in node.attribute:
            if attr.name == name:
                return helper.get_attribute_value(attr)
        return default


def _projection(g: _Graph, name: str) -> tuple[str, str, str] | None:
    """(input, weight, bias) when ``name`` is ``Add(MatMul(input, weight), bias)`` with constant weights."""
    add = g.op(name, "Add")
    if add is None:
        return None
    for i in (0, 1):
        mm = g.op(add.input[i], "MatMul")
        bias = add.input[1 - i]
        if mm is not None and g.const(bias) is not None and g.weight_shape(mm.input[1]) is not None:
            return mm.input[0], mm.input[1], bias
    return None


def _back_through_layout(g: _Graph, name: str) -> str:
    """Follow ``name`` back through Reshape/Transpose nodes to the tensor they rearrange."""
    while True:
        node = g.producer.get(name)
        if node is None or node.op_type not in ("Reshape", "Transpose"):
            return name
        name = node.input[0]


def _scaled(g: _Graph, name: str) -> tuple[str, float] | None:
    """(tensor, factor) when ``name`` is ``Mul(tensor, scalar constant)``."""
    mul = g.op(name, "Mul")
    if mul is None:
        return None
    for i in (0, 1):
        value = g.const(mul.input[1 - i])
        if value is not None and value.size == 1:
            return mul.input[i], float(value.reshape(()))
    return None


def _heads(g: _Graph, q_name: str) -> int | None:
    """Number of heads, from the Reshape that splits the query projection ``(B, S, H*D) -> (B, S, H, D)``."""
    users = g.consumers.get(q_name, [])
    if len(users) != 1 or users[0].op_type != "Reshape":
        return None
    reshape = users[0]
    shape = g.const(reshape.input[1])
    concat = g.op(reshape.input[1], "Concat")
    if shape is None and concat is not None:  # [batch, seq, -1, head size] from runtime dims
        head = g.const(concat.input[-1])
        return (None if head is None or head.size != 1 else -int(head.reshape(())))
    if shape is not None and shape.size == 4:
        return int(shape[2]) if shape[2] > 0 else -int(shape[3])
    return None


def _match_attention(g: _Graph, softmax: Any) -> dict[str, Any] | None:
    """The pieces of one exported scaled-dot-product attention ending in ``softmax``, else None."""
    if g.attribute(softmax, "axis", -1) not in (-1, 3):
        return None
    add = g.op(softmax.input[0], "Add")
    if add is None:
        return None
    scores = next((g.op(x, "MatMul") for x in add.input if g.op(x, "MatMul") is not None), None)
    if scores is None:
        return None
    q_side, k_side = _scaled(g, scores.input[0]), _scaled(g, scores.input[1])
    if q_side is None or k_side is None:
        return None
    # Softmax -> IsNaN -> Where(isnan, 0, probs) -> MatMul(probs, V)
    isnan = next((n for n in g.consumers.get(softmax.output[0], []) if n.op_type == "IsNaN"), None)
    where = g.only_consumer(isnan.output[0], "Where") if isnan is not None else None
    if where is None or where.input[2] != softmax.output[0]:
        return None
    context = g.only_consumer(where.output[0], "MatMul")
    if context is None or context.input[0] != where.output[0]:
        return None
    merge_t = g.only_consumer(context.output[0], "Transpose")
    merge = g.only_consumer(merge_t.output[0], "Reshape") if merge_t is not None else None
    if merge_t is None or merge is None or list(g.attribute(merge_t, "perm", [])) != [0, 2, 1, 3]:
        return None
    q_t = g.op(q_side[0], "Transpose")
    if q_t is None or list(g.attribute(q_t, "perm", [])) != [0, 2, 1, 3]:
        return None
    projections = [_projection(g, _back_through_layout(g, x)) for x in (q_side[0], k_side[0], context.input[1])]
    if any(p is None for p in projections):
        return None
    q, k, v = (p for p in projections if p is not None)
    if not q[0] == k[0] == v[0]:
        return None
    q_proj = g.op(_back_through_layout(g, q_side[0]), "Add")
    assert q_proj is not None
    heads = _heads(g, q_proj.output[0])
    shape = g.weight_shape(q[1])
    if heads is None or shape is None or len(shape) != 2:
        return None
    hidden = shape[1]
    if heads < 0:  # a head size was found: heads = hidden / head size
        if hidden % -heads:
            return None
        heads = hidden // -heads
    return {
        "input": q[0],
        "weights": (q[1], k[1], v[1]),
        "biases": (q[2], k[2], v[2]),
        "heads": heads,
        "scale": q_side[1] * k_side[1],
        "output": merge.output[0],
        "name": softmax.name or merge.output[0],
    }


def _match_gelu(g: _Graph, node: Any) -> tuple[str, str, str] | None:
    """(matmul output, bias, output) when ``node`` is the last Mul of ``x * (0.5 * (erf(x / sqrt2) + 1))``
    with ``x = MatMul(...) + bias``."""
    if node.op_type != "Mul":
        return None
    for i in (0, 1):
        x, rest = node.input[i], g.op(node.input[1 - i], "Mul")
        projection = _projection(g, x)
        if rest is None or projection is None:
            continue
        half = _scaled(g, rest.output[0])
        if half is None or abs(half[1] - 0.5) > 1e-7:
            continue
        plus_one = g.op(half[0], "Add")
        if plus_one is None:
            continue
        erf = next((g.op(t, "Erf") for t in plus_one.input if g.op(t, "Erf") is not None), None)
        one = next((g.const(t) for t in plus_one.input if g.const(t) is not None), None)
        if erf is None or one is None or one.size != 1 or float(one.reshape(())) != 1.0:
            continue
        div = g.op(erf.input[0], "Div")
        root = g.const(div.input[1]) if div is not None else None
        if div is None or div.input[0] != x or root is None or root.size != 1 \
                or abs(float(root.reshape(())) - math.sqrt(2.0)) > 1e-6:
            continue
        add = g.op(x, "Add")
        assert add is not None
        matmul_out = next(t for t in add.input if t != projection[2])
        return matmul_out, projection[2], node.output[0]
    return None


def fuse_encoder(model: Any, mask_input: str = "attention_mask") -> tuple[Any, dict[str, int]] | None:
    """``model`` (an ``onnx.ModelProto``, changed in place) with fused attention and GELU nodes.

    Returns (model, counts of fused blocks), or None when no attention block matched or the graph has
    no ``mask_input`` to mask padded keys with.
    """
    from onnx import TensorProto, helper

    graph = model.graph
    if mask_input not in {i.name for i in graph.input}:
        return None
    g = _Graph(graph)
    attentions = [m for n in graph.node if n.op_type == "Softmax" and (m := _match_attention(g, n)) is not None]
    if not attentions:
        return None
    gelus = [gm for n in graph.node if (gm := _match_gelu(g, n)) is not None]

    new_nodes: list[Any] = []
    mask = f"{mask_input}_int32_fused"
    new_nodes.append(helper.make_node("Cast", [mask_input], [mask], to=TensorProto.INT32, name="fused_mask_cast"))
    replaced: dict[str, list[Any]] = {}  # output name -> the nodes that now produce it
    for k, a in enumerate(attentions):
        w, b = f"fused_qkv_weight_{k}", f"fused_qkv_bias_{k}"
        replaced[a["output"]] = [
            helper.make_node("Concat", list(a["weights"]), [w], axis=1, name=f"fused_qkv_w_{k}"),
            helper.make_node("Concat", list(a["biases"]), [b], axis=0, name=f"fused_qkv_b_{k}"),
            helper.make_node("Attention", [a["input"], w, b, mask], [a["output"]], domain=_MS,
                             name=f"fused_attention_{k}", num_heads=a["heads"], scale=a["scale"]),
        ]
    layer_norms = 0
    for n in graph.node:
        steps = _layer_norm_steps(g, n, layer_norms) if n.op_type == "LayerNormalization" else None
        if steps is not None:
            replaced[n.output[0]] = steps
            layer_norms += 1
    for k, (matmul_out, bias, out) in enumerate(gelus):
        replaced[out] = [helper.make_node("BiasGelu", [matmul_out, bias], [out], domain=_MS, name=f"fused_gelu_{k}")]

    # Rebuild the node list in order: each fused node takes the place of the node whose output it produces,
    # then whatever no longer leads to a graph output is dropped.
    nodes: list[Any] = list(new_nodes)
    for n in graph.node:
        fused = next((replaced[o] for o in n.output if o in replaced), None)
        nodes.extend(fused if fused is not None else [n])
    nodes = _live(nodes, [o.name for o in graph.output])
    del graph.node[:]
    graph.node.extend(nodes)
    used = {x for n in nodes for x in n.input}
    kept = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    if not any(o.domain == _MS for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(_MS, 1))
    return model, {"attention": len(attentions), "bias_gelu": len(gelus), "layer_norm": layer_norms}


def _layer_norm_steps(g: _Graph, node: Any, k: int) -> list[Any] | None:
    """``LayerNormalization`` over the last axis as elementwise steps, or None when it is another kind.

    ONNX Runtime's CPU layer normalisation (and its fused skip + layer normalisation) runs at several
    nanoseconds an element; the same arithmetic as reductions and elementwise operators, each vectorised,
    took a third of the time on 2 x 256 x 384 activations. (``d * d`` rather than ``Pow``, so the graph
    optimiser does not fold the steps back into its layer-normalisation operator.)
    """
    import numpy as np
    from onnx import helper, numpy_helper

    if g.attribute(node, "axis", -1) != -1 or len(node.input) < 2 or len(node.output) != 1:
        return None
    x, scale = node.input[0], node.input[1]
    bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
    eps = float(g.attribute(node, "epsilon", 1e-5))
    p = f"fused_ln_{k}"
    g.graph.initializer.extend([
        numpy_helper.from_array(np.array(eps, dtype=np.float32), f"{p}_eps"),
    ])
    out = node.output[0]
    steps = [
        helper.make_node("ReduceMean", [x], [f"{p}_mean"], axes=[-1], keepdims=1, name=f"{p}_mean"),
        helper.make_node("Sub", [x, f"{p}_mean"], [f"{p}_centred"], name=f"{p}_centre"),
        helper.make_node("Mul", [f"{p}_centred", f"{p}_centred"], [f"{p}_sq"], name=f"{p}_square"),
        helper.make_node("ReduceMean", [f"{p}_sq"], [f"{p}_var"], axes=[-1], keepdims=1, name=f"{p}_var"),
        helper.make_node("Add", [f"{p}_var", f"{p}_eps"], [f"{p}_var_eps"], name=f"{p}_add_eps"),
        helper.make_node("Sqrt", [f"{p}_var_eps"], [f"{p}_std"], name=f"{p}_std"),
        helper.make_node("Div", [f"{p}_centred", f"{p}_std"], [f"{p}_norm"], name=f"{p}_normalise"),
        helper.make_node("Mul", [f"{p}_norm", scale], [f"{p}_scaled" if bias else out], name=f"{p}_scale"),
    ]
    if bias:
        steps.append(helper.make_node("Add", [f"{p}_scaled", bias], [out], name=f"{p}_shift"))
    return steps


def _live(nodes: list[Any], outputs: list[str]) -> list[Any]:
    """``nodes`` that some graph output depends on, in their order."""
    producer = {o: n for n in nodes for o in n.output}
    needed, stack, seen = set(), list(outputs), set()
    while stack:
        name = stack.pop()
        node = producer.get(name)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        needed.add(id(node))
        stack.extend(x for x in node.input if x)
    return [n for n in nodes if id(n) in needed]
