"""dynograph.nn Module, Parameter and containers against torch.nn."""
from collections import OrderedDict

import numpy as np
import pytest

import dynograph
import dynograph.nn as dnn
from conftest import error_text


def build(lib):
    """The same small module classes, written against ``lib`` (dynograph or torch)."""
    nn = lib.nn

    class Affine(nn.Module):
        def __init__(self, n, m):
            super().__init__()
            self.weight = nn.Parameter(lib.arange(n * m, dtype=lib.float32).reshape(m, n) / 10)
            self.bias = nn.Parameter(lib.ones(m))
            self.register_buffer("count", lib.zeros(1, dtype=lib.int64))
            self.register_buffer("scratch", lib.zeros(2), persistent=False)

        def forward(self, x):
            return x @ self.weight.t() + self.bias

        def extra_repr(self):
            return f"n={self.weight.shape[1]}, m={self.weight.shape[0]}"

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.first = Affine(3, 4)
            self.body = nn.Sequential(Affine(4, 4), nn.ModuleList([Affine(4, 2), Affine(4, 2)]))
            self.heads = nn.ModuleDict({"a": Affine(4, 1)})
            self.register_buffer("stats", lib.ones(3))
            self.scale = nn.Parameter(lib.tensor(2.0))

        def forward(self, x):
            h = self.body[0](self.first(x))
            return self.body[1][0](h) * self.scale + self.heads["a"](h)

    return Affine, Net


def same_repr(ours, theirs):
    assert repr(ours) == repr(theirs).replace("torch.", "dynograph.")


def test_parameter_basics(torch):
    t = dynograph.ones(2, 3)
    p = dnn.Parameter(t)
    assert isinstance(p, dnn.Parameter) and isinstance(p, dynograph.Tensor)
    assert p.requires_grad and p.is_leaf
    p.data.add_(1)                      # shares the wrapped tensor's data
    assert t[0, 0].item() == 2.0
    assert type(p * 2) is dynograph.Tensor and type(p.sum()) is dynograph.Tensor
    same_repr(p, torch.nn.Parameter(torch.ones(2, 3) + 1))
    same_repr(dnn.Parameter(dynograph.zeros(2), requires_grad=False),
              torch.nn.Parameter(torch.zeros(2), requires_grad=False))
    assert dnn.Parameter().shape == (0,)
    with pytest.raises(RuntimeError) as eo:
        dnn.Parameter(dynograph.ones(2, dtype=dynograph.int64))
    with pytest.raises(RuntimeError) as et:
        torch.nn.Parameter(torch.ones(2, dtype=torch.int64))
    assert str(eo.value) == str(et.value)
    q = dnn.Parameter(dynograph.ones(2, requires_grad=True) * 2)   # a non-leaf becomes a leaf
    assert q.is_leaf and q.grad_fn is None and q.requires_grad


def test_repr_nested(torch):
    ours, theirs = build(dynograph)[1](), build(torch)[1]()
    same_repr(ours, theirs)
    same_repr(dnn.Sequential(), torch.nn.Sequential())
    same_repr(dnn.ModuleList(), torch.nn.ModuleList())
    Aff_d, Aff_t = build(dynograph)[0], build(torch)[0]
    same_repr(dnn.ModuleList([Aff_d(2, 2)] * 3 + [Aff_d(2, 3)]),
              torch.nn.ModuleList([Aff_t(2, 2)] * 3 + [Aff_t(2, 3)]))


def test_parameter_containers_repr(torch):
    ours = dnn.ParameterList([dnn.Parameter(dynograph.ones(2, 3)), dynograph.zeros(4, dtype=dynograph.float64)])
    theirs = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(2, 3)),
                                     torch.zeros(4, dtype=torch.float64)])
    same_repr(ours, theirs)
    assert isinstance(ours[1], dnn.Parameter) and ours[-1].dtype is dynograph.float64
    ours_d = dnn.ParameterDict({"b": dynograph.ones(1), "a": dnn.Parameter(dynograph.ones(2, 2))})
    theirs_d = torch.nn.ParameterDict({"b": torch.ones(1), "a": torch.nn.Parameter(torch.ones(2, 2))})
    same_repr(ours_d, theirs_d)
    assert list(ours_d.keys()) == list(theirs_d.keys())
    assert [n for n, _ in ours_d.named_parameters()] == [n for n, _ in theirs_d.named_parameters()]


