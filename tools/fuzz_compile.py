"""A differential fuzzer for ``dynograph.compile``: random programs, run eagerly and compiled.

    python -m tools.fuzz_compile --n 20000 --seed S [--backend llvm|interpreter]
                                 [--categories ops,train,...] [--calls 4]
    python -m tools.fuzz_compile --replay program.py [--backend llvm]

Each program is Python source text (printed whole when it fails, so it replays as it is) that
defines ``make_args(call)``, the function ``step`` under test and ``between(call)``, which
changes the world between calls.  The program runs twice from a fresh namespace each time,
once eagerly and once with ``step`` compiled, over several calls.  After every call the two runs
must agree on the outputs, every argument (written in place or not) and its ``.grad``, and
every tensor, module, optimizer and Python value the program keeps in its globals.  A compiled
function that fell back to eager counts as correct only if it agrees too (it runs eagerly).

Program ``i`` of a run uses seed ``S + i``: ``--n 1 --seed S+i`` generates it again.
"""
import argparse
import collections
import os
import random
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field

# every graph the compiler optimizes is verified after each pass (SSA, types, order): a pass
# that breaks the IR is found here even where the results happen to agree
os.environ.setdefault("DYNOGRAPH_VERIFY", "1")

# what each category adds to a program; every category is on by default
CATEGORIES = {
    "ops": "elementwise, broadcasting, reductions, matmul, movement, softmax, where, clamp",
    "inplace": "in-place ops on intermediates and on arguments",
    "views": "views of intermediates written in place (slices, transposes, setitem)",
    "grad": "arguments requiring grad and backward() inside the function",
    "train": "a Linear/MLP, a loss, backward() and an SGD or Adam step",
    "shapes": "the batch size changes between calls (batch 1 included)",
    "control": "Python control flow on static sizes and on global loop counts",
    "globals": "global Python numbers read by the function change between calls",
    "params": "parameters scaled in place under no_grad between calls, train/eval switches",
    "arg_views": "views of arguments written in place, or read after the argument is",
    "return_args": "arguments that require grad returned as they are",
    "config": "attributes of a config object read by the function change between calls",
    "module_attrs": "plain attributes of modules (a scale, Dropout.p) change between calls",
    "requires_grad": "parameters switch requires_grad between calls",
    "size_control": "Python control flow on the batch size while it changes",
    "batch_indexing": "writes at negative indices along the batch dimension while it changes",
    "side_effects": "the function appends to a list and stores attributes",
    "hooks": "forward hooks and tensor hooks added between calls",
    "random": "dropout and random tensors drawn inside the function",
}
DEFAULT = tuple(CATEGORIES)

FLOAT = ("float32", "float64")
# fused kernels sum in another order; float64 results may come from float32 ones
RTOL, ATOL = 1e-4, 1e-5
COMPILER_DIRS = ("/compiler/", "/runtime/")


# ---------------------------------------------------------------- programs as source text

@dataclass
class Program:
    """A program in parts; ``body`` and ``between`` are lists of statements that the
    minimizer may drop one by one."""
    seed: int
    categories: tuple
    setup: list = field(default_factory=list)      # module-level statements
    args: list = field(default_factory=list)       # (name, shape text, dtype, requires_grad)
    body: list = field(default_factory=list)       # statements of step()
    returns: list = field(default_factory=list)    # names step() returns
    between: list = field(default_factory=list)    # statements run before calls 1, 2, ...
    globals: list = field(default_factory=list)    # names between() assigns

    def source(self):
        lines = [f"# fuzz_compile seed {self.seed}, categories {','.join(self.categories)}",
                 "import dynograph as torch", "import dynograph.nn as nn",
                 "import dynograph.nn.functional as F", ""]
        lines += self.setup + ["", "", "def make_args(call):", "    torch.manual_seed(call)"]
        for name, shape, dtype, grad in self.args:
            lines.append(f"    {name} = {_factory(shape, dtype, grad)}")
        lines.append(f"    return {', '.join(a[0] for a in self.args)},")
        names = ", ".join(a[0] for a in self.args)
        lines += ["", "", f"def step({names}):"] + _indent(self.body or ["pass"])
        lines += [f"    return {', '.join(self.returns)}," if self.returns else "    return None",
                  "", "", "def between(call):"]
        if self.globals:
            lines.append(f"    global {', '.join(self.globals)}")
        lines += _indent(self.between or ["pass"])
        return "\n".join(lines) + "\n"


def _indent(statements):
    return ["    " + line for s in statements for line in s.split("\n")]


