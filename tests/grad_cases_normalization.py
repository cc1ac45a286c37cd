"""gradcheck cases for the normalization and embedding primitives (merged by test_gradcheck_ops.py)."""
import dynograph.nn.functional as F
from grad_inputs import idx, r


def _group_norm(x, w, b):
    # the statistics' derivative (through mean and var) and the affine step's, all at once
    return F.group_norm(x, 2, w, b, eps=0.1)


# embedding: repeated indices add up in the weight gradient.  padding_idx and scale_grad_by_freq
# change the gradient on purpose (it is no longer the derivative), so tests/test_nn_embedding.py
# checks them against torch instead.
CASES = {
    "affine_normalize": (_group_norm, lambda: (r(2, 4, 3), r(4, seed=1), r(4, seed=2))),
    "prelu": (F.prelu, lambda: (r(2, 3, 2), r(3, lo=0.1, hi=0.5, seed=1))),
    "embedding": (lambda w: F.embedding(idx([[0, 2, 2], [3, 1, 2]]), w), lambda: (r(4, 3),)),
}
