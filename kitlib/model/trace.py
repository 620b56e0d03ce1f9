"""The torch.profiler trace as a value: :class:`Trace`."""
from __future__ import annotations

import copy as _copy
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ._values import derived, handed_out, kept, read_only_tables
from .window import value_at
from .schema import FILTERED_NAMES, HOST_EVENT_COLUMNS, STEP_COLUMNS, STEP_PATTERNS  # noqa: F401


@read_only_tables("ops", "launches", "gpu", "memory", "other", "host_events")
@dataclass(eq=False)
class Trace:
    """A torch.profiler trace as tables (see :func:`kitlib.readers.trace.load_trace`).

    A read-only value: each table attribute hands out a copy, so an edit never reaches the trace
    or what is worked out from it; to analyse a changed trace, make a new one
    (``dataclasses.replace(trace, ops=edited)``, or ``trace.ops = edited``). Times are integer ns
    on the profiler's clock (``start_ns``, ``dur_ns``, ``end_ns``).

    Attributes
    ----------
    path : pathlib.Path
    ops : DataFrame
        CPU events: ``name, pid, tid``, times; ``kind`` (``op``, ``annotation``: a
        ``record_function`` label, ``step``: ``ProfilerStep#N``, ``python``: a ``with_stack``
        frame); ``external_id`` (Int64, to launches); ``input_dims``, ``input_types``,
        ``input_strides``, ``concrete_inputs`` (lists or None; equal lists are one shared object:
        never change one in place); ``sequence_number``, ``fwd_thread_id`` (autograd);
        ``python_id``/``python_parent_id``; ``call_stack`` (old traces); ``comm_args`` (a dict of
        :data:`kitlib.model.schema.COMM_ARGS`, else None); ``parent`` (enclosing row label, -1 at
        the top), ``depth``.
    launches : DataFrame
        CUDA runtime/driver calls: ``name, pid, tid``, times, ``api``, ``correlation`` (to the GPU
        event), ``external_id`` (to the operator), ``cbid`` (CUPTI callback id).
    gpu : DataFrame
        GPU events: ``name, pid, tid``, times, ``kind`` (``kernel``, ``memcpy``, ``memset``,
        ``gpu_annotation``: a label on a stream, not work), ``device``, ``stream``,
        ``correlation``, ``external_id``, ``grid``/``block`` (3-tuples), ``bytes``,
        ``bandwidth_gb_per_s`` (the profiler's, NaN where absent).
    memory : DataFrame
        Allocator instants: ``bytes`` (negative = free), ``addr``, ``total_allocated``,
        ``total_reserved`` (bytes after), ``device_type`` (0 CPU, 1 CUDA), ``device_id``, ``start_ns``.
    other : DataFrame
        Events of categories kitlib does not interpret: ``name, cat, ph, pid, tid, start_ns, dur_ns``.
    meta : dict
        ``devices``, ``profiler_options``, ``versions``, ``base_time_ns`` (add for ns since the
        epoch), ``process_names``, ``thread_names``, ``category_counts``, ``format``,
        ``json_bytes``; defects counted: ``unusable_metadata_events``, ``unread_complete_events``,
        ``memory_records_unusable``, ``begin_end_unpaired``, ``begin_end_pairs``;
        ``time_resolution_ns`` (1000 for whole-µs traces); ``python_frames_are_children``,
        ``python_frames_rule``, ``python_frames_release``, ``python_frames_are_rows``.
    host_events : DataFrame
        The event tree (:func:`kitlib.model.tree.build_host_tree`), by start, longest first:
        :data:`HOST_EVENT_COLUMNS`, ``source`` (``ops``/``launches``) and ``row`` (label there),
        ``name, kind, pid, tid``, times, ``parent`` (position, -1 at the top), ``depth``,
        ``merged`` (folded into a same-named parent), ``profiler_parent`` (once merged events are
        gone), ``children_ns`` (direct children's host time: self time is ``dur_ns - children_ns``).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> tr
    Trace(tiny.json: 3 CPU events, 1 launches, 1 GPU events, 0 memory events)
    >>> tr.ops[["name", "start_ns", "end_ns", "parent"]]
                 name  start_ns  end_ns  parent
    0  ProfilerStep#1         0    1000      -1
    1      aten::relu       100     400       0
    2      aten::add       400     400       0

    An edit to a table changes the copy, not the trace:

    >>> ops = tr.ops
    >>> ops.loc[0, "name"] = "mine"
    >>> tr.ops.loc[0, "name"]
    'ProfilerStep#1'
    """

    path: Path
    ops: pd.DataFrame
    launches: pd.DataFrame
    gpu: pd.DataFrame
    memory: pd.DataFrame
    other: pd.DataFrame
    meta: dict = field(default_factory=dict)
    host_events: pd.DataFrame | None = None
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __repr__(self):
        return (f"Trace({Path(self.path).name}: {len(kept(self, 'ops'))} CPU events, "
                f"{len(kept(self, 'launches'))} launches, {len(kept(self, 'gpu'))} GPU events, "
                f"{len(kept(self, 'memory'))} memory events)")

    def copy(self) -> "Trace":
        """Another Trace of the same read-only tables with a ``meta`` of its own (what
        :func:`kitlib.open_capture` hands each caller).

        Examples
        --------
        >>> from kitlib.model.examples import tiny_trace
        >>> a = tiny_trace()
        >>> b = a.copy()
        >>> b.ops = b.ops.iloc[:0]
        >>> len(a.ops), len(b.ops)
        (3, 0)
        """
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__["meta"] = _copy.deepcopy(self.meta)
        return new

    def derived(self, key, tables: tuple, compute):
        """``compute()``, worked out once for the tables named in ``tables`` as this trace keeps
        them now (a new table misses the memo). Hand out a copy of what it returns.

        Examples
        --------
        >>> from kitlib.model.examples import tiny_trace
        >>> tr = tiny_trace()
        >>> tr.derived("n_ops", ("ops",), lambda: len(tr.ops))
        3
        """
        return derived(self, key, tuple(tables), compute)

    @property
    def steps(self) -> pd.DataFrame:
        """The trace's steps: ``ProfilerStep#N`` annotations, else ``torch_step#N`` ranges, from the
        ``ops`` it has now. :data:`~kitlib.model.schema.STEP_COLUMNS`: ``step`` (N), ``name``,
        ``pid, tid, start_ns, end_ns, dur_ns`` (int64 ns), by start; empty without steps.

        Examples
        --------
        >>> from kitlib.model.examples import tiny_trace
        >>> tiny_trace().steps[["step", "name", "start_ns", "end_ns"]]
           step            name  start_ns  end_ns
        0     1  ProfilerStep#1         0    1000
        """
        return handed_out(self.derived("steps", ("ops",), lambda: _steps_of(kept(self, "ops"))))

    @property
    def kernels(self) -> pd.DataFrame:
        """GPU work (kernels, copies, sets): ``gpu`` without the ``gpu_annotation`` rows.

        Examples
        --------
        >>> from kitlib.model.examples import tiny_trace
        >>> tiny_trace().kernels[["name", "start_ns", "end_ns", "correlation"]]
                  name  start_ns  end_ns  correlation
        0  relu_kernel       300     700            7
        """
        g = kept(self, "gpu")
        return handed_out(g[g["kind"] != "gpu_annotation"])

    #: What this value was read from, as a sentence names it.
    FORMAT = "torch.profiler trace"
    #: The recording names the operator behind each launch (``ops``; :func:`kitlib.chain`).
    has_operators = True

    def labelled_ranges(self) -> pd.DataFrame:
        """The host's labelled ranges, ``record_function`` annotations and steps: ``name, pid,
        tid, start_ns, end_ns, dur_ns`` (int64 ns). ``NsysReport.labelled_ranges`` gives NVTX's.

        Examples
        --------
        >>> from kitlib.model.examples import tiny_trace
        >>> tiny_trace().labelled_ranges()[["name", "start_ns", "end_ns"]]
                     name  start_ns  end_ns
        0  ProfilerStep#1         0    1000
        """
        ops = kept(self, "ops")
        return range_table(ops[ops["kind"].isin(["annotation", "step"])])

    def os_runtime_calls(self):
        """None: torch.profiler records no OS-runtime calls (``NsysReport.os_runtime_calls``).

        Examples
        --------
        >>> from kitlib.model.examples import tiny_trace
        >>> tiny_trace().os_runtime_calls() is None
        True
        """
        return None

    def tool_gpu_projection(self):
        """None: torch.profiler projects no range onto the GPU itself
        (``NsysReport.tool_gpu_projection`` is Nsight's NVTX GPU projection).

        Examples
        --------
        >>> from kitlib.model.examples import tiny_trace
        >>> tiny_trace().tool_gpu_projection() is None
        True
        """
        return None

    def host_event_at(self, times_ns, tid: int) -> list:
        """``(name, kind)`` of the innermost operator or annotation thread ``tid`` was inside
        at each time (``kind``: ``op``, ``annotation``, ``step``), ``("", "")`` where none.

        Examples
        --------
        >>> from kitlib.model.examples import tiny_trace
        >>> tiny_trace().host_event_at([150, 400, 2000], 1)
        [('aten::relu', 'op'), ('ProfilerStep#1', 'step'), ('', '')]
        """
        ops = kept(self, "ops")
        ops = ops[(ops["kind"] != "python") & (ops["tid"] == tid)]
        return [(n, k) if n is not None else ("", "")
                for n, k in zip(value_at(times_ns, ops), value_at(times_ns, ops, "kind"))]

    def gpu_events(self) -> pd.DataFrame:
        """Every GPU operation with the CUDA call that launched it (by correlation id, the first where
        one repeats), by start then kind; :meth:`kitlib.model.NsysReport.gpu_events` gives the same.

        Returns a DataFrame:
        ``kind``, ``name``, ``pid``, ``tid`` (launching thread, Int64); ``start_ns``, ``dur_ns``,
        ``end_ns``; ``correlation``, ``device``, ``stream``, ``bytes`` (Int64); ``launch`` (the
        call's name); ``launch_start_ns``, ``launch_dur_ns``, ``launch_to_start_ns`` (Int64 ns,
        <NA> without a launch); ``copy_kind`` (``HtoD``, ``DtoH``…), ``src_memory``, ``dst_memory``
        (copies only); ``bandwidth_gb_per_s`` (the profiler's; NaN where none).

        Examples
        --------
        >>> from kitlib.model.examples import tiny_trace
        >>> tiny_trace().gpu_events()[["kind", "name", "tid", "launch", "launch_to_start_ns"]]
             kind         name  tid            launch  launch_to_start_ns
        0  kernel  relu_kernel    1  cudaLaunchKernel                 150
        """
        return handed_out(self.derived("gpu_events", ("gpu", "launches"), lambda: _gpu_events(
            kept(self, "gpu"), kept(self, "launches"))))

    def device_names(self) -> list:
        """The names of the GPUs the profiler saw (``deviceProperties``), in its order.

        Examples
        --------
        >>> from kitlib.model.examples import tiny_trace
        >>> tiny_trace().device_names()
        []
        """
        names = [d.get("name") for d in (self.meta.get("devices") or []) if isinstance(d, dict)]
        return [n for n in names if n]

    def thread_names(self) -> dict:
        """``{(pid, tid): name}`` of the threads the trace names (its ``thread_name`` rows).

        Examples
        --------
        >>> from kitlib.model.examples import tiny_trace
        >>> tiny_trace().thread_names()
        {}
        """
        tn = self.meta.get("thread_names") or {}
        return {k: str(v) for k, v in tn.items()} if isinstance(tn, dict) else {}

    @property
    def has_gpu(self) -> bool:
        """Whether the trace holds any GPU work (kernel, copy or set).

        Examples
        --------
        >>> from kitlib.model.examples import tiny_trace
        >>> tiny_trace().has_gpu
        True
        """
        g = kept(self, "gpu")
        return bool((g["kind"] != "gpu_annotation").any())


