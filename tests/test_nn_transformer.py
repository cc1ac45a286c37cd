"""Attention and transformer layers against PyTorch: scaled_dot_product_attention,
multi_head_attention_forward / MultiheadAttention, Transformer encoder/decoder layers and stacks.

Each module test copies torch's weights across and compares outputs, the gradients of the inputs
and the gradients of every parameter (eval mode or dropout 0 for values).
"""
import math
import warnings

import numpy as np
import pytest

import dynograph
import dynograph.nn as nn
from conftest import assert_same, assert_same_error, eval_expr, from_torch

F = nn.functional
TOL = {"float32": dict(rtol=2e-5, atol=2e-5), "float64": dict(rtol=1e-9, atol=1e-10)}


# ----------------------------------------------------------------------------- helpers

@pytest.fixture(autouse=True, scope="module")
def _torch_single_thread():
    """torch's thread pool only contends with other work on these tiny shapes."""
    try:
        import torch
    except ImportError:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _tdtype(torch, name):
    return getattr(torch, name)


def _leaf(torch, shape, dtype, g, noncontig=False, grad=True, scale=1.0):
    """A torch tensor and its dynograph twin; with noncontig both are transposed views of leaves.

    Returns (torch view, dynograph view, torch leaf, dynograph leaf)."""
    if noncontig and len(shape) > 1:
        base_shape = tuple(reversed(shape))
        tb = (torch.randn(*base_shape, generator=g, dtype=dtype) * scale).requires_grad_(grad)
        db = from_torch(tb, requires_grad=grad)
        perm = tuple(reversed(range(len(shape))))
        return tb.permute(*perm), db.permute(*perm), tb, db
    tb = (torch.randn(*shape, generator=g, dtype=dtype) * scale).requires_grad_(grad)
    db = from_torch(tb, requires_grad=grad)
    return tb, db, tb, db


def _copy_params(ours, theirs):
    ours_p, theirs_p = list(ours.named_parameters()), list(theirs.named_parameters())
    assert [n for n, _ in ours_p] == [n for n, _ in theirs_p]
    for (_, p), (_, tp) in zip(ours_p, theirs_p):
        with dynograph.no_grad():
            p.copy_(from_torch(tp))


def _backward_both(torch, got, expect, seed=7):
    """Backpropagate the same random cotangent through each output pair."""
    g = torch.Generator().manual_seed(seed)
    t_total, d_total = 0, 0
    for d, t in zip(got, expect):
        if t is None:
            assert d is None
            continue
        ct = torch.randn(t.shape, generator=g, dtype=t.dtype)
        t_total = t_total + (t * ct).sum()
        d_total = d_total + (d * from_torch(ct)).sum()
    t_total.backward()
    d_total.backward()


def _assert_grads(ours, theirs, leaves, tol):
    for d, t in leaves:
        assert_same(d.grad, t.grad, **tol)
    for (name, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        if tp.grad is None:
            assert p.grad is None or not p.grad.abs().sum().item(), name
        else:
            assert_same(p.grad, tp.grad, **tol)


# ----------------------------------------------------------------------------- scaled dot product

def _mask(torch, kind, shape, g, dtype):
    if kind is None:
        return None, None
    if kind == "bool":
        m = torch.rand(*shape, generator=g) > 0.3
        m[..., 0] = True  # every query row attends somewhere
        return m, from_torch(m)
    m = torch.randn(*shape, generator=g, dtype=dtype)
    return m, from_torch(m)


SDPA_CASES = [
    # q shape, k shape, v shape, mask kind, mask shape, kwargs
    ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 6), None, None, {}),
    ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8), "bool", (4, 5), {}),
    ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8), "bool", (2, 1, 4, 5), {}),
    ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8), "float", (4, 5), {}),
    ((2, 3, 4, 8), (2, 3, 5, 8), (2, 3, 5, 8), "float", (2, 3, 4, 5), {"scale": 0.3}),
    ((2, 3, 5, 8), (2, 3, 5, 8), (2, 3, 5, 8), None, None, {"is_causal": True}),
    ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 8), None, None, {"is_causal": True}),  # non-square
    ((2, 3, 6, 8), (2, 3, 4, 8), (2, 3, 4, 8), None, None, {"is_causal": True, "scale": 1.5}),
    ((2, 4, 3, 8), (2, 2, 5, 8), (2, 2, 5, 8), None, None, {"enable_gqa": True}),
    ((2, 4, 3, 8), (2, 1, 5, 8), (2, 2, 5, 8), "bool", (3, 5), {"enable_gqa": True}),
    ((3, 4, 8), (3, 5, 8), (3, 5, 8), "float", (4, 5), {}),
    ((4, 8), (5, 8), (5, 4), "bool", (4, 5), {}),
    ((2, 2, 2, 4, 8), (2, 2, 2, 5, 8), (2, 2, 2, 5, 8), "bool", (2, 1, 4, 5), {}),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("noncontig", [False, True])
