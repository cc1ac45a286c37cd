"""GradBucket: one bucket of DistributedDataParallel's gradients, as a communication hook
sees it (torch.distributed.GradBucket)."""


class GradBucket:
    """The flat gradients of a few parameters (one dtype), handed to a DDP communication hook.

    ``buffer()`` is the flat tensor (the bucket's own memory: the hook may reduce it in place);
    ``gradients()`` are views of it in the parameters' shapes; ``set_buffer`` replaces the
    buffer a later ``buffer()`` returns (hook wrappers use it to pass a converted copy on).
    """

    def __init__(self, index, buffer, parameters, offsets, is_last):
        self._index = index
        self._buffer = self._flat = buffer
        self._parameters = list(parameters)
        self._offsets = offsets
        self._is_last = is_last

    def index(self):
        """The bucket's position in the order its all-reduce starts (0 first)."""
        return self._index

    def buffer(self):
        return self._buffer

    def set_buffer(self, buffer):
        self._buffer = buffer

    def gradients(self):
        """Each parameter's gradient: a view of the bucket's flat tensor."""
        return [self._flat[a:b].view(p.shape)
                for p, a, b in zip(self._parameters, self._offsets, self._offsets[1:])]

    def parameters(self):
        return list(self._parameters)

    def is_last(self):
        """True for the last bucket of the backward pass."""
        return self._is_last

    def __repr__(self):
        return (f"GradBucket(index={self._index}, {len(self._parameters)} parameters, "
                f"{self._flat.numel()} {self._flat.dtype} values)")


GradBucket.__module__ = "dynograph.distributed"
