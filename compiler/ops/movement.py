"""Movement primitives: views (view, expand, permute, transpose, squeeze, unsqueeze, diagonal,
as_strided, unfold, split, unbind) and data-moving copies (reshape copy, cat, stack, flip,
roll, repeat, tril/triu, diag_embed).

View ops return numpy views of their input (``view=True``), so a base and its views share
memory and version counter exactly as PyTorch's do.  Where PyTorch decides between a view
and a copy (``reshape``) the decision uses PyTorch's stride rule (``compute_stride``), not
whatever numpy happens to do.  Derivative rules are written with tensor methods only.
"""
import builtins

import numpy as np
from numpy.lib.stride_tricks import as_strided as _np_as_strided

from . import eager
from .core import define, TensorSpec, wrap_dim, wrap_dims, type_name
from .creation import on_strides, preserved_strides
from .eager import call as _call

_ndarray = np.ndarray
_pyslice = builtins.slice      # the name ``slice`` is the op defined below


# ---------------------------------------------------------------- shape helpers

def prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def infer_size(shape, numel):
    """``shape`` with its one ``-1`` resolved for ``numel`` elements (PyTorch's infer_size)."""
    shape = tuple(shape)
    infer = None
    known = 1
    for i, s in enumerate(shape):
        if s == -1:
            if infer is not None:
                raise RuntimeError("only one dimension can be inferred")
            infer = i
        elif s >= 0:
            known *= s
        else:
            raise RuntimeError(f"invalid shape dimension {s} at index {i} of shape {list(shape)}")
    if infer is None:
        if known == numel:
            return shape
    elif known != 0:
        if numel % known == 0:
            return shape[:infer] + (numel // known,) + shape[infer + 1:]
    elif numel == 0:
        raise RuntimeError(
            f"cannot reshape tensor of 0 elements into shape {list(shape)} because the "
            "unspecified dimension size -1 can be any value and is ambiguous")
    raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")


def compute_stride(oldshape, oldstride, newshape, unit=1):
    """Strides that view ``oldshape``/``oldstride`` as ``newshape``, or None (PyTorch's rule).

    Strides are counted in elements, or in bytes with ``unit`` the item size."""
    if not oldshape:
        return (unit,) * len(newshape)
    numel = prod(oldshape)
    if numel == 0 and tuple(oldshape) == tuple(newshape):
        return tuple(oldstride)
    nd = len(newshape)
    newstride = [0] * nd
    if numel == 0:
        for d in range(nd - 1, -1, -1):
            newstride[d] = unit if d == nd - 1 else max(newshape[d + 1], 1) * newstride[d + 1]
        return tuple(newstride)
    view_d = nd - 1
    chunk_base = oldstride[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(oldshape) - 1, -1, -1):
        tensor_numel *= oldshape[tensor_d]
        if tensor_d == 0 or (oldshape[tensor_d - 1] != 1
                             and oldstride[tensor_d - 1] != tensor_numel * chunk_base):
            while view_d >= 0 and (view_numel < tensor_numel or newshape[view_d] == 1):
                newstride[view_d] = view_numel * chunk_base
                view_numel *= newshape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base = oldstride[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(newstride)


def elem_strides(x):
    item = x.itemsize
    return tuple(s // item for s in x.strides)


def storage_root(x):
    """The ndarray that owns ``x``'s memory (the end of its ``.base`` chain)."""
    root = x
    while type(root.base) is _ndarray:
        root = root.base
    return root


def strided(x, shape, strides, offset=0):
    """A view of ``x``'s memory with ``shape``, byte ``strides`` and a byte ``offset`` from x's
    first element.  The view's ``.base`` chain ends at x's owner (so storage offsets stay
    meaningful) and it is read-only when ``x`` is."""
    flags = x.flags
    if flags.c_contiguous and offset >= 0:
        try:                                    # fast: x itself exports its buffer
            return _ndarray(shape, x.dtype, x, offset, strides)
        except (TypeError, ValueError, BufferError):
            pass
    root = storage_root(x)
    start = x.__array_interface__["data"][0] - root.__array_interface__["data"][0] + offset
    try:
        out = _ndarray(shape, x.dtype, root, start, strides)
    except (TypeError, ValueError, BufferError):
        # an owner without a plain buffer (e.g. made by numpy's as_strided): step from x
        k = abs(offset) // x.itemsize
        step = x.itemsize if offset >= 0 else -x.itemsize
        first = _np_as_strided(x, (k + 1,), (step,))[k:]
        out = _np_as_strided(first, shape, strides)
    if not flags.writeable and out.flags.writeable:
        out.flags.writeable = False
    return out


def _spec_numel(x):
    return prod(x.shape)


def _same_spec(x, shape):
    return TensorSpec(tuple(shape), x.dtype)


# ---------------------------------------------------------------- view / reshape

VIEW_STRIDE_ERROR = ("view size is not compatible with input tensor's size and stride (at least one "
                     "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")


def _view(x, shape):
    if x.flags.c_contiguous:
        return x.reshape(shape)
    strides = compute_stride(x.shape, x.strides, shape, x.itemsize)
    if strides is None:
        if prod(shape) != x.size:
            raise ValueError("size")
        raise RuntimeError(VIEW_STRIDE_ERROR)
    return strided(x, shape, strides)


def _view_meta(x, shape):
    return _same_spec(x, infer_size(shape, _spec_numel(x)))


def _reshape_vjp(ctx, g):
    return (g.reshape(ctx.inputs[0].shape),)


view = define("view", "movement", _view, meta=_view_meta, vjp=_reshape_vjp, view=True,
              doc="A view with a new shape (PyTorch's stride rule decides if one exists).",
              reindex="reshape", reads_layout=True)


def _unsafe_view(x, shape):
    # callers pass either a fresh result (an mm/bmm output: reuse its buffer, as torch's
    # _unsafe_view does) or a tensor no view can reshape (reshape's copying path)
    if x.flags.c_contiguous:
        return x.reshape(shape)
    return x.copy().reshape(shape)


unsafe_view = define("unsafe_view", "movement", _unsafe_view, meta=_view_meta, vjp=_reshape_vjp,
                     grad_name="UnsafeViewBackward0",
                     doc="reshape's copying path, and the reshape of a fresh result (no copy).",
                     reindex="reshape")


def _view_dtype_check(shape, strides, src, dst):
    """PyTorch's checks for viewing a tensor as a dtype of another element size."""
    if src.itemsize == dst.itemsize:
        return
    what = f"to view {type_name(src)} as {type_name(dst)} (different element sizes)"
    if not shape:
        raise RuntimeError(f"self.dim() cannot be 0 {what}")
    if strides is not None and strides[-1] != 1:
        raise RuntimeError(f"self.stride(-1) must be 1 {what}, but got {strides[-1]}")
    if dst.itemsize > src.itemsize:
        ratio = dst.itemsize // src.itemsize
        if shape[-1] % ratio:
            raise RuntimeError(f"self.size(-1) must be divisible by {ratio} {what}, "
                               f"but got {shape[-1]}")
        if strides is not None:
            for i, s in enumerate(strides[:-1]):
                if s % ratio:
                    raise RuntimeError(f"self.stride({i}) must be divisible by {ratio} {what}, "
                                       f"but got {s}")


def _view_dtype(x, dtype):
    from dynograph.runtime import dtypes as D
    src = D.FROM_NUMPY[x.dtype]
    strides = elem_strides(x) if x.ndim else None
    _view_dtype_check(x.shape, strides, src, dtype)
    # the checks above leave the last axis contiguous, which is what numpy needs
    return x.view(dtype.np)


def _view_dtype_meta(x, dtype):
    _view_dtype_check(x.shape, None, x.dtype, dtype)
    shape = tuple(x.shape)
    if x.dtype.itemsize != dtype.itemsize:
        shape = shape[:-1] + (shape[-1] * x.dtype.itemsize // dtype.itemsize,)
    return TensorSpec(shape, dtype)


view_dtype = define("view_dtype", "movement", _view_dtype, meta=_view_dtype_meta, view=True,
                    differentiable=False,
                    doc="Reinterpret the bytes as another dtype (Tensor.view(dtype)).", reads_layout=True)


# ---------------------------------------------------------------- expand

def expand_shape(shape, size):
    """The target shape of ``expand`` (``-1`` keeps a size) with PyTorch's errors."""
    size = tuple(size)
    nd, ns = len(shape), len(size)
    if ns < nd:
        return None
    out = list(size)
    for i in range(ns - 1, -1, -1):
        j = i - (ns - nd)
        target = size[i]
        if j < 0:
            if target < 0:
                raise RuntimeError(f"The expanded size of the tensor ({target}) isn't allowed in "
                                   f"a leading, non-existing dimension {i}")
            continue
        have = shape[j]
        if target == -1:
            out[i] = have
        elif have != target:
            if have != 1:
                raise RuntimeError(
                    f"The expanded size of the tensor ({target}) must match the existing size "
                    f"({have}) at non-singleton dimension {i}.  Target sizes: {list(size)}.  "
                    f"Tensor sizes: {list(shape)}")
            if target < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {target}: "
                                   f"{list(size)}")
    return tuple(out)


def _expand(x, shape):
    lead = len(shape) - x.ndim
    strides = [0] * lead
    for n, s, st in zip(x.shape, shape[lead:], x.strides):
        strides.append(st if n == s else 0)
    out = strided(x, shape, strides)
    out.flags.writeable = False      # many elements share one memory location
    return out


def _expand_meta(x, shape):
    out = expand_shape(x.shape, shape)
    if out is None:
        raise RuntimeError(
            f"expand({x.dtype.tensor_type}{{{list(x.shape)}}}, size={list(shape)}): the number of "
            f"sizes provided ({len(shape)}) must be greater or equal to the number of dimensions "
            f"in the tensor ({len(x.shape)})")
    return _same_spec(x, out)


def sum_to_shape(g, shape):
    """Sum ``g`` down to ``shape`` (the inverse of expanding ``shape`` to g's shape)."""
    gshape = tuple(g.shape)
    shape = tuple(shape)
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    kept = tuple(i + lead for i, n in enumerate(shape) if n == 1 and gshape[i + lead] != 1)
    if lead and not kept:       # only leading dims (a bias's gradient over the batch): one sum
        return g.sum(tuple(range(lead)))
    if lead or kept:
        g = g.sum(tuple(range(lead)) + kept, keepdim=True)
    return g.reshape(shape) if lead else g


expand = define("expand", "movement", _expand, meta=_expand_meta,
                vjp=lambda ctx, g: (sum_to_shape(g, ctx.inputs[0].shape),), view=True,
                doc="A stride-0 view repeating size-1 dimensions (read-only in memory).", reindex="expand")


# ---------------------------------------------------------------- permute / transpose

def _permute_meta(x, dims):
    nd = len(x.shape)
    if len(dims) != nd:
        raise RuntimeError(
            "permute(sparse_coo): number of dimensions in the tensor input does not match the "
            "length of the desired ordering of dimensions i.e. input.dim() = "
            f"{nd} is not equal to len(dims) = {len(dims)}")
    wrapped = tuple(wrap_dim(d, nd) for d in dims)
    if len(set(wrapped)) != nd:
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return _same_spec(x, tuple(x.shape[d] for d in wrapped))


def _permute_vjp(ctx, g):
    dims = ctx.attrs["dims"]
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d] = i
    return (g.permute(inv),)


permute = define("permute", "movement", lambda x, dims: x.transpose(dims), meta=_permute_meta,
                 vjp=_permute_vjp, view=True, doc="A view with the dimensions reordered.", reindex="permute")


def _transpose_meta(x, dim0, dim1):
    nd = len(x.shape)
    a, b = wrap_dim(dim0, nd), wrap_dim(dim1, nd)
    shape = list(x.shape)
    if shape:
        shape[a], shape[b] = shape[b], shape[a]
    return _same_spec(x, shape)


def _transpose(x, dim0, dim1):
    return x.swapaxes(dim0, dim1) if x.ndim else x.view()


transpose = define("transpose", "movement", _transpose, meta=_transpose_meta,
                   vjp=lambda ctx, g: (g.transpose(ctx.attrs["dim0"], ctx.attrs["dim1"]),),
                   view=True, doc="A view with two dimensions swapped.", reindex="permute")


def _t_meta(x):
    if len(x.shape) > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {len(x.shape)}D")
    return _same_spec(x, tuple(reversed(x.shape)))


def _t(x):
    if x.ndim > 2:
        raise ValueError("ndim")
    return x.T if x.ndim == 2 else x.view()


t = define("t", "movement", _t, meta=_t_meta, vjp=lambda ctx, g: (g.t(),), grad_name="TBackward0",
           view=True, doc="Transpose of a tensor with at most 2 dimensions.", reindex="permute")


# ---------------------------------------------------------------- squeeze / unsqueeze

def _squeeze_vjp(ctx, g):
    return (g.reshape(ctx.inputs[0].shape),)


def _squeeze_all_meta(x):
    return _same_spec(x, tuple(n for n in x.shape if n != 1))


squeeze = define("squeeze", "movement", lambda x: x.squeeze(), meta=_squeeze_all_meta,
                 vjp=_squeeze_vjp, view=True, grad_name="SqueezeBackward0",
                 doc="A view without the size-1 dimensions.", reindex="squeeze")


def _squeeze_dims_impl(x, dims):
    axes = tuple(d for d in dims if x.shape[d] == 1)
    return x.squeeze(axes) if axes else x.view()


def _squeeze_dims_meta(x, dims):
    nd = len(x.shape)
    ds = wrap_dims(dims, nd) if nd else tuple(wrap_dim(d, 0) for d in dims)
    return _same_spec(x, tuple(n for i, n in enumerate(x.shape) if not (i in ds and n == 1)))


def _squeeze_dim_impl(x, dim):
    return x.squeeze(dim) if x.ndim and x.shape[dim] == 1 else x.view()


def _squeeze_dim_meta(x, dim):
    return _squeeze_dims_meta(x, (dim,))


squeeze_dim = define("squeeze_dim", "movement", _squeeze_dim_impl, meta=_squeeze_dim_meta,
                     vjp=_squeeze_vjp, view=True, grad_name="SqueezeBackward1",
                     doc="A view without dimension ``dim`` if its size is 1.", reindex="squeeze")
squeeze_dims = define("squeeze_dims", "movement", _squeeze_dims_impl, meta=_squeeze_dims_meta,
                      vjp=_squeeze_vjp, view=True, grad_name="SqueezeBackward2",
                      doc="A view without those of ``dims`` whose size is 1.", reindex="squeeze")


def unsqueeze_strides(shape, strides, dim, unit=1):
    st = strides[dim] * shape[dim] if dim < len(shape) else unit
    return strides[:dim] + (st,) + strides[dim:]


def _unsqueeze(x, dim):
    shape = x.shape[:dim] + (1,) + x.shape[dim:]
    if x.flags.c_contiguous and x.size:         # (an empty one's strides may be any)
        return x.reshape(shape)
    strides = unsqueeze_strides(x.shape, x.strides, dim, x.itemsize)
    out = x.reshape(shape)              # adding a unit dim never copies; numpy's strides
    if out.strides == strides:          # usually agree with PyTorch's
        return out
    return strided(x, shape, strides)


def _unsqueeze_meta(x, dim):
    d = wrap_dim(dim, len(x.shape) + 1)
    return _same_spec(x, tuple(x.shape[:d]) + (1,) + tuple(x.shape[d:]))


unsqueeze = define("unsqueeze", "movement", _unsqueeze, meta=_unsqueeze_meta,
                   vjp=lambda ctx, g: (g.squeeze(ctx.attrs["dim"]),), view=True,
                   doc="A view with a size-1 dimension inserted at ``dim``.", reindex="unsqueeze")


# ---------------------------------------------------------------- as_strided

def storage_offset_of(x):
    """``x``'s first element, counted in elements from the start of its owner's memory."""
    root = storage_root(x)
    return (x.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // x.itemsize


def storage_numel(x):
    return storage_root(x).nbytes // x.itemsize


def check_geometry(size, stride, storage_offset, itemsize, storage_size):
    """PyTorch's checks that ``size``/``stride``/``storage_offset`` fit a storage."""
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    for s in stride:
        if s < 0:
            raise RuntimeError("as_strided: Negative strides are not supported at the moment, "
                               f"got strides: {list(stride)}")
    for n in size:
        if n < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {list(size)}")
    if storage_offset < 0:
        raise RuntimeError(f"Tensor: invalid storage offset {storage_offset}")
    need = 0 if 0 in size else (storage_offset + 1 + sum((n - 1) * s for n, s in zip(size, stride)))
    if need > storage_size:
        raise RuntimeError(
            f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset "
            f"{storage_offset}, and itemsize {itemsize} requiring a storage size of "
            f"{need * itemsize} are out of bounds for storage of size {storage_size * itemsize}")


def _as_strided(x, size, stride, storage_offset):
    item = x.itemsize
    check_geometry(size, stride, storage_offset, item, storage_numel(x))
    return strided(x, size, tuple(s * item for s in stride),
                   (storage_offset - storage_offset_of(x)) * item)


def _as_strided_meta(x, size, stride, storage_offset):
    if len(size) != len(stride):
        raise RuntimeError("mismatch in length of strides and shape")
    return _same_spec(x, size)


def _flat_indices(shape, strides, offset):
    """The storage index of every element of a strided geometry, as an array of ``shape``."""
    idx = np.full((), offset, dtype=np.int64)
    for d, (n, s) in enumerate(zip(shape, strides)):
        idx = idx[..., None] + np.arange(n, dtype=np.int64) * s
    return idx.reshape(shape)


def _as_strided_backward(g, in_shape, in_stride, in_offset, size, stride, storage_offset,
                         transpose=False):
    out_idx = _flat_indices(size, stride, storage_offset)
    in_idx = _flat_indices(in_shape, in_stride, in_offset)
    n = int(max(out_idx.max(initial=-1), in_idx.max(initial=-1))) + 1
    count = np.bincount(in_idx.ravel(), minlength=n)
    overlap = count.size and count.max() > 1
    if transpose:           # the adjoint map: input-shaped values to the output's geometry
        src, dst = in_idx, out_idx
        g = g / count[in_idx] if overlap else g
    else:
        src, dst = out_idx, in_idx
    acc = np.bincount(src.ravel(), weights=g.ravel().astype(np.float64), minlength=n)
    res = acc[dst]
    if overlap and not transpose:
        res = res / count[in_idx]           # an overlapping input shares each gradient
    return res.astype(g.dtype)


def _as_strided_backward_meta(g, in_shape, in_stride, in_offset, size, stride, storage_offset,
                              transpose=False):
    return _same_spec(g, size if transpose else in_shape)


def _as_strided_backward_vjp(ctx, h):
    a = dict(ctx.attrs)
    a["transpose"] = not a.get("transpose", False)
    return (_call(as_strided_backward, h, **a),)


as_strided_backward = define(
    "as_strided_backward", "movement", _as_strided_backward, meta=_as_strided_backward_meta,
    vjp=_as_strided_backward_vjp,
    doc="Gradient of as_strided: scatter-add into storage, gather the input's geometry "
        "(``transpose``: the adjoint of that map, for double backward).", reads_layout=True)


def _as_strided_vjp(ctx, g):
    x = ctx.inputs[0]
    a = ctx.attrs
    return (_call(as_strided_backward, g, in_shape=tuple(x.shape), in_stride=x.stride(),
                  in_offset=x.storage_offset(), size=a["size"], stride=a["stride"],
                  storage_offset=a["storage_offset"]),)


as_strided = define("as_strided", "movement", _as_strided, meta=_as_strided_meta,
                    vjp=_as_strided_vjp, view=True,
                    doc="A view with arbitrary sizes, strides and storage offset.", reads_layout=True)


# ---------------------------------------------------------------- unfold

def unfold_shape(shape, dim, size, step):
    nd = len(shape)
    n = shape[dim] if nd else 1
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {dim} is {n} but size is {size}")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if not nd:
        return (size,)
    return tuple(shape[:dim]) + ((n - size) // step + 1,) + tuple(shape[dim + 1:]) + (size,)


def _unfold(x, dimension, size, step):
    shape = unfold_shape(x.shape, dimension, size, step)
    if x.ndim == 0:
        return x.reshape(shape)
    st = x.strides
    strides = st[:dimension] + (st[dimension] * step,) + st[dimension + 1:] + (st[dimension],)
    return strided(x, shape, strides)


def _unfold_backward(g, input_sizes, dim, size, step):
    out = np.zeros(input_sizes, g.dtype)
    if not input_sizes:
        return out + g.reshape(())
    nwin = g.shape[dim]
    moved = np.moveaxis(out, dim, -1)          # a view: writes land in ``out``
    gw = np.moveaxis(g, dim, -2)                # (..., window, element)
    for j in range(size):
        moved[..., np.arange(nwin) * step + j] += gw[..., j]
    return out


unfold_backward = define(
    "unfold_backward", "movement", _unfold_backward,
    meta=lambda g, input_sizes, **_: _same_spec(g, input_sizes),
    vjp=lambda ctx, g: (g.unfold(ctx.attrs["dim"], ctx.attrs["size"], ctx.attrs["step"]),),
    doc="Gradient of unfold: sum the windows back into the input's shape.")

unfold = define(
    "unfold", "movement", _unfold,
    meta=lambda x, dimension, size, step: _same_spec(x, unfold_shape(x.shape, dimension, size, step)),
    vjp=lambda ctx, g: (_call(unfold_backward, g, input_sizes=tuple(ctx.inputs[0].shape),
                              dim=ctx.attrs["dimension"], size=ctx.attrs["size"],
                              step=ctx.attrs["step"]),),
    view=True, doc="A view of all windows of ``size`` along ``dimension``, ``step`` apart.",
    reads_layout=True)


# ---------------------------------------------------------------- diagonal

def diagonal_geometry(shape, strides, offset, dim1, dim2):
    """(shape, strides, element offset) of the diagonal view."""
    n1, n2 = shape[dim1], shape[dim2]
    if offset >= 0:
        length = max(min(n1, n2 - offset), 0)
        start = offset * strides[dim2]
    else:
        length = max(min(n1 + offset, n2), 0)
        start = -offset * strides[dim1]
    if length == 0:
        start = 0
    keep = [i for i in range(len(shape)) if i != dim1 and i != dim2]
    out_shape = tuple(shape[i] for i in keep) + (length,)
    out_strides = tuple(strides[i] for i in keep) + (strides[dim1] + strides[dim2],)
    return out_shape, out_strides, start


def check_diagonal_dims(ndim, dim1, dim2):
    d1, d2 = wrap_dim(dim1, ndim), wrap_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return d1, d2


def _diagonal(x, offset, dim1, dim2):
    shape, strides, start = diagonal_geometry(x.shape, x.strides, offset, dim1, dim2)
    return strided(x, shape, strides, start)


def _diagonal_meta(x, offset, dim1, dim2):
    d1, d2 = check_diagonal_dims(len(x.shape), dim1, dim2)
    shape, _, _ = diagonal_geometry(x.shape, (0,) * len(x.shape), offset, d1, d2)
    return _same_spec(x, shape)


def _diagonal_vjp(ctx, g):
    a = ctx.attrs
    zeros = g.new_zeros(tuple(ctx.inputs[0].shape))
    return (_call(diagonal_scatter, zeros, g, offset=a["offset"], dim1=a["dim1"], dim2=a["dim2"]),)


diagonal = define("diagonal", "movement", _diagonal, meta=_diagonal_meta, vjp=_diagonal_vjp,
                  view=True, doc="A view of the diagonal of the dim1/dim2 planes (last dim).")
diagonal_copy = define("diagonal_copy", "movement", lambda x, **a: _diagonal(x, **a).copy(),
                       meta=_diagonal_meta, vjp=_diagonal_vjp, grad_name="DiagonalBackward0_copy",
                       doc="A copy of the diagonal (torch.diagonal_copy, 2-D torch.diag).")


def _diagonal_scatter(x, src, offset, dim1, dim2):
    out = x.copy()
    view = _diagonal(out, offset, dim1, dim2)
    if view.shape != src.shape:
        raise ValueError("shape")
    view[...] = src
    return out


def _scatter_spec(x, src, want):
    """Meta of the *_scatter ops: ``src`` must have the shape of the part of ``x`` it replaces."""
    if tuple(src.shape) != want:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = "
                           f"{list(src.shape)}, slice size = {list(want)}")
    return _same_spec(x, x.shape)


def _diagonal_scatter_meta(x, src, offset, dim1, dim2):
    want = _diagonal_meta(x, offset, dim1, dim2).shape
    return _scatter_spec(x, src, want)


def _diagonal_scatter_vjp(ctx, g):
    a = ctx.attrs
    gx = gs = None
    if ctx.needs(0):
        zeros = g.new_zeros(tuple(ctx.inputs[1].shape))
        gx = _call(diagonal_scatter, g, zeros, **a)
    if ctx.needs(1):
        gs = g.diagonal(a["offset"], a["dim1"], a["dim2"])
    return gx, gs


diagonal_scatter = define("diagonal_scatter", "movement", _diagonal_scatter,
                          meta=_diagonal_scatter_meta, vjp=_diagonal_scatter_vjp,
                          doc="A copy of input with its diagonal replaced by src.")


def diag_embed_shape(shape, offset, dim1, dim2):
    n = shape[-1] + abs(offset)
    out = list(shape[:-1])
    lo, hi = sorted((dim1, dim2))
    out.insert(lo, n)
    out.insert(hi, n)
    return tuple(out)


def _diag_embed(x, offset, dim1, dim2):
    out = np.zeros(diag_embed_shape(x.shape, offset, dim1, dim2), x.dtype)
    _diagonal(out, offset, dim1, dim2)[...] = x
    return out


def _diag_embed_meta(x, offset, dim1, dim2):
    nd = len(x.shape) + 1
    d1, d2 = wrap_dim(dim1, nd), wrap_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return _same_spec(x, diag_embed_shape(x.shape, offset, d1, d2))


diag_embed = define("diag_embed", "movement", _diag_embed, meta=_diag_embed_meta,
                    vjp=lambda ctx, g: (g.diagonal(ctx.attrs["offset"], ctx.attrs["dim1"],
                                                   ctx.attrs["dim2"]),),
                    doc="Matrices (in dims dim1, dim2) whose diagonal holds the last dimension.")


# ---------------------------------------------------------------- tril / triu

def _tri_meta(name):
    def meta(x, diagonal=0):
        if len(x.shape) < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        return _same_spec(x, x.shape)
    return meta


def _tri_impl(fn):
    def impl(x, diagonal=0):
        if x.ndim < 2:
            raise ValueError("ndim")
        return fn(x, diagonal)
    return impl


tril = define("tril", "movement", _tri_impl(np.tril), meta=_tri_meta("tril"),
              vjp=lambda ctx, g: (g.tril(ctx.attrs.get("diagonal", 0)),),
              doc="The lower triangle of the last two dimensions; the rest zero.")
triu = define("triu", "movement", _tri_impl(np.triu), meta=_tri_meta("triu"),
              vjp=lambda ctx, g: (g.triu(ctx.attrs.get("diagonal", 0)),),
              doc="The upper triangle of the last two dimensions; the rest zero.")


# ---------------------------------------------------------------- flip / roll / rot90

_REVERSE = _pyslice(None, None, -1)
_ALL = _pyslice(None)


def _flip(x, dims):
    # PyTorch writes the flipped elements into an empty_like(x): x's own layout where dense
    out = on_strides(np.empty((x.size,), x.dtype), x.shape, preserved_strides(x))
    out[...] = x[tuple(_REVERSE if i in dims else _ALL for i in range(x.ndim))]
    return out


flip = define("flip", "movement", _flip,
              meta=lambda x, dims: _same_spec(x, x.shape),
              vjp=lambda ctx, g: (g.flip(ctx.attrs["dims"]),),
              doc="A copy with the order of elements reversed along ``dims``.")


def _roll(x, shifts, dims):
    if not dims:
        return np.roll(x, shifts[0])
    return np.roll(x, shifts, dims)


roll = define("roll", "movement", _roll, meta=lambda x, shifts, dims: _same_spec(x, x.shape),
              vjp=lambda ctx, g: (g.roll(tuple(-s for s in ctx.attrs["shifts"]),
                                         ctx.attrs["dims"]),),
              doc="A copy with elements shifted cyclically along ``dims`` (all, flattened).")


def _rot90_meta(x, k, dims):
    shape = list(x.shape)
    if k % 2:
        shape[dims[0]], shape[dims[1]] = shape[dims[1]], shape[dims[0]]
    return _same_spec(x, shape)


rot90 = define("rot90", "movement", lambda x, k, dims: np.rot90(x, k, dims).copy(),
               meta=_rot90_meta, vjp=lambda ctx, g: (g.rot90(-ctx.attrs["k"], ctx.attrs["dims"]),),
               doc="A copy rotated by 90 degrees ``k`` times in the plane of ``dims``.")


# ---------------------------------------------------------------- repeat

def _repeat_meta(x, repeats):
    if len(repeats) < len(x.shape):
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    shape = (1,) * (len(repeats) - len(x.shape)) + tuple(x.shape)
    out = tuple(r * s for r, s in zip(repeats, shape))
    for n in out:
        if n < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {n}: {list(out)}")
    return _same_spec(x, out)


def _repeat(x, repeats):
    if len(repeats) < x.ndim or min(repeats, default=0) < 0:
        raise ValueError("repeats")
    out = np.tile(x, repeats)
    return out if out.size else np.empty(out.shape, x.dtype)    # (numpy may keep x's strides)


def _repeat_vjp(ctx, g):
    repeats = ctx.attrs["repeats"]
    in_shape = tuple(ctx.inputs[0].shape)
    padded = (1,) * (len(repeats) - len(in_shape)) + in_shape
    split = []
    for r, s in zip(repeats, padded):
        split += [r, s]
    g = g.reshape(split).sum(tuple(range(0, len(split), 2)))
    return (g.reshape(in_shape),)


repeat = define("repeat", "movement", _repeat, meta=_repeat_meta, vjp=_repeat_vjp,
                doc="A copy tiled ``repeats[i]`` times along each dimension.")


# ---------------------------------------------------------------- cat / stack

def cat_skipped(shape):
    """PyTorch skips legacy empty tensors of shape (0,) in cat."""
    return len(shape) == 1 and shape[0] == 0


def _cat(*xs, dim, dtype):
    npdt = dtype.np
    for x in xs:
        if x.dtype != npdt or x.shape == (0,):
            break
    else:
        return np.concatenate(xs, axis=dim)
    keep = [x for x in xs if not cat_skipped(x.shape)] or xs[:1]
    return np.concatenate([x if x.dtype == npdt else x.astype(npdt) for x in keep], axis=dim)


def cat_meta(*xs, dim, dtype):
    keep = [(i, x) for i, x in enumerate(xs) if not cat_skipped(x.shape)]
    if not keep:
        return TensorSpec((0,), dtype)
    i0, first = keep[0]
    nd = len(first.shape)
    for i, x in keep:
        if not x.shape:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    d = wrap_dim(dim, nd)
    total = 0
    for i, x in keep:
        if len(x.shape) != nd:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {nd} and "
                               f"{len(x.shape)}")
        for j in range(nd):
            if j != d and x.shape[j] != first.shape[j]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size "
                    f"{first.shape[j]} but got size {x.shape[j]} for tensor number {i} in the list.")
        total += x.shape[d]
    shape = list(first.shape)
    shape[d] = total
    return TensorSpec(tuple(shape), dtype)


def _cat_vjp(ctx, g):
    dim = ctx.attrs["dim"]
    sizes = [0 if cat_skipped(x.shape) else x.shape[dim] for x in ctx.inputs]
    parts = g.split(sizes, dim)
    return tuple(x.new_zeros((0,)) if cat_skipped(x.shape) else p
                 for x, p in zip(ctx.inputs, parts))


cat = define("cat", "movement", _cat, meta=cat_meta, vjp=_cat_vjp,
             doc="Join tensors along an existing dimension (dtype promoted across inputs).")


def _stack(*xs, dim, dtype):
    npdt = dtype.np
    shape = xs[0].shape
    for x in xs:
        if x.shape != shape:
            raise ValueError("shape")
    unit = shape[:dim] + (1,) + shape[dim:]
    # reshape only adds a unit dim: a view for any layout
    return np.concatenate([(x if x.dtype == npdt else x.astype(npdt)).reshape(unit) for x in xs],
                          axis=dim)


def stack_meta(*xs, dim, dtype):
    first = xs[0]
    for i, x in enumerate(xs):
        if tuple(x.shape) != tuple(first.shape):
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(first.shape)} at entry 0 and {list(x.shape)} at entry {i}")
    d = wrap_dim(dim, len(first.shape) + 1)
    shape = list(first.shape)
    shape.insert(d, len(xs))
    return TensorSpec(tuple(shape), dtype)


