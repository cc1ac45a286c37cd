"""Convolution primitives: ``convolution`` (N-d, grouped, strided, dilated, transposed),
``convolution_weight_grad`` (the weight gradient of a convolution) and the ``im2col`` /
``col2im`` pair behind nn.functional.unfold and fold.

All of them are im2col + BLAS products, in a channel-major layout:

* the input is copied once, transposed to (C, N, *padded) and zero-padded, so every channel
  is one long line holding all images;
* its sliding windows (an ``as_strided`` view) are copied, one cache-sized tile of columns
  at a time, into a contiguous column buffer (C * prod(K), t) and one ``np.dot`` per group
  applies the weight: (O, C*K) @ (C*K, t).  Tiles keep the columns in the 2nd-level cache
  between their copy and their product; a whole buffer (C*K times every output position)
  would travel to memory and back;
* the transposed direction with stride 1 is the same direct product over the zero-padded
  input lines with the kernel flipped; with other strides it multiplies first and scatters
  back (col2im) with a short loop over kernel offsets (never over pixels or batch items);
* the weight gradient is a product over every (image, position): (O, M) @ (M, C*K), summed
  over the same column tiles.

When every stride is 1 and padding wastes little, the windows are read straight along the
flattened lines ("flat" columns): column j reads position j + offset(k), so every copied row
is one contiguous run (numpy copies those several times faster than rows of W_out
elements); the positions that straddle a row or image end are computed and dropped.

Derivative rules (each written with these primitives, so gradgradcheck runs):

* conv:   d input  = transposed conv of the gradient with the same weight,
          d weight = ``convolution_weight_grad(input, grad)``,   d bias = grad summed;
* transposed conv: d input = conv of the gradient with the same weight (narrowed),
          d weight = ``convolution_weight_grad(grad, input)``;
* ``convolution_weight_grad`` is bilinear in (input, grad): its derivatives are a
  transposed conv and a conv with the incoming weight cotangent.
"""
import itertools
import math

import numpy as np

from dynograph.runtime import dtypes as D
from ..lowering.conv import run_convolution, run_weight_grad
from .core import TensorSpec, define, type_name
from .eager import call as _call

_as_strided = np.lib.stride_tricks.as_strided


# ---------------------------------------------------------------- shared helpers

def _compute(*arrays):
    """The arrays in their compute dtype: float16/bfloat16 run in float32."""
    if D.is_half(arrays[0].dtype):
        return [None if a is None else a.astype(np.float32) for a in arrays], arrays[0].dtype
    return list(arrays), None


def _conv_out_sizes(sizes, ksize, stride, padding, dilation):
    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                 for n, k, s, p, d in zip(sizes, ksize, stride, padding, dilation))


def _transposed_out_sizes(sizes, ksize, stride, padding, dilation, output_padding):
    return tuple((n - 1) * s - 2 * p + d * (k - 1) + op + 1
                 for n, k, s, p, d, op in zip(sizes, ksize, stride, padding, dilation, output_padding))


def _channel_major(x, padding):
    """x (N, C, *S) as a fresh zero-padded C-contiguous (C, N, *P) array: one long line per
    channel, so that every window of every image is a slice of it."""
    n, c = x.shape[:2]
    psizes = tuple(s + 2 * p for s, p in zip(x.shape[2:], padding))
    out = np.zeros((c, n) + psizes, x.dtype) if any(padding) else np.empty((c, n) + psizes, x.dtype)
    inner = tuple(slice(p, p + s) for p, s in zip(padding, x.shape[2:]))
    out[(slice(None), slice(None)) + inner] = x.transpose((1, 0) + tuple(range(2, x.ndim)))
    return out


def _flat_strides(psizes):
    """Element strides of a C-contiguous array of spatial shape ``psizes``."""
    out, acc = [], 1
    for n in reversed(psizes):
        out.append(acc)
        acc *= n
    return out[::-1]


def _line_len(n, osizes, psizes):
    """Flat layout: the columns needed to reach output position (n-1, osizes-1)."""
    return (n - 1) * math.prod(psizes) + sum((o - 1) * f for o, f in zip(osizes, _flat_strides(psizes))) + 1


