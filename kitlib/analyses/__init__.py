"""Analyses: pure functions from the readers' tables to tables and numbers.

The kit's teaching content in code: the operator -> launch -> kernel chain, steps and
their measures, interval arithmetic, self/total times, grouping, memory and FLOPs,
alignment, the lint, before/after statistics. No file writing, printing, plotting or
running of the workload. Which step, parent or label holds an event is decided by
``kitlib.model.window`` (half-open ``[start, end)``). May import ``kitlib.model``,
``kitlib.errors``, ``kitlib.units``, ``kitlib.phases``, ``kitlib.settings`` and other
analyses; nothing from readers, capture, plots or course (tests/test_layers.py).
"""

import importlib as _importlib

#: Public functions exported here, each imported from its module on first use (PEP 562),
#: so that importing one analysis (``kitlib.analyses.intervals``) loads no other.
_FACE = {
    # issue 28, "Why is the GPU idle?"
    **{name: "kitlib.analyses.gpu_idle" for name in (
        "device_events", "stream_gaps", "idle_breakdown", "queue_length", "queue_summary",
        "stream_concurrency", "temporal_breakdown", "step_verdicts", "GpuIdleError")},
    **{name: "kitlib.analyses.kernel_launches" for name in ("launch_stats", "launch_summary",
                                                               "kernel_types", "top_kernels")},
    **{name: "kitlib.analyses.transfers" for name in ("copies", "copy_summary")},
}


def __getattr__(name):
    if name not in _FACE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(_FACE[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_FACE))