def _factory(shape, dtype, grad):
    if dtype == "int64":
        return f"torch.randint(-3, 4, ({shape},))"
    extra = ", requires_grad=True" if grad else ""
    return f"torch.randn({shape}, dtype=torch.{dtype}{extra})"


# ---------------------------------------------------------------- the generator

@dataclass
class Var:
    """A tensor variable of the program: its name, shape (ints, or 'B' for the batch size,
    or text for sizes made from it) and dtype; ``grad``: it requires grad; ``leaf``: a leaf
    that requires grad or a view of one (no in-place writes); ``base``: the argument it is
    or it views, if any."""
    name: str
    shape: tuple
    dtype: str
    grad: bool = False
    leaf: bool = False
    base: str = None


def _shape_text(shape):
    return ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")


def _broadcast(a, b):
    """The broadcast shape of ``a`` and ``b``, or None when they do not broadcast."""
    out = []
    for x, y in zip(((1,) * len(b) + a)[-max(len(a), len(b)):], ((1,) * len(a) + b)[-max(len(a), len(b)):]):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(out)


def _promote(a, b):
    if a == b:
        return a
    if "float64" in (a, b):
        return "float64"
    if "float32" in (a, b):
        return "float32"
    return "int64"


class Generator:
    def __init__(self, seed, categories):
        self.rng = random.Random(seed)
        # each program draws its own mix of the categories asked for (ops are the base)
        self.cats = {c for c in categories if c == "ops" or self.rng.random() < 0.5}
        self.p = Program(seed, tuple(c for c in CATEGORIES if c in self.cats))
        self.pool = []
        self.count = 0
        self.batches = self._batches()

    def on(self, category):
        return category in self.cats

    def new(self, shape, dtype, grad=False, leaf=False, base=None):
        self.count += 1
        v = Var(f"t{self.count}", tuple(shape), dtype, grad, leaf, base)
        self.pool.append(v)
        return v

    def emit(self, code_for_name, shape, dtype, grad=False, leaf=False, base=None):
        """Add ``t<k> = code`` to the body and the new variable to the pool."""
        v = self.new(shape, dtype, grad, leaf, base)
        self.p.body.append(f"{v.name} = {code_for_name}")
        return v

    def pick(self, kinds=None, pred=None):
        """A variable from the pool, recent ones more often; None when none fits."""
        fits = [v for v in self.pool if (kinds is None or v.dtype in kinds) and (pred is None or pred(v))]
        if not fits:
            return None
        return fits[min(len(fits) - 1, int(len(fits) * self.rng.random() ** 0.5))]

    # ------------------------------------------------------------ the program

    def generate(self):
        self.p.setup.append(f"BATCH = {self.batches}")
        self._arguments()
        if self.on("train"):
            self._training()
        else:
            self._ops(self.rng.randint(2, 8))
            if self.on("grad") and any(v.grad for v in self.pool):
                self._backward()
        self._returns()
        return self.p

    def _batches(self):
        if self.on("shapes") or self.on("size_control"):
            return [self.rng.choice((1, 2, 3, 4, 5)) for _ in range(4)]
        return [self.rng.choice((1, 2, 3, 4))] * 4

    def _dim(self):
        return self.rng.choice((1, 1, 2, 3, 4, 5))

    def _arguments(self):
        self.p.setup.append("")
        for i in range(self.rng.randint(1, 3)):
            shape = ("B",) + tuple(self._dim() for _ in range(self.rng.randint(0, 2)))
            if self.rng.random() < 0.2:
                shape = shape[1:] or (self._dim(),)
            dtype = self.rng.choice(("float32", "float32", "float64", "int64"))
            grad = self.on("grad") and dtype in FLOAT and self.rng.random() < 0.5
            v = self.new(shape, dtype, grad, leaf=grad, base=f"a{i}")
            v.name = f"a{i}"
            shape_text = _shape_text(tuple("BATCH[call]" if d == "B" else d for d in shape))
            self.p.args.append((v.name, shape_text.rstrip(","), dtype, grad))

    def _ops(self, n):
        makers = [self._unary, self._scalar, self._binary, self._reduce, self._movement]
        makers += [self._softmax, self._matmul, self._where, self._clamp, self._cast]
        if self.on("inplace"):
            makers += [self._inplace_intermediate, self._inplace_argument]
        if self.on("views") or self.on("arg_views"):
            makers += [self._view_write]
        if self.on("control"):
            makers += [self._branch_on_static_size, self._global_loop]
        if self.on("size_control"):
            makers += [self._branch_on_batch]
        if self.on("globals"):
            makers += [self._global_scale]
        if self.on("config"):
            makers += [self._config_read]
        if self.on("side_effects"):
            makers += [self._side_effect]
        if self.on("random"):
            makers += [self._random]
        for _ in range(n):
            for _ in range(5):          # a maker that finds no operand gives way to another
                if self.rng.choice(makers)() is not None:
                    break

    # ------------------------------------------------------------ op makers

    def _unary(self):
        x = self.pick(FLOAT)
        if x is None:
            return None
        fn = self.rng.choice(("exp()", "tanh()", "sigmoid()", "relu()", "abs()", "neg()", "sin()",
                              "cos()", "abs().sqrt()", "abs().add(1).log()", "square()",
                              "abs().add(0.5).rsqrt()", "floor()"))
        return self.emit(f"{x.name}.{fn}", x.shape, x.dtype, x.grad)

    def _scalar(self):
        x = self.pick()
        if x is None or x.dtype == "bool":
            return None
        k = self.rng.choice((0.5, 2, -1.5, 3))
        form = self.rng.choice(("{x} * {k}", "{x} + {k}", "{k} - {x}", "{x} / {k}", "{x} ** 2"))
        exact = "**" in form or (isinstance(k, int) and "/" not in form)     # int stays int
        dtype = x.dtype if exact else _promote(x.dtype, "float32")
        return self.emit(form.format(x=x.name, k=k), x.shape, dtype, x.grad)

    def _binary(self):
        x = self.pick()
        y = self.pick(pred=lambda v: _broadcast(x.shape, v.shape) is not None and v is not x) \
            if x is not None else None
        if y is None or "bool" in (x.dtype, y.dtype):
            return None
        form = self.rng.choice(("{x} + {y}", "{x} - {y}", "{x} * {y}", "torch.maximum({x}, {y})",
                                "torch.minimum({x}, {y})", "{x} / ({y}.abs() + 1)"))
        dtype = _promote(x.dtype, y.dtype)
        if "/" in form:
            dtype = _promote(dtype, "float32")
        return self.emit(form.format(x=x.name, y=y.name), _broadcast(x.shape, y.shape), dtype,
                         x.grad or y.grad)

    def _reduce(self):
        x = self.pick(pred=lambda v: v.dtype != "bool" and len(v.shape) >= 1)
        if x is None:
            return None
        kinds = ("sum", "amax", "amin") + (("mean", "logsumexp") if x.dtype in FLOAT else ())
        kind = self.rng.choice(kinds)
        if kind != "logsumexp" and self.rng.random() < 0.25:
            return self.emit(f"{x.name}.{kind}()", (), x.dtype, x.grad)
        d = self.rng.randrange(len(x.shape))
        keep = self.rng.random() < 0.5
        shape = tuple(1 if i == d else s for i, s in enumerate(x.shape)) if keep else \
            x.shape[:d] + x.shape[d + 1:]
        dim = self.rng.choice((d, d - len(x.shape)))
        return self.emit(f"{x.name}.{kind}({dim}, keepdim={keep})", shape, x.dtype, x.grad)

    def _softmax(self):
        x = self.pick(FLOAT, lambda v: len(v.shape) >= 1)
        if x is None:
            return None
        d = self.rng.randrange(len(x.shape))
        fn = self.rng.choice(("F.softmax({x}, dim={d})", "{x}.log_softmax({d})"))
        return self.emit(fn.format(x=x.name, d=d), x.shape, x.dtype, x.grad)

    def _matmul(self):
        x = self.pick(FLOAT, lambda v: len(v.shape) == 2)
        if x is None:
            return None
        m, k = x.shape
        y = self.pick((x.dtype,), lambda v: len(v.shape) == 2 and v.shape[0] == k and v is not x)
        if y is not None:
            return self.emit(f"{x.name} @ {y.name}", (m, y.shape[1]), x.dtype, x.grad or y.grad)
        if self.rng.random() < 0.5:
            return self.emit(f"{x.name} @ {x.name}.t()", (m, m), x.dtype, x.grad)
        return self.emit(f"torch.matmul({x.name}.t(), {x.name})", (k, k), x.dtype, x.grad)

    def _movement(self):
        x = self.pick(pred=lambda v: len(v.shape) >= 1)
        if x is None:
            return None
        s = x.shape
        options = [(f"{x.name}.reshape(-1)", (_product(s),)),
                   (f"{x.name}.unsqueeze({len(s)})", s + (1,)),
                   (f"{x.name}.unsqueeze(0).contiguous()", (1,) + s)]
        if len(s) >= 2:
            options += [(f"{x.name}.transpose(0, 1)", (s[1], s[0]) + s[2:]),
                        (f"{x.name}.flatten(1)", (s[0], _product(s[1:]))),
                        (f"{x.name}.permute({', '.join(map(str, range(len(s))[::-1]))})", s[::-1]),
                        (f"{x.name}[:, ::2]", (s[0], _halve(s[1])) + s[2:])]
        if isinstance(s[0], int) and s[0] > 1:
            options.append((f"{x.name}[1:]", (s[0] - 1,) + s[1:]))
        if 1 in s:
            d = s.index(1)
            sizes = ", ".join("3" if i == d else "-1" for i in range(len(s)))
            options += [(f"{x.name}.squeeze({d})", s[:d] + s[d + 1:]),
                        (f"{x.name}.expand({sizes})", s[:d] + (3,) + s[d + 1:])]
        options.append((f"{x.name}[..., 0]", s[:-1]))
        code, shape = self.rng.choice(options)
        return self.emit(code, shape, x.dtype, x.grad, leaf=x.leaf, base=x.base)

    def _where(self):
        c, x = self.pick(), self.pick()
        if c is None or x is None or "bool" in (c.dtype, x.dtype):
            return None
        y = self.pick((x.dtype,), lambda v: _broadcast(x.shape, v.shape) is not None)
        shape = _broadcast(c.shape, x.shape)
        shape = shape and _broadcast(shape, y.shape)
        if shape is None:
            return None
        return self.emit(f"torch.where({c.name} > 0, {x.name}, {y.name})", shape, x.dtype,
                         x.grad or y.grad)

    def _clamp(self):
        x = self.pick(FLOAT)
        if x is None:
            return None
        form = self.rng.choice(("{x}.clamp(-0.5, 0.5)", "{x}.clamp(min=0.1)", "{x}.clamp(max=0.0)",
                                "torch.clamp({x}, -1.0, 2.0)"))
        return self.emit(form.format(x=x.name), x.shape, x.dtype, x.grad)

    def _cast(self):
        x = self.pick()
        if x is None:
            return None
        if x.dtype == "int64" or self.rng.random() < 0.3:
            return self.emit(f"({x.name} > 0).float()", x.shape, "float32")
        to = "float64" if x.dtype == "float32" else "float32"
        return self.emit(f"{x.name}.to(torch.{to})", x.shape, to, x.grad)

    def _inplace_intermediate(self):
        """``t = x.clone()`` or an intermediate, then an in-place op on it."""
        x = self.pick(FLOAT, self._view_writable)
        if x is None:
            x = self.pick(FLOAT)
            if x is None:
                return None
            x = self.emit(f"{x.name}.clone()", x.shape, x.dtype, x.grad)
        y = self.pick(pred=lambda v: _broadcast(x.shape, v.shape) == x.shape and v.dtype != "bool")
        ops = ["mul_(0.5)", "add_(1.0)", "relu_()", "clamp_(min=-0.2)", "neg_()", "sigmoid_()"]
        if y is not None and _promote(x.dtype, y.dtype) == x.dtype:
            ops += [f"add_({y.name})", f"mul_({y.name})", f"sub_({y.name}, alpha=0.5)"]
        self.p.body.append(f"{x.name}.{self.rng.choice(ops)}")
        return x

    def _inplace_argument(self):
        x = self.pick(pred=lambda v: v.base == v.name and not v.leaf and (
            self.on("arg_views") or not any(w.base == v.name and w is not v for w in self.pool)))
        if x is None:
            return None
        op = self.rng.choice(("add_(1)", "mul_(2)", "neg_()", "copy_({y})"))
        if "{y}" in op:
            y = self.pick(pred=lambda v: _broadcast(x.shape, v.shape) == x.shape and v is not x
                          and _promote(x.dtype, v.dtype) == x.dtype)
            if y is None:
                return None
            op = op.format(y=y.name)
        self.p.body.append(f"{x.name}.{op}")
        return x

    def _view_writable(self, v):
        """Whether an in-place write into ``v`` is allowed: not into a leaf that requires grad,
        and into a view of an argument only under 'arg_views'."""
        return not v.leaf and v.dtype != "bool" and (v.base is None or self.on("arg_views"))

    def _view_write(self):
        """A write through a view: it must reach the base (an argument or an intermediate)."""
        x = self.pick(pred=lambda v: self._view_writable(v) and len(v.shape) >= 1)
        if x is None:
            return None
        k = 2 if x.dtype == "int64" else 0.5
        forms = [f"{x.name}[0].add_({k})", f"{x.name}[..., :1].mul_({k})",
                 f"{x.name}.view(-1)[::2].zero_()" if len(x.shape) == 1 else f"{x.name}[0] = {k}"]
        if isinstance(x.shape[-1], int) or self.on("batch_indexing"):
            forms.append(f"{x.name}[..., -1] = {k}")
        if len(x.shape) >= 2:
            forms.append(f"{x.name}.t()[0].sub_({k})")
        if len(x.shape) >= 2 and (isinstance(x.shape[1], int) or self.on("batch_indexing")):
            forms.append(f"{x.name}[:, 0] = {x.name}[:, -1]")
        self.p.body.append(self.rng.choice(forms))
        return x

    def _branch_on_static_size(self):
        x = self.pick(FLOAT, lambda v: any(isinstance(d, int) for d in v.shape))
        if x is None:
            return None
        d = next(i for i, s in enumerate(x.shape) if isinstance(s, int))
        v = self.new(x.shape, x.dtype, x.grad)
        k = self.rng.choice((1, 2, 3))
        self.p.body.append(f"if {x.name}.shape[{d}] > {k}:\n    {v.name} = {x.name} * 2\n"
                           f"else:\n    {v.name} = {x.name}.exp()")
        return v

    def _branch_on_batch(self):
        x = self.pick(FLOAT, lambda v: v.shape[:1] == ("B",))
        if x is None:
            return None
        v = self.new(x.shape, x.dtype, x.grad)
        k = self.rng.choice((1, 2, 3))
        self.p.body.append(f"if {x.name}.shape[0] > {k}:\n    {v.name} = {x.name} * 2\n"
                           f"else:\n    {v.name} = {x.name} - 1")
        return v

    def _global_loop(self):
        x = self.pick(FLOAT)
        if x is None:
            return None
        self._global("LOOPS", self.rng.randint(0, 2), [1, 3, 0])
        v = self.emit(f"{x.name} * 1", x.shape, x.dtype, x.grad)
        self.p.body.append(f"for _ in range(LOOPS):\n    {v.name} = {v.name} * 0.5 + 1")
        return v

    def _global_scale(self):
        x = self.pick(FLOAT)
        if x is None:
            return None
        self._global("SCALE", 0.5, [2.0, -1.0, 0.25])
        return self.emit(f"{x.name} * SCALE", x.shape, x.dtype, x.grad)

    def _global(self, name, first, later):
        """A global the function reads; with 'globals', between() changes it."""
        if name in self.p.globals or any(s.startswith(f"{name} = ") for s in self.p.setup):
            return
        self.p.setup.append(f"{name} = {first}")
        if self.on("globals"):
            self.p.globals.append(name)
            self.p.between.append(f"{name} = {later}[call - 1]")

    def _config_read(self):
        x = self.pick(FLOAT)
        if x is None:
            return None
        if not any(s.startswith("cfg = ") for s in self.p.setup):
            self.p.setup += ["class Config:", "    scale = 1.0", "    flip = False", "",
                             "", "cfg = Config()"]
            self.p.between += ["cfg.scale = [2.0, 0.5, 3.0][call - 1]", "cfg.flip = call % 2 == 1"]
        v = self.emit(f"{x.name} * cfg.scale", x.shape, x.dtype, x.grad)
        self.p.body.append(f"if cfg.flip:\n    {v.name} = -{v.name}")
        return v

    def _side_effect(self):
        x = self.pick(FLOAT)
        if x is None:
            return None
        if "LOG = []" not in self.p.setup:
            self.p.setup += ["LOG = []", "class State:", "    calls = 0", "", "", "state = State()"]
        self.p.body.append(self.rng.choice((f"LOG.append({x.name}.shape[0])", "state.calls += 1",
                                            f"state.last = {x.name}", f"LOG.append({x.name} * 2)")))
        return x

    def _random(self):
        x = self.pick(FLOAT)
        if x is None:
            return None
        form = self.rng.choice(("F.dropout({x}, p=0.5)", "{x} + torch.rand_like({x})",
                                "{x} * torch.randn({x}.shape)"))
        return self.emit(form.format(x=x.name), x.shape, x.dtype, x.grad)

    def _backward(self):
        x = self.pick(FLOAT, lambda v: v.grad)
        self.p.body.append(f"({x.name}.sum() if {x.name}.dim() else {x.name}).backward()")

    # ------------------------------------------------------------ training

    def _training(self):
        x = self.pool[0]
        if x.dtype != "float32" or len(x.shape) != 2:
            self.p.args[0] = ("a0", "BATCH[call], 4", "float32", False)
            x.shape, x.dtype, x.grad, x.leaf = ("B", 4), "float32", False, False
        width, out = x.shape[1], self.rng.choice((1, 3))
        self._model(width, out)
        opt = self.rng.choice((f"torch.optim.SGD(model.parameters(), lr=0.1, momentum="
                               f"{self.rng.choice((0.0, 0.9))})",
                               # eps: Adam turns a gradient that is rounding noise into +-lr
                               "torch.optim.Adam(model.parameters(), lr=0.01, eps=1e-3)"))
        self.p.setup.append(f"opt = {opt}")
        self.p.body += ["opt.zero_grad()", "out = model(a0)"]
        h = self.new(("B", out), "float32", grad=True)
        h.name = "out"
        if self.on("ops"):
            self._ops(self.rng.randint(0, 3))
        y = self.pick(FLOAT, lambda v: v.grad) or h
        loss = f"{y.name}.square().mean()" if y.shape != ("B", out) else self.rng.choice(
            (f"F.mse_loss({y.name}, {x.name}[:, :{out}])", f"{y.name}.square().mean()"))
        self.p.body += [f"loss = {loss}", "loss.backward()", "opt.step()"]
        self.loss = self.new((), "float32")
        self.loss.name = "loss"
        self._world_changes()

    def _model(self, width, out):
        hidden = self.rng.choice((2, 5))
        layers = [f"nn.Linear({width}, {hidden})", self.rng.choice(("nn.ReLU()", "nn.Tanh()"))]
        if self.on("module_attrs") or self.on("random"):
            layers.append(f"nn.Dropout({0.5 if self.on('random') else 0.0})")
        layers.append(f"nn.Linear({hidden}, {out})")
        if self.on("module_attrs"):
            self.p.setup += ["class Scale(nn.Module):", "    def __init__(self):",
                             "        super().__init__()", "        self.factor = 1.0", "",
                             "    def forward(self, x):", "        return x * self.factor", "", ""]
            layers.append("Scale()")
            self.p.between += ["model[-1].factor = [0.5, 2.0, 1.5][call - 1]",
                               "model[2].p = [1.0, 0.0, 1.0][call - 1]  # p 0 or 1: no randomness"]
        self.p.setup.append(f"model = nn.Sequential({', '.join(layers)})")

    def _world_changes(self):
        if self.on("params"):
            self.p.between.append(self.rng.choice((
                "with torch.no_grad():\n    model[0].weight.mul_(0.9)",
                "with torch.no_grad():\n    model[0].bias.add_(call)",
                "model.train(call % 2 == 0)")))
        if self.on("requires_grad"):
            self.p.between.append("model[0].bias.requires_grad_(call % 2 == 0)")
        if self.on("hooks"):
            self.p.setup += ["HOOKS = []", "", "", "def double(module, inputs, output):",
                             "    return output * 2"]
            self.p.between.append("if call == 2:\n    HOOKS.append(model[0].register_forward_hook(double))")

    def _returns(self):
        names = [v.name for v in self.pool[-self.rng.randint(1, 3):]
                 if not (v.leaf and v.base == v.name) or self.on("return_args")] or [self.pool[-1].name]
        if hasattr(self, "loss"):
            names = ["loss"] + [n for n in names if n != "loss"][:1]
        self.p.returns = list(dict.fromkeys(names))
        if self.rng.random() < 0.2:
            self.p.returns.append("3")                     # a Python constant among the outputs


