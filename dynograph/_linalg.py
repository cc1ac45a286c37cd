"""Public linear algebra in the dynograph namespace: matmul (and ``@``), mm, bmm, mv, dot,
the fused ``add*`` products, einsum, tensordot, inner/outer/kron, cross, trace and the
top-level aliases det, inverse, logdet and cholesky, with their Tensor methods (the aliases
that build on ``dynograph.linalg`` are in _linalg_aliases.py).

``matmul`` decomposes into the mm/mv/dot/bmm primitives plus views exactly as PyTorch's
``_matmul_impl`` does (folding batch dims into mm when that needs no copy), so
``(a @ b).grad_fn`` names the same node PyTorch's does.  ``dynograph.linalg`` (linalg.py)
holds the ``torch.linalg`` namespace.
"""
import functools
import warnings

from dynograph.compiler.ops import linalg as L
from dynograph.compiler.ops import movement as M
from dynograph.compiler.ops.core import check_broadcast, wrap_dim
from ._dispatch import call
from ._inplace import assign, write_out
from ._math import where as _where
from ._tensor import Tensor, exporters, tensor_method
from .autograd.grad_mode import STATE

__all__ = []
_public, _function = exporters(__all__)


def finish(result, out):
    if out is None:
        return result
    if isinstance(result, tuple):          # several results: ``out`` is a tuple of tensors
        for o, r in zip(out, result):
            write_out(o, r)
        return type(result)(out)
    return write_out(out, result)


def need_tensor(x, fn, name, pos):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' (position {pos}) must be Tensor, "
                        f"not {type(x).__name__}")


def _inplace_of(fn):
    """Tensor.<name>_: compute out of place, then write into self."""
    def method(self, *args, **kwargs):
        return assign(self, fn(self, *args, **kwargs))
    method.__name__ = fn.__name__ + "_"
    method.__doc__ = f"In-place {fn.__name__}."
    tensor_method(method)
    return method


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


# ---------------------------------------------------------------- products

@_public
def dot(input, tensor, *, out=None):
    """Inner product of two 1-D tensors of one dtype (torch.dot)."""
    need_tensor(input, "dot", "input", 1)
    need_tensor(tensor, "dot", "tensor", 2)
    return finish(call(L.dot, input, tensor), out)


@_public
def vdot(input, other, *, out=None):
    """dot with the first argument conjugated; equal to dot for real tensors (torch.vdot)."""
    need_tensor(input, "vdot", "input", 1)
    need_tensor(other, "vdot", "other", 2)
    return finish(call(L.vdot, input, other), out)


@_public
def mv(input, vec, *, out=None):
    """Matrix @ vector (torch.mv)."""
    need_tensor(input, "mv", "input", 1)
    need_tensor(vec, "mv", "vec", 2)
    return finish(call(L.mv, input, vec), out)


@_public
def mm(input, mat2, *, out=None):
    """Matrix @ matrix, both 2-D and of one dtype (torch.mm)."""
    need_tensor(input, "mm", "input", 1)
    need_tensor(mat2, "mm", "mat2", 2)
    return finish(call(L.mm, input, mat2), out)


@_public
def bmm(input, mat2, *, out=None):
    """Batched matrix @ matrix of two 3-D tensors with equal batch sizes (torch.bmm)."""
    need_tensor(input, "bmm", "input", 1)
    need_tensor(mat2, "bmm", "mat2", 2)
    return finish(call(L.bmm, input, mat2), out)


def _fused(op, input, x, y, names, beta, alpha, out):
    """beta * input + alpha * (x op y): the shared body of addmm and its relatives."""
    need_tensor(input, op.name, "input", 1)
    need_tensor(x, op.name, names[0], 2)
    need_tensor(y, op.name, names[1], 3)
    if beta == 1 and alpha == 1:
        return finish(call(op, input, x, y), out)
    return finish(call(op, input, x, y, beta=beta, alpha=alpha), out)


