"""Indexing primitives: basic-index views (select, alias; ``slice`` lives in movement.py),
advanced indexing (index, index_put), gather/scatter, index_* along a dim, masked ops,
take/put, nonzero, searchsorted, and copy_slices (the write of a view's new value into its
base, for in-place autograd).

Conventions of this file:

* index tensors are always *inputs* (positional), dims and flags are attributes;
* ``impl`` receives index arrays as they are (int64 or int32); the public layer turns
  boolean masks into integer indices and normalizes Python ints and slices, so the
  primitives see one canonical form;
* out-of-range index *values* are found while running (they are data): the impl raises
  ``IndexOutOfRange`` (an IndexError) or RuntimeError with PyTorch's message, the public
  layer re-raises it as PyTorch's type; shape and dtype errors come from the meta rules;
* derivative rules scatter gradients with the primitives of this file (``index_put``
  with ``accumulate=True``, ``scatter_add``, ``index_add``, ``put``), never numpy.
"""
import functools
import math

import numpy as np

from dynograph.runtime import dtypes as D
from . import creation as C
from . import elementwise as E
from . import movement as M
from .core import TensorSpec, define, type_name, wrap_dim
from .eager import call as _call


class IndexOutOfRange(IndexError):
    """An index value outside its dimension, found by an impl (PyTorch raises IndexError)."""


class _DataDependentSize:
    """The size of an output dimension that only running the op can tell (nonzero,
    masked_select).  Meta rules put it in a shape; it compares equal to any size."""

    def __eq__(self, other):
        return isinstance(other, (int, _DataDependentSize))

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return 0

    def __repr__(self):
        return "?"


DATA_DEPENDENT = _DataDependentSize()

_INDEX_DTYPES = (D.int64, D.int32)
_NP_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))


def _key(dim, item):
    """A numpy index tuple addressing ``item`` along ``dim``."""
    return (slice(None),) * dim + (item,)


def _same(x, shape=None):
    return TensorSpec(tuple(x.shape) if shape is None else tuple(shape), x.dtype)


def dtype_of(x):
    """The dynograph dtype of an array (impl side) or spec (meta side)."""
    dt = x.dtype
    return dt if isinstance(dt, D.dtype) else D.from_numpy_dtype(dt)


def _zeros_like_src(g, src):
    return g.new_zeros(tuple(src.shape))


def check_bounds(idx, size, dim, *, negative=True, exc=RuntimeError, prefix=""):
    """Raise PyTorch's 'index i is out of bounds' for the first bad value of ``idx``."""
    v = _first_out_of_range(idx, -size if negative else 0, size)
    if v is not None:
        raise exc(f"{prefix}index {v} is out of bounds for dimension {dim} with size {size}")


def _run_nonneg(fn, idx, size, dim, *, exc=RuntimeError, prefix=""):
    """``fn()`` with ``idx`` required in [0, size): one reduction finds negatives (numpy would
    wrap them), numpy's own IndexError finds values too large."""
    if idx.size and idx.min() < 0:
        check_bounds(idx, size, dim, negative=False, exc=exc, prefix=prefix)
    try:
        return fn()
    except IndexError:
        check_bounds(idx, size, dim, negative=False, exc=exc, prefix=prefix)
        raise


def _first_out_of_range(idx, lo, hi):
    """The first value of ``idx`` outside [lo, hi), or None (two reductions when all fit)."""
    if idx.size == 0 or (idx.min() >= lo and idx.max() < hi):
        return None
    return int(idx[(idx < lo) | (idx >= hi)].flat[0])


# ---------------------------------------------------------------- basic indexing (views)

def _select(x, dim, index):
    return x[_key(dim, index) + (Ellipsis,)]      # the Ellipsis keeps a 0-d result an array


def _select_meta(x, dim, index):
    shape = tuple(x.shape)
    if not shape:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, len(shape))
    n = shape[d]
    if not -n <= index < n:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(shape)} at dimension {d}")
    return _same(x, shape[:d] + shape[d + 1:])


def _select_vjp(ctx, g):
    a = ctx.attrs
    return (_call(select_scatter, g.new_zeros(tuple(ctx.inputs[0].shape)), g, **a),)


select = define("select", "index", _select, meta=_select_meta, vjp=_select_vjp, view=True,
                doc="The view at position ``index`` of dimension ``dim`` (x[..., i, ...]).")


def slice_length(start, end, step):
    return max(0, (end - start + step - 1) // step)


def normalize_slice(start, end, step, size):
    """PyTorch's clamping of slice bounds to [0, size]; an empty slice has end == start."""
    if step <= 0:
        raise ValueError("slice step cannot be zero" if step == 0 else "step must be greater than zero")
    if start is None:
        start = 0
    elif start < 0:
        start = max(start + size, 0)
    elif start > size:
        start = size
    if end is None:
        end = size
    elif end < 0:
        end = max(end + size, 0)
    elif end > size:
        end = size
    return start, max(end, start), step


alias = define("alias", "index", lambda x: x.view(), meta=lambda x: _same(x),
               vjp=lambda ctx, g: (g,), view=True,
               doc="A new view of all of x (x[...], x[()]).", reindex="alias")


def _scatter_shape_error(src_shape, want):
    raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                       f"{list(src_shape)}, slice size = {list(want)}")


def _select_scatter(x, src, dim, index):
    out = x.copy()
    view = out[_key(dim, index) + (Ellipsis,)]
    if view.shape != src.shape:
        raise ValueError("shape")
    view[...] = src
    return out


def _select_scatter_meta(x, src, dim, index):
    want = _select_meta(x, dim, index).shape
    if tuple(src.shape) != want:
        _scatter_shape_error(src.shape, want)
    return _same(x)


def _select_scatter_vjp(ctx, g):
    a = ctx.attrs
    gx = ctx.needs(0) and _call(select_scatter, g, _zeros_like_src(g, ctx.inputs[1]), **a)
    gs = ctx.needs(1) and _call(select, g, **a)
    return gx, gs


select_scatter = define("select_scatter", "index", _select_scatter, meta=_select_scatter_meta,
                        vjp=_select_scatter_vjp, doc="A copy of x whose select(dim, index) is src.")