@pytest.mark.parametrize("case", range(len(SDPA_CASES)))
def test_sdpa_matches_torch(torch, case, dtype, noncontig):
    qs, ks, vs, mask_kind, mask_shape, kwargs = SDPA_CASES[case]
    g = torch.Generator().manual_seed(case)
    dt = _tdtype(torch, dtype)
    tq, dq, tq0, dq0 = _leaf(torch, qs, dt, g, noncontig)
    tk, dk, tk0, dk0 = _leaf(torch, ks, dt, g, noncontig)
    tv, dv, tv0, dv0 = _leaf(torch, vs, dt, g)
    tm, dm = _mask(torch, mask_kind, mask_shape, g, dt)
    expect = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, attn_mask=tm, **kwargs)
    got = F.scaled_dot_product_attention(dq, dk, dv, attn_mask=dm, **kwargs)
    assert_same(got, expect, **TOL[dtype])
    _backward_both(torch, [got], [expect])
    for d, t in ((dq0, tq0), (dk0, tk0), (dv0, tv0)):
        assert_same(d.grad, t.grad, **TOL[dtype])


def test_sdpa_float_mask_gradient(torch):
    g = torch.Generator().manual_seed(3)
    tq, dq, _, _ = _leaf(torch, (2, 2, 3, 4), torch.float64, g)
    tm, dm, _, _ = _leaf(torch, (3, 5), torch.float64, g)
    tk, dk, _, _ = _leaf(torch, (2, 2, 5, 4), torch.float64, g)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel([SDPBackend.MATH]):
        expect = torch.nn.functional.scaled_dot_product_attention(tq, tk, tk, attn_mask=tm)
    got = F.scaled_dot_product_attention(dq, dk, dk, attn_mask=dm)
    _backward_both(torch, [got], [expect])
    assert_same(dm.grad, tm.grad, **TOL["float64"])
    assert_same(dk.grad, tk.grad, **TOL["float64"])


def test_sdpa_fully_masked_rows_are_zero(torch):
    """A query row that may attend nothing gives zeros and zero gradients (torch's safe softmax)."""
    g = torch.Generator().manual_seed(1)
    tq, dq, _, _ = _leaf(torch, (2, 2, 3, 4), torch.float32, g)
    tk, dk, _, _ = _leaf(torch, (2, 2, 5, 4), torch.float32, g)
    for tm in (torch.ones(3, 5, dtype=torch.bool), torch.zeros(3, 5)):
        if tm.dtype == torch.bool:
            tm[1] = False
        else:
            tm[1] = float("-inf")
        dq.grad = dk.grad = tq.grad = tk.grad = None
        expect = torch.nn.functional.scaled_dot_product_attention(tq, tk, tk, attn_mask=tm)
        got = F.scaled_dot_product_attention(dq, dk, dk, attn_mask=from_torch(tm))
        assert_same(got, expect, **TOL["float32"])
        assert not got[:, :, 1].abs().sum().item()
        _backward_both(torch, [got], [expect])
        assert_same(dq.grad, tq.grad, **TOL["float32"])
        assert_same(dk.grad, tk.grad, **TOL["float32"])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sdpa_half_precision(torch, dtype):
    g = torch.Generator().manual_seed(0)
    t = [torch.randn(2, 2, 3, 8, generator=g).to(_tdtype(torch, dtype)) for _ in range(3)]
    expect = torch.nn.functional.scaled_dot_product_attention(*t, is_causal=True)
    got = F.scaled_dot_product_attention(*[from_torch(x) for x in t], is_causal=True)
    assert_same(got, expect, rtol=2e-2, atol=2e-2)


def test_sdpa_dropout():
    q = dynograph.randn(2, 2, 6, 4)
    k, v = dynograph.randn(2, 2, 7, 4), dynograph.randn(2, 2, 7, 4)
    plain = F.scaled_dot_product_attention(q, k, v)
    assert dynograph.equal(F.scaled_dot_product_attention(q, k, v, dropout_p=0.0), plain)
    assert not F.scaled_dot_product_attention(q, k, v, dropout_p=1.0).abs().sum().item()
    dynograph.manual_seed(5)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    dynograph.manual_seed(5)
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert dynograph.equal(a, b) and not dynograph.allclose(a, plain)
    # the expectation over dropout masks is the plain result (weights are rescaled by 1 / (1 - p))
    queries, keys = dynograph.ones(1, 1, 2000, 3), dynograph.ones(1, 1, 3, 3)
    out = F.scaled_dot_product_attention(queries, keys, dynograph.ones(1, 1, 3, 1), dropout_p=0.3)
    assert abs(out.mean().item() - 1.0) < 0.05


