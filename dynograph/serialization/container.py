"""Files and zip archives: where checkpoints are written to and read from.

- ``writing(f)``: a binary stream for a path (written atomically: temp file in the same
  folder, fsync, ``os.replace``) or for a caller's file object.  Temporaries left by a save
  that was killed are removed by the next save of the same file.
- ``reading(f)``: a seekable binary stream and its size; a path must name a regular file (a
  device such as /dev/zero, a fifo or a directory is refused before anything is read).
- ``ZipWriter``: stored (uncompressed) entries whose data starts on a 64-byte boundary of the
  file, so loaders (ours, torch's mmap) can view tensors in place.
- ``ZipReader``: entries of an untrusted archive, every size and offset checked against
  the file and the caller's metadata before anything is read or allocated; deflated entries
  (an archive re-compressed by a zip tool) are inflated no further than their declared size;
  every entry's CRC-32 is checked as it is read.
"""
import errno
import hashlib
import io
import os
import re
import socket
import stat
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


# Temporaries are named ".<target>.<host>-<pid>.<random>.tmp": the next save of the target can
# tell which ones belong to a writer that died (same host, process gone) and remove them, while
# a concurrent save by a live process keeps its own.
_HOST = hashlib.sha1(socket.gethostname().encode()).hexdigest()[:8]


def _temp_prefix(base):
    return f".{base}.{_HOST}-"


def _alive(pid):
    try:
        os.kill(pid, 0)                 # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except OSError:                     # e.g. another user's process: it exists
        return True
    return True


def _remove_stale_temps(folder, base):
    """Delete the temporaries of ``base`` whose writer, a process on this host, is gone."""
    if os.name != "posix":              # os.kill(pid, 0) is no liveness test elsewhere
        return
    pattern = re.compile(re.escape(_temp_prefix(base)) + r"(\d+)\.\w+\.tmp")
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        m = pattern.fullmatch(name)
        if m and not _alive(int(m.group(1))):
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass


@contextmanager
def _atomic(path):
    path = os.path.realpath(os.fspath(path))      # through a symlink, like open(path, "wb") would
    folder, base = os.path.split(path)
    _remove_stale_temps(folder, base)
    fd, tmp = tempfile.mkstemp(prefix=f"{_temp_prefix(base)}{os.getpid()}.", suffix=".tmp", dir=folder)
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


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a fifo"), (stat.S_ISSOCK, "a socket"))


