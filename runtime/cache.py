"""The disk cache of compiled code, shared by every backend.

Entries live in ``$DYNOGRAPH_CACHE_DIR/<folder>`` (default ``$XDG_CACHE_HOME/dynograph``,
``~/.cache/dynograph``), one file per key.  A file starts with a header the backend computes
(format version, compiler version, target, a hash of the code generator's source) and a hash of
the compiled bytes: an entry whose header or hash does not match is ignored and rewritten, never
loaded.  Writes go to a fresh, exclusively created temporary renamed into place, so readers see
the old entry or the whole new one.

The folder holds at most ``$DYNOGRAPH_CACHE_SIZE_MB`` (default ``CACHE_SIZE_MB``): a write that
goes past it deletes the least recently used entries (a hit refreshes an entry's mtime).  A
process scans a folder on its first write there, then only when its own writes may have
filled it.
Loading an entry runs its code, so a folder someone else could write to (owned by another user,
or writable by others) is not used: compiled code then stays in memory, with one warning.
"""
import hashlib
import os
import stat
import tempfile
import time
import warnings

from . import config

CACHE_SIZE_MB = config.get_default("CACHE_SIZE_MB")   # the default cap
STALE_TEMP_S = 3600             # a temporary this old is a killed writer's
_folders = {}                   # folder path -> usable (checked once per process)


def cache_dir():
    return config.get("CACHE_DIR")


def size_limit():
    """The cap in bytes (``$DYNOGRAPH_CACHE_SIZE_MB``, default ``CACHE_SIZE_MB``)."""
    return int(config.get("CACHE_SIZE_MB") * 2 ** 20)


class DiskCache:
    """Compiled objects of one backend: ``read(key)`` -> bytes or None, ``write(key, data)``.
    ``header()`` returns the bytes that every valid entry of this backend starts with."""

    def __init__(self, folder, suffix, header):
        self.folder_name, self.suffix, self.header = folder, suffix, header

    def folder(self):
        """The folder of entries, or None when there is none to use (checked once)."""
        root = cache_dir()
        folder = os.path.join(root, self.folder_name)
        if folder not in _folders:
            _folders[folder] = _usable(root, folder)
        return folder if _folders[folder] else None

    def path(self, key):
        folder = self.folder()
        return None if folder is None else os.path.join(folder, key + self.suffix)

    def holds(self, key):
        """Whether an entry of ``key`` is there (``read`` still checks that it is valid)."""
        path = self.path(key)
        return path is not None and os.path.exists(path)

    def read(self, key):
        """The bytes of a valid entry, or None (missing, foreign or corrupted)."""
        path = self.path(key)
        if path is None:
            return None
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            return None
        header = self.header()
        if len(data) < len(header) + 65 or not data.startswith(header + b"\n"):
            return None
        digest, obj = data[len(header) + 1:len(header) + 65], data[len(header) + 66:]
        if hashlib.sha256(obj).hexdigest().encode() != digest:
            return None
        try:
            os.utime(path)                  # the mtime says when the entry was last used
        except OSError:
            pass
        return obj

    def write(self, key, obj):
        path = self.path(key)
        if path is None:
            return
        folder = os.path.dirname(path)
        try:
            # a fresh, exclusively created name: nobody can have prepared it or write to it with us
            fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=folder)
        except OSError:
            return                          # a read-only cache folder only costs compile time
        data = self.header() + b"\n" + hashlib.sha256(obj).hexdigest().encode() + b"\n" + obj
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError:
            _unlink(tmp)
            return
        _written(folder, self.suffix, len(data))


def _foreign_writers(folder, holds_entries):
    """Why someone other than this user could change what ``folder`` holds, or None.  The folder
    of entries must be this user's and writable by nobody else; the folder above it may also be
    root's, or world-writable with the sticky bit (like /tmp), since it holds only that folder."""
    if not hasattr(os, "getuid"):
        return None
    st = os.stat(folder)
    if st.st_uid != os.getuid() and (holds_entries or st.st_uid != 0):
        return f"it is owned by another user (uid {st.st_uid})"
    if holds_entries and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "other users can write to it"
    if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
        return "every user can write to it"
    return None


def _usable(root, folder):
    """Create ``folder`` (private) if needed; False if that fails or others could plant code
    in it (warned)."""
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        problems = [(f, _foreign_writers(f, f == folder)) for f in (root, folder)]
    except OSError:
        return False                        # a read-only cache folder only costs compile time
    for where, reason in problems:
        if reason:
            warnings.warn(f"dynograph: not using the kernel disk cache in {where}: {reason}, and "
                          "loading a cached kernel runs its code. Kernels stay in memory only; make "
                          "the folder yours and writable only by you, or set DYNOGRAPH_CACHE_DIR.",
                          RuntimeWarning, stacklevel=6)
            return False
    return True


# folder -> its size in bytes as this process knows it: the last scan plus what it wrote since
_SIZES = {}


def _written(folder, suffix, size):
    """Account for an entry just written; scan the folder (and evict) on the process's first
    write to it and whenever the known size passes the cap.  Scanning on every write took tens
    of milliseconds per kernel once a folder held thousands of entries."""
    limit = size_limit()
    known = _SIZES.get(folder)
    if known is None or known + size > limit:
        _SIZES[folder] = _evict(folder, suffix, limit)
    else:
        _SIZES[folder] = known + size


def _evict(folder, suffix, limit):
    """Keep the folder under ``limit`` bytes: past it, delete the least recently used entries
    down to three quarters of it; temporaries of killed writers go too.  Returns the size of
    what is left."""
    entries, total, now = [], 0, time.time()
    try:
        with os.scandir(folder) as it:
            for e in it:
                st = e.stat(follow_symlinks=False)
                if e.name.endswith(".tmp") and now - st.st_mtime > STALE_TEMP_S:
                    _unlink(e.path)
                elif e.name.endswith(suffix):
                    entries.append((st.st_mtime, st.st_size, e.path))
                    total += st.st_size
    except OSError:
        return 0
    if total <= limit:
        return total
    for _, size, path in sorted(entries):
        if total <= limit * 3 // 4:
            break
        _unlink(path)
        total -= size
    return total


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:                         # another process removed it first
        pass
