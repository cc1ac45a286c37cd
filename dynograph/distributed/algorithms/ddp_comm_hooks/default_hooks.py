"""The default DDP communication hooks (torch.distributed.algorithms.ddp_comm_hooks.default_hooks).

A hook is ``hook(state, bucket) -> Future[Tensor]``: ``state`` is what was given to
``register_comm_hook`` (here a process group, or None for the default group), ``bucket`` a
``dist.GradBucket`` holding the summed-not-averaged local gradients.  The Future's value is
the bucket's new flat gradients, which DDP writes back into ``.grad``.
"""
import dynograph
from dynograph import distributed as dist

__all__ = ["allreduce_hook", "fp16_compress_hook", "bf16_compress_hook",
           "fp16_compress_wrapper", "bf16_compress_wrapper"]


def _allreduce_fut(process_group, tensor):
    """Average ``tensor`` in place across the group; a Future of it."""
    tensor.div_(dist.get_world_size(process_group))      # divide first: no overflow in half types
    return (dist.all_reduce(tensor, group=process_group, async_op=True)
            .get_future().then(lambda fut: fut.value()[0]))


def allreduce_hook(process_group, bucket):
    """Average the bucket with one all-reduce: what DDP does without a hook."""
    return _allreduce_fut(process_group, bucket.buffer())


def _compress_hook(dtype, process_group, bucket):
    buffer = bucket.buffer()
    # divided before the conversion (torch converts first): one rounding instead of two, no
    # overflow to inf for sums up to the world size times the half type's largest value, and
    # the division runs in float32, several times faster than in a half type
    compressed = buffer.div(dist.get_world_size(process_group)).to(dtype)

    def decompress(fut):
        buffer.copy_(fut.value()[0])       # back into the bucket's own memory
        return buffer

    return dist.all_reduce(compressed, group=process_group, async_op=True).get_future().then(decompress)


def fp16_compress_hook(process_group, bucket):
    """Average the bucket in float16: half the bytes on the wire, float16's precision."""
    return _compress_hook(dynograph.float16, process_group, bucket)


def bf16_compress_hook(process_group, bucket):
    """Average the bucket in bfloat16: half the bytes on the wire, float32's range and
    bfloat16's precision (8 bits)."""
    return _compress_hook(dynograph.bfloat16, process_group, bucket)


def _compress_wrapper(dtype, hook):
    def wrapper_hook(hook_state, bucket):
        bucket.set_buffer(bucket.buffer().to(dtype))
        fut = hook(hook_state, bucket)

        def decompress(fut):
            out = bucket.buffer()
            out.copy_(fut.value())
            return out

        return fut.then(decompress)

    return wrapper_hook


def fp16_compress_wrapper(hook):
    """A hook that runs ``hook`` on the bucket converted to float16 and converts the result
    back (``fp16_compress_wrapper(allreduce_hook)`` is ``fp16_compress_hook``)."""
    wrapped = _compress_wrapper(dynograph.float16, hook)
    wrapped.__name__ = wrapped.__qualname__ = "fp16_compress_wrapper_hook"
    return wrapped


def bf16_compress_wrapper(hook):
    """As ``fp16_compress_wrapper``, in bfloat16."""
    wrapped = _compress_wrapper(dynograph.bfloat16, hook)
    wrapped.__name__ = wrapped.__qualname__ = "bf16_compress_wrapper_hook"
    return wrapped