@_public
def addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * (mat1 @ mat2) (torch.addmm; nn.Linear's kernel)."""
    return _fused(L.addmm, input, mat1, mat2, ("mat1", "mat2"), beta, alpha, out)


@_public
def addmv(input, mat, vec, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * (mat @ vec) (torch.addmv)."""
    return _fused(L.addmv, input, mat, vec, ("mat", "vec"), beta, alpha, out)


@_public
def addbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * sum_i batch1[i] @ batch2[i] (torch.addbmm)."""
    return _fused(L.addbmm, input, batch1, batch2, ("batch1", "batch2"), beta, alpha, out)


@_public
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * bmm(batch1, batch2) (torch.baddbmm)."""
    return _fused(L.baddbmm, input, batch1, batch2, ("batch1", "batch2"), beta, alpha, out)


@_public
def addr(input, vec1, vec2, *, beta=1, alpha=1, out=None):
    """beta * input + alpha * outer(vec1, vec2) (torch.addr)."""
    return _fused(L.addr, input, vec1, vec2, ("vec1", "vec2"), beta, alpha, out)


for _f in (addmm, addmv, addbmm, baddbmm, addr):
    _inplace_of(_f)


# ---------------------------------------------------------------- matmul

def _should_fold(t1, t2, has_out):
    """PyTorch's test for computing a >=3-D @ <=2-D product as one mm/mv on folded batch dims."""
    d1, d2 = t1._data.ndim, t2._data.ndim
    larger = d1 >= d2
    if not (max(d1, d2) >= 3 and min(d1, d2) <= 2):
        return False
    if (t2 if larger else t1).requires_grad and not has_out:
        return True                     # a grad for the small operand is one mm, not a bmm + sum
    if d1 == 2:
        return False
    big = t1._data if larger else t2._data.swapaxes(-1, -2)
    if big.size == 0:
        return True
    shape, strides = big.shape, big.strides
    # folding needs the batch dims (and the row dim) to be one strided dimension
    return all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(big.ndim - 2))


def matmul_impl(t1, t2, has_out=False):
    d1, d2 = t1._data.ndim, t2._data.ndim
    if d1 == 0 or d2 == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{d1}D and {d2}D")
    if d1 == 2 and d2 == 2:
        return call(L.mm, t1, t2)
    if d1 == 1 and d2 == 1:
        return call(L.dot, t1, t2)
    if d1 == 2 and d2 == 1:
        return call(L.mv, t1, t2)
    if not (STATE.grad_enabled and (t1.requires_grad or t2.requires_grad)):
        # nothing to record: one product instead of the views around it
        try:
            return call(L.matmul, t1, t2)
        except (RuntimeError, IndexError):
            pass                        # the decomposition raises PyTorch's exact error
    if d1 == 1 and d2 == 2:
        return call(L.mm, t1.unsqueeze(0), t2).squeeze_(0)
    if _should_fold(t1, t2, has_out):
        return _matmul_folded(t1, t2)
    return _matmul_batched(t1, t2, has_out)


def _matmul_folded(t1, t2):
    """(..., n, k) @ (k, p) as (N, k) @ (k, p); the transposed case for (k, p) @ (..., p, q)."""
    d1, d2 = t1._data.ndim, t2._data.ndim
    transpose = d2 > d1
    if transpose:
        a, b = t2.mT, (t1.t() if d1 == 2 else t1)
    else:
        a, b = t1, t2
    sizes = tuple(a._data.shape)
    out_shape = sizes[:-1]
    folded = a.reshape(_prod(out_shape), sizes[-1])
    if b._data.ndim == 2:
        out_shape += (b._data.shape[1],)
        r = call(M.unsafe_view, call(L.mm, folded, b), shape=out_shape)
        return r.mT.contiguous() if transpose else r
    return call(M.unsafe_view, call(L.mv, folded, b), shape=out_shape)


def _matmul_batched(t1, t2, has_out):
    """Broadcast the batch dims, flatten them, and run one bmm."""
    s1, s2 = tuple(t1._data.shape), tuple(t2._data.shape)
    d1, d2 = len(s1), len(s2)
    n = s1[-2] if d1 > 1 else 1
    m1 = s1[-1]
    batch1 = s1[:max(d1 - 2, 0)]
    m2 = s2[-2] if d2 > 1 else s2[0]
    p = s2[-1] if d2 > 1 else 1
    batch2 = s2[:max(d2 - 2, 0)]
    if d1 == 3 and d2 == 3 and batch1[0] != batch2[0]:
        # a batch of one that needs a gradient is squeezed, so its gradient is an mm
        if batch1[0] == 1 and t1.requires_grad:
            return matmul_impl(t1.squeeze(0), t2, has_out)
        if batch2[0] == 1 and t2.requires_grad:
            return matmul_impl(t1, t2.squeeze(0), has_out)
    batch = check_broadcast(batch1, batch2)
    nb = _prod(batch)
    e1 = _expand_to(t1, batch + (n, m1), (nb, n, m1))
    if d2 == 1:
        e2 = _expand_to(t2, batch + (m2,), (nb, m2)).unsqueeze(2)
    else:
        e2 = _expand_to(t2, batch + (m2, p), (nb, m2, p))
    out_shape = batch + ((n,) if d1 > 1 else ()) + ((p,) if d2 > 1 else ())
    r = call(L.bmm, e1, e2)
    if d2 == 1:
        r = r.squeeze(-1)
    return call(M.unsafe_view, r, shape=out_shape)


def _expand_to(t, shape, flat):
    """``t.expand(shape).reshape(flat)``, skipping the steps that would not change anything."""
    if tuple(t._data.shape) != shape:
        t = t.expand(shape)
    if shape != flat:
        t = t.reshape(flat)
    return t


@_public
def matmul(input, other, *, out=None):
    """Matrix product with PyTorch's rules for 1-D operands (dot, mv, prepended/removed dims)
    and broadcast batch dims (torch.matmul)."""
    need_tensor(input, "matmul", "input", 1)
    need_tensor(other, "matmul", "other", 2)
    if out is None:
        return matmul_impl(input, other)
    if (input.requires_grad or other.requires_grad or out.requires_grad) and STATE.grad_enabled:
        raise RuntimeError("matmul(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    return write_out(out, matmul_impl(input, other, has_out=True))


def _matmul_op(self, other):
    if not isinstance(other, Tensor):
        return NotImplemented
    return matmul_impl(self, other)


def _rmatmul_op(self, other):
    if not isinstance(other, Tensor):
        return NotImplemented
    return matmul_impl(other, self)


Tensor.__matmul__ = _matmul_op
Tensor.__rmatmul__ = _rmatmul_op


# ---------------------------------------------------------------- inner, outer, kron, tensordot

def _outer(input, vec2, name):
    need_tensor(input, name, "input", 1)
    need_tensor(vec2, name, "vec2", 2)
    for what, v in (("self", input), ("vec2", vec2)):
        if v._data.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {what}, but got {v._data.ndim}-D")
    return input.reshape(input._data.shape[0], 1) * vec2


@_public
def outer(input, vec2, *, out=None):
    """Outer product of two 1-D tensors, with type promotion (torch.outer)."""
    return finish(_outer(input, vec2, "outer"), out)


@_public
def ger(input, vec2, *, out=None):
    """Alias of outer (torch.ger)."""
    return finish(_outer(input, vec2, "ger"), out)


def _dims_list(dims, what):
    if isinstance(dims, int):
        raise TypeError(f"tensordot(): argument '{what}' (position 3) must be tuple of ints, "
                        "not int")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    return [int(d) for d in dims]


@_function
def tensordot(a, b, dims=2, out=None):
    """Sum of products over ``dims`` of ``a`` and ``b`` (an int: a's last and b's first dims;
    a pair of lists: the dims to contract), as one mm of permuted, reshaped operands."""
    if isinstance(dims, Tensor) and dims.numel() == 1:
        dims = int(dims.item())
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > min(a._data.ndim, b._data.ndim):
            raise RuntimeError(f"tensordot expects dims < ndim_a or ndim_b, but got dims={dims}")
        dims_a = list(range(-dims, 0))
        dims_b = list(range(dims))
    else:
        if isinstance(dims, Tensor):
            dims = dims.tolist()
        dims_a, dims_b = dims
        dims_a, dims_b = _dims_list(dims_a, "dims_self"), _dims_list(dims_b, "dims_other")
    return finish(_tensordot(a, b, dims_a, dims_b), out)


def _tensordot(a, b, dims_a, dims_b):
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    if a.dtype is not b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    sa, sb = a._data.shape, b._data.shape
    dims_a = [wrap_dim(d, len(sa)) for d in dims_a]
    dims_b = [wrap_dim(d, len(sb)) for d in dims_b]
    csize = 1
    for da, db in zip(dims_a, dims_b):
        n1, n2 = sa[da], sb[db]
        if n2 == 1:                        # a broadcast dimension is summed right away
            a = a.sum(da, keepdim=True, dtype=a.dtype)     # (in the operands' dtype, as torch)
        elif n1 == 1:
            b = b.sum(db, keepdim=True, dtype=b.dtype)
        else:
            if n1 != n2:
                raise RuntimeError(f"contracted dimensions need to match, but first has size {n1} "
                                   f"in dim {da} and second has size {n2} in dim {db}")
            csize *= n1
    for ds in (dims_a, dims_b):
        for d in ds:
            if ds.count(d) > 1:
                raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    free_a = [i for i in range(len(sa)) if i not in dims_a]
    free_b = [i for i in range(len(sb)) if i not in dims_b]
    size_a = _prod(sa[i] for i in free_a)
    size_b = _prod(sb[i] for i in free_b)
    out_shape = tuple(sa[i] for i in free_a) + tuple(sb[i] for i in free_b)
    a2 = a.permute(free_a + dims_a).reshape(size_a, csize)
    b2 = b.permute(dims_b + free_b).reshape(csize, size_b)
    return call(L.mm, a2, b2).reshape(out_shape)


@_public
def inner(input, other, *, out=None):
    """Sum of products over the last dims (a scalar factor when either is 0-d) (torch.inner)."""
    need_tensor(input, "inner", "input", 1)
    need_tensor(other, "inner", "other", 2)
    if input._data.ndim == 0 or other._data.ndim == 0:
        return finish(input * other, out)
    sa, sb = input._data.shape, other._data.shape
    if sa[-1] != sb[-1]:
        raise RuntimeError("inner() the last dimension must match on both input tensors but got "
                           f"shapes {list(sa)} and {list(sb)}")
    return finish(_tensordot(input, other, [-1], [-1]), out)


@_public
def kron(input, other, *, out=None):
    """Kronecker product: every element of input times the whole of other (torch.kron)."""
    need_tensor(input, "kron", "input", 1)
    need_tensor(other, "kron", "other", 2)
    sa, sb = input._data.shape, other._data.shape
    nd = max(len(sa), len(sb))
    sa = (1,) * (nd - len(sa)) + tuple(sa)
    sb = (1,) * (nd - len(sb)) + tuple(sb)
    # interleave: a as (a0, 1, a1, 1, ...), b as (1, b0, 1, b1, ...); their product is the result
    ra = tuple(x for n in sa for x in (n, 1))
    rb = tuple(x for n in sb for x in (1, n))
    prod = input.reshape(ra) * other.reshape(rb)
    return finish(call(M.unsafe_view, prod, shape=tuple(x * y for x, y in zip(sa, sb))), out)


# ---------------------------------------------------------------- cross, trace

_cross_warned = []


@_public
def cross(input, other, dim=None, *, out=None):
    """Cross product along ``dim`` (default: the first dim of size 3, deprecated) (torch.cross)."""
    need_tensor(input, "cross", "input", 1)
    need_tensor(other, "cross", "other", 2)
    if dim is None:
        if not _cross_warned:
            _cross_warned.append(True)
            warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\n"
                          "Please either pass the dim explicitly or simply use torch.linalg.cross.\n"
                          "The default value of dim will change to agree with that of linalg.cross "
                          "in a future release.", UserWarning, stacklevel=2)
        sizes = input._data.shape
        dim = next((i for i, n in enumerate(sizes) if n == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return finish(call(L.linalg_cross, input, other, dim=dim), out)


@_public
def trace(input):
    """Sum of the main diagonal of a 2-D tensor (integers sum to int64) (torch.trace)."""
    need_tensor(input, "trace", "input", 1)
    return call(L.trace, input)


# ---------------------------------------------------------------- einsum

def _label_index(c):
    # uppercase letters sort before lowercase, as in PyTorch (and ASCII)
    return ord(c) - ord("A") if c <= "Z" else 26 + ord(c) - ord("a")


_ELL = "..."


def _sublist_equation(args):
    """einsum(op0, sublist0, op1, sublist1, ..., [out]) as an equation and operands."""
    def letters(sub):
        out = []
        for s in sub:
            if s is Ellipsis:
                out.append(_ELL)
            elif isinstance(s, int) and 0 <= s < 52:
                out.append(chr(ord("A") + s) if s < 26 else chr(ord("a") + s - 26))
            else:
                raise ValueError("einsum(): subscript in subscript list is not within the valid "
                                 "range [0, 52)")
        return "".join(out)
    ops = list(args[0::2])
    subs = list(args[1::2])
    out = None
    if len(ops) > len(subs):           # the trailing output sublist
        out = ops.pop()
        if isinstance(out, Tensor):
            raise ValueError("einsum(): must specify the equation string and at least one "
                             "operand, or at least one operand and its subscripts list")
    eq = ",".join(letters(s) for s in subs)
    if out is not None:
        eq += "->" + letters(out)
    return eq, ops


def _parse_operand(term, pos, index):
    """Labels of one operand's subscripts, with ``_ELL`` for an ellipsis."""
    labels = []
    i = 0
    while i < len(term):
        c = term[i]
        if c == ".":
            if _ELL in labels:
                raise RuntimeError(f"einsum(): found '.' for operand {index} for which an "
                                   "ellipsis was already found")
            if term[i:i + 3] != _ELL:
                raise RuntimeError(f"einsum(): found '.' for operand {index} that is not part "
                                   "of any ellipsis")
            labels.append(_ELL)
            i += 3
            continue
        if c == " ":
            i += 1
            continue
        if not ("a" <= c <= "z" or "A" <= c <= "Z"):
            raise RuntimeError(f"einsum(): invalid subscript given at index {pos + i} in the "
                               "equation string, subscripts must be in [a-zA-Z]")
        labels.append(c)
        i += 1
    return labels


@functools.lru_cache(maxsize=256)
def _parse_equation(eq, nops):
    arrow = eq.find("->")
    lhs = eq if arrow < 0 else eq[:arrow]
    terms, pos = [], 0
    for index, term in enumerate(lhs.split(",")):
        terms.append(_parse_operand(term, pos, index))
        pos += len(term) + 1
    if len(terms) < nops:
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    if len(terms) > nops:
        raise RuntimeError("einsum(): fewer operands were provided than specified in the "
                           "equation")
    terms = tuple(tuple(t) for t in terms)
    if arrow < 0:
        return terms, None
    out = tuple(_parse_operand(eq[arrow + 2:], arrow + 2, 0))
    seen = set()
    for c in out:
        if c != _ELL and c in seen:
            raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the "
                               "output")
        seen.add(c)
    return terms, out


@_function
def einsum(*args):
    """Einstein summation: ``einsum('ij,jk->ik', a, b)``, with implicit output, ellipsis,
    repeated subscripts (diagonals), a list of operands, or the sublist form.  Computed as
    PyTorch does: diagonals and sums per operand, then pairwise bmm contractions."""
    if len(args) < 2:
        raise ValueError("einsum(): must specify the equation string and at least one operand, "
                         "or at least one operand and its subscripts list")
    if isinstance(args[0], str):
        eq, ops = args[0], list(args[1:])
        if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
            ops = list(ops[0])
    else:
        eq, ops = _sublist_equation(args)
    for i, op in enumerate(ops):
        if not isinstance(op, Tensor):
            raise TypeError(f"einsum(): argument 'operands' (position 2) must be tuple of "
                            f"Tensors, not {type(op).__name__}")
    terms, out = _parse_equation(eq, len(ops))
    return _einsum(terms, out, ops)


def _einsum(terms, out, ops):
    ell = _ellipsis_dims(terms, ops)
    labelled, sizes = [], {}
    for i, (t, op) in enumerate(zip(terms, ops)):
        labelled.append(_operand_labels(op, t, ell, sizes, i))
    counts = {}                        # occurrences in the equation (a repeat counts twice)
    for t in terms:
        for c in t:
            if c != _ELL:
                counts[c] = counts.get(c, 0) + 1
    ell_labels = [("...", k) for k in range(ell)]
    if out is None:                    # implicit: ellipsis dims, then labels seen once, sorted
        out_labels = ell_labels + sorted((c for c, n in counts.items()
                                          if n == 1 and c[0] != "..."), key=_label_index)
    else:
        out_labels = []
        for c in out:
            if c == _ELL:
                out_labels += ell_labels
            elif c not in counts:
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the "
                                   "equation for any input operand")
            else:
                out_labels.append(c)
    # left to right, each step keeping the labels that the output or a later operand needs
    keep_after = [set(out_labels)]
    for _, labels in reversed(labelled[1:]):
        keep_after.insert(0, keep_after[0] | set(labels))
    t, labels = labelled[0]
    if len(labelled) == 1:             # as PyTorch: permute (even to the same order), then sum
        summed = [c for c in labels if c not in keep_after[0]]
        t = t.permute([labels.index(c) for c in out_labels + summed])
        return t.sum(list(range(len(out_labels), len(labels)))) if summed else t
    contracted = False
    for (u, ulabels), keep in zip(labelled[1:], keep_after[1:]):
        t, labels, contracted = _contract_pair(t, labels, u, ulabels, keep, sizes)
    perm = [labels.index(c) for c in out_labels]
    if perm != list(range(len(perm))):
        t = t.permute(perm)
    # after a contraction PyTorch ends with a view to the output shape
    return t.reshape(t._data.shape) if contracted else t


def _ellipsis_dims(terms, ops):
    """How many dims the ellipsis covers (the most any operand gives it), after the
    subscript-count checks."""
    ell = 0
    for i, (t, op) in enumerate(zip(terms, ops)):
        nlab = len([c for c in t if c != _ELL])
        nd = op._data.ndim
        if _ELL in t:
            if nlab > nd:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation ({nlab}) is "
                                   f"more than the number of dimensions ({nd}) for operand {i}")
            ell = max(ell, nd - nlab)
        elif nlab != nd:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({nlab}) does "
                               f"not match the number of dimensions ({nd}) for operand {i} and no "
                               "ellipsis was given")
    return ell


