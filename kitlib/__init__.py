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

    capture/  -> bundle on disk -> readers/ -> model -> analyses/ -> plots/ and course/

- ``kitlib.model``: the data contract — the table schemas, ``Trace`` and ``NsysReport``
  as read-only values, the one event tree and the one window function (which step,
  parent or label holds time t: half-open ``[start, end)``).
- ``kitlib.readers``: files in, model values out (torch.profiler trace, Nsight Systems
  export, memory snapshot, Nsight Compute CSV, the profiler's printed table, the
  bundle format and its file helpers).
- ``kitlib.analyses``: pure functions from the model's tables to tables and numbers.
- ``kitlib.capture.recipes``: the workload, the torch.profiler and Nsight Systems recipes,
  live measurements, the command line.
- ``kitlib.plots``: matplotlib pictures of the analyses.
- ``kitlib.course``: lesson plumbing (live or replay), exercises, the quoted figures.

Below them all: ``kitlib.errors`` (the kit's exceptions), ``kitlib.units`` (ns -> ms,
bytes -> GiB for display), ``kitlib.phases`` (the labels the workload's phases carry),
``kitlib.paths`` (where the kit keeps what it makes: the cache, runs) and
``kitlib.settings`` (every ``KITLIB_*`` variable, its default and meaning).

The face is lazy: ``import kitlib`` loads almost nothing, and each name above is
imported from its layer when first used, so importing a lower layer
(``kitlib.readers.trace``) never loads a higher one, nor IPython.
"""
import importlib as _importlib
import sys as _sys

from . import settings as _settings
from .errors import KitError, KitFileError, TraceFormatError, BundleError, NsysFormatError  # noqa: F401

__version__ = "0.1.0"

# The public face is lazy (PEP 562): ``import kitlib`` loads only kitlib.errors and
# kitlib.settings, and each
# name below is imported from its layer the first time it is asked for. So
# ``import kitlib.readers.trace`` (which runs this file first) loads no analysis, no
# plot, no course and no IPython hook: the layering holds at run time too
# (tests/test_layers.py checks it in a fresh interpreter).
_FACE = {
    "open_capture": "kitlib.readers.bundle", "list_references": "kitlib.readers.bundle",
    "reference_dir": "kitlib.readers.bundle",
    "Trace": "kitlib.model.trace", "load_trace": "kitlib.readers.trace",
    "RankTraces": "kitlib.readers.ranks", "load_traces": "kitlib.readers.ranks",
    "chain": "kitlib.analyses.chain",
    "NsysReport": "kitlib.model.nsys", "load_nsys": "kitlib.readers.nsys", "nsys_stats": "kitlib.readers.nsys",
    "load_memory_snapshot": "kitlib.readers.snapshot",
    "align": "kitlib.analyses.align", "lint": "kitlib.analyses.lint",
    "exercises": "kitlib.course.exercises",
}
#: Sub-packages and base modules, imported on first use as ``kitlib.<name>``.
_SUBMODULES = {"model", "readers", "analyses", "capture", "plots", "course", "settings", "units",
               "phases", "paths", "errors"}

__all__ = sorted(set(_FACE) | _SUBMODULES | {"KitError", "KitFileError", "TraceFormatError",
                                             "BundleError", "NsysFormatError", "__version__"})


def __getattr__(name):
    if name in _FACE:
        value = getattr(_importlib.import_module(_FACE[name]), name.rpartition(".")[2]) \
            if name != "exercises" else _importlib.import_module(_FACE[name])
    elif name in _SUBMODULES:
        value = _importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value          # once: the next lookup is a plain attribute
    return value


def __dir__():
    return __all__


# An instructor's projector setting: in a Jupyter kernel, KITLIB_PLOT_SCALE scales the
# tables, answer forms and explorers too, not only the pictures (kitlib.plots applies it
# to those wherever it is imported). Only where IPython is already loaded (a kernel, an
# IPython shell): a plain script that imports a lower layer never loads the course.
if _settings.is_set("KITLIB_PLOT_SCALE") and "IPython" in _sys.modules:
    from .course.widgets import presentation_from_environment as _presentation
    _presentation()
