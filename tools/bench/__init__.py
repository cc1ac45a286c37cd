"""Benchmarks of dynograph against numpy and PyTorch: ``python -m tools.bench --help``."""
from .runner import WORKLOADS, measure, optional_torch, run, select, workload  # noqa: F401
