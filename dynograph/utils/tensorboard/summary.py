"""Summary protocol buffers for each kind of data, built the way torch.utils.tensorboard builds them.

Every function takes tensors, numpy arrays or Python numbers and returns a ``Summary`` that a
``FileWriter`` wraps in an event.
"""
import io

import numpy as np
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.plugins.text.plugin_data_pb2 import TextPluginData


def make_np(x):
    """A numpy array of a tensor, an array or a Python number."""
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, (int, float, bool, np.generic)):
        return np.array([x])
    from dynograph._tensor import Tensor
    if isinstance(x, Tensor):
        return x.detach().cpu().numpy()
    raise NotImplementedError(f"Got {type(x)}, but numpy array or dynograph tensor are expected.")


def scalar(name, tensor, new_style=False, double_precision=False):
    value = make_np(tensor).squeeze()
    if value.ndim != 0:
        raise AssertionError(f"Tensor should contain one element (0 dimensions). "
                             f"Was given size: {value.size} and {value.ndim} dimensions.")
    value = float(value)
    if not new_style:
        return Summary(value=[Summary.Value(tag=name, simple_value=value)])
    proto = (TensorProto(double_val=[value], dtype="DT_DOUBLE") if double_precision
             else TensorProto(float_val=[value], dtype="DT_FLOAT"))
    smd = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="scalars"))
    return Summary(value=[Summary.Value(tag=name, tensor=proto, metadata=smd)])


def default_bins():
    """TensorFlow's histogram bucket edges: +-1e-12 growing by 10% up to 1e20, and 0."""
    edges, v = [], 1e-12
    while v < 1e20:
        edges.append(v)
        v *= 1.1
    return [-e for e in reversed(edges)] + [0] + edges


def histogram(name, values, bins, max_bins=None):
    return Summary(value=[Summary.Value(tag=name, histo=make_histogram(make_np(values).astype(float),
                                                                        bins, max_bins))])


def make_histogram(values, bins, max_bins=None):
    if values.size == 0:
        raise ValueError("The input has no element.")
    values = values.reshape(-1)
    counts, limits = np.histogram(values, bins=bins)
    if max_bins is not None and len(counts) > max_bins:
        step = len(counts) // max_bins
        counts = np.pad(counts, (0, -len(counts) % step)).reshape(-1, step).sum(axis=-1)
        limits = np.append(limits[:-1:step], limits[-1])
    # keep only the span of non-empty buckets, plus one empty bucket on the left
    nonzero = np.flatnonzero(counts)
    if nonzero.size == 0:
        raise ValueError("The histogram is empty: no value falls inside the bins.")
    start, end = nonzero[0], nonzero[-1] + 1
    counts = counts[start - 1:end] if start > 0 else np.concatenate([[0], counts[:end]])
    limits = limits[start:end + 1]
    return HistogramProto(min=values.min(), max=values.max(), num=len(values), sum=values.sum(),
                          sum_squares=values.dot(values), bucket_limit=limits.tolist(),
                          bucket=counts.tolist())


def image(tag, tensor, rescale=1, dataformats="NCHW"):
    array = convert_to_HWC(make_np(tensor), dataformats)
    scale = 1 if array.dtype == np.uint8 else 255   # floats are in [0, 1]
    array = (array.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)
    return Summary(value=[Summary.Value(tag=tag, image=make_image(array, rescale))])


def make_image(array, rescale=1):
    """A PNG-encoded ``Summary.Image`` of an HWC uint8 array."""
    from PIL import Image
    height, width, channels = array.shape
    picture = Image.fromarray(array).resize((int(width * rescale), int(height * rescale)),
                                            Image.Resampling.LANCZOS)
    with io.BytesIO() as out:
        picture.save(out, format="PNG")
        encoded = out.getvalue()
    return Summary.Image(height=height, width=width, colorspace=channels, encoded_image_string=encoded)


def convert_to_HWC(array, input_format):
    """An HWC array of an image (CHW, HWC, HW...) or a grid of a batch of them (NCHW, NHWC...)."""
    if len(set(input_format)) != len(input_format):
        raise AssertionError(f"You can not use the same dimension shorthand twice. "
                             f"input_format: {input_format}")
    if array.ndim != len(input_format):
        raise AssertionError(f"size of input tensor and input format are different. "
                             f"tensor shape: {array.shape}, input_format: {input_format}")
    input_format = input_format.upper()
    if len(input_format) == 4:
        nchw = array.transpose([input_format.find(c) for c in "NCHW"])
        return make_grid(nchw).transpose(1, 2, 0)
    if len(input_format) == 3:
        hwc = array.transpose([input_format.find(c) for c in "HWC"])
        return np.concatenate([hwc] * 3, 2) if hwc.shape[2] == 1 else hwc
    hw = array.transpose([input_format.find(c) for c in "HW"])
    return np.stack([hw] * 3, 2)


