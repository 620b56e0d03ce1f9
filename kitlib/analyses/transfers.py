"""Copies: how many bytes, how long, how fast against the link, and hidden under kernels or not.

Host memory is *pinned* (read directly by the copy engine; ``non_blocking=True`` is
asynchronous) or *pageable* (staged by the driver, synchronous). ``bytes ÷ dur_ns`` is GB/s
(decimal, as datasheets write link speeds). ``source`` is a Trace or an NsysReport; ``events``
and ``steps`` may pass a :func:`~kitlib.analyses.gpu_idle.device_events` table and a step table.

Sources: docs/SOURCES.md#transfers-links, docs/SOURCES.md#transfers-bandwidth
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .gpu_idle import GpuIdleError, checked_events, source_name
from ..model.window import step_of

__all__ = ["LINKS", "copies", "copy_summary", "device_name"]

#: Nominal peaks per direction, GB/s (10⁹ bytes/s), by device and path (DtoD: half the HBM bandwidth).
LINKS = {
    "H200": {"HtoD": ("PCIe Gen5 x16", 64.0), "DtoH": ("PCIe Gen5 x16", 64.0),
             "PtoP": ("NVLink 4", 450.0), "DtoD": ("HBM3e, read + write", 2400.0)},
    "B300": {"HtoD": ("PCIe Gen6 x16", 128.0), "DtoH": ("PCIe Gen6 x16", 128.0),
             "PtoP": ("NVLink 5", 900.0), "DtoD": ("HBM3e, read + write", 4000.0)},
    "H100": {"HtoD": ("PCIe Gen5 x16", 64.0), "DtoH": ("PCIe Gen5 x16", 64.0),
             "PtoP": ("NVLink 4", 450.0), "DtoD": ("HBM3, read + write", 1675.0)},
    "A100": {"HtoD": ("PCIe Gen4 x16", 32.0), "DtoH": ("PCIe Gen4 x16", 32.0),
             "PtoP": ("NVLink 3", 300.0), "DtoD": ("HBM2e, read + write", 1019.5)},
    "V100": {"HtoD": ("PCIe Gen3 x16", 16.0), "DtoH": ("PCIe Gen3 x16", 16.0),
             "PtoP": ("NVLink 2", 150.0), "DtoD": ("HBM2, read + write", 450.0)},
}


def device_name(source) -> str | None:
    """The GPU's product name as the recording gives it (``"NVIDIA H200"``), or None.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> device_name(open_capture("nsys_8step").nsys)
    'NVIDIA H200'
    """
    names = source.device_names() if hasattr(source, "device_names") else []
    return names[0] if names else None


def _links_for(name: str | None) -> tuple[str | None, dict]:
    for key, links in LINKS.items():
        if name and key in name.upper():
            return key, links
    return None, {}


def _overlap_with(s: np.ndarray, e: np.ndarray, ks: np.ndarray, ke: np.ndarray) -> np.ndarray:
    """For each [s, e): its time covered by the union of the [ks, ke) intervals."""
    from .intervals import covered_before, union_arrays
    if not len(s):
        return np.zeros(0, np.int64)
    both = np.concatenate([s, ks]) if len(ks) else s
    origin = both.min()
    us, ue = union_arrays(ks - origin, ke - origin)
    if not len(us):
        return np.zeros(len(s), np.int64)
    return (covered_before(us, ue, e - origin) - covered_before(us, ue, s - origin)).astype(np.int64)


def copies(source, device: str | None = None, events=None, steps=None) -> pd.DataFrame:
    """One row per copy: direction and memory, bytes, duration, GB/s against the link, and
    the time it ran beside a kernel. ``device``: a key of :data:`LINKS` (default from
    :func:`device_name`).

    Returns, in time order: ``step`` (Int64, of the launch's start, else the copy's),
    ``copy_kind``, ``host_memory`` (``Pinned``/``Pageable`` or None), ``src_memory,
    dst_memory, device, stream, start_ns, dur_ns`` (ns), ``bytes`` (Int64), ``gb_per_s`` (the
    trace's own, else bytes ÷ ``dur_ns``; NaN if unknown), ``link``, ``peak_gb_per_s``,
    ``share_of_peak`` (0-1), ``kernel_overlap_ns`` (beside a kernel on the device).

    Raises GpuIdleError without GPU events or without copies.

    Examples
    --------
    >>> from kitlib.readers.trace import trace_from_json
    >>> cp = {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7,
    ...       "ts": 10, "dur": 2, "args": {"stream": 7, "device": 0, "correlation": 1, "bytes": 100000}}
    >>> copies(trace_from_json({"traceEvents": [cp]}), device="H200")[
    ...     ["copy_kind", "host_memory", "bytes", "dur_ns", "gb_per_s", "peak_gb_per_s"]]
      copy_kind host_memory   bytes  dur_ns  gb_per_s  peak_gb_per_s
    0      HtoD      Pinned  100000    2000      50.0           64.0
    """
    ev = checked_events(source, events)
    cp = ev[ev["kind"] == "memcpy"]
    if cp.empty:
        kinds = ", ".join(f"{n:,} {k}" for k, n in ev["kind"].value_counts().items())
        raise GpuIdleError(f"{source_name(source)}: no copies (memcpy) among its GPU events ({kinds}): "
                           "nothing to measure a transfer on")
    name = device if device is not None else device_name(source)
    key, links = _links_for(name)
    kern = ev[ev["kind"] == "kernel"]
    overlap = np.zeros(len(cp), np.int64)
    dev_c = cp["device"].fillna(-1).to_numpy(np.int64)
    dev_k = kern["device"].fillna(-1).to_numpy(np.int64)
    for dv in np.unique(dev_c):
        m, mk = dev_c == dv, dev_k == dv
        overlap[m] = _overlap_with(cp["start_ns"].to_numpy(np.int64)[m], cp["end_ns"].to_numpy(np.int64)[m],
                                   kern["start_ns"].to_numpy(np.int64)[mk], kern["end_ns"].to_numpy(np.int64)[mk])
    ck = cp["copy_kind"].to_numpy(dtype=object)
    host = np.where(ck == "HtoD", cp["src_memory"].to_numpy(dtype=object),
                    np.where(ck == "DtoH", cp["dst_memory"].to_numpy(dtype=object), None))
    b = cp["bytes"].to_numpy(dtype="float64", na_value=np.nan)
    d = cp["dur_ns"].to_numpy(dtype="float64")
    own = cp["bandwidth_gb_per_s"].to_numpy(dtype="float64", na_value=np.nan) \
        if "bandwidth_gb_per_s" in cp.columns else np.full(len(cp), np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        # the profiler's own figure where the trace has it (a whole-µs dur_ns reads high)
        gbps = np.where(~np.isnan(own), own, np.where(d > 0, b / d, np.nan))
    link = [links.get(k, (None, np.nan))[0] if isinstance(k, str) else None for k in ck]
    peak = np.array([links.get(k, (None, np.nan))[1] if isinstance(k, str) else np.nan for k in ck], dtype="float64")
    when = cp["launch_start_ns"].fillna(cp["start_ns"]).to_numpy(dtype=np.int64)
    out = pd.DataFrame({
        "step": step_of(when, source.steps if steps is None else steps), "copy_kind": ck, "host_memory": host,
        "src_memory": cp["src_memory"].to_numpy(dtype=object), "dst_memory": cp["dst_memory"].to_numpy(dtype=object),
        "device": cp["device"].to_numpy(), "stream": cp["stream"].to_numpy(),
        "start_ns": cp["start_ns"].to_numpy(np.int64), "dur_ns": cp["dur_ns"].to_numpy(np.int64),
        "bytes": cp["bytes"].to_numpy(), "gb_per_s": gbps, "link": link, "peak_gb_per_s": peak,
        "share_of_peak": gbps / peak, "kernel_overlap_ns": overlap})
    out = out.sort_values("start_ns", kind="stable").reset_index(drop=True)
    out.attrs["device"] = (f"{name}: datasheet peaks of the {key}" if key else
                           f"{name or 'unknown GPU'}: no datasheet peak in kitlib.analyses.transfers.LINKS "
                           f"(pass device= one of {', '.join(LINKS)} to compare with one)")
    return out


def copy_summary(source, by=("copy_kind", "host_memory"), device: str | None = None,
                 events=None, steps=None) -> pd.DataFrame:
    """:func:`copies` grouped ``by`` (default direction and host memory; add ``"step"`` for
    per step).

    Returns one row per group: ``copies, bytes, dur_ns`` (summed), ``gb_per_s`` (over the
    copies with known bytes), ``gb_per_s_max``, ``link, peak_gb_per_s, share_of_peak``,
    ``kernel_overlap_ns`` (summed), ``kernel_overlap_share`` (÷ ``dur_ns``).

    Raises GpuIdleError as :func:`copies`, or for a ``by`` column it lacks.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> copy_summary(open_capture("nsys_8step").nsys)[["copy_kind", "host_memory", "copies", "gb_per_s"]]
      copy_kind host_memory  copies    gb_per_s
    0      DtoD         NaN     205  492.220926
    1      HtoD    Pageable     320   11.411576
    2      HtoD      Pinned      16   55.307311
    """
    cp = copies(source, device=device, events=events, steps=steps)
    by = list(by)
    bad = [c for c in by if c not in cp.columns]
    if bad:
        raise GpuIdleError(f"{source_name(source)}: cannot group copies by {bad}; columns: {list(cp.columns)}")
    cp["bytes_f"] = cp["bytes"].astype("float64")
    # each copy's time as its GB/s gives it (the profiler's exact ns where it has its own figure)
    with np.errstate(divide="ignore", invalid="ignore"):
        gb = cp["gb_per_s"].to_numpy(dtype="float64")
        cp["time_f"] = np.where(gb > 0, cp["bytes_f"].to_numpy() / gb, cp["dur_ns"].to_numpy(dtype="float64"))
    cp.loc[cp["bytes_f"].isna(), "time_f"] = np.nan
    g = cp.groupby(by, dropna=False, sort=True)
    out = pd.DataFrame({
        "copies": g.size(),
        "bytes": g["bytes"].sum(min_count=1).astype("Int64"),
        "dur_ns": g["dur_ns"].sum().astype("int64"),
        "gb_per_s_max": g["gb_per_s"].max(),
        "link": g["link"].first(),
        "peak_gb_per_s": g["peak_gb_per_s"].first(),
        "kernel_overlap_ns": g["kernel_overlap_ns"].sum().astype("int64"),
        "bytes_f": g["bytes_f"].sum(min_count=1),
        "time_f": g["time_f"].sum(min_count=1),
    }).reset_index()
    with np.errstate(divide="ignore", invalid="ignore"):
        t = out.pop("time_f")
        out["gb_per_s"] = np.where(t > 0, out.pop("bytes_f") / t, np.nan)
        out["share_of_peak"] = out["gb_per_s"] / out["peak_gb_per_s"]
        out["kernel_overlap_share"] = np.where(out["dur_ns"] > 0, out["kernel_overlap_ns"] / out["dur_ns"], np.nan)
    cols = by + ["copies", "bytes", "dur_ns", "gb_per_s", "gb_per_s_max", "link", "peak_gb_per_s",
                 "share_of_peak", "kernel_overlap_ns", "kernel_overlap_share"]
    out = out[cols]
    out.attrs.update(cp.attrs)
    return out
