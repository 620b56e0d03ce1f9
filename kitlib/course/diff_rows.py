"""Lesson 10's raw rows for a trace diff: one kernel's events in a recording, as the
profiler wrote them, with the launches that made them and the steps.

Before :func:`kitlib.analyses.trace_diff.trace_diff` compares two recordings, the learner
counts one kernel by hand in each file: its GPU events (``cat: kernel``, ``dur`` in µs),
the CUDA calls that launched them (the same ``args.correlation``) and the
``ProfilerStep#N`` ranges that hold those calls. This module only fetches and trims that
material; it computes nothing a lesson asks about.

Sources: the trace files themselves (Kineto's Chrome trace format); CUPTI's correlation id.
"""
from __future__ import annotations

from ..errors import KitError
from .raw_views import as_json_lines, trace_events

__all__ = ["kernel_rows", "rows_text", "short_name", "shown"]

LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def kernel_rows(capture, contains: str) -> dict:
    """The raw events of the kernels whose name contains ``contains``, their launches and
    the recording's steps.

    Parameters
    ----------
    capture : kitlib.readers.bundle.Capture
        A torch.profiler bundle.
    contains : str
        Part of the kernel's name (kernel names are long C++ signatures).

    Returns
    -------
    dict
        ``steps``: the ``ProfilerStep#N`` events; ``kernels``: the matching ``kernel``
        events, in file order; ``launches``: the CUDA runtime/driver events whose
        ``args.correlation`` is one of theirs (a kernel whose launch came before the
        profiler's window opened has none). Each a list of the events as written.

    Raises
    ------
    KitError
        No kernel's name contains ``contains`` (named with the capture's folder).
    """
    # the categories these rows come from (ProfilerStep#N is a user_annotation since torch 1.10)
    ev = trace_events(capture, cats=("kernel", *LAUNCH_CATS, "user_annotation", None))
    kernels = [e for e in ev if e.get("cat") == "kernel" and contains in str(e.get("name", ""))]
    if not kernels:
        raise KitError(f"{capture.path}: no kernel whose name contains {contains!r}")
    corr = {e.get("args", {}).get("correlation") for e in kernels}
    launches = [e for e in ev if e.get("cat") in LAUNCH_CATS and e.get("args", {}).get("correlation") in corr]
    steps = [e for e in ev if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    return {"steps": steps, "kernels": kernels, "launches": launches}


def rows_text(rows: dict, name_chars: int = 40) -> str:
    """:func:`kernel_rows` as JSON lines, one event a line: the steps (name, ts, dur), the
    kernels and the launches (name, ts, dur, ``args.correlation``), names cut to
    ``name_chars``.
    """
    keys = ["name", "ts", "dur", "args"]
    out = []
    for part in ("steps", "kernels", "launches"):
        out.append(f"# {part}")
        out.append(as_json_lines(rows[part], keys=keys[:3] if part == "steps" else keys, args=["correlation"],
                                 name_chars=name_chars) or "(none)")
    return "\n".join(out)


def short_name(name: str, width: int | None = 48) -> str:
    """A kernel name short enough for a table: ``void`` and ``(anonymous namespace)::``
    dropped, template arguments written ``<…>``, a C++ signature's parameters cut; names
    that are not C++ signatures (``Memcpy HtoD (Pinned -> Device)``) kept. A name still
    longer than ``width`` characters is cut, its last one ``…``; with ``width=None`` never
    (for a table that wraps long names at their ``::`` and ``_``, :func:`~kitlib.course.widgets.readable`).

    Examples
    --------
    >>> short_name("void at::native::(anonymous namespace)::max_pool_backward_nhwc<float, float>(float const*)")
    'at::native::max_pool_backward_nhwc<…>'
    """
    if not isinstance(name, str):
        return str(name)
    s = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    if "::" not in s:                   # not a C++ signature: a copy, a set, a plain name
        return s if width is None or len(s) <= width else s[:width - 1] + "…"
    depth, out = 0, []
    for ch in s:
        if ch == "<":
            depth += 1
            if depth == 1:
                out.append("<…>")
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    s = "".join(out)
    if "(" in s:
        s = s[:s.index("(")]
    return s if width is None or len(s) <= width else s[:width - 1] + "…"


def shown(diff):
    """A :func:`kitlib.analyses.trace_diff.trace_diff` table for display: kernel names
    shortened (:func:`short_name`) and the ``input_shapes`` column dropped where every row's
    is empty (GPU work). Computes nothing."""
    t = diff.assign(name=diff["name"].map(short_name))
    if "input_shapes" in t.columns and not t["input_shapes"].astype(bool).any():
        t = t.drop(columns="input_shapes")
    return t
