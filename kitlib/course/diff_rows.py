"""Lesson 10's raw rows for a trace diff: one kernel's events in a recording as the profiler
wrote them (``dur`` in µs), the launches that made them (same ``args.correlation``) and the
``ProfilerStep#N`` ranges, for the learner to count by hand before
:func:`kitlib.analyses.trace_diff.trace_diff`. Fetches and trims only."""
from __future__ import annotations

from ..errors import KitError
from .raw_views import as_json_lines, trace_events

__all__ = ["kernel_rows", "rows_text", "short_name", "shown"]

LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def kernel_rows(capture, contains: str) -> dict:
    """``{steps, kernels, launches}``: the ``ProfilerStep#N`` events, the ``kernel`` events whose name
    contains ``contains`` (file order) and the runtime/driver calls that launched them, as written.

    Raises KitError: no kernel's name contains ``contains``."""
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
    """:func:`kernel_rows` as JSON lines under ``# steps``, ``# kernels``, ``# launches``."""
    keys = ["name", "ts", "dur", "args"]
    out = []
    for part in ("steps", "kernels", "launches"):
        out.append(f"# {part}")
        out.append(as_json_lines(rows[part], keys=keys[:3] if part == "steps" else keys, args=["correlation"],
                                 name_chars=name_chars) or "(none)")
    return "\n".join(out)


def short_name(name: str, width: int | None = 48) -> str:
    """A kernel name for a table: no ``void`` nor ``(anonymous namespace)::``, templates as ``<…>``,
    parameters cut, at most ``width`` characters (``None``: never cut); names that are not C++
    signatures kept."""
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
    """A trace-diff table for display: names shortened, an all-empty ``input_shapes`` dropped."""
    t = diff.assign(name=diff["name"].map(short_name))
    if "input_shapes" in t.columns and not t["input_shapes"].astype(bool).any():
        t = t.drop(columns="input_shapes")
    return t