def _use_flat(stride, osizes, psizes, waste):
    """Flat columns need stride 1; they pay while the wasted positions (padded size over
    output size) stay under ``waste``: 1.5 where the columns are copied (im2col), 2.5 where
    they are scattered back (col2im), whose strided adds cost more than contiguous ones."""
    return all(s == 1 for s in stride) and math.prod(psizes) <= waste * math.prod(osizes)


def _windows(xc, ksize, stride, dilation, osizes, flat):
    """The sliding windows of a channel-major padded input xc (C, N, *P), as a strided view
    (C, *K, T, *I): im2col's columns before the copy, tiled along T.

    ``flat`` (all strides 1): T is the flattened line, I is empty and column j reads xc's
    line at j + offset(k), so that output position (n, o) is column n * prod(P) +
    sum(o_i * Pstride_i) and every copied row is one contiguous run; positions between rows
    are computed and dropped.  Otherwise T = N and I = osizes, one column per output position.
    """
    c, n = xc.shape[:2]
    psizes = xc.shape[2:]
    sp = xc.strides[2:]
    kstrides = tuple(st * d for st, d in zip(sp, dilation))
    if flat:
        m = _line_len(n, osizes, psizes)
        return _as_strided(xc, (c,) + tuple(ksize) + (m,), (xc.strides[0],) + kstrides + (xc.itemsize,))
    ostrides = tuple(st * s for st, s in zip(sp, stride))
    return _as_strided(xc, (c,) + tuple(ksize) + (n,) + tuple(osizes),
                       xc.strides[:1] + kstrides + xc.strides[1:2] + ostrides)


def _columns(xc, ksize, stride, dilation, osizes, flat):
    """im2col of a channel-major padded input xc (C, N, *P): a C-contiguous (C * prod(K), M),
    M the columns of ``_windows`` (T * prod(I))."""
    view = _windows(xc, ksize, stride, dilation, osizes, flat)
    return view.reshape(math.prod(view.shape[:1 + len(ksize)]), -1)


# Column tiles of about this many bytes stay in the 2nd-level cache between their copy and
# their product: a whole column buffer (20 MB for the CIFAR tutorial's first layer) would go
# to memory and back twice, which costs more than the products themselves.
_TILE_BYTES = 1 << 19


