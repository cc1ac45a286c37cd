"""Movement primitives: views (view, expand, permute, transpose, squeeze, unsqueeze, diagonal,
as_strided, unfold, split, unbind) and data-moving copies (reshape copy, cat, stack, flip,
roll, repeat, tril/triu, diag_embed).

View ops return numpy views of their input (``view=True``), so a base and its views share
memory and version counter exactly as PyTorch's do.  Where PyTorch decides between a view
and a copy (``reshape``) the decision uses PyTorch's stride rule (``compute_stride``), not
whatever numpy happens to do.  Derivative rules are written with tensor methods only.
"""
import numpy as np
from numpy.lib.stride_tricks import as_strided as _np_as_strided

from .core import define, TensorSpec, wrap_dim, wrap_dims, type_name

_ndarray = np.ndarray


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


def compute_stride(oldshape, oldstride, newshape):
    """Strides that view ``oldshape``/``oldstride`` as ``newshape``, or None (PyTorch's rule)."""
    if not oldshape:
        return (1,) * len(newshape)
    numel = prod(oldshape)
    if numel == 0 and tuple(oldshape) == tuple(newshape):
        return tuple(oldstride)
    nd = len(newshape)
    newstride = [0] * nd
    if numel == 0:
        for d in range(nd - 1, -1, -1):
            newstride[d] = 1 if d == nd - 1 else max(newshape[d + 1], 1) * newstride[d + 1]
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
    """A view of ``x``'s memory with ``shape``, element ``strides`` and ``offset`` elements
    from x's first element.  The view's ``.base`` chain ends at x's owner (so storage offsets
    stay meaningful) and it is read-only when ``x`` is."""
    item = x.itemsize
    bstrides = tuple(s * item for s in strides)
    root = storage_root(x)
    start = x.__array_interface__["data"][0] - root.__array_interface__["data"][0] + offset * item
    try:
        out = _ndarray(shape, x.dtype, root, start, bstrides)
    except (TypeError, ValueError, BufferError):
        # an owner without a plain buffer (e.g. made by numpy's as_strided): step from x
        step = item if offset >= 0 else -item
        first = _np_as_strided(x, (abs(offset) + 1,), (step,))[abs(offset):]
        out = _np_as_strided(first, shape, bstrides)
    if not x.flags.writeable and out.flags.writeable:
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
    strides = compute_stride(x.shape, elem_strides(x), shape)
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
              doc="A view with a new shape (PyTorch's stride rule decides if one exists).")


def _unsafe_view(x, shape):
    return x.copy().reshape(shape)


unsafe_view = define("unsafe_view", "movement", _unsafe_view, meta=_view_meta, vjp=_reshape_vjp,
                     grad_name="UnsafeViewBackward0",
                     doc="reshape's copying path: a contiguous copy with the new shape.")


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
    src = D._FROM_NP[x.dtype]
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
                    doc="Reinterpret the bytes as another dtype (Tensor.view(dtype)).")


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
    for n, s, st in zip(x.shape, shape[lead:], elem_strides(x)):
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
    dims = tuple(range(lead)) + tuple(
        i + lead for i, n in enumerate(shape) if n == 1 and gshape[i + lead] != 1)
    if dims:
        g = g.sum(dims, keepdim=True)
    if lead:
        g = g.reshape(shape)
    return g


expand = define("expand", "movement", _expand, meta=_expand_meta,
                vjp=lambda ctx, g: (sum_to_shape(g, ctx.inputs[0].shape),), view=True,
                doc="A stride-0 view repeating size-1 dimensions (read-only in memory).")


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
                 vjp=_permute_vjp, view=True, doc="A view with the dimensions reordered.")


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
                   view=True, doc="A view with two dimensions swapped.")


def _t_meta(x):
    if len(x.shape) > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {len(x.shape)}D")
    return _same_spec(x, tuple(reversed(x.shape)))


def _t(x):
    if x.ndim > 2:
        raise ValueError("ndim")
    return x.T if x.ndim == 2 else x.view()


t = define("t", "movement", _t, meta=_t_meta, vjp=lambda ctx, g: (g.t(),), grad_name="TBackward0",
           view=True, doc="Transpose of a tensor with at most 2 dimensions.")


# ---------------------------------------------------------------- squeeze / unsqueeze

def _squeeze_vjp(ctx, g):
    return (g.reshape(ctx.inputs[0].shape),)


def _squeeze_all_meta(x):
    return _same_spec(x, tuple(n for n in x.shape if n != 1))


squeeze = define("squeeze", "movement", lambda x: x.squeeze(), meta=_squeeze_all_meta,
                 vjp=_squeeze_vjp, view=True, grad_name="SqueezeBackward0",
                 doc="A view without the size-1 dimensions.")


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
                     doc="A view without dimension ``dim`` if its size is 1.")
squeeze_dims = define("squeeze_dims", "movement", _squeeze_dims_impl, meta=_squeeze_dims_meta,
                      vjp=_squeeze_vjp, view=True, grad_name="SqueezeBackward2",
                      doc="A view without those of ``dims`` whose size is 1.")


def unsqueeze_strides(shape, strides, dim):
    st = strides[dim] * shape[dim] if dim < len(shape) else 1
    return strides[:dim] + (st,) + strides[dim:]


def _unsqueeze(x, dim):
    shape = x.shape[:dim] + (1,) + x.shape[dim:]
    if x.flags.c_contiguous:
        return x.reshape(shape)
    return strided(x, shape, unsqueeze_strides(x.shape, elem_strides(x), dim))


def _unsqueeze_meta(x, dim):
    d = wrap_dim(dim, len(x.shape) + 1)
    return _same_spec(x, tuple(x.shape[:d]) + (1,) + tuple(x.shape[d:]))


unsqueeze = define("unsqueeze", "movement", _unsqueeze, meta=_unsqueeze_meta,
                   vjp=lambda ctx, g: (g.squeeze(ctx.attrs["dim"]),), view=True,
                   doc="A view with a size-1 dimension inserted at ``dim``.")
