"""`draw_graph` (module 05, `tinytorch.core.graph`): the graph's nodes and edges, its SVG and DOT text (issue 26)."""
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from tests.autograd.test_autograd import SparseGather
from tinytorch.core.graph import draw_graph, layer_ranks
from tinytorch.core.tensor import Tensor

SVG = "{http://www.w3.org/2000/svg}"


def shared_input_graph():
    "(a * b + a).sum() with `a` used twice, after backward."
    a, b = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, -1.0], requires_grad=True)
    loss = (a * b + a).sum()
    loss.backward()
    return a, b, loss, draw_graph(loss, names={"a": a, "b": b})


def test_nodes_and_edges_of_a_known_expression():
    a, b, loss, graph = shared_input_graph()
    by_id = {n.id: n for n in graph.nodes}
    label = {n.id: n.op if n.kind == "op" else (n.name or f"{n.shape}") for n in graph.nodes}
    ids = {"a": graph.node_for(a).id, "b": graph.node_for(b).id, "loss": graph.node_for(loss).id}
    op = {by_id[i].op: i for i in by_id if by_id[i].kind == "op"}
    assert sorted(op) == ["AddBackward", "MulBackward", "SumBackward"]
    product = next(t for s, t in graph.edges if s == op["MulBackward"])
    total = next(t for s, t in graph.edges if s == op["AddBackward"])
    expected = {(ids["a"], op["MulBackward"]), (ids["b"], op["MulBackward"]), (op["MulBackward"], product),
                (product, op["AddBackward"]), (ids["a"], op["AddBackward"]), (op["AddBackward"], total),
                (total, op["SumBackward"]), (op["SumBackward"], ids["loss"])}
    assert set(graph.edges) == expected and len(graph.edges) == 8, [(label[s], label[t]) for s, t in graph.edges]
    assert len(graph.nodes) == 8, "5 tensors (a once, though used twice) and 3 ops"
    position = {n.id: i for i, n in enumerate(graph.nodes)}
    assert all(position[s] < position[t] for s, t in graph.edges), "nodes are listed inputs before outputs"


def test_tensor_nodes_carry_shape_dtype_requires_grad_and_gradient():
    a, b, loss, graph = shared_input_graph()
    node = graph.node_for(a)
    assert (node.shape, node.dtype, node.requires_grad) == ((2,), "float32", True)
    assert node.grad == "grad: [4., 0.]", "d/da sum(a*b + a) = b + 1 = [4, 0]"
    constant = Tensor([2.0, 2.0])
    graph = draw_graph((a * constant).sum())
    assert graph.node_for(constant).requires_grad is False and graph.node_for(constant).grad is None
    big = Tensor(np.ones((3, 4)), requires_grad=True)
    (big * 2.0).sum().backward()
    assert graph_text(draw_graph(big)) and "|g|=6.928" in draw_graph(big).node_for(big).grad   # sqrt(12 * 4)
    assert len(draw_graph(big).nodes) == 1 and draw_graph(big).edges == [], "a leaf alone is one node"


def graph_text(graph):
    return "\n".join(line for node in graph.nodes for line in node.lines)


def test_svg_parses_as_xml_with_one_shape_per_node_and_the_labels():
    _, _, _, graph = shared_input_graph()
    root = ET.fromstring(graph.svg())
    assert root.tag == f"{SVG}svg" and float(root.get("width")) > 0 and float(root.get("height")) > 0
    assert len(root.findall(f"{SVG}g[@class='tensor']")) == 5 and len(root.findall(f"{SVG}g[@class='op']")) == 3
    assert len(root.findall(f"{SVG}g[@class='edge']")) == 8
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "MulBackward" in texts and "grad: [4., 0.]" in texts and "a" in texts
    assert graph._repr_svg_() == graph.svg()
    width, height = float(root.get("width")), float(root.get("height"))
    for rect in root.iter(f"{SVG}rect"):                      # every box inside the drawing
        x, y, w, h = (float(rect.get(k)) for k in ("x", "y", "width", "height"))
        assert 0 <= x and x + w <= width and 0 <= y and y + h <= height


def test_svg_escapes_names():
    a = Tensor([1.0], requires_grad=True)
    root = ET.fromstring(draw_graph(a * 2.0, names={'<a & "b">': a}).svg())
    assert '<a & "b">' in [t.text for t in root.iter(f"{SVG}text")]