def _stack_vjp(ctx, g):
    return g.unbind(ctx.attrs["dim"])


stack = define("stack", "movement", _stack, meta=stack_meta, vjp=_stack_vjp,
               doc="Join same-shaped tensors along a new dimension.")


# ---------------------------------------------------------------- split / unbind

def split_sizes(n, split_size):
    """The sizes of ``split(split_size)`` of a dimension of size ``n``."""
    if split_size == 0:
        return [0] if n == 0 else []
    full, rest = divmod(n, split_size)
    return [split_size] * full + ([rest] if rest else []) if n else [0]


def _split_with_sizes(x, sizes, dim):
    out = []
    start = 0
    pre = (_pyslice(None),) * dim
    for s in sizes:
        out.append(x[pre + (_pyslice(start, start + s),)])
        start += s
    return tuple(out)


def _split_with_sizes_meta(x, sizes, dim):
    n = x.shape[dim]
    for s in sizes:
        if s < 0:
            raise RuntimeError("split_with_sizes expects split_sizes have only non-negative "
                               f"entries, but got split_sizes={list(sizes)}")
    if sum(sizes) != n:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input "
                           f"tensor's size at dimension {dim}), but got split_sizes={list(sizes)}")
    return tuple(_same_spec(x, tuple(x.shape[:dim]) + (s,) + tuple(x.shape[dim + 1:]))
                 for s in sizes)


