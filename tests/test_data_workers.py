"""dynograph.utils.data.DataLoader with worker processes: order, seeding, sharding, errors,
crashes, timeouts, persistent workers and cleanup.

Datasets live at module level so workers started by forkserver/spawn can unpickle them,
which imports this module in every such worker: it therefore does not import pytest at the
top (that import alone would double a worker's start-up).  Every wait is bounded.  Start
methods, pickling errors and the workers' end with a killed main process:
test_data_start_methods.py."""
import ctypes
import gc
import multiprocessing as mp
import os
import random
import signal
import time

import numpy as np

import dynograph
from dynograph.utils.data import (DataLoader, Dataset, IterableDataset, TensorDataset, WorkerInfo,
                                  get_worker_info)
from dynograph.utils.data._worker import _generate_state



def raises(*args, **kwargs):
    import pytest
    return pytest.raises(*args, **kwargs)


def base_seed_of(generator_seed):
    """The base seed a loader draws first from a generator seeded ``generator_seed``."""
    g = dynograph.Generator().manual_seed(generator_seed)
    return int(dynograph.empty((), dtype=dynograph.int64).random_(generator=g).item())


def gone(pids, within=5.0):
    """All ``pids`` have exited (no /proc entry, or a zombie) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(_running(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def _running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def worker_pids(it):
    return [w.pid for w in it._workers.processes]


class Slow(Dataset):
    """Item i is i; odd items are slow, so worker answers arrive out of order."""

    def __init__(self, n=12, delay=0.02):
        self.n, self.delay = n, delay

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i % 2:
            time.sleep(self.delay)
        return dynograph.tensor([i, os.getpid()])


class OneSlow(Dataset):
    """Item i is i; item 1 takes a second."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == 1:
            time.sleep(1.0)
        return i


class Augmented(Dataset):
    """A fixed sample plus random noise from dynograph's global generator."""

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return dynograph.full((2,), float(i)) + dynograph.rand(2)


class Seeds(Dataset):
    """What a worker sees: its info and one draw from each of its generators."""

    def __len__(self):
        return 4

    def __getitem__(self, i):
        info = get_worker_info()
        return {"id": info.id, "num_workers": info.num_workers, "seed": info.seed,
                "same_dataset": isinstance(info.dataset, Seeds), "dg": dynograph.rand(1).item(),
                "np": float(np.random.rand()), "py": random.random(), "init": os.environ.get("DG_INIT"),
                "threads": dynograph.get_num_threads()}


def init_fn(worker_id):
    os.environ["DG_INIT"] = f"worker {worker_id}"


