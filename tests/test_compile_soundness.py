"""dynograph.compile is never silently wrong: compiled calls equal eager ones (or fall back).

Each case is a small program, run twice from its source in fresh namespaces: once eagerly,
once with ``step`` compiled.  Between calls ``between(i)`` changes something the program
depends on (a global, an attribute, a parameter, a hook...).  After every call the outputs and
``state()`` must be equal in both worlds.  A compiled call may instead have fallen back to
eager execution; the test only asks that it is right.
"""
import textwrap
import warnings

import numpy as np
import pytest

import dynograph

PRELUDE = """
import dynograph as torch
import dynograph.nn as nn
import dynograph.nn.functional as F
torch.manual_seed(0)

def between(i):
    pass

def state():
    return {}
"""

CASES = {}


def case(name, calls=4):
    def register(src):
        CASES[name] = (textwrap.dedent(src), calls)
    return register


def _leaves(x, out):
    if isinstance(x, (tuple, list)):
        for y in x:
            _leaves(y, out)
    elif isinstance(x, dict):
        for k in sorted(x, key=repr):
            out.append(("key", k))
            _leaves(x[k], out)
    elif isinstance(x, dynograph.Tensor):
        out.append(("tensor", x.dtype, tuple(x.shape), x._data.copy(),
                    None if x.grad is None else x.grad._data.copy()))
    else:
        out.append(("value", x))
    return out


def _same(a, b, what):
    assert len(a) == len(b), f"{what}: {len(a)} vs {len(b)} leaves"
    for x, y in zip(a, b):
        assert x[0] == y[0], what
        if x[0] == "tensor":
            assert x[1:3] == y[1:3], f"{what}: {x[1:3]} vs {y[1:3]}"
            np.testing.assert_allclose(x[3], y[3], rtol=1e-5, atol=1e-6, err_msg=what)
            assert (x[4] is None) == (y[4] is None), f"{what}: .grad set in one world only"
            if x[4] is not None:
                np.testing.assert_allclose(x[4], y[4], rtol=1e-5, atol=1e-6, err_msg=what + " .grad")
        else:
            assert type(x[1]) is type(y[1]) and repr(x[1]) == repr(y[1]), f"{what}: {x[1]!r} vs {y[1]!r}"


def run_world(src, calls, compiled, backend):
    ns = {"__name__": "case"}
    exec(compile(PRELUDE + src, "<case>", "exec"), ns)
    step = dynograph.compile(ns["step"], backend=backend) if compiled else ns["step"]
    trail = []
    for i in range(calls):
        try:
            out = step(*ns["make_args"](i))
            trail.append(("out", _leaves(out, []), _leaves(ns["state"](), [])))
        except Exception as e:              # compiled code must raise what eager raises
            trail.append(("raised", type(e).__name__, str(e)))
        ns["between"](i)
    return trail, step


def agree(name, backend):
    src, calls = CASES[name]
    eager, _ = run_world(src, calls, False, backend)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # a fallback's warning is allowed
        compiled, step = run_world(src, calls, True, backend)
    for i, (e, c) in enumerate(zip(eager, compiled)):
        assert e[0] == c[0], f"call {i}: eager {e}, compiled {c}\n{step.explain()}"
        if e[0] == "raised":
            assert e[1:] == c[1:], f"call {i}: eager raised {e[1:]}, compiled {c[1:]}"
            continue
        _same(e[1], c[1], f"call {i} outputs\n{step.explain()}")
        _same(e[2], c[2], f"call {i} state\n{step.explain()}")
    return step


# ---------------------------------------------------------------- 1. Python values read anywhere

case("global read by a helper")("""
SCALE = 2.0
def helper(x):
    return x * SCALE
def step(x):
    return helper(x) + 1
def make_args(i):
    return (torch.ones(3),)
def between(i):
    global SCALE
    SCALE = SCALE + 1.5
""")