#: A copy's name as Kineto writes it: direction, then (source -> destination) memory.
COPY_NAME = re.compile(r"^Memcpy (\w+)(?: \((\w+) -> (\w+)\))?")


def _gpu_events(gpu: pd.DataFrame, launches: pd.DataFrame) -> pd.DataFrame:
    g = gpu[gpu["kind"] != "gpu_annotation"]
    la = launches[launches["correlation"].notna()].drop_duplicates("correlation")
    la = la.set_index("correlation")[["pid", "tid", "name", "start_ns", "dur_ns"]].astype(
        {"pid": "Int64", "tid": "Int64", "start_ns": "Int64", "dur_ns": "Int64"}).rename(
        columns={"name": "launch", "start_ns": "launch_start_ns", "dur_ns": "launch_dur_ns"})
    ev = pd.DataFrame({"kind": g["kind"].to_numpy(), "name": g["name"].to_numpy(dtype=object),
                       "start_ns": g["start_ns"].to_numpy(dtype="int64"),
                       "dur_ns": g["dur_ns"].to_numpy(dtype="int64"),
                       "correlation": g["correlation"].astype("Int64").array,
                       "device": g["device"].array, "stream": g["stream"].array,
                       "bytes": g["bytes"].astype("Int64").array})
    ev["end_ns"] = ev["start_ns"] + ev["dur_ns"]
    ev = ev.join(la, on="correlation")
    ev["launch_to_start_ns"] = ev["start_ns"] - ev["launch_start_ns"]
    # a copy's direction and memories, as Kineto names it: "Memcpy HtoD (Pinned -> Device)"
    parts = [COPY_NAME.match(n) if k == "memcpy" and isinstance(n, str) else None
             for n, k in zip(ev["name"], ev["kind"])]
    for i, c in enumerate(("copy_kind", "src_memory", "dst_memory"), start=1):
        ev[c] = pd.array([m.group(i) if m else None for m in parts], dtype=object)
    ev["bandwidth_gb_per_s"] = (g["bandwidth_gb_per_s"].to_numpy(dtype="float64", na_value=np.nan)
                                if "bandwidth_gb_per_s" in g.columns else np.nan)
    cols = ["kind", "name", "pid", "tid", "start_ns", "dur_ns", "end_ns", "correlation", "device", "stream",
            "bytes", "launch", "launch_start_ns", "launch_dur_ns", "launch_to_start_ns",
            "copy_kind", "src_memory", "dst_memory", "bandwidth_gb_per_s"]
    return ev[cols].sort_values(["start_ns", "kind"], kind="stable").reset_index(drop=True)