class Shard(IterableDataset):
    """range(n), split between workers by get_worker_info()."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


class Unsharded(IterableDataset):
    def __iter__(self):
        return iter(range(3))


class Failing(Dataset):
    """Item ``bad`` raises ``exc``; item ``exit_at`` ends the worker process its own way."""

    def __init__(self, bad=-1, exc="value", how=None):
        self.bad, self.exc, self.how = bad, exc, how

    def __len__(self):
        return 8

    def __getitem__(self, i):
        if i == self.bad:
            if self.how == "exit":
                os._exit(3)
            if self.how == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            if self.how == "segfault":
                import faulthandler
                faulthandler.disable()           # inherited from pytest by fork: no dump on stderr
                ctypes.string_at(0)
            if self.how == "sleep":
                time.sleep(1.5)
            raise make_error(self.exc, i)
        return i


class TwoArgError(Exception):
    def __init__(self, code, detail):
        super().__init__(f"{code}: {detail}")


def make_error(kind, i):
    if kind == "key":
        return KeyError(f"no item {i}")
    if kind == "two_args":
        return TwoArgError(7, f"bad item {i}")
    if kind == "local":                       # a class the main process cannot unpickle
        class LocalError(Exception):
            pass
        return LocalError(f"bad item {i}")
    return ValueError(f"bad item {i}")


def loader(ds, **kw):
    kw.setdefault("num_workers", 2)
    return DataLoader(ds, **kw)


# ---------------------------------------------------------------- order and seeding

def test_batches_come_back_in_sampler_order():
    ds = Slow()
    got = list(loader(ds, batch_size=1, prefetch_factor=3))
    assert [int(b[0, 0]) for b in got] == list(range(12))
    assert len({int(b[0, 1]) for b in got}) == 2                  # both workers served
    assert os.getpid() not in {int(b[0, 1]) for b in got}


def test_out_of_order_delivery_when_asked():
    got = [int(b) for b in loader(OneSlow(), batch_size=None, in_order=False)]
    assert sorted(got) == list(range(8)) and got[:2] == [0, 2]       # fast items overtake the slow one
    assert [int(b) for b in loader(OneSlow(), batch_size=None)] == list(range(8))


def test_two_workers_match_no_workers_for_the_same_seed():
    ds = TensorDataset(dynograph.arange(23), dynograph.randn(23, 2))
    runs = []
    for workers in (0, 2):
        g = dynograph.Generator().manual_seed(11)
        runs.append([[t.numpy().copy() for t in b] for b in
                     DataLoader(ds, batch_size=5, shuffle=True, num_workers=workers, generator=g)])
    assert len(runs[0]) == len(runs[1]) == 5
    for a, b in zip(*runs):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)


def test_random_augmentation_reproducible_and_seeded_per_worker():
    dynograph.manual_seed(3)
    first = [b.numpy().copy() for b in loader(Augmented(), batch_size=2)]
    dynograph.manual_seed(3)
    second = [b.numpy().copy() for b in loader(Augmented(), batch_size=2)]
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)
    # what the workers computed: worker w (batches w, w+2, ...) draws from seed base + w
    g = dynograph.Generator().manual_seed(3)
    base = int(dynograph.empty((), dtype=dynograph.int64).random_(generator=g).item())
    gens = [dynograph.Generator().manual_seed(base + w) for w in range(2)]
    for k, batch in enumerate(first):
        expect = [np.full(2, 2.0 * k + j, np.float32) + dynograph.rand(2, generator=gens[k % 2]).numpy()
                  for j in range(2)]
        np.testing.assert_array_equal(batch, np.stack(expect))


# torch.utils.data._utils.worker._generate_state(base_seed, worker_id), recorded from torch 2.13
TORCH_NUMPY_SEEDS = {(12345, 0): [1617105738, 966875728, 3978802469, 1788008128],
                     (12345, 1): [530262504, 3509291438, 1156716502, 3400667355],
                     (2 ** 62 + 7, 3): [3901771379, 2462785867, 1770425866, 1524518099],
                     (0, 0): [2968811710, 3677149159, 745650761, 2884920346]}


def test_numpy_seed_hash_matches_torch():
    for (base, worker), state in TORCH_NUMPY_SEEDS.items():
        assert _generate_state(base, worker) == state


def test_worker_info_and_seeds():
    g = dynograph.Generator().manual_seed(21)
    batches = list(loader(Seeds(), batch_size=None, generator=g, worker_init_fn=init_fn))
    base = base_seed_of(21)
    assert [b["id"] for b in batches] == [0, 1, 0, 1]
    for b in batches[:2]:
        w = b["id"]
        assert b["num_workers"] == 2 and b["same_dataset"] and b["seed"] == base + w
        assert b["init"] == f"worker {w}" and b["threads"] == 1    # workers compute on one thread
        assert b["dg"] == dynograph.rand(1, generator=dynograph.Generator().manual_seed(base + w)).item()
        assert b["py"] == random.Random(base + w).random()
        assert b["np"] == np.random.RandomState(_generate_state(base, w)).rand()
    assert get_worker_info() is None


def test_worker_info_is_read_only():
    info = WorkerInfo(id=1, num_workers=2, seed=5, dataset=None)
    assert repr(info) == "WorkerInfo(id=1, num_workers=2, seed=5, dataset=None)"
    with raises(RuntimeError, match="Cannot assign attributes to WorkerInfo objects"):
        info.id = 3


def test_prefetch_bounds_tasks_in_flight():
    it = iter(loader(Slow(20, 0.0), batch_size=1, prefetch_factor=1))
    assert it._tasks_outstanding == 2
    for _ in range(10):
        next(it)
        assert it._tasks_outstanding <= 2
    del it


# ---------------------------------------------------------------- iterable datasets

def test_iterable_dataset_sharded_between_workers():
    got = [int(v) for b in loader(Shard(11), batch_size=2) for v in b.tolist()]
    assert sorted(got) == list(range(11))
    got = [int(b) for b in loader(Shard(5), batch_size=None)]
    assert sorted(got) == list(range(5))
    got = [b.tolist() for b in loader(Shard(9), batch_size=2, drop_last=True)]
    assert all(len(b) == 2 for b in got) and len(got) == 4          # 5 + 4 items, one short batch each


def test_unsharded_iterable_dataset_is_read_by_every_worker():
    got = sorted(int(b) for b in loader(Unsharded(), batch_size=None))
    assert got == [0, 0, 1, 1, 2, 2]


# ---------------------------------------------------------------- errors

def test_worker_exception_reraised_with_traceback():
    for kind, exc_type in [("value", ValueError), ("key", KeyError), ("two_args", RuntimeError),
                           ("local", RuntimeError)]:
        check_reraised(kind, exc_type)


def check_reraised(kind, exc_type):
    it = iter(loader(Failing(bad=3, exc=kind), batch_size=None))
    assert [next(it) for _ in range(3)] == [0, 1, 2]
    with raises(exc_type) as info:
        next(it)
    text = str(info.value)
    assert "in DataLoader worker process 1" in text and "(sample index 3)" in text
    assert "Original Traceback (most recent call last)" in text
    assert "raise make_error(self.exc, i)" in text and "item 3" in text
    if kind in ("two_args", "local"):
        assert text.startswith("Caught TwoArgError" if kind == "two_args" else "Caught LocalError")
    assert next(it) == 4                   # the loader goes on after the failed sample
    del it, info


def test_worker_exception_in_batched_fetch_names_the_sample():
    with raises(ValueError, match=r"worker process 0 \(sample index 2\)"):
        list(loader(Failing(bad=2), batch_size=4))


def test_worker_init_fn_error_is_reported():
    with raises(ZeroDivisionError, match="in DataLoader worker process"):
        list(loader(Failing(), worker_init_fn=divide_by_zero))


def divide_by_zero(worker_id):
    return 1 / 0


def test_a_worker_whose_init_failed_answers_every_task_with_that_error(monkeypatch):
    # it must not die on its second task: the main process could see the death before the
    # first answer and report "exited unexpectedly" instead of the error
    import pickle
    import threading
    from dynograph.utils.data import _worker
    from dynograph.utils.data._worker import worker_loop
    monkeypatch.setattr(_worker, "_worker_info", None)     # the loop runs here: restore it after
    index_reader, index_writer = mp.Pipe(duplex=False)
    result_reader, result_writer = mp.Pipe(duplex=False)
    for task in range(3):
        index_writer.send((task, [task]))
    index_writer.send(None)
    worker_loop(False, TensorDataset(dynograph.arange(8)), index_reader, threading.Lock(),
                 result_writer, True, lambda b: b, False, 0, divide_by_zero, 0, 1)
    answers = [pickle.loads(result_reader.recv_bytes()) for _ in range(3)]
    assert [idx for idx, _ in answers] == [0, 1, 2]
    assert all(data.exc_name == "ZeroDivisionError" for _, data in answers)


def test_worker_crash_raises_promptly():
    for how in ["exit", "sigkill", "segfault"]:
        check_crash(how)


def check_crash(how):
    start = time.monotonic()
    it = iter(loader(Failing(bad=5, how=how), batch_size=None))
    pids = worker_pids(it)
    with raises(RuntimeError, match=r"DataLoader worker \(pid \d+\) exited unexpectedly") as info:
        list(it)
    assert time.monotonic() - start < 10
    expect = "exit code 3" if how == "exit" else ("SIGKILL" if how == "sigkill" else "SIGSEGV")
    assert expect in str(info.value)
    assert gone(pids)


def test_worker_killed_from_outside_raises():
    it = iter(loader(Slow(40, 0.05), batch_size=1))
    next(it)
    pids = worker_pids(it)
    os.kill(pids[0], signal.SIGKILL)
    with raises(RuntimeError, match=f"DataLoader worker \\(pid {pids[0]}\\) exited unexpectedly"):
        for _ in it:
            pass
    assert gone(pids)


def test_timeout():
    it = iter(loader(Failing(bad=0, how="sleep"), batch_size=None, timeout=0.5))
    start = time.monotonic()
    with raises(RuntimeError, match=r"^DataLoader timed out after 0.5 seconds$"):
        next(it)
    assert time.monotonic() - start < 5
    pids = worker_pids(it)
    del it
    assert gone(pids)


# ---------------------------------------------------------------- lifetime

def test_break_and_delete_leave_no_workers():
    ldr = loader(Slow(30, 0.0), batch_size=2)
    it = iter(ldr)
    pids = worker_pids(it)
    for i, _ in enumerate(it):
        if i == 2:
            break
    del it
    gc.collect()
    assert gone(pids) and mp.active_children() == []
    # a for loop that breaks, with no name kept for the iterator
    for _ in loader(Slow(30, 0.0), batch_size=2):
        break
    gc.collect()
    assert mp.active_children() == []


def test_exhausted_iterator_shuts_down_and_loader_iterates_twice():
    ldr = loader(Slow(6, 0.0), batch_size=2)
    it = iter(ldr)
    pids = worker_pids(it)
    first = [b[:, 0].tolist() for b in it]
    assert gone(pids) and mp.active_children() == []
    assert first == [b[:, 0].tolist() for b in ldr] == [[0, 1], [2, 3], [4, 5]]


def test_persistent_workers_survive_epochs():
    ldr = loader(Slow(6, 0.0), batch_size=2, persistent_workers=True)
    it = iter(ldr)
    pids = worker_pids(it)
    first = [b[:, 0].tolist() for b in it]
    assert iter(ldr) is it and worker_pids(it) == pids and all(_running(p) for p in pids)
    for i, b in enumerate(ldr):                   # break early, then a full epoch
        if i == 1:
            break
    assert [b[:, 0].tolist() for b in ldr] == first == [[0, 1], [2, 3], [4, 5]]
    assert all(_running(p) for p in pids)
    del it, ldr, b
    gc.collect()
    assert gone(pids)


def test_persistent_workers_with_iterable_dataset():
    ldr = loader(Shard(7), batch_size=2, persistent_workers=True)
    for _ in range(2):
        assert sorted(int(v) for b in ldr for v in b.tolist()) == list(range(7))
    del ldr


def test_context_object_and_fork():
    for ctx in (mp.get_context("forkserver"), "fork"):
        got = [b.tolist() for b in loader(list(range(4)), batch_size=2, multiprocessing_context=ctx)]
        assert got == [[0, 1], [2, 3]]


def test_tensors_cross_processes_with_dtype_and_grad_flag():
    x = dynograph.arange(12, dtype=dynograph.float64).reshape(3, 4)
    ds = TensorDataset(x[:, ::2], dynograph.tensor([True, False, True]))
    (a, m), = loader(ds, batch_size=3)
    assert a.dtype == dynograph.float64 and m.dtype == dynograph.bool
    assert a.tolist() == [[0, 2], [4, 6], [8, 10]] and m.tolist() == [True, False, True]
    import pickle
    from multiprocessing.reduction import ForkingPickler
    leaf = dynograph.ones(2, requires_grad=True)
    back = pickle.loads(ForkingPickler.dumps(leaf))
    assert back.requires_grad and back.tolist() == [1.0, 1.0]
    with raises(RuntimeError, match="Cowardly refusing to serialize non-leaf tensor"):
        ForkingPickler.dumps(leaf * 2)


ORPHAN_SCRIPT = """
import os, signal, sys
import dynograph
from dynograph.utils.data import DataLoader, TensorDataset
import time


