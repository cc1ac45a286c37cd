"""DistributedDataParallel training steps compiled whole: the gradient all-reduce as a
collective node of the graph.

One 2-rank mpiexec job runs every check of tests/distributed_compile_cases.py (10 compiled
steps equal one process on the concatenated batch and eager DDP, gradient_as_bucket_view,
no_sync around and inside the step, find_unused_parameters, a communication hook falls back,
a rank that skips a replay makes the other time out naming the all-reduce, viz draws the
node).  The rest runs here without MPI: the ``all_reduce`` primitive through the passes.
"""
import os

import numpy as np
import pytest

import dynograph  # noqa: F401  (registers every op)
from dynograph.compiler import interpreter
from dynograph.compiler.ops import REGISTRY
from dynograph.compiler.passes.simplify import simplify
from dynograph.compiler.pipeline import optimize
from dynograph.compiler.text import parse_graph, print_graph
from test_distributed import run_checks_on_two_ranks

CASES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "distributed_compile_cases.py")


def test_two_ranks_compiled_ddp_steps(tmp_path):
    """Every check of distributed_compile_cases.py on 2 ranks; a failure names the check and rank."""
    import distributed_compile_cases
    run_checks_on_two_ranks(tmp_path, CASES, [], distributed_compile_cases.CHECKS)


# ---------------------------------------------------------------- the primitive, without MPI

STEP = """graph {
  input %0: f32[6] g
  %1: f32[6] = div(%0, 2)
  %2: f32[6] = all_reduce_start(%1, group='world', reduce_op='sum', what='bucket 0')
  %3: u8[3] = full(shape=(3,), fill_value=1, dtype=uint8)
  %4: u8[3] = all_reduce_start(%3, group='world', reduce_op='max', what='used 1')
  %5: u8[3] = all_reduce_start(%3, group='world', reduce_op='max', what='used 2')
  %6: f32[6] = mul(%0, 5)
  %7: f32[6] = all_reduce_wait(%2, %1, what='bucket 0')
  %8: u8[3] = all_reduce_wait(%4, %3, what='used 1')
  %9: u8[3] = all_reduce_wait(%5, %3, what='used 2')
  %10: f32[6] = mul(%7, %6)
  return %10
}"""
COLLECTIVES = ("all_reduce_start", "all_reduce_wait")


def test_all_reduce_is_an_effect_every_pass_keeps_in_order():
    """Unread (dce), equal to another (cse), of a constant (fold), between fusible ops (fusion):
    each start and wait stays, in its order; the text form round-trips."""
    for name in COLLECTIVES:
        op = REGISTRY[name]
        assert op.kind == "collective" and op.effect and not op.differentiable
    assert REGISTRY["uniform"].effect and not REGISTRY["add"].effect
    graph = parse_graph(STEP)
    assert print_graph(parse_graph(print_graph(graph))) == print_graph(graph)
    out, _ = optimize(graph)
    kept = [(n.op[11:], n.attrs["what"]) for n in out.nodes if n.op in COLLECTIVES]
    assert kept == [("start", "bucket 0"), ("start", "used 1"), ("start", "used 2"),
                    ("wait", "bucket 0"), ("wait", "used 1"), ("wait", "used 2")], print_graph(out)
    fused = [n.attrs["graph"] for n in out.nodes if n.op == "fused"]
    assert fused and all(m.op not in COLLECTIVES for sub in fused for m in sub.nodes)


def test_viz_draws_the_all_reduce_as_a_collective():
    import dynograph.viz as viz
    from dynograph.viz.render import KIND_COLORS
    graph = viz.from_ir(parse_graph(STEP))
    drawn = [n for n in graph.nodes if n.label in COLLECTIVES]
    assert [n.kind for n in drawn] == ["collective"] * 6
    assert drawn[0].attrs["what"] == "'bucket 0'" and KIND_COLORS["collective"] != KIND_COLORS["op"]
    assert f'fillcolor="{KIND_COLORS["collective"]}"' in viz.render(parse_graph(STEP), format="dot")


def test_all_reduce_outside_a_process_group_says_so():
    from dynograph.distributed import DistError
    from dynograph.distributed import _compiled  # noqa: F401  (installs the MPI side)
    with pytest.raises(DistError, match="process group 'world'.*init_process_group"):
        interpreter.run(parse_graph(STEP), [np.ones(6, np.float32)])
    with pytest.raises(DistError, match="waiting for an all-reduce that was not started"):
        REGISTRY["all_reduce_wait"].impl(np.ones(2), np.ones(2), what="all_reduce of x")
    with pytest.raises(ValueError, match="unknown reduce_op 'avg'"):
        REGISTRY["all_reduce_start"].meta(_Spec((2,)), group="world", reduce_op="avg", what="x")


class _Spec:
    def __init__(self, shape):
        self.shape, self.dtype = shape, dynograph.float32


def test_simplify_keeps_the_layout_that_a_view_of_a_transpose_reads():
    """view(t(t(mm))) reads the product's layout: t(mm) -> mm(t(b), t(a)) must not fire (DDP
    flattens the transposed weight gradients of nn.Linear exactly so)."""
    graph = parse_graph("""graph {
      input %0: f32[4,3] a
      input %1: f32[4,8] b
      input %2: f32[2] c
      %3: f32[3,4] = t(%0)
      %4: f32[3,8] = mm(%3, %1)
      %5: f32[8,3] = t(%4)
      %6: f32[3,8] = t(%5)
      %7: f32[24] = view(%6, shape=(24,))
      %8: f32[26] = cat(%7, %2, dim=0, dtype=float32)
      return %8
    }""")
    rng = np.random.default_rng(0)
    feed = [rng.standard_normal(s).astype(np.float32) for s in ((4, 3), (4, 8), (2,))]
    want = interpreter.run(graph, feed)[0][0]
    np.testing.assert_array_equal(interpreter.run(simplify(graph), feed)[0][0], want)
