"""DataLoader (torch.utils.data.dataloader): batches from a dataset, in this process
(``num_workers=0``) or in worker processes (see _multiprocessing.py)."""
import math
import multiprocessing as mp
import os
import warnings

import dynograph
from . import _collate
from ._fetch import create_fetcher
from .dataset import IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader"]


class _DatasetKind:
    Map = 0
    Iterable = 1


class _InfiniteConstantSampler(Sampler):
    """The sampler of an IterableDataset: one placeholder index, forever."""

    def __iter__(self):
        while True:
            yield None

def pin_memory(data):
    """``data`` (a batch: tensors in tuples, lists, dicts, namedtuples) with every cpu tensor copied
    into pinned memory, so ``.to('cuda', non_blocking=True)`` copies it without waiting."""
    if isinstance(data, dynograph.Tensor):
        return data.pin_memory()
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(pin_memory(d) for d in data))
    if isinstance(data, (list, tuple)):
        return type(data)(pin_memory(d) for d in data)
    if isinstance(data, dict):
        return type(data)((k, pin_memory(v)) for k, v in data.items())
    return data


def _cpu_count():
    if hasattr(os, "sched_getaffinity"):
        try:
            return len(os.sched_getaffinity(0))
        except Exception:
            pass
    return os.cpu_count()


class DataLoader:
    """Iterate over ``dataset`` in batches (PyTorch's DataLoader, same arguments).

    ``shuffle`` draws a new order each epoch from ``generator`` (default: the global
    generator); ``num_workers > 0`` loads in that many processes, each seeded with
    ``base_seed + worker_id`` where ``base_seed`` is drawn from ``generator`` at each
    ``iter()``.  So random draws inside ``__getitem__`` differ between ``num_workers=0``
    (the main process's generators) and workers (each worker's own), as in torch, while
    the sampler's order is the same.  Batches come back in sampler order unless
    ``in_order=False``, which hands out each batch as soon as it arrives.

    Workers start with ``multiprocessing_context``; the default is multiprocessing's
    default start method, as in torch ('fork' on Linux before Python 3.14): see
    _multiprocessing.py.  ``pin_memory`` is accepted; tensors live in host memory, so it
    changes nothing.
    """

    __initialized = False

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; "
                             "use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "prefetch_factor option could only be specified in multiprocessing."
                "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        elif num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        elif prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        shuffle = self._check_dataset_kind(dataset, shuffle, sampler, batch_sampler)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive "
                                 "with batch_size, shuffle, sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching "
                             "and is mutually exclusive with drop_last")
        if sampler is None:
            if self._dataset_kind == _DatasetKind.Iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = _collate.default_collate if self._auto_collation else _collate.default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self.__initialized = True
        self._IterableDataset_len_called = None
        self._iterator = None
        self.check_worker_number_rationality()

    def _check_dataset_kind(self, dataset, shuffle, sampler, batch_sampler):
        """Record map-style or iterable; iterable datasets take no shuffle or sampler."""
        if not isinstance(dataset, IterableDataset):
            self._dataset_kind = _DatasetKind.Map
            return bool(shuffle)
        self._dataset_kind = _DatasetKind.Iterable
        if shuffle not in {False, None}:
            raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle option, "
                             f"but got shuffle={shuffle}")
        if sampler is not None:
            raise ValueError("DataLoader with IterableDataset: expected unspecified sampler option, "
                             f"but got sampler={sampler}")
        if batch_sampler is not None:
            raise ValueError("DataLoader with IterableDataset: expected unspecified "
                             f"batch_sampler option, but got batch_sampler={batch_sampler}")
        return shuffle

    @property
    def multiprocessing_context(self):
        return self.__multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, multiprocessing_context):
        if multiprocessing_context is not None:
            if self.num_workers <= 0:
                raise ValueError("multiprocessing_context can only be used with "
                                 "multi-process loading (num_workers > 0), but got "
                                 f"num_workers={self.num_workers}")
            if isinstance(multiprocessing_context, str):
                valid_start_methods = mp.get_all_start_methods()
                if multiprocessing_context not in valid_start_methods:
                    raise ValueError(
                        "multiprocessing_context option "
                        f"should specify a valid start method in {valid_start_methods!r}, but got "
                        f"multiprocessing_context={multiprocessing_context!r}")
                multiprocessing_context = mp.get_context(multiprocessing_context)
            if not isinstance(multiprocessing_context, mp.context.BaseContext):
                raise TypeError("multiprocessing_context option should be a valid context "
                                "object or a string specifying the start method, but got "
                                f"multiprocessing_context={multiprocessing_context}")
        self.__multiprocessing_context = multiprocessing_context

    def __setattr__(self, attr, val):
        if self.__initialized and attr in ("batch_size", "batch_sampler", "sampler", "drop_last",
                                           "dataset", "persistent_workers"):
            raise ValueError(f"{attr} attribute should not be set after "
                             f"{self.__class__.__name__} is initialized")
        super().__setattr__(attr, val)

    def _get_iterator(self):
        if self.num_workers == 0:
            return _SingleProcessDataLoaderIter(self)
        self.check_worker_number_rationality()
        from ._multiprocessing import MultiProcessingDataLoaderIter
        return MultiProcessingDataLoaderIter(self)

    def __iter__(self):
        # persistent workers outlive the epoch: the loader keeps one iterator and resets it
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None or self._iterator._workers.closed:   # first, or after a crash
                self._iterator = self._get_iterator()
            else:
                self._iterator._reset(self)
            return self._iterator
        return self._get_iterator()

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __len__(self):
        if self._dataset_kind == _DatasetKind.Iterable:
            length = self._IterableDataset_len_called = len(self.dataset)
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)
            return length
        return len(self._index_sampler)

    def check_worker_number_rationality(self):
        """Warn when more workers are asked for than this process may use CPUs."""
        if not self.num_workers:
            return
        suggest = _cpu_count()
        if suggest is None or self.num_workers > suggest:
            cpuset_checked = hasattr(os, "sched_getaffinity")
            if suggest is not None:
                sugg = (f"Our suggested max number of worker in current system is {suggest}"
                        f"{'' if cpuset_checked else ' (`cpuset` is not taken into account)'}, which is "
                        "smaller than what this DataLoader is going to create.")
            else:
                sugg = "DataLoader is not able to compute a suggested max number of worker in current system."
            warnings.warn(
                f"This DataLoader will create {self.num_workers} worker processes in total. {sugg} "
                "Please be aware that excessive worker creation might get DataLoader running slow or even "
                "freeze, lower the worker number to avoid potential slowness/freeze if necessary.",
                stacklevel=2)