def _product(shape):
    """A size of the flattened shape: an int, or text when the batch size is in it."""
    n, sym = 1, []
    for d in shape:
        if isinstance(d, int):
            n *= d
        else:
            sym.append(d)
    return n if not sym else "*".join(sym + ([str(n)] if n != 1 else []))


def _halve(d):
    return (d + 1) // 2 if isinstance(d, int) else f"ceil({d}/2)"


def generate(seed, categories=DEFAULT):
    return Generator(seed, categories).generate()


# ---------------------------------------------------------------- running a program twice

@dataclass
class Call:
    """What one call left behind: a snapshot of everything visible, or the error it raised."""
    values: dict
    error: BaseException = None
    fell_back: bool = False


def run(source, backend=None, calls=4):
    """Run ``source`` over ``calls`` calls: eagerly when ``backend`` is None, else with ``step``
    compiled on that backend.  Returns one Call per call."""
    import dynograph
    namespace = {"__name__": "fuzz_program"}
    dynograph.manual_seed(0)                    # the same initial weights in both runs
    exec(compile(source, "<fuzz program>", "exec"), namespace)
    fn = namespace["step"]
    if backend is not None:
        fn = dynograph.compile(fn, backend=backend)
    out = []
    for call in range(calls):
        if call:
            namespace["between"](call)
        args = namespace["make_args"](call)
        dynograph.manual_seed(100 + call)       # randomness inside the call draws the same
        result, error = None, None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                result = fn(*args)
            except Exception as e:              # compared with what the other run raised
                error = e
        values = snapshot({"out": result, "args": args, "globals": _program_globals(namespace)})
        out.append(Call(values, error, getattr(fn, "eager_reason", None) is not None))
    return out


