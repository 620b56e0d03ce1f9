"""The Nsight Systems export as a value: :class:`NsysReport`."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ..phases import STEP_RANGE
from ._values import kept, read_only_tables
from .schema import DEFECT_COLUMNS, STEP_COLUMNS
from .tree import nesting
from .trace import range_table
from .window import value_at


def defect_table(rows) -> pd.DataFrame:
    """The :attr:`NsysReport.defects` table of ``rows`` (tuples in the order of
    :data:`~kitlib.model.schema.DEFECT_COLUMNS`; ``rows`` and ``first_rowid`` int64).

    Examples
    --------
    >>> defect_table([("nvtx", "NVTX_EVENTS", "end", "missing", 3, 17)])
      table       source column  problem  rows  first_rowid
    0  nvtx  NVTX_EVENTS    end  missing     3           17
    """
    return pd.DataFrame(rows, columns=DEFECT_COLUMNS).astype({"rows": "int64",
                                                               "first_rowid": "int64"})


#: Nsight's copy directions (``ENUM_CUDA_MEMCPY_OPER``) -> Kineto's short names, used for both.
COPY_KINDS = {"Host-to-Device": "HtoD", "Device-to-Host": "DtoH", "Device-to-Device": "DtoD",
              "Host-to-Host": "HtoH", "Peer-to-Peer": "PtoP"}


def launches_by_correlation(launches: pd.DataFrame) -> pd.DataFrame:
    """The launches indexed by ``(pid, correlation)``, the key a GPU event names its launch by
    (rows without a correlation left out, the first of a key kept).

    Examples
    --------
    >>> launches_by_correlation(pd.DataFrame({"pid": [1, 1], "correlation": [7, 7], "tid": [2, 3]}))
                     tid
    pid correlation
    1   7              2
    """
    lau = launches[launches["correlation"].notna()]
    return lau.drop_duplicates(["pid", "correlation"]).set_index(["pid", "correlation"])


@read_only_tables("kernels", "launches", "copies", "sets", "nvtx", "marks", "osrt", "threads",
                  "gpus", "defects")
@dataclass(eq=False)
class NsysReport:
    """An Nsight Systems SQLite export as pandas tables (see :func:`kitlib.readers.nsys.load_nsys`).

    Read-only as :class:`kitlib.model.Trace`. Times are integer ns on the recording's clock;
    ``pid``/``tid`` the OS's (from ``globalTid``). A table whose source the file lacks is empty,
    with its columns, and the source is listed in :attr:`missing`.

    Attributes
    ----------
    path : pathlib.Path
    kernels : DataFrame
        By start: ``name`` (demangled), ``short_name``, ``pid``, ``tid`` (launching thread; <NA>
        without its launch), times, ``correlation``, ``device``, ``context``, ``stream``,
        ``grid``/``block`` (tuples), ``registers_per_thread``, ``static_smem_bytes``, ``dynamic_smem_bytes``.
    launches : DataFrame
        CUDA API calls: ``name`` (no ``_vNNNN``), ``raw_name``, ``api``, ``pid, tid``, times,
        ``correlation``, ``return_value``.
    copies, sets : DataFrame
        Memcpys (``name``, ``copy_kind``, ``bytes``, ``src_kind``/``dst_kind``) and memsets
        (``name``, ``bytes``, ``value``), each with ``pid, tid``, times, ``correlation``,
        ``device``, ``context``, ``stream``.
    nvtx : DataFrame
        NVTX ranges: ``name``, ``domain`` (``""`` by default), ``style`` (``PushPop``/``StartEnd``),
        ``pid, tid``, ``end_tid`` (closing thread if another), times (<NA> end: never closed),
        ``depth`` (among its thread's), ``category``, ``range_id``.
    marks : DataFrame
        NVTX marks: ``name, domain, pid, tid, start_ns``.
    osrt : DataFrame
        OS runtime calls: ``name, pid, tid``, times, ``return_value, nesting_level``.
    threads : DataFrame
        ``pid, tid, name, priority, process``.
    gpus : DataFrame
        ``device`` (Nsight's id), ``cuda_device``, ``name``, ``chip``, ``bus``, ``sm_count``,
        ``memory_bytes``, ``memory_bandwidth_bytes_per_s``, ``clock_hz``, ``l2_cache_bytes``,
        ``compute_capability``, ``uuid``. A kernel's ``device`` is the CUDA number its process saw.
    missing : list of str
        Source tables the export lacks (``"NVTX_EVENTS"`` without NVTX).
    meta : dict
        ``META_DATA_EXPORT`` (``EXPORT_PRODUCT_VERSION`` …), ``session_start_ns``/``_end_ns``.
    defects : DataFrame
        What the reader read around: :data:`DEFECT_COLUMNS` (``table``, ``source``, ``column``,
        ``problem``, ``rows``, ``first_rowid`` or -1). Empty for a sound export.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> report = open_capture("nsys_8step").nsys
    >>> k = report.kernels                # a copy: editing it leaves the report as it was
    >>> k["dur_ns"] = 0
    >>> int((report.kernels["dur_ns"] > 0).sum())
    4340
    """

    path: Path
    kernels: pd.DataFrame
    launches: pd.DataFrame
    copies: pd.DataFrame
    sets: pd.DataFrame
    nvtx: pd.DataFrame
    marks: pd.DataFrame
    osrt: pd.DataFrame
    threads: pd.DataFrame
    gpus: pd.DataFrame
    missing: list = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    defects: pd.DataFrame = field(default_factory=lambda: defect_table([]))

    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def copy(self) -> "NsysReport":
        """Another report of the same (read-only) tables, with ``meta`` and ``missing`` of its
        own: what :func:`kitlib.open_capture` hands each caller.

        Examples
        --------
        >>> from kitlib.readers.bundle import open_capture
        >>> report = open_capture("nsys_8step").nsys
        >>> report.copy().meta["note"] = "mine"
        >>> "note" in report.meta
        False
        """
        import copy as _copy
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.__dict__["meta"] = _copy.deepcopy(self.meta)
        new.__dict__["missing"] = list(self.missing)
        return new

    #: What this value was read from, as a sentence names it.
    FORMAT = "Nsight Systems export"
    #: An export names no operators, only NVTX ranges and CUDA calls (``Trace.has_operators``).
    has_operators = False

    def labelled_ranges(self) -> pd.DataFrame:
        """The closed NVTX ranges: ``name, pid, tid, start_ns, end_ns, dur_ns`` (int64 ns), as
        ``Trace.labelled_ranges`` gives a trace's annotations.

        Examples
        --------
        >>> from kitlib.readers.bundle import open_capture
        >>> open_capture("nsys_8step").nsys.labelled_ranges()[["name", "start_ns", "dur_ns"]].head(2)
                 name    start_ns      dur_ns
        0  torch_step  9342297646  2656480289
        1   data_load  9342300130  1469484230
        """
        n = kept(self, "nvtx")
        return range_table(n[n["end_ns"].notna()])

    def os_runtime_calls(self) -> pd.DataFrame:
        """The OS-runtime calls (``osrt``): ``name, pid, tid, start_ns, dur_ns, end_ns, …``.

        Examples
        --------
        >>> from kitlib.readers.bundle import open_capture
        >>> open_capture("nsys_8step").nsys.os_runtime_calls()["name"].value_counts().index[:3].tolist()
        ['ioctl', 'read', 'stat64']
        """
        return self.osrt

    def tool_gpu_projection(self) -> pd.DataFrame:
        """Nsight's own NVTX GPU projection of the ranges (:func:`nvtx_gpu_projection`).

        Examples
        --------
        >>> from kitlib.readers.bundle import open_capture
        >>> open_capture("nsys_8step").nsys.tool_gpu_projection()[["name", "proj_dur_ns", "gpu_ops"]].head(2)
                 name  proj_dur_ns  gpu_ops
        0  torch_step   1250895505      505
        1   data_load     64596519        3
        """
        return nvtx_gpu_projection(self)

    def host_event_at(self, times_ns, tid: int) -> list:
        """``(name, kind)`` of what thread ``tid`` was inside at each time: an OS-runtime call,
        else a CUDA API call, else an NVTX range (``kind``: ``OS runtime``, ``CUDA API``,
        ``NVTX``), ``("", "")`` where none.

        Examples
        --------
        >>> from kitlib.readers.bundle import open_capture
        >>> report = open_capture("nsys_8step").nsys
        >>> report.host_event_at([int(report.steps["start_ns"][1]) + 1], int(report.steps["tid"][1]))
        [('torch_step', 'NVTX')]
        """
        def on(t):
            return t[t["tid"] == tid]
        lab = self.labelled_ranges()
        cols = (value_at(times_ns, on(kept(self, "osrt"))), value_at(times_ns, on(kept(self, "launches"))),
                value_at(times_ns, on(lab)))
        return [(o, "OS runtime") if o is not None else (a, "CUDA API") if a is not None
                else (lb, "NVTX") if lb is not None else ("", "") for o, a, lb in zip(*cols)]

    @property
    def has_gpu(self) -> bool:
        """Whether the export holds any GPU work (kernel, copy or set).

        Examples
        --------
        >>> from kitlib.readers.bundle import open_capture
        >>> open_capture("nsys_8step").nsys.has_gpu
        True
        """
        return bool(len(self.kernels) or len(self.copies) or len(self.sets))

    def device_names(self) -> list:
        """The names of the GPUs in the export's ``TARGET_INFO_GPU`` table, in its order.

        Examples
        --------
        >>> from kitlib.readers.bundle import open_capture
        >>> open_capture("nsys_8step").nsys.device_names()
        ['NVIDIA H200']
        """
        return [n for n in self.gpus["name"].dropna().tolist() if n]

    def thread_names(self) -> dict:
        """``{(pid, tid): name}`` of the threads the export names (its first name per thread).

        Examples
        --------
        >>> from kitlib.readers.bundle import open_capture
        >>> len(open_capture("nsys_8step").nsys.thread_names())
        289
        """
        t = self.threads.drop_duplicates(["pid", "tid"])
        return {(p, tid): n for p, tid, n in zip(t["pid"], t["tid"], t["name"])}

    @property
    def version(self) -> str:
        """The Nsight Systems version that exported the file (``"2025.3.2.0"``), or ``"?"``.

        Examples
        --------
        >>> from kitlib.readers.bundle import open_capture
        >>> open_capture("nsys_8step").nsys.version
        '2025.3.2.0'
        """
        return self.meta.get("EXPORT_PRODUCT_VERSION", "?")

    @property
    def steps(self) -> pd.DataFrame:
        """The report's steps: closed NVTX ranges named ``torch_step`` (or ``torch_step#N``), as
        :attr:`Trace.steps`; ``step`` is the ``#N`` when every range has one, else 0, 1, … by time.

        Examples
        --------
        >>> from kitlib.readers.bundle import open_capture
        >>> open_capture("nsys_8step").nsys.steps[["step", "name", "start_ns", "dur_ns"]].head(2)
           step        name     start_ns      dur_ns
        0     0  torch_step   9342297646  2656480289
        1     1  torch_step  11998789830    52518179
        """
        n = kept(self, "nvtx")
        hit = n[(n["name"] == STEP_RANGE) | n["name"].str.match(rf"^{STEP_RANGE}#\d+$")]
        hit = hit[hit["end_ns"].notna()].sort_values("start_ns", kind="stable").copy()
        if hit.empty:
            return pd.DataFrame(columns=STEP_COLUMNS).astype("int64").astype({"name": object})
        num = hit["name"].str.extract(r"#(\d+)$")[0]
        hit["step"] = num.astype("int64").to_numpy() if num.notna().all() else np.arange(len(hit))
        return hit[STEP_COLUMNS].reset_index(drop=True).astype(
            {c: "int64" for c in STEP_COLUMNS if c != "name"})

    def gpu_events(self) -> pd.DataFrame:
        """Every kernel, memcpy and memset joined to its launching CUDA call on ``(pid, correlation)``.

        The columns of :meth:`kitlib.model.Trace.gpu_events`; ``copy_kind`` from :data:`COPY_KINDS`,
        ``bandwidth_gb_per_s`` NaN (Nsight records none).

        Examples
        --------
        >>> from kitlib.readers.bundle import open_capture
        >>> report = open_capture("nsys_8step").nsys
        >>> report.gpu_events()[["kind", "launch", "launch_to_start_ns"]].head(2)
             kind           launch  launch_to_start_ns
        0  memcpy  cudaMemcpyAsync               34822
        1  memcpy  cudaMemcpyAsync               10224
        """
        cols = ["name", "pid", "tid", "start_ns", "dur_ns", "end_ns", "correlation", "device",
                "stream", "bytes"]
        none = {"copy_kind": None, "src_memory": None, "dst_memory": None}
        cop = self.copies
        cop = cop[cols].assign(kind="memcpy", copy_kind=cop["copy_kind"].map(
            lambda s: COPY_KINDS.get(s, s) if isinstance(s, str) else None).to_numpy(dtype=object),
            src_memory=cop["src_kind"].to_numpy(dtype=object), dst_memory=cop["dst_kind"].to_numpy(dtype=object))
        parts = [self.kernels.assign(bytes=pd.NA)[cols].assign(kind="kernel", **none), cop,
                 self.sets[cols].assign(kind="memset", **none)]
        ev = pd.concat([p for p in parts if len(p)] or parts[:1], ignore_index=True)
        ev = ev[["kind"] + cols + list(none)].astype({"bytes": "Int64"})
        lau = launches_by_correlation(self.launches)[["name", "start_ns", "dur_ns"]].rename(columns={
            "name": "launch", "start_ns": "launch_start_ns", "dur_ns": "launch_dur_ns"})
        ev = ev.join(lau, on=["pid", "correlation"])
        ev["launch_to_start_ns"] = ev["start_ns"] - ev["launch_start_ns"]
        ev["bandwidth_gb_per_s"] = np.nan
        order = ["kind"] + cols + ["launch", "launch_start_ns", "launch_dur_ns", "launch_to_start_ns"] + \
            list(none) + ["bandwidth_gb_per_s"]
        return ev[order].sort_values(["start_ns", "kind"], kind="stable").reset_index(drop=True)

    def describe(self) -> str:
        """A few lines on what the export holds (see :func:`kitlib.readers.nsys.load_nsys`'s Example).

        Examples
        --------
        >>> from kitlib.readers.bundle import open_capture
        >>> open_capture("nsys_8step").nsys.describe().splitlines()[0]
        'report.sqlite (Nsight Systems 2025.3.2.0, 1 GPU(s): NVIDIA H200)'
        """
        gpus = ", ".join(sorted(set(self.gpus["name"].dropna()))) or "no GPU info"
        return "\n".join([
            f"{self.path.name} (Nsight Systems {self.version}, {len(self.gpus)} GPU(s): {gpus})",
            f"  kernels {len(self.kernels)}, API calls {len(self.launches)}, "
            f"memcpy {len(self.copies)}, memset {len(self.sets)}",
            f"  NVTX ranges {len(self.nvtx)}, OS runtime calls {len(self.osrt)}, "
            f"threads {len(self.threads)}",
            f"  absent tables: {', '.join(self.missing) or 'none'}",
            f"  defects read around: {int(self.defects['rows'].sum()) if len(self.defects) else 'none'}"])


def range_nesting(ranges: pd.DataFrame) -> tuple:
    """Nesting level (0 = outermost) and enclosing ``range_id`` (or -1) of each range among its
    thread's (:func:`kitlib.model.tree.nesting`; never closed: endless), ``ranges`` by start.

    Examples
    --------
    A range inside another, and one never closed (endless, so inside none):

    >>> import pandas as pd
    >>> r = pd.DataFrame({"pid": 1, "tid": 5, "start_ns": [0, 10, 50], "end_ns": [100, 40, None],
    ...                   "range_id": [7, 8, 9]})
    >>> depth, parent = range_nesting(r)
    >>> depth.tolist(), parent.tolist()
    ([0, 1, 0], [-1, 7, -1])
    """
    ends = ranges["end_ns"].astype("float64").fillna(np.inf).to_numpy()
    starts = ranges["start_ns"].astype("float64").to_numpy()
    pos = nesting(ranges["pid"].tolist(), ranges["tid"].tolist(), starts.tolist(), ends.tolist())
    depth = np.zeros(len(ranges), dtype=np.int64)
    for i, p in enumerate(pos.tolist()):          # parents come first
        if p >= 0:
            depth[i] = depth[p] + 1
    rid = ranges["range_id"].to_numpy()
    parent = np.where(pos >= 0, rid[np.maximum(pos, 0)] if len(rid) else -1, -1).astype(np.int64)
    return depth, parent


# --------------------------------------------------------------------------- NVTX projection
def nvtx_gpu_projection(report: NsysReport) -> pd.DataFrame:
    """Project each NVTX range onto the GPU, as Nsight Systems does.

    Sources: docs/SOURCES.md#nvtx-projection

    A GPU operation belongs to a range (and every enclosing one) when its launch starts and ends
    inside the range on the range's own thread; the projection runs from the first such
    operation's GPU start to the last one's end.

    Returns per projected range, by start: ``range`` (``"domain:name"``), ``name``, ``domain``,
    ``style``, ``pid``, ``tid``, ``range_id``, ``start_ns``, ``dur_ns`` (CPU); ``proj_start_ns``,
    ``proj_end_ns``, ``proj_dur_ns`` (GPU); ``gpu_ops``; ``level`` (0 outermost); ``children``.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> proj = nvtx_gpu_projection(open_capture("nsys_8step").nsys)
    >>> proj[["range", "proj_dur_ns", "gpu_ops", "level"]].head(3)
             range  proj_dur_ns  gpu_ops  level
    0  :torch_step   1250895505      505      0
    1   :data_load     64596519        3      1
    2     :forward    776532333      333      1
    """
    cols = ["range", "name", "domain", "style", "pid", "tid", "range_id", "start_ns", "dur_ns",
            "proj_start_ns", "proj_end_ns", "proj_dur_ns", "gpu_ops", "level", "children"]
    ranges = report.nvtx[report.nvtx["end_tid"].isna()]
    ops = [d[["pid", "correlation", "start_ns", "end_ns"]]
           for d in (report.kernels, report.copies, report.sets) if len(d)]
    if not ops or ranges.empty or report.launches.empty:
        return pd.DataFrame(columns=cols)
    work = pd.concat(ops).groupby(["pid", "correlation"]).agg(
        gpu_start=("start_ns", "min"), gpu_end=("end_ns", "max"))
    launches = launches_by_correlation(report.launches).join(work, how="inner").reset_index()
    closed = ranges["end_ns"].dropna()            # an open range runs to the last event
    open_end = int(max(closed.max(), launches["end_ns"].max()) if len(closed)
                   else launches["end_ns"].max())

    found = []                                   # (row label, proj start, proj end, launches)
    for thread, rr in ranges.groupby(["pid", "tid"], sort=False):
        ll = launches[(launches["pid"] == thread[0]) & (launches["tid"] == thread[1])]
        if ll.empty:
            continue
        ll = ll.sort_values("start_ns")
        ls, le = ll["start_ns"].to_numpy(), ll["end_ns"].to_numpy()
        gs, ge = ll["gpu_start"].to_numpy(), ll["gpu_end"].to_numpy()
        rs = rr["start_ns"].to_numpy()
        re_ = rr["end_ns"].fillna(open_end).to_numpy(dtype=np.int64)
        first = np.searchsorted(ls, rs, side="left")    # launches starting inside the range
        last = np.searchsorted(ls, re_, side="right")
        for label, a, b, end in zip(rr.index, first, last, re_):
            inside = np.flatnonzero(le[a:b] <= end) + a  # ... and ending inside it
            if len(inside):
                found.append((label, gs[inside].min(), ge[inside].max(), len(inside)))
    if not found:
        return pd.DataFrame(columns=cols)

    labels, ps, pe, n = zip(*found)
    p = ranges.loc[list(labels)].copy()
    p["proj_start_ns"], p["proj_end_ns"] = np.array(ps, np.int64), np.array(pe, np.int64)
    p["proj_dur_ns"] = p["proj_end_ns"] - p["proj_start_ns"]
    p["gpu_ops"] = np.array(n, np.int64)
    p["range"] = p["domain"] + ":" + p["name"]
    level, parent = range_nesting(ranges)
    p["level"] = pd.Series(level, index=ranges.index).loc[p.index]
    parent = pd.Series(parent, index=ranges["range_id"]).loc[p["range_id"]]
    p["children"] = p["range_id"].map(parent.value_counts()).fillna(0).astype("int64")
    return p.sort_values(["start_ns", "range_id"])[cols].reset_index(drop=True)
