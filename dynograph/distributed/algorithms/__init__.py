"""dynograph.distributed.algorithms: the Join context manager for uneven inputs, and DDP
communication hooks (``ddp_comm_hooks``), as torch.distributed.algorithms."""
from .join import Join, Joinable, JoinHook

__all__ = ["Join", "Joinable", "JoinHook"]
