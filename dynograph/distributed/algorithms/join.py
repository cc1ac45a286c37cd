"""Join: training on uneven inputs (torch.distributed.algorithms.join).

Ranks that run out of inputs ("join") leave the training loop and wait in ``Join.__exit__``,
where they shadow the collectives the other ranks still make (through each ``Joinable``'s
``JoinHook.main_hook``) until every rank has joined; then each hook's ``post_hook`` runs once.

Every iteration each rank still training calls ``Join.notify_join_context(joinable)`` before
its collectives: an all-reduce of 1 that a joined rank meets with an all-reduce of 0, so the
sum counts the ranks still training.  With ``throw_on_early_termination`` a second all-reduce
carries a joined rank's request to stop, and every rank raises instead.
"""
import warnings
from abc import ABC, abstractmethod
from typing import NamedTuple

__all__ = ["JoinHook", "Joinable", "Join"]

# iterations a joined rank shadows before warning that the inputs are badly skewed
WARN_THRESHOLD = 1000


class JoinHook:
    """What a joined rank does for one ``Joinable``: ``main_hook()`` once per iteration of the
    ranks still training (shadowing their collectives), ``post_hook(is_last_joiner)`` once when
    all have joined."""

    def main_hook(self):
        """Shadow one training iteration's collectives of the ranks that have not joined."""

    def post_hook(self, is_last_joiner):
        """Run once every rank has joined; ``is_last_joiner`` is True on the ranks that joined
        last."""


class _JoinConfig(NamedTuple):
    enable: bool
    throw_on_early_termination: bool
    is_first_joinable: bool

    @staticmethod
    def construct_disabled_join_config():
        return _JoinConfig(enable=False, throw_on_early_termination=False, is_first_joinable=False)


class Joinable(ABC):
    """A class whose collectives a joined rank can shadow: it gives a ``join_hook``, the
    ``join_device`` and ``join_process_group`` of the join's own all-reduces, and calls
    ``Join.notify_join_context(self)`` before its collectives of each iteration."""

    @abstractmethod
    def __init__(self):
        super().__init__()
        self._join_config = _JoinConfig.construct_disabled_join_config()

    @abstractmethod
    def join_hook(self, **kwargs):
        """The JoinHook of this object; ``kwargs`` are the ``Join``'s extra arguments."""

    @property
    @abstractmethod
    def join_device(self):
        """The device of the join's all-reduce tensors."""

    @property
    @abstractmethod
    def join_process_group(self):
        """The process group of the join's all-reduces."""


class Join:
    """Context manager for training loops whose ranks have different numbers of inputs.

    ``with Join([ddp_model, ...]):`` around the loop: a rank that leaves the loop early keeps
    meeting the others' collectives through the joinables' hooks until all ranks are done.
    ``enable=False`` turns it off (the inputs are known to be even);
    ``throw_on_early_termination=True`` makes every rank raise RuntimeError as soon as one runs
    out of inputs.  Extra keyword arguments go to each joinable's ``join_hook``.
    """

    def __init__(self, joinables, enable=True, throw_on_early_termination=False, **kwargs):
        if len(joinables) == 0:
            raise ValueError("The join context manager requires at least one joinable")
        self._joinables = list(joinables)
        self._join_hooks = [j.join_hook(**kwargs) for j in self._joinables]
        self._enable = enable
        self._throw_on_early_termination = throw_on_early_termination
        for k, joinable in enumerate(self._joinables):
            joinable._join_config = _JoinConfig(enable, throw_on_early_termination, k == 0)
        self._process_group = self._device = None
        for joinable in self._joinables:
            if self._process_group is None:
                self._process_group = joinable.join_process_group
            elif self._process_group != joinable.join_process_group:
                raise ValueError("Using join context manager with multiple process groups")
            if self._device is None:
                self._device = joinable.join_device
        from dynograph import distributed as dist
        self._rank = dist.get_rank(self._process_group)

    def __enter__(self):
        pass

    def __exit__(self, kind, value, traceback):
        """Shadow the other ranks' iterations until every rank joined, then run the post-hooks.
        An exception leaving the block passes through untouched."""
        if not self._enable or kind is not None:
            return
        is_last_joiner = True
        i = 0
        while self._count_not_joined():
            if i == WARN_THRESHOLD:
                warnings.warn(f"Detected uneven input skew of greater than {WARN_THRESHOLD}. This "
                              f"means that rank {self._rank} has at least {WARN_THRESHOLD} fewer "
                              "inputs than other currently-active ranks. This level of skew could "
                              "lead to performance degradation during training.", stacklevel=2)
            if self._throw_on_early_termination:
                self._notify_procs_to_terminate()
            for hook in self._join_hooks:
                hook.main_hook()
            is_last_joiner = False
            i += 1
        for hook in self._join_hooks:
            hook.post_hook(is_last_joiner)

    def _count_not_joined(self):
        """Meets the ranks' notify_join_context all-reduces with 0: the ranks still training."""
        import dynograph
        from dynograph import distributed as dist
        count = dynograph.zeros(1, device=self._device)
        dist.all_reduce(count, group=self._process_group)
        return int(count.item())

    def _notify_procs_to_terminate(self):
        import dynograph
        from dynograph import distributed as dist
        dist.all_reduce(dynograph.ones(1, device=self._device), group=self._process_group)
        raise RuntimeError(f"Rank {self._rank} exhausted all inputs.")

    @staticmethod
    def notify_join_context(joinable):
        """Tell the join context that this rank still trains (call before the iteration's
        collectives).  Returns the Work of that all-reduce (its sum: the ranks still training)
        for the first joinable of an enabled Join, else None.  With
        ``throw_on_early_termination`` raises RuntimeError on every rank once one has joined."""
        if not hasattr(joinable, "_join_config"):
            raise RuntimeError(f"Check that the {type(joinable)} constructor calls the "
                               "``Joinable`` constructor")
        config = joinable._join_config
        if not config.is_first_joinable or not config.enable:
            return None
        import dynograph
        from dynograph import distributed as dist
        pg = joinable.join_process_group
        work = dist.all_reduce(dynograph.ones(1, device=joinable.join_device), group=pg, async_op=True)
        if config.throw_on_early_termination:
            stop = dynograph.zeros(1, device=joinable.join_device)
            dist.all_reduce(stop, group=pg)
            if stop.item():
                work.wait()
                raise RuntimeError("Detected at least one rank that exhausted inputs. Throwing "
                                   "across all ranks.")
        return work