case("closure read by a lambda")("""
def make():
    k = [3.0]
    f = lambda x: x * k[0]
    def step(x):
        return f(x)
    def between(i):
        k[0] = -k[0] + 1
    return step, between
step, between = make()
def make_args(i):
    return (torch.ones(2),)
""")

case("closure read by a method of a local class")("""
def make():
    k = [3.0]
    class Scale(nn.Module):
        def forward(self, x):
            return x * k[0]
        @staticmethod
        def shift(x):
            return x + k[0]
        @classmethod
        def twice(cls, x):
            return cls.shift(x) * k[0]
    m = Scale()
    def step(x):
        return Scale.twice(m(x))
    def between(i):
        k[0] = -k[0] + 1
    return step, between
step, between = make()
def make_args(i):
    return (torch.ones(2),)
""")

case("global read in a comprehension")("""
W = 1.0
def step(x):
    return sum(x * (W + j) for j in range(2))
def make_args(i):
    return (torch.ones(2),)
def between(i):
    global W
    W = W * 3
""")

case("config object attribute")("""
class Config:
    scale = 1.0
    shift = 0.0
CFG = Config()
def step(x):
    return x * CFG.scale + CFG.shift
def make_args(i):
    return (torch.arange(3.),)
def between(i):
    CFG.scale = CFG.scale + 1
    if i == 1:
        CFG.shift = -0.0
""")

case("class attribute of a config class")("""
class CFG:
    scale = 1.0
def step(x):
    return x * CFG.scale
def make_args(i):
    return (torch.arange(3.),)
def between(i):
    CFG.scale = CFG.scale * -2
""")

case("element of a global list and dict")("""
L = [1.0, 2.0]
D = {"a": 1.0}
def step(x):
    return x * L[1] + D["a"]
def make_args(i):
    return (torch.ones(2),)
def between(i):
    L[1] += 1
    D["a"] = D["a"] * 2
""")

case("mutable default argument")("""
def step(x, opts={"scale": 1.0}):
    return x * opts["scale"]
def make_args(i):
    return (torch.ones(2),)
def between(i):
    step.__defaults__[0]["scale"] += 1
""")

case("attribute of an object passed as argument")("""
class Opts:
    def __init__(self):
        self.scale = 1.0
OPTS = Opts()
def step(x, o):
    return x * o.scale
def make_args(i):
    return (torch.ones(2), OPTS)
def between(i):
    OPTS.scale += 0.5
""")

case("a flag read in forward")("""
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)
        self.double = False
    def forward(self, x):
        y = self.fc(x)
        return y * 2 if self.double else y
model = Net()
def step(x):
    return model(x)
def make_args(i):
    return (torch.ones(4, 3),)
def between(i):
    model.double = not model.double
""")

case("Dropout p and BatchNorm momentum and eps")("""
model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Dropout(0.0))
def step(x):
    return model(x)
def make_args(i):
    return (torch.arange(12.).reshape(4, 3) * (i + 1),)
def between(i):
    model[1].momentum = 0.5 if i % 2 == 0 else 0.1
    model[1].eps = 1e-3 * (i + 1)
def state():
    return {"mean": model[1].running_mean, "var": model[1].running_var}
""")

case("a model switched between train() and eval()", calls=5)("""
model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
def step(x):
    return model(x)
def make_args(i):
    return (torch.arange(12.).reshape(4, 3) * (i + 1),)
def between(i):
    model[1].train(i % 2 == 1)
def state():
    return {"mean": model[1].running_mean, "var": model[1].running_var}
""")

case("momentum buffers replaced by strided tensors between calls", calls=5)("""
model = nn.Linear(3, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
def step(x):
    opt.zero_grad()
    loss = model(x).pow(2).sum()
    loss.backward()
    opt.step()
    return loss
def make_args(i):
    return (torch.arange(12.).reshape(4, 3) / (i + 1),)
def between(i):
    if i == 1:      # the same values, laid out transposed
        buf = opt.state[model.weight]["momentum_buffer"]
        opt.state[model.weight]["momentum_buffer"] = buf.t().contiguous().t()
    if i == 2:
        opt.state[model.bias]["momentum_buffer"] = torch.ones(4)[::2] * 0.5
def state():
    return {"w": model.weight, "b": model.bias, "bufs": [opt.state[p]["momentum_buffer"] for p in model.parameters()]}
""")