SDPA_ERRORS = [
    "F.scaled_dot_product_attention(q, k, k, attn_mask=B.ones(3, 5, dtype=B.bool), is_causal=True)",
    "F.scaled_dot_product_attention(B.randn(8), B.randn(8), B.randn(8))",
    "F.scaled_dot_product_attention(q.double(), k, k)",
    "F.scaled_dot_product_attention(q, k, k, attn_mask=B.ones(3, 5, dtype=B.int64))",
    "F.scaled_dot_product_attention(q, k, k, attn_mask=B.ones(3, 5, dtype=B.float16))",
    "F.scaled_dot_product_attention(q, B.randn(2, 3, 5, 4), B.randn(2, 3, 5, 4), enable_gqa=True)",
    "F.scaled_dot_product_attention(q, k, k, attn_mask=B.ones(2, 1, 1, 3, 5, dtype=B.bool))",
    "F.scaled_dot_product_attention(q, k, k, attn_mask=B.ones(4, 5, dtype=B.bool))",
    "F.scaled_dot_product_attention(q, B.randn(2, 2, 5, 4), B.randn(2, 2, 5, 4))",
    "F.scaled_dot_product_attention(q.int(), k.int(), k.int())",
    "F.scaled_dot_product_attention(q, k, k, None, 0.0, False, 0.5)",
]


@pytest.mark.parametrize("expr", SDPA_ERRORS)
def test_sdpa_errors(torch, expr):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def env(B, fn):
        return {"B": B, "F": fn, "q": B.zeros(2, 4, 3, 4), "k": B.zeros(2, 4, 5, 4)}

    with sdpa_kernel([SDPBackend.MATH]):  # torch's reference kernel, the one this follows
        theirs = eval_expr(expr, env(torch, torch.nn.functional))
    assert_same_error(eval_expr(expr, env(dynograph, F)), theirs, expr)


# ----------------------------------------------------------------------------- multi-head attention

MHA_CONFIGS = [
    {},
    {"batch_first": True},
    {"kdim": 5, "vdim": 3},
    {"kdim": 5, "vdim": 3, "batch_first": True, "bias": False},
    {"add_bias_kv": True},
    {"add_zero_attn": True},
    {"add_bias_kv": True, "add_zero_attn": True, "batch_first": True},
    {"bias": False, "dropout": 0.5},
]


def _mha_inputs(torch, cfg, dtype, g, batched=True, self_attn=False, noncontig=False):
    E, L, S, N = 8, 3, 4, 2
    kdim, vdim = cfg.get("kdim", E), cfg.get("vdim", E)

    def shape(seq, dim):
        if not batched:
            return (seq, dim)
        return (N, seq, dim) if cfg.get("batch_first") else (seq, N, dim)

    tq, dq, tq0, dq0 = _leaf(torch, shape(L, E), dtype, g, noncontig)
    if self_attn:
        return (tq, tq, tq), (dq, dq, dq), [(dq0, tq0)]
    tk, dk, tk0, dk0 = _leaf(torch, shape(S, kdim), dtype, g, noncontig)
    tv, dv, tv0, dv0 = _leaf(torch, shape(S, vdim), dtype, g)
    return (tq, tk, tv), (dq, dk, dv), [(dq0, tq0), (dk0, tk0), (dv0, tv0)]


def _mha_pair(torch, cfg, dtype, heads=2):
    theirs = torch.nn.MultiheadAttention(8, heads, dtype=_tdtype(torch, dtype), **cfg).eval()
    ours = nn.MultiheadAttention(8, heads, dtype=getattr(dynograph, dtype), **cfg).eval()
    _copy_params(ours, theirs)
    return ours, theirs


