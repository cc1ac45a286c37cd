"""Checkpoint save + load of a ~100 MB state dict (25 float32 tensors of 1M elements).

``dynograph`` writes its own format to a path: a temp file, fsync, then ``os.replace`` (the
fsync is the price of never leaving a truncated checkpoint; torch.save does not sync).
The ``_memory`` variant saves to and loads from a BytesIO, which shows the format's own cost.
The goal is at least 0.8x torch's speed (a ratio of at most 1.25).
"""
import atexit
import io
import os
import shutil
import tempfile

import numpy as np

import dynograph

from ..runner import optional_torch, workload

N_TENSORS, NUMEL = 25, 1_000_000


def _arrays():
    rng = np.random.default_rng(0)
    return {f"layer{i}.weight": rng.standard_normal(NUMEL, dtype=np.float32) for i in range(N_TENSORS)}


def _folder():
    folder = tempfile.mkdtemp(prefix="dynograph-bench-")
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _result(sd, key):
    return sd[key][:1000]


@workload("save_load_100mb", "save + load of a 100 MB state dict to a file (atomic, fsynced)", rtol=0, atol=0,
          tags=("io",))
def save_load_100mb():
    arrays = _arrays()
    key = next(iter(arrays))
    sd = {k: dynograph.from_numpy(a) for k, a in arrays.items()}
    folder = _folder()
    ours, ours_torch, theirs = (os.path.join(folder, n) for n in ("d.pt", "dt.pt", "t.pt"))

    def dyn():
        dynograph.save(sd, ours)
        return _result(dynograph.load(ours), key)

    def dyn_torch_format():
        dynograph.save(sd, ours_torch, format="torch")
        return _result(dynograph.load(ours_torch), key)

    fns = {"dynograph": dyn, "dynograph-torch-format": dyn_torch_format}
    torch = optional_torch()
    if torch is not None:
        tsd = {k: torch.from_numpy(a) for k, a in arrays.items()}

        def tch():
            torch.save(tsd, theirs)
            return _result(torch.load(theirs, weights_only=True), key)
        fns["torch"] = tch
    return fns


@workload("save_load_100mb_memory", "save + load of a 100 MB state dict through a BytesIO", rtol=0, atol=0,
          tags=("io",))
def save_load_100mb_memory():
    arrays = _arrays()
    key = next(iter(arrays))
    sd = {k: dynograph.from_numpy(a) for k, a in arrays.items()}

    def dyn():
        buf = io.BytesIO()
        dynograph.save(sd, buf)
        buf.seek(0)
        return _result(dynograph.load(buf), key)

    fns = {"dynograph": dyn}
    torch = optional_torch()
    if torch is not None:
        tsd = {k: torch.from_numpy(a) for k, a in arrays.items()}

        def tch():
            buf = io.BytesIO()
            torch.save(tsd, buf)
            buf.seek(0)
            return _result(torch.load(buf, weights_only=True), key)
        fns["torch"] = tch
    return fns
