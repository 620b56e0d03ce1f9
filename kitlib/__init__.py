"""kitlib: the helper package of the PyTorch profiling course.

Runs and profiles the real ResNet-50 training workload and turns what
torch.profiler and Nsight Systems write into pandas tables and matplotlib
pictures. See README.md and the lessons in ``lessons/``.
"""
from .errors import KitError, KitFileError, TraceFormatError, BundleError  # noqa: F401
from .bundle import open_capture, list_references, reference_dir  # noqa: F401

__version__ = "0.1.0"
