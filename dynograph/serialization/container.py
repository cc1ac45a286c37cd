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
import threading
import zipfile
import zlib
from contextlib import contextmanager

import numpy as np

from .errors import CheckpointError

ALIGN = 64
_PAD_ID = 0x4246                 # "FB": the padding extra field torch writes too
_LOCAL_HEADER = struct.Struct("<4s22xHH")


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
    path = os.path.realpath(os.fspath(path))      # through a symlink, like open(path, "wb") would
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

_U32 = 0xFFFFFFFF                 # the 32-bit field value meaning "see the zip64 record"
ZIP64_AT = _U32                   # sizes and offsets from here on need zip64 (tests lower it)
_DOS_TIME, _DOS_DATE = 0, (0 << 9) | (1 << 5) | 1     # 1980-01-01: the same object saves to the
_CHUNK = 1 << 22                                      # same bytes


def _crc32(chunks, out):
    crc = 0
    for c in chunks:
        for i in range(0, len(c), _CHUNK):
            crc = zlib.crc32(c[i:i + _CHUNK], crc)
    out.append(crc)


class ZipWriter:
    """A zip archive of stored entries, each one's data aligned to ``ALIGN`` bytes from the start
    of the stream.  The CRC of a large entry is computed in a second thread while the data is
    written (zlib releases the GIL); on a seekable stream the local header is then patched, on
    a pipe the sizes and CRC follow the data in a data descriptor.
    """

    def __init__(self, fp):
        self.fp = fp
        self.seekable = bool(getattr(fp, "seekable", lambda: False)())
        self.pos = fp.tell() if self.seekable else 0
        self.start = self.pos
        self.entries = []           # (name, crc, size, offset, flags)

    def _put(self, data):
        self.fp.write(data)
        self.pos += len(data)

    def write(self, name, chunks, nbytes):
        """Write entry ``name`` from byte-like ``chunks`` (memoryviews) totalling ``nbytes``."""
        chunks = [memoryview(c).cast("B") for c in chunks]
        raw_name = name.encode()
        zip64 = nbytes >= ZIP64_AT
        flags = 0 if self.seekable else 0x08
        header_at = self.pos
        fixed = 30 + len(raw_name) + (20 if zip64 else 0) + 4
        pad = -(header_at + fixed) % ALIGN
        extra = struct.pack("<HH", _PAD_ID, pad) + bytes(pad)
        if zip64:
            extra = struct.pack("<HHQQ", 1, 16, nbytes, nbytes) + extra

        def local_header(crc):
            size = _U32 if zip64 else nbytes
            return struct.pack("<IHHHHHIIIHH", 0x04034B50, 45 if zip64 else 20, flags, 0, _DOS_TIME,
                               _DOS_DATE, crc, size, size, len(raw_name), len(extra)) + raw_name + extra

        crc_box = []
        worker = None
        if nbytes > _CHUNK:
            worker = threading.Thread(target=_crc32, args=(chunks, crc_box))
            worker.start()
        else:
            _crc32(chunks, crc_box)
        self._put(local_header(crc_box[0] if crc_box and not flags and worker is None else 0))
        try:
            for c in chunks:
                self._put(c)
        finally:
            if worker is not None:
                worker.join()
        crc = crc_box[0]
        if flags:
            self._put(struct.pack("<IIQQ" if zip64 else "<IIII", 0x08074B50, crc, nbytes, nbytes))
        elif worker is not None:
            self.fp.seek(header_at)
            self.fp.write(local_header(crc))
            self.fp.seek(self.pos)
        self.entries.append((raw_name, crc, nbytes, header_at - self.start, flags))

    def write_bytes(self, name, data):
        self.write(name, (data,), len(data))

    def close(self):
        """Write the central directory (zip64 records where sizes or counts need them)."""
        cd_at = self.pos - self.start
        for raw_name, crc, size, offset, flags in self.entries:
            extra = b""
            if size >= ZIP64_AT or offset >= ZIP64_AT:
                fields = ([size, size] if size >= ZIP64_AT else []) + \
                    ([offset] if offset >= ZIP64_AT else [])
                extra = struct.pack(f"<HH{len(fields)}Q", 1, 8 * len(fields), *fields)
            big = size >= ZIP64_AT
            self._put(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45 if extra else 20, flags, 0,
                                  _DOS_TIME, _DOS_DATE, crc, _U32 if big else size,
                                  _U32 if big else size, len(raw_name), len(extra), 0, 0, 0, 0,
                                  _U32 if offset >= ZIP64_AT else offset) + raw_name + extra)
        cd_size = self.pos - self.start - cd_at
        n = len(self.entries)
        if n >= 0xFFFF or cd_at >= ZIP64_AT or cd_size >= ZIP64_AT:
            end64_at = self.pos - self.start
            self._put(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, cd_size, cd_at))
            self._put(struct.pack("<IIQI", 0x07064B50, 0, end64_at, 1))
            n = min(n, 0xFFFF)
            cd_size, cd_at = (_U32 if v >= ZIP64_AT else v for v in (cd_size, cd_at))
        self._put(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, cd_size, cd_at, 0))


# ---------------------------------------------------------------- zip reading

def _not_a_zip(fp, size, name, what):
    fp.seek(0)
    head = fp.read(4)
    if head == b"\x80\x02\x8a\x0a":          # pickle protocol 2, then torch's legacy magic number
        raise CheckpointError(f"{name}: the file is a legacy PyTorch checkpoint (written with "
                              "_use_new_zipfile_serialization=False), which dynograph does not read; "
                              "re-save it with torch.save's default zip format")
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

    def array(self, entry, mapped=None, parts=None):
        """Entry ``entry`` as writable uint8 arrays, one per ``(begin, end)`` range of ``parts``
        (default: the whole entry, as one array): views of ``mapped`` (an mmap of the whole
        file) when given, else reads into fresh buffers (one per part, so a small tensor never
        keeps a large file's bytes alive)."""
        span = self.span(entry)
        if span is None:            # compressed by some other writer; deflate expands <= 1032x
            limit = 1032 * self.info(entry).compress_size + 1024
            whole = memoryview(bytearray(self.read(entry, limit=limit)))
            offset, size = 0, len(whole)
        else:
            offset, size = span
        parts = [(0, size)] if parts is None else parts
        if span is None or mapped is not None:
            source = whole if span is None else mapped
            # np.frombuffer over a memoryview: the array's base chain stops at its own part
            return [np.frombuffer(memoryview(source)[offset + b:offset + e], np.uint8) for b, e in parts]
        return [self._read_into(entry, offset + b, e - b) for b, e in parts]

    def _read_into(self, entry, offset, size):
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
