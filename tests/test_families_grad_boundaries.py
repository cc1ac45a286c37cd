"""Gradients at boundary points: clamp edges of the hard activations, kinks, poles, zeros of
norms and distances, singular and hermitian matrices.  Values and float64 gradients are
compared with torch exactly at those points, where a rule written for the interior goes
wrong (an inclusive edge, 0/0, a decomposition's singular derivative)."""
import math

import pytest

from families_common import check_grad


def _f(L):
    return L.nn.functional


INF = math.inf

# name -> (function of (L, x), the points x takes)
CASES = {
    "hardtanh": (lambda L, x: _f(L).hardtanh(x), [-1.0, 1.0, 0.0, -2.0, 2.0]),
    "hardtanh_bounds": (lambda L, x: _f(L).hardtanh(x, -0.5, 0.5), [-0.5, 0.5, 0.0]),
    "hardtanh_inplace": (lambda L, x: _f(L).hardtanh(x * 1, inplace=True), [-1.0, 1.0, 0.5]),
    "relu6": (lambda L, x: _f(L).relu6(x), [0.0, 6.0, 3.0, -1.0, 7.0]),
    "relu": (lambda L, x: _f(L).relu(x), [0.0, -0.0]),
    "hardsigmoid": (lambda L, x: _f(L).hardsigmoid(x), [-3.0, 3.0, 0.0, -4.0, 4.0]),
    "hardswish": (lambda L, x: _f(L).hardswish(x), [-3.0, 3.0, 0.0, -4.0, 4.0]),
    "clamp": (lambda L, x: L.clamp(x, -1, 1), [-1.0, 1.0, 0.0, -2.0]),
    "clamp_min": (lambda L, x: L.clamp_min(x, 1), [1.0, 0.0, 2.0]),
    "clamp_max": (lambda L, x: L.clamp_max(x, 1), [1.0, 0.0, 2.0]),
    "clamp_tensor_bounds": (lambda L, x: L.clamp(x, x * 0 - 1, x * 0 + 1), [-1.0, 1.0, 0.0]),
    "leaky_relu": (lambda L, x: _f(L).leaky_relu(x, 0.2), [0.0, -1.0]),
    "elu": (lambda L, x: _f(L).elu(x, 0.5), [0.0, -1.0]),
    "celu": (lambda L, x: _f(L).celu(x, 2.0), [0.0, -1.0]),
    "selu": (lambda L, x: _f(L).selu(x), [0.0, -1.0]),
    "softplus_threshold": (lambda L, x: _f(L).softplus(x, beta=2, threshold=1), [0.5, 0.0, 1.0, 20.0]),
    "threshold": (lambda L, x: _f(L).threshold(x, 1.0, 0.0), [1.0, 0.0, 2.0]),
    "hardshrink": (lambda L, x: _f(L).hardshrink(x, 0.5), [0.5, -0.5, 0.0, 1.0]),
    "softshrink": (lambda L, x: _f(L).softshrink(x, 0.5), [0.5, -0.5, 0.0, 1.0]),
    "abs": (lambda L, x: L.abs(x), [0.0, -0.0]),
    "sqrt": (lambda L, x: L.sqrt(x), [0.0]),
    "sign": (lambda L, x: L.sign(x), [0.0]),
    "nextafter": (lambda L, x: L.nextafter(x, x * 0 + 2), [1.0, 3.0]),
    "lgamma_poles": (lambda L, x: L.lgamma(x), [-1.0, -2.5, 1.0]),
    "polygamma_2": (lambda L, x: L.polygamma(2, x), [-0.5, 1.0]),
    "norm_zero": (lambda L, x: L.linalg.norm(x), [0.0, 0.0]),
    "vector_norm_1_zero": (lambda L, x: L.linalg.vector_norm(x, 1), [0.0, 0.0]),
    "vector_norm_3_zero": (lambda L, x: L.linalg.vector_norm(x, 3), [0.0, 0.0]),
    "vector_norm_inf_zero": (lambda L, x: L.linalg.vector_norm(x, INF), [0.0, 0.0]),
    "vector_norm_inf_tie": (lambda L, x: L.linalg.vector_norm(x, INF), [1.0, -1.0]),
    "vector_norm_0": (lambda L, x: L.linalg.vector_norm(x, 0), [0.0, 1.0]),
    "vector_norm_half": (lambda L, x: L.linalg.vector_norm(x, 0.5), [0.0, 1.0]),
    "tensor_norm_zero": (lambda L, x: x.norm(), [0.0, 0.0]),
    "dist_zero": (lambda L, x: L.dist(x, L.zeros_like(x)), [0.0, 0.0]),
    "cdist_zero": (lambda L, x: L.cdist(x.reshape(2, 1), x.reshape(2, 1)), [0.0, 0.0]),
    "normalize_zero": (lambda L, x: _f(L).normalize(x, dim=0), [0.0, 0.0]),
    "cosine_similarity_zero": (lambda L, x: _f(L).cosine_similarity(x, L.ones_like(x), dim=0), [0.0, 0.0]),
    "pairwise_distance_equal": (lambda L, x: _f(L).pairwise_distance(x.reshape(1, 2), x.reshape(1, 2)),
                                [0.0, 0.0]),
    "atan2_origin": (lambda L, x: L.atan2(x, L.zeros_like(x)), [0.0, 1.0]),
    "std_constant": (lambda L, x: x.std(), [1.0, 1.0]),
    "std_mean_constant": (lambda L, x: L.std_mean(x)[0], [1.0, 1.0]),
    "max_tie": (lambda L, x: x.max(), [1.0, 1.0]),
    "amax_tie": (lambda L, x: x.amax(), [1.0, 1.0]),
    "minimum_tie": (lambda L, x: L.minimum(x, L.ones_like(x)), [1.0, 0.0]),
    "fmax_tie": (lambda L, x: L.fmax(x, L.ones_like(x)), [1.0, 0.0]),
    "median_tie": (lambda L, x: x.median(), [1.0, 1.0]),
    "prod_zeros": (lambda L, x: x.prod(), [0.0, 2.0, 0.0]),
    "prod_one_zero": (lambda L, x: x.prod(), [0.0, 3.0]),
    "cumprod_zeros": (lambda L, x: x.cumprod(0), [2.0, 0.0, 3.0]),
    "logsumexp_all_neg_inf": (lambda L, x: x.logsumexp(0), [-INF, -INF]),
    "pow_half_at_zero": (lambda L, x: x ** 0.5, [0.0]),
    "pow_zero_base": (lambda L, x: L.pow(0.0, x), [0.0, 1.0]),
    "xlogy_zero": (lambda L, x: L.xlogy(x, x), [0.0]),
    "sinc_zero": (lambda L, x: L.sinc(x), [0.0]),
    "logsigmoid_extremes": (lambda L, x: _f(L).logsigmoid(x), [0.0, -800.0, 800.0]),
    "renorm_zero_row": (lambda L, x: L.renorm(x.reshape(2, 2), 2, 0, 1.0), [0.0, 0.0, 3.0, 4.0]),
    "smooth_l1_edges": (lambda L, x: _f(L).smooth_l1_loss(x, L.zeros_like(x)), [1.0, 0.0, -1.0]),
    "huber_edges": (lambda L, x: _f(L).huber_loss(x, L.zeros_like(x)), [1.0, 0.0, -1.0]),
    "l1_zero": (lambda L, x: _f(L).l1_loss(x, L.zeros_like(x)), [0.0]),
    "margin_ranking_edge": (lambda L, x: _f(L).margin_ranking_loss(x, L.zeros_like(x), L.ones_like(x)),
                            [0.0]),
    "multi_margin_edge": (lambda L, x: _f(L).multi_margin_loss(x.reshape(1, 2), L.tensor([0])), [1.0, 0.0]),
    "fmod_integers": (lambda L, x: L.fmod(x, 1.0), [1.0, 2.5]),
    "remainder_integers": (lambda L, x: L.remainder(x, 1.0), [1.0, 2.5]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_at_boundary_points(torch, name):
    fn, points = CASES[name]

    def make(L):
        x = L.tensor(points, dtype=L.float64, requires_grad=True)
        return [x], fn(L, x)
    check_grad(torch, make, rtol=1e-7, atol=1e-10)


MATRICES = {
    "singular_rank1": [[1.0, 2.0], [2.0, 4.0]],
    "singular_diag": [[1.0, 0.0], [0.0, 0.0]],
    "zero": [[0.0, 0.0], [0.0, 0.0]],
    "symmetric": [[2.0, 1.0], [1.0, 3.0]],
    "not_symmetric": [[2.0, 1.0], [0.5, 3.0]],
    "wide": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]],
    "tall_rank1": [[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]],
}


