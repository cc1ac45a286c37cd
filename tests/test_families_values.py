"""Value differences, swept over argument combinations: the functions a peer's suite found
differing (grid_sample, local_response_norm, multi_head_attention_forward, batch_norm, the
exponential activations, atan2, addcdiv, average and adaptive pooling, interpolate, circular
padding) compared with torch — values and float64 gradients — over their option grids."""
import itertools

import pytest

from families_common import check, check_grad, values


def _grad(torch, fn, *shapes, **kw):
    def make(L):
        leaves = [values(L, s).requires_grad_() for s in shapes]
        return leaves, fn(L, *leaves)
    check_grad(torch, make, **kw)


ACTIVATIONS = {
    "softplus": [dict(beta=b, threshold=t) for b in (1.0, 0.5, 2.0, -1.0) for t in (20.0, 1.0, 0.0)],
    "elu": [dict(alpha=a) for a in (1.0, 0.5, 0.0, -1.0, 2.0)],
    "celu": [dict(alpha=a) for a in (1.0, 0.5, 2.0, -1.5)],
    "selu": [{}],
    "logsigmoid": [{}],
    "silu": [{}],
    "mish": [{}],
    "gelu": [dict(approximate=a) for a in ("none", "tanh")],
    "leaky_relu": [dict(negative_slope=s) for s in (0.01, 0.0, -0.5, 2.0)],
    "hardtanh": [dict(min_val=a, max_val=b) for a, b in ((-1.0, 1.0), (0.0, 0.0), (-0.5, 2.0))],
    "softshrink": [dict(lambd=v) for v in (0.5, 0.0, 1.5)],
    "hardshrink": [dict(lambd=v) for v in (0.5, 0.0, 1.5)],
    "rrelu": [dict(lower=0.1, upper=0.3, training=False)],
    "threshold": [dict(threshold=0.5, value=-2.0)],
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_argument_combinations(torch, name):
    for kw in ACTIVATIONS[name]:
        _grad(torch, lambda L, x: getattr(L.nn.functional, name)(x * 10, **kw), (3, 7))
        check(torch, lambda L: getattr(L.nn.functional, name)(values(L, (5,), L.float32, -30, 30), **kw),
              rtol=1e-5, atol=1e-6)


def test_inplace_activations_match(torch):
    for name, kw in (("elu", dict(alpha=0.5)), ("celu", dict(alpha=2.0)), ("selu", {}),
                     ("leaky_relu", dict(negative_slope=0.2)), ("hardtanh", {}), ("relu6", {}),
                     ("threshold", dict(threshold=0.1, value=3.0)), ("silu", {}), ("mish", {}),
                     ("hardsigmoid", {}), ("hardswish", {})):
        check(torch, lambda L: getattr(L.nn.functional, name)(values(L, (4, 3)), inplace=True, **kw))


def test_atan2_quadrants_and_signed_zeros(torch):
    pts = [0.0, -0.0, 1.0, -1.0, float("inf"), -float("inf"), 2.5]
    check(torch, lambda L: L.atan2(L.tensor(pts).reshape(-1, 1), L.tensor(pts).reshape(1, -1)))
    check(torch, lambda L: L.atan2(values(L, (3,), L.int64), values(L, (3,), L.int32)))
    _grad(torch, lambda L, a, b: L.atan2(a, b), (3, 4), (4,))


@pytest.mark.parametrize("op", ["addcdiv", "addcmul"])
def test_addcdiv_addcmul_values_and_broadcasting(torch, op):
    for value in (1, 0.5, -2.0, 0):
        _grad(torch, lambda L, a, b, c: getattr(L, op)(a, b, c + 3, value=value), (2, 3), (3,), (2, 1))
    check(torch, lambda L: getattr(L, op)(values(L, (3,), L.int64), values(L, (3,), L.int64),
                                          values(L, (3,), L.int64) + 5, value=2))
    check(torch, lambda L: getattr(L, op)(values(L, (3,)), values(L, (3,)), values(L, (3,)) + 3,
                                          value=0.5 if op == "addcdiv" else 2))


@pytest.mark.parametrize("dims", [2, 3])
def test_avg_pool_option_grid(torch, dims):
    shape = (2, 2) + (5, 6, 4)[:dims]
    fn = "avg_pool2d" if dims == 2 else "avg_pool3d"
    for k, s, p, ceil, inc, div in itertools.product((2, 3), (None, 2, 1), (0, 1), (False, True),
                                                     (True, False), (None, 3)):
        if p * 2 > k:
            continue
        kw = dict(kernel_size=k, stride=s, padding=p, ceil_mode=ceil, count_include_pad=inc,
                  divisor_override=div)
        check(torch, lambda L: getattr(L.nn.functional, fn)(values(L, shape), **kw))
    _grad(torch, lambda L, x: getattr(L.nn.functional, fn)(x, 3, 2, 1, True, False), shape)


@pytest.mark.parametrize("kind", ["avg", "max"])
@pytest.mark.parametrize("dims", [1, 2, 3])
def test_adaptive_pooling_sizes(torch, kind, dims):
    shape = (2, 3) + (7, 5, 6)[:dims]
    fn = f"adaptive_{kind}_pool{dims}d"
    for out in ((1,), (3,), (4,), (7,), (10,), (2, None), (None, 3)):
        size = out[0] if dims == 1 else (tuple(out) + (4,) * dims)[:dims]
        if dims == 1 and out[0] is None:
            continue
        check(torch, lambda L: getattr(L.nn.functional, fn)(values(L, shape), size))
    _grad(torch, lambda L, x: getattr(L.nn.functional, fn)(x, 3), shape)


def test_interpolate_configurations(torch):
    shapes = {"linear": (1, 2, 5), "bilinear": (1, 2, 4, 5), "bicubic": (1, 2, 4, 5),
              "trilinear": (1, 1, 3, 4, 2), "nearest": (1, 2, 4, 5), "nearest-exact": (1, 2, 4, 5),
              "area": (1, 2, 4, 5)}
    for mode, shape in shapes.items():
        nd = len(shape) - 2
        aligns = (None,) if mode.startswith("nearest") or mode == "area" else (False, True)
        for align in aligns:
            for size, scale, recompute in (((7,) * nd, None, None), ((3,) * nd, None, None),
                                           (None, 1.7, None), (None, 0.6, None), (None, 2.0, True),
                                           (None, 0.5, False), (None, 3.0, None)):
                kw = dict(size=size, scale_factor=scale, mode=mode, recompute_scale_factor=recompute)
                if align is not None:
                    kw["align_corners"] = align
                check(torch, lambda L: L.nn.functional.interpolate(values(L, shape), **kw),
                      rtol=1e-6, atol=1e-6)
    for mode in ("bilinear", "bicubic"):
        for align in (False, True):
            _grad(torch, lambda L, x: L.nn.functional.interpolate(x, scale_factor=1.5, mode=mode,
                                                                  align_corners=align), (1, 2, 4, 3))
    for mode in ("bilinear", "bicubic"):
        check(torch, lambda L: L.nn.functional.interpolate(values(L, (1, 2, 6, 5)), size=(3, 4), mode=mode,
                                                           antialias=True), rtol=1e-6, atol=1e-6)


def test_grid_sample_option_grid(torch):
    for mode, pad, align, nd in itertools.product(("bilinear", "nearest", "bicubic"),
                                                  ("zeros", "border", "reflection"), (False, True),
                                                  (2, 3)):
        if mode == "bicubic" and nd == 3:
            continue
        shape = (2, 2) + (4, 5, 3)[:nd]
        grid = (2,) + (3, 2, 2)[:nd] + (nd,)
        check(torch, lambda L: L.nn.functional.grid_sample(
            values(L, shape), values(L, grid, lo=-1.3, hi=1.3), mode=mode, padding_mode=pad,
            align_corners=align), rtol=1e-6, atol=1e-6)
        if mode != "nearest":
            _grad(torch, lambda L, x, g: L.nn.functional.grid_sample(
                x, g * 1.2, mode=mode, padding_mode=pad, align_corners=align), shape, grid,
                rtol=1e-5, atol=1e-7)


def test_local_response_norm_sizes(torch):
    for shape in ((2, 5, 4), (2, 6, 3, 3), (1, 4, 2, 2, 2), (3, 5)):
        for size, alpha, beta, k in ((2, 1e-4, 0.75, 1.0), (3, 0.5, 0.5, 2.0), (5, 1.0, 1.0, 0.5),
                                     (1, 0.1, 0.75, 1.0), (8, 0.1, 0.75, 1.0)):
            check(torch, lambda L: L.nn.functional.local_response_norm(values(L, shape), size, alpha,
                                                                        beta, k))
    _grad(torch, lambda L, x: L.nn.functional.local_response_norm(x, 3, 0.5, 0.5, 2.0), (2, 5, 3))


def test_batch_norm_option_grid(torch):
    for shape, training, momentum, affine, stats in itertools.product(
            ((4, 3), (2, 3, 5), (2, 3, 2, 2)), (True, False), (0.1, None, 0.0),
            (False, True), (True, False)):
        if momentum is None and not training:
            continue

        def run(L):
            c = shape[1]
            rm = values(L, (c,)) if stats else None
            rv = values(L, (c,), lo=0.5, hi=2) if stats else None
            w = values(L, (c,)) if affine else None
            b = values(L, (c,)) if affine else None
            if not training and not stats:
                return L.nn.functional.batch_norm(values(L, shape), rm, rv, w, b, training)
            out = L.nn.functional.batch_norm(values(L, shape), rm, rv, w, b, training,
                                             momentum if momentum is not None else 0.1)
            return out, rm, rv
        check(torch, run, rtol=1e-6, atol=1e-7)
    _grad(torch, lambda L, x, w, b: L.nn.functional.batch_norm(x, None, None, w, b, True), (4, 3, 2),
          (3,), (3,))


def test_circular_padding(torch):
    for shape, pad in (((1, 2, 5), (2, 1)), ((1, 2, 5), (0, 4)), ((2, 1, 3, 4), (1, 2, 3, 0)),
                       ((1, 1, 2, 3, 2), (1, 1, 1, 1, 1, 1)), ((1, 2, 5), (-1, 2)),
                       ((2, 3, 4), (5, 0)), ((3, 4), (1, 1))):
        check(torch, lambda L: L.nn.functional.pad(values(L, shape), pad, mode="circular"))
    _grad(torch, lambda L, x: L.nn.functional.pad(x, (1, 2, 2, 0), mode="circular"), (1, 2, 3, 4))


def test_multi_head_attention_forward_combinations(torch):
    e, h, s, n = 4, 2, 3, 2
    for sep, bias_kv, zero_attn, mask, kpm, need_w, avg, causal in itertools.product(
            (False, True), (False, True), (False, True), (None, "float", "bool"), (False, True),
            (True, False), (True, False), (False,)):
        def run(L):
            q = values(L, (s, n, e))
            k = values(L, (s + 1, n, e), lo=-1)
            v = values(L, (s + 1, n, e), lo=-1.5)
            w_in = values(L, (3 * e, e), lo=-0.5, hi=0.5)
            b_in = values(L, (3 * e,))
            w_out = values(L, (e, e), lo=-0.5, hi=0.5)
            b_out = values(L, (e,))
            extra = 1 if bias_kv else 0
            extra += 1 if zero_attn else 0
            am = None
            if mask == "float":
                am = values(L, (s, s + 1), lo=-1, hi=0)
            elif mask == "bool":
                am = L.tensor([[False, True, False, False]] * s)
            pm = L.tensor([[False] * s + [True], [False] * (s + 1)]) if kpm else None
            kw = dict(bias_k=values(L, (1, 1, e)) if bias_kv else None,
                      bias_v=values(L, (1, 1, e), lo=0) if bias_kv else None,
                      add_zero_attn=zero_attn, dropout_p=0.0, out_proj_weight=w_out,
                      out_proj_bias=b_out, training=False, key_padding_mask=pm, need_weights=need_w,
                      attn_mask=am, average_attn_weights=avg, is_causal=causal)
            if sep:
                kw.update(use_separate_proj_weight=True, q_proj_weight=w_in[:e],
                          k_proj_weight=w_in[e:2 * e], v_proj_weight=w_in[2 * e:])
            return L.nn.functional.multi_head_attention_forward(
                q, k, v, e, h, None if sep else w_in, b_in, **kw)
        check(torch, run, rtol=1e-5, atol=1e-6)


def test_interpolate_uint8_rounds_each_pass(torch):
    # torch's uint8 kernels resample one dimension at a time with fixed-point weights, rounding
    # and saturating each pass: dynograph computes each pass in float, so results agree to one
    import numpy as np

    import dynograph
    x = torch.arange(2 * 27 * 27).reshape(1, 2, 27, 27).mul(97).remainder(256).to(torch.uint8)
    for mode in ("bilinear", "bicubic"):
        for align in (False, True):
            for size in ((13, 13), (40, 40), (13, 40)):
                for aa in (False, True):
                    if aa and align:
                        continue
                    kw = dict(size=size, mode=mode, align_corners=align, antialias=aa)
                    a = torch.nn.functional.interpolate(x, **kw)
                    b = dynograph.nn.functional.interpolate(dynograph.tensor(x.numpy()), **kw)
                    assert b.dtype == dynograph.uint8
                    assert np.abs(a.numpy().astype(int) - b.numpy().astype(int)).max() <= 1, kw