def _differentiable(t):
    """Whether a backward() through ``t`` would work: a graph that a backward() inside the
    function already spent counts as none (the compiled function returns plain values)."""
    from dynograph.compiler.aot import _graph_freed
    return t.requires_grad and (t.grad_fn is None or not _graph_freed(t.grad_fn))


def _program_globals(namespace):
    import types
    skip = (types.ModuleType, types.FunctionType, type)
    return {k: v for k, v in namespace.items() if not k.startswith("__") and not isinstance(v, skip)}


def snapshot(value, path="", out=None):
    """Flatten everything observable in ``value`` into {path: plain value or numpy copy}."""
    from dynograph import Tensor
    from dynograph.nn import Module
    from dynograph.optim import Optimizer
    out = {} if out is None else out
    if isinstance(value, Tensor):
        out[path] = value._data.copy()
        out[f"{path}.requires_grad"] = _differentiable(value)
        out[f"{path}.grad"] = None if value._grad is None else value._grad._data.copy()
    elif isinstance(value, Module):
        for name, t in list(value.named_parameters()) + list(value.named_buffers()):
            snapshot(t, f"{path}.{name}", out)
        for name, m in value.named_modules():
            for k, v in vars(m).items():
                if not k.startswith("_") and isinstance(v, (bool, int, float, str, type(None))):
                    out[f"{path}.{name}.{k}" if name else f"{path}.{k}"] = v
    elif isinstance(value, Optimizer):
        for i, group in enumerate(value.param_groups):
            snapshot({k: v for k, v in group.items() if k != "params"}, f"{path}.group{i}", out)
        for i, state in enumerate(value.state.values()):
            snapshot(dict(state), f"{path}.state{i}", out)
    elif isinstance(value, dict):
        for k, v in value.items():
            snapshot(v, f"{path}.{k}" if path else str(k), out)
    elif isinstance(value, (list, tuple)):
        out[f"{path}.len"] = len(value)
        for i, v in enumerate(value):
            snapshot(v, f"{path}[{i}]", out)
    elif hasattr(value, "__dict__") and type(value).__module__ == "fuzz_program":
        snapshot(vars(value), path, out)
    elif value is None or isinstance(value, (bool, int, float, str)):
        out[path] = value
    else:
        out[path] = type(value).__name__
    return out


