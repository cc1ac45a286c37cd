"""``SummaryWriter``: the user API, with torch.utils.tensorboard's names, arguments and files."""
import os
import socket
import time
from datetime import datetime

from tensorboard.compat.proto import event_pb2
from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from . import summary as S


class FileWriter:
    """Writes events to one event file in ``log_dir`` (tensorboard's writer, which flushes in a thread)."""

    def __init__(self, log_dir, max_queue=10, flush_secs=120, filename_suffix=""):
        self.event_writer = EventFileWriter(str(log_dir), max_queue, flush_secs, filename_suffix)

    def get_logdir(self):
        return self.event_writer.get_logdir()

    def add_event(self, event, step=None, walltime=None):
        event.wall_time = time.time() if walltime is None else walltime
        if step is not None:
            event.step = int(step)
        self.event_writer.add_event(event)

    def add_summary(self, summary, global_step=None, walltime=None):
        self.add_event(Event(summary=summary), global_step, walltime)

    def add_graph(self, graph_profile, walltime=None):
        graph, run_metadata = graph_profile
        self.add_event(Event(graph_def=graph.SerializeToString()), None, walltime)
        tagged = event_pb2.TaggedRunMetadata(tag="step1", run_metadata=run_metadata.SerializeToString())
        self.add_event(Event(tagged_run_metadata=tagged), None, walltime)

    def flush(self):
        self.event_writer.flush()

    def close(self):
        self.event_writer.close()

    def reopen(self):
        self.event_writer.reopen()


class SummaryWriter:
    """Writes scalars, histograms, images, text, graphs, embeddings and hparams for TensorBoard.

    ``log_dir`` defaults to ``runs/<Mon01_12-30-59>_<hostname><comment>``, as in PyTorch."""

    def __init__(self, log_dir=None, comment="", purge_step=None, max_queue=10, flush_secs=120,
                 filename_suffix=""):
        if not log_dir:
            current_time = datetime.now().strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", current_time + "_" + socket.gethostname() + comment)
        self.log_dir = log_dir
        self.purge_step = purge_step
        self.max_queue = max_queue
        self.flush_secs = flush_secs
        self.filename_suffix = filename_suffix
        # one writer per folder (add_scalars writes to sub-folders); close() clears them
        self.file_writer = self.all_writers = None
        self._get_file_writer()
        self.default_bins = S.default_bins()

    def _get_file_writer(self):
        """The writer of ``log_dir``, opened again after ``close()``."""
        if self.all_writers is None or self.file_writer is None:
            self.file_writer = FileWriter(self.log_dir, self.max_queue, self.flush_secs, self.filename_suffix)
            self.all_writers = {self.file_writer.get_logdir(): self.file_writer}
            if self.purge_step is not None:
                # TensorBoard hides events of steps >= purge_step that came before this restart
                self.file_writer.add_event(Event(step=self.purge_step, file_version="brain.Event:2"))
                self.file_writer.add_event(Event(step=self.purge_step,
                                                 session_log=SessionLog(status=SessionLog.START)))
                self.purge_step = None
        return self.file_writer

    def get_logdir(self):
        return self.log_dir

    def _add(self, summary, global_step, walltime):
        self._get_file_writer().add_summary(summary, global_step, walltime)

    def add_scalar(self, tag, scalar_value, global_step=None, walltime=None, new_style=False,
                   double_precision=False):
        self._add(S.scalar(tag, scalar_value, new_style=new_style, double_precision=double_precision),
                  global_step, walltime)

    def add_scalars(self, main_tag, tag_scalar_dict, global_step=None, walltime=None):
        """Several curves on one chart: each tag goes to its own run ``log_dir/main_tag_tag``."""
        walltime = time.time() if walltime is None else walltime
        logdir = self._get_file_writer().get_logdir()
        for tag, value in tag_scalar_dict.items():
            path = logdir + "/" + main_tag.replace("/", "_") + "_" + tag
            if path not in self.all_writers:
                self.all_writers[path] = FileWriter(path, self.max_queue, self.flush_secs,
                                                    self.filename_suffix)
            self.all_writers[path].add_summary(S.scalar(main_tag, value), global_step, walltime)

    def add_histogram(self, tag, values, global_step=None, bins="tensorflow", walltime=None, max_bins=None):
        if isinstance(bins, str) and bins == "tensorflow":
            bins = self.default_bins
        self._add(S.histogram(tag, values, bins, max_bins=max_bins), global_step, walltime)

    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        self._add(S.image(tag, img_tensor, dataformats=dataformats), global_step, walltime)

    def add_images(self, tag, img_tensor, global_step=None, walltime=None, dataformats="NCHW"):
        self._add(S.image(tag, img_tensor, dataformats=dataformats), global_step, walltime)

    def add_figure(self, tag, figure, global_step=None, close=True, walltime=None):
        """A matplotlib figure (or a list of them, as a grid) rendered to an image."""
        dataformats = "NCHW" if isinstance(figure, list) else "CHW"
        self.add_image(tag, S.figure_to_image(figure, close), global_step, walltime, dataformats=dataformats)

    def add_text(self, tag, text_string, global_step=None, walltime=None):
        self._add(S.text(tag, text_string), global_step, walltime)

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        """The graph dynograph traces from ``model(*input_to_model)``, for TensorBoard's graph tab."""
        from ._graph import graph
        self._get_file_writer().add_graph(graph(model, input_to_model, verbose))

    def add_embedding(self, mat, metadata=None, label_img=None, global_step=None, tag="default",
                      metadata_header=None):
        """Points for the projector tab, written as TSV files under ``log_dir/<step>/<tag>``."""
        from ._embedding import add_embedding
        self._projector_config = add_embedding(self._get_file_writer().get_logdir(),
                                               getattr(self, "_projector_config", None), mat, metadata,
                                               label_img, global_step, tag, metadata_header)

    def add_hparams(self, hparam_dict, metric_dict, hparam_domain_discrete=None, run_name=None,
                    global_step=None):
        """Hyper-parameters and their metrics, in a sub-run for the hparams tab."""
        if type(hparam_dict) is not dict or type(metric_dict) is not dict:
            raise TypeError("hparam_dict and metric_dict should be dictionary.")
        summaries = S.hparams(hparam_dict, metric_dict, hparam_domain_discrete)
        logdir = os.path.join(self._get_file_writer().get_logdir(), run_name or str(time.time()))
        with SummaryWriter(log_dir=logdir) as w_hp:
            for s in summaries:
                w_hp.file_writer.add_summary(s, global_step)
            for k, v in metric_dict.items():
                w_hp.add_scalar(k, v, global_step)

    def flush(self):
        for writer in (self.all_writers or {}).values():
            writer.flush()

    def close(self):
        for writer in (self.all_writers or {}).values():
            writer.flush()
            writer.close()
        self.file_writer = self.all_writers = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.close()