case("a global tensor's data replaced by a strided view", calls=5)("""
W = torch.arange(6.).reshape(2, 3)
def step(x):
    return x @ W.t() + W.sum(0)
def make_args(i):
    return (torch.ones(4, 3) * (i + 1),)
def between(i):
    if i == 1:
        W.data = torch.arange(6.).reshape(3, 2).t() * 2
""")

case("float guard tells -0.0 from 0.0")("""
Z = 0.0
def step(x):
    return x * Z
def make_args(i):
    return (torch.ones(2),)
def between(i):
    global Z
    Z = -Z
""")

case("global bool and string switches")("""
MODE = "relu"
def step(x):
    return F.relu(x) if MODE == "relu" else torch.tanh(x)
def make_args(i):
    return (torch.arange(-2., 2.),)
def between(i):
    global MODE
    MODE = "tanh" if MODE == "relu" else "relu"
""")

# ---------------------------------------------------------------- 2. identity and structure

case("a replaced submodule")("""
model = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
def step(x):
    return model(x)
def make_args(i):
    return (torch.ones(2, 3),)
def between(i):
    torch.manual_seed(i + 10)
    model[0] = nn.Linear(3, 3)
""")

case("a new Parameter assigned")("""
model = nn.Linear(3, 2)
def step(x):
    return model(x)
def make_args(i):
    return (torch.ones(2, 3),)
def between(i):
    model.weight = nn.Parameter(torch.full((2, 3), float(i)))
""")

case("load_state_dict with assign=True")("""
model = nn.Linear(3, 2)
def step(x):
    return model(x).sum()
def make_args(i):
    return (torch.ones(2, 3),)
def between(i):
    model.load_state_dict({"weight": torch.full((2, 3), i + 1.0), "bias": torch.zeros(2)},
                          assign=True)
""")

case("a replaced optimizer and a new param group")("""
model = nn.Linear(3, 1)
extra = nn.Parameter(torch.ones(1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def step(x):
    opt.zero_grad()
    loss = (model(x) * extra).sum()
    loss.backward()
    opt.step()
    return loss
def make_args(i):
    return (torch.ones(2, 3),)
def between(i):
    global opt
    if i == 0:
        opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    if i == 1:
        opt.add_param_group({"params": [extra], "lr": 0.2})
def state():
    return {"w": model.weight, "b": model.bias, "extra": extra}
""", )

case("requires_grad_(False) on a parameter")("""
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def step(x):
    opt.zero_grad()
    loss = model(x).sum()
    loss.backward()
    opt.step()
    return loss
def make_args(i):
    return (torch.ones(2, 3),)
def between(i):
    if i == 0:
        model.weight.requires_grad_(False)
def state():
    return {"w": model.weight, "b": model.bias}
""")

# ---------------------------------------------------------------- 3. hooks

case("forward hook added after compilation")("""
model = nn.Linear(3, 2)
def step(x):
    return model(x)
def make_args(i):
    return (torch.ones(2, 3),)
def between(i):
    if i == 0:
        model.register_forward_hook(lambda m, inp, out: out * 10)
""")

case("a hook storing activations in a list")("""
model = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
SEEN = []
model[0].register_forward_hook(lambda m, inp, out: SEEN.append(out.detach()))
def step(x):
    return model(x)
def make_args(i):
    return (torch.ones(2, 3) * i,)
def state():
    return {"seen": list(SEEN)}
""")

case("forward pre-hook removed after compilation")("""
model = nn.Linear(3, 2)
handle = model.register_forward_pre_hook(lambda m, inp: (inp[0] * 2,))
def step(x):
    return model(x)
def make_args(i):
    return (torch.ones(2, 3),)
def between(i):
    if i == 1:
        handle.remove()
""")

