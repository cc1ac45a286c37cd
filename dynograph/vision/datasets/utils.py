"""Downloading, checksums and archive extraction, with torchvision's function names.

Downloads go to a temporary file that is renamed only after its MD5 checksum matches, so an
interrupted or corrupted download never looks like a finished one.
"""
import gzip
import hashlib
import os
import shutil
import tarfile
import urllib.request
import zipfile

USER_AGENT = "dynograph"
# seconds without data before a download fails (a stalled mirror must not hang forever)
TIMEOUT = 60
NOT_FOUND = "Dataset not found or corrupted. You can use download=True to download it"


def calculate_md5(fpath, chunk_size=1024 * 1024):
    md5 = hashlib.md5(usedforsecurity=False)
    with open(fpath, "rb") as f:
        for chunk in iter(lambda: f.read(chunk_size), b""):
            md5.update(chunk)
    return md5.hexdigest()


def check_md5(fpath, md5, **kwargs):
    return md5 == calculate_md5(fpath, **kwargs)


def check_integrity(fpath, md5=None):
    """True when the file exists and, if `md5` is given, has that checksum."""
    if not os.path.isfile(fpath):
        return False
    return md5 is None or check_md5(fpath, md5)


def download_url(url, root, filename=None, md5=None):
    """Downloads `url` to root/filename, unless a verified copy is already there.

    Raises urllib.error.URLError when the server cannot be reached or answers with an error, and
    RuntimeError when the downloaded file's checksum differs from `md5`.
    """
    root = os.path.expanduser(os.fspath(root))
    fpath = os.path.join(root, filename or os.path.basename(url))
    os.makedirs(root, exist_ok=True)
    if check_integrity(fpath, md5):
        return
    partial = fpath + ".part"
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response, open(partial, "wb") as out:
            shutil.copyfileobj(response, out)
        if md5 is not None:
            got = calculate_md5(partial)
            if got != md5:
                raise RuntimeError(f"The file downloaded from {url} is corrupted: its MD5 checksum is {got}, "
                                   f"expected {md5}. Nothing was kept; check the URL or try again later.")
        os.replace(partial, fpath)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def _inside(directory, member_path):
    directory = os.path.realpath(directory)
    target = os.path.realpath(os.path.join(directory, member_path))
    return os.path.commonpath([directory, target]) == directory


def _extract_tar(from_path, to_path):
    with tarfile.open(from_path, "r:*") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(to_path, filter="data")
            return
        # older Pythons lack extraction filters: refuse members that would land outside to_path
        for member in tar.getmembers():
            if not _inside(to_path, member.name) or member.issym() or member.islnk():
                raise RuntimeError(f"{from_path}: refusing to extract {member.name!r} outside {to_path}")
        tar.extractall(to_path)


def _extract_zip(from_path, to_path):
    with zipfile.ZipFile(from_path) as archive:
        archive.extractall(to_path)  # zipfile drops absolute paths and '..' components itself


def _extract_gz(from_path, to_path):
    """A lone .gz holds one file: it is written next to the others without the .gz suffix."""
    target = os.path.join(to_path, os.path.basename(from_path)[: -len(".gz")])
    with gzip.open(from_path, "rb") as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst)


_EXTRACTORS = [(".tar.gz", _extract_tar), (".tgz", _extract_tar), (".tar", _extract_tar),
               (".tar.bz2", _extract_tar), (".tar.xz", _extract_tar), (".zip", _extract_zip),
               (".gz", _extract_gz)]


def extract_archive(from_path, to_path=None, remove_finished=False):
    """Extracts a .tar(.gz/.bz2/.xz), .tgz, .zip or single-file .gz archive; returns `to_path`."""
    from_path = os.fspath(from_path)
    to_path = os.path.dirname(from_path) if to_path is None else os.fspath(to_path)
    for suffix, extract in _EXTRACTORS:
        if from_path.lower().endswith(suffix):
            os.makedirs(to_path, exist_ok=True)
            extract(from_path, to_path)
            break
    else:
        raise RuntimeError(f"{from_path}: unknown archive type; supported are "
                           + ", ".join(suffix for suffix, _ in _EXTRACTORS))
    if remove_finished:
        os.remove(from_path)
    return to_path


def download_and_extract_archive(url, download_root, extract_root=None, filename=None, md5=None,
                                 remove_finished=False):
    download_root = os.path.expanduser(os.fspath(download_root))
    extract_root = download_root if extract_root is None else extract_root
    filename = filename or os.path.basename(url)
    download_url(url, download_root, filename, md5)
    extract_archive(os.path.join(download_root, filename), extract_root, remove_finished)


def verify_str_arg(value, arg=None, valid_values=None):
    """Returns `value` if it is a string among `valid_values`, else a ValueError naming them."""
    if not isinstance(value, str):
        raise ValueError(f"Expected type str for argument {arg}, but got type {type(value).__name__}.")
    if valid_values is not None and value not in valid_values:
        raise ValueError(f"Unknown value '{value}' for argument {arg}. "
                         f"Valid values are {{{', '.join(map(str, valid_values))}}}.")
    return value
