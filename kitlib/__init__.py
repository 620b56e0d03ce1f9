"""kitlib: the helper package of the PyTorch profiling course.

Runs and profiles the ResNet-50 training workload and turns what torch.profiler and Nsight
Systems write into pandas tables and matplotlib pictures::

    import kitlib
    trace = kitlib.load_trace("trace.json.gz")     # -> Trace (ops, launches, gpu, memory, meta)
    ranks = kitlib.load_traces("runs/<two-rank bundle>")   # -> RankTraces, one Trace per rank
    links = kitlib.chain(trace)                     # operator -> launch -> GPU event
    report = kitlib.load_nsys("report.sqlite")      # -> NsysReport
    cap = kitlib.open_capture("profiler_5step")     # a bundle (recorded or live)

Layers, imports flowing one way (``tests/test_layers.py``)::

    capture/  -> bundle on disk -> readers/ -> model -> analyses/ -> plots/ and course/

with the base modules below them all: ``errors``, ``units``, ``phases``, ``paths``,
``settings``. The face is lazy (PEP 562): ``import kitlib`` loads only ``errors`` and
``settings``; each name is imported from its layer when first used, so importing a lower
layer never loads a higher one, nor IPython. See docs/ARCHITECTURE.md."""
import importlib as _importlib
import sys as _sys

from . import settings as _settings
from .errors import KitError, KitFileError, TraceFormatError, BundleError, NsysFormatError  # noqa: F401

__version__ = "0.1.0"

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


# KITLIB_PLOT_SCALE in a kernel also scales tables, forms and explorers (only where IPython is loaded)
if _settings.is_set("KITLIB_PLOT_SCALE") and "IPython" in _sys.modules:
    from .course.widgets import presentation_from_environment as _presentation
    _presentation()