# ---------------------------------------------------------------- advanced indexing

def _np_key(indices):
    return tuple(slice(None) if i is None else i for i in indices)


def broadcast_index_shapes(shapes):
    """Broadcast the shapes of index tensors, with PyTorch's IndexError."""
    out = ()
    for s in shapes:
        s = tuple(s)
        n = max(len(out), len(s))
        a = (1,) * (n - len(out)) + out
        b = (1,) * (n - len(s)) + s
        res = []
        for p, q in zip(a, b):
            if p == q or q == 1:
                res.append(p)
            elif p == 1:
                res.append(q)
            else:
                raise IndexError("shape mismatch: indexing tensors could not be broadcast together "
                                 "with shapes " + ", ".join(str(list(t)) for t in shapes))
        out = tuple(res)
    return out


def index_result_shape(shape, indices):
    """The shape of x[indices] (None = whole dim), by PyTorch's (numpy's) placement rule:
    the broadcast index shape replaces adjacent indexed dims in place, else goes first."""
    shape = tuple(shape)
    if len(indices) > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)} "
                         f"(got {len(indices)})")
    where = [d for d, i in enumerate(indices) if i is not None]
    if not where:
        return shape
    for d in where:
        dt = dtype_of(indices[d])
        if dt not in _INDEX_DTYPES:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    bshape = broadcast_index_shapes([indices[d].shape for d in where])
    rest = [shape[d] for d in range(len(shape)) if d not in where]
    if where[-1] - where[0] + 1 == len(where):          # adjacent: in place
        return shape[:where[0]] + bshape + shape[where[-1] + 1:]
    return bshape + tuple(rest)


def _raise_index_bounds(shape, indices):
    """PyTorch numbers the dimension by the position among the index tensors."""
    k = 0
    for d, i in enumerate(indices):
        if i is not None:
            check_bounds(i, shape[d], k, exc=IndexOutOfRange)
            k += 1


def empty_result(shape, indices):
    """The shape of x[indices] when it has no elements (PyTorch checks no bounds then);
    indexing a size-0 dimension with a non-empty index is PyTorch's error."""
    try:
        out = index_result_shape(shape, indices)
    except IndexError:
        return None
    bshape = broadcast_index_shapes([i.shape for i in indices if i is not None])
    if 0 not in bshape and any(i is not None and shape[d] == 0 for d, i in enumerate(indices)):
        raise IndexOutOfRange("index is out of bounds for dimension with size 0")
    return out if 0 in out else None


def _index(x, *indices):
    try:
        return x[_np_key(indices)]
    except IndexError:
        empty = empty_result(x.shape, indices)
        if empty is not None:
            return np.empty(empty, x.dtype)
        _raise_index_bounds(x.shape, indices)
        raise


def _index_meta(x, *indices):
    return _same(x, index_result_shape(x.shape, indices))


def _index_vjp(ctx, g):
    x, *indices = ctx.inputs
    return (_call(index_put, g.new_zeros(tuple(x.shape)), g, *indices, accumulate=True),)


index = define("index", "index", _index, meta=_index_meta, vjp=_index_vjp,
               doc="Advanced indexing x[i0, :, i2] with integer index tensors (None = whole dim).")


_SUMMABLE = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int64, np.int32,
                                             np.int16, np.int8, np.uint8))


def add_rows(out, d, idx, src):
    """``out.index_add_(d, idx, src)`` in place for a 1-D ``idx`` of valid, non-negative
    positions.  Long indices with repeats (an embedding's gradient) are summed per position
    first (sort + reduceat), which is much faster than ``np.add.at``."""
    if idx.size < 64 or out.dtype not in _SUMMABLE:
        np.add.at(out, _key(d, idx), src)
        return
    order = np.argsort(idx, kind="stable")
    s = idx[order]
    starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1])))
    sums = np.add.reduceat(np.take(src, order, axis=d), starts, axis=d)
    out[_key(d, s[starts])] += sums


def _index_put(x, values, *indices, accumulate=False):
    out = x.copy()
    key = _np_key(indices)
    try:
        if accumulate and len(indices) == 1 and indices[0].size >= 64:
            idx = indices[0].reshape(-1)
            if idx.min() < 0:
                idx = np.where(idx < 0, idx + x.shape[0], idx)
            if idx.max() >= x.shape[0] or idx.min() < 0:
                raise IndexError("index out of range")
            rows = np.broadcast_to(values, indices[0].shape + x.shape[1:])
            add_rows(out, 0, idx, rows.reshape((idx.size,) + x.shape[1:]).astype(out.dtype))
        elif accumulate:
            np.add.at(out, key, np.asarray(values).astype(out.dtype, copy=False))
        else:
            out[key] = values
    except IndexError:
        if empty_result(x.shape, indices) is not None:
            return out
        _raise_index_bounds(x.shape, indices)
        raise
    return out


def _index_put_meta(x, values, *indices, accumulate=False):
    shape = index_result_shape(x.shape, indices)
    vdt = dtype_of(values)
    if vdt is not dtype_of(x):
        raise RuntimeError(
            "Index put requires the source and destination dtypes match, got "
            f"{type_name(dtype_of(x))} for the destination and {type_name(vdt)} for the source.")
    vshape = tuple(values.shape)
    ok = len(vshape) <= len(shape) and all(
        v == 1 or v == s for v, s in zip(vshape[::-1], shape[::-1]))
    if not ok:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(vshape)} cannot be "
                           f"broadcast to indexing result of shape {list(shape)}")
    return _same(x)


def _index_put_vjp(ctx, g):
    x, values, *indices = ctx.inputs
    gx = gv = None
    if ctx.needs(0):
        gx = g if ctx.attrs.get("accumulate") else _call(index_put, g, g.new_zeros(()), *indices)
    if ctx.needs(1):
        gv = _call(index, g, *indices)
    return (gx, gv) + (None,) * len(indices)


index_put = define("index_put", "index", _index_put, meta=_index_put_meta, vjp=_index_put_vjp,
                   doc="A copy of x with x[indices] = values (or += with accumulate).")


# ---------------------------------------------------------------- gather / scatter