def range_table(r: pd.DataFrame) -> pd.DataFrame:
    """``name, pid, tid, start_ns, end_ns, dur_ns`` of ``r``, the times int64.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> range_table(tiny_trace().steps)
                 name  pid  tid  start_ns  end_ns  dur_ns
    0  ProfilerStep#1    1    1         0    1000    1000
    """
    return r[["name", "pid", "tid", "start_ns", "end_ns", "dur_ns"]].astype(
        {"start_ns": "int64", "end_ns": "int64", "dur_ns": "int64"})


def _steps_of(ops: pd.DataFrame) -> pd.DataFrame:
    ops = ops[ops["kind"].isin(["step", "annotation"])]
    out = pd.DataFrame(columns=STEP_COLUMNS).astype("int64").astype({"name": object})
    for pat in STEP_PATTERNS:
        n = ops["name"].str.extract(pat)[0]
        hit = ops[n.notna()]
        if len(hit):
            return hit.assign(step=n[n.notna()].astype("int64"))[STEP_COLUMNS] \
                .sort_values("start_ns", kind="stable").reset_index(drop=True)
    return out


def _tree_now(trace: Trace):
    """The event tree of the tables the trace keeps now: the one it was given while it still
    matches ``ops`` and ``launches``, else one built again (once per set of tables)."""
    def check():
        from .tree import build_host_tree
        tree, ops, la = kept(trace, "host_events"), kept(trace, "ops"), kept(trace, "launches")
        if ops is None or la is None:
            return tree
        py = bool(trace.meta.get("python_frames_are_children"))
        # the rows of ops the tree should hold, by label (masks: no copy of the whole table)
        sel = ~ops["name"].isin(FILTERED_NAMES).to_numpy()
        if not py:
            sel &= (ops["kind"] != "python").to_numpy()
        sel = ops.index[sel]
        n_la = int((~la["name"].isin(FILTERED_NAMES)).sum())
        if tree is not None:
            src = tree["source"].to_numpy()
            rows = tree["row"].to_numpy()[src == "ops"]
            if len(rows) == len(sel) and int((src == "launches").sum()) == n_la \
                    and bool(sel.isin(rows).all()):
                return tree
        return build_host_tree(ops, la, py, int(trace.meta.get("time_resolution_ns") or 1))
    return trace.derived("host_events", ("ops", "launches", "host_events"), check)


def _put_tree(self, value):
    self.__dict__["_t_host_events"] = handed_out(value)


Trace.host_events = property(lambda self: handed_out(_tree_now(self)), _put_tree,
                             doc="The profiler's event tree of the trace's host events (a copy).")
