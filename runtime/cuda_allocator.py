"""The caching allocator of CUDA device memory: freed blocks stay reserved and serve later
requests, so a training loop that allocates the same sizes every step asks the driver for
memory only in its first steps (``cuMemAlloc`` and ``cuMemFree`` synchronize the device and
cost tens of microseconds each).

The policy, PyTorch's in simpler form:

* **Rounding.**  Every request is rounded up to a multiple of ``ROUND`` (512) bytes; that is the
  size the statistics count (as torch's ``memory_allocated``).  A request of 0 bytes gets the
  address 0 and no memory.
* **Two pools.**  Requests of at most ``SMALL_MAX`` (1 MiB) come from ``SMALL_SEGMENT`` (2 MiB)
  segments; larger ones from segments of ``LARGE_SEGMENT`` (20 MiB) when they are under
  ``MIN_LARGE_ALLOC`` (10 MiB), else of the request rounded up to ``ROUND_LARGE`` (2 MiB).  Small
  tensors then never fragment the segments of large ones.
* **Best fit.**  A request takes the smallest free block of its pool that holds it; a block is
  split when what is left over could serve another request of the pool (at least ``ROUND``
  bytes in the small pool, more than ``SMALL_MAX`` in the large one).  Only when no free block
  fits is a new segment allocated from the device.
* **Merging.**  A freed block joins its free neighbours of the same segment (segments are
  separate device allocations and never merge), so a segment whose blocks are all free is one
  free block again.
* **Out of memory.**  When the device refuses a segment, every whole free segment is released
  and the request tried once more; then ``OutOfMemoryError`` names the request and the memory held.
* ``empty_cache()`` releases every segment with no live block.

Blocks are reused in the order the program frees and allocates them, which is safe for kernels
launched on one stream (a freed block is only handed to work queued after the work that used
it).  The logic knows nothing of CUDA: a device is anything with ``malloc(nbytes) -> address``
(raising ``MemoryError`` when out of memory) and ``free(address)``; runtime/cuda_driver.py gives
it the real one, tests a counting fake.
"""
import bisect
import contextlib
import threading

ROUND = 512
SMALL_MAX = 1 << 20
SMALL_SEGMENT = 2 << 20
LARGE_SEGMENT = 20 << 20
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20


class OutOfMemoryError(RuntimeError):
    """torch.cuda.OutOfMemoryError: the device has no memory left for a request."""


def format_size(n):
    """Bytes as torch's out-of-memory message writes them: '20.00 MiB'."""
    if n < 1024:
        return f"{n} bytes"
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.2f} {unit}"


