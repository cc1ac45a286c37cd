"""dynograph.utils.data without worker processes: datasets, samplers, collation and the
single-process DataLoader, against torch.utils.data (tests/test_data_workers.py has the
multi-process loader)."""
import collections
import warnings

import numpy as np
import pytest

import dynograph
from dynograph.utils.data import (BatchSampler, ChainDataset, ConcatDataset, DataLoader, Dataset,
                                  DistributedSampler, IterableDataset, RandomSampler, SequentialSampler,
                                  StackDataset, Subset, SubsetRandomSampler, TensorDataset,
                                  WeightedRandomSampler, default_collate, default_convert, get_worker_info,
                                  random_split)
from conftest import assert_same

Point = collections.namedtuple("Point", ["x", "y"])


def tdata():
    """dynograph torch.utils.data, imported only when torch is there."""
    import torch.utils.data as tud
    return tud


def error_text(fn):
    try:
        fn()
    except Exception as e:       # noqa: BLE001 - the oracle's error, whatever its type
        return type(e), str(e)
    return None, None


def same_error(ours, theirs):
    """``ours()`` raises the same exception type and message as ``theirs()``."""
    t_type, t_msg = error_text(theirs)
    assert t_type is not None, "the torch call did not raise"
    with pytest.raises(t_type) as info:
        ours()
    assert str(info.value).replace("dynograph", "torch") == t_msg


def to_np(x):
    if isinstance(x, (list, tuple)):
        return [to_np(v) for v in x]
    if isinstance(x, dict):
        return {k: to_np(v) for k, v in x.items()}
    if hasattr(x, "detach"):
        return x.detach().numpy()
    if isinstance(x, dynograph.Tensor):
        return x.numpy()
    return x


def assert_tree_same(ours, theirs):
    """Nested batches: same structure and container types (by name), tensors equal with dtype."""
    if isinstance(theirs, dict):
        assert type(ours).__name__ == type(theirs).__name__ and ours.keys() == theirs.keys()
        for k in theirs:
            assert_tree_same(ours[k], theirs[k])
    elif isinstance(theirs, (list, tuple)):
        assert type(ours).__name__ == type(theirs).__name__, (type(ours), type(theirs))
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert_tree_same(a, b)
    elif hasattr(theirs, "shape") and not isinstance(theirs, np.ndarray):
        assert_same(ours, theirs, rtol=0, atol=0)
    else:
        assert type(ours) is type(theirs) and np.array_equal(ours, theirs)


# ---------------------------------------------------------------- datasets