def _index_dtype_check(index, what):
    # PyTorch checks the dtype only of an index with elements
    if dtype_of(index) not in _INDEX_DTYPES and math.prod(index.shape):
        raise RuntimeError(f"{what}(): Expected dtype int32/int64 for index")


def _gather_meta(x, index, dim, what="gather"):
    xs, ixs = tuple(x.shape), tuple(index.shape)
    d = wrap_dim(dim, len(xs))
    _index_dtype_check(index, what)
    # an index without elements selects nothing: PyTorch checks no more about it
    if max(len(ixs), 1) != max(len(xs), 1) and math.prod(ixs):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    if xs and ixs:
        for k, (n, m) in enumerate(zip(xs, ixs)):
            if k != d and m > n:
                raise RuntimeError(
                    f"Size does not match at dimension {k} expected index {list(ixs)} to be no "
                    f"larger than self {list(xs)} apart from dimension {d}")
    return _same(x, ixs)


def _as_1d(a):
    return a.reshape(1) if a.ndim == 0 else a


def _grid(n, k, nd):
    """arange(n) shaped to broadcast along dimension k of nd dims (small ones cached)."""
    if n <= 1024:
        return _small_grid(n, k, nd)
    return np.arange(n, dtype=np.intp).reshape((1,) * k + (n,) + (1,) * (nd - k - 1))


@functools.lru_cache(maxsize=256)
def _small_grid(n, k, nd):
    a = np.arange(n, dtype=np.intp).reshape((1,) * k + (n,) + (1,) * (nd - k - 1))
    a.flags.writeable = False
    return a


def _along(index, d):
    """The full numpy index addressing, for every element of ``index``, the position
    index[...] along dimension ``d`` (and its own position along the others)."""
    nd = index.ndim
    shape = index.shape
    return tuple(index if k == d else _grid(shape[k], k, nd) for k in range(nd))


def _gather(x, index, dim):
    if index.size == 0:
        _gather_meta(x, index, dim)
        return np.empty(index.shape, x.dtype)
    nd = x.ndim
    shape = index.shape
    if nd != index.ndim or nd == 0 or index.dtype not in _NP_INDEX_DTYPES:
        _gather_meta(x, index, dim)
        x, index = _as_1d(x), _as_1d(index)
        nd = 1
    d = dim % nd
    xs, ixs = x.shape, index.shape
    if ixs[:d] != xs[:d] or ixs[d + 1:] != xs[d + 1:]:
        if any(m > n for k, (n, m) in enumerate(zip(xs, ixs)) if k != d):
            _gather_meta(x, index, dim)
    return _run_nonneg(lambda: x[_along(index, d)], index, xs[d], d).reshape(shape)
def _gather_vjp(ctx, g):
    x, idx = ctx.inputs
    xs, ixs = tuple(x.shape), tuple(idx.shape)
    d = wrap_dim(ctx.attrs["dim"], len(xs)) if xs else 0
    if xs and len(ixs) == len(xs) and ixs[d] == 1 and ixs[:d] == xs[:d] and \
            ixs[d + 1:] == xs[d + 1:]:
        # one pick per line (cross-entropy's): the gradient is g where the position along
        # ``d`` is the picked one.  A comparison and a select fuse with g's producer, where a
        # scatter into zeros runs on its own.  ``g + 0.0`` is the scatter's 0.0 + g: -0.0
        # becomes 0.0 as there.  (The forward gather has checked the indices.)
        n = xs[d]
        positions = _call(C.arange, start=0, end=n, step=1, dtype=idx.dtype)
        positions = positions.reshape((1,) * d + (n,) + (1,) * (len(xs) - d - 1))
        if positions.device != idx.device:
            positions = positions.to(idx.device)
        return (_call(E.where, idx == positions, g + 0.0, g.new_zeros(())), None)
    return (_call(scatter_add, g.new_zeros(xs), idx, g, dim=ctx.attrs["dim"]), None)


def _gather_into(owner, args, attrs, out, compile_kernel):
    """A program's gather of one pick per line (cross-entropy's) into its buffer (planned, or a
    recycled result): the picks' flat positions and one ``take``, after one check of the
    indices; None (the impl) elsewhere.  The general gather's indexing tuple and fancy
    indexing took 50-130 µs of the MLP step, and its new array each call made the loss's
    kernel bind anew."""
    x, index = args
    if out is None or type(x) is not np.ndarray or type(index) is not np.ndarray or \
            x.ndim == 0 or index.ndim != x.ndim or index.dtype not in _NP_INDEX_DTYPES or \
            out.dtype != x.dtype or out.shape != index.shape or not x.flags.c_contiguous:
        return None
    d = attrs["dim"] % x.ndim
    if index.shape[d] != 1 or index.shape[:d] != x.shape[:d] or \
            index.shape[d + 1:] != x.shape[d + 1:] or x.size == 0:
        return None
    n = x.shape[d]
    if index.min() < 0 or index.max() >= n:
        check_bounds(index, n, d, negative=False)
    after = math.prod(x.shape[d + 1:])
    # pick (..., i, ...) sits at line * n * after + i * after + k: ``lines`` holds the rest
    positions = index.astype(np.intp, copy=False)
    if after != 1:
        positions = positions * after
    positions = positions + _pick_lines(index.shape, n, after)
    return np.take(x.reshape(-1), positions, out=out, mode="clip")     # (checked above)


@functools.lru_cache(maxsize=64)
def _pick_lines(shape, n, after):
    """The flat position of each line's first element, in the shape of a pick-per-line index."""
    lines = math.prod(shape) // after
    starts = (np.arange(lines, dtype=np.intp) * (n * after)).reshape(lines, 1) + \
        np.arange(after, dtype=np.intp)
    starts = starts.reshape(shape)
    starts.flags.writeable = False
    return starts


gather = define("gather", "index", _gather, meta=_gather_meta, vjp=_gather_vjp,
                doc="out[i][j] = x[index[i][j]][j] (dim 0): values along dim picked by index.",
                kernel=_gather_into)


def _scatter_coords(index, dim):
    """The full coordinates, in self, of every element of ``index`` (along ``dim``)."""
    return _along(index, dim)