# ---------------------------------------------------------------- comparing the two runs

FAMILIES = ("outputs", "state", "grads", "exception mismatch", "crash in the compiler")


@dataclass
class Failure:
    family: str
    call: int
    detail: str
    errors: tuple = ()          # (eager, compiled) exception types: the same bug keeps them


def compare_runs(eager, compiled):
    """The first disagreement between the eager and the compiled run, or None."""
    for call, (e, c) in enumerate(zip(eager, compiled)):
        failure = _compare_errors(e.error, c.error) or _compare_values(e.values, c.values)
        if failure is not None:
            family, detail = failure
            return Failure(family, call, detail, (type(e.error), type(c.error)))
    return None


def _compare_errors(e, c):
    if e is None and c is None:
        return None
    if e is None and _raised_in_compiler(c):
        return "crash in the compiler", _describe(c)
    if e is None or c is None or type(e) is not type(c):
        return "exception mismatch", f"eager: {_describe(e)}; compiled: {_describe(c)}"
    return None


def _raised_in_compiler(error):
    frames = traceback.extract_tb(error.__traceback__)
    return any(any(d in f.filename for d in COMPILER_DIRS) for f in frames)


def _describe(error):
    if error is None:
        return "no error"
    where = traceback.extract_tb(error.__traceback__)[-1]
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''} " \
           f"({where.filename}:{where.lineno})"


