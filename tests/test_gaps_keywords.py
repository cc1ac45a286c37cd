"""The legacy linear-algebra functions take torch's binding keyword names (input, input2,
LU_data ...) and give torch's values whichever way they are called."""
import warnings

import numpy as np
import pytest

import dynograph
from conftest import assert_same


def _inputs(T):
    rng = np.random.default_rng(3)
    m = rng.standard_normal((3, 3))
    A = T.tensor(m @ m.T + 3 * np.eye(3))
    b = T.tensor(rng.standard_normal((3, 2)))
    L = T.linalg.cholesky(A)
    LU, piv = T.linalg.lu_factor(A)
    return A, b, L, LU, piv


CALLS = [
    "T.cholesky_inverse(input=L)", "T.cholesky_inverse(L, upper=False)",
    "T.cholesky_inverse(input=L.mT, upper=True)",
    "T.cholesky_solve(input=b, input2=L)", "T.cholesky_solve(b, input2=L, upper=False)",
    "b.cholesky_solve(input2=L)", "T.cholesky_solve(b, L)",
    "T.lu_solve(input=b, LU_data=LU, LU_pivots=piv)", "T.lu_solve(b, LU, piv)",
    "b.lu_solve(LU_data=LU, LU_pivots=piv)",
    "T.triangular_solve(input=b, A=L, upper=False)", "T.triangular_solve(b, L, False, True)",
    "b.triangular_solve(A=L, upper=False, unitriangular=True)",
    "T.matrix_exp(input=A / 4)", "T.linalg.matrix_exp(input=A / 4)", "T.matrix_exp(A / 4)",
]


@pytest.mark.parametrize("expr", CALLS)
def test_legacy_linalg_keywords(torch, expr):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")     # torch's deprecation notes of the legacy solves
        theirs = eval(expr, {"T": torch}, dict(zip("A b L LU piv".split(), _inputs(torch))))
        ours = eval(expr, {"T": dynograph}, dict(zip("A b L LU piv".split(), _inputs(dynograph))))
    assert_same(ours, theirs, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("expr", ["T.cholesky_inverse(L=L)", "T.cholesky_solve(B=b, L=L)",
                                  "T.matrix_exp(A=A)", "T.triangular_solve(b=b, A=L)"])
def test_documented_names_are_not_keywords(torch, expr):
    # torch's docs write L, B, A, b, but its bindings take input/input2: those raise TypeError
    for T in (torch, dynograph):
        with pytest.raises(TypeError):
            eval(expr, {"T": T}, dict(zip("A b L LU piv".split(), _inputs(T))))