def _scatter_check(x, index, src, dim, what="scatter"):
    """PyTorch's shape/dtype checks shared by scatter, scatter_add and scatter_reduce."""
    xs, ixs = tuple(x.shape), tuple(index.shape)
    d = wrap_dim(dim, len(xs))
    _index_dtype_check(index, what)
    if src is not None and dtype_of(src) is not dtype_of(x):
        raise RuntimeError(f"{what}(): Expected self.dtype to be equal to src.dtype")
    if not math.prod(ixs):
        return d                    # an empty index writes nothing (PyTorch checks no more)
    if max(len(ixs), 1) != max(len(xs), 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    if src is not None and max(len(ixs), 1) != max(len(src.shape), 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    if xs and ixs:
        ss = tuple(src.shape) if src is not None else None
        bad_self = any(k != d and m > n for k, (n, m) in enumerate(zip(xs, ixs)))
        bad_src = ss is not None and any(m > n for n, m in zip(ss, ixs))
        if bad_self or bad_src:
            msg = (f"Expected index {list(ixs)} to be no larger than self {list(xs)} apart from "
                   f"dimension {d}")
            if ss is not None:
                msg += f" and to be no larger size than src {list(ss)}"
            raise RuntimeError(msg)
    return d


def _scatter_prepare(x, index, src, dim):
    """(copy of x as >=1-d, coordinates, the used part of src) for the scatter impls."""
    out = _as_1d(x).copy()
    i1 = _as_1d(index)
    d = dim % out.ndim
    if i1.size == 0:                # nothing to write, whatever the index's rank
        empty = np.zeros(0, np.intp)
        return out, (empty,) * out.ndim, (src.reshape(-1)[:0] if isinstance(src, np.ndarray) else src)
    if i1.size and i1.min() < 0:
        check_bounds(i1, out.shape[d], d, negative=False)
    coords = _scatter_coords(i1, d)
    if isinstance(src, np.ndarray) and src.shape != i1.shape:
        src = _as_1d(src)[tuple(slice(0, m) for m in i1.shape)]
    return out, coords, src


def _scatter_write(write, out, index, dim):
    """Run the scatter ``write``; an index too large raises PyTorch's error."""
    try:
        write()
    except IndexError:
        i1 = _as_1d(index)
        d = dim % out.ndim
        check_bounds(i1, out.shape[d], d, negative=False)
        raise


_LEGACY_REDUCE = {None: None, "add": np.add, "multiply": np.multiply}


def _scatter_impl(x, index, src, dim, reduce=None):
    _check_legacy_reduce(reduce)
    _scatter_check(x, index, src, dim)
    out, coords, s = _scatter_prepare(x, index, src, dim)
    ufunc = _LEGACY_REDUCE[reduce]
    if ufunc is None:
        _scatter_write(lambda: out.__setitem__(coords, s), out, index, dim)
    else:
        _scatter_write(lambda: ufunc.at(out, coords, s), out, index, dim)
    return out.reshape(x.shape)


def _check_legacy_reduce(reduce):
    if reduce not in _LEGACY_REDUCE:
        raise RuntimeError("reduce argument must be either add or multiply.")


def _scatter_meta(x, index, src, dim, reduce=None):
    _check_legacy_reduce(reduce)
    _scatter_check(x, index, src, dim)
    return _same(x)


def _fit_to(g, shape):
    """``g`` (index-shaped) padded with zeros to ``shape`` (a src larger than index)."""
    gs = tuple(g.shape)
    for d, (m, n) in enumerate(zip(gs, shape)):
        if m != n:
            full = list(g.shape)
            full[d] = n
            g = _call(M.slice_scatter, g.new_zeros(tuple(full)), g, dim=d, start=0, end=m, step=1)
    return g


def _no_reduce_grad(ctx, name):
    if ctx.attrs.get("reduce") is not None:
        raise RuntimeError(f"the derivative for '{name}' with a reduce argument is not implemented.")


def _scatter_vjp(ctx, g):
    _no_reduce_grad(ctx, "scatter")
    x, idx, src = ctx.inputs
    d = ctx.attrs["dim"]
    gx = ctx.needs(0) and _call(scatter_value, g, idx, dim=d, value=0)
    gs = ctx.needs(2) and _fit_to(_call(gather, g, idx, dim=d), tuple(src.shape))
    return gx, None, gs


scatter = define("scatter", "index", _scatter_impl, meta=_scatter_meta, vjp=_scatter_vjp,
                 doc="A copy of x with x[index[i][j]][j] = src[i][j] (dim 0).")


def _scatter_value_impl(x, index, dim, value, reduce=None):
    _check_legacy_reduce(reduce)
    _scatter_check(x, index, None, dim)
    out, coords, _ = _scatter_prepare(x, index, None, dim)
    v = np.asarray(value).astype(out.dtype)
    ufunc = _LEGACY_REDUCE[reduce]
    if ufunc is None:
        _scatter_write(lambda: out.__setitem__(coords, v), out, index, dim)
    else:
        _scatter_write(lambda: ufunc.at(out, coords, v), out, index, dim)
    return out.reshape(x.shape)


def _scatter_value_meta(x, index, dim, value, reduce=None):
    _check_legacy_reduce(reduce)
    _scatter_check(x, index, None, dim)
    return _same(x)


def _scatter_value_vjp(ctx, g):
    _no_reduce_grad(ctx, "scatter")
    return (_call(scatter_value, g, ctx.inputs[1], dim=ctx.attrs["dim"], value=0), None)


scatter_value = define("scatter_value", "index", _scatter_value_impl, meta=_scatter_value_meta,
                       vjp=_scatter_value_vjp, grad_name="ScatterBackward1",
                       doc="A copy of x with x[index[i][j]][j] = value (dim 0).")


def _scatter_add_impl(x, index, src, dim):
    _scatter_check(x, index, src, dim, "scatter")
    out, coords, s = _scatter_prepare(x, index, src, dim)
    _scatter_write(lambda: np.add.at(out, coords, s), out, index, dim)
    return out.reshape(x.shape)


def _scatter_add_meta(x, index, src, dim):
    _scatter_check(x, index, src, dim, "scatter")
    return _same(x)


def _scatter_add_vjp(ctx, g):
    x, idx, src = ctx.inputs
    gs = ctx.needs(2) and _fit_to(_call(gather, g, idx, dim=ctx.attrs["dim"]), tuple(src.shape))
    return g, None, gs


scatter_add = define("scatter_add", "index", _scatter_add_impl, meta=_scatter_add_meta,
                     vjp=_scatter_add_vjp, doc="A copy of x with x[index[i][j]][j] += src[i][j].")

_REDUCE_UFUNC = {"sum": np.add, "prod": np.multiply, "mean": np.add, "amax": np.maximum,
                 "amin": np.minimum}


def _reduce_identity(reduce, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if D.is_floating(dtype):
        return -np.inf if reduce == "amax" else np.inf
    if dtype.kind == "b":
        return reduce == "amin"
    info = np.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _scatter_reduce_impl(x, index, src, dim, reduce, include_self=True):
    _scatter_reduce_meta(x, index, src, dim, reduce, include_self)
    out, coords, s = _scatter_prepare(x, index, src, dim)
    if not include_self:
        _scatter_write(lambda: out.__setitem__(coords, _reduce_identity(reduce, out.dtype)),
                       out, index, dim)
    _scatter_write(lambda: _REDUCE_UFUNC[reduce].at(out, coords, s), out, index, dim)
    if reduce == "mean":
        count = np.full(out.shape, 1 if include_self else 0, np.int64)
        np.add.at(count, coords, 1)
        count = np.maximum(count, 1)
        if out.dtype.kind in "iub":
            out = np.floor_divide(out, count).astype(out.dtype)
        else:
            out = (out / count).astype(out.dtype)
    return out.reshape(x.shape)


def _scatter_reduce_meta(x, index, src, dim, reduce, include_self=True):
    if reduce not in _REDUCE_UFUNC:
        raise RuntimeError("reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    _scatter_check(x, index, src, dim, "scatter_reduce")
    if reduce == "mean" and dtype_of(x) is D.bool:
        raise NotImplementedError("\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for "
                                  "'Bool'")
    return _same(x)


def _scatter_reduce_vjp(ctx, g):
    """PyTorch's scatter_reduce_backward, written with tensor ops."""
    x, idx, src = ctx.inputs
    a = ctx.attrs
    d, reduce, incl = a["dim"], a["reduce"], a.get("include_self", True)
    out = ctx.output

    def pick(t):
        return _call(gather, t, idx, dim=d)

    if reduce == "sum":
        gx, gs = g, pick(g)
    elif reduce == "mean":
        n = (g.new_ones(tuple(g.shape)) if incl else g.new_zeros(tuple(g.shape)))
        n = _call(scatter_add, n, idx, src.new_ones(tuple(src.shape)), dim=d)
        n = n.masked_fill(n == 0, 1)
        gx = g / n
        gs = pick(g) / pick(n)
    elif reduce == "prod":
        masked_self = x.masked_fill(x == 0, 1)
        masked_self_result = _call(scatter_reduce, masked_self, idx, src, **a)
        gx = g * masked_self_result / masked_self
        src_zero = src == 0
        zeros_f = _call(scatter_add, g.new_zeros(tuple(x.shape)), idx,
                        src.new_zeros(tuple(src.shape)).masked_fill(src_zero, 1), dim=d)
        single_zero = src_zero & (pick(zeros_f) == 1)
        masked_src = src.masked_fill(single_zero, 1)
        masked_src_result = _call(scatter_reduce, x, idx, masked_src, **a)
        gs = _call(E.where, single_zero, pick(g * masked_src_result),
                   pick(g * out) / src.masked_fill(src_zero, 1))
    else:                                           # amax / amin: ties share the gradient
        value = pick(out)
        self_is = g.new_zeros(tuple(x.shape)).masked_fill(x == out, 1)
        src_is = src.new_zeros(tuple(src.shape)).masked_fill(src == value, 1)
        n = _call(scatter_add, self_is, idx, src_is, dim=d)
        share = g / n
        gx = share.masked_fill(x != out, 0)
        gs = pick(share).masked_fill(src != value, 0)
    if not incl:
        gx = _call(scatter_value, gx, idx, dim=d, value=0)
    return gx, None, _fit_to(gs, tuple(src.shape))


scatter_reduce = define("scatter_reduce", "index", _scatter_reduce_impl, meta=_scatter_reduce_meta,
                        vjp=_scatter_reduce_vjp,
                        doc="x with src reduced (sum/prod/mean/amax/amin) into x[index] along dim.")


# ---------------------------------------------------------------- index_* along one dim

def _vector_index(index):
    return index.reshape(-1) if index.ndim == 0 else index


def _index_select(x, index, dim):
    if index.ndim != 1 or index.dtype not in _NP_INDEX_DTYPES or x.ndim == 0:
        _index_select_meta(x, index, dim)
    i = _vector_index(index)
    if x.ndim == 0:
        check_bounds(i, 1, 0, negative=False)
        return x.copy()
    d = dim % x.ndim
    n = x.shape[d]
    if n == 0 and i.size:
        raise RuntimeError("index_select(): self indexing axis dim should be positive")
    try:
        if i.size and i.min() < 0:
            raise IndexError
        return np.take(x, i, axis=d)
    except IndexError:
        v = _first_out_of_range(i, 0, n)
        raise RuntimeError(f"INDICES element is out of DATA bounds, id={v} axis_dim={n}") from None


def _index_select_meta(x, index, dim):
    xs = tuple(x.shape)
    d = wrap_dim(dim, len(xs))
    if len(index.shape) > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if dtype_of(index) not in _INDEX_DTYPES:
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    k = 1 if not index.shape else index.shape[0]
    if not xs:
        if k != 1:
            raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got {k} "
                               "value(s)")
        return _same(x)
    shape = list(xs)
    shape[d] = k
    return _same(x, shape)


def _index_select_vjp(ctx, g):
    x, idx = ctx.inputs
    return (_call(index_add, g.new_zeros(tuple(x.shape)), idx, g, dim=ctx.attrs["dim"]), None)


index_select = define("index_select", "index", _index_select, meta=_index_select_meta,
                      vjp=_index_select_vjp, doc="The entries index of dimension dim (a copy).")


def _index_add_meta(x, index, source, dim, alpha=1):
    xs, ss = tuple(x.shape), tuple(source.shape)
    d = wrap_dim(dim, len(xs))
    if len(index.shape) > 1:
        raise IndexError(f"index_add_(): Index is supposed to be a vector, but got dim: "
                         f"{len(index.shape)} with type: {type_name(dtype_of(index))} and size: "
                         f"{list(index.shape)}")
    if dtype_of(index) not in _INDEX_DTYPES:
        raise RuntimeError(f"index_add_(): Expected dtype int32/int64 for index but got: "
                           f"{type_name(dtype_of(index))}")
    if dtype_of(source) is not dtype_of(x):
        raise RuntimeError(f"index_add_(): self ({type_name(dtype_of(x))}) and source "
                           f"({type_name(dtype_of(source))}) must have the same scalar type")
    k = 1 if not index.shape else index.shape[0]
    if xs and ss:
        if len(xs) != len(ss) or any(a != b for j, (a, b) in enumerate(zip(xs, ss)) if j != d):
            raise RuntimeError("source tensor shape must match self tensor shape, excluding the "
                               f"specified dimension. Got self.shape = {list(xs)} source.shape = "
                               f"{list(ss)}")
    sk = ss[d] if len(ss) > d else 1
    if k != sk:
        raise RuntimeError(f"index_add_(): Number of indices ({k}) should be equal to "
                           f"source.size(dim): ({sk}), for dim: {d}")
    return _same(x)


def _add_rows_checked(out, d, i, src):
    if i.size and i.max() >= out.shape[d]:
        raise IndexError("index out of range")
    add_rows(out, d, i, src)


def _index_add(x, index, source, dim, alpha=1):
    _index_add_meta(x, index, source, dim, alpha)
    if x.size == 0:
        return x.copy()
    out = _as_1d(x).copy()
    i = _vector_index(index)
    d = dim % out.ndim
    src = source.reshape(out.shape[:d] + (i.shape[0],) + out.shape[d + 1:])
    if alpha != 1:
        src = src * np.asarray(alpha).astype(out.dtype)
    src = src.astype(out.dtype, copy=False)
    _run_nonneg(lambda: _add_rows_checked(out, d, i, src), i, out.shape[d], d)
    return out.reshape(x.shape)


def _index_add_vjp(ctx, g):
    x, idx, src = ctx.inputs
    a = ctx.attrs
    gs = None
    if ctx.needs(2):
        gs = _call(index_select, g, idx, dim=a["dim"]) if g.ndim else g.reshape((1,))
        alpha = a.get("alpha", 1)
        if alpha != 1:
            gs = gs * alpha
        if tuple(gs.shape) != tuple(src.shape):
            gs = gs.reshape(tuple(src.shape))
    return g, None, gs


index_add = define("index_add", "index", _index_add, meta=_index_add_meta, vjp=_index_add_vjp,
                   doc="A copy of x with x.select(dim, index[i]) += alpha * source.select(dim, i).")


def _index_copy_meta(x, index, source, dim):
    xs, ss = tuple(x.shape), tuple(source.shape)
    d = wrap_dim(dim, len(xs))
    if len(index.shape) > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got "
                         f"{len(index.shape)})")
    if dtype_of(index) is not D.int64:
        raise RuntimeError("index_copy_(): Expected a long tensor for index, but got "
                         f"{type_name(dtype_of(index))}")
    if dtype_of(source) is not dtype_of(x):
        raise RuntimeError("index_copy_(): self and source expected to have the same dtype, but "
                           f"got (self) {type_name(dtype_of(x))} and (source) {type_name(dtype_of(source))}")
    k = 1 if not index.shape else index.shape[0]
    sk = ss[d] if len(ss) > d else 1
    if k != sk:
        raise IndexError(f"index_copy_(): Number of indices ({k}) should be equal to "
                         f"source.size(dim) ({sk})")
    if xs and ss:
        for j in range(max(len(xs), len(ss))):
            if j == d:
                continue
            a = xs[j] if j < len(xs) else 1
            b = ss[j] if j < len(ss) else 1
            if a != b:
                raise RuntimeError(
                    "index_copy_(): Source/destination tensor must have same slice shapes. "
                    f"Destination slice shape: {_slice_shape(xs, d)} at dimension {d} and "
                    f"source slice shape: {_slice_shape(ss, d)} at dimension 0.")
    return _same(x)


def _slice_shape(shape, d):
    return " ".join(str(n) for j, n in enumerate(shape) if j != d)


def _index_copy(x, index, source, dim):
    _index_copy_meta(x, index, source, dim)
    if x.size == 0:
        return x.copy()
    out = _as_1d(x).copy()
    i = _vector_index(index)
    d = dim % out.ndim
    src = source.reshape(out.shape[:d] + (i.shape[0],) + out.shape[d + 1:])
    _run_nonneg(lambda: out.__setitem__(_key(d, i), src), i, out.shape[d], d,
                exc=IndexOutOfRange, prefix="index_copy_(): ")
    return out.reshape(x.shape)


def _index_copy_vjp(ctx, g):
    x, idx, src = ctx.inputs
    d = ctx.attrs["dim"]
    gx = ctx.needs(0) and _call(index_fill, g, idx, dim=d, value=0)
    gs = None
    if ctx.needs(2):
        gs = _call(index_select, g, idx, dim=d) if g.ndim else g.reshape((1,))
        if tuple(gs.shape) != tuple(src.shape):
            gs = gs.reshape(tuple(src.shape))
    return gx, None, gs


index_copy = define("index_copy", "index", _index_copy, meta=_index_copy_meta, vjp=_index_copy_vjp,
                    doc="A copy of x with x.select(dim, index[i]) = source.select(dim, i).")


def _index_fill_meta(x, index, dim, value=None):
    wrap_dim(dim, len(x.shape))
    if len(index.shape) > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    if dtype_of(index) is not D.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    return _same(x)


def _index_fill_write(x, index, dim, value):
    if x.size == 0:
        return x.copy()
    out = _as_1d(x).copy()
    i = _vector_index(index)
    d = dim % out.ndim
    try:                                    # numpy wraps negatives once, as PyTorch does
        out[_key(d, i)] = value
    except IndexError:
        check_bounds(i, out.shape[d], d, exc=IndexOutOfRange)
        raise
    return out.reshape(x.shape)


def _index_fill(x, index, dim, value):
    _index_fill_meta(x, index, dim)
    return _index_fill_write(x, index, dim, np.asarray(value).astype(x.dtype))


index_fill = define("index_fill", "index", _index_fill, meta=_index_fill_meta,
                    vjp=lambda ctx, g: (_call(index_fill, g, ctx.inputs[1], dim=ctx.attrs["dim"],
                                              value=0), None),
                    doc="A copy of x with x.select(dim, i) = value for every i in index.")


def _index_fill_tensor_meta(x, index, value, dim):
    if len(value.shape):
        raise RuntimeError("index_fill_ only supports a 0-dimensional value tensor, but got tensor "
                           f"with {len(value.shape)} dimension(s).")
    return _index_fill_meta(x, index, dim)


def _index_fill_tensor(x, index, value, dim):
    _index_fill_tensor_meta(x, index, value, dim)
    return _index_fill_write(x, index, dim, value.astype(x.dtype))


def _index_fill_tensor_vjp(ctx, g):
    x, idx, value = ctx.inputs
    d = ctx.attrs["dim"]
    gx = ctx.needs(0) and _call(index_fill, g, idx, dim=d, value=0)
    gv = None
    if ctx.needs(2):                # every filled position once, also for repeated indices
        gv = (g - _call(index_fill, g, idx, dim=d, value=0)).sum()
    return gx, None, gv


index_fill_tensor = define("index_fill_tensor", "index", _index_fill_tensor,
                           meta=_index_fill_tensor_meta, vjp=_index_fill_tensor_vjp,
                           grad_name="IndexFillBackward1",
                           doc="index_fill with a 0-d tensor value (differentiable in value).")


# ---------------------------------------------------------------- masks

def _mask_dtype_check(mask, msg):
    if dtype_of(mask) is not D.bool:
        raise RuntimeError(msg)


def _broadcast_pair(a, b):
    from .core import check_broadcast
    return check_broadcast(tuple(a), tuple(b))


def _masked_select(x, mask):
    _masked_select_meta(x, mask)
    xb, mb = np.broadcast_arrays(x, mask)
    return xb[mb]


def _masked_select_meta(x, mask):
    _mask_dtype_check(mask, "masked_select: expected BoolTensor for mask")
    _broadcast_pair(mask.shape, x.shape)
    return _same(x, (DATA_DEPENDENT,))


def _masked_select_vjp(ctx, g):
    x, mask = ctx.inputs
    shape = _broadcast_pair(x.shape, mask.shape)
    return (_call(masked_scatter, g.new_zeros(shape), mask, g), None)


masked_select = define("masked_select", "index", _masked_select, meta=_masked_select_meta,
                       vjp=_masked_select_vjp,
                       doc="The elements of x (broadcast with mask) where mask is True, as 1-D.",
                       data_dependent=True)


def _masked_scatter_meta(x, mask, source):
    _mask_dtype_check(mask, "masked_scatter_ only supports boolean masks, but got mask with dtype "
                            f"{type_name(dtype_of(mask))}")
    if dtype_of(source) is not dtype_of(x):
        raise RuntimeError("masked_scatter: expected self and source to have same dtypes but got"
                           f"{type_name(dtype_of(x))} and {type_name(dtype_of(source))}")
    return _same(x, _broadcast_pair(x.shape, mask.shape))


def _masked_scatter(x, mask, source):
    _masked_scatter_meta(x, mask, source)
    xb, mb = np.broadcast_arrays(x, mask)
    out = xb.copy()
    k = int(np.count_nonzero(mb))
    src = source.reshape(-1)
    if src.size < k:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    out[mb] = src[:k]
    return out


def _masked_scatter_vjp(ctx, g):
    x, mask, src = ctx.inputs
    gx = ctx.needs(0) and g.masked_fill(mask, 0)
    gs = None
    if ctx.needs(2):
        sel = _call(masked_select, g, mask)
        n = src.numel()
        k = sel.shape[0]
        if k < n:
            sel = _call(M.slice_scatter, sel.new_zeros((n,)), sel, dim=0, start=0, end=k, step=1)
        gs = sel.reshape(tuple(src.shape))
    return gx, None, gs


masked_scatter = define("masked_scatter", "index", _masked_scatter, meta=_masked_scatter_meta,
                        vjp=_masked_scatter_vjp,
                        doc="A copy of x whose masked positions take source's leading elements.")


def _nonzero(x):
    return np.argwhere(x.astype(np.float32) if D.is_bfloat16(x.dtype) else x)


nonzero = define("nonzero", "index", _nonzero,
                 meta=lambda x: TensorSpec((DATA_DEPENDENT, len(x.shape)), D.int64),
                 differentiable=False,
                 doc="The coordinates of the non-zero elements, one row each (int64).", data_dependent=True)


# ---------------------------------------------------------------- take / put

def _take_meta(x, index):
    if dtype_of(index) is not D.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got "
                           f"{type_name(dtype_of(index))}")
    return _same(x, index.shape)


def _check_flat_bounds(index, n):
    if index.size and ((index < -n) | (index >= n)).any():
        v = int(index[(index < -n) | (index >= n)].flat[0])
        raise IndexOutOfRange(f"out of range: tried to access index {v} on a tensor of {n} "
                              "elements.")


def _take(x, index):
    _take_meta(x, index)
    if x.size == 0 and index.size:
        raise IndexOutOfRange("take(): tried to take from an empty tensor")
    try:
        return x.reshape(-1)[index]
    except IndexError:
        _check_flat_bounds(index, x.size)
        raise


def _take_vjp(ctx, g):
    x, idx = ctx.inputs
    return (_call(put, g.new_zeros(tuple(x.shape)), idx, g, accumulate=True), None)


take = define("take", "index", _take, meta=_take_meta, vjp=_take_vjp,
              doc="x viewed as 1-D, read at index (result has index's shape).")


def _put_meta(x, index, source, accumulate=False):
    if dtype_of(index) is not D.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got "
                           f"{type_name(dtype_of(index))}")
    if dtype_of(source) is not dtype_of(x):
        raise RuntimeError("put_(): self and source expected to have the same dtype, but got "
                           f"self.dtype = {type_name(dtype_of(x))} and source.dtype = "
                           f"{type_name(dtype_of(source))}")
    ni = int(np.prod(index.shape, dtype=np.int64))
    ns = int(np.prod(source.shape, dtype=np.int64))
    if ni != ns:
        raise IndexError("put_(): Expected source and index to have the same number of elements, "
                         f"but got source.numel() = {ns}, index.numel() = {ni}")
    return _same(x)