case("tensor hook on a parameter")("""
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def step(x):
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
def make_args(i):
    return (torch.ones(2, 3),)
def between(i):
    if i == 0:
        model.weight.register_hook(lambda g: g * 0)
def state():
    return {"w": model.weight, "b": model.bias}
""")

# ---------------------------------------------------------------- 4. argument structure

case("keyword names and dict keys")("""
def step(x, **kw):
    return x * kw.get("a", 1.0) + sum(kw.values())
def make_args(i):
    return (torch.ones(2),)
""")

case("a dict argument's keys")("""
def step(d):
    return sum(v * (k == "a") for k, v in d.items())
ARGS = [{"a": torch.ones(2), "b": torch.zeros(2)}, {"b": torch.ones(2), "a": torch.zeros(2)},
        {"a": torch.ones(2) * 3, "b": torch.zeros(2)}, {"c": torch.ones(2), "a": torch.zeros(2)}]
def make_args(i):
    return (ARGS[i],)
""")

case("list versus tuple")("""
def step(xs):
    return xs[0] * (2 if isinstance(xs, list) else 3)
def make_args(i):
    return ([torch.ones(2)],) if i % 2 == 0 else ((torch.ones(2),),)
""")

case("the same tensor passed twice, written through one")("""
A = torch.ones(3)
def step(x, y):
    x.add_(1)
    return y * 2
def make_args(i):
    return (A, A) if i % 2 else (A, torch.ones(3))
def state():
    return {"A": A}
""")

case("views of one buffer passed as two arguments")("""
B = torch.arange(6.)
def step(x, y):
    x.mul_(2)
    return y + 1
def make_args(i):
    return (B[:3], B[2:5]) if i % 2 else (B[:3], torch.arange(3.))
def state():
    return {"B": B}
""")

case("contiguity read by Python")("""
def step(x):
    return x * 2 if x.is_contiguous() else x * 3
def make_args(i):
    t = torch.arange(6.).reshape(2, 3)
    return (t if i % 2 == 0 else t.t().contiguous().t(),)
""")

# ---------------------------------------------------------------- 5. tensor values in Python

case("int(t) slices")("""
def step(x, n):
    return x[: int(n)] * 2
def make_args(i):
    return (torch.arange(6.), torch.tensor(i + 1))
""")

case("indexing with a 0-d tensor")("""
def step(x):
    return x[x.argmax()] * 2
XS = [torch.tensor([1., 5., 2.]), torch.tensor([9., 1., 2.]), torch.tensor([1., 2., 7.]),
      torch.tensor([3., 2., 1.])]
def make_args(i):
    return (XS[i],)
""")

case("is_nonzero steering control flow")("""
def step(x, t):
    return x * 2 if t.is_nonzero() else x * 3
def make_args(i):
    return (torch.ones(2), torch.tensor(float(i % 2)))
""")

case("bool(t) steering control flow")("""
def step(x, t):
    return x * 2 if t else x * 3
def make_args(i):
    return (torch.ones(2), torch.tensor(i % 2 == 0))
""")

case("a boolean 0-d mask")("""
def step(x, m):
    return x[m] * 2
def make_args(i):
    return (torch.ones(3), torch.tensor(bool(i % 2)))
""")

case("a size built from a tensor")("""
def step(x, n):
    return x.reshape(int(n), -1)
def make_args(i):
    return (torch.ones(4), torch.tensor([1, 2, 4, 2][i]))
""")

# ---------------------------------------------------------------- 7. randomness

case("manual_seed inside the function")("""
def step(x):
    torch.manual_seed(3)
    return x + torch.rand(3)
def make_args(i):
    return (torch.ones(3),)
""")

case("a seeded Generator made inside")("""
def step(x):
    g = torch.Generator().manual_seed(5)
    return x + torch.randn(3, generator=g)
def make_args(i):
    return (torch.ones(3),)
""")

case("Python's random and the clock inside")("""
import random, time
random.seed(0)
def step(x):
    return x * random.random() + (time.time() > 0)
def make_args(i):
    return (torch.ones(2),)
""")

