"""dynograph.masked against torch.masked: every reduction and normalization over masks with
fully masked slices, no mask, broadcast masks and integer inputs; float64 gradients."""
import pytest

from families_common import check, check_grad, values


def _x(L):
    return L.tensor([[1., -2, 3, 0.5], [4, 5, -6, 2], [0, 1, 1, -1]], dtype=L.float64)


MASKS = {
    "rows_and_a_full_row": lambda L: L.tensor([[True, False, True, True], [False] * 4,
                                               [True, True, False, True]]),
    "none": lambda L: None,
    "broadcast_row": lambda L: L.tensor([True, False, True, True]),
    "all": lambda L: L.ones(3, 4, dtype=L.bool),
}

REDUCTIONS = ["sum", "prod", "amax", "amin", "mean", "argmax", "argmin", "logsumexp", "median"]


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions(torch, name, mask):
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            check(torch, lambda L: getattr(L.masked, name)(_x(L), dim, keepdim=keepdim, mask=MASKS[mask](L)))


@pytest.mark.parametrize("mask", sorted(MASKS))
def test_statistics_and_normalizations(torch, mask):
    for dim in (0, 1):
        m = MASKS[mask]
        check(torch, lambda L: L.masked.var(_x(L), dim, unbiased=False, mask=m(L)))
        check(torch, lambda L: L.masked.std(_x(L), dim, mask=m(L)))
        check(torch, lambda L: L.masked.norm(_x(L), 2.0, dim, mask=m(L)))
        check(torch, lambda L: L.masked.norm(_x(L), float("inf"), dim, mask=m(L)))
        check(torch, lambda L: L.masked.normalize(_x(L), 2.0, dim, mask=m(L)))
        for fn in ("softmax", "log_softmax", "softmin", "cumsum", "cumprod"):
            check(torch, lambda L: getattr(L.masked, fn)(_x(L), dim, mask=m(L)))
    check(torch, lambda L: L.masked.sum(_x(L), mask=MASKS[mask](L)))
    check(torch, lambda L: L.masked.mean(_x(L), (0, 1), mask=MASKS[mask](L)))


def test_dtypes_and_logaddexp(torch):
    m = MASKS["rows_and_a_full_row"]
    check(torch, lambda L: L.masked.amax(values(L, (3, 4), L.int32), 1, mask=m(L)))
    check(torch, lambda L: L.masked.sum(values(L, (3, 4), L.int64), 1, mask=m(L)))
    check(torch, lambda L: L.masked.sum(values(L, (3, 4), L.float32), 1, dtype=L.float64, mask=m(L)))
    check(torch, lambda L: L.masked.logaddexp(_x(L), _x(L) * 2, input_mask=m(L), other_mask=~m(L)))


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "softmax", "logsumexp", "norm", "var"])
def test_gradients(torch, name):
    def make(L):
        x = values(L, (3, 4)).requires_grad_()
        m = MASKS["rows_and_a_full_row"](L)
        if name == "norm":
            return [x], L.masked.norm(x, 2.0, 0, mask=m)
        if name == "var":
            return [x], L.masked.var(x, 1, mask=~m | L.tensor([[True], [True], [False]]))
        return [x], getattr(L.masked, name)(x, 0, mask=m)
    check_grad(torch, make)
