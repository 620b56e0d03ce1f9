"""The tests' one builder of Chrome-trace events, as Kineto writes them, without kitlib.

Tests that need a trace worked on paper build its events here (times in µs, as in the JSON)
and write it with :func:`write_trace`; ``kitlib.model.examples.tiny_trace`` is the
docstrings' counterpart. The µs-to-ns conversions the tests use on raw events are here too.
"""
import json
from decimal import Decimal
from pathlib import Path


def ns(us) -> int:
    """A Chrome-trace time (µs, ns in the decimals) in integer ns, by float arithmetic:
    Kineto writes µs with three decimals, and this is how kitlib reads them."""
    return round(us * 1000)


def exact_ns(us) -> int:
    """A µs time as exact integer ns from its digits, not float arithmetic: an ``int`` or a
    ``Decimal`` as it is, a float by its shortest repr (the JSON's own text)."""
    d = Decimal(us) if isinstance(us, (int, Decimal)) else Decimal(repr(us))
    return int((d * 1000).to_integral_value())


def event(cat, name, ts, dur, pid=1, tid=1, **args) -> dict:
    """A complete event (``"ph": "X"``) of category ``cat`` on thread ``(pid, tid)``;
    ``args`` as given (pass ``**{"External id": 3}`` for names with spaces)."""
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def gpu_event(cat, name, ts, dur, corr, stream=7, **args) -> dict:
    """A GPU event (``kernel``, ``gpu_memcpy``, ``gpu_memset``, ``gpu_user_annotation``) on
    device 0's ``stream`` (pid 0, tid the stream, as Kineto writes them), with its
    correlation id."""
    return event(cat, name, ts, dur, pid=0, tid=stream, correlation=corr, stream=stream, device=0, **args)


def launch_event(name, ts, corr, dur=1.0, pid=1, tid=1, **args) -> dict:
    """A CUDA runtime call (``cudaLaunchKernel``, ``cudaMemcpyAsync``...) with its
    correlation id, on thread ``(pid, tid)``."""
    return event("cuda_runtime", name, ts, dur, pid=pid, tid=tid, correlation=corr, **args)


def shifted(events, t0) -> list:
    """Copies of ``events`` with ``t0`` (µs) added to each time: a trace on a clock that does
    not start at 0."""
    return [{**e, "ts": t0 + e["ts"]} for e in events]


def write_trace(path, events, **top) -> Path:
    """Write ``{"traceEvents": events, **top}`` as JSON to ``path`` (top-level keys such as
    ``deviceProperties``, ``schemaVersion`` or Kineto's recording options) and return it."""
    path = Path(path)
    path.write_text(json.dumps({"traceEvents": list(events), **top}))
    return path


def memory_event(ts, nbytes, addr, allocated=0, reserved=0, device_type=1, device_id=0, pid=1, tid=1) -> dict:
    """An allocator record: the ``[memory]`` instant event the profiler writes with
    ``profile_memory=True`` (``Bytes`` allocated, or freed when negative, at ``Addr``; device
    type 1 and id 0 for GPU 0, type 0 and id -1 for the CPU)."""
    return {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": pid, "tid": tid, "ts": ts, "s": "t",
            "args": {"Total Reserved": reserved, "Total Allocated": allocated, "Bytes": nbytes, "Addr": addr,
                     "Device Id": device_id, "Device Type": device_type}}