def rounded(nbytes):
    """The size a request of ``nbytes`` takes."""
    return max(ROUND, -(-nbytes // ROUND) * ROUND)


def segment_size(size):
    """The size of the segment a new block of rounded ``size`` is cut from."""
    if size <= SMALL_MAX:
        return SMALL_SEGMENT
    if size < MIN_LARGE_ALLOC:
        return LARGE_SEGMENT
    return -(-size // ROUND_LARGE) * ROUND_LARGE


class Block:
    """A piece of a segment: ``address``, ``size``, free or not, its neighbours in the segment."""
    __slots__ = ("address", "size", "free", "prev", "next", "small")

    def __init__(self, address, size, small, prev=None, next=None):
        self.address, self.size, self.small = address, size, small
        self.free, self.prev, self.next = True, prev, next

    def key(self):
        return (self.size, self.address)


class CachingAllocator:
    """Device memory for one device (see the module's note)."""

    def __init__(self, device, name="CUDA"):
        self.device, self.name = device, name
        self._lock = threading.Lock()
        self._owner = None                      # the thread holding _lock
        self._deferred = []                     # frees asked for while that thread held it
        self._pools = {True: [], False: []}     # small? -> sorted [(size, address)] of free blocks
        self._blocks = {}                       # address -> Block, free or live
        self._segments = {}                     # address of a segment's first block -> its size
        self.allocated = self.peak_allocated = 0
        self.reserved = self.peak_reserved = 0
        self.device_allocs = self.device_frees = 0   # segments asked of and given back to the device
        self.allocs = self.frees = 0                 # requests served and freed
        self.retries = self.ooms = 0                 # segments refused once, and twice

    # -- the interface ---------------------------------------------------------------------------
    def malloc(self, nbytes):
        """The address of a new block of at least ``nbytes`` bytes (0 for 0 bytes)."""
        if nbytes < 0:
            raise ValueError(f"cannot allocate a negative number of bytes ({nbytes})")
        if nbytes == 0:
            return 0
        size = rounded(nbytes)
        small = size <= SMALL_MAX
        with self._held():
            block = self._best_fit(size, small) or self._new_segment(size, small)
            self._take(block, size)
            self.allocated += block.size
            self.peak_allocated = max(self.peak_allocated, self.allocated)
            self.allocs += 1
            return block.address

    def free(self, address):
        """Return the block at ``address`` (from ``malloc``) to the cache.  A free asked for by
        the thread already inside the allocator (a device array's finalizer, run by the garbage
        collector in the middle of a malloc) is done when that thread leaves it."""
        if address == 0:
            return
        if self._owner == threading.get_ident():
            self._deferred.append(address)
            return
        with self._held():
            self._free(address)

    @contextlib.contextmanager
    def _held(self):
        """The allocator's lock, noting its holder (see ``free``)."""
        with self._lock:
            self._owner = threading.get_ident()
            try:
                yield
                while self._deferred:
                    self._free(self._deferred.pop())
            finally:
                self._owner = None

    def _free(self, address):
        block = self._blocks.get(address)
        if block is None or block.free:
            raise ValueError(f"{self.name} allocator: {address:#x} is not an allocated block")
        self.allocated -= block.size
        self.frees += 1
        block.free = True
        for neighbour in (block.prev, block.next):
            if neighbour is not None and neighbour.free:
                self._unlist(neighbour)
                block = self._merge(block, neighbour)
        self._list(block)

    def empty_cache(self):
        """Give every segment whose blocks are all free back to the device."""
        with self._held():
            self._release_free_segments()

    def size_of(self, address):
        """The rounded size of the live block at ``address``."""
        return self._blocks[address].size

    def reset_peak_stats(self):
        with self._held():
            self.peak_allocated, self.peak_reserved = self.allocated, self.reserved

    def stats(self):
        """Counters and sizes in torch's memory_stats() names (the 'all' pools together)."""
        return {
            "allocated_bytes.all.current": self.allocated,
            "allocated_bytes.all.peak": self.peak_allocated,
            "reserved_bytes.all.current": self.reserved,
            "reserved_bytes.all.peak": self.peak_reserved,
            "allocation.all.allocated": self.allocs,
            "allocation.all.freed": self.frees,
            "allocation.all.current": self.allocs - self.frees,
            "segment.all.allocated": self.device_allocs,
            "segment.all.freed": self.device_frees,
            "segment.all.current": len(self._segments),
            "num_alloc_retries": self.retries,
            "num_ooms": self.ooms,
        }

    # -- the pools -----------------------------------------------------------------------------
    def _list(self, block):
        bisect.insort(self._pools[block.small], block.key())

    def _unlist(self, block):
        pool = self._pools[block.small]
        del pool[bisect.bisect_left(pool, block.key())]

    def _best_fit(self, size, small):
        pool = self._pools[small]
        i = bisect.bisect_left(pool, (size, 0))
        if i == len(pool):
            return None
        return self._blocks[pool.pop(i)[1]]

    def _take(self, block, size):
        """Mark ``block`` live with ``size`` bytes, splitting off the rest where it is worth it."""
        rest = block.size - size
        if rest >= ROUND if block.small else rest > SMALL_MAX:
            tail = Block(block.address + size, rest, block.small, prev=block, next=block.next)
            if block.next is not None:
                block.next.prev = tail
            block.next, block.size = tail, size
            self._blocks[tail.address] = tail
            self._list(tail)
        block.free = False

    def _merge(self, block, neighbour):
        """One free block of two adjacent ones; the lower address survives."""
        low, high = (block, neighbour) if block.address < neighbour.address else (neighbour, block)
        low.size += high.size
        low.next = high.next
        if high.next is not None:
            high.next.prev = low
        del self._blocks[high.address]
        return low

    # -- segments ------------------------------------------------------------------------------
    def _new_segment(self, size, small):
        total = segment_size(size)
        try:
            address = self.device.malloc(total)
        except MemoryError:
            self.retries += 1
            self._release_free_segments()
            try:
                address = self.device.malloc(total)
            except MemoryError:
                self.ooms += 1
                raise OutOfMemoryError(
                    f"{self.name} out of memory. Tried to allocate {format_size(size)}. Of the "
                    f"device's memory, {format_size(self.allocated)} is allocated by tensors and "
                    f"{format_size(self.reserved - self.allocated)} is reserved but unallocated "
                    "(cached blocks were released before this error).") from None
        self.device_allocs += 1
        self.reserved += total
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        self._segments[address] = total
        block = self._blocks[address] = Block(address, total, small)
        return block

    def _release_free_segments(self):
        for address, total in list(self._segments.items()):
            block = self._blocks[address]
            if block.free and block.size == total:
                self._unlist(block)
                del self._blocks[address], self._segments[address]
                self.device.free(address)
                self.device_frees += 1
                self.reserved -= total