def _compare_values(eager, compiled):
    for key in list(eager) + [k for k in compiled if k not in eager]:
        if key not in eager or key not in compiled:
            return _family(key), f"{key}: only {'eager' if key in eager else 'compiled'} has it"
        problem = _differ(eager[key], compiled[key])
        if problem:
            return _family(key), f"{key}: {problem}"
    return None


def _family(key):
    if key.startswith("out"):
        return "outputs"
    return "grads" if ".grad" in key else "state"


def _kind(x):
    from dynograph.compiler.symbolic import SizeInt
    return int if type(x) is SizeInt else type(x)


def _differ(e, c):
    """Why values ``e`` (eager) and ``c`` (compiled) differ, or None."""
    import numpy as np
    if not isinstance(e, np.ndarray) or not isinstance(c, np.ndarray):
        # during the traced call the code sees sizes as SizeInt, an int subclass that records
        # its uses (docs/compile.md): the one difference of type allowed
        same = _kind(e) is _kind(c) and (e == c or (e != e and c != c))
        return None if same else f"eager {e!r}, compiled {c!r}"
    if e.dtype != c.dtype or e.shape != c.shape:
        return f"eager {e.dtype}{list(e.shape)}, compiled {c.dtype}{list(c.shape)}"
    if e.dtype.kind != "f":
        return None if np.array_equal(e, c) else f"values differ: eager {e.tolist()}, compiled {c.tolist()}"
    if np.allclose(c, e, rtol=RTOL, atol=ATOL, equal_nan=True):
        return None
    return f"values differ: eager {np.round(e, 5).tolist()}, compiled {np.round(c, 5).tolist()}"