def _compare_mha(torch, cfg, dtype, call_kwargs, masks=(), batched=True, self_attn=False,
                 noncontig=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    ours, theirs = _mha_pair(torch, cfg, dtype)
    targs, dargs, leaves = _mha_inputs(torch, cfg, _tdtype(torch, dtype), g, batched, self_attn,
                                       noncontig)
    tkw, dkw = dict(call_kwargs), dict(call_kwargs)
    for name, tm in masks:
        tkw[name], dkw[name] = tm, from_torch(tm)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expect = theirs(*targs, **tkw)
        got = ours(*dargs, **dkw)
    assert_same(got[0], expect[0], **TOL[dtype])
    if expect[1] is None:
        assert got[1] is None
    else:
        assert_same(got[1], expect[1], **TOL[dtype])
    _backward_both(torch, got, expect)
    _assert_grads(ours, theirs, leaves, TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("cfg", range(len(MHA_CONFIGS)))
def test_mha_configs(torch, cfg, need_weights, average, dtype):
    _compare_mha(torch, MHA_CONFIGS[cfg], dtype,
                 {"need_weights": need_weights, "average_attn_weights": average}, seed=cfg)


def _padding(torch, kind, n=2, s=4, g=None):
    m = torch.zeros(n, s, dtype=torch.bool)
    m[0, -1] = True
    m[1, 1:3] = True
    if kind == "float":
        return torch.zeros(n, s).masked_fill(m, float("-inf"))
    return m


def _attn_mask(torch, kind, shape, g, dtype=None):
    m = torch.rand(*shape, generator=g) > 0.7
    m[..., 0] = False  # bool attn_mask: True = may NOT attend
    if kind == "float":
        return torch.randn(*shape, generator=g, dtype=dtype)
    return m


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("masks", ["kpm_bool", "kpm_float", "attn_bool", "attn_float", "attn3d_bool",
                                   "attn3d_float", "both_bool", "both_float", "mixed"])
@pytest.mark.parametrize("cfg", [{}, {"batch_first": True, "add_bias_kv": True, "add_zero_attn": True}])
def test_mha_masks(torch, masks, need_weights, cfg):
    g = torch.Generator().manual_seed(1)
    kinds = {"kpm_bool": ("bool", None), "kpm_float": ("float", None), "attn_bool": (None, "bool"),
             "attn_float": (None, "float"), "attn3d_bool": (None, "bool3"),
             "attn3d_float": (None, "float3"), "both_bool": ("bool", "bool"),
             "both_float": ("float", "float"), "mixed": ("bool", "float")}[masks]
    pairs = []
    if kinds[0]:
        pairs.append(("key_padding_mask", _padding(torch, kinds[0])))
    if kinds[1]:
        shape = (4, 3, 4) if kinds[1].endswith("3") else (3, 4)
        pairs.append(("attn_mask", _attn_mask(torch, kinds[1].rstrip("3"), shape, g)))
    _compare_mha(torch, cfg, "float32", {"need_weights": need_weights}, masks=pairs)


@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("cfg", [{}, {"kdim": 5, "vdim": 3}])
def test_mha_unbatched(torch, cfg, need_weights):
    g = torch.Generator().manual_seed(2)
    pairs = [("key_padding_mask", torch.tensor([False, False, True, False])),
             ("attn_mask", _attn_mask(torch, "bool", (3, 4), g))]
    _compare_mha(torch, cfg, "float64", {"need_weights": need_weights}, batched=False)
    _compare_mha(torch, cfg, "float64", {"need_weights": need_weights}, masks=pairs, batched=False)
    pairs3 = [("attn_mask", _attn_mask(torch, "float", (2, 3, 4), g, torch.float64))]
    _compare_mha(torch, cfg, "float64", {"need_weights": need_weights, "average_attn_weights": False},
                 masks=pairs3, batched=False)


@pytest.mark.parametrize("batch_first", [False, True])
def test_mha_self_attention_noncontiguous(torch, batch_first):
    cfg = {"batch_first": batch_first}
    _compare_mha(torch, cfg, "float64", {}, self_attn=True, noncontig=True)
    _compare_mha(torch, cfg, "float64", {"need_weights": False}, noncontig=True)


@pytest.mark.parametrize("need_weights", [True, False])
def test_mha_is_causal_hint(torch, need_weights):
    mask = torch.nn.Transformer.generate_square_subsequent_mask(3)
    g = torch.Generator().manual_seed(4)
    ours, theirs = _mha_pair(torch, {}, "float32")
    tq, dq, _, _ = _leaf(torch, (3, 2, 8), torch.float32, g)
    expect = theirs(tq, tq, tq, attn_mask=mask, is_causal=True, need_weights=need_weights)
    got = ours(dq, dq, dq, attn_mask=from_torch(mask), is_causal=True, need_weights=need_weights)
    assert_same(got[0], expect[0], **TOL["float32"])


def test_mha_dropout_training():
    m = nn.MultiheadAttention(8, 2, dropout=0.5)
    x = dynograph.randn(3, 2, 8)
    m.eval()
    a = m(x, x, x)[0]
    assert dynograph.equal(a, m(x, x, x)[0])
    m.train()
    dynograph.manual_seed(0)
    b, w = m(x, x, x)
    assert not dynograph.allclose(a, b)
    dynograph.manual_seed(0)
    assert dynograph.equal(b, m(x, x, x)[0])
    c, none = m(x, x, x, need_weights=False)
    assert none is None and not dynograph.allclose(a, c)


def test_multi_head_attention_forward_static_kv(torch):
    g = torch.Generator().manual_seed(5)
    theirs = torch.nn.MultiheadAttention(8, 2, dtype=torch.float64)
    tq, dq, _, _ = _leaf(torch, (3, 2, 8), torch.float64, g)
    tk, dk, _, _ = _leaf(torch, (4, 2, 4), torch.float64, g)  # (N * heads, S, head_dim)
    tv, dv, _, _ = _leaf(torch, (4, 2, 4), torch.float64, g)
    weights = [theirs.in_proj_weight, theirs.in_proj_bias, theirs.out_proj.weight,
               theirs.out_proj.bias]
    w_in, b_in, w_out, b_out = [from_torch(w) for w in weights]
    expect = torch.nn.functional.multi_head_attention_forward(
        tq, tq, tq, 8, 2, weights[0], weights[1], None, None, False, 0.0, weights[2], weights[3],
        static_k=tk, static_v=tv)
    got = F.multi_head_attention_forward(dq, dq, dq, 8, 2, w_in, b_in, None, None, False, 0.0, w_out,
                                         b_out, static_k=dk, static_v=dv)
    assert_same(got[0], expect[0], **TOL["float64"])
    assert_same(got[1], expect[1], **TOL["float64"])
    _backward_both(torch, got, expect)
    assert_same(dq.grad, tq.grad, **TOL["float64"])
    assert_same(dk.grad, tk.grad, **TOL["float64"])
    assert_same(dv.grad, tv.grad, **TOL["float64"])


@pytest.mark.parametrize("cfg", [{}, {"kdim": 4, "vdim": 6, "bias": False}, {"add_bias_kv": True},
                                 {"batch_first": True, "dropout": 0.2}])
def test_mha_repr_state_dict_and_init(torch, cfg):
    ours, theirs = nn.MultiheadAttention(8, 2, **cfg), torch.nn.MultiheadAttention(8, 2, **cfg)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert type(ours.out_proj).__name__ == "NonDynamicallyQuantizableLinear"
    assert isinstance(ours.out_proj, nn.Linear)
    for name in ("embed_dim", "kdim", "vdim", "num_heads", "head_dim", "dropout", "batch_first",
                 "_qkv_same_embed_dim", "add_zero_attn"):
        assert getattr(ours, name) == getattr(theirs, name), name
    if ours.in_proj_bias is not None:
        assert not ours.in_proj_bias.abs().sum().item()
        assert not ours.out_proj.bias.abs().sum().item()
    w = ours.in_proj_weight if ours._qkv_same_embed_dim else ours.k_proj_weight
    bound = math.sqrt(6.0 / (w.shape[0] + w.shape[1]))
    assert 0.8 * bound < w.abs().max().item() <= bound
    if cfg.get("add_bias_kv"):
        assert ours.bias_k.shape == (1, 1, 8) and ours.bias_k.abs().sum().item() > 0
    else:
        assert ours.bias_k is None and ours.bias_v is None


MHA_ERRORS = [
    ("nn.MultiheadAttention(10, 3)", None),
    ("nn.MultiheadAttention(0, 2)", None),
    ("nn.MultiheadAttention(8, -1)", None),
    ("m(B.zeros(3, 2, 8), B.zeros(4, 2, 8), B.zeros(4, 2, 8), attn_mask=B.zeros(3, 5))", None),
    ("m(B.zeros(3, 2, 8), B.zeros(4, 2, 8), B.zeros(4, 2, 8), attn_mask=B.zeros(2, 3, 4))", None),
    ("m(B.zeros(3, 2, 8), B.zeros(4, 2, 8), B.zeros(4, 2, 8), attn_mask=B.zeros(1, 1, 3, 4))", None),
    ("m(B.zeros(3, 2, 8), B.zeros(4, 2, 8), B.zeros(4, 2, 8), key_padding_mask=B.zeros(2, 5))", None),
    ("m(B.zeros(3, 2, 8), B.zeros(4, 2, 8), B.zeros(4, 2, 8), key_padding_mask=B.zeros(3, 4))", None),
    ("m(B.zeros(3, 2, 8), B.zeros(4, 2, 8), B.zeros(4, 2, 8), key_padding_mask=B.zeros(4))", None),
    ("m(B.zeros(3, 2, 8), B.zeros(4, 2, 8), B.zeros(4, 2, 8), key_padding_mask=B.zeros(2, 4, dtype=B.int64))", None),
    ("m(B.zeros(3, 2, 8), B.zeros(4, 2, 8), B.zeros(4, 2, 8), is_causal=True)", None),
    ("m(B.zeros(3, 2, 8), B.zeros(4, 8), B.zeros(4, 8))", None),
    ("m(B.zeros(3, 8), B.zeros(4, 2, 8), B.zeros(4, 2, 8))", None),
    ("m(B.zeros(3, 8), B.zeros(4, 8), B.zeros(4, 8), key_padding_mask=B.zeros(2, 4))", None),
    ("m(B.zeros(3, 8), B.zeros(4, 8), B.zeros(4, 8), attn_mask=B.zeros(3, 3, 4))", None),
    ("m(B.zeros(1, 3, 2, 8), B.zeros(4, 2, 8), B.zeros(4, 2, 8))", None),
    ("m(B.zeros(3, 2, 6), B.zeros(4, 2, 6), B.zeros(4, 2, 6))", None),
    ("m(B.zeros(3, 2, 8), B.zeros(4, 2, 8), B.zeros(5, 2, 8))", None),
    ("F.multi_head_attention_forward(B.zeros(3, 2, 8), B.zeros(4, 2, 8), B.zeros(4, 2, 8), 8, 3, "
     "m.in_proj_weight, m.in_proj_bias, None, None, False, 0.0, m.out_proj.weight, None)", None),
]


@pytest.mark.parametrize("expr", [e for e, _ in MHA_ERRORS])
def test_mha_errors(torch, expr):
    def env(B, nn_, fn):
        return {"B": B, "nn": nn_, "F": fn, "m": nn_.MultiheadAttention(8, 2)}

    theirs = eval_expr(expr, env(torch, torch.nn, torch.nn.functional))
    ours = eval_expr(expr, env(dynograph, nn, F))
    assert isinstance(theirs, Exception)
    assert_same_error(ours, theirs, expr)


def test_mha_mismatched_mask_types_warn(torch):
    m = nn.MultiheadAttention(8, 2)
    x = dynograph.randn(3, 2, 8)
    kpm = dynograph.zeros(2, 3, dtype=dynograph.bool)
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and attn_mask is "
                                         "deprecated. Use same type for both instead."):
        m(x, x, x, key_padding_mask=kpm, attn_mask=dynograph.zeros(3, 3))


# ----------------------------------------------------------------------------- transformer layers

def _layer_pair(torch, cls, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = getattr(torch.nn, cls)(*args, **kwargs)
        ours = getattr(nn, cls)(*[_convert_kw(a) for a in args],
                                **{k: _convert_kw(v) for k, v in kwargs.items()})
    _copy_params(ours, theirs)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    return ours.eval(), theirs.eval()


def _convert_kw(v):
    import torch
    if v is torch.nn.functional.gelu:
        return F.gelu
    if isinstance(v, torch.nn.GELU):
        return nn.GELU()
    if isinstance(v, torch.nn.Module):  # custom encoder/decoder: built separately by the test
        return v
    if isinstance(v, torch.dtype):
        return getattr(dynograph, str(v).split(".")[-1])
    return v


def _run_layer(torch, ours, theirs, inputs, masks, dtype, **kwargs):
    """inputs: list of shapes; masks: dict of torch masks (converted for dynograph)."""
    g = torch.Generator().manual_seed(11)
    tdt = _tdtype(torch, dtype)
    pairs = [_leaf(torch, s, tdt, g, noncontig=(i == 0)) for i, s in enumerate(inputs)]
    tkw = dict(masks, **kwargs)
    dkw = dict({k: from_torch(v) if v is not None else None for k, v in masks.items()}, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expect = theirs(*[p[0] for p in pairs], **tkw)
        got = ours(*[p[1] for p in pairs], **dkw)
    assert_same(got, expect, **TOL[dtype])
    _backward_both(torch, [got], [expect])
    _assert_grads(ours, theirs, [(p[3], p[2]) for p in pairs], TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation,batch_first", [("relu", False), ("gelu", True), ("fn_gelu", False),
                                                    ("module_gelu", True)])
def test_encoder_layer(torch, activation, batch_first, norm_first, dtype):
    act = {"relu": "relu", "gelu": "gelu", "fn_gelu": torch.nn.functional.gelu,
           "module_gelu": torch.nn.GELU()}[activation]
    ours, theirs = _layer_pair(torch, "TransformerEncoderLayer", 16, 2, 32, 0.1, act,
                               batch_first=batch_first, norm_first=norm_first,
                               dtype=_tdtype(torch, dtype))
    shape = (2, 5, 16) if batch_first else (5, 2, 16)
    _run_layer(torch, ours, theirs, [shape], {}, dtype)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5, dtype=_tdtype(torch, dtype))
    kpm = torch.tensor([[False] * 5, [False, False, False, True, True]])
    _run_layer(torch, ours, theirs, [shape], {"src_mask": mask, "src_key_padding_mask": kpm}, dtype)
    _run_layer(torch, ours, theirs, [shape], {"src_mask": mask}, dtype, is_causal=True)


def test_encoder_layer_unbatched_and_bias_false(torch):
    ours, theirs = _layer_pair(torch, "TransformerEncoderLayer", 16, 4, 24, bias=False,
                               layer_norm_eps=1e-3)
    kpm = torch.tensor([0.0, 0.0, 0.0, float("-inf"), float("-inf")])  # float: additive
    _run_layer(torch, ours, theirs, [(5, 16)], {"src_key_padding_mask": kpm}, "float32")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("norm_first,batch_first,activation", [(False, False, "relu"), (True, True, "gelu")])
def test_decoder_layer(torch, norm_first, batch_first, activation, dtype):
    ours, theirs = _layer_pair(torch, "TransformerDecoderLayer", 16, 2, 32, 0.1, activation,
                               batch_first=batch_first, norm_first=norm_first,
                               dtype=_tdtype(torch, dtype))
    tgt, mem = ((2, 4, 16), (2, 6, 16)) if batch_first else ((4, 2, 16), (6, 2, 16))
    _run_layer(torch, ours, theirs, [tgt, mem], {}, dtype)
    masks = {"tgt_mask": torch.nn.Transformer.generate_square_subsequent_mask(4).bool(),
             "memory_key_padding_mask": torch.tensor([[False] * 6, [False] * 4 + [True] * 2]),
             "tgt_key_padding_mask": torch.tensor([[False] * 4, [False, False, False, True]]),
             "memory_mask": torch.rand(4, 6, generator=torch.Generator().manual_seed(0)) > 0.8}
    masks["memory_mask"][:, 0] = False
    _run_layer(torch, ours, theirs, [tgt, mem], masks, dtype)
    causal = {"tgt_mask": torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=_tdtype(torch, dtype))}
    _run_layer(torch, ours, theirs, [tgt, mem], causal, dtype, tgt_is_causal=True)


