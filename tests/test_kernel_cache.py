"""The LLVM kernel disk cache: bounded size (least recently used entries go first), temporaries
created exclusively, and folders others could write to refused with one warning."""
import os
import time
import warnings

import pytest

from dynograph.compiler.llvm import jit
from dynograph.runtime import cache as disk_cache
from dynograph.runtime.backend import settle_compilations


@pytest.fixture
def cache(tmp_path, monkeypatch):
    # kernels an earlier test queued to compile ahead would write into the new folder
    settle_compilations()
    root = tmp_path / "cache"
    monkeypatch.setenv("DYNOGRAPH_CACHE_DIR", str(root))
    monkeypatch.delenv("DYNOGRAPH_CACHE_SIZE_MB", raising=False)
    return root


def _entries(root):
    return sorted(n for n in os.listdir(root / "kernels") if n.endswith(".o"))


def _age(path, seconds):
    t = time.time() - seconds
    os.utime(path, (t, t))


def test_entries_round_trip_and_leave_no_temporaries(cache):
    jit.DISK.write("k1", b"object code")
    assert jit.DISK.read("k1") == b"object code"
    assert os.listdir(cache / "kernels") == ["k1.o"]
    assert (cache / "kernels").stat().st_mode & 0o777 == 0o700


def test_least_recently_used_entries_are_evicted_past_the_cap(cache, monkeypatch):
    entry = len(jit.DISK.header()) + 66 + 1000                                    # bytes on disk
    monkeypatch.setenv("DYNOGRAPH_CACHE_SIZE_MB", str(10 * entry / 2 ** 20))  # room for 10
    for i in range(9):
        jit.DISK.write(f"k{i}", bytes(1000))
        _age(cache / "kernels" / f"k{i}.o", 1000 - i)                          # k0 the oldest
    assert jit.DISK.read("k0") is not None                                  # a hit: now the newest
    jit.DISK.write("k9", bytes(1000))
    assert len(_entries(cache)) == 10
    jit.DISK.write("k10", bytes(1000))                                      # one past the cap
    assert _entries(cache) == sorted(f"k{i}.o" for i in (0, 5, 6, 7, 8, 9, 10))    # down to 3/4


def test_cap_defaults_to_the_documented_constant(monkeypatch):
    monkeypatch.delenv("DYNOGRAPH_CACHE_SIZE_MB", raising=False)
    assert disk_cache.size_limit() == disk_cache.CACHE_SIZE_MB * 2 ** 20
    monkeypatch.setenv("DYNOGRAPH_CACHE_SIZE_MB", "1.5")
    assert disk_cache.size_limit() == 3 * 2 ** 19


def test_stale_temporaries_are_removed_and_fresh_ones_kept(cache):
    """A process's first write to a folder scans it."""
    (cache / "kernels").mkdir(parents=True, mode=0o700)
    stale, fresh = cache / "kernels" / ".k2.abc.tmp", cache / "kernels" / ".k3.abc.tmp"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"half")
    _age(stale, disk_cache.STALE_TEMP_S + 10)
    jit.DISK.write("k4", b"y")
    assert not stale.exists() and fresh.exists()


def test_writes_scan_the_folder_only_when_it_may_be_full(cache, monkeypatch):
    scans = []
    evict = disk_cache._evict
    monkeypatch.setattr(disk_cache, "_evict", lambda *a: scans.append(a) or evict(*a))
    for i in range(20):
        jit.DISK.write(f"k{i}", bytes(100))
    assert len(scans) == 1


def test_a_planted_temporary_name_is_not_followed(cache):
    """The old predictable temporary name, made a symlink to another file, is never written."""
    victim = cache.parent / "victim"
    victim.write_bytes(b"keep")
    (cache / "kernels").mkdir(parents=True, mode=0o700)
    (cache / "kernels" / f"k1.o.{os.getpid()}.tmp").symlink_to(victim)
    jit.DISK.write("k1", b"object code")
    assert victim.read_bytes() == b"keep" and jit.DISK.read("k1") == b"object code"


@pytest.mark.parametrize("where,mode", [("kernels", 0o777), ("kernels", 0o770), (".", 0o777)])
def test_a_folder_others_can_write_is_refused_with_one_warning(cache, where, mode):
    (cache / "kernels").mkdir(parents=True, mode=0o700)
    os.chmod(cache / where, mode)
    with pytest.warns(RuntimeWarning, match="not using the kernel disk cache .* writ"):
        jit.DISK.write("k1", b"object code")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jit.DISK.read("k1") is None
        jit.DISK.write("k2", b"object code")
    assert _entries(cache) == []


def test_a_sticky_world_writable_parent_like_tmp_is_accepted(cache):
    cache.mkdir(mode=0o700)
    os.chmod(cache, 0o1777)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jit.DISK.write("k1", b"object code")
    assert jit.DISK.read("k1") == b"object code"


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")
def test_a_folder_owned_by_another_user_is_refused(cache):
    (cache / "kernels").mkdir(parents=True, mode=0o700)
    os.chown(cache / "kernels", 65534, 65534)
    with pytest.warns(RuntimeWarning, match="owned by another user"):
        assert jit.DISK.read("k1") is None


def test_guard_functions_are_compiled_once_and_read_back(cache, monkeypatch):
    """A compiled function's guard check is Python generated per trace; its compiled code is
    kept under guards/ by a hash of its text, so the same step traced again (as in a new
    process) reads it instead of compiling it, and the check still tells calls apart."""
    import builtins

    import dynograph
    from dynograph.compiler import guard_code

    compiled = []

    def counting(source, *args, **kwargs):
        if args and args[0] == "<dynograph guards>":
            compiled.append(source)
        return builtins.compile(source, *args, **kwargs)

    monkeypatch.setattr(guard_code, "compile", counting, raising=False)
    model = dynograph.nn.Linear(3, 2)

    def run():
        step = dynograph.compile(lambda x: model(x).relu().sum())
        x = dynograph.ones(4, 3)
        step(x)
        step(x)
        model.training = False
        step(x)                 # a guard on the module's flag fails: a second graph
        model.training = True
        return step
    first = run()
    assert compiled and len(os.listdir(cache / "guards")) == len(set(compiled))
    n = len(compiled)
    second = run()
    assert len(compiled) == n               # read back, not compiled again
    assert len(second.entries) == len(first.entries) == 2
    assert second.hits == first.hits