def check(source, backend, calls=4):
    """Run ``source`` eagerly and compiled; the first Failure, or None when they agree."""
    eager = run(source, None, calls)
    try:
        compiled = run(source, backend, calls)
    except Exception as e:                      # the program's setup or a snapshot failed
        return Failure("crash in the compiler", 0, _describe(e))
    return compare_runs(eager, compiled)


# ---------------------------------------------------------------- minimizing a failure

def minimize(program, backend, failure, calls=4):
    """Drop returned names, statements of the body (last first: what they read may go next)
    and of between() while the same failure stays, until nothing more can go."""
    smaller = True
    while smaller:
        smaller = False
        for part in ("returns", "body", "between"):
            for i in reversed(range(len(getattr(program, part)))):
                statements = getattr(program, part)
                setattr(program, part, statements[:i] + statements[i + 1:])
                again = check(program.source(), backend, calls)
                if again is not None and (again.family, again.errors) == (failure.family, failure.errors):
                    failure, smaller = again, True
                else:
                    setattr(program, part, statements)
    return program, failure


# ---------------------------------------------------------------- the command line

def fuzz(n, seed, backend, categories=DEFAULT, calls=4, report=print, minimize_failures=True):
    """Generate and check ``n`` programs; returns {family: [(seed, program, failure)]}."""
    found = collections.defaultdict(list)
    for i in range(n):
        program = generate(seed + i, categories)
        failure = check(program.source(), backend, calls)
        if failure is None:
            continue
        if minimize_failures:
            program, failure = minimize(program, backend, failure, calls)
        found[failure.family].append((seed + i, program, failure))
        report(f"--- seed {seed + i} ({backend}): {failure.family} at call {failure.call}: "
               f"{failure.detail}\n{program.source()}")
    return found