def _split_impl(x, split_size, dim):
    return _split_with_sizes(x, split_sizes(x.shape[dim], split_size), dim)


def _split_meta(x, split_size, dim):
    return _split_with_sizes_meta(x, split_sizes(x.shape[dim], split_size), dim)


def _join_grads(ctx, grads, sizes, dim):
    x = ctx.inputs[0]
    shape = list(x.shape)
    parts = []
    for g, s in zip(grads, sizes):
        if g is None:
            shape[dim] = s
            g = x.new_zeros(tuple(shape))
        parts.append(g)
    return (eager.cat(parts, dim),)


split = define("split", "movement", _split_impl, meta=_split_meta, view=True,
               vjp=lambda ctx, *gs: _join_grads(
                   ctx, gs, split_sizes(ctx.inputs[0].shape[ctx.attrs["dim"]],
                                        ctx.attrs["split_size"]), ctx.attrs["dim"]),
               doc="Views of consecutive pieces of ``split_size`` along ``dim``.")
split_with_sizes = define(
    "split_with_sizes", "movement", _split_with_sizes, meta=_split_with_sizes_meta, view=True,
    vjp=lambda ctx, *gs: _join_grads(ctx, gs, ctx.attrs["sizes"], ctx.attrs["dim"]),
    doc="Views of consecutive pieces of the given sizes along ``dim``.")