@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_and_decoder_stacks(torch, batch_first):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t_layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=batch_first)
        t_enc = torch.nn.TransformerEncoder(t_layer, 2, norm=torch.nn.LayerNorm(16))
        d_layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=batch_first)
        d_enc = nn.TransformerEncoder(d_layer, 2, norm=nn.LayerNorm(16))
    # the layers are deep copies: separate parameters
    assert d_enc.layers[0].linear1.weight is not d_enc.layers[1].linear1.weight
    assert d_enc.layers[0].linear1.weight is not d_layer.linear1.weight
    _copy_params(d_enc, t_enc)
    assert repr(d_enc) == repr(t_enc)
    assert list(d_enc.state_dict()) == list(t_enc.state_dict())
    d_enc.eval(), t_enc.eval()
    shape = (2, 5, 16) if batch_first else (5, 2, 16)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5)
    kpm = torch.tensor([[False] * 5, [False, False, False, False, True]])
    _run_layer(torch, d_enc, t_enc, [shape], {"mask": mask}, "float32")
    _run_layer(torch, d_enc, t_enc, [shape], {"mask": mask, "src_key_padding_mask": kpm}, "float32")
    _run_layer(torch, d_enc, t_enc, [shape], {"src_key_padding_mask": kpm}, "float32")

    t_dec = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(16, 2, 32, batch_first=batch_first), 2)
    d_dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(16, 2, 32, batch_first=batch_first), 2)
    _copy_params(d_dec, t_dec)
    assert repr(d_dec) == repr(t_dec)
    d_dec.eval(), t_dec.eval()
    tgt, mem = ((2, 4, 16), (2, 5, 16)) if batch_first else ((4, 2, 16), (5, 2, 16))
    _run_layer(torch, d_dec, t_dec, [tgt, mem],
               {"tgt_mask": torch.nn.Transformer.generate_square_subsequent_mask(4)}, "float32")