def test_state_dict_keys_order_and_detach(torch):
    ours, theirs = build(dynograph)[1](), build(torch)[1]()
    sd_o, sd_t = ours.state_dict(), theirs.state_dict()
    assert list(sd_o) == list(sd_t)
    assert isinstance(sd_o, OrderedDict)
    for k in sd_t:
        np.testing.assert_array_equal(sd_o[k].numpy(), sd_t[k].numpy())
        assert sd_o[k].requires_grad == sd_t[k].requires_grad
    assert not any(isinstance(v, dnn.Parameter) for v in sd_o.values())
    kv = ours.state_dict(keep_vars=True)
    assert kv["first.weight"] is ours.first.weight
    assert list(sd_o._metadata) == list(sd_t._metadata)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert [n for n, _ in ours.named_children()] == [n for n, _ in theirs.named_children()]
    assert [n for n, _ in ours.named_parameters(prefix="m", recurse=False)] == \
        [n for n, _ in theirs.named_parameters(prefix="m", recurse=False)]


def test_shared_parameters_listed_once(torch):
    for lib in (dynograph, torch):
        Affine = build(lib)[0]
        a = Affine(2, 2)
        seq = lib.nn.Sequential(a, a)
        assert len(list(seq.parameters())) == 2
        assert len(list(seq.named_parameters(remove_duplicate=False))) == 4
        assert list(seq.state_dict()) == ["0.weight", "0.bias", "0.count", "1.weight", "1.bias",
                                          "1.count"]


def test_load_state_dict_roundtrip_and_errors(torch):
    ours, theirs = build(dynograph)[1](), build(torch)[1]()
    src = build(dynograph)[1]()
    with dynograph.no_grad():
        for p in src.parameters():
            p.mul_(3)
    w = ours.first.weight
    res = ours.load_state_dict(src.state_dict())
    assert repr(res) == "<All keys matched successfully>"
    assert ours.first.weight is w
    np.testing.assert_array_equal(w.detach().numpy(), src.first.weight.detach().numpy())

    def both(fn_o, fn_t):
        with pytest.raises(Exception) as eo:
            fn_o()
        with pytest.raises(Exception) as et:
            fn_t()
        assert type(eo.value) is type(et.value)
        assert error_text(eo.value) == error_text(et.value)

    sd_o, sd_t = ours.state_dict(), theirs.state_dict()
    for sd in (sd_o, sd_t):
        del sd["first.bias"]
        sd["extra.thing"] = sd["stats"]
    sd_o["body.0.weight"] = dynograph.zeros(2, 4)
    sd_t["body.0.weight"] = torch.zeros(2, 4)
    both(lambda: ours.load_state_dict(sd_o), lambda: theirs.load_state_dict(sd_t))
    del sd_o["body.0.weight"], sd_t["body.0.weight"]
    r_o, r_t = ours.load_state_dict(sd_o, strict=False), theirs.load_state_dict(sd_t, strict=False)
    assert r_o.missing_keys == r_t.missing_keys == ["first.bias", "body.0.weight"]
    assert r_o.unexpected_keys == r_t.unexpected_keys == ["extra.thing"]
    assert repr(r_o) == repr(r_t)
    both(lambda: ours.load_state_dict([1]), lambda: theirs.load_state_dict([1]))


def test_load_state_dict_assign(torch):
    Affine = build(dynograph)[0]
    m = Affine(2, 3)
    new = {"weight": dynograph.zeros(3, 2), "bias": dynograph.ones(3), "count": dynograph.tensor([5])}
    m.load_state_dict(new, assign=True)
    assert isinstance(m.weight, dnn.Parameter) and m.weight.requires_grad
    assert m.weight._data is new["weight"]._data
    assert m.count.item() == 5


@pytest.mark.parametrize("case", [
    "m.weight = lib.ones(3, 2)",
    "m.first = lib.ones(2)",
    "m.register_buffer('a.b', lib.ones(1))",
    "m.register_buffer('', lib.ones(1))",
    "m.register_buffer('bias', lib.ones(1))",
    "m.register_buffer('x', 3)",
    "m.register_parameter('x', lib.ones(1))",
    "m.register_parameter('y', lib.nn.Parameter(lib.ones(1)) * 2)",
    "m.add_module('x', 3)",
    "m.add_module('a.b', lib.nn.Module())",
    "m.nothing",
    "m.get_submodule('nope')",
    "m.get_parameter('count')",
    "m.get_buffer('weight')",
    "lib.nn.Sequential()[0]",
    "lib.nn.ModuleList([lib.nn.Module()])[-2]",
    "lib.nn.Sequential() + lib.nn.ModuleList()",
])
def test_errors_match_torch(torch, case):
    errs = []
    for lib in (dynograph, torch):
        m = build(lib)[0](2, 3)
        m.first = lib.nn.Module()
        with pytest.raises(Exception) as e:
            exec(case, {"lib": lib, "m": m})
        errs.append(e.value)
    assert type(errs[0]) is type(errs[1])
    assert error_text(errs[0]) == error_text(errs[1])