def _operand_labels(op, labels, ell, sizes, index):
    """``op`` with the diagonals of its repeated subscripts taken, and its label per dim
    (ellipsis dims are labelled ('...', k), right-aligned); records and checks label sizes."""
    nd = op._data.ndim
    dims = []
    for c in labels:
        if c == _ELL:
            k = nd - (len(labels) - 1)
            dims += [("...", ell - k + j) for j in range(k)]
        else:
            dims.append(c)
    first = {}
    for c, n in zip(dims, op._data.shape):
        if c in first and n != first[c]:
            raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {index} but the "
                               f"sizes don't match, {n} != {first[c]}")
        first.setdefault(c, n)
    while len(first) != len(dims):     # a repeated subscript: its diagonal moves to the end
        dup = next(c for i, c in enumerate(dims) if c in dims[:i])
        i = dims.index(dup)
        j = dims.index(dup, i + 1)
        op = op.diagonal(0, i, j)
        dims = [c for k, c in enumerate(dims) if k not in (i, j)] + [dup]
    for c, n in zip(dims, op._data.shape):
        prev = sizes.get(c)
        if prev is None or prev == 1:
            sizes[c] = n
        elif n != 1 and n != prev:
            if c[0] == "...":
                raise RuntimeError(f"einsum(): dimension {c[1]} covered by ellipsis in operand "
                                   f"{index}has size {n} which does not broadcast with previously "
                                   f"seen ellipsis with size {prev} for the respective dimension")
            raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {index} which "
                               f"does not broadcast with previously seen size {prev}")
    return op, dims


