"""Files and zip archives: where checkpoints are written to and read from.

- ``writing(f)``: a binary stream for a path (written atomically: temp file in the same
  folder, fsync, ``os.replace``) or for a caller's file object.
- ``reading(f)``: a seekable binary stream and its size.
- ``ZipWriter``: stored (uncompressed) entries whose data starts on a 64-byte boundary of the
  file, so loaders (ours, torch's mmap) can view tensors in place.
- ``ZipReader``: entries of an untrusted archive, every size and offset checked against
  the file before anything is read or allocated.
"""
import io
import os
import struct
import tempfile
import zipfile
from contextlib import contextmanager

import numpy as np

from .errors import CheckpointError

ALIGN = 64
_PAD_ID = 0x4246                 # "FB": the padding extra field torch writes too
_LOCAL_HEADER = struct.Struct("<4s22xHH")
_DATE = (1980, 1, 1, 0, 0, 0)   # fixed: the same object saves to the same bytes


def is_path(f):
    return isinstance(f, (str, os.PathLike))


# ---------------------------------------------------------------- files

def _new_file_mode(path):
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextmanager
def _atomic(path):
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fp:
            yield fp
            fp.flush()
            os.fsync(fp.fileno())
        os.chmod(tmp, _new_file_mode(path))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_folder(folder)


def _fsync_folder(folder):
    # makes the rename itself durable; not every platform can open a folder
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def writing(f):
    """A binary stream for ``f``: a path (replaced atomically on success) or a file object."""
    if is_path(f):
        with _atomic(f) as fp:
            yield fp
    elif hasattr(f, "write"):
        yield f
        if hasattr(f, "flush"):
            f.flush()
    else:
        raise TypeError(f"expected a path (str or os.PathLike) or a binary file object to save to, "
                        f"got {type(f).__name__}")


@contextmanager
def reading(f):
    """``(stream, name)`` for ``f``: a path or a readable binary file object (read whole if it
    cannot seek)."""
    if is_path(f):
        with open(f, "rb") as fp:
            yield fp, os.fspath(f)
        return
    if not hasattr(f, "read"):
        raise TypeError(f"expected a path (str or os.PathLike) or a binary file object to load from, "
                        f"got {type(f).__name__}")
    seekable = getattr(f, "seekable", None)
    if seekable is None or not seekable():
        f = io.BytesIO(f.read())
    yield f, getattr(f, "name", "<file object>")


def file_size(fp):
    pos = fp.tell()
    size = fp.seek(0, os.SEEK_END)
    fp.seek(pos)
    return size


# ---------------------------------------------------------------- zip writing

class ZipWriter:
    """Stored entries, each one's data aligned to ``ALIGN`` bytes from the start of the stream."""

    def __init__(self, fp):
        self.fp = fp
        self.zf = zipfile.ZipFile(fp, "w", zipfile.ZIP_STORED, allowZip64=True)

    def write(self, name, chunks, nbytes):
        """Write entry ``name`` from byte-like ``chunks`` totalling ``nbytes``."""
        info = zipfile.ZipInfo(name, date_time=_DATE)
        info.compress_type = zipfile.ZIP_STORED
        info.file_size = nbytes
        zip64 = nbytes * 1.05 > zipfile.ZIP64_LIMIT        # zipfile's own rule, see _open_to_write
        header_end = self.zf.fp.tell() + 30 + len(name.encode()) + (20 if zip64 else 0) + 4
        pad = -header_end % ALIGN
        info.extra = struct.pack("<HH", _PAD_ID, pad) + bytes(pad)
        with self.zf.open(info, "w", force_zip64=zip64) as out:
            for chunk in chunks:
                out.write(chunk)

    def write_bytes(self, name, data):
        self.write(name, (data,), len(data))

    def close(self):
        self.zf.close()


# ---------------------------------------------------------------- zip reading

