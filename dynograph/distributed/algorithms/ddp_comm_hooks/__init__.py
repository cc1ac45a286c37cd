"""DDP communication hooks (torch.distributed.algorithms.ddp_comm_hooks): register one with
``ddp_model.register_comm_hook(state, hook)`` or by type with ``register_ddp_comm_hook``."""
from enum import Enum
from functools import partial

from . import debugging_hooks as debugging
from . import default_hooks as default

__all__ = ["DDPCommHookType", "register_ddp_comm_hook"]


def _ddp_comm_hook_wrapper(comm_hook, model, state):
    model.register_comm_hook(state, comm_hook)


try:
    from enum import member as _member     # Python 3.11+: a partial must be marked a member
except ImportError:
    def _member(fn):
        return fn


class DDPCommHookType(Enum):
    """The built-in hooks by name; ``DDPCommHookType.ALLREDUCE.value(model=ddp, state=group)``
    registers one."""
    ALLREDUCE = _member(partial(_ddp_comm_hook_wrapper, comm_hook=default.allreduce_hook))
    FP16_COMPRESS = _member(partial(_ddp_comm_hook_wrapper, comm_hook=default.fp16_compress_hook))
    BF16_COMPRESS = _member(partial(_ddp_comm_hook_wrapper, comm_hook=default.bf16_compress_hook))
    NOOP = _member(partial(_ddp_comm_hook_wrapper, comm_hook=debugging.noop_hook))


def register_ddp_comm_hook(comm_hook_type, model, state=None):
    """Register the hook ``comm_hook_type`` (a DDPCommHookType) on the DDP ``model``."""
    comm_hook_type.value(model=model, state=state)