case("Python's random right after an op, on the same line")("""
import random
random.seed(1)
def step(x):
    return (x * 2).sum() * random.random()
def make_args(i):
    return (torch.ones(2),)
""")

case("Python's random inside a library function the step calls")("""
import random
random.seed(2)
def step(x):
    return x * random.uniform(0.5, 1.5)     # random.py's code draws: not the step's own line
def make_args(i):
    return (torch.ones(2),)
""")

case("Python's random in a forward hook (user code dynograph calls back)")("""
import random
random.seed(3)
net = nn.Linear(2, 2)
net.register_forward_hook(lambda module, args, out: out * random.random())
def step(x):
    return net(x).sum()
def make_args(i):
    return (torch.ones(1, 2),)
""")

case("numpy's random inside")("""
import numpy as np
np.random.seed(0)
def step(x):
    return x * float(np.random.rand())
def make_args(i):
    return (torch.ones(2),)
""")

case("a numpy Generator the function holds")("""
import numpy as np
g = np.random.default_rng(0)
class Noisy:
    def __init__(self):
        self.rng = np.random.RandomState(1)
noisy = Noisy()
def step(x, gen):
    return x * float(g.random()) + float(gen.standard_normal()) + noisy.rng.rand()
gens = [np.random.default_rng(7)]
def make_args(i):
    return (torch.ones(2), gens[0])
""")

# ---------------------------------------------------------------- 8. Python side effects

case("a counter attribute on a module")("""
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.calls = 0
    def forward(self, x):
        self.calls += 1
        return self.fc(x) * self.calls
model = Net()
def step(x):
    return model(x)
def make_args(i):
    return (torch.ones(1, 2),)
def state():
    return {"calls": model.calls}
""")

case("storing a detached activation")("""
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)
        self.last = None
    def forward(self, x):
        y = self.fc(x)
        self.last = y.detach()
        return y
model = Net()
def step(x):
    return model(x)
def make_args(i):
    return (torch.ones(1, 2) * i,)
def state():
    return {"last": model.last}
""")

case("appending to a global list")("""
LOG = []
def step(x):
    y = x * 2
    LOG.append(y)
    return y
def make_args(i):
    return (torch.ones(2) * i,)
def state():
    return {"log": list(LOG)}
""")

case("writing into a dict argument")("""
OUT = {}
def step(x, out):
    out["y"] = x * 2
    return x
def make_args(i):
    return (torch.ones(2) * i, OUT)
def state():
    return dict(OUT)
""")

case("requires_grad_ on an argument")("""
X = torch.ones(2)
def step(x):
    x.requires_grad_()
    return (x * 2).sum()
def make_args(i):
    return (X,)
def state():
    return {"rg": X.requires_grad}
""")

# ---------------------------------------------------------------- 11. threads


def test_eager_work_in_another_thread_is_not_recorded():
    import threading
    stop = threading.Event()

    def other():
        while not stop.is_set():
            (dynograph.ones(3) * 5).sum()

    def f(x):
        for _ in range(300):        # long enough for the other thread to run meanwhile
            x = x * 1.001
        return x

    t = threading.Thread(target=other)
    t.start()
    try:
        cf = dynograph.compile(f)
        out = cf(dynograph.ones(2))
    finally:
        stop.set()
        t.join(30)
    ops = {n.op for n in cf.entries[0].captured.nodes}
    assert ops == {"mul"}, ops
    np.testing.assert_allclose(out.numpy(), [1.001 ** 300] * 2, rtol=1e-4)




def test_guards_name_their_source_and_line():
    src = textwrap.dedent("""
    class Config:
        scale = 2.0
    CFG = Config()
    def helper(x):
        return x * CFG.scale
    def step(x):
        return helper(x)
    """)
    ns = {"__name__": "case"}
    exec(compile(PRELUDE + src, "cfg_case.py", "exec"), ns)
    step = dynograph.compile(ns["step"])
    step(dynograph.ones(2))
    text = str(step.explain())
    assert "CFG.scale" in text and "cfg_case.py:" in text and "in helper" in text, text


