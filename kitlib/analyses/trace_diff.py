"""Trace diff: what changed between two recordings of the same steps?

Sources: docs/SOURCES.md#trace-diff-module

``what`` is ``"kernels"`` (every kernel, copy and set, by kind and name) or ``"operators"``
(torch.profiler traces only: operators by name and input shapes). Times are int64 ns.
KitError: a source that is neither a Trace nor an NsysReport, without steps, CPU-only,
operators asked of an Nsight export, or names above :data:`MAX_NAME_CHARS`."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import KitError
from ..model import Trace
from ..model.sources import check_same_format, check_source
from ..model.window import step_of
from .steps import steps_of

__all__ = ["CHANGES", "DIFF_COLUMNS", "diff_events", "trace_diff", "diff_summary", "shapes_recorded"]

#: The values of ``trace_diff(...)["change"]``, in the order the summary lists them.
CHANGES = {
    "added": "no call before, at least one after",
    "removed": "at least one call before, none after",
    "slower": "more device time after (summed over its calls), by more than the tolerance",
    "faster": "less device time after (summed over its calls), by more than the tolerance",
    "unchanged": "device time after within the tolerance of before",
}

#: The columns of :func:`trace_diff` (``step`` only with ``per_step=True``).
DIFF_COLUMNS = ["step", "kind", "name", "input_shapes", "before_count", "after_count", "count_change",
                "before_device_ns", "after_device_ns", "device_change_ns", "change"]

EVENT_COLUMNS = ["step", "kind", "name", "input_shapes", "device_ns", "start_ns"]

#: The most characters one recording's distinct names and shape keys may total for a diff (it
#: takes about six times their size in memory). Raise it to diff a larger recording anyway.
MAX_NAME_CHARS = 64 << 20

WHAT = ("kernels", "operators")


def shapes_recorded(trace: Trace) -> bool:
    """Whether a trace's operators carry input shapes (``record_shapes=True``).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> shapes_recorded(tiny_trace())
    False
    """
    ops = trace.ops
    op = (ops["kind"] == "op").to_numpy()
    return bool(op.any()) and bool(ops["input_dims"][op].notna().any())


def _device_work(source) -> pd.DataFrame:
    """Kernels, copies and sets with the start of their launching call (<NA> if none)."""
    g = source.gpu_events()
    return pd.DataFrame({"kind": g["kind"].to_numpy(dtype=object), "name": g["name"].to_numpy(dtype=object),
                         "dur_ns": g["dur_ns"].to_numpy(dtype=np.int64),
                         "start_ns": g["start_ns"].to_numpy(dtype=np.int64),
                         "launch_start_ns": g["launch_start_ns"].astype("Int64").to_numpy()})


def _cpu_only_error(source, what: str) -> KitError:
    return KitError(
        f"{source.path}: a CPU-only recording (no kernel, copy or set on a GPU): a trace diff of {what} "
        "cannot tell which kernels were added or removed, nor any device time, slower or faster. "
        "Compare what a CPU recording does hold instead: step wall times (steps.step_measures, "
        "compare.compare) or the operators' host times (grouping.group_ops).")


def diff_events(source, what: str = "kernels", shapes: bool = True) -> pd.DataFrame:
    """The rows a trace diff counts, one per event, with the step each belongs to.

    Sources: docs/SOURCES.md#trace-diff-diff-events

    GPU work is placed in the step holding its launch's start, an operator (kind ``op``) by its
    own start. ``shapes=False`` leaves ``input_shapes`` ``""``.

    Returns, by start: ``step`` (Int64, <NA> in no step or without a launch), ``kind``, ``name``,
    ``input_shapes`` (``""`` for GPU work), ``device_ns`` (duration; an operator's "Self CUDA"), ``start_ns``.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> diff_events(tiny_trace())[["step", "kind", "name", "device_ns"]]
       step    kind         name  device_ns
    0     1  kernel  relu_kernel        400
    """
    check_source(source, "trace_diff")
    if what not in WHAT:
        raise KitError(f"trace_diff: what must be one of {', '.join(map(repr, WHAT))}, not {what!r}")
    if what == "operators" and not source.has_operators:
        raise KitError(f"{source.path}: an Nsight Systems export holds no operators, only NVTX ranges and "
                       "CUDA calls: diff its kernels (what='kernels'), or diff two torch.profiler traces "
                       "for operators")
    steps = steps_of(source)
    if not source.has_gpu:
        raise _cpu_only_error(source, what)
    if what == "kernels":
        w = _device_work(source)
        launched = w["launch_start_ns"].to_numpy()
        has = ~pd.isna(launched)
        step = step_of(np.where(has, launched, 0).astype(np.int64), steps)
        step[~has] = pd.NA                                  # no launch recorded: no step
        out = pd.DataFrame({"kind": w["kind"], "name": w["name"], "input_shapes": "",
                            "device_ns": w["dur_ns"], "start_ns": w["start_ns"]})
    else:
        out = _operators(source, shapes)
        step = step_of(out["start_ns"].to_numpy(dtype=np.int64), steps)
    out.insert(0, "step", step)
    _check_name_sizes(source, out, what)
    out = out.sort_values("start_ns", kind="stable").reset_index(drop=True)
    return out.astype({"device_ns": "int64", "start_ns": "int64"})[EVENT_COLUMNS]


def _check_name_sizes(source, events: pd.DataFrame, what: str) -> None:
    """Refuse distinct names and shape keys above :data:`MAX_NAME_CHARS` before grouping fills the memory."""
    counts = {}
    for col in ("name", "input_shapes"):
        distinct = events[col].drop_duplicates()
        counts[col] = (len(distinct), int(distinct.astype(str).str.len().sum()) if len(distinct) else 0)
    total = sum(chars for _, chars in counts.values())
    if total > MAX_NAME_CHARS:
        (n_names, c_names), (n_keys, c_keys) = counts["name"], counts["input_shapes"]
        raise KitError(f"{source.path}: its {what}' {n_names:,} distinct names ({c_names:,} characters) and "
                       f"{n_keys:,} distinct input-shape keys ({c_keys:,} characters) total {total:,} characters, more "
                       f"than trace_diff compares (MAX_NAME_CHARS = {MAX_NAME_CHARS:,}: the diff would take "
                       "about six times that in memory); set kitlib.analyses.trace_diff.MAX_NAME_CHARS "
                       "higher to diff it anyway")


def _operators(trace: Trace, shapes: bool) -> pd.DataFrame:
    """The operator rows of :func:`kitlib.analyses.events.op_events`: ``kind``, ``name``,
    ``input_shapes``, ``device_ns`` (``device_self_ns``) and ``start_ns``.

    Sources: docs/SOURCES.md#trace-diff-operators"""
    from .chain import chain
    from .events import own_gpu_ns, shapes_keys
    tree = trace.host_events
    if tree is None or not len(tree):
        return pd.DataFrame({"kind": [], "name": [], "input_shapes": [], "device_ns": np.zeros(0, np.int64),
                             "start_ns": np.zeros(0, np.int64)})
    own, _ = own_gpu_ns(trace, tree, chain(trace))
    op = (tree["kind"].to_numpy() == "op") & ~tree["merged"].to_numpy()
    names = tree["name"].array[op] if op.any() else np.zeros(0, dtype=object)
    if shapes:
        dims = trace.ops["input_dims"].to_numpy(dtype=object)[tree["row"].to_numpy()[op]]
        keys = shapes_keys(dims)
    else:
        keys = ""
    return pd.DataFrame({"kind": "op", "name": names, "input_shapes": keys, "device_ns": own[op],
                         "start_ns": tree["start_ns"].to_numpy(dtype=np.int64)[op]})


def _classify(before: np.ndarray, after: np.ndarray, n_before: np.ndarray, n_after: np.ndarray,
              tolerance: float) -> np.ndarray:
    change = np.where(after > before, "slower", np.where(after < before, "faster", "unchanged")).astype(object)
    change[np.abs(after - before) <= tolerance * before] = "unchanged"
    change[n_before == 0] = "added"
    change[n_after == 0] = "removed"
    return change


def trace_diff(before, after, what: str = "kernels", per_step: bool = False,
               tolerance: float = 0.0) -> pd.DataFrame:
    """Kernels or operators added, removed, slower and faster between two recordings.

    ``before`` and ``after`` are of one kind (two traces, or two Nsight exports), with steps in
    common. Operators match by name alone when either lacks shapes. ``per_step``: a row per step
    and key. A change of at most ``tolerance × before_device_ns`` is ``unchanged``.
    KitError also: two kinds, no common step, a negative tolerance.

    Returns :data:`DIFF_COLUMNS`, largest change first: ``step`` (``per_step`` only), ``kind``,
    ``name``, ``input_shapes``; ``before_``/``after_count``, ``count_change``; ``before_``/
    ``after_device_ns``, ``device_change_ns`` (ns); ``change`` (:data:`CHANGES`).
    ``.attrs``: ``steps`` compared, ``matched_by``, ``note``, ``left_out`` (per side, by
    reason), ``tolerance``, ``what``.

    Examples
    --------
    A recording against itself (a worked before/after pair: tests/analyses/test_moved_examples.py):

    >>> from kitlib.model.examples import tiny_trace
    >>> trace_diff(tiny_trace(), tiny_trace())[["name", "before_count", "after_count", "change"]]
              name  before_count  after_count     change
    0  relu_kernel             1            1  unchanged
    """
    check_same_format(before, after, "trace_diff")
    if not tolerance >= 0:
        raise KitError(f"trace_diff: tolerance must be 0 or more (a fraction of the device time before), "
                       f"not {tolerance!r}")
    if what == "operators" and not before.has_operators:
        diff_events(before, what)               # raises: an Nsight export holds no operators
    notes, matched_by = [], "kind and name"
    shapes = what == "operators"
    if shapes:
        matched_by = "name and input shapes"
        missing = [str(s.path) for s in (before, after) if not shapes_recorded(s)]
        if missing:
            shapes, matched_by = False, "name"
            notes.append(f"matched by name alone: {' and '.join(missing)} recorded no input shapes "
                         "(record_shapes=False), so calls with different shapes are summed together")
    eb, ea = diff_events(before, what, shapes), diff_events(after, what, shapes)
    sb, sa = steps_of(before)["step"].tolist(), steps_of(after)["step"].tolist()
    common = sorted(set(sb) & set(sa))
    if not common:
        raise KitError(f"trace_diff: {before.path} (steps {_steps_text(sb)}) and {after.path} (steps "
                       f"{_steps_text(sa)}) share no step number, so no step can be compared with its "
                       "counterpart; record both runs with the same profiler schedule")
    left_out = {}
    for side, e in (("before", eb), ("after", ea)):
        no_step = int(e["step"].isna().sum())
        other = int((e["step"].notna() & ~e["step"].isin(common)).sum())
        left_out[side] = {"in no step": no_step, "in a step the other side lacks": other}
    keys = ["kind", "name", "input_shapes"]
    by = (["step"] if per_step else []) + keys

    def agg(e):
        e = e[e["step"].isin(common)]
        return e.groupby(by, sort=False, dropna=False)["device_ns"].agg(["size", "sum"])

    gb, ga = agg(eb), agg(ea)
    t = gb.join(ga, how="outer", suffixes=("_b", "_a")).fillna(0).astype("int64").reset_index()
    t = t.rename(columns={"size_b": "before_count", "size_a": "after_count",
                          "sum_b": "before_device_ns", "sum_a": "after_device_ns"})
    if per_step:
        t["step"] = t["step"].astype("int64")
    t["count_change"] = t["after_count"] - t["before_count"]
    t["device_change_ns"] = t["after_device_ns"] - t["before_device_ns"]
    t["change"] = _classify(t["before_device_ns"].to_numpy(), t["after_device_ns"].to_numpy(),
                            t["before_count"].to_numpy(), t["after_count"].to_numpy(), tolerance)
    cols = [c for c in DIFF_COLUMNS if c != "step" or per_step]
    t = t.assign(_size=-t["device_change_ns"].abs())
    order = (["step"] if per_step else []) + ["_size", "kind", "name", "input_shapes"]
    t = t.sort_values(order, kind="stable").reset_index(drop=True)[cols]
    t.attrs.update(steps=common, matched_by=matched_by, note="; ".join(notes), left_out=left_out,
                   tolerance=tolerance, what=what)
    return t


def _steps_text(numbers: list) -> str:
    return ", ".join(map(str, numbers)) if numbers else "none"


def diff_summary(diff: pd.DataFrame) -> pd.DataFrame:
    """A :func:`trace_diff` table by change: how many keys and calls, and how much device time.

    Returns, indexed by ``change`` (every :data:`CHANGES` value, in order; by ``step`` too for
    ``per_step`` tables): ``keys``, ``before_count``, ``after_count``, ``before_device_ns``,
    ``after_device_ns``, ``device_change_ns`` (ns, summing to the whole diff's change).
    KitError: not a trace diff's columns.

    Examples
    --------
    >>> import pandas as pd
    >>> d = pd.DataFrame({"kind": "kernel", "name": ["a", "b", "c"], "input_shapes": "",
    ...                   "before_count": [1, 0, 2], "after_count": [1, 1, 2],
    ...                   "before_device_ns": [50, 0, 10], "after_device_ns": [30, 5, 10],
    ...                   "change": ["faster", "added", "unchanged"]})
    >>> diff_summary(d)[["keys", "after_count", "device_change_ns"]]
               keys  after_count  device_change_ns
    change                                         
    added         1            1                 5
    removed       0            0                 0
    slower        0            0                 0
    faster        1            1               -20
    unchanged     1            2                 0
    """
    need = {"change", "before_count", "after_count", "before_device_ns", "after_device_ns"}
    if not need <= set(diff.columns):
        raise KitError(f"diff_summary: expected a trace_diff table; missing {', '.join(sorted(need - set(diff.columns)))}")
    d = diff.assign(keys=1, device_change_ns=diff["after_device_ns"] - diff["before_device_ns"])
    cols = ["keys", "before_count", "after_count", "before_device_ns", "after_device_ns", "device_change_ns"]
    cat = pd.Categorical(d["change"], categories=list(CHANGES))
    if "step" in d.columns:
        g = d.groupby([d["step"], cat], observed=False)[cols].sum()
        g.index = g.index.set_names(["step", "change"])
    else:
        g = d.groupby(cat, observed=False)[cols].sum()
        g.index = pd.CategoricalIndex(g.index, categories=list(CHANGES), name="change").astype(object)
        g.index.name = "change"
    return g.astype("int64")
