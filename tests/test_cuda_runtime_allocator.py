"""The caching allocator of CUDA device memory (runtime/cuda_allocator.py) against a fake device
that counts its allocations: rounding, the two pools, best fit, splitting, merging, reuse without
new device allocations, empty_cache, the statistics, out of memory."""
import random

import pytest

from dynograph.runtime import cuda_allocator as ca

MiB = 1 << 20


class FakeDevice:
    """Addresses from a counter; ``capacity`` bytes at most; remembers what is live."""

    def __init__(self, capacity=1 << 40):
        self.capacity, self.used, self.next = capacity, 0, 1 << 32
        self.live = {}
        self.mallocs = self.frees = 0

    def malloc(self, nbytes):
        if self.used + nbytes > self.capacity:
            raise MemoryError("out of memory")
        address, self.next = self.next, self.next + nbytes + (1 << 30)   # segments never touch
        self.live[address] = nbytes
        self.used += nbytes
        self.mallocs += 1
        return address

    def free(self, address):
        self.used -= self.live.pop(address)
        self.frees += 1


@pytest.fixture
def dev():
    return FakeDevice()


@pytest.fixture
def alloc(dev):
    return ca.CachingAllocator(dev)


def test_rounding_and_zero(alloc, dev):
    assert alloc.malloc(0) == 0 and dev.mallocs == 0
    a = alloc.malloc(1)
    assert alloc.size_of(a) == 512 and alloc.allocated == 512
    b = alloc.malloc(513)
    assert alloc.size_of(b) == 1024 and alloc.allocated == 1536
    assert dev.mallocs == 1 and alloc.reserved == ca.SMALL_SEGMENT     # both from one segment
    alloc.free(0)                                                      # like free(NULL)
    with pytest.raises(ValueError):
        alloc.malloc(-1)


def test_segment_sizes():
    assert ca.segment_size(512) == ca.SMALL_SEGMENT
    assert ca.segment_size(MiB) == ca.SMALL_SEGMENT
    assert ca.segment_size(MiB + 512) == ca.LARGE_SEGMENT
    assert ca.segment_size(10 * MiB) == 10 * MiB
    assert ca.segment_size(11 * MiB + 1) == 12 * MiB


def test_freed_blocks_are_reused_without_the_device(alloc, dev):
    sizes = [1000, 4096, 300_000, 3 * MiB, 18 * MiB]
    for step in range(5):                   # a training loop: the same sizes every step
        blocks = [alloc.malloc(n) for n in sizes]
        for b in blocks:
            alloc.free(b)
        if step == 0:
            first = dev.mallocs
    assert dev.mallocs == first == 3        # a small, a 20 MiB and an 18 MiB segment
    assert dev.frees == 0 and alloc.allocated == 0
    assert alloc.reserved == ca.SMALL_SEGMENT + ca.LARGE_SEGMENT + 18 * MiB
    assert alloc.allocs == alloc.frees == 25


def test_best_fit_and_split(alloc):
    a = alloc.malloc(100_000)
    b = alloc.malloc(10_000)
    assert b == a + ca.rounded(100_000)     # split off the rest of a's segment
    alloc.free(a)
    c = alloc.malloc(5_000)                 # the smallest free block that fits: a's, not the tail
    assert c == a
    d = alloc.malloc(90_000)                # the rest of a's block still fits it
    assert d == a + ca.rounded(5_000)
    e = alloc.malloc(6_000)                 # now only the segment's tail does
    assert e == b + ca.rounded(10_000)


def test_large_pool_keeps_small_remainders(alloc):
    # a large block is split only when more than SMALL_MAX would be left over
    a = alloc.malloc(19 * MiB + 1)          # a 20 MiB segment, not split: the whole is counted
    assert alloc.size_of(a) == 20 * MiB and alloc.allocated == 20 * MiB
    alloc.free(a)
    b = alloc.malloc(2 * MiB)
    assert alloc.size_of(b) == 2 * MiB      # 18 MiB left over: split
    c = alloc.malloc(17 * MiB + 512)        # 0.5 MiB would be left over: the whole block
    assert alloc.size_of(c) == 18 * MiB


def test_small_and_large_pools_are_separate(alloc, dev):
    big = alloc.malloc(2 * MiB)
    alloc.free(big)
    small = alloc.malloc(1000)              # a small request never takes a large pool's block
    assert dev.mallocs == 2 and small != big