class MyDataset(Dataset):
    """The PyTorch tutorial's custom dataset."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Stream(IterableDataset):
    def __init__(self, n, start=0):
        self.n, self.start = n, start

    def __iter__(self):
        return iter(range(self.start, self.start + self.n))

    def __len__(self):
        return self.n


def test_tutorial_custom_dataset_runs_unchanged():
    torch = dynograph
    x, y = torch.randn(10, 3), torch.arange(10)
    my_dataset = MyDataset(x, y)
    loader = torch.utils.data.DataLoader(my_dataset, batch_size=4, shuffle=True, num_workers=0)
    seen = []
    for xb, yb in loader:
        assert xb.shape[1:] == (3,) and xb.shape[0] == yb.shape[0] <= 4
        assert xb.dtype == torch.float32 and yb.dtype == torch.int64
        np.testing.assert_array_equal(xb.numpy(), x.numpy()[yb.numpy()])
        seen += yb.tolist()
    assert sorted(seen) == list(range(10)) and len(loader) == 3


def test_tensor_dataset():
    x, y = dynograph.randn(6, 2), dynograph.arange(6)
    ds = TensorDataset(x, y)
    assert len(ds) == 6
    a, b = ds[2]
    assert_same(a, x[2]) and b.item() == 2
    batch = ds.__getitems__([4, 1, 4])
    assert len(batch) == 3 and batch[0][1].item() == 4 and batch[1][1].item() == 1
    cols = default_collate(batch)
    assert isinstance(cols, list)
    np.testing.assert_array_equal(cols[0].numpy(), x.numpy()[[4, 1, 4]])
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TensorDataset(x, dynograph.arange(5))


def test_tensor_dataset_fast_path_equals_per_sample_collate(torch):
    x = np.random.default_rng(0).random((9, 2, 3), dtype=np.float32)
    y = np.arange(9)
    ours = TensorDataset(dynograph.tensor(x), dynograph.tensor(y))
    theirs = tdata().TensorDataset(torch.tensor(x), torch.tensor(y))
    idx = [3, 0, 8, 8, 1]
    fast = default_collate(ours.__getitems__(idx))
    slow = default_collate([ours[i] for i in idx])
    expect = tdata().default_collate([theirs[i] for i in idx])
    assert_tree_same(fast, expect)
    assert_tree_same(slow, expect)
    assert fast[0].is_contiguous()


def test_concat_and_chain_datasets(torch):
    a, b = MyDataset(list(range(3)), list("abc")), MyDataset(list(range(10, 15)), list("vwxyz"))
    cat = ConcatDataset([a, b])
    tcat = tdata().ConcatDataset([a, b])
    assert len(cat) == 8 and cat.cumulative_sizes == tcat.cumulative_sizes
    assert [cat[i] for i in range(-8, 8)] == [tcat[i] for i in range(-8, 8)]
    assert isinstance(a + b, ConcatDataset)
    same_error(lambda: cat[-9], lambda: tcat[-9])
    same_error(lambda: ConcatDataset([]), lambda: tdata().ConcatDataset([]))
    with pytest.raises(AssertionError, match="ConcatDataset does not support IterableDataset"):
        ConcatDataset([Stream(3)])
    chain = ChainDataset([Stream(3), Stream(2, 10)])
    assert list(chain) == [0, 1, 2, 10, 11] and len(chain) == 5
    assert list(Stream(2) + Stream(1, 7)) == [0, 1, 7]
    with pytest.raises(AssertionError, match="ChainDataset only supports IterableDataset"):
        list(ChainDataset([a]))


def torch_stream(n, start=0):
    """Stream(n, start) as a torch IterableDataset."""
    cls = type("TStream", (tdata().IterableDataset,), {k: vars(Stream)[k] for k in ("__init__", "__iter__",
                                                                                      "__len__")})
    return cls(n, start)


def test_subset_and_stack_dataset(torch):
    base = MyDataset(list(range(10)), [i * i for i in range(10)])
    sub = Subset(base, [7, 2, 5])
    assert len(sub) == 3 and sub[0] == (7, 49) and sub.__getitems__([2, 1]) == [(5, 25), (2, 4)]
    tds = TensorDataset(dynograph.arange(10) * 3)
    assert default_collate(Subset(tds, [9, 0]).__getitems__([0, 1]))[0].tolist() == [27, 0]
    s = StackDataset(base, Subset(base, list(range(10))))
    assert s[3] == ((3, 9), (3, 9)) and len(s) == 10
    d = StackDataset(a=base, b=tds)
    assert d[2]["a"] == (2, 4) and d[2]["b"][0].item() == 6
    items = d.__getitems__([1, 2])
    assert items[1]["a"] == (2, 4) and items[1]["b"][0].item() == 6
    for args, kwargs in [((), {}), ((base,), {"b": base}), ((base, Subset(base, [1])), {})]:
        same_error(lambda: StackDataset(*args, **kwargs), lambda: tdata().StackDataset(*args, **kwargs))

    class Bad(Subset):
        def __getitem__(self, i):
            return 0
    with pytest.raises(NotImplementedError, match="overrides __getitem__ but not __getitems__"):
        Bad(base, [0])


@pytest.mark.parametrize("n, lengths", [(10, [3, 7]), (30, [0.3, 0.3, 0.4]), (11, [0.5, 0.5]),
                                        (7, [0.1, 0.1, 0.8]), (5, [1.0])])
def test_random_split_lengths_like_torch(torch, n, lengths):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = random_split(range(n), lengths, generator=dynograph.Generator().manual_seed(1))
        theirs = tdata().random_split(range(n), lengths, generator=torch.Generator().manual_seed(1))
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    flat = [i for s in ours for i in s]
    assert sorted(flat) == list(range(n))


def test_random_split_reproducible_and_errors(torch):
    split = lambda seed: [list(s) for s in random_split(range(20), [5, 15],  # noqa: E731
                                                        generator=dynograph.Generator().manual_seed(seed))]
    assert split(3) == split(3) and split(3) != split(4)
    dynograph.manual_seed(0)
    a = [list(s) for s in random_split(range(20), [0.5, 0.5])]
    dynograph.manual_seed(0)
    assert a == [list(s) for s in random_split(range(20), [0.5, 0.5])]
    same_error(lambda: random_split(range(5), [2, 2]), lambda: tdata().random_split(range(5), [2, 2]))
    same_error(lambda: random_split(range(5), [1.5, -0.5]),
               lambda: tdata().random_split(range(5), [1.5, -0.5]))
    with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
        random_split(range(2), [0.9, 0.1])


# ---------------------------------------------------------------- samplers

def test_sequential_and_random_samplers(torch):
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3] and len(SequentialSampler(range(4))) == 4
    g = dynograph.Generator().manual_seed(0)
    perm = list(RandomSampler(range(10), generator=g))
    assert sorted(perm) == list(range(10))
    assert perm == list(RandomSampler(range(10), generator=dynograph.Generator().manual_seed(0)))
    assert perm != list(RandomSampler(range(10), generator=g))          # the stream moves on
    for kw in [dict(num_samples=25), dict(num_samples=4), dict(replacement=True, num_samples=70),
               dict(replacement=True)]:
        s, ts = RandomSampler(range(10), **kw), tdata().RandomSampler(range(10), **kw)
        got = list(s)
        assert len(got) == len(s) == len(ts) == len(list(ts))
        assert all(0 <= i < 10 for i in got)
        if not kw.get("replacement"):
            counts = np.bincount(got, minlength=10)      # each full pass is a permutation
            assert counts.max() - counts.min() <= 1
    for kw in [dict(replacement=1), dict(num_samples=0), dict(num_samples=2.0)]:
        same_error(lambda: RandomSampler(range(3), **kw), lambda: tdata().RandomSampler(range(3), **kw))


def test_random_sampler_without_generator_follows_global_seed():
    dynograph.manual_seed(5)
    a = list(RandomSampler(range(20)))
    b = list(RandomSampler(range(20)))
    dynograph.manual_seed(5)
    assert a == list(RandomSampler(range(20))) and a != b


def test_subset_random_and_weighted_samplers(torch):
    s = SubsetRandomSampler([3, 8, 9, 11], generator=dynograph.Generator().manual_seed(0))
    got = list(s)
    assert sorted(got) == [3, 8, 9, 11] and len(s) == 4
    w = WeightedRandomSampler([0.0, 1.0, 3.0, 0.0], 50, generator=dynograph.Generator().manual_seed(0))
    got = list(w)
    assert len(got) == len(w) == 50 and set(got) <= {1, 2} and got.count(2) > got.count(1)
    w = WeightedRandomSampler([1.0, 1.0, 1.0], 3, replacement=False)
    assert sorted(w) == [0, 1, 2]
    for args in [([1.0], 0), ([1.0], True), ([[1.0, 2.0]], 1)]:
        same_error(lambda: WeightedRandomSampler(*args), lambda: tdata().WeightedRandomSampler(*args))
    same_error(lambda: WeightedRandomSampler([1.0], 1, replacement=0),
               lambda: tdata().WeightedRandomSampler([1.0], 1, replacement=0))


@pytest.mark.parametrize("n, bs, drop", [(10, 3, False), (10, 3, True), (9, 3, True), (2, 5, False),
                                         (2, 5, True), (0, 2, False)])
def test_batch_sampler_like_torch(torch, n, bs, drop):
    ours = BatchSampler(SequentialSampler(range(n)), bs, drop)
    theirs = tdata().BatchSampler(tdata().SequentialSampler(range(n)), bs, drop)
    assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_batch_sampler_errors(torch):
    for args in [(0, False), (True, False), (2.0, False), (2, 1)]:
        same_error(lambda: BatchSampler(range(3), *args), lambda: tdata().BatchSampler(range(3), *args))


@pytest.mark.parametrize("n, replicas, drop", [(10, 3, False), (10, 3, True), (9, 3, False), (2, 4, False),
                                               (11, 4, True)])
def test_distributed_sampler_like_torch(torch, n, replicas, drop):
    from torch.utils.data.distributed import DistributedSampler as TDS
    for rank in range(replicas):
        ours = DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop)
        theirs = TDS(range(n), replicas, rank, shuffle=False, drop_last=drop)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)
        assert ours.total_size == theirs.total_size
    shuffled = [list(DistributedSampler(range(n), replicas, r, seed=3, drop_last=drop)) for r in range(replicas)]
    expected = [list(TDS(range(n), replicas, r, seed=3, drop_last=drop)) for r in range(replicas)]
    assert [len(s) for s in shuffled] == [len(s) for s in expected]
    if not drop:
        assert set(i for s in shuffled for i in s) == set(range(n))
    else:
        assert len(set(i for s in shuffled for i in s)) == sum(len(s) for s in shuffled)


def test_distributed_sampler_epochs_and_errors(torch):
    s = DistributedSampler(range(50), num_replicas=2, rank=1, seed=7)
    first = list(s)
    assert first == list(s)
    s.set_epoch(1)
    assert list(s) != first and sorted(list(s)) != []
    same_error(lambda: DistributedSampler(range(4), num_replicas=2, rank=2),
               lambda: tdata().distributed.DistributedSampler(range(4), num_replicas=2, rank=2))
    import dynograph.distributed as dist
    if dist.is_available():     # no process group: the defaults cannot be read (torch's error)
        same_error(lambda: DistributedSampler(range(4)),
                   lambda: tdata().distributed.DistributedSampler(range(4)))
    else:
        with pytest.raises(RuntimeError, match="Requires distributed package to be available"):
            DistributedSampler(range(4))


# ---------------------------------------------------------------- collation

def collate_cases(torch_mod, lib):
    """The same samples built for dynograph (lib=dynograph) or torch (lib=torch)."""
    rng = np.random.default_rng(0)
    arrays = [rng.random((2, 3), dtype=np.float32) for _ in range(3)]
    return {
        "tensors": [lib.tensor(a) for a in arrays],
        "ints": [1, 2, 3],
        "floats": [1.0, 2.5, -1.0],
        "bools": [True, False, True],
        "numpy": [a.astype(np.float64) for a in arrays],
        "np_scalars": [np.float32(1.5), np.float32(2.0)],
        "np_ints": [np.int16(3), np.int16(4)],
        "strings": ["a", "bc"],
        "bytes": [b"x", b"y"],
        "tuples": [(lib.tensor(a), i, "s") for i, a in enumerate(arrays)],
        "lists": [[lib.tensor(a), float(i)] for i, a in enumerate(arrays)],
        "dicts": [{"img": lib.tensor(a), "label": i, "meta": {"name": str(i)}} for i, a in enumerate(arrays)],
        "namedtuples": [Point(lib.tensor(a), i) for i, a in enumerate(arrays)],
        "nested": [([lib.tensor(a)], {"k": (i, 2.0)}) for i, a in enumerate(arrays)],
        "int64_tensors": [lib.tensor([i, i + 1]) for i in range(3)],
    }


@pytest.mark.parametrize("case", list(collate_cases(None, dynograph)))
def test_default_collate_like_torch(torch, case):
    ours = default_collate(collate_cases(None, dynograph)[case])
    theirs = tdata().default_collate(collate_cases(None, torch)[case])
    assert_tree_same(ours, theirs)


def test_default_collate_stacks_into_one_contiguous_batch():
    base = dynograph.arange(24, dtype=dynograph.float32).reshape(4, 6)
    out = default_collate([base[:, 1], base[:, 3]])             # non-contiguous samples
    assert out.is_contiguous() and out.tolist() == [[1, 7, 13, 19], [3, 9, 15, 21]]


def test_default_collate_mixed_dtypes_and_autograd(torch):
    ours = default_collate([dynograph.ones(2), dynograph.ones(2, dtype=dynograph.float64)])
    theirs = tdata().default_collate([torch.ones(2), torch.ones(2, dtype=torch.float64)])
    assert_tree_same(ours, theirs)
    out = default_collate([dynograph.ones(2, requires_grad=True), dynograph.ones(2)])
    assert out.requires_grad and out.grad_fn.name() == "StackBackward0"


def test_default_collate_errors(torch):
    same_error(lambda: default_collate([[1, 2], [3]]), lambda: tdata().default_collate([[1, 2], [3]]))
    same_error(lambda: default_collate([dynograph.ones(2), dynograph.ones(3)]),
               lambda: tdata().default_collate([torch.ones(2), torch.ones(3)]))
    same_error(lambda: default_collate([object()]), lambda: tdata().default_collate([object()]))
    strs = [np.array(["a"]), np.array(["b"])]
    same_error(lambda: default_collate(strs), lambda: tdata().default_collate(strs))


def test_default_collate_size_error_chains_nothing(torch):
    # the user's error alone: no internal exception shown as "during handling of ..."
    with pytest.raises(RuntimeError) as info:
        default_collate([dynograph.ones(3), dynograph.ones(4)])
    assert str(info.value) == "stack expects each tensor to be equal size, but got [3] at entry 0 and [4] at entry 1"
    assert info.value.__context__ is None and info.value.__cause__ is None


def test_default_convert_like_torch(torch):
    data = {"a": np.arange(3), "b": (np.float32(2.0), [np.ones(2)]), "p": Point(np.array(1), "s"),
            "s": "text", "n": 4, "strs": np.array(["x"])}
    assert_tree_same(default_convert(data), tdata().default_convert(data))
    t = dynograph.ones(2)
    assert default_convert(t) is t


# ---------------------------------------------------------------- DataLoader, one process

def test_loader_batches_like_torch(torch):
    x = np.random.default_rng(1).random((10, 3), dtype=np.float32)
    y = np.arange(10)
    ours = DataLoader(TensorDataset(dynograph.tensor(x), dynograph.tensor(y)), batch_size=4)
    theirs = tdata().DataLoader(tdata().TensorDataset(torch.tensor(x), torch.tensor(y)), batch_size=4)
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs, strict=True):
        assert_tree_same(a, b)
    for kw in [dict(batch_size=3, drop_last=True), dict(batch_size=None), dict(batch_size=1)]:
        ours = DataLoader(MyDataset(x, y), **kw)
        theirs = tdata().DataLoader(MyDataset(x, y), **kw)
        got, want = list(ours), list(theirs)
        assert len(ours) == len(theirs) == len(got) == len(want)
        for a, b in zip(got, want):
            if kw["batch_size"] is None:     # no auto-batching: numpy rows converted to tensors
                a, b = list(a), list(b)
            assert_tree_same(a, b)


def test_loader_shuffle_reproducible_and_covers_all():
    ds = TensorDataset(dynograph.arange(20))
    order = lambda g: [int(v) for (b,) in DataLoader(ds, batch_size=6, shuffle=True, generator=g)  # noqa: E731
                       for v in b.tolist()]
    a = order(dynograph.Generator().manual_seed(2))
    assert sorted(a) == list(range(20)) and a == order(dynograph.Generator().manual_seed(2))
    dynograph.manual_seed(9)
    b = order(None)
    dynograph.manual_seed(9)
    assert b == order(None)
    loader = DataLoader(ds, batch_size=6, shuffle=True)
    assert [x.tolist() for (x,) in loader] != [x.tolist() for (x,) in loader]   # new order each epoch


def test_loader_custom_sampler_batch_sampler_and_collate():
    ds = MyDataset(list(range(10)), list(range(10, 20)))
    loader = DataLoader(ds, batch_size=2, sampler=[9, 8, 7])
    assert [b[0].tolist() for b in loader] == [[9, 8], [7]]
    loader = DataLoader(ds, batch_sampler=[[0, 5], [2]])
    assert [b[1].tolist() for b in loader] == [[10, 15], [12]] and len(loader) == 2
    loader = DataLoader(ds, batch_size=3, collate_fn=lambda batch: sum(a for a, _ in batch))
    assert list(loader) == [3, 12, 21, 9]


def test_loader_iterable_dataset_one_process(torch):
    for kw in [dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None)]:
        ours = [to_np(b) for b in DataLoader(Stream(7), **kw)]
        theirs = [to_np(b) for b in tdata().DataLoader(torch_stream(7), **kw)]
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a, b)
    loader = DataLoader(Stream(7), batch_size=3, drop_last=True)
    assert len(loader) == 2
    assert len(DataLoader(Stream(7), batch_size=3)) == 3
    assert get_worker_info() is None


class LyingStream(IterableDataset):
    def __iter__(self):
        return iter(range(5))

    def __len__(self):
        return 2


def test_loader_iterable_length_warning():
    loader = DataLoader(LyingStream(), batch_size=None)
    assert len(loader) == 2
    with pytest.warns(UserWarning, match="was reported to be 2"):
        list(loader)


BAD_ARGS = [
    dict(num_workers=-1), dict(timeout=-1), dict(prefetch_factor=2), dict(num_workers=1, prefetch_factor=-1),
    dict(persistent_workers=True), dict(sampler=[0, 1], shuffle=True),
    dict(batch_sampler=[[0]], batch_size=2), dict(batch_sampler=[[0]], drop_last=True),
    dict(batch_sampler=[[0]], shuffle=True), dict(batch_size=None, drop_last=True),
    dict(multiprocessing_context="spawn"), dict(num_workers=1, multiprocessing_context="nope"),
    dict(num_workers=1, multiprocessing_context=3),
]


@pytest.mark.parametrize("kw", BAD_ARGS, ids=[str(k) for k in BAD_ARGS])
def test_loader_argument_errors_like_torch(torch, kw):
    ds = list(range(4))
    same_error(lambda: DataLoader(ds, **kw), lambda: tdata().DataLoader(ds, **kw))


def test_loader_iterable_argument_errors_like_torch(torch):
    for kw in [dict(shuffle=True), dict(sampler=[0]), dict(batch_sampler=[[0]])]:
        same_error(lambda: DataLoader(Stream(3), **kw), lambda: tdata().DataLoader(torch_stream(3), **kw))


def test_loader_attributes_and_setattr(torch):
    loader = DataLoader(list(range(5)), batch_size=2, shuffle=True)
    assert isinstance(loader.sampler, RandomSampler) and isinstance(loader.batch_sampler, BatchSampler)
    assert loader.collate_fn is default_collate and loader.prefetch_factor is None
    assert DataLoader(list(range(5)), batch_size=None).collate_fn is default_convert
    assert DataLoader(list(range(5)), num_workers=2).prefetch_factor == 2
    for attr in ["batch_size", "sampler", "dataset", "drop_last", "persistent_workers", "batch_sampler"]:
        same_error(lambda: setattr(loader, attr, 1),
                   lambda: setattr(tdata().DataLoader(list(range(5))), attr, 1))
    loader.num_workers = 0                      # other attributes stay writable
    with pytest.raises(AssertionError, match="requires timeout == 0"):
        iter(DataLoader(list(range(5)), timeout=1))


def test_loader_pin_memory_is_accepted_with_torch_warning():
    with pytest.warns(UserWarning, match="'pin_memory' argument is set as true but no accelerator is found"):
        batches = list(DataLoader(TensorDataset(dynograph.arange(4)), batch_size=2, pin_memory=True))
    assert [b[0].tolist() for b in batches] == [[0, 1], [2, 3]]


def test_loader_too_many_workers_warns():
    import os
    n = len(os.sched_getaffinity(0)) + 1
    with pytest.warns(UserWarning, match=f"This DataLoader will create {n} worker processes in total"):
        DataLoader(list(range(4)), num_workers=n)