def _tiles(view, ksize):
    """Yield (start, columns) over the windows ``view`` (C, *K, T, *I) cut along T: columns
    is a C-contiguous (C * prod(K), t * prod(I)) copy of windows start..start+t, written
    into one reused buffer (valid until the next tile)."""
    lead = 1 + len(ksize)
    rows = math.prod(view.shape[:lead])
    total, inner = view.shape[lead], view.shape[lead + 1:]
    per = math.prod(inner)
    step = max(1, _TILE_BYTES // max(1, rows * per * view.itemsize))
    if step >= total:
        yield 0, view.reshape(rows, total * per)
        return
    buf = np.empty(view.shape[:lead] + (step,) + inner, view.dtype)
    for i in range(0, total, step):
        t = min(step, total - i)
        part = buf[(slice(None),) * lead + (slice(0, t),)]
        np.copyto(part, view[(slice(None),) * lead + (slice(i, i + t),)])
        yield i * per, part.reshape(rows, t * per)


def _apply(w, view, ksize, groups):
    """w (O, C/G * K) applied to every column of the windows ``view``: the (O, M) product of
    im2col, one cache-sized tile of columns at a time."""
    o, g = w.shape[0], groups
    m = math.prod(view.shape[1 + len(ksize):])
    out = np.empty((o, m), view.dtype)
    wg = w.reshape(g, o // g, w.shape[1])
    for start, cols in _tiles(view, ksize):
        t = cols.shape[1]
        out[:, start:start + t] = _gemm(wg, cols.reshape(g, cols.shape[0] // g, t)).reshape(o, t)
    return out


def _from_lines(out, n, osizes, psizes, flat):
    """Products (C, M) in the column layout -> a C-contiguous (N, C, *osizes)."""
    c = out.shape[0]
    item = out.itemsize
    if flat:
        strides = (math.prod(psizes) * item, out.strides[0]) + tuple(f * item for f in _flat_strides(psizes))
        return np.ascontiguousarray(_as_strided(out, (n, c) + tuple(osizes), strides))
    return np.ascontiguousarray(out.reshape((c, n) + tuple(osizes)).swapaxes(0, 1))


def _to_lines(g, psizes, flat, lead=0, length=None):
    """(N, C, *O) -> a C-contiguous (C, M) in the column layout of padded size ``psizes``
    (zeros between rows in the flat layout, and ``lead`` zeros before each line, which is
    ``length`` long: at least the columns needed)."""
    n, c = g.shape[:2]
    osizes = g.shape[2:]
    if not flat:
        return np.ascontiguousarray(g.swapaxes(0, 1)).reshape(c, n * math.prod(osizes))
    m = lead + _line_len(n, osizes, psizes)
    out = np.zeros((c, m if length is None else max(m, length)), g.dtype)
    item = out.itemsize
    strides = (math.prod(psizes) * item, out.strides[0]) + tuple(f * item for f in _flat_strides(psizes))
    _as_strided(out[:, lead:], g.shape, strides)[...] = g
    return out


def _gemm(a, b):
    """Grouped matrix products (G, m, k) @ (G, k, n) -> (G, m, n); BLAS needs each operand
    C- or F-contiguous, which every caller guarantees."""
    # np.dot, not np.matmul: matmul leaves BLAS's fast path for a C-contiguous times an
    # F-contiguous operand with a long inner dimension (100x slower for the weight gradient)
    if a.shape[0] == 1:
        return np.dot(a[0], b[0])[None]
    return np.stack([np.dot(x, y) for x, y in zip(a, b)])


def _scatter(cols, ksize, stride, dilation, isizes, full):
    """Scatter-add columns (C, *K, N, *I) into a zeroed (C, N, *full) array: the adjoint of
    im2col, one strided add per kernel offset."""
    c, n = cols.shape[0], cols.shape[1 + len(ksize)]
    out = np.zeros((c, n) + tuple(full), cols.dtype)
    for ks in itertools.product(*[range(k) for k in ksize]):
        dst = tuple(slice(k * d, k * d + (i - 1) * s + 1, s)
                    for k, d, i, s in zip(ks, dilation, isizes, stride))
        out[(slice(None), slice(None)) + dst] += cols[(slice(None),) + ks]
    return out


# ---------------------------------------------------------------- the kernels

def _conv_forward(x, w, stride, padding, dilation, groups):
    """Direct convolution: x (N, C, *S), w (O, C/G, *K) -> (N, O, *out)."""
    n, o = x.shape[0], w.shape[0]
    ksize = w.shape[2:]
    osizes = _conv_out_sizes(x.shape[2:], ksize, stride, padding, dilation)
    xc = _channel_major(x, padding)
    psizes = xc.shape[2:]
    flat = _use_flat(stride, osizes, psizes, 1.5)
    view = _windows(xc, ksize, stride, dilation, osizes, flat)
    out = _apply(w.reshape(o, math.prod(w.shape[1:])), view, ksize, groups)
    return _from_lines(out, n, osizes, psizes, flat)


def _conv_transposed(x, w, stride, padding, dilation, groups, output_padding):
    """Transposed convolution: x (N, Cin, *I), w (Cin, Cout/G, *K) -> (N, Cout, *out)."""
    n, cin = x.shape[:2]
    g = groups
    ksize = tuple(w.shape[2:])
    isizes = x.shape[2:]
    cout = w.shape[1] * g
    osizes = _transposed_out_sizes(isizes, ksize, stride, padding, dilation, output_padding)
    full = tuple(o + 2 * p for o, p in zip(osizes, padding))
    if _use_flat(stride, isizes, full, 2.5):
        out = _transposed_flat(x, w, ksize, dilation, g, full)
    else:
        ckg = w.shape[1] * math.prod(ksize)
        wt = w.reshape(g, cin // g, ckg).transpose(0, 2, 1)            # (G, Cout/G * K, Cin/G)
        xl = _to_lines(x, full, False)
        m = xl.shape[1]
        cols = _gemm(wt, xl.reshape(g, cin // g, m)).reshape((cout,) + ksize + (n,) + tuple(isizes))
        out = _scatter(cols, ksize, stride, dilation, isizes, full)
    out = out[(slice(None), slice(None)) + tuple(slice(p, p + s) for p, s in zip(padding, osizes))]
    return np.ascontiguousarray(out.swapaxes(0, 1))


def _transposed_flat(x, w, ksize, dilation, groups, full):
    """Stride-1 transposed convolution as a direct one over x's flat lines: output position
    j sums w[.., k] * x_line[j - offset(k)], so with ``offset(K-1)`` zeros before each line
    it is a flat convolution (columns j + offset(K-1-k)) with the kernel flipped and its
    channel axes swapped.  Returns the channel-major (Cout, N, *full)."""
    n, cin = x.shape[:2]
    g, k = groups, len(ksize)
    cout = w.shape[1] * g
    fstr = _flat_strides(full)
    lead = sum((s - 1) * d * f for s, d, f in zip(ksize, dilation, fstr))
    length = n * math.prod(full)
    lines = _to_lines(x, full, True, lead, lead + length)
    item = lines.itemsize
    view = _as_strided(lines, (cin,) + ksize + (length,),
                       (lines.strides[0],) + tuple(d * f * item for d, f in zip(dilation, fstr)) + (item,))
    wf = w.reshape((g, cin // g, cout // g) + ksize).swapaxes(1, 2)
    wf = wf[(Ellipsis,) + (slice(None, None, -1),) * k].reshape(cout, cin // g * math.prod(ksize))
    return _apply(wf, view, ksize, g).reshape((cout, n) + tuple(full))


def _weight_grad(x, gy, ksize, stride, padding, dilation, groups):
    """d<conv(x, w), gy>/dw: x (N, C, *S), gy (N, O, *L) -> (O, C/G, *K).

    gy may cover fewer output positions than the convolution produces (a transposed
    convolution's input): only those positions count.
    """
    c, o, g = x.shape[1], gy.shape[1], groups
    osizes = gy.shape[2:]
    xc = _channel_major(x, padding)
    psizes = xc.shape[2:]
    flat = _use_flat(stride, osizes, psizes, 1.5)
    gl = _to_lines(gy, psizes, flat)
    # one product over every (batch, position), summed over cache-sized tiles:
    # (G, O/G, M) @ (G, M, CK/G)
    gw = 0
    for start, cols in _tiles(_windows(xc, ksize, stride, dilation, osizes, flat), ksize):
        t = cols.shape[1]
        gw = gw + _gemm(gl[:, start:start + t].reshape(g, o // g, t),
                        cols.reshape(g, cols.shape[0] // g, t).transpose(0, 2, 1))
    return gw.reshape((o, c // g) + tuple(ksize))


def _finish(out, bias, low):
    if bias is not None:
        out += bias.reshape((1, -1) + (1,) * (out.ndim - 2))
    return out.astype(low) if low is not None else out


# ---------------------------------------------------------------- convolution

def _array_spec(a):
    return None if a is None else TensorSpec(a.shape, D.from_numpy_dtype(a.dtype))


def _convolution(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    # the meta rule holds every check PyTorch makes (and the output shape)
    spec = _convolution_meta(_array_spec(x), _array_spec(w), _array_spec(bias), stride, padding,
                             dilation, transposed, output_padding, groups)
    if 0 in spec.shape:
        return np.zeros(spec.shape, x.dtype)
    (x, w, bias), low = _compute(x, w, bias)
    if transposed:
        out = _conv_transposed(x, w, stride, padding, dilation, groups, output_padding)
    else:
        out = _conv_forward(x, w, stride, padding, dilation, groups)
    return _finish(out, bias, low)


def _listed(name, v, k):
    if len(v) != k:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {k} values "
                           f"to match the convolution dimensions, but got {name}={list(v)}")


def _tensor_type(dt):
    """A dtype as PyTorch's MKLDNN type check names it ('dynograph.FloatTensor')."""
    return {"bfloat16": "CPUBFloat16Type", "bool": "CPUBoolType"}.get(
        dt.name, f"dynograph.{dt.tensor_type}")


def _check_params(x, w, stride, padding, dilation, groups, output_padding=None):
    if len(w.shape) < 3:
        raise RuntimeError("weight should have at least three dimensions")
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    k = len(w.shape) - 2
    _listed("stride", stride, k)
    _listed("padding", padding, k)
    _listed("dilation", dilation, k)
    if output_padding is not None:
        _listed("output_padding", output_padding, k)
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if output_padding is not None and any(p < 0 for p in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d < 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero")
    if any(d == 0 for d in dilation):
        raise RuntimeError("non-positive dilation is not supported")
    if len(x.shape) != len(w.shape):
        raise RuntimeError(
            f"Expected {len(w.shape)}-dimensional input for {len(w.shape)}-dimensional weight "
            f"{list(w.shape)}, but got {len(x.shape)}-dimensional input of size {list(x.shape)} "
            "instead")


def _sizes_text(sizes):
    return " x ".join(str(n) for n in sizes)


def _convolution_meta(x, w, bias, stride, padding, dilation, transposed, output_padding, groups):
    """PyTorch's checks, in its order: parameters, shapes, sizes, then the element types."""
    _check_params(x, w, stride, padding, dilation, groups, output_padding if transposed else None)
    cout = _check_channels(x, w, bias, transposed, groups)
    ksize = tuple(w.shape[2:])
    sizes = tuple(x.shape[2:])
    if transposed:
        out = _transposed_out_sizes(sizes, ksize, stride, padding, dilation, output_padding)
    else:
        padded = tuple(n + 2 * p for n, p in zip(sizes, padding))
        dk = tuple(d * (k - 1) + 1 for k, d in zip(ksize, dilation))
        if any(k > n for k, n in zip(dk, padded)):
            raise RuntimeError(f"Calculated padded input size per channel: ({_sizes_text(padded)})."
                               f" Kernel size: ({_sizes_text(dk)}). Kernel size can't be greater "
                               "than actual input size")
        out = _conv_out_sizes(sizes, ksize, stride, padding, dilation)
    if x.shape[0] and x.shape[1] and 0 in sizes:
        shown = list(x.shape[:2]) + [1] * (len(sizes) == 1) + list(sizes)  # 1-d runs as 2-d
        raise RuntimeError("Only zero batch or zero channel inputs are supported, but got input "
                           f"shape: {shown}")
    if transposed and any(n <= 0 for n in out):
        raise RuntimeError(f"Given input size per channel: ({_sizes_text(sizes)}). Calculated "
                           f"output size per channel: ({_sizes_text(out)}). Output size is "
                           "too small")
    _check_types(x, w, bias, transposed, len(ksize))
    if x.shape[1] == 0 and not transposed:
        cout = 0                    # PyTorch: no input channels, no output channels
    return TensorSpec((x.shape[0], cout) + out, x.dtype)


def _check_channels(x, w, bias, transposed, groups):
    """The weight against groups, the input's channels and the bias; the output channels."""
    ws = list(w.shape)
    if w.shape[0] < groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at "
                           f"dimension 0, but got weight of size {ws} instead")
    if w.shape[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at "
                           f"dimension 0, but got weight of size [{ws}] instead")
    given = "Given transposed=1, " if transposed else ""
    want = w.shape[0] if transposed else w.shape[1] * groups
    if x.shape[1] != want:
        raise RuntimeError(f"{given or f'Given groups={groups}, '}weight of size {ws}, expected "
                           f"input{list(x.shape)} to have {want} channels, but got {x.shape[1]} "
                           "channels instead")
    cout = w.shape[1] * groups if transposed else w.shape[0]
    if bias is not None and (len(bias.shape) != 1 or bias.shape[0] != cout):
        raise RuntimeError(f"{given}Given weight of size {ws}, expected bias to be 1-dimensional "
                           f"with {cout} elements, but got bias of size {list(bias.shape)} instead"
                           .replace("1, Given weight", "1, weight"))
    return cout


def _check_types(x, w, bias, transposed, k):
    """PyTorch's CPU kernels: each reports mismatched element types in its own words."""
    if x.dtype is D.bool or (transposed and x.dtype is D.int32):
        if transposed:
            kernel = f"slow_conv_transpose{max(k, 2)}d_out_cpu"
        else:
            kernel = "compute_columns3d" if k == 3 else "slow_conv2d_cpu"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{type_name(x.dtype)}'")
    if x.dtype is not w.dtype:
        if x.dtype is D.float32:
            raise RuntimeError(
                f"Input type (dynograph.FloatTensor) and weight type ({_tensor_type(w.dtype)}) should "
                "be the same or input should be a MKLDNN tensor and weight is a dense tensor")
        raise RuntimeError(f"expected scalar type {type_name(x.dtype)} but found "
                           f"{type_name(w.dtype)}")
    if bias is None or bias.dtype is x.dtype:
        return
    if not transposed:
        raise RuntimeError(f"Input type ({x.dtype.type_meta_name}) and bias type "
                           f"({bias.dtype.type_meta_name}) should be the same")
    if x.dtype is D.float32:
        raise RuntimeError(
            f"Input type (dynograph.FloatTensor) and bias type ({_tensor_type(bias.dtype)}) should be "
            "the same or input should be a MKLDNN tensor and bias is a dense tensor")
    if k == 3:
        raise RuntimeError(f"expected scalar type {type_name(x.dtype)} but found "
                           f"{type_name(bias.dtype)}")
    # PyTorch's 1-d and 2-d transposed kernels add a bias of another type to the output


def _reduce_to(t, sizes):
    """Narrow the spatial dims of ``t`` (N, C, *S) to ``sizes`` where they are longer."""
    for i, n in enumerate(sizes):
        if t.shape[2 + i] != n:
            t = t.narrow(2 + i, 0, n)
    return t


def _convolution_vjp(ctx, g):
    x, w, bias = ctx.inputs
    a = ctx.attrs
    stride, padding, dilation, groups = a["stride"], a["padding"], a["dilation"], a["groups"]
    ksize = tuple(w.shape[2:])
    gx = gw = gb = None
    if a["transposed"]:
        if ctx.needs(0):
            gx = _call(convolution, g, w, None, stride=stride, padding=padding, dilation=dilation,
                       transposed=False, output_padding=(0,) * len(ksize), groups=groups)
            gx = _reduce_to(gx, tuple(x.shape[2:]))
        if ctx.needs(1):
            gw = _call(convolution_weight_grad, g, x, kernel_size=ksize, stride=stride,
                       padding=padding, dilation=dilation, groups=groups)
    else:
        if ctx.needs(0):
            gx = _grad_input(g, w, tuple(x.shape[2:]), stride, padding, dilation, groups)
        if ctx.needs(1):
            gw = _call(convolution_weight_grad, x, g, kernel_size=ksize, stride=stride,
                       padding=padding, dilation=dilation, groups=groups)
    if bias is not None and ctx.needs(2):
        gb = g.sum([0] + list(range(2, g.dim())))
    return gx, gw, gb


def _grad_input(g, w, sizes, stride, padding, dilation, groups):
    """d<conv(x, w), g>/dx for x of spatial ``sizes``: a transposed conv of g, sized to x."""
    ksize = tuple(w.shape[2:])
    base = _transposed_out_sizes(tuple(g.shape[2:]), ksize, stride, padding, dilation,
                                 (0,) * len(ksize))
    extra = tuple(n - b for n, b in zip(sizes, base))
    return _call(convolution, g, w, None, stride=stride, padding=padding, dilation=dilation,
                 transposed=True, output_padding=extra, groups=groups)


convolution = define(
    "convolution", "linalg", _convolution, meta=_convolution_meta, vjp=_convolution_vjp,
    grad_name="ConvolutionBackward0", kernel=run_convolution,
    doc="N-d convolution (or its transpose) of input (N, C, *S) with weight and optional bias; "
        "attrs stride, padding, dilation, transposed, output_padding (tuples) and groups.")


# ---------------------------------------------------------------- convolution_weight_grad

def _weight_grad_impl(x, gy, kernel_size, stride, padding, dilation, groups):
    if x.dtype != gy.dtype or x.ndim != gy.ndim or x.ndim < 3:
        raise ValueError("convolution_weight_grad")
    (x, gy), low = _compute(x, gy)
    out = _weight_grad(x, gy, tuple(kernel_size), stride, padding, dilation, groups)
    return _finish(out, None, low)


def _weight_grad_meta(x, gy, kernel_size, stride, padding, dilation, groups):
    k = len(kernel_size)
    if len(x.shape) != k + 2 or len(gy.shape) != k + 2:
        raise RuntimeError(f"convolution_weight_grad: expected {k + 2}-dimensional input and "
                           f"grad_output, got {list(x.shape)} and {list(gy.shape)}")
    if x.dtype is not gy.dtype:
        raise RuntimeError(f"expected scalar type {type_name(x.dtype)} but found "
                           f"{type_name(gy.dtype)}")
    full = _conv_out_sizes(tuple(x.shape[2:]), kernel_size, stride, padding, dilation)
    if x.shape[0] != gy.shape[0] or x.shape[1] % groups or gy.shape[1] % groups \
            or any(n > f for n, f in zip(gy.shape[2:], full)):
        raise RuntimeError(f"convolution_weight_grad: input {list(x.shape)} and grad_output "
                           f"{list(gy.shape)} do not fit kernel_size={list(kernel_size)}, "
                           f"groups={groups}")
    return TensorSpec((gy.shape[1], x.shape[1] // groups) + tuple(kernel_size), x.dtype)


def _weight_grad_vjp(ctx, gw):
    x, gy = ctx.inputs
    a = ctx.attrs
    stride, padding, dilation, groups = a["stride"], a["padding"], a["dilation"], a["groups"]
    gx = ggy = None
    if ctx.needs(0):
        gx = _grad_input(gy, gw, tuple(x.shape[2:]), stride, padding, dilation, groups)
    if ctx.needs(1):
        ggy = _call(convolution, x, gw, None, stride=stride, padding=padding, dilation=dilation,
                    transposed=False, output_padding=(0,) * len(stride), groups=groups)
        ggy = _reduce_to(ggy, tuple(gy.shape[2:]))
    return gx, ggy


convolution_weight_grad = define(
    "convolution_weight_grad", "linalg", _weight_grad_impl, meta=_weight_grad_meta,
    vjp=_weight_grad_vjp, grad_name="ConvolutionBackwardBackward0", kernel=run_weight_grad,
    doc="The weight gradient of a convolution: d<conv(input, w), grad_output>/dw, of shape "
        "(O, C/groups, *kernel_size).")


# ---------------------------------------------------------------- im2col, col2im

def _im2col(x, kernel_size, dilation, padding, stride):
    """(N, C, *S) -> (N, C * prod(K), L): nn.functional.unfold."""
    if x.ndim != len(kernel_size) + 2:
        raise ValueError("im2col")
    osizes = _conv_out_sizes(x.shape[2:], kernel_size, stride, padding, dilation)
    if any(o <= 0 for o in osizes):
        raise ValueError("im2col")
    n = x.shape[0]
    if x.size == 0:
        return np.zeros((n, x.shape[1] * math.prod(kernel_size), math.prod(osizes)), x.dtype)
    cols = _columns(_channel_major(x, padding), kernel_size, stride, dilation, osizes, flat=False)
    return np.ascontiguousarray(cols.reshape(cols.shape[0], n, -1).swapaxes(0, 1))


def _blocks(sizes, kernel_size, dilation, padding, stride):
    return _conv_out_sizes(sizes, kernel_size, stride, padding, dilation)


def _im2col_meta(x, kernel_size, dilation, padding, stride):
    sizes = tuple(x.shape[2:])
    osizes = _blocks(sizes, kernel_size, dilation, padding, stride)
    if any(o <= 0 for o in osizes):
        raise RuntimeError(
            f"Given input with spatial size {_tup_text(sizes)}, kernel_size={_tup_text(kernel_size)}"
            f", dilation={_tup_text(dilation)}, padding={_tup_text(padding)}, calculated shape of "
            f"the array of sliding blocks as {_tup_text(osizes)}, but its components must be at "
            "least one.")
    return TensorSpec((x.shape[0], x.shape[1] * math.prod(kernel_size), math.prod(osizes)), x.dtype)


def _tup_text(t):
    return "(" + ", ".join(str(n) for n in t) + ")"


def _im2col_vjp(ctx, g):
    x = ctx.inputs[0]
    a = ctx.attrs
    return (_call(col2im, g, output_size=tuple(x.shape[2:]), kernel_size=a["kernel_size"],
                  dilation=a["dilation"], padding=a["padding"], stride=a["stride"]),)


im2col = define("im2col", "linalg", _im2col, meta=_im2col_meta, vjp=_im2col_vjp,
                grad_name="Im2ColBackward0",
                doc="Sliding blocks of a batched (N, C, *S) input as columns (unfold).")


def _col2im(cols, output_size, kernel_size, dilation, padding, stride):
    """(N, C * prod(K), L) -> (N, C, *output_size), overlapping values summed: fold."""
    k = math.prod(kernel_size)
    osizes = _blocks(output_size, kernel_size, dilation, padding, stride)
    if cols.ndim != 3 or cols.shape[1] % k or cols.shape[2] != math.prod(osizes) \
            or any(o <= 0 for o in osizes):
        raise ValueError("col2im")
    n, ck = cols.shape[:2]
    c = cols.swapaxes(0, 1).reshape((ck // k,) + tuple(kernel_size) + (n,) + tuple(osizes))
    full = tuple(s + 2 * p for s, p in zip(output_size, padding))
    out = _scatter(c, kernel_size, stride, dilation, osizes, full)
    out = out[(slice(None), slice(None)) + tuple(slice(p, p + s) for p, s in zip(padding, output_size))]
    return np.ascontiguousarray(out.swapaxes(0, 1))


def _col2im_meta(cols, output_size, kernel_size, dilation, padding, stride):
    k = math.prod(kernel_size)
    if cols.shape[1] % k:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product "
                           f"of kernel_size, but got input.size(1)={cols.shape[1]} and "
                           f"kernel_size={_tup_text(kernel_size)}.")
    osizes = _blocks(output_size, kernel_size, dilation, padding, stride)
    if any(o <= 0 for o in osizes) or cols.shape[2] != math.prod(osizes):
        blocks = " * ".join(str(o) for o in osizes)
        raise RuntimeError(
            f"Given output_size={_tup_text(output_size)}, kernel_size={_tup_text(kernel_size)}, "
            f"dilation={_tup_text(dilation)}, padding={_tup_text(padding)}, "
            f"stride={_tup_text(stride)}, expected size of input's dimension 2 to match the "
            f"calculated number of sliding blocks {blocks} = {math.prod(osizes)}, but got "
            f"input.size(2)={cols.shape[2]}.")
    return TensorSpec((cols.shape[0], cols.shape[1] // k) + tuple(output_size), cols.dtype)


def _col2im_vjp(ctx, g):
    a = ctx.attrs
    return (_call(im2col, g, kernel_size=a["kernel_size"], dilation=a["dilation"],
                  padding=a["padding"], stride=a["stride"]),)


col2im = define("col2im", "linalg", _col2im, meta=_col2im_meta, vjp=_col2im_vjp,
                grad_name="Col2ImBackward0",
                doc="Sums columns (N, C * prod(K), L) back into (N, C, *output_size) (fold).")
