"""The profiler's own by-name table, as printed or as rows: the oracle for self/total.

``prof.key_averages().table()``'s text (the reference ``key_averages_tables.txt``) or a live
capture's ``key_averages.json``, as one DataFrame in integer ns and bytes, to check the
analyses against (:mod:`kitlib.analyses.four_measures`). Source: PyTorch
``torch/autograd/profiler_util.py`` (``_format_time``: µs/ms/s; ``_format_memory``: KB/MB/GB
are powers of 1024)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import KitError, KitFileError
from ..units import NS_PER_MS, NS_PER_S, NS_PER_US
from .files import check_regular_file

__all__ = ["read_profiler_table", "profiler_table"]


_TIME_UNITS = {"ns": 1, "us": NS_PER_US, "ms": NS_PER_MS, "s": NS_PER_S}
_MEM_UNITS = {"b": 1, "kb": 2 ** 10, "mb": 2 ** 20, "gb": 2 ** 30, "tb": 2 ** 40}
_COLUMNS = {"Name": "name", "Self CPU %": "self_cpu_pct", "Self CPU": "self_cpu_ns",
            "CPU total %": "cpu_total_pct", "CPU total": "cpu_total_ns", "CPU time avg": "cpu_avg_ns",
            "Self CUDA": "self_cuda_ns", "Self CUDA %": "self_cuda_pct", "CUDA total": "cuda_total_ns",
            "CUDA time avg": "cuda_avg_ns", "CPU Mem": "cpu_mem_bytes", "Self CPU Mem": "self_cpu_mem_bytes",
            "CUDA Mem": "cuda_mem_bytes", "Self CUDA Mem": "self_cuda_mem_bytes", "# of Calls": "calls",
            "Input Shapes": "input_shapes", "Source Location": "source_location", "Total MFLOPs": "total_mflops"}


def _number(text: str, col: str, where: str):
    v = text.strip()
    if v in ("", "--"):
        return np.nan
    try:
        if col.endswith("_pct"):
            return float(v.rstrip("%"))
        if col.endswith("_ns"):
            m = re.fullmatch(r"(-?[\d.]+)\s*(ns|us|ms|s)", v)
            return int(round(float(m.group(1)) * _TIME_UNITS[m.group(2)]))
        if col.endswith("_bytes"):
            m = re.fullmatch(r"(-?[\d.]+)\s*([KMGT]?B)", v, re.I)
            return int(round(float(m.group(1)) * _MEM_UNITS[m.group(2).lower()]))
        if col == "calls":
            return int(v)
        if col == "total_mflops":
            return float(v)
    except (AttributeError, ValueError):
        raise KitError(f"{where}: cannot read {v!r} as a value of column {col!r}") from None
    return v


def read_profiler_table(path, which: int = 0) -> tuple[pd.DataFrame, dict]:
    """Parse table number ``which`` of a text file printed by ``prof.key_averages().table()``.

    Returns
    -------
    table : DataFrame, one row per printed row (columns the table lacks are absent)
        ``name`` (as printed: long ones cut, ending ``...``); ``self_cpu_ns``, ``cpu_total_ns``,
        ``cpu_avg_ns``, ``self_cuda_ns``, ``cuda_total_ns``, ``cuda_avg_ns`` (ns, to the printed
        precision); ``*_pct`` (%); ``*_mem_bytes`` (bytes; the profiler's GB are GiB); ``calls``;
        ``input_shapes``.
    totals : dict
        ``self_cpu_total_ns``, ``self_cuda_total_ns`` from the footer, where printed.

    KitFileError: no file, or too few tables; KitError: a cell unreadable as its column's value."""
    p = Path(path)
    if not p.exists():
        raise KitFileError(p, "no such file (expected a key_averages().table() text file)")
    check_regular_file(p)                 # a folder, a FIFO, a device: refused, never opened
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise KitFileError(p, "not a text file: a key_averages().table() printout is plain text") from None
    tables, i = [], 0
    while i < len(lines) - 2:
        if re.fullmatch(r"-+(  -+)+\s*", lines[i]) and "Name" in lines[i + 1] \
                and re.fullmatch(r"-+(  -+)+\s*", lines[i + 2]):
            j = i + 3
            while j < len(lines) and not re.fullmatch(r"-+(  -+)+\s*", lines[j]):
                j += 1
            foot = lines[j + 1:j + 3]
            tables.append((lines[i], lines[i + 1], lines[i + 3:j], foot))
            i = j + 1
        else:
            i += 1
    if len(tables) <= which:
        raise KitFileError(p, f"holds {len(tables)} profiler table(s), not a table number {which}: expected the "
                              "text printed by torch.profiler's key_averages().table() (a dashed rule, a header "
                              "row starting with 'Name', a dashed rule, rows)")
    rule, header, body, foot = tables[which]
    spans = [m.span() for m in re.finditer(r"-+", rule)]
    heads = re.split(r"\s{2,}", header.strip())   # a header cell can be wider than its rule
    if len(heads) != len(spans):
        raise KitFileError(p, f"table {which}: {len(heads)} header cells for {len(spans)} columns")
    unknown = [h for h in heads if h not in _COLUMNS]
    if unknown:
        raise KitFileError(p, f"table {which} has columns kitlib does not know: {unknown}")
    cols = [_COLUMNS[h] for h in heads]
    recs = []
    for ln, line in enumerate(body):
        rec = {}
        for (a, b), c in zip(spans, cols):
            cell = line[a:b]
            rec[c] = cell.strip() if c in ("name", "input_shapes", "source_location") \
                else _number(cell, c, f"{p}: table {which}, row {ln + 1}")
        recs.append(rec)
    table = pd.DataFrame(recs, columns=cols)
    for c in cols:
        if c.endswith("_ns") or c.endswith("_bytes") or c == "calls":
            table[c] = table[c].astype("Int64")
    totals = {}
    for f in foot:
        m = re.match(r"Self (CPU|CUDA) time total:\s*([\d.]+\s*(?:ns|us|ms|s))", f.strip())
        if m:
            totals[f"self_{m.group(1).lower()}_total_ns"] = _number(m.group(2), "x_ns", str(p))
    return table, totals


def profiler_table(capture) -> tuple[pd.DataFrame, dict]:
    """The profiler's own by-name table of a capture, from the printed text or ``key_averages.json``.

    As :func:`read_profiler_table` (``name, calls, self_cpu_ns, cpu_total_ns, self_cuda_ns,
    cuda_total_ns`` at least); from JSON the names are whole, ``self_cuda_pct`` is computed as the
    printed table does, and the totals are the rows' self CPU and the trace's GPU work, summed.
    KitError: the capture holds neither."""
    if capture.has("key_averages_tables.txt"):
        return read_profiler_table(capture.file("key_averages_tables.txt"))
    if capture.has("key_averages.json") or capture.has("key_averages.json.gz"):
        rows = capture.key_averages()["by_name"]
        t = pd.DataFrame({
            "name": [r["key"] for r in rows], "calls": [int(r["count"]) for r in rows],
            "self_cpu_ns": [round(r["self_cpu_time_total_us"] * 1000) for r in rows],
            "cpu_total_ns": [round(r["cpu_time_total_us"] * 1000) for r in rows],
            "self_cuda_ns": [round(r["self_device_time_total_us"] * 1000) for r in rows],
            "cuda_total_ns": [round(r["device_time_total_us"] * 1000) for r in rows]})
        t = t.astype({c: "Int64" for c in t.columns if c != "name"})
        t = t.sort_values("self_cuda_ns", ascending=False).reset_index(drop=True)
        # as printed: "Self CUDA %" divides by the GPU work's total, annotations push it past 100 %
        total_cuda = int(capture.trace.kernels["dur_ns"].sum())
        t["self_cuda_pct"] = (100 * t["self_cuda_ns"].astype("float64") / total_cuda) if total_cuda else float("nan")
        return t, {"self_cpu_total_ns": int(t["self_cpu_ns"].sum()), "self_cuda_total_ns": total_cuda}
    raise KitError(f"capture {capture.name}: has neither key_averages_tables.txt nor key_averages.json")
