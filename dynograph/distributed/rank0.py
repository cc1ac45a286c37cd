"""Doing things once per job: on rank 0 only (checkpoints, logs, progress output).

Each helper works without an initialized process group too (a single process is rank 0).
"""
import functools
import logging

from ._group import STATE


def is_main_process():
    """True on rank 0 of the default group, and in a program that never initialized one."""
    return STATE.world is None or STATE.world.rank() == 0


def rank0_only(fn):
    """Decorator: ``fn`` runs on rank 0 only; other ranks get None."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) if is_main_process() else None
    return wrapper


def print_on_rank0(*args, **kwargs):
    """print() on rank 0 only."""
    if is_main_process():
        print(*args, **kwargs)


def save_on_rank0(obj, f, **kwargs):
    """dynograph.save on rank 0, then a barrier, so every rank may load ``f`` right after
    (ranks share the file system, or only rank 0 reads it)."""
    import dynograph
    from ._collectives import barrier
    if is_main_process():
        dynograph.save(obj, f, **kwargs)
    if STATE.world is not None:
        barrier()


class _Rank0Filter(logging.Filter):
    def filter(self, record):
        return is_main_process()


def get_rank0_logger(name=None):
    """A logging.Logger whose records are emitted on rank 0 only."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, _Rank0Filter) for f in logger.filters):
        logger.addFilter(_Rank0Filter())
    return logger
