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