@pytest.mark.parametrize("hermitian", [False, True])
@pytest.mark.parametrize("name", sorted(MATRICES))
def test_pinv_gradient_on_singular_and_hermitian_inputs(torch, name, hermitian):
    a = MATRICES[name]
    if hermitian and len(a) != len(a[0]):
        pytest.skip("hermitian needs a square matrix")

    def make(L):
        x = L.tensor(a, dtype=L.float64, requires_grad=True)
        return [x], L.linalg.pinv(x, hermitian=hermitian)
    check_grad(torch, make, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_polygamma_at_poles_is_a_pole(torch, n):
    # at 0, -1, -2 ... torch's float64 values come from sin(pi x) rounding (1e32 where the
    # answer is infinite): the sign and the size must agree, not the rounding noise
    import dynograph
    x = [0.0, -1.0, -2.0]
    ours = dynograph.polygamma(n, dynograph.tensor(x, dtype=dynograph.float64)).tolist()
    theirs = torch.polygamma(n, torch.tensor(x, dtype=torch.float64)).tolist()
    for a, b in zip(ours, theirs):
        if math.isnan(b):
            assert math.isnan(a)
        else:
            assert math.copysign(1, a) == math.copysign(1, b) and abs(a) > 1e30 and abs(b) > 1e30
    g = dynograph.tensor(x, dtype=dynograph.float64, requires_grad=True)
    dynograph.digamma(g).sum().backward()
    assert all(v > 1e30 for v in g.grad.tolist())


@pytest.mark.parametrize("interpolation", ["linear", "midpoint", "lower", "nearest"])
@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
def test_quantile_gradient_reaches_q(torch, fn, interpolation):
    # torch composes quantile from sort and lerp, so a q tensor that requires grad gets one
    def make(L):
        x = L.tensor([[0.5, -1.0, 2.0, 2.0, 0.0], [1.0, 3.0, -2.0, 0.5, 0.25]], dtype=L.float64,
                     requires_grad=True)
        q = L.tensor([0.3, 0.75], dtype=L.float64, requires_grad=True)
        return [x, q], getattr(L, fn)(x, q, dim=1, interpolation=interpolation)
    check_grad(torch, make)