# ---------------------------------------------------------------- 6. symbolic sizes

SIZES = [4, 3, 2, 5, 8, 1]


def _sized(body):
    return case(body[0], calls=len(SIZES))(f"""
def step(x):
{textwrap.indent(textwrap.dedent(body[1]), '    ')}
def make_args(i):
    return (torch.arange(float({SIZES}[i] * 3)).reshape({SIZES}[i], 3),)
""")


for _body in [
    ("branch on the batch size", "return x * 2 if x.shape[0] > 2 else x - 1"),
    ("branch on len()", "return x * 2 if len(x) >= 4 else x - 1"),
    ("slice by half the batch", "return x[: x.shape[0] // 2] * 2"),
    ("return the batch size", "return x.sum(), x.shape[0]"),
    ("divide by the batch size", "return x.sum() / x.size(0)"),
    ("non-linear use of the size", "return x * (x.shape[0] * x.shape[0])"),
    ("loop over the batch", "return sum(x[i] * i for i in range(x.shape[0]))"),
    ("size compared with a float", "return x * 2 if x.shape[0] > 2.5 else x - 1"),
    ("numel", "return x * x.numel()"),
    ("reshape with the batch size", "return x.reshape(x.size(0), 3, 1).sum(-1) * 2"),
    ("last index of the batch written", "t = x * 3\nt[-1] = 0.5\nreturn t"),
]:
    _sized(_body)


def test_a_batch_size_read_only_as_an_op_size_keeps_one_graph():
    step = dynograph.compile(lambda x: x.view(x.size(0), -1) * 2)
    for n in (4, 3, 6, 2):
        out = step(dynograph.ones(n, 2, 3))
        assert tuple(out.shape) == (n, 6)
    assert len(step.entries) == 1, step.explain()


def test_a_comparison_on_the_batch_size_is_rechecked_for_each_size():
    def f(x):
        return x * 2 if x.shape[0] > 3 else x - 1
    step = dynograph.compile(f)
    for n in (5, 6, 7, 2, 3, 8):
        np.testing.assert_array_equal(step(dynograph.ones(n)).numpy(), f(dynograph.ones(n)).numpy())
    assert "batch size s0: (s0 > 3) is True" in str(step.explain())


# ---------------------------------------------------------------- writes through views of arguments

case("a write through a view of an argument")("""
A = torch.zeros(2, 3)
def step(a):
    a[0].add_(0.5)
    return a * 1
def make_args(i):
    return (A,)
def state():
    return {"A": A}
""")

case("a view taken before the argument is written")("""
A = torch.arange(6.).reshape(2, 3)
def step(a):
    t = a.transpose(0, 1)
    a.neg_()
    return t * 1
def make_args(i):
    return (A,)
def state():
    return {"A": A}
""")

case("a write through a view of a batch sliced from a dataset")("""
DATA = torch.zeros(8, 3)
def step(a):
    a[:, 1].add_(1.0)
    return a.sum()
def make_args(i):
    return (DATA[2 * i:2 * i + 2],)
def state():
    return {"DATA": DATA}
""")


# ---------------------------------------------------------------- 9. outputs and aliasing

case("a returned input after an in-place op")("""
A = torch.zeros(3)
def step(x):
    x.add_(1)
    return x
def make_args(i):
    return (A,)
def between(i):
    OUT.append(None)
OUT = []
def state():
    return {"A": A}
""")


def test_outputs_alias_as_in_eager():
    a = dynograph.zeros(2, 3)

    def f(x):
        x.add_(1)
        y = x * 2
        return x, x[0], x.t(), y, y
    step = dynograph.compile(f)
    for _ in range(3):
        x_out, row, xt, y1, y2 = step(a)
        assert x_out is a and y1 is y2
        row.fill_(7.0)                  # a write through the returned view reaches the input
        assert float(a[0, 0]) == 7.0
        xt[1, 1] = -1.0
        assert float(a[1, 1]) == -1.0
    assert not step.eager_reason, step.explain()