def test_setattr_moves_between_kinds(torch):
    for lib in (dynograph, torch):
        m = build(lib)[0](2, 3)
        m.bias = None
        assert m.bias is None and "bias" in m._parameters
        m.count = lib.ones(1)                  # stays a buffer
        assert "count" in m._buffers
        m.sub = lib.nn.Module()
        m.sub = lib.nn.Parameter(lib.ones(1))  # a parameter replaces the module
        assert "sub" in m._parameters and "sub" not in m._modules
        m.count = lib.nn.Module()              # a module replaces the buffer
        assert "count" in m._modules and "count" not in m._buffers
        m.extra = lib.nn.Buffer(lib.ones(2), persistent=False)
        assert "extra" in m._buffers and "extra" not in m.state_dict()
        del m.extra
        assert "extra" not in m._buffers
        assert m.get_submodule("") is m


def test_forward_and_hooks_order_and_values(torch):
    results = []
    for lib in (dynograph, torch):
        Affine = build(lib)[0]
        m = Affine(2, 3)
        log = []
        h1 = m.register_forward_pre_hook(lambda mod, args: log.append("pre1") or (args[0] * 2,))
        m.register_forward_pre_hook(lambda mod, args: log.append("pre0"), prepend=True)
        m.register_forward_pre_hook(
            lambda mod, args, kw: log.append(("prekw", sorted(kw))), with_kwargs=True)
        m.register_forward_hook(lambda mod, args, out: log.append("fwd") or out + 1)
        m.register_forward_hook(
            lambda mod, args, kw, out: log.append(("fwdkw", args[0].shape[0])), with_kwargs=True)
        x = lib.ones(4, 2)
        y1 = m(x)
        h1.remove()
        y2 = m(x)
        results.append((log, y1.detach().numpy(), y2.detach().numpy()))
    (lo, a1, a2), (lt, b1, b2) = results
    assert lo == lt
    np.testing.assert_allclose(a1, b1, rtol=1e-6)
    np.testing.assert_allclose(a2, b2, rtol=1e-6)


def test_forward_hook_always_call(torch):
    for lib in (dynograph, torch):
        class Bad(lib.nn.Module):
            def forward(self, x):
                raise ValueError("boom")
        seen = []
        m = Bad()
        m.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
        m.register_forward_hook(lambda mod, args, out: seen.append("never"))
        with pytest.raises(ValueError):
            m(1)
        assert seen == [None]


def test_full_backward_hook(torch):
    results = []
    for lib in (dynograph, torch):
        Affine = build(lib)[0]
        m = Affine(2, 3)
        seen = []

        def hook(mod, gin, gout):
            seen.append(([None if g is None else g.numpy().copy() for g in gin],
                         [g.numpy().copy() for g in gout]))
            return (gin[0] * 10,)

        m.register_full_backward_hook(hook)
        x = (lib.arange(8, dtype=lib.float32).reshape(4, 2) / 3).requires_grad_()
        (m(x) ** 2).sum().backward()
        # inputs without grad: the hook still fires with grad_input None
        m2 = Affine(2, 3)
        m2.register_full_backward_hook(
            lambda mod, gin, gout: seen.append(([g for g in gin], [g.shape for g in gout])) and None)
        with pytest.warns(UserWarning, match="Full backward hook is firing"):
            m2(lib.ones(1, 2)).sum().backward()
        results.append((seen, x.grad.numpy(), m.weight.grad.numpy()))
    (so, xo, wo), (st, xt, wt) = results
    np.testing.assert_allclose(xo, xt, rtol=1e-5)
    np.testing.assert_allclose(wo, wt, rtol=1e-5)
    assert len(so) == len(st) == 2
    for a, b in zip(so[0][0] + so[0][1], st[0][0] + st[0][1]):
        np.testing.assert_allclose(a, b, rtol=1e-5)
    assert so[1][0] == st[1][0] == [None]
    assert [tuple(s) for s in so[1][1]] == [tuple(s) for s in st[1][1]]


def test_zero_grad_and_requires_grad(torch):
    for lib in (dynograph, torch):
        m = build(lib)[1]()
        m(lib.ones(2, 3)).sum().backward()
        used = [p for p in m.parameters() if p.grad is not None]
        assert len(used) == 9
        m.zero_grad(set_to_none=False)
        assert all(p.grad is not None and not p.grad.any().item() for p in used)
        m.zero_grad()
        assert all(p.grad is None for p in m.parameters())
        m.requires_grad_(False)
        assert not any(p.requires_grad for p in m.parameters())


