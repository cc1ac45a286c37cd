"""gradcheck cases for the special functions, complex numbers, FFT and decomposition primitives
(compiler/ops/special.py, complex_numbers.py, spectral.py, decompositions.py).  Complex values
enter and leave through real tensors (complex(), view_as_real) so finite differences apply."""
import dynograph as dg
from grad_inputs import F64, r


def _eye(n):
    return dg.eye(n, dtype=F64)


def _c(x, y):
    return dg.complex(x, y)


def _const(*values):
    return dg.tensor(values, dtype=F64)


CASES = {
    # ---------------------------------------------------------------- special functions
    "i0": (dg.special.i0, lambda: (r(2, 3, lo=-2, hi=2),)),
    "special_i0e": (dg.special.i0e, lambda: (r(2, 3, lo=-2, hi=2),)),
    "special_i1": (dg.special.i1, lambda: (r(2, 3, lo=-2, hi=2),)),
    "special_i1e": (dg.special.i1e, lambda: (r(2, 3, lo=-2, hi=2),)),
    "special_ndtri": (dg.special.ndtri, lambda: (r(2, 3, lo=0.1, hi=0.9),)),
    "special_log_ndtr": (dg.special.log_ndtr, lambda: (r(2, 3, lo=-3, hi=3),)),
    "special_erfcx": (dg.special.erfcx, lambda: (r(2, 3, lo=-1, hi=2),)),
    "special_entr": (dg.special.entr, lambda: (r(2, 3, lo=0.2, hi=2),)),
    "special_xlog1py": (dg.special.xlog1py, lambda: (r(2, 3), r(2, 3, lo=0.1, hi=2, seed=1))),
    "special_zeta": (lambda q: dg.special.zeta(_const(2.5, 3.0, 4.5), q),
                     lambda: (r(2, 3, lo=0.5, hi=2),)),
    "igamma": (lambda x: dg.igamma(_const(0.5, 1.5, 3.0), x), lambda: (r(2, 3, lo=0.3, hi=3),)),
    "igammac": (lambda x: dg.igammac(_const(0.5, 1.5, 3.0), x), lambda: (r(2, 3, lo=0.3, hi=3),)),
    # ---------------------------------------------------------------- complex numbers
    "complex": (lambda x, y: dg.view_as_real(_c(x, y)), lambda: (r(2, 3), r(2, 3, seed=1))),
    "polar": (lambda a, t: dg.view_as_real(dg.polar(a, t)),
              lambda: (r(2, 3, lo=0.5, hi=2), r(2, 3, lo=-3, hi=3, seed=1))),
    "view_as_real": (lambda x, y: dg.view_as_real(_c(x, y) * _c(y, x)),
                     lambda: (r(2, 3), r(2, 3, seed=1))),
    "view_as_complex": (lambda x: dg.view_as_real(dg.view_as_complex(x) * dg.view_as_complex(x)),
                        lambda: (r(3, 2),)),
    "real": (lambda x, y: (_c(x, y) * _c(y, x)).real, lambda: (r(2, 3), r(2, 3, seed=1))),
    "imag": (lambda x, y: (_c(x, y) * _c(y, x)).imag, lambda: (r(2, 3), r(2, 3, seed=1))),
    "conj_physical": (lambda x, y: dg.view_as_real(_c(x, y).conj() * _c(y, x)),
                      lambda: (r(2, 3), r(2, 3, seed=1))),
    # ---------------------------------------------------------------- Fourier transforms
    "fft_r2c": (lambda x: dg.view_as_real(dg.fft.rfft(x, norm="ortho")), lambda: (r(2, 6),)),
    "fft_c2c": (lambda x, y: dg.view_as_real(dg.fft.fft2(_c(x, y))), lambda: (r(3, 4), r(3, 4, seed=1))),
    "fft_c2r": (lambda x, y: dg.fft.irfft(_c(x, y), n=6), lambda: (r(2, 4), r(2, 4, seed=1))),
    # ---------------------------------------------------------------- decompositions
    "linalg_solve_triangular": (lambda a, b: dg.linalg.solve_triangular(a + 3 * _eye(3), b, upper=True),
                                lambda: (r(3, 3), r(3, 2, seed=1))),
    "linalg_lu_factor_ex": (lambda a: dg.linalg.lu_factor_ex(a).LU, lambda: (r(3, 3),)),
    "linalg_matrix_exp": (dg.linalg.matrix_exp, lambda: (r(3, 3, lo=-0.5, hi=0.5),)),
    "cholesky_solve": (lambda b, c: dg.cholesky_solve(b, c.tril() + 2 * _eye(3)),
                       lambda: (r(3, 2), r(3, 3, seed=1))),
    "linalg_eig": (lambda a: dg.view_as_real(dg.linalg.eigvals(a + 2 * _eye(3))),
                   lambda: (r(3, 3),)),
    "cholesky_inverse": (lambda c: dg.cholesky_inverse(c.triu() + 2 * _eye(3), upper=True),
                         lambda: (r(3, 3),)),
}
