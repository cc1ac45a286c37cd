"""IR round-trip cases for the primitives of compiler/ops/special.py and decompositions.py
that have no derivative (tests/test_ir.py's OTHER_CASES takes these)."""
import dynograph as dg
from dynograph._dispatch import call
from dynograph.compiler.ops import decompositions as X
from dynograph.compiler.ops import special as S
from grad_inputs import r

OTHER_CASES = {op.name: ((lambda fn: lambda x: fn(x))(getattr(dg.special, name)),
                         lambda: (r(2, 3, lo=0.2, hi=2),))
               for name, op in S.BESSEL.items()}
OTHER_CASES.update({op.name: ((lambda fn: lambda x: fn(x, 3))(getattr(dg.special, name)),
                              lambda: (r(2, 3),))
                    for name, op in S.POLYNOMIALS.items()})
OTHER_CASES.update({
    "lu_permutation": (lambda a: dg.lu_unpack(*dg.linalg.lu_factor_ex(a)[:2])[0] + a,
                       lambda: (r(3, 3),)),
    "linalg_cholesky_info": (lambda a: call(X.linalg_cholesky_info, a @ a.mT)[0],
                             lambda: (r(3, 3),)),
    "linalg_ldl_factor_ex": (lambda a: dg.linalg.ldl_factor_ex(a + a.mT).LD, lambda: (r(3, 3),)),
    "linalg_ldl_solve": (lambda a, b: dg.linalg.ldl_solve(*dg.linalg.ldl_factor_ex(a + a.mT)[:2], b),
                         lambda: (r(3, 3), r(3, 2, seed=1))),
})