def test_train_eval_propagate():
    m = build(dynograph)[1]()
    assert m.training
    m.eval()
    assert not any(x.training for x in m.modules())
    m.body.train()
    assert m.body[1][0].training and not m.first.training
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        m.train(1)


def test_to_dtype_in_place(torch):
    for lib in (dynograph, torch):
        m = build(lib)[1]()
        w = m.first.weight
        m(lib.ones(2, 3)).sum().backward()
        assert m.to(lib.float64) is m
        assert m.first.weight is w and w.dtype is lib.float64 and w.grad.dtype is lib.float64
        assert m.first.count.dtype is lib.int64           # integer buffers keep their dtype
        assert m.stats.dtype is lib.float64
        m.float()
        assert w.dtype is lib.float32
        m.half()
        assert w.dtype is lib.float16
        m.to(lib.zeros(1, dtype=lib.float64))
        assert w.dtype is lib.float64
        m.to(dtype=lib.float32).cpu()
        assert w.dtype is lib.float32 and w.requires_grad
        m.type(lib.float64)
        assert m.first.count.dtype is lib.float64
    with pytest.raises(TypeError, match="only accepts floating point"):
        build(dynograph)[1]().to(dynograph.int32)
    if not dynograph.cuda.is_available():
        with pytest.raises(Exception):
            build(dynograph)[1]().cuda()


def test_apply_and_children(torch):
    m = build(dynograph)[1]()
    names = []
    m.apply(lambda mod: names.append(type(mod).__name__))
    t = build(torch)[1]()
    tnames = []
    t.apply(lambda mod: tnames.append(type(mod).__name__))
    assert names == tnames


def test_sequential_ops(torch):
    seqs = []
    for lib in (dynograph, torch):
        Affine = build(lib)[0]
        mods = [Affine(2, 2) for _ in range(4)]
        s = lib.nn.Sequential(*mods)
        assert s[-1] is mods[3] and len(s) == 4
        sl = s[1:3]
        assert type(sl) is lib.nn.Sequential and list(sl) == mods[1:3]
        assert list(sl._modules) == ["1", "2"]
        del s[1]
        assert list(s._modules) == ["0", "1", "2"] and list(s) == [mods[0], mods[2], mods[3]]
        s.insert(1, mods[1])
        assert list(s) == mods
        popped = s.pop(0)
        assert popped is mods[0] and list(s._modules) == ["0", "1", "2"]
        s.append(mods[0])
        s[0] = mods[0]
        s2 = s + lib.nn.Sequential(mods[1])
        s2.extend([mods[2]])
        seqs.append([list(s2._modules), [mods.index(x) for x in s2]])
        od = lib.nn.Sequential(OrderedDict([("a", mods[0]), ("b", mods[1])]))
        assert list(od._modules) == ["a", "b"]
        y = od(lib.ones(1, 2))
        assert tuple(y.shape) == (1, 2)
    assert seqs[0] == seqs[1]


def test_modulelist_moduledict_ops(torch):
    for lib in (dynograph, torch):
        nn = lib.nn
        a, b, c = nn.Module(), nn.Module(), nn.Module()
        ml = nn.ModuleList([a, b])
        ml.append(c)
        ml.insert(0, c)
        assert list(ml) == [c, a, b, c] and ml[-1] is c
        del ml[0]
        assert list(ml._modules) == ["0", "1", "2"]
        ml += [a]
        assert len(ml) == 4 and type(ml[1:]) is nn.ModuleList
        md = nn.ModuleDict([("x", a), ("y", b)])
        md["z"] = c
        assert list(md.keys()) == ["x", "y", "z"] and "y" in md and md.pop("y") is b
        assert list(md) == ["x", "z"]
        assert [n for n, _ in md.named_children()] == ["x", "z"]


def test_linear_if_available(torch):
    if not hasattr(dnn, "Linear"):
        pytest.skip("nn.Linear not available yet")
    ours, theirs = dnn.Sequential(dnn.Linear(3, 4), dnn.Linear(4, 2, bias=False)), \
        torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2, bias=False))
    same_repr(ours, theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())


def test_buffer_marker(torch):
    for lib in (dynograph, torch):
        b = lib.nn.Buffer(lib.ones(2), persistent=False)
        assert type(b) is lib.Tensor and isinstance(b, lib.nn.Buffer)
        assert not isinstance(lib.ones(2), lib.nn.Buffer)
        assert not b.persistent
    same_repr(dnn.Buffer(dynograph.ones(2)), torch.nn.Buffer(torch.ones(2)))