def test_returning_a_parameter_returns_the_parameter():
    model = dynograph.nn.Linear(2, 2)
    step = dynograph.compile(lambda x: (model(x), model.weight))
    for _ in range(3):
        out, w = step(dynograph.ones(1, 2))
        assert w is model.weight


def test_returned_argument_that_requires_grad_is_the_argument():
    a = dynograph.ones(3, requires_grad=True)
    step = dynograph.compile(lambda x: (x, (x * 2).sum()))
    for _ in range(3):
        x, s = step(a)
        assert x is a and x.requires_grad


# ---------------------------------------------------------------- 10. autograd edges

case("backward into a non-leaf argument")("""
W = torch.ones(3, requires_grad=True)
def step(x):
    (x * x).sum().backward()
    return x.detach() * 1
def make_args(i):
    return (W * (i + 1),)
def state():
    return {"W.grad": W.grad}
""")

case("enable_grad inside a function called under no_grad")("""
W = torch.ones(3, requires_grad=True)
def step(x):
    with torch.enable_grad():
        y = (W * x).sum()
    return y, y.requires_grad
def make_args(i):
    return (torch.full((3,), float(i)),)
""")


def test_enable_grad_inside_under_no_grad_matches_eager():
    w = dynograph.ones(3, requires_grad=True)

    def f(x):
        with dynograph.enable_grad():
            y = (w * x).sum()
        return y
    step = dynograph.compile(f)
    for i in range(3):
        with dynograph.no_grad():
            out, ref = step(dynograph.ones(3) * i), f(dynograph.ones(3) * i)
        assert out.requires_grad == ref.requires_grad
        np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy())


