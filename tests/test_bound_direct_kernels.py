"""Direct kernels bound by a program's steps (compiler/lowering/launch.py): a convolution, its
weight gradient, max pooling and its backward that read the same arrays as at one of the last
two calls relaunch what that call bound, and still match eager; results the caller holds are
never written again."""
import copy

import numpy as np
import pytest

import dynograph as dg
from dynograph.compiler.lowering import launch
from dynograph.runtime import threads


def _program_of(compiled):
    return next(iter(compiled.entries[-1].graph._programs.values()))


def _direct_steps(compiled):
    return [s for s in _program_of(compiled).steps if getattr(s, "binds", None) is not None]


class _Net(dg.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = dg.nn.Conv2d(3, 6, 3, padding=1)                 # a padded copy
        self.conv2 = dg.nn.Conv2d(6, 8, 3, bias=False)                # no bias (a None read)
        self.fc = dg.nn.Linear(8 * 2 * 2, 5)

    def forward(self, x):
        x = dg.nn.functional.max_pool2d(dg.relu(self.conv1(x)), 2)   # 12 -> 6
        x = dg.nn.functional.max_pool2d(dg.relu(self.conv2(x)), 2)   # 4 -> 2
        return self.fc(x.flatten(1))


@pytest.fixture(params=[2, 1], ids=["two threads", "one thread"])
def n_threads(request):
    before = threads.count()
    threads.set_threads(request.param)
    yield request.param
    threads.set_threads(before)


def test_a_cnn_step_relaunches_its_bound_direct_kernels_and_matches_eager(n_threads):
    dg.manual_seed(0)
    model = _Net()
    twin = copy.deepcopy(model)

    def step_of(m):
        opt = dg.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)

        def step(x, y):
            opt.zero_grad()
            loss = dg.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            return loss
        return step
    eager, compiled = step_of(twin), dg.compile(step_of(model), backend="llvm")
    rng = np.random.default_rng(0)
    x = dg.from_numpy(rng.standard_normal((4, 3, 12, 12)).astype(np.float32))
    y = dg.from_numpy(rng.integers(0, 5, 4))
    bounds = []
    for k in range(7):
        x.copy_(dg.from_numpy(rng.standard_normal((4, 3, 12, 12)).astype(np.float32)))
        np.testing.assert_allclose(compiled(x, y).item(), eager(x, y).item(), rtol=1e-5)
        if k >= 2:
            bounds.append([id(b) for s in _direct_steps(compiled) for b in s.same])
    for p, q in zip(model.parameters(), twin.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-6)
    # two convolutions, conv2's input gradient (a transposed convolution), two weight
    # gradients, two poolings and their backwards
    ops = sorted(s.node.op for s in _direct_steps(compiled))
    assert ops == ["convolution"] * 3 + ["convolution_weight_grad"] * 2 + \
        ["max_pool2d_with_indices"] * 2 + ["max_pool_backward"] * 2
    # every direct step bound once, twice where its result leaves (a weight's .grad: calls
    # alternate between two arrays); later calls relaunch the same launches
    steps = _direct_steps(compiled)
    assert [s.handed is not None for s in steps].count(True) == 2
    assert bounds[0] == bounds[-1] and \
        len(bounds[0]) == sum(2 if s.handed is not None else 1 for s in steps)


def test_indices_of_a_bound_max_pool_held_by_the_caller_are_not_written_again():
    """Max pooling's bound launch has indices of its own, written again only while nothing
    else holds them: a view of them the caller kept makes the next call bind anew."""
    def f(x):
        values, indices = dg.nn.functional.max_pool2d(x * 2, 2, return_indices=True)
        return values.sum(), indices.flatten()          # a view of the indices leaves
    compiled = dg.compile(f, backend="llvm")
    rng = np.random.default_rng(1)
    x = dg.from_numpy(rng.standard_normal((2, 3, 8, 8)).astype(np.float32))
    held = []
    for _ in range(5):
        x.copy_(dg.from_numpy(rng.standard_normal((2, 3, 8, 8)).astype(np.float32)))
        total, indices = compiled(x)
        expected = f(x)
        np.testing.assert_allclose(total.item(), expected[0].item(), rtol=1e-5)
        np.testing.assert_array_equal(indices.numpy(), expected[1].numpy())
        held.append((indices, expected[1].numpy().copy()))
    for indices, want in held:
        np.testing.assert_array_equal(indices.numpy(), want)


def test_a_convolution_result_handed_out_alternates_and_stays_unchanged(n_threads):
    """A convolution whose result leaves writes into recycled result arrays, bound for each;
    the one the caller holds from the last call is not written."""
    w = dg.from_numpy(np.random.default_rng(2).standard_normal((4, 3, 3, 3)).astype(np.float32))

    def f(x):
        return dg.nn.functional.conv2d(x, w, padding=1)
    compiled = dg.compile(f, backend="llvm")
    rng = np.random.default_rng(3)
    x = dg.from_numpy(rng.standard_normal((2, 3, 9, 9)).astype(np.float32))
    held = None
    pointers = []
    for _ in range(7):
        x.copy_(dg.from_numpy(rng.standard_normal((2, 3, 9, 9)).astype(np.float32)))
        out = compiled(x)
        np.testing.assert_allclose(out.numpy(), f(x).numpy(), rtol=1e-5, atol=1e-5)
        if held is not None:
            np.testing.assert_array_equal(held[0].numpy(), held[1])
        held = (out, out.numpy().copy())
        pointers.append(out.data_ptr())
    assert len(set(pointers[2:])) == 2
    (step,) = _direct_steps(compiled)
    assert len(step.same) == 2