def _unbind(x, dim):
    pre = (_pyslice(None),) * dim
    return tuple(x[pre + (i,)] for i in range(x.shape[dim]))


def _unbind_meta(x, dim):
    shape = tuple(x.shape)
    return tuple(_same_spec(x, shape[:dim] + shape[dim + 1:]) for _ in range(shape[dim]))


def _unbind_vjp(ctx, *grads):
    x = ctx.inputs[0]
    dim = ctx.attrs["dim"]
    shape = tuple(x.shape)
    shape = shape[:dim] + shape[dim + 1:]
    parts = [x.new_zeros(shape) if g is None else g for g in grads]
    return (eager.stack(parts, dim),)


unbind = define("unbind", "movement", _unbind, meta=_unbind_meta, vjp=_unbind_vjp, view=True,
                doc="Views of every slice along ``dim``, without that dimension.")


# ---------------------------------------------------------------- slice

def slice_shape(shape, dim, start, end, step):
    """The shape of ``x[..., start:end:step, ...]`` along ``dim`` (start/end already clamped)."""
    n = max(0, (end - start + step - 1) // step)
    return tuple(shape[:dim]) + (n,) + tuple(shape[dim + 1:])


def _slice(x, dim, start, end, step):
    return x[(_pyslice(None),) * dim + (_pyslice(start, end, step),)]


def _slice_meta(x, dim, start, end, step):
    if step <= 0:
        raise ValueError("step must be greater than zero")
    return _same_spec(x, slice_shape(x.shape, dim, start, end, step))


def _slice_vjp(ctx, g):
    a = ctx.attrs
    zeros = g.new_zeros(tuple(ctx.inputs[0].shape))
    return (_call(slice_scatter, zeros, g, **a),)


slice = define("slice", "movement", _slice, meta=_slice_meta, vjp=_slice_vjp,  # noqa: A001
               view=True, doc="A view of every ``step``-th element in [start, end) along ``dim``.")


def _slice_scatter(x, src, dim, start, end, step):
    out = x.copy()
    target = _slice(out, dim, start, end, step)
    if target.shape != src.shape:
        raise ValueError("shape")
    target[...] = src
    return out


def _slice_scatter_meta(x, src, dim, start, end, step):
    want = slice_shape(x.shape, dim, start, end, step)
    return _scatter_spec(x, src, want)


def _slice_scatter_vjp(ctx, g):
    a = ctx.attrs
    gx = gs = None
    if ctx.needs(0):
        gx = _call(slice_scatter, g, g.new_zeros(tuple(ctx.inputs[1].shape)), **a)
    if ctx.needs(1):
        gs = _call(slice, g, **a)
    return gx, gs


slice_scatter = define("slice_scatter", "movement", _slice_scatter, meta=_slice_scatter_meta,
                       vjp=_slice_scatter_vjp,
                       doc="A copy of input with the slice [start:end:step] along dim replaced by src.")


def _narrow_copy_vjp(ctx, g):
    a = ctx.attrs
    zeros = g.new_zeros(tuple(ctx.inputs[0].shape))
    return (_call(slice_scatter, zeros, g, dim=a["dim"], start=a["start"],
                  end=a["start"] + a["length"], step=1),)


narrow_copy = define(
    "narrow_copy", "movement",
    lambda x, dim, start, length: _slice(x, dim, start, start + length, 1).copy(),
    meta=lambda x, dim, start, length: _same_spec(
        x, slice_shape(x.shape, dim, start, start + length, 1)),
    vjp=_narrow_copy_vjp, doc="A copy of length elements of dim from start.")


# ---------------------------------------------------------------- functionalized aliasing
# The tracer turns reads and writes through views of a buffer into pure ops over the buffer's
# elements in C order: ``strided_view`` reads a strided window, ``strided_scatter`` returns a
# copy with that window replaced.  Neither depends on where a backend keeps its arrays.

def _flat_window(flat, size, stride, offset):
    item = flat.itemsize
    return _np_as_strided(flat[offset:], tuple(size), tuple(s * item for s in stride))


def _strided_view(x, size, stride, offset):
    flat = np.ascontiguousarray(x).reshape(-1)
    return _flat_window(flat, size, stride, offset).copy()


def _strided_view_meta(x, size, stride, offset):
    numel = _spec_numel(x)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride) if n > 0)
    if len(size) != len(stride) or (prod(size) > 0 and (offset < 0 or last >= numel)):
        raise RuntimeError(f"strided_view: window size={list(size)} stride={list(stride)} "
                           f"offset={offset} does not fit {numel} elements")
    return _same_spec(x, size)


def _strided_scatter(base, src, size, stride, offset):
    out = np.array(base, order="C")
    _flat_window(out.reshape(-1), size, stride, offset)[...] = src
    return out


def _strided_scatter_meta(base, src, size, stride, offset):
    _strided_view_meta(base, size, stride, offset)
    from .core import broadcast_shapes
    if broadcast_shapes(tuple(src.shape), tuple(size)) != tuple(size):
        raise RuntimeError(f"strided_scatter: source of shape {list(src.shape)} does not "
                           f"broadcast to the window {list(size)}")
    return _same_spec(base, base.shape)


strided_view = define("strided_view", "movement", _strided_view, meta=_strided_view_meta,
                      differentiable=False,
                      doc="The elements of x (in C order) at offset + sum(i_k * stride_k): a read "
                          "through a view, as the tracer functionalizes it.")
strided_scatter = define("strided_scatter", "movement", _strided_scatter,
                         meta=_strided_scatter_meta, differentiable=False,
                         doc="A copy of base with the strided window replaced by src: a write "
                             "through a view, as the tracer functionalizes it.")