def _put(x, index, source, accumulate=False):
    _put_meta(x, index, source, accumulate)
    out = x.copy()
    if x.size == 0 and index.size:
        raise IndexOutOfRange("put_(): Tried to put elements into an empty tensor")
    flat = out.reshape(-1)
    try:
        if accumulate:
            np.add.at(flat, index.reshape(-1), source.reshape(-1))
        else:
            flat[index.reshape(-1)] = source.reshape(-1)
    except IndexError:
        _check_flat_bounds(index, flat.size)
        raise
    return out


def _put_vjp(ctx, g):
    x, idx, src = ctx.inputs
    gx = g
    if ctx.needs(0) and not ctx.attrs.get("accumulate"):
        gx = _call(put, g, idx, _zeros_like_src(g, src))
    gs = None
    if ctx.needs(2):
        gs = _call(take, g, idx)
        if tuple(gs.shape) != tuple(src.shape):
            gs = gs.reshape(tuple(src.shape))
    return gx, None, gs


put = define("put", "index", _put, meta=_put_meta, vjp=_put_vjp,
             doc="A copy of x (viewed as 1-D) with x[index] = source (or += with accumulate).")


def _copy_slices(base, src, ids):
    out = base.copy()
    out.reshape(-1)[ids] = src
    return out


def _copy_slices_meta(base, src, ids):
    from .core import broadcast_shapes
    if broadcast_shapes(tuple(src.shape), tuple(ids.shape)) != tuple(ids.shape):
        raise RuntimeError(f"copy_slices: source of shape {list(src.shape)} does not broadcast to "
                           f"the written region {list(ids.shape)}")
    return _same(base)