def _open_regular(path, error):
    """``path`` opened for reading if it is a regular file.  A device (/dev/zero) or a fifo
    would be read until memory runs out or block forever; the check is made on the opened
    descriptor, so a file swapped for a symlink in between cannot slip through."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))   # opening a fifo must not block
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):          # what open() and torch.load raise
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        kind = next((k for test, k in _KINDS if test(mode)), "not a regular file")
        raise error(f"{os.fspath(path)}: the path names {kind}, not a regular file; checkpoints "
                    "are read from regular files (or from file objects)")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


@contextmanager
def reading(f, error=CheckpointError):
    """``(stream, name)`` for ``f``: a path of a regular file (anything else raises ``error``)
    or a readable binary file object (read whole if it cannot seek)."""
    if is_path(f):
        with _open_regular(f, error) as fp:
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


_MAX_RATIO = 1032                # deflate's best ratio: a declared size beyond it is a lie
_READ_CHUNK = 1 << 20            # CRC-32 each piece while it is still in the CPU cache


class ZipReader:
    """The entries of an untrusted zip archive; every failure is a ``CheckpointError``.

    ``verify_crc`` (default on): check each entry's CRC-32 as it is read (a memory-mapped
    entry is not read, so not checked).  The cost is measured in docs/serialization.md.
    """

    def __init__(self, fp, name, what="a dynograph checkpoint", verify_crc=True):
        self.fp = fp
        self.name = name
        self.verify_crc = verify_crc
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

    def _fail(self, entry, what):
        raise CheckpointError(f"{self.name}: entry {entry!r} {what}")

    def _truncated(self, entry, end):
        raise CheckpointError(f"{self.name}: the file is truncated at byte {self.size}: entry "
                              f"{entry!r} needs bytes up to {end}")

    def _data_offset(self, entry):
        """Where the entry's (stored or compressed) data starts, checked against the file."""
        info = self.info(entry)
        start = info.header_offset
        if start < 0:                   # zipfile derives it from the directory's position
            self._fail(entry, f"has a local header offset before the start of the file ({start})")
        if start + 30 > self.size:
            self._truncated(entry, start + 30)
        self.fp.seek(start)
        magic, name_len, extra_len = _LOCAL_HEADER.unpack(self.fp.read(30))
        if magic != b"PK\x03\x04":
            self._fail(entry, f"has no local header at byte {start}")
        offset = start + 30 + name_len + extra_len
        if offset + info.compress_size > self.size:
            self._truncated(entry, offset + info.compress_size)
        return offset

    def span(self, entry):
        """``(offset, size)`` of a stored entry's data in the file, checked against the file;
        None for a compressed entry."""
        info = self.info(entry)
        if info.compress_type != zipfile.ZIP_STORED:
            return None
        if info.compress_size != info.file_size:
            self._fail(entry, f"is stored, yet its sizes differ ({info.compress_size} in the file, "
                              f"{info.file_size} declared)")
        return self._data_offset(entry), info.file_size

    def size_of(self, entry):
        """The entry's declared size, once checked that the file can hold it: stored data lies
        inside the file, deflated data can inflate to it."""
        info = self.info(entry)
        if self.span(entry) is None:
            self._check_deflated(entry, info)
        return info.file_size

    def _check_deflated(self, entry, info):
        if info.compress_type != zipfile.ZIP_DEFLATED:
            self._fail(entry, f"uses zip compression method {info.compress_type}; dynograph reads "
                              "stored and deflated entries only")
        if info.file_size > _MAX_RATIO * info.compress_size + 1024:
            self._fail(entry, f"declares {info.file_size} bytes, more than its {info.compress_size} "
                              "deflated bytes can hold")

    def read(self, entry, limit=1 << 30):
        """The bytes of a small entry (CRC checked)."""
        size = self.size_of(entry)
        if size > limit:
            self._fail(entry, f"is {size} bytes, more than the {limit} allowed")
        return self.array(entry)[0].tobytes()

    def array(self, entry, mapped=None, parts=None, expected=None):
        """Entry ``entry`` as writable uint8 arrays, one per ``(begin, end)`` range of ``parts``
        (default: the whole entry, as one array): views of ``mapped`` (an mmap of the whole
        file) when given, else reads into fresh buffers (one per part, so a small tensor never
        keeps a large file's bytes alive).  ``expected``: the size the caller's metadata gives
        the entry; a deflated entry must declare exactly that and is never inflated beyond it.
        """
        size = self.size_of(entry)
        expected = size if expected is None else expected
        if size < expected:
            self._fail(entry, f"holds {size} bytes, the checkpoint's metadata declares {expected}")
        parts = [(0, size)] if parts is None else parts
        span = self.span(entry)
        if span is None:
            if size != expected:
                self._fail(entry, f"declares {size} bytes, the checkpoint's metadata {expected}")
            mapped, offset = self._inflate(entry, size), 0
        else:
            offset = span[0]
        if mapped is not None:
            # np.frombuffer over a memoryview: the array's base chain stops at its own part
            return [np.frombuffer(memoryview(mapped)[offset + b:offset + e], np.uint8) for b, e in parts]
        return self._read_parts(entry, offset, size, parts)

    def _check_crc(self, entry, crc):
        expected = self.info(entry).CRC
        if self.verify_crc and crc != expected:
            self._fail(entry, f"is corrupted: its CRC-32 is {crc:08x}, the archive records "
                              f"{expected:08x}")

    def _read_parts(self, entry, offset, size, parts):
        """Read the ``parts`` of a stored entry, and the bytes between them for its CRC."""
        out = [None] * len(parts)
        crc, pos = 0, 0
        for i in sorted(range(len(parts)), key=lambda i: parts[i]):
            begin, end = parts[i]
            crc = self._skip(entry, offset + pos, begin - pos, crc)
            out[i], crc = self._read_into(entry, offset + begin, end - begin, crc)
            pos = max(pos, end)
        crc = self._skip(entry, offset + pos, size - pos, crc)
        self._check_crc(entry, crc)
        return out

    def _skip(self, entry, offset, size, crc):
        """Bytes no part needs (alignment padding): read for the CRC only, a chunk at a time."""
        if not self.verify_crc:
            return crc
        for at in range(offset, offset + size, _READ_CHUNK):
            crc = self._read_into(entry, at, min(_READ_CHUNK, offset + size - at), crc)[1]
        return crc

    def _read_into(self, entry, offset, size, crc):
        out = np.empty(size, np.uint8)
        self.fp.seek(offset)
        view = memoryview(out)
        got = 0
        while got < size:
            n = self.fp.readinto(view[got:got + _READ_CHUNK])
            if not n:
                self._truncated(entry, offset + size)
            if self.verify_crc:
                crc = zlib.crc32(view[got:got + n], crc)
            got += n
        return out, crc

    def _inflate(self, entry, size):
        """A deflated entry's ``size`` bytes, streamed: inflating stops at ``size``, so a zip
        bomb fails after allocating only what the metadata declared."""
        info = self.info(entry)
        self.fp.seek(self._data_offset(entry))
        out = np.empty(size, np.uint8)
        view = memoryview(out)
        z = zlib.decompressobj(-zlib.MAX_WBITS)             # raw deflate, as zip stores it
        got, left = 0, info.compress_size
        try:
            while not z.eof:
                data = z.unconsumed_tail
                if not data and left:
                    data = self.fp.read(min(left, _READ_CHUNK))
                    left -= len(data)
                if not data:
                    break
                piece = z.decompress(data, size - got + 1)   # one byte more shows an overflow
                if got + len(piece) > size:
                    self._fail(entry, f"inflates to more than the {size} bytes it declares")
                view[got:got + len(piece)] = piece
                got += len(piece)
        except zlib.error as e:
            self._fail(entry, f"is damaged (deflate: {e})")
        if got != size or not z.eof:
            self._fail(entry, f"inflates to {got} bytes{'' if z.eof else ' (the stream is cut)'}, "
                              f"it declares {size}")
        self._check_crc(entry, zlib.crc32(out) if self.verify_crc else info.CRC)
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
