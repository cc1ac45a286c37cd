"""The op set itself: every primitive carries all of its facets; promotion fast paths are exact."""
import pytest

import dynograph  # noqa: F401  (registers every op module)
from dynograph.compiler.ops import REGISTRY
from dynograph.compiler.ops import core
from dynograph.runtime import dtypes as D

OPS = sorted(REGISTRY.values(), key=lambda op: op.name)


def test_op_set_is_populated():
    kinds = {op.kind for op in OPS}
    assert {"elementwise", "reduction", "movement", "index", "linalg"} <= kinds
    assert len(OPS) > 100


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_every_primitive_has_its_facets(op):
    assert op.kind in core.KINDS
    assert callable(op.impl), "no reference implementation"
    assert callable(op.meta), "no meta rule"
    if op.differentiable:
        assert callable(op.vjp), "differentiable op without a derivative rule"
        assert op.grad_name, "no grad_fn name"
    if op.kind == "elementwise":
        assert callable(op.dtype_rule), "elementwise op without a dtype rule"


def _general_result_type(*operands):
    """result_type without its fast paths."""
    state = {"dim": None, "zero": None, "wrapped": None}
    for x in operands:
        kind, dt = core._category_type(x)
        cur = state[kind]
        state[kind] = dt if cur is None else D.promote_types(cur, dt)
    return core._combine_categories(state["dim"], core._combine_categories(state["zero"], state["wrapped"]))


@pytest.mark.parametrize("default", [D.float32, D.float64])
def test_result_type_fast_paths_agree_with_the_general_rule(default):
    old = D.get_default_dtype()
    D.set_default_dtype(default)
    try:
        for a in D.ALL_DTYPES:
            for shape in ((2,), ()):
                t = core.TensorSpec(shape, a)
                assert core.result_type(t) is _general_result_type(t)
                for scalar in (True, 3, 2.5):
                    assert core.result_type(t, scalar) is _general_result_type(t, scalar)
                for b in D.ALL_DTYPES:
                    u = core.TensorSpec((3,), b)
                    assert core.result_type(t, u) is _general_result_type(t, u)
    finally:
        D.set_default_dtype(old)


def test_result_type_matches_torch(torch):
    names = [d.name for d in D.ALL_DTYPES]
    for a in names:
        for b in names:
            ours = core.result_type(core.TensorSpec((2,), getattr(D, a)), core.TensorSpec((), getattr(D, b)))
            theirs = torch.result_type(torch.ones(2, dtype=getattr(torch, a)), torch.ones((), dtype=getattr(torch, b)))
            assert ours.name == str(theirs).split(".")[-1], (a, b)
        for scalar in (True, 3, 2.5):
            ours = core.result_type(core.TensorSpec((2,), getattr(D, a)), scalar)
            theirs = torch.result_type(torch.ones(2, dtype=getattr(torch, a)), scalar)
            assert ours.name == str(theirs).split(".")[-1], (a, scalar)


# ---------------------------------------------------------------- facets the passes read

LOWERED = sorted(op.name for op in OPS if op.lowering is not None)


@pytest.mark.parametrize("name", LOWERED)
def test_every_lowered_op_fuses_and_runs_on_llvm(name):
    """An op with a lowering is taken by fusion and compiles to an llvm kernel on its own,
    and the llvm backend computes what the interpreter computes (the op's IR round-trip case
    from tests/test_ir.py supplies the call)."""
    import numpy as np
    from dynograph.compiler import interpreter
    from dynograph.compiler.backends import get_runner
    from dynograph.compiler.lowering.kernel import describe
    from dynograph.compiler.passes.fusion import role
    from test_ir import ALL, _trace_case

    fn, make = ALL[name]
    graph, feed = _trace_case(fn, make())
    nodes = [n for n in graph.nodes if n.op == name]
    assert nodes, f"{name} not reached"
    for node in nodes:
        assert role(node) is not None, f"fusion does not take {name}"
        layouts = []
        for v in dict.fromkeys(node.input_values()):
            shape = tuple(v.type.shape)
            strides = [0] * len(shape)
            step = 1
            for k in range(len(shape) - 1, -1, -1):
                strides[k] = 0 if shape[k] == 1 else step
                step *= shape[k]
            layouts.append((tuple(strides), 0))
        kernel = describe(node, layouts)          # raises Unsupported when it cannot
        assert kernel.stores
    got = get_runner("llvm")(graph, feed)[0]
    want = interpreter.run(graph, feed)[0]
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                   rtol=1e-5, atol=1e-7, equal_nan=True)


def test_derived_op_sets_agree_with_the_facets():
    from dynograph.compiler.ops import groups
    for op in OPS:
        assert (op.name in groups.REINDEX) == (op.reindex is not None)
        assert (op.name in groups.PERMUTE) == (op.reindex == "permute")
        assert (op.name in groups.RESHAPE) == (op.reindex == "reshape")
        assert (op.name in groups.CONSTANT) == op.constant
        assert (op.name in groups.READS_LAYOUT) == op.reads_layout
        assert (op.name in groups.DATA_DEPENDENT) == op.data_dependent
        assert (op.name in groups.KERNEL_REDUCTIONS) == (op.kind == "reduction" and op.lowering is not None)
        # a re-indexing op is a view of input 0, or the copying reshape of a fresh result
        if op.reindex is not None:
            assert op.view or op.reindex == "reshape", op.name
        if op.constant:
            assert op.kind == "creation" and not op.differentiable


def test_kinds_say_what_the_op_does():
    """"reduction" means one result per kept index; scans, sorts and pooling have kinds of
    their own (fusion treats every lowered reduction as a loop-nest reduction)."""
    by_kind = {}
    for op in OPS:
        by_kind.setdefault(op.kind, set()).add(op.name)
    assert {"cumsum", "cummax"} <= by_kind["scan"]
    assert {"sort", "topk", "median"} <= by_kind["sort"]
    assert {"avg_pool2d", "max_pool2d_with_indices"} <= by_kind["pooling"]
    assert not {"sum_dim", "mean_dim", "prod_dim"} & set(REGISTRY), "one spelling per primitive"
