"""Embeddings for TensorBoard's projector: TSV files and a ``projector_config.pbtxt`` per log folder."""
import math
import os

import numpy as np

from .summary import make_grid, make_np


def _encode(tag):
    """A tag as one folder name: '%', '/' and '\\' escaped as %xx, as torch does."""
    return tag.replace("%", "%25").replace("/", "%2f").replace("\\", "%5c")


def add_embedding(logdir, config, mat, metadata, label_img, global_step, tag, metadata_header):
    """Write the files of one embedding; returns the projector config with it added."""
    from google.protobuf import text_format
    from tensorboard.plugins.projector.projector_config_pb2 import ProjectorConfig

    mat = make_np(mat)
    if mat.ndim != 2:
        raise AssertionError("mat should be 2D, where mat.size(0) is the number of data points")
    step = 0 if global_step is None else global_step
    subdir = f"{str(step).zfill(5)}/{_encode(tag)}"
    save_path = os.path.join(logdir, subdir)
    if os.path.isdir(save_path):
        print("warning: Embedding dir exists, did you set global_step for add_embedding()?")
    elif os.path.exists(save_path):
        raise NotADirectoryError(f"Path: `{save_path}` exists, but is a file. Cannot proceed.")
    os.makedirs(save_path, exist_ok=True)

    config = config or ProjectorConfig()
    info = config.embeddings.add(tensor_name=f"{tag}:{str(step).zfill(5)}",
                                 tensor_path=f"{subdir}/tensors.tsv")
    if metadata is not None:
        if mat.shape[0] != len(metadata):
            raise AssertionError("#labels should equal with #data points")
        _write_tsv(metadata, save_path, metadata_header)
        info.metadata_path = f"{subdir}/metadata.tsv"
    if label_img is not None:
        label_img = make_np(label_img)
        if mat.shape[0] != label_img.shape[0]:
            raise AssertionError("#images should equal with #data points")
        _write_sprite(label_img, save_path)
        info.sprite.image_path = f"{subdir}/sprite.png"
        info.sprite.single_image_dim.extend([label_img.shape[3], label_img.shape[2]])
    with open(os.path.join(save_path, "tensors.tsv"), "w") as f:
        f.writelines("\t".join(str(v.item()) for v in row) + "\n" for row in mat)
    with open(os.path.join(logdir, "projector_config.pbtxt"), "w") as f:
        f.write(text_format.MessageToString(config))
    return config


def _write_tsv(metadata, save_path, metadata_header):
    if metadata_header:
        if len(metadata_header) != len(metadata[0]):
            raise AssertionError("len of header must be equal to the number of columns in metadata")
        lines = ["\t".join(str(e) for e in row) for row in [metadata_header] + list(metadata)]
    else:
        lines = [str(x) for x in metadata]
    with open(os.path.join(save_path, "metadata.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")


def _write_sprite(label_img, save_path):
    """All label images in one square PNG, the sprite sheet the projector cuts them from."""
    from PIL import Image
    grid = make_grid(label_img, ncols=math.ceil(label_img.shape[0] ** 0.5)).transpose(1, 2, 0)
    square = np.zeros((grid.shape[1], grid.shape[1], 3))
    square[:grid.shape[0]] = grid
    Image.fromarray(np.uint8((square * 255).clip(0, 255))).save(os.path.join(save_path, "sprite.png"))
