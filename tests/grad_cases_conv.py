"""gradcheck cases for the convolution primitives (merged by test_gradcheck_ops.py)."""
import dynograph.nn.functional as F
from dynograph._dispatch import call
from dynograph.compiler.ops import conv as ops
from grad_inputs import r


def _conv(x, w, b):
    # stride, padding, dilation and groups all at once keep the case small
    return F.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2), groups=2)


def _weight_grad(x, g):
    return call(ops.convolution_weight_grad, x, g, kernel_size=(2,), stride=(2,), padding=(1,),
                dilation=(1,), groups=1)


CASES = {
    "convolution": (_conv, lambda: (r(1, 4, 4, 5), r(2, 2, 2, 2, seed=1), r(2, seed=2))),
    "convolution_weight_grad": (_weight_grad, lambda: (r(2, 2, 5), r(2, 3, 3, seed=1))),
    "im2col": (lambda x: F.unfold(x, 2, dilation=(1, 2), padding=1, stride=(2, 1)),
               lambda: (r(1, 2, 3, 4),)),
    "col2im": (lambda c: F.fold(c, (3, 4), 2, padding=1, stride=2), lambda: (r(1, 8, 6),)),
}
