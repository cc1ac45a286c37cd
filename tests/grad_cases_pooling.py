"""gradcheck cases for the pooling primitives (compiler/ops/pooling.py)."""
import dynograph.nn.functional as F
from grad_inputs import distinct, grad_of, r


def _unpool(x):
    out, idx = F.max_pool2d(x.detach(), 2, return_indices=True)
    return F.max_unpool2d(x[..., ::2, ::2] * 1, idx, 2, output_size=(4, 4))


CASES = {
    "max_pool2d_with_indices": (lambda x: F.max_pool2d(x, 2, stride=1, padding=1),
                                lambda: (distinct(1, 2, 3, 3),)),
    "max_pool3d_with_indices": (lambda x: F.max_pool3d(x, 2, stride=1),
                                lambda: (distinct(1, 3, 3, 2),)),
    "max_pool_backward": (grad_of(lambda x: F.max_pool2d(x, 2, stride=1)),
                          lambda: (distinct(1, 3, 3), r(1, 2, 2, seed=1))),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2, stride=1, padding=1, count_include_pad=False),
                   lambda: (r(1, 2, 3, 3),)),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 2, stride=1, ceil_mode=True),
                   lambda: (r(1, 3, 3, 2),)),
    "avg_pool_backward": (grad_of(lambda x: F.avg_pool2d(x, 2, stride=1, padding=1)),
                          lambda: (r(1, 3, 3), r(1, 4, 4, seed=1))),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (2, 3)), lambda: (r(1, 2, 5, 4),)),
    "adaptive_avg_pool3d": (lambda x: F.adaptive_avg_pool3d(x, 2), lambda: (r(1, 3, 3, 3),)),
    "adaptive_max_pool2d": (lambda x: F.adaptive_max_pool2d(x, (2, 3)),
                            lambda: (distinct(1, 2, 5, 4),)),
    "adaptive_max_pool3d": (lambda x: F.adaptive_max_pool3d(x, 2), lambda: (distinct(1, 3, 3, 3),)),
    "max_unpool2d": (_unpool, lambda: (distinct(1, 2, 4, 4),)),
    "max_unpool3d": (lambda x: F.max_unpool3d(x, _idx3(), 2), lambda: (r(1, 1, 1, 2),)),
    "fractional_max_pool2d": (lambda x: F.fractional_max_pool2d(x, 2, 3, _random_samples=_u(1, 2, 2)),
                              lambda: (distinct(1, 2, 5, 4),)),
    "fractional_max_pool3d": (lambda x: F.fractional_max_pool3d(x, 2, 2, _random_samples=_u(1, 1, 3)),
                              lambda: (distinct(1, 4, 4, 4),)),
    "resample": (lambda x: F.interpolate(x, size=(3, 5), mode="bilinear"), lambda: (r(1, 2, 2, 3),)),
    "resample_backward": (grad_of(lambda x: F.interpolate(x, size=5, mode="bicubic")),
                          lambda: (r(1, 1, 3, 4), r(1, 1, 5, 5, seed=1))),
}


def _u(*shape):
    import dynograph as dg
    return dg.full(shape, 0.3, dtype=dg.float64)


def _idx3():
    import dynograph as dg
    return dg.tensor([[[[0, 7]]]], dtype=dg.int64)
