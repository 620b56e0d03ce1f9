"""kitlib: the helper package of the PyTorch profiling course.

Runs and profiles the real ResNet-50 training workload and turns what
torch.profiler and Nsight Systems write into pandas tables and matplotlib
pictures. See README.md and the lessons in ``lessons/``.

The readers and the main analyses are available at the top level::

    import kitlib
    trace = kitlib.load_trace("trace.json.gz")     # -> Trace (ops, launches, gpu, memory, meta)
    ranks = kitlib.load_traces("runs/<two-rank bundle>")   # -> RankTraces, one Trace per rank
    links = kitlib.chain(trace)                     # operator -> launch -> GPU event
    report = kitlib.load_nsys("report.sqlite")      # -> NsysReport
    cap = kitlib.open_capture("profiler_5step")     # a bundle (recorded or live)

``kitlib.chain``, ``kitlib.align`` and ``kitlib.lint`` are the functions; their
modules are imported from their layer, as ``from kitlib.analyses.chain import first_op``.

The package is split into layers, one sub-package each, and imports flow one way
(a test, ``tests/test_layers.py``, keeps it so)::

    capture/  -> bundle on disk -> readers/ -> analyses/ -> plots/ and course/

- ``kitlib.readers``: files in, tables out (torch.profiler trace, Nsight Systems
  export, memory snapshot, Nsight Compute CSV, the profiler's printed table, the
  bundle format and its file helpers).
- ``kitlib.analyses``: pure functions from the readers' tables to tables and numbers.
- ``kitlib.capture.recipes``: the workload, the torch.profiler and Nsight Systems recipes,
  live measurements, the command line.
- ``kitlib.plots``: matplotlib pictures of the analyses.
- ``kitlib.course``: lesson plumbing (live or replay), exercises, the quoted figures.

Below them all: ``kitlib.errors`` (the kit's exceptions), ``kitlib.units`` (ns -> ms,
bytes -> GiB for display), ``kitlib.phases`` (the labels the workload's phases carry)
and ``kitlib.paths`` (where the kit keeps what it makes: the cache, runs).
"""
from .errors import KitError, KitFileError, TraceFormatError, BundleError, NsysFormatError  # noqa: F401
from .readers.bundle import open_capture, list_references, reference_dir  # noqa: F401
from .readers.trace import Trace, load_trace  # noqa: F401
from .readers.ranks import RankTraces, load_traces  # noqa: F401
from .analyses.chain import chain  # noqa: F401
from .readers.nsys import NsysReport, load_nsys, nsys_stats  # noqa: F401
from .readers.snapshot import load_memory_snapshot  # noqa: F401
from .analyses.align import align  # noqa: F401
from .analyses.lint import lint  # noqa: F401
from . import course  # noqa: F401  (what a lesson starts with)
from .course import exercises  # noqa: F401

__version__ = "0.1.0"

# An instructor's projector setting: in a Jupyter kernel, KITLIB_PLOT_SCALE scales the
# tables, answer forms and explorers too, not only the pictures (kitlib.plots applies it
# to those wherever it is imported).
import os as _os
if _os.environ.get("KITLIB_PLOT_SCALE", "").strip():
    from .course.widgets import presentation_from_environment as _presentation
    _presentation()