def test_encoder_nested_tensor_warning_and_attributes(torch):
    for kwargs in ({}, {"batch_first": True}, {"batch_first": True, "norm_first": True}):
        t_layer = torch.nn.TransformerEncoderLayer(8, 2, 16, **kwargs)
        d_layer = nn.TransformerEncoderLayer(8, 2, 16, **kwargs)
        with warnings.catch_warnings(record=True) as tw:
            warnings.simplefilter("always")
            t_enc = torch.nn.TransformerEncoder(t_layer, 2)
        with warnings.catch_warnings(record=True) as dw:
            warnings.simplefilter("always")
            d_enc = nn.TransformerEncoder(d_layer, 2)
        assert [str(w.message) for w in dw] == [str(w.message) for w in tw]
        assert d_enc.use_nested_tensor == t_enc.use_nested_tensor
        assert d_enc.enable_nested_tensor and d_enc.mask_check
    assert nn.TransformerEncoderLayer(8, 2, activation="gelu").activation_relu_or_gelu == 2
    assert nn.TransformerEncoderLayer(8, 2).activation_relu_or_gelu == 1
    assert nn.TransformerEncoderLayer(8, 2, activation=F.silu).activation_relu_or_gelu == 0


# ----------------------------------------------------------------------------- full transformer

@pytest.mark.parametrize("batch_first,norm_first", [(False, False), (True, True)])
def test_transformer(torch, batch_first, norm_first):
    kwargs = dict(d_model=16, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
                  dim_feedforward=32, batch_first=batch_first, norm_first=norm_first)
    ours, theirs = _layer_pair(torch, "Transformer", **kwargs)
    assert (ours.d_model, ours.nhead, ours.batch_first) == (16, 2, batch_first)
    src, tgt = ((2, 5, 16), (2, 4, 16)) if batch_first else ((5, 2, 16), (4, 2, 16))
    tgt_mask = torch.nn.Transformer.generate_square_subsequent_mask(4)
    _run_layer(torch, ours, theirs, [src, tgt], {}, "float32")
    masks = {"tgt_mask": tgt_mask,
             "src_key_padding_mask": torch.tensor([[False] * 5, [False] * 3 + [True] * 2]),
             "memory_key_padding_mask": torch.tensor([[False] * 5, [False] * 3 + [True] * 2]),
             "tgt_key_padding_mask": torch.tensor([[False] * 4, [False] * 3 + [True]])}
    _run_layer(torch, ours, theirs, [src, tgt], masks, "float32")
    _run_layer(torch, ours, theirs, [src, tgt], {"tgt_mask": tgt_mask}, "float32", tgt_is_causal=True)
    # unbatched
    _run_layer(torch, ours, theirs, [(5, 16), (4, 16)], {"tgt_mask": tgt_mask}, "float32")


