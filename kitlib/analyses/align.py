"""torch.profiler steps and phases beside the Nsight Systems NVTX ranges of a matched run.

Sources: docs/SOURCES.md#align-module

``source`` is a Trace or NsysReport. Times are int64 ns on the source's clock."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import KitError
from .steps import labelled_ranges, steps_of
from ..phases import DATA_LOAD, H2D, LABELS as PHASES
from ..model import NsysReport, Trace
from ..model.sources import check_source
from ..units import ns_to_ms

__all__ = ["ATTRIBUTIONS", "gpu_work", "project", "align", "launch_threads", "align_summary", "operator_ranges"]

#: The two ways of crediting GPU work to a host range.
ATTRIBUTIONS = {
    "thread": "Nsight Systems' NVTX GPU projection: GPU work launched by CUDA API calls that start and "
              "end inside the range, on the range's own thread",
    "time": "GPU work whose launch, by any thread of the range's process, starts inside the range's "
            "time interval (follows the backward work autograd launches from its own thread)",
}

_WORK_COLUMNS = ["kind", "pid", "tid", "correlation", "launch_start_ns", "launch_end_ns",
                 "start_ns", "end_ns", "dur_ns"]


def _as_sources(a, b):
    """((Trace, workload, name, manifest), (NsysReport, …)) from Traces, Reports or Captures."""
    def one(x, want):
        if hasattr(x, "manifest") and hasattr(x, "file"):          # a Capture
            src = x.trace if want == "trace" else x.nsys
            return src, dict(x.workload), x.name, x.manifest
        check_source(x, kinds=Trace if want == "trace" else NsysReport, message="align: expected a " + (
            "Trace or torch_profiler Capture" if want == "trace" else "NsysReport or nsys Capture") + ", got {got}")
        return x, None, x.path.name, None
    return one(a, "trace"), one(b, "nsys")


def gpu_work(source) -> pd.DataFrame:
    """Every GPU operation (kernel, memcpy, memset) with the launch that queued it.

    Work whose launch is not recorded, and ``gpu_user_annotation`` labels, are left out.

    Returns, by launch start: ``kind``, ``pid``, ``tid`` (launching thread), ``correlation``;
    ``launch_start_ns``, ``launch_end_ns`` (the API call), ``start_ns``, ``end_ns``, ``dur_ns`` (GPU).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> gpu_work(tr)[["kind", "tid", "correlation", "launch_end_ns", "start_ns", "end_ns"]]
         kind  tid  correlation  launch_end_ns  start_ns  end_ns
    0  kernel    1            7            250       300     700
    """
    if not hasattr(source, "gpu_events"):
        raise KitError(f"gpu_work: expected a Trace or NsysReport, got {type(source).__name__}")
    ev = source.gpu_events()
    ev = ev[ev["launch"].notna()]
    out = pd.DataFrame({"kind": ev["kind"], "pid": ev["pid"], "tid": ev["tid"],
                        "correlation": ev["correlation"],
                        "launch_start_ns": ev["launch_start_ns"],
                        "launch_end_ns": ev["launch_start_ns"] + ev["launch_dur_ns"],
                        "start_ns": ev["start_ns"], "end_ns": ev["end_ns"], "dur_ns": ev["dur_ns"]})
    ints = ["launch_start_ns", "launch_end_ns", "start_ns", "end_ns", "dur_ns"]
    out = out.dropna(subset=ints + ["tid"])
    out = out.astype({c: "int64" for c in ints})
    out["pid"] = out["pid"].astype("int64")        # every row has its launch, so its process
    out["tid"] = pd.to_numeric(out["tid"], errors="coerce")
    return out[_WORK_COLUMNS].sort_values("launch_start_ns", kind="stable").reset_index(drop=True)


def project(ranges: pd.DataFrame, work: pd.DataFrame, attribution: str = "thread") -> pd.DataFrame:
    """Credit GPU ``work`` (:func:`gpu_work`) to host ``ranges`` (``pid, tid, start_ns, end_ns``) and
    project each range onto the GPU.

    ``attribution`` (:data:`ATTRIBUTIONS`): ``"thread"``, the launch starts and ends inside the
    range on its ``(pid, tid)``; ``"time"``, a launch by any thread of the ``pid`` starts inside
    ``[start_ns, end_ns]``.

    Returns ``ranges`` with ``gpu_ops`` (launches credited, as ``nsys stats`` counts them),
    ``kernels``, ``kernel_sum_ns``, ``proj_start_ns``, ``proj_end_ns``, ``proj_dur_ns`` (ns; <NA>
    when nothing is credited).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> from kitlib.analyses.steps import labelled_ranges
    >>> tr = tiny_trace()
    >>> p = project(labelled_ranges(tr), gpu_work(tr))
    >>> p[["gpu_ops", "kernel_sum_ns", "proj_start_ns", "proj_end_ns", "proj_dur_ns"]]
       gpu_ops  kernel_sum_ns  proj_start_ns  proj_end_ns  proj_dur_ns
    0        1            400            300          700          400
    """
    if attribution not in ATTRIBUTIONS:
        raise KitError(f"unknown attribution {attribution!r}; use one of {', '.join(ATTRIBUTIONS)}")
    ls, le = work["launch_start_ns"].to_numpy(), work["launch_end_ns"].to_numpy()
    wp, wt = work["pid"].to_numpy(), work["tid"].to_numpy()
    gs, ge = work["start_ns"].to_numpy(), work["end_ns"].to_numpy()
    kern = (work["kind"] == "kernel").to_numpy()
    launch_key = work["correlation"].to_numpy()
    rows = []
    for r in ranges.itertuples():
        m = (wp == r.pid) & (ls >= r.start_ns)
        if attribution == "thread":
            m &= (wt == r.tid) & (le <= r.end_ns)
        else:
            m &= ls <= r.end_ns
        k = np.flatnonzero(m)
        if k.size:
            rows.append((len(np.unique(launch_key[k])), int(kern[k].sum()),
                         int((ge[k] - gs[k])[kern[k]].sum()), int(gs[k].min()), int(ge[k].max())))
        else:
            rows.append((0, 0, 0, pd.NA, pd.NA))
    out = ranges.copy()
    cols = ["gpu_ops", "kernels", "kernel_sum_ns", "proj_start_ns", "proj_end_ns"]
    vals = list(zip(*rows)) if rows else [[] for _ in cols]
    for c, v in zip(cols, vals):
        out[c] = pd.array(list(v), dtype="Int64")
    out["proj_dur_ns"] = out["proj_end_ns"] - out["proj_start_ns"]
    return out


def _label_rows(source, step_rows: pd.DataFrame, labels) -> dict:
    """{(k, label): ranges} for each matched step k; label "step" is the step itself."""
    lab = labelled_ranges(source)
    out = {}
    for k, s in enumerate(step_rows.itertuples()):
        out[(k, "step")] = pd.DataFrame([{"name": s.name, "pid": s.pid, "tid": s.tid, "start_ns": s.start_ns,
                                          "end_ns": s.end_ns, "dur_ns": s.dur_ns}])
        inside = lab[(lab["tid"] == s.tid) & (lab["start_ns"] >= s.start_ns) & (lab["end_ns"] <= s.end_ns)]
        for name in labels:
            out[(k, name)] = inside[inside["name"] == name]
    return out


def _credit(source, ranges: dict, attribution: str) -> dict:
    """{key: (host_ns, gpu_ops, kernels, kernel_sum_ns, proj_dur_ns)} for the ranges of each key."""
    allr = pd.concat([r.assign(_key=[key] * len(r)) for key, r in ranges.items() if len(r)], ignore_index=True)
    p = project(allr, gpu_work(source), attribution)
    own = source.tool_gpu_projection() if attribution == "thread" else None
    if own is not None:
        # Nsight's own projection decides proj and GPU ops (identical by construction; see tests).
        nv = own.set_index(["tid", "start_ns", "name"])
        key = list(zip(p["tid"], p["start_ns"], p["name"]))
        hit = [nv.loc[k] if k in nv.index else None for k in key]
        for c, none in (("proj_start_ns", pd.NA), ("proj_end_ns", pd.NA), ("gpu_ops", 0)):
            p[c] = pd.array([h[c] if h is not None else none for h in hit], dtype="Int64")
        p["proj_dur_ns"] = p["proj_end_ns"] - p["proj_start_ns"]
    res = {}
    for key, g in p.groupby("_key", sort=False):
        proj = (g["proj_end_ns"].max() - g["proj_start_ns"].min()) if g["proj_start_ns"].notna().any() else pd.NA
        res[key] = (int(g["dur_ns"].sum()), int(g["gpu_ops"].sum()), int(g["kernels"].sum()),
                    int(g["kernel_sum_ns"].sum()), proj)
    return res


def align(profiler, nsys, attribution: str = "time", labels=None) -> pd.DataFrame:
    """One table: torch.profiler steps and phases beside the Nsight NVTX ranges.

    Sources: docs/SOURCES.md#align-align

    ``profiler``: a Trace (or torch_profiler Capture, which adds its workload);
    ``nsys``: an NsysReport (or nsys Capture). ``attribution`` applies to both
    (:data:`ATTRIBUTIONS`; ``"thread"`` is Nsight's own NVTX GPU projection on its side);
    ``labels`` default to the phases of :data:`kitlib.analyses.steps.PHASES` either tool has.

    Returns a DataFrame, one row per matched step and label:
    ``step`` (0…, matched in time order), ``prof_step``, ``nsys_step``, ``label``
    (``"step"``, then each phase); per tool (``prof_``/``nsys_``): ``host_ns`` (<NA> where
    absent), ``gpu_proj_ns``, ``gpu_ops``, ``kernels``, ``kernel_sum_ns``; ``attribution``,
    ``comparable`` (False where the label covers different work or is missing), ``note``.
    ``.attrs``: ``attribution`` (in words), ``same_run`` (bool or None), ``data_load_covers``
    (per tool) and ``notes``.

    Examples
    --------
    The same steps recorded by both tools (fixed_batch with torch.profiler, nsys_8step
    with Nsight Systems), phase by phase:

    >>> from kitlib.readers.bundle import open_capture
    >>> t = align(open_capture("fixed_batch").trace, open_capture("nsys_8step").nsys, attribution="time")
    >>> t[["step", "label", "prof_host_ns", "nsys_host_ns"]].head(3)   # nsys' step 0 is the cold one
       step      label  prof_host_ns  nsys_host_ns
    0     0       step      49561816    2656480289
    1     0  data_load          <NA>    1469484230
    2     0    forward      17414681     782944926
    """
    if attribution not in ATTRIBUTIONS:
        raise KitError(f"unknown attribution {attribution!r}; use one of {', '.join(ATTRIBUTIONS)}")
    (tr, w_p, name_p, man_p), (rep, w_n, name_n, man_n) = _as_sources(profiler, nsys)
    sp, sn = steps_of(tr), steps_of(rep)
    n = min(len(sp), len(sn))
    sp, sn = sp.iloc[:n], sn.iloc[:n]
    if labels is None:
        have = set(labelled_ranges(tr)["name"]) | set(labelled_ranges(rep)["name"])
        labels = [p for p in PHASES if p in have]
    rp, rn = _label_rows(tr, sp, labels), _label_rows(rep, sn, labels)
    cp, cn = _credit(tr, rp, attribution), _credit(rep, rn, attribution)
    cov_p = (w_p or {}).get("data_load_covers")
    cov_n = (w_n or {}).get("data_load_covers")
    rows = []
    for k in range(n):
        for lab in ["step"] + list(labels):
            a, b = cp.get((k, lab)), cn.get((k, lab))
            note, ok = "", True
            if a is None or b is None:
                ok = False
                note = (f"no '{lab}' range in {'Nsight' if b is None else 'torch.profiler'}"
                        + (" (its work is inside data_load there)" if lab == H2D and b is None else ""))
            elif lab == DATA_LOAD and cov_p != cov_n:
                ok = False
                note = (f"data_load differs: torch.profiler = {cov_p or 'unknown'}; Nsight = {cov_n or 'unknown'}")
            elif lab == "step" and k == 0:
                note = "first step: cold start (loader workers starting, first-use costs)"
            row = {"step": k, "prof_step": int(sp["step"].iloc[k]), "nsys_step": int(sn["step"].iloc[k]),
                   "label": lab}
            for pre, v in (("prof", a), ("nsys", b)):
                host, ops, kern, ksum, proj = v if v is not None else (pd.NA,) * 5
                row.update({f"{pre}_host_ns": host, f"{pre}_gpu_proj_ns": proj, f"{pre}_gpu_ops": ops,
                            f"{pre}_kernels": kern, f"{pre}_kernel_sum_ns": ksum})
            row.update(attribution=attribution, comparable=ok, note=note)
            rows.append(row)
    out = pd.DataFrame(rows)
    for c in out.columns:
        if c.endswith("_ns") or c.endswith("_ops") or c.endswith("_kernels"):
            out[c] = pd.array(out[c].tolist(), dtype="Int64")
    same = _same_run(man_p, man_n)
    notes = [f"attribution '{attribution}': {ATTRIBUTIONS[attribution]}."]
    if same is False:
        notes.append(f"{name_p} and {name_n} are different runs: step-for-step figures also differ by "
                     "run-to-run variation, not only by tool.")
    elif same is None:
        notes.append("whether the two recordings are the same run is not known (no manifests given).")
    if cov_p != cov_n:
        notes.append(f"data_load covers different work: torch.profiler {cov_p or 'unknown'}; "
                     f"Nsight {cov_n or 'unknown'}.")
    out.attrs = {"attribution": ATTRIBUTIONS[attribution], "same_run": same,
                 "data_load_covers": {"torch.profiler": cov_p, "nsight": cov_n}, "notes": notes}
    return out


def _same_run(man_p, man_n):
    """Whether both manifests name the same ``run_id``; None without manifests."""
    if man_p is None or man_n is None:
        return None
    a, b = man_p.get("run_id"), man_n.get("run_id")
    return bool(a is not None and a == b)


def align_summary(table: pd.DataFrame, skip_first: bool = True) -> pd.DataFrame:
    """:func:`align`'s figures per label, medians over steps (leaving out the cold step 0 if ``skip_first``).

    Returns ``prof_host_ms``, ``nsys_host_ms``, ``prof_gpu_proj_ms``, ``nsys_gpu_proj_ms``
    (ms), ``prof_kernels``, ``nsys_kernels``, ``comparable`` (every step), indexed by label.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> t = align(open_capture("fixed_batch").trace, open_capture("nsys_8step").nsys, attribution="time")
    >>> align_summary(t)[["prof_host_ms", "nsys_host_ms"]].round(2)
               prof_host_ms  nsys_host_ms
    label
    step              43.29         39.74
    data_load          <NA>          0.42
    forward           14.29         16.86
    backward          25.43         18.97
    optimizer          3.43          3.17
    """
    t = table[table["step"] > 0] if skip_first and (table["step"] > 0).any() else table
    g = t.groupby("label", sort=False)
    out = pd.DataFrame({c.replace("_ns", "_ms"): ns_to_ms(g[c].median()) for c in
                        ["prof_host_ns", "nsys_host_ns", "prof_gpu_proj_ns", "nsys_gpu_proj_ns"]})
    out["prof_kernels"] = g["prof_kernels"].median()
    out["nsys_kernels"] = g["nsys_kernels"].median()
    out["comparable"] = g["comparable"].all()
    return out


def launch_threads(source) -> pd.DataFrame:
    """Which threads launched the GPU work, and whether they carry labelled ranges.

    Returns per launching thread, most kernels first: ``pid``, ``tid``, ``thread`` (name or
    ``""``), ``kernels``, ``gpu_ops``, ``kernel_share`` (of all kernels), ``labelled_ranges``.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> launch_threads(open_capture("nsys_8step").nsys)[["thread", "kernels", "kernel_share", "labelled_ranges"]].head(2)
              thread  kernels  kernel_share  labelled_ranges
    0  pt_autograd_0     2360      0.543779                0
    1        python3     1980      0.456221               40
    """
    w = gpu_work(source)
    g = w.groupby(["pid", "tid"]).agg(kernels=("kind", lambda s: int((s == "kernel").sum())),
                                      gpu_ops=("kind", "size")).reset_index()
    lab = labelled_ranges(source).groupby("tid").size()
    g["labelled_ranges"] = g["tid"].map(lab).fillna(0).astype("int64")
    names = source.thread_names()
    g["thread"] = [names.get((p, t), "") for p, t in zip(g["pid"], g["tid"])]
    g["kernel_share"] = g["kernels"] / max(int(g["kernels"].sum()), 1)
    return g[["pid", "tid", "thread", "kernels", "gpu_ops", "kernel_share", "labelled_ranges"]] \
        .sort_values("kernels", ascending=False).reset_index(drop=True)


_OP_RANGE = (r"^(?P<op>[^,]+)(?:, seq = (?P<seq>\d+))?(?:, op_id = (?P<op_id>\d+))?"
             r"(?:, sizes = (?P<sizes>\[.*?\]))?(?:, input_op_ids = .*)?$")


def operator_ranges(report) -> pd.DataFrame:
    """The per-operator NVTX ranges that ``torch.autograd.profiler.emit_nvtx`` writes to a ``report``.

    Sources: docs/SOURCES.md#align-operator-ranges

    Returns ``op``, ``seq``, ``op_id`` (Int64, <NA> when absent), ``sizes`` (text, ``""``
    without ``record_shapes``), ``tid``, ``start_ns``, ``dur_ns``, ``depth``.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> operator_ranges(open_capture("nsys_emit_nvtx").nsys)[["op", "seq", "op_id", "depth"]].head(3)
                       op   seq  op_id  depth
    0        aten::conv2d   537      1      2
    1   aten::convolution   537      2      3
    2  aten::_convolution  <NA>      3      4
    """
    n = report.nvtx[report.nvtx["end_ns"].notna()]
    m = n["name"].str.extract(_OP_RANGE)
    keep = m["op_id"].notna() | m["seq"].notna()
    out = pd.DataFrame({"op": m.loc[keep, "op"].str.strip(),
                        "seq": pd.array(pd.to_numeric(m.loc[keep, "seq"]), dtype="Int64"),
                        "op_id": pd.array(pd.to_numeric(m.loc[keep, "op_id"]), dtype="Int64"),
                        "sizes": m.loc[keep, "sizes"].fillna(""),
                        "tid": n.loc[keep, "tid"], "start_ns": n.loc[keep, "start_ns"].astype("int64"),
                        "dur_ns": n.loc[keep, "dur_ns"].astype("int64"), "depth": n.loc[keep, "depth"]})
    return out.reset_index(drop=True)