def test_merge_and_empty_cache(alloc, dev):
    blocks = [alloc.malloc(100_000) for _ in range(8)]
    assert dev.mallocs == 1
    for b in blocks[::2] + blocks[1::2]:     # free out of order: neighbours merge
        alloc.free(b)
    big = alloc.malloc(MiB)                  # more than any 3 neighbours: the merged segment
    assert big == blocks[0] and dev.mallocs == 1
    alloc.free(big)
    alloc.empty_cache()
    assert dev.live == {} and dev.frees == 1 and alloc.reserved == 0
    assert alloc.stats()["segment.all.current"] == 0


def test_empty_cache_keeps_segments_in_use(alloc, dev):
    a = alloc.malloc(1000)
    b = alloc.malloc(5 * MiB)
    alloc.free(b)
    alloc.empty_cache()
    assert list(dev.live) == [a] and alloc.reserved == ca.SMALL_SEGMENT
    assert alloc.malloc(1000) != a          # the live segment still serves


def test_statistics_and_peaks(alloc):
    a = alloc.malloc(3 * MiB)
    b = alloc.malloc(1000)
    assert alloc.allocated == 3 * MiB + 1024
    alloc.free(a)
    assert alloc.allocated == 1024 and alloc.peak_allocated == 3 * MiB + 1024
    alloc.reset_peak_stats()
    assert alloc.peak_allocated == 1024 and alloc.peak_reserved == alloc.reserved
    stats = alloc.stats()
    assert stats["allocated_bytes.all.current"] == 1024
    assert stats["allocation.all.current"] == 1 and stats["segment.all.allocated"] == 2
    alloc.free(b)
    assert alloc.allocated == 0


def test_double_free_and_foreign_address(alloc):
    a = alloc.malloc(1000)
    alloc.free(a)
    with pytest.raises(ValueError, match="not an allocated block"):
        alloc.free(a)
    with pytest.raises(ValueError, match="not an allocated block"):
        alloc.free(12345)


def test_out_of_memory_releases_the_cache_then_raises():
    dev = FakeDevice(capacity=30 * MiB)
    alloc = ca.CachingAllocator(dev, name="CUDA 0")
    a = alloc.malloc(5 * MiB)               # a 20 MiB segment
    alloc.free(a)
    b = alloc.malloc(21 * MiB)              # a 22 MiB segment does not fit beside it: retried
    assert alloc.stats()["num_alloc_retries"] == 1 and dev.frees == 1
    with pytest.raises(ca.OutOfMemoryError, match=r"CUDA 0 out of memory. Tried to allocate "
                       r"20.00 MiB. .*22.00 MiB is allocated by tensors"):
        alloc.malloc(20 * MiB)
    assert alloc.stats()["num_ooms"] == 1 and isinstance(ca.OutOfMemoryError("x"), RuntimeError)
    alloc.free(b)


def test_random_workload_keeps_blocks_disjoint(alloc, dev):
    """Random allocations and frees: live blocks never overlap, stay inside their segments, and
    the books balance; after freeing everything each segment is one free block again."""
    rng = random.Random(0)
    live = {}
    for _ in range(3000):
        if live and rng.random() < 0.45:
            address = rng.choice(list(live))
            alloc.free(address)
            del live[address]
        else:
            n = rng.choice([rng.randint(1, 4096), rng.randint(1, 2 * MiB), rng.randint(1, 24 * MiB)])
            address = alloc.malloc(n)
            live[address] = alloc.size_of(address)
            assert live[address] >= n
    spans = sorted(live.items())
    for (a, n), (b, _) in zip(spans, spans[1:]):
        assert a + n <= b
    for a, n in spans:
        assert any(s <= a and a + n <= s + size for s, size in dev.live.items())
    assert alloc.allocated == sum(live.values())
    assert alloc.reserved == sum(dev.live.values())
    for address in live:
        alloc.free(address)
    alloc.empty_cache()
    assert dev.live == {} and alloc.reserved == alloc.allocated == 0


def test_format_size():
    assert ca.format_size(100) == "100 bytes"
    assert ca.format_size(20 * MiB) == "20.00 MiB"
    assert ca.format_size(3 << 30) == "3.00 GiB"


def test_a_free_from_inside_the_allocator_waits_for_it_to_finish(alloc):
    """A device array's finalizer can run (garbage collection) while its thread is inside
    malloc: that free is done when malloc ends, not deadlocked on the allocator's lock."""
    first = alloc.malloc(1000)
    real = alloc._best_fit

    def best_fit_with_a_collection(size, small):
        alloc.free(first)               # what a finalizer would do mid-malloc
        return real(size, small)
    alloc._best_fit = best_fit_with_a_collection
    second = alloc.malloc(1000)
    alloc._best_fit = real
    assert alloc.allocated == ca.rounded(1000) and alloc.frees == 1 and second != 0
