"""Dataset downloads, served by a local HTTP server on 127.0.0.1: mirrors, MD5 checks, extraction.

No test here reaches the internet: every URL is overridden through the class attributes
(`mirrors`/`resources` for MNIST, `url`/`tgz_md5` for CIFAR) as torchvision users do."""
import functools
import http.server
import io
import os
import shutil
import tarfile
import threading
import zipfile

import pytest

from dynograph.vision import datasets
from dynograph.vision.datasets.utils import download_url, extract_archive
from vision_dataset_files import CIFAR10_CLASSES, md5, patch_cifar10_checksums, write_cifar, write_mnist_raw

pytest.importorskip("PIL")


class _Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output quiet
        pass

    def do_GET(self):
        self.server.requests.append(self.path)
        super().do_GET()


@pytest.fixture
def server(tmp_path, monkeypatch):
    """(base URL, served folder, list of requested paths); stopped at the end of the test."""
    for name in ("no_proxy", "NO_PROXY"):  # a proxy set in the environment must not see these requests
        monkeypatch.setenv(name, "127.0.0.1")
    served = tmp_path / "served"
    served.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Handler, directory=str(served)))
    httpd.requests = []
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/", served, httpd.requests
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def serve_mnist(monkeypatch, served, mirrors, wrong_md5_for=None):
    written = write_mnist_raw(served, gz=True)
    resources = [(name, "0" * 32 if name == wrong_md5_for else md5(served / name))
                 for name in sorted(os.listdir(served))]
    monkeypatch.setattr(datasets.MNIST, "mirrors", mirrors)
    monkeypatch.setattr(datasets.MNIST, "resources", resources)
    return written


def test_mnist_download_tries_mirrors_and_skips_verified_files(tmp_path, monkeypatch, server):
    base, served, requests = server
    written = serve_mnist(monkeypatch, served, [base + "gone/", base])
    root = tmp_path / "data"
    ds = datasets.MNIST(root, download=True)
    assert len(ds) == 5
    raw = sorted(os.listdir(root / "MNIST" / "raw"))
    assert raw == sorted(list(written) + [name + ".gz" for name in written])
    assert requests[:2] == ["/gone/t10k-images-idx3-ubyte.gz", "/t10k-images-idx3-ubyte.gz"]
    assert len(requests) == 8  # each file: a 404 from the first mirror, then the second one

    requests.clear()
    datasets.MNIST(root, train=False, download=True)
    assert requests == []  # everything present: nothing downloaded again

    os.remove(root / "MNIST" / "raw" / "train-images-idx3-ubyte")  # the .gz is still there and verified
    datasets.MNIST(root, download=True)
    assert requests == []


def test_download_checksum_mismatch_is_a_clear_error(tmp_path, monkeypatch, server):
    base, served, requests = server
    serve_mnist(monkeypatch, served, [base, base + "other/"], wrong_md5_for="train-labels-idx1-ubyte.gz")
    root = tmp_path / "data"
    with pytest.raises(RuntimeError, match=r"train-labels-idx1-ubyte.gz is corrupted: its MD5 checksum is "
                                           r"[0-9a-f]{32}, expected 0{32}"):
        datasets.MNIST(root, download=True)
    assert requests.count("/train-labels-idx1-ubyte.gz") == 1 and not any("other" in r for r in requests)
    assert "train-labels-idx1-ubyte.gz" not in os.listdir(root / "MNIST" / "raw")
    assert not any(name.endswith(".part") for name in os.listdir(root / "MNIST" / "raw"))
    with pytest.raises(RuntimeError, match="Dataset not found or corrupted"):
        datasets.MNIST(root)


def test_download_fails_clearly_when_no_mirror_has_the_file(tmp_path, monkeypatch, server):
    base, served, _ = server
    serve_mnist(monkeypatch, served, [base + "a/", base + "b/"])
    with pytest.raises(RuntimeError, match=r"Error downloading t10k-images-idx3-ubyte.gz:\n"
                                           r".*/a/t10k-images-idx3-ubyte.gz: HTTP Error 404"):
        datasets.MNIST(tmp_path, download=True)


def test_cifar10_download_extracts_the_archive(tmp_path, monkeypatch, server):
    base, served, requests = server
    build = tmp_path / "build"
    md5s, contents = write_cifar(build / "cifar-10-batches-py", {"data_batch_1": 2, "test_batch": 3},
                                 "batches.meta", "label_names", CIFAR10_CLASSES)
    patch_cifar10_checksums(monkeypatch, datasets.CIFAR10, md5s, ["data_batch_1"], ["test_batch"],
                            "batches.meta", "label_names")
    with tarfile.open(served / "cifar-10-python.tar.gz", "w:gz") as tar:
        tar.add(build / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    monkeypatch.setattr(datasets.CIFAR10, "url", base + "cifar-10-python.tar.gz")
    monkeypatch.setattr(datasets.CIFAR10, "tgz_md5", md5(served / "cifar-10-python.tar.gz"))

    root = tmp_path / "data"
    ds = datasets.CIFAR10(root, train=False, download=True)
    assert ds.targets == contents["test_batch"][1] and ds.classes == CIFAR10_CLASSES
    assert requests == ["/cifar-10-python.tar.gz"]
    datasets.CIFAR10(root, download=True)
    assert requests == ["/cifar-10-python.tar.gz"]  # verified batches: no second download

    shutil.rmtree(root)
    monkeypatch.setattr(datasets.CIFAR10, "tgz_md5", "f" * 32)
    with pytest.raises(RuntimeError, match="cifar-10-python.tar.gz is corrupted"):
        datasets.CIFAR10(root, download=True)


def test_download_url_keeps_a_verified_file(tmp_path, server):
    base, served, requests = server
    (served / "f.bin").write_bytes(b"abc")
    download_url(base + "f.bin", tmp_path / "d", md5=md5(served / "f.bin"))
    download_url(base + "f.bin", tmp_path / "d", md5=md5(served / "f.bin"))
    assert requests == ["/f.bin"] and (tmp_path / "d" / "f.bin").read_bytes() == b"abc"


def test_extract_zip_and_refuse_paths_outside(tmp_path):
    with zipfile.ZipFile(tmp_path / "a.zip", "w") as z:
        z.writestr("folder/x.txt", "x")
    assert extract_archive(tmp_path / "a.zip", tmp_path / "out") == str(tmp_path / "out")
    assert (tmp_path / "out" / "folder" / "x.txt").read_text() == "x"

    with tarfile.open(tmp_path / "evil.tar.gz", "w:gz") as tar:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"!"))
    with pytest.raises(Exception, match="escaped.txt"):
        extract_archive(tmp_path / "evil.tar.gz", tmp_path / "inner")
    assert not (tmp_path / "escaped.txt").exists()

    with pytest.raises(RuntimeError, match="unknown archive type"):
        extract_archive(tmp_path / "file.rar")