def _sum_labels(t, labels, gone):
    if not gone:
        return t, labels
    return t.sum([labels.index(c) for c in gone]), [c for c in labels if c not in gone]


def _contract_pair(a, la, b, lb, keep, sizes):
    """Multiply two labelled operands and sum the labels not in ``keep``: one bmm over
    (shared kept, a-only, contracted) x (shared kept, contracted, b-only) dims."""
    a, la = _sum_labels(a, la, [c for c in la if c not in lb and c not in keep])
    b, lb = _sum_labels(b, lb, [c for c in lb if c not in la and c not in keep])
    sa, sb = dict(zip(la, a._data.shape)), dict(zip(lb, b._data.shape))
    common = [c for c in la if c in lb]
    contracted = [c for c in common if c not in keep]
    # a contracted label of size 1 on one side only: sum the other side over it first
    gone_a = [c for c in contracted if sb[c] == 1 and sa[c] != 1]
    gone_b = [c for c in contracted if sa[c] == 1 and sb[c] != 1]
    if gone_a or gone_b:
        a = a.sum([la.index(c) for c in gone_a], keepdim=True) if gone_a else a
        b = b.sum([lb.index(c) for c in gone_b], keepdim=True) if gone_b else b
        sa, sb = dict(zip(la, a._data.shape)), dict(zip(lb, b._data.shape))
    batch = [c for c in common if c in keep]
    lo = [c for c in la if c not in lb]
    ro = [c for c in lb if c not in la]
    if not contracted:                 # nothing to sum: a broadcasting product
        a = _arrange(a, la, batch + lo, [sa[c] for c in batch + lo] + [1] * len(ro))
        b = _arrange(b, lb, batch + ro, [sb[c] for c in batch] + [1] * len(lo)
                     + [sb[c] for c in ro])
        return a * b, batch + lo + ro, False
    bs = [max(sa[c], sb[c]) for c in batch]
    los, ros = [sa[c] for c in lo], [sb[c] for c in ro]
    cs = _prod(sa[c] for c in contracted)
    a = _arrange(a, la, batch + lo + contracted, None)
    b = _arrange(b, lb, batch + contracted + ro, None)
    if any(sa[c] != n for c, n in zip(batch, bs)):
        a = a.expand(tuple(bs) + tuple(a._data.shape[len(batch):]))
    if any(sb[c] != n for c, n in zip(batch, bs)):
        b = b.expand(tuple(bs) + tuple(b._data.shape[len(batch):]))
    nb = _prod(bs)
    a = _reshaped(a, (nb, _prod(los), cs))
    b = _reshaped(b, (nb, cs, _prod(ros)))
    r = call(L.bmm, a, b).reshape(bs + los + ros)
    return r, batch + lo + ro, True


