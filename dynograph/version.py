"""dynograph.version: the release, and the accelerator toolkits it was built with (none)."""
__version__ = "0.1.0"
cuda = None        # no CUDA build: torch.version.cuda is None on CPU-only torch too
hip = None
debug = False
