"""kitlib: the helper package of the PyTorch profiling course.

Runs and profiles the real ResNet-50 training workload and turns what
torch.profiler and Nsight Systems write into pandas tables and matplotlib
pictures. See README.md and the lessons in ``lessons/``.

The readers and the main analyses are available at the top level::

    import kitlib
    trace = kitlib.load_trace("trace.json.gz")     # -> Trace (ops, launches, gpu, memory, meta)
    links = kitlib.chain(trace)                     # operator -> launch -> GPU event
    report = kitlib.load_nsys("report.sqlite")      # -> NsysReport
    cap = kitlib.open_capture("profiler_5step")     # a bundle (recorded or live)

``kitlib.chain``, ``kitlib.align`` and ``kitlib.lint`` are the functions; their
modules are imported as ``from kitlib.chain import first_op`` and so on.
"""
from .errors import KitError, KitFileError, TraceFormatError, BundleError, NsysFormatError  # noqa: F401
from .bundle import open_capture, list_references, reference_dir  # noqa: F401
from .trace import Trace, load_trace  # noqa: F401
from .chain import chain  # noqa: F401
from .nsys import NsysReport, load_nsys, nsys_stats  # noqa: F401
from .snapshot import load_memory_snapshot  # noqa: F401
from .align import align  # noqa: F401
from .lint import lint  # noqa: F401
from . import course, exercises  # noqa: F401  (what a lesson starts with)

__version__ = "0.1.0"
