"""Writers for tiny dataset files in the exact on-disk formats (shared by the dataset tests)."""
import gzip
import hashlib
import os
import pickle

import numpy as np

CIFAR10_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def md5(path):
    with open(path, "rb") as f:
        return hashlib.md5(f.read()).hexdigest()


def write_idx(path, array):
    """An idx file: magic 0x0000 <type 0x08 = ubyte> <ndim>, big-endian sizes, then the bytes."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    with open(path, "wb") as f:
        f.write(header + array.tobytes())


def mnist_arrays(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8), rng.integers(0, 10, size=n).astype(np.uint8)


def write_mnist_raw(raw, n_train=5, n_test=3, gz=False):
    """raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte (or .gz); returns {file name: array}."""
    os.makedirs(raw, exist_ok=True)
    written = {}
    for prefix, n, seed in (("train", n_train, 0), ("t10k", n_test, 1)):
        images, labels = mnist_arrays(n, seed)
        for kind, array in (("images-idx3", images), ("labels-idx1", labels)):
            name = f"{prefix}-{kind}-ubyte"
            write_idx(os.path.join(raw, name), array)
            if gz:
                with open(os.path.join(raw, name), "rb") as src, gzip.open(os.path.join(raw, name + ".gz"), "wb") as dst:
                    dst.write(src.read())
                os.remove(os.path.join(raw, name))
            written[name] = array
    return written


def write_pickle(path, obj):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)  # the originals are Python 2 cPickle, protocol 2


def write_cifar(folder, batches, meta_name, meta_key, classes, label_key="labels", seed=0):
    """CIFAR python batches: {batch name: n images}; returns ({name: md5}, {name: (data, labels)})."""
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    md5s, contents = {}, {}
    for name, n in batches.items():
        data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        labels = [int(x) for x in rng.integers(0, len(classes), size=n)]
        entry = {"batch_label": f"{name} of 1", label_key: labels, "data": data,
                 "filenames": [f"img_{i}.png" for i in range(n)]}
        if label_key == "fine_labels":
            entry["coarse_labels"] = [x // 5 for x in labels]
        write_pickle(os.path.join(folder, name), entry)
        md5s[name], contents[name] = md5(os.path.join(folder, name)), (data, labels)
    write_pickle(os.path.join(folder, meta_name), {meta_key: classes, "num_cases_per_batch": 10})
    md5s[meta_name] = md5(os.path.join(folder, meta_name))
    return md5s, contents


def patch_cifar10_checksums(monkeypatch, cls, md5s, train_names, test_names, meta_name, meta_key):
    monkeypatch.setattr(cls, "train_list", [[n, md5s[n]] for n in train_names])
    monkeypatch.setattr(cls, "test_list", [[n, md5s[n]] for n in test_names])
    monkeypatch.setattr(cls, "meta", {"filename": meta_name, "key": meta_key, "md5": md5s[meta_name]})