def test_a_launch_runs_and_binds_to_the_same_values():
    """launch.run (leased padded buffers) and launch.bind (its own) give the same result."""
    from dynograph.compiler.lowering.conv import run_convolution
    from dynograph.compiler.lowering.program import Host
    from dynograph.compiler.llvm.backend import LLVM
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 7, 7)).astype(np.float32)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    attrs = dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1), transposed=False,
                 output_padding=(0, 0), groups=1)

    class Owner:
        pass
    owner, host = Owner(), Host(LLVM)
    ran = run_convolution(owner, [x, w, b], attrs, None, host)
    out = np.empty_like(ran)
    bound, results, owned, reusable = run_convolution.bind(owner, [x, w, b], attrs, out, host)
    assert results is out and owned == () and reusable
    bound()
    np.testing.assert_array_equal(out, ran)
    x[...] = rng.standard_normal(x.shape)           # new values, the same array
    bound()
    np.testing.assert_array_equal(out, run_convolution(owner, [x, w, b], attrs, None, host))
    assert isinstance(bound, launch._Bound)         # the padded copy, then the kernel


def test_a_padded_copy_too_large_to_keep_runs_unbound(monkeypatch):
    """A convolution whose padded copy is over padding.KEEP_BYTES is not bound (its buffer
    would be held between calls): it runs through a buffer made per call, as before."""
    from dynograph.compiler.lowering import padding
    monkeypatch.setattr(padding, "KEEP_BYTES", 0)
    w = dg.from_numpy(np.random.default_rng(5).standard_normal((4, 3, 3, 3)).astype(np.float32))

    def f(x):
        return dg.nn.functional.conv2d(x, w, padding=1).relu().sum()
    compiled = dg.compile(f, backend="llvm")
    x = dg.from_numpy(np.random.default_rng(6).standard_normal((2, 3, 9, 9)).astype(np.float32))
    for _ in range(4):
        np.testing.assert_allclose(compiled(x).item(), f(x).item(), rtol=1e-5)
        x.mul_(-0.5)
    (step,) = _direct_steps(compiled)
    assert step.same == []


def test_a_new_input_at_every_call_binds_again_on_the_same_padded_buffers(monkeypatch):
    """A convolution reading a new array at every call (each batch a new tensor) binds every
    call; the launches it drops give their padded buffers back, so no call makes new ones
    once the first calls have."""
    from dynograph.compiler.lowering import padding
    made = []
    bordered = padding.Padding.bordered

    def counted(self):
        made.append(self.shape)
        return bordered(self)
    monkeypatch.setattr(padding.Padding, "bordered", counted)
    w = dg.from_numpy(np.random.default_rng(7).standard_normal((4, 3, 3, 3)).astype(np.float32))

    def f(x):
        return dg.nn.functional.conv2d(x, w, padding=1).relu().sum()
    compiled = dg.compile(f, backend="llvm")
    rng = np.random.default_rng(8)
    counts = []
    for _ in range(8):
        x = dg.from_numpy(rng.standard_normal((2, 3, 9, 9)).astype(np.float32))
        np.testing.assert_allclose(compiled(x).item(), f(x).item(), rtol=1e-5)
        counts.append(len(made))
    assert counts[3] == counts[-1] <= 4, counts
    (step,) = _direct_steps(compiled)
    assert len(step.same) == 2


def test_two_threads_calling_one_compiled_step_bind_their_own_launches():
    """A call arriving while the program runs gets a program of its own; its steps bind their
    own launches and take padded buffers from the same Paddings: each thread's results match
    eager throughout."""
    import threading
    w = dg.from_numpy(np.random.default_rng(9).standard_normal((4, 3, 3, 3)).astype(np.float32))

    def f(x):
        y = dg.nn.functional.conv2d(x, w, padding=1).relu()
        return dg.nn.functional.max_pool2d(y, 2).sum((1, 2, 3))
    compiled = dg.compile(f, backend="llvm")
    rng = np.random.default_rng(10)
    inputs = [[dg.from_numpy(rng.standard_normal((2, 3, 8, 8)).astype(np.float32))
               for _ in range(3)] for _ in range(2)]
    wants = [[f(x).numpy() for x in xs] for xs in inputs]
    compiled(inputs[0][0])                  # (the trace)
    failures = []

    def worker(xs, want):
        for k in range(30):
            got = compiled(xs[k % 3]).numpy()
            if not np.allclose(got, want[k % 3], rtol=1e-4, atol=1e-4):
                failures.append(k)
    threads = [threading.Thread(target=worker, args=args) for args in zip(inputs, wants)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