def _arrange(t, labels, order, shape):
    """``t`` with its dims permuted into ``order`` (then reshaped to ``shape``, if given)."""
    perm = [labels.index(c) for c in order]
    if perm != list(range(len(perm))):
        t = t.permute(perm)
    if shape is not None and tuple(shape) != tuple(t._data.shape):
        t = t.reshape(shape)
    return t


def _reshaped(t, shape):
    return t if tuple(t._data.shape) == shape else t.reshape(shape)


# ---------------------------------------------------------------- decompositions (aliases)

@_public
def det(input):
    """Determinant of (batches of) square matrices (torch.det = linalg.det)."""
    need_tensor(input, "det", "input", 1)
    return call(L.linalg_det, input)


@_public
def inverse(input, *, out=None):
    """Inverse of (batches of) square matrices (torch.inverse = linalg.inv)."""
    need_tensor(input, "inverse", "input", 1)
    return finish(call(L.linalg_inv, input), out)


@_public
def logdet(input):
    """log(det) of (batches of) square matrices: nan for a negative determinant (torch.logdet)."""
    if not input.dtype.is_floating_point:
        from dynograph.compiler.ops.core import type_name
        raise RuntimeError("logdet: Expected a floating point or complex tensor as input. "
                           f"Got {type_name(input.dtype)}")
    sign, logabs = call(L.linalg_slogdet, input)
    return _where(sign == -1, float("nan"), logabs)


_cholesky_warned = []


@_public
def cholesky(input, upper=False, *, out=None):
    """Cholesky factor (deprecated in torch for linalg.cholesky) (torch.cholesky)."""
    if not _cholesky_warned:
        _cholesky_warned.append(True)
        warnings.warn("torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be "
                      "removed in a future PyTorch release.", UserWarning, stacklevel=2)
    return finish(call(L.linalg_cholesky, input, upper=upper), out)