def test_double_backward_through_a_compiled_module():
    torch_like = dynograph
    model = torch_like.nn.Sequential(torch_like.nn.Linear(3, 4), torch_like.nn.Tanh(),
                                     torch_like.nn.Linear(4, 1))
    compiled = torch_like.compile(model)
    for i in range(3):
        grads = []
        for m in (model, compiled):
            x = torch_like.full((2, 3), 0.5 * (i + 1), requires_grad=True)
            (g,) = torch_like.autograd.grad(m(x).sum(), x, create_graph=True)
            (gg,) = torch_like.autograd.grad((g * g).sum(), x)
            grads.append((g.detach().numpy().copy(), gg.numpy().copy()))
        np.testing.assert_allclose(grads[0][0], grads[1][0], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grads[0][1], grads[1][1], rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- 12. small semantics

case("x + 0 keeps the sign of zero")("""
def step(x):
    return x + 0, x - 0.0, 0 + x, x * 1
def make_args(i):
    return (torch.tensor([-0.0, 0.0, 1.5]),)
""")

case("an out-of-range class index raises as in eager")("""
def step(x, y):
    return torch.nn.functional.cross_entropy(x, y)
def make_args(i):
    return (torch.zeros(2, 3), torch.tensor([0, 1 if i < 2 else 5]))
""")

case("state changed before a raise")("""
A = torch.zeros(3)
def step(x, i):
    A.add_(1)
    return x[i]
def make_args(i):
    return (torch.arange(3.), torch.tensor([0, 1, 7, 2][i]))
def state():
    return {"A": A}
""")


# ---------------------------------------------------------------- more hooks and writes

case("a full backward hook that scales gradients")("""
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def step(x):
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
def make_args(i):
    return (torch.ones(2, 3),)
def between(i):
    if i == 0:
        model.register_full_backward_hook(lambda m, gin, gout: (gin[0] * 0.5,))
def state():
    return {"w": model.weight, "b": model.bias}
""")

case("a tensor hook on an intermediate registered inside")("""
W = torch.ones(3, requires_grad=True)
def step(x):
    y = W * x
    y.register_hook(lambda g: g * 3)
    y.sum().backward()
    return W.grad.clone()
def make_args(i):
    W.grad = None
    return (torch.full((3,), float(i + 1)),)
""")

case("a tensor hook that reads a global the caller changes")("""
SCALE = 2.0
W = torch.ones(3, requires_grad=True)
def step(x):
    y = W * x
    y.register_hook(lambda g: g * SCALE)
    y.sum().backward()
    return W.grad.clone()
def make_args(i):
    W.grad = None
    return (torch.full((3,), float(i + 1)),)
def between(i):
    global SCALE
    if i == 1:
        SCALE = 5.0
""")

case(".data assigned inside the function")("""
P = nn.Parameter(torch.ones(3))
def step(x):
    P.data = P.data * 0.5
    return (P * x).sum()
def make_args(i):
    return (torch.ones(3),)
def state():
    return {"P": P}
""")


case("a mean over the batch differentiated at a new batch size", calls=4)("""
SIZES = [5, 2, 1, 3]
def step(a0, a1):
    t = a1.mean(0).clamp(min=0.1)
    a0.add_(1)
    t.sum().backward()
def make_args(i):
    torch.manual_seed(i)
    return (torch.randint(-3, 4, (SIZES[i], 1)), torch.randn(SIZES[i], 2, 1, requires_grad=True))
""")


case("a write at the last index of the batch, differentiated", calls=4)("""
SIZES = [4, 3, 2, 5]
def step(a1):
    t7 = a1 * 1
    t8 = torch.where(a1 > 0, t7, t7)
    t8[..., -1] = 0.5
    torch.maximum(t7, t8).sum().backward()
    return t7
def make_args(i):
    torch.manual_seed(i)
    return (torch.randn(SIZES[i], dtype=torch.float64, requires_grad=True),)
""")


# found by tools/fuzz_compile.py (seed 20124): two traces bind a constant differently
case("a training step whose traces bind a constant differently", calls=4)('''
BATCH = [3, 2, 4, 2]

class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.factor = 1.0

    def forward(self, x):
        return x * self.factor


model = nn.Sequential(nn.Linear(4, 2), nn.Tanh(), nn.Dropout(0.0), nn.Linear(2, 1), Scale())
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def make_args(call):
    torch.manual_seed(call)
    a0 = torch.randn(BATCH[call], 4, dtype=torch.float32)
    a1 = torch.randn(1, dtype=torch.float32)
    a2 = torch.randn(BATCH[call], dtype=torch.float64)
    return a0, a1, a2,


def step(a0, a1, a2):
    opt.zero_grad()
    out = model(a0)
    out[0].add_(0.5)
    loss = F.mse_loss(out, a0[:, :1])
    loss.backward()
    opt.step()
    return None


def between(call):
    model[2].p = [1.0, 0.0, 1.0][call - 1]  # p 0 or 1: no randomness
''')


case("a broadcast copy into an argument, then a view of it")("""
def step(a0, a1):
    a1.copy_(a0.unsqueeze(1))
    return a1.reshape(-1)
def make_args(i):
    torch.manual_seed(i)
    return (torch.randint(-3, 4, (2,)), torch.randint(-3, 4, (2, 5)))
""")


def test_a_parameter_that_is_a_view_replays_without_retracing():
    base = dynograph.randn(4, 3)
    w = dynograph.nn.Parameter(base[1:3])       # a window of a larger buffer
    opt = dynograph.optim.SGD([w], lr=0.1)

    @dynograph.compile
    def step(x):
        opt.zero_grad()
        (w * x).sum().backward()
        opt.step()
    for _ in range(6):
        step(dynograph.ones(2, 3))
    # the first call also traces the state it leaves (look-ahead): every later call replays
    assert step.misses == 1 and step.hits == 5 and step.eager_reason is None, step.explain()


# ---------------------------------------------------------------- every case above, on both backends
# (last in the file: the list of cases must be complete when the test is parametrized)

@pytest.mark.parametrize("backend", ["interpreter", "llvm"])
@pytest.mark.parametrize("name", list(CASES))
def test_compiled_equals_eager(name, backend):
    agree(name, backend)