def test_dot_text_is_well_formed():
    a, _, _, graph = shared_input_graph()
    lines = graph.dot().strip().splitlines()
    assert lines[0] == "digraph tinytorch {" and lines[-1] == "}"
    node_line = re.compile(r'^  (\w+) \[shape=(box|ellipse), style=filled, fillcolor="#[0-9a-f]{6}", label="((?:[^"\\]|\\.)*)"\];$')
    edge_line = re.compile(r"^  (\w+) -> (\w+);$")
    declared, edges = {}, []
    for line in lines[1:-1]:
        if (m := node_line.match(line)):
            declared[m.group(1)] = m.group(3)
        elif (m := edge_line.match(line)):
            edges.append((m.group(1), m.group(2)))
        else:
            assert line.strip() in ("rankdir=TB;", 'node [fontname="monospace", fontsize=10];'), line
    assert set(declared) == {n.id for n in graph.nodes} and edges == graph.edges
    assert all(s in declared and t in declared for s, t in edges)
    assert declared[graph.node_for(a).id] == "a\\n(2,) float32\\nrequires_grad\\ngrad: [4., 0.]"
    quoted = Tensor([1.0], requires_grad=True)
    text = draw_graph(quoted * 2.0, names={'say "hi"\\': quoted}).dot()
    assert 'label="say \\"hi\\"\\\\\\n' in text


def test_sparse_embedding_gradient_shows_its_rows():
    table = Tensor(np.arange(12.0).reshape(6, 2), requires_grad=True)
    ids = Tensor(np.array([4, 0, 4]))
    (SparseGather.apply(table, ids) * 2.0).sum().backward()
    graph = draw_graph(SparseGather.apply(table, ids).sum(), names={"table": table})
    node = graph.node_for(table)
    assert node.grad_rows == (0, 4)
    assert node.grad == "grad: rows [0, 4] (2 of 6)"
    assert "grad: rows [0, 4] (2 of 6)" in [t.text for t in ET.fromstring(graph.svg()).iter(f"{SVG}text")]
    assert "grad: rows [0, 4] (2 of 6)" in graph.dot()
    ops = [n.op for n in graph.nodes if n.kind == "op"]
    assert ops == ["SparseGather", "SumBackward"] and graph.node_for(ids).requires_grad is False


def test_long_sparse_row_lists_are_cut():
    table = Tensor(np.zeros((20, 2)), requires_grad=True)
    SparseGather.apply(table, Tensor(np.arange(20)[::-1].copy())).sum().backward()
    assert draw_graph(table).node_for(table).grad == "grad: rows [0, 1, 2, 3, 4, 5, 6, 7, ...] (20 of 20)"


def test_parameters_are_named_by_their_module():
    from tinytorch.core.layers import Linear
    layer = Linear(3, 2)
    graph = draw_graph(layer(Tensor(np.ones((1, 3)))).sum())
    assert {n.name for n in graph.nodes if n.name} == {"Linear.weight", "Linear.bias"}


def test_a_deep_graph_is_walked_without_recursion():
    x = Tensor([1.0], requires_grad=True)
    y = x
    for _ in range(3000):
        y = y + 1.0
    graph = draw_graph(y)
    assert len(graph.nodes) == 1 + 3000 * 3 and len(graph.edges) == 3000 * 3


def test_layer_ranks_of_the_leaf_c_by_hand():
    "(a * b + c).sum(), ranks worked out by hand: c sits beside a*b, just above the AddBackward that uses it."
    a, b, c = (Tensor([1.0], requires_grad=True) for _ in range(3))
    out = (a * b + c).sum()
    graph = draw_graph(out)
    ranks = layer_ranks([n.id for n in graph.nodes], graph.edges)
    by_tensor = {name: ranks[graph.node_for(t).id] for name, t in {"a": a, "b": b, "c": c, "out": out}.items()}
    assert by_tensor == {"a": 0, "b": 0, "c": 2, "out": 6}
    assert sorted(ranks[n.id] for n in graph.nodes if n.kind == "op") == [1, 3, 5]


def test_every_arrow_points_down_on_a_layer():
    from tinytorch.core.layers import Linear
    layer = Linear(3, 4)
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    hidden = layer(x).relu()
    graph = draw_graph((hidden * hidden + x.sum()).mean())
    ranks = layer_ranks([n.id for n in graph.nodes], graph.edges)
    assert all(ranks[t] > ranks[s] for s, t in graph.edges)
    assert min(ranks.values()) == 0


@pytest.mark.parametrize("value", [np.ones(3), [1.0, 2.0], 3.0, None])
def test_refuses_what_is_not_a_tensor(value):
    with pytest.raises(TypeError, match=r"draw_graph\(tensor\): tensor must be a Tensor; got"):
        draw_graph(value)


def test_refuses_names_that_are_not_tensors():
    a = Tensor([1.0], requires_grad=True)
    with pytest.raises(TypeError, match="names must be a dict of label -> Tensor"):
        draw_graph(a * 2.0, names={"a": np.ones(1)})