def _not_a_zip(fp, size, name, what):
    fp.seek(0)
    head = fp.read(4)
    if head == b"PK\x03\x04":
        raise CheckpointError(f"{name}: the file is truncated at byte {size} (its zip directory, "
                              f"at the end of the file, is missing or damaged)")
    raise CheckpointError(f"{name}: the file is not {what} (not a zip archive)")


class ZipReader:
    """The entries of an untrusted zip archive; every failure is a ``CheckpointError``."""

    def __init__(self, fp, name, what="a dynograph checkpoint"):
        self.fp = fp
        self.name = name
        self.size = file_size(fp)
        try:
            self.zf = zipfile.ZipFile(fp)
            infos = self.zf.infolist()
        except zipfile.BadZipFile:
            _not_a_zip(fp, self.size, name, what)
        except Exception as e:          # zipfile reports damage with many exception types
            raise CheckpointError(f"{name}: damaged zip archive ({type(e).__name__}: {e})") from None
        self.infos = {}
        for info in infos:
            if info.filename in self.infos:
                raise CheckpointError(f"{name}: the archive holds entry {info.filename!r} twice")
            self.infos[info.filename] = info

    def names(self):
        return list(self.infos)

    def info(self, entry):
        try:
            return self.infos[entry]
        except KeyError:
            raise CheckpointError(f"{self.name}: the archive has no entry {entry!r}") from None

    def read(self, entry, limit=1 << 30):
        """The bytes of a small entry (CRC checked)."""
        info = self.info(entry)
        if info.file_size > min(limit, self.size) and info.compress_type == zipfile.ZIP_STORED:
            self._truncated(entry, info.file_size)
        if info.file_size > limit:
            raise CheckpointError(f"{self.name}: entry {entry!r} is {info.file_size} bytes, more "
                                  f"than the {limit} allowed")
        try:
            return self.zf.read(info)
        except Exception as e:
            raise CheckpointError(f"{self.name}: entry {entry!r} is damaged ({type(e).__name__}: "
                                  f"{e})") from None

    def _truncated(self, entry, end):
        raise CheckpointError(f"{self.name}: the file is truncated at byte {self.size}: entry "
                              f"{entry!r} needs bytes up to {end}")

    def span(self, entry):
        """``(offset, size)`` of a stored entry's data in the file, checked against the file."""
        info = self.info(entry)
        if info.compress_type != zipfile.ZIP_STORED:
            return None
        start = info.header_offset
        if start + 30 > self.size:
            self._truncated(entry, start + 30)
        self.fp.seek(start)
        magic, name_len, extra_len = _LOCAL_HEADER.unpack(self.fp.read(30))
        if magic != b"PK\x03\x04":
            raise CheckpointError(f"{self.name}: entry {entry!r} has no local header at byte {start}")
        offset = start + 30 + name_len + extra_len
        if offset + info.file_size > self.size:
            self._truncated(entry, offset + info.file_size)
        return offset, info.file_size

    def array(self, entry, mapped=None):
        """Entry ``entry`` as a writable uint8 array: a view of ``mapped`` (an mmap of the whole
        file) when given, else one read into a fresh buffer."""
        span = self.span(entry)
        if span is None:                                # compressed by some other writer
            return np.frombuffer(bytearray(self.read(entry, limit=1 << 62)), np.uint8)
        offset, size = span
        if mapped is not None:
            return np.frombuffer(mapped, np.uint8, size, offset)
        out = np.empty(size, np.uint8)
        self.fp.seek(offset)
        view = memoryview(out)
        got = 0
        while got < size:
            n = self.fp.readinto(view[got:])
            if not n:
                self._truncated(entry, offset + size)
            got += n
        return out


def map_file(fp):
    """A copy-on-write memory map of the whole file (tensors stay writable, the file unchanged)."""
    import mmap
    try:
        fileno = fp.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        raise ValueError("mmap=True needs a file on disk (a path or an open file), not an in-memory "
                         "buffer") from None
    if file_size(fp) == 0:
        raise CheckpointError("the file is empty")
    return mmap.mmap(fileno, 0, access=mmap.ACCESS_COPY)