class _BaseDataLoaderIter:
    def __init__(self, loader):
        self._dataset = loader.dataset
        self._dataset_kind = loader._dataset_kind
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._num_workers = loader.num_workers
        self._pin_memory = loader.pin_memory and dynograph.cuda.is_available()
        if loader.pin_memory and not self._pin_memory:
            warnings.warn("'pin_memory' argument is set as true but no accelerator is found, "
                          "then device pinned memory won't be used.", stacklevel=3)
        self._timeout = loader.timeout
        self._collate_fn = loader.collate_fn
        self._sampler_iter = iter(self._index_sampler)
        # drawn like torch, so loaders seeded the same give workers the same seeds
        self._base_seed = int(dynograph.empty((), dtype=dynograph.int64)
                              .random_(generator=loader.generator).item())
        self._persistent_workers = loader.persistent_workers
        self._num_yielded = 0

    def __iter__(self):
        return self

    def _reset(self, loader, first_iter=False):
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._IterableDataset_len_called = loader._IterableDataset_len_called

    def _next_index(self):
        return next(self._sampler_iter)       # may raise StopIteration

    def __next__(self):
        data = self._next_data()
        if self._pin_memory:
            data = pin_memory(data)
        self._num_yielded += 1
        if self._dataset_kind == _DatasetKind.Iterable and self._IterableDataset_len_called is not None \
                and self._num_yielded > self._IterableDataset_len_called:
            msg = (f"Length of IterableDataset {self._dataset} was reported to be "
                   f"{self._IterableDataset_len_called}(when accessing len(dataloader)), but "
                   f"{self._num_yielded} samples have been fetched. ")
            if self._num_workers > 0:
                msg += ("For multiprocessing data-loading, this could be caused by not properly "
                        "configuring the IterableDataset replica at each worker.")
            warnings.warn(msg, stacklevel=2)
        return data

    def __len__(self):
        return len(self._index_sampler)

    def __getstate__(self):
        raise NotImplementedError("{} cannot be pickled", self.__class__.__name__)


class _SingleProcessDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        if self._timeout != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires timeout == 0")
        self._dataset_fetcher = create_fetcher(self._dataset_kind == _DatasetKind.Iterable, self._dataset,
                                               self._auto_collation, self._collate_fn, self._drop_last)

    def _next_data(self):
        index = self._next_index()
        return self._dataset_fetcher.fetch(index)    # may raise StopIteration