def _copy_slices_vjp(ctx, g):
    base, src, ids = ctx.inputs
    gb = ctx.needs(0) and _call(copy_slices, g, g.new_zeros(()), ids)
    gs = ctx.needs(1) and _call(take, g, ids)
    return gb, gs, None


copy_slices = define("copy_slices", "index", _copy_slices, meta=_copy_slices_meta,
                     vjp=_copy_slices_vjp, grad_name="torch::autograd::CopySlices",
                     doc="A copy of base (viewed as 1-D) with base[ids] = src: an in-place write "
                         "through a view, as recorded for the view's base.")


# ---------------------------------------------------------------- searchsorted

def _searchsorted_meta(seq, values, sorter=None, right=False, out_int32=False):
    ss = tuple(seq.shape)
    vs = tuple(values.shape) if hasattr(values, "shape") else ()
    if not ss:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have positive dimension,"
                           " but got 0 dimension")
    if len(ss) > 1 and ss[:-1] != vs[:-1]:
        raise RuntimeError(
            "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
            "dimensions of boundaries tensor and input value tensor must match, but we got "
            f"boundaries tensor {list(ss)} and input value tensor {list(vs)}")
    if sorter is not None:
        if tuple(sorter.shape) != ss:
            raise RuntimeError("torch.searchsorted(): boundary and sorter must have the same size, "
                               f"but got boundary tensor {list(ss)}and got sorter tensor "
                               f"{list(sorter.shape)}")
        if dtype_of(sorter) is not D.int64:
            raise RuntimeError("torch.searchsorted(): sorter must be a tensor of long dtype but got "
                               f"dtype {dtype_of(sorter)}")
    for t in (seq, values):
        if hasattr(t, "shape") and dtype_of(t) is D.bool:
            raise NotImplementedError("\"searchsorted_out_cpu\" not implemented for 'Bool'")
    return TensorSpec(vs, D.int32 if out_int32 else D.int64)