def test_transformer_custom_encoder_decoder_and_training(torch):
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16), 1, enable_nested_tensor=False)
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16), 1)
    model = nn.Transformer(d_model=8, nhead=2, custom_encoder=enc, custom_decoder=dec)
    assert model.encoder is enc and model.decoder is dec
    t_enc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(8, 2, 16), 1,
                                        enable_nested_tensor=False)
    t_dec = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(8, 2, 16), 1)
    theirs = torch.nn.Transformer(d_model=8, nhead=2, custom_encoder=t_enc, custom_decoder=t_dec)
    assert repr(model) == repr(theirs)
    src, tgt = dynograph.randn(5, 2, 8), dynograph.randn(3, 2, 8)
    model.eval()
    a = model(src, tgt)
    assert a.shape == (3, 2, 8) and dynograph.equal(a, model(src, tgt))
    model.train()  # dropout 0.1 active
    b = model(src, tgt)
    assert not dynograph.allclose(a, b)
    b.sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_transformer_default_init_and_mask():
    model = nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                           dim_feedforward=24)
    w = model.encoder.layers[0].linear1.weight
    bound = math.sqrt(6.0 / (16 + 24))  # xavier_uniform_, not Linear's kaiming default
    assert 0.8 * bound < w.abs().max().item() <= bound
    w = model.decoder.layers[0].self_attn.in_proj_weight
    assert w.abs().max().item() <= math.sqrt(6.0 / (48 + 16))
    norm = model.encoder.norm
    assert dynograph.equal(norm.weight, dynograph.ones(16))
    m = nn.Transformer.generate_square_subsequent_mask(4)
    expect = np.triu(np.full((4, 4), -np.inf, dtype=np.float32), 1)
    np.testing.assert_array_equal(m.numpy(), expect)
    assert m.dtype == dynograph.float32
    assert nn.Transformer.generate_square_subsequent_mask(3, dtype=dynograph.float64).dtype == dynograph.float64