def make_grid(images, ncols=8):
    """One CHW canvas holding a batch of NCHW images in rows of ``ncols``."""
    if images.shape[1] == 1:
        images = np.concatenate([images] * 3, 1)
    if images.ndim != 4 or images.shape[1] != 3:
        raise AssertionError("Input should be a 4D numpy array with 3 channels")
    n, _, h, w = images.shape
    ncols = min(n, ncols)
    nrows = -(-n // ncols)
    canvas = np.zeros((3, h * nrows, w * ncols), dtype=images.dtype)
    for i in range(n):
        y, x = divmod(i, ncols)
        canvas[:, y * h:(y + 1) * h, x * w:(x + 1) * w] = images[i]
    return canvas


def figure_to_image(figures, close=True):
    """A CHW uint8 array of a matplotlib figure (NCHW of a list of figures)."""
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    def render(figure):
        canvas = FigureCanvasAgg(figure)
        canvas.draw()
        w, h = figure.canvas.get_width_height()
        rgb = np.frombuffer(canvas.buffer_rgba(), dtype=np.uint8).reshape(h, w, 4)[:, :, :3]
        if close:
            plt.close(figure)
        return np.moveaxis(rgb, 2, 0)

    if isinstance(figures, list):
        return np.stack([render(f) for f in figures])
    return render(figures)


def text(tag, text):
    plugin = SummaryMetadata.PluginData(plugin_name="text",
                                        content=TextPluginData(version=0).SerializeToString())
    tensor = TensorProto(dtype="DT_STRING", string_val=[text.encode("utf_8")],
                         tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
    smd = SummaryMetadata(plugin_data=plugin)
    return Summary(value=[Summary.Value(tag=tag + "/text_summary", metadata=smd, tensor=tensor)])


def hparams(hparam_dict, metric_dict, hparam_domain_discrete=None):
    """The hparams plugin's experiment, session-start and session-end summaries."""
    from google.protobuf import struct_pb2
    from dynograph._tensor import Tensor
    from tensorboard.plugins.hparams import metadata
    from tensorboard.plugins.hparams.api_pb2 import (DataType, Experiment, HParamInfo, MetricInfo,
                                                     MetricName, Status)
    from tensorboard.plugins.hparams.plugin_data_pb2 import (HParamsPluginData, SessionEndInfo,
                                                             SessionStartInfo)

    if not isinstance(hparam_dict, dict) or not isinstance(metric_dict, dict):
        raise TypeError("hparam_dict and metric_dict should be dictionary.")
    discrete = hparam_domain_discrete or {}
    if not isinstance(discrete, dict):
        raise TypeError("parameter: hparam_domain_discrete should be a dictionary, nothing logged.")
    for k, v in discrete.items():
        if k not in hparam_dict or not isinstance(v, list) or not all(isinstance(d, type(hparam_dict[k]))
                                                                       for d in v):
            raise TypeError(f"parameter: hparam_domain_discrete[{k}] should be a list of same type as "
                            f"hparam_dict[{k}].")
    infos, start = [], SessionStartInfo()
    for k, v in hparam_dict.items():
        if v is None:
            continue
        if isinstance(v, Tensor):
            v = float(make_np(v).reshape(-1)[0])
        elif not isinstance(v, (int, float, str)):
            raise ValueError("value should be one of int, float, str, bool, or dynograph.Tensor")
        # bool is an int: test the number types last, as torch does (a bool logs as a number)
        field, kind = (("string_value", "DATA_TYPE_STRING") if isinstance(v, str)
                       else ("number_value", "DATA_TYPE_FLOAT64"))
        setattr(start.hparams[k], field, v)
        domain = (struct_pb2.ListValue(values=[struct_pb2.Value(**{field: d}) for d in discrete[k]])
                  if k in discrete else None)
        infos.append(HParamInfo(name=k, type=DataType.Value(kind), domain_discrete=domain))
    experiment = Experiment(hparam_infos=infos, metric_infos=[MetricInfo(name=MetricName(tag=k))
                                                               for k in metric_dict])
    end = SessionEndInfo(status=Status.Value("STATUS_SUCCESS"))

    def summary(tag, **data):
        content = HParamsPluginData(version=metadata.PLUGIN_DATA_VERSION, **data).SerializeToString()
        plugin = SummaryMetadata.PluginData(plugin_name=metadata.PLUGIN_NAME, content=content)
        return Summary(value=[Summary.Value(tag=tag, metadata=SummaryMetadata(plugin_data=plugin))])

    return (summary(metadata.EXPERIMENT_TAG, experiment=experiment),
            summary(metadata.SESSION_START_INFO_TAG, session_start_info=start),
            summary(metadata.SESSION_END_INFO_TAG, session_end_info=end))