def slow_start(worker_id):
    # worker 1 is still starting when the main process ends: it must notice all the same
    if worker_id == 1:
        time.sleep(1.5)


if __name__ == "__main__":
    # fork: no fork server to start, so the test stays short; the exit paths are the same
    loader = DataLoader(TensorDataset(dynograph.arange(40)), batch_size=2, num_workers=2,
                        persistent_workers=True, multiprocessing_context="fork",
                        worker_init_fn=slow_start)
    it = iter(loader)
    next(it)
    print(" ".join(str(w.pid) for w in it._workers.processes), flush=True)
    if sys.argv[1] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)     # no cleanup at all: the workers notice
"""


def test_workers_end_with_the_main_process(tmp_path):
    import subprocess
    import sys
    script = tmp_path / "orphan.py"
    script.write_text(ORPHAN_SCRIPT)
    # interpreter exit (atexit) and SIGKILL of the parent, run side by side
    runs = {how: subprocess.Popen([sys.executable, str(script), how], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for how in ("exit", "kill")}
    for how, proc in runs.items():
        out, err = proc.communicate(timeout=60)
        pids = [int(p) for p in out.split()]
        assert len(pids) == 2, err
        assert gone(pids, within=10.0), how


def test_large_tensors_reach_workers_through_shared_memory():
    import mmap
    from dynograph.utils.data import _sharing
    big = dynograph.arange(400_000, dtype=dynograph.float32).reshape(1000, 400)    # 1.6 MB, a view
    assert big.numel() * 4 >= _sharing.SHARE_MIN_BYTES
    ds = TensorDataset(big, dynograph.arange(1000))
    for ctx in ("forkserver", "spawn"):
        batches = list(DataLoader(ds, batch_size=250, num_workers=1, multiprocessing_context=ctx))
        np.testing.assert_array_equal(np.concatenate([b[0].numpy() for b in batches]), big.numpy())
    assert not isinstance(big._data.base, mmap.mmap)          # a view: copied, never moved
    with _sharing.sharing_session():          # one shared copy per array per session
        fds = [_sharing._shared_fd(big._data, None) for _ in range(2)]
        assert fds[0] == fds[1]


def test_sole_owner_tensor_moves_to_shared_memory_once():
    import mmap
    own = dynograph.zeros(1000, 400)
    # forkserver pickles the dataset (fork would not: the children inherit it)
    ldr = DataLoader(TensorDataset(own), batch_size=500, num_workers=1, multiprocessing_context="forkserver")
    first = [b[0].numpy().copy() for b in ldr]
    assert isinstance(own._data.base, mmap.mmap) and all((b == 0).all() for b in first)
    fd = own._shm[1]
    own.add_(2.0)                             # seen by the next epoch's workers, as with torch
    again = [b[0].numpy() for b in ldr]
    assert own._shm[1] == fd and all((b == 2).all() for b in again)