def test_transformer_is_causal_detection(torch):
    """A mask equal to the square subsequent mask is detected as causal (same result either way)."""
    from dynograph.nn.modules.transformer import _detect_is_causal_mask
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    assert _detect_is_causal_mask(mask, None, 4)
    assert not _detect_is_causal_mask(mask, None, 5)
    assert not _detect_is_causal_mask(mask.masked_fill(mask == 0, -1.0), None, 4)
    assert _detect_is_causal_mask(None, True) and not _detect_is_causal_mask(mask, False)


TRANSFORMER_ERRORS = [
    "nn.Transformer(8, 2, 1, 1, 16)(B.zeros(5, 2, 8), B.zeros(4, 3, 8))",
    "nn.Transformer(8, 2, 1, 1, 16, batch_first=True)(B.zeros(2, 5, 8), B.zeros(3, 4, 8))",
    "nn.Transformer(8, 2, 1, 1, 16)(B.zeros(5, 2, 6), B.zeros(4, 2, 8))",
    "nn.TransformerEncoderLayer(8, 2, activation='tanh')",
    "nn.TransformerDecoderLayer(8, 2, activation='swish')",
    "nn.TransformerEncoderLayer(8, 3)",
    "nn.TransformerEncoderLayer(8, 2)(B.zeros(5, 2, 8), src_key_padding_mask=B.zeros(2, 5, dtype=B.int64))",
    "nn.TransformerDecoderLayer(8, 2)(B.zeros(5, 2, 8), B.zeros(4, 2, 8), tgt_is_causal=True)",
]


@pytest.mark.parametrize("expr", TRANSFORMER_ERRORS)
def test_transformer_errors(torch, expr):
    theirs = eval_expr(expr, {"B": torch, "nn": torch.nn})
    ours = eval_expr(expr, {"B": dynograph, "nn": nn})
    assert isinstance(theirs, Exception)
    assert_same_error(ours, theirs, expr)


def test_compiled_transformer_is_one_graph():
    """The causal-mask detection does not break a traced graph; compiled equals eager."""
    dynograph.manual_seed(0)
    model = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                           dim_feedforward=16, dropout=0.0).eval()
    src, tgt = dynograph.randn(5, 2, 8), dynograph.randn(3, 2, 8)
    src_mask = nn.Transformer.generate_square_subsequent_mask(5)
    tgt_mask = nn.Transformer.generate_square_subsequent_mask(3).bool()
    kpm = dynograph.tensor([[False] * 5, [False, False, False, True, True]])

    def fn(s, t):
        return model(s, t, src_mask=src_mask, tgt_mask=tgt_mask, src_key_padding_mask=kpm,
                     memory_key_padding_mask=kpm)

    compiled = dynograph.compile(fn, fullgraph=True)
    for _ in range(2):
        got, expect = compiled(src, tgt), fn(src, tgt)
        assert dynograph.allclose(got, expect, rtol=1e-5, atol=1e-5), (got - expect).abs().max()
