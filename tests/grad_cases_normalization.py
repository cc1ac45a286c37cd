"""gradcheck cases for the embedding primitive (merged by test_gradcheck_ops.py)."""
import dynograph.nn.functional as F
from grad_inputs import idx, r

# repeated indices add up in the weight gradient.  padding_idx and scale_grad_by_freq change the
# gradient on purpose (it is no longer the derivative), so tests/test_nn_embedding.py checks
# them against torch instead.
CASES = {
    "embedding": (lambda w: F.embedding(idx([[0, 2, 2], [3, 1, 2]]), w), lambda: (r(4, 3),)),
}
