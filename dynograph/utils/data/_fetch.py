"""Fetchers: how one index (or one list of indices) becomes collated data, for map-style
and iterable datasets alike (torch.utils.data._utils.fetch)."""


class _MapDatasetFetcher:
    """Map-style: ``dataset[i]`` per index, or one ``__getitems__`` call for a batch."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.current = None              # the index being fetched, for error reports
        getitems = getattr(dataset, "__getitems__", None)
        self._getitems = getitems if callable(getitems) else None

    def fetch(self, index):
        if not self.auto_collation:
            self.current = index
            return self.collate_fn(self.dataset[index])
        if self._getitems is not None:
            self.current = index
            data = self._getitems(index)
        else:
            data = []
            for i in index:
                self.current = i
                data.append(self.dataset[i])
        self.current = None
        return self.collate_fn(data)


class _IterableDatasetFetcher:
    """Iterable: the next sample (or the next ``batch_size`` samples) of the stream;
    StopIteration once it is exhausted (or, with ``drop_last``, too short for a batch)."""

    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.current = None
        self.dataset_iter = iter(dataset)
        self.ended = False

    def fetch(self, possibly_batched_index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        data = []
        for _ in possibly_batched_index:
            try:
                data.append(next(self.dataset_iter))
            except StopIteration:
                self.ended = True
                break
        if len(data) == 0 or (self.drop_last and len(data) < len(possibly_batched_index)):
            raise StopIteration
        return self.collate_fn(data)


def create_fetcher(iterable, dataset, auto_collation, collate_fn, drop_last):
    cls = _IterableDatasetFetcher if iterable else _MapDatasetFetcher
    return cls(dataset, auto_collation, collate_fn, drop_last)