def summary(found, n, backend, elapsed):
    lines = [f"{n} programs on {backend} in {elapsed:.1f} s: "
             f"{sum(map(len, found.values()))} failing"]
    for family in FAMILIES:
        if found.get(family):
            lines.append(f"  {family}: {len(found[family])} (seeds "
                         f"{', '.join(str(s) for s, _, _ in found[family][:10])})")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--backend", default="llvm", choices=("llvm", "interpreter"))
    parser.add_argument("--calls", type=int, default=4)
    parser.add_argument("--categories", default=",".join(DEFAULT),
                        help=f"comma-separated, or 'all': {', '.join(CATEGORIES)}")
    parser.add_argument("--no-minimize", action="store_true")
    parser.add_argument("--replay", help="a program file printed by an earlier run")
    a = parser.parse_args(argv)
    if a.replay:
        with open(a.replay) as f:
            failure = check(f.read(), a.backend, a.calls)
        print(failure or "eager and compiled agree")
        return 1 if failure else 0
    categories = tuple(CATEGORIES) if a.categories == "all" else tuple(a.categories.split(","))
    unknown = set(categories) - set(CATEGORIES)
    if unknown:
        parser.error(f"unknown categories: {', '.join(sorted(unknown))}")
    start = time.perf_counter()
    found = fuzz(a.n, a.seed, a.backend, categories, a.calls, minimize_failures=not a.no_minimize)
    print(summary(found, a.n, a.backend, time.perf_counter() - start))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