def test_full_backward_pre_hook(torch):
    results = []
    for lib in (dynograph, torch):
        m = build(lib)[0](2, 3)
        log = []
        m.register_full_backward_pre_hook(lambda mod, gout: log.append("pre") or (gout[0] * 3,))
        m.register_full_backward_hook(
            lambda mod, gin, gout: log.append(("hook", gout[0].numpy().tolist())))
        x = lib.ones(2, 2, requires_grad=True)
        m(x).sum().backward()
        results.append((log, x.grad.numpy().tolist(), m.bias.grad.numpy().tolist()))
    assert results[0] == results[1]


def test_extra_state(torch):
    outs = []
    for lib in (dynograph, torch):
        class WithState(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = lib.nn.Parameter(lib.ones(1))
                self.note = "a"

            def get_extra_state(self):
                return {"note": self.note}

            def set_extra_state(self, state):
                self.note = state["note"]

        m = lib.nn.Sequential(WithState())
        sd = m.state_dict()
        sd["0._extra_state"] = {"note": "b"}
        m.load_state_dict(sd)
        del sd["0._extra_state"]
        res = m.load_state_dict(sd, strict=False)
        outs.append((list(m.state_dict()), m[0].note, res.missing_keys))
        plain = lib.nn.Sequential(lib.nn.Module())
        with pytest.raises(RuntimeError) as e:
            plain.load_state_dict({"0._extra_state": 1})
        outs.append(error_text(e.value))
    assert outs[:2] == outs[2:]


def test_set_submodule_and_load_post_hook(torch):
    outs = []
    for lib in (dynograph, torch):
        m = build(lib)[1]()
        new = lib.nn.Sequential()
        m.set_submodule("body.1", new)
        assert m.body[1] is new
        errs = []
        for target, strict in (("", False), ("first.weight", False), ("first.zz", True)):
            with pytest.raises(Exception) as e:
                m.set_submodule(target, lib.nn.Module(), strict=strict)
            errs.append((type(e.value).__name__, error_text(e.value)))
        m.register_load_state_dict_post_hook(lambda mod, keys: keys.missing_keys.clear())
        res = m.load_state_dict({}, strict=True)
        outs.append((errs, res.missing_keys, list(m.state_dict())))
    assert outs[0] == outs[1]


def test_state_dict_hooks(torch):
    outs = []
    for lib in (dynograph, torch):
        m = build(lib)[1]()
        log = []
        m.first.register_state_dict_pre_hook(lambda mod, prefix, kv: log.append(("pre", prefix, kv)))

        def post(mod, sd, prefix, meta):
            log.append(("post", prefix, len(sd), dict(meta)))
            sd[prefix + "added"] = lib.zeros(1)

        m.body.register_state_dict_post_hook(post)

        def load_pre(mod, sd, prefix, meta, strict, missing, unexpected, errors):
            log.append(("load_pre", prefix, strict))
            sd.pop(prefix + "added", None)

        m.body.register_load_state_dict_pre_hook(load_pre)
        sd = m.state_dict()
        m.load_state_dict(sd)
        outs.append((log, list(sd)))
    assert outs[0] == outs[1]


def test_global_module_hooks(torch):
    import torch.nn.modules.module as tmm

    import dynograph.nn.modules.module as dmm
    outs = []
    for lib, mm in ((dynograph, dmm), (torch, tmm)):
        m = build(lib)[0](2, 2)
        log = []
        m.register_forward_hook(lambda mod, a, out: log.append("own"))
        handles = [mm.register_module_forward_pre_hook(lambda mod, a: log.append("gpre")),
                   mm.register_module_forward_hook(lambda mod, a, out: log.append("gfwd")),
                   mm.register_module_full_backward_hook(lambda mod, gi, go: log.append("gbw"))]
        try:
            m(lib.ones(1, 2, requires_grad=True)).sum().backward()
        finally:
            for h in handles:
                h.remove()
        m(lib.ones(1, 2))
        outs.append(log)
    assert outs[0] == outs[1] == ["gpre", "gfwd", "own", "gbw", "own"]


def test_state_dict_positional_args(torch):
    outs = []
    for lib in (dynograph, torch):
        m = build(lib)[0](2, 2)
        dest = OrderedDict()
        with pytest.warns(FutureWarning, match="Positional args are being deprecated"):
            out = m.state_dict(dest, "pre.", True)
        assert out is dest and out["pre.weight"] is m.weight
        outs.append(list(out))
    assert outs[0] == outs[1]