def _searchsorted(seq, values, sorter=None, right=False, out_int32=False):
    """PyTorch's binary search, vectorized: it compares with plain IEEE ``>=``/``>``, so NaN
    sorts differently from numpy.searchsorted."""
    _searchsorted_meta(seq, values, sorter, right, out_int32)
    v = np.asarray(values)
    n = seq.shape[-1]
    if seq.ndim == 1:
        rows, vals = seq[None, :], v.reshape(1, -1)
        srt = None if sorter is None else sorter[None, :]
    else:
        # explicit sizes: a row count of 0 makes -1 ambiguous
        rows = seq.reshape(math.prod(seq.shape[:-1]), n)
        vals = v.reshape(rows.shape[0], v.shape[-1])
        srt = None if sorter is None else sorter.reshape(rows.shape)
    lo = np.zeros(vals.shape, np.int64)
    hi = np.full(vals.shape, n, np.int64)
    for _ in range(n.bit_length()):
        mid = (lo + hi) >> 1
        at = np.minimum(mid, n - 1)
        if srt is not None:
            at = np.take_along_axis(srt, at, axis=1)
        mv = np.take_along_axis(rows, at, axis=1)
        go_right = ~(mv > vals) if right else ~(mv >= vals)
        active = lo < hi
        lo = np.where(active & go_right, mid + 1, lo)
        hi = np.where(active & ~go_right, mid, hi)
    return lo.reshape(v.shape).astype(np.int32 if out_int32 else np.int64)


searchsorted = define("searchsorted", "index", _searchsorted, meta=_searchsorted_meta,
                      differentiable=False,
                      doc="Insertion positions of values in the sorted last dimension of seq.")
