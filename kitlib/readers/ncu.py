"""Nsight Compute CSV reports (``ncu --csv --page details``) as a tidy table.

Sources: docs/SOURCES.md#ncu-format

One row per kernel × metric; ``==PROF==`` lines before the table are skipped; rows holding a
rule's advice go to :func:`load_ncu_rules`. ``path`` is the CSV, plain or gzipped."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd

from .files import read_bytes_maybe_gz
from ..errors import KitFileError

__all__ = ["load_ncu_csv", "load_ncu_rules", "ncu_wide", "NcuFormatError"]

_REQUIRED = ("ID", "Kernel Name", "Section Name", "Metric Name", "Metric Unit", "Metric Value")


class NcuFormatError(KitFileError):
    """The file is not an Nsight Compute ``--csv --page details`` report."""


def _rows(path: Path) -> list[dict]:
    raw = read_bytes_maybe_gz(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise NcuFormatError(path, f"not UTF-8 text (byte {e.start}); is this an ncu CSV?") from None
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID",') or l.startswith("ID,")), None)
    if start is None:
        first = lines[0][:80] if lines else ""
        raise NcuFormatError(path, "not an Nsight Compute CSV report: no header row starting with "
                                   f"\"ID\" (first line: {first!r}); write one with "
                                   "ncu --csv --page details ...")
    reader = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    missing = [c for c in _REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise NcuFormatError(path, f"CSV header lacks {missing}: not an ncu --page details report "
                                   "(a --page raw export has one column per metric instead)")
    return list(reader)


def _number(text: str) -> float:
    t = (text or "").replace(",", "").strip()
    try:
        return float(t)
    except ValueError:
        return np.nan


def load_ncu_csv(path) -> pd.DataFrame:
    """Read an ``ncu --csv --page details`` report into one row per kernel and metric.

    Returns a DataFrame:
    ``kernel_id`` (ncu's ``ID``, profiling order), ``kernel_name``, ``block_size``,
    ``grid_size`` (as written, ``"(512, 1, 1)"``), ``section``, ``metric``, ``unit`` (``%``,
    ``ns``, ``byte`` …, ``""`` when none), ``value`` (float; NaN for text), ``value_text``.

    NcuFormatError: no ``"ID"`` header row, missing columns, no metric rows; KitFileError: a
    missing, empty or truncated file."""
    path = Path(path)
    rows = [r for r in _rows(path) if (r.get("Metric Name") or "").strip()]
    if not rows:
        raise NcuFormatError(path, "the report holds no metric rows (was the kernel filter "
                                   "-k/--kernel-name matching nothing?)")
    df = pd.DataFrame({
        "kernel_id": [int(r["ID"]) for r in rows],
        "kernel_name": [r["Kernel Name"] for r in rows],
        "block_size": [r.get("Block Size", "") for r in rows],
        "grid_size": [r.get("Grid Size", "") for r in rows],
        "section": [r["Section Name"] for r in rows],
        "metric": [r["Metric Name"] for r in rows],
        "unit": [r["Metric Unit"] or "" for r in rows],
        "value": [_number(r["Metric Value"]) for r in rows],
        "value_text": [r["Metric Value"] for r in rows],
    })
    return df


def load_ncu_rules(path) -> pd.DataFrame:
    """Nsight Compute's own advice per kernel, from the same report's rule rows: ``kernel_id,
    section, rule, rule_type`` (``OPT``, ``WRN``, ``INF`` …), ``description``,
    ``estimated_speedup_type``, ``estimated_speedup`` (float, %)."""
    path = Path(path)
    rows = [r for r in _rows(path) if (r.get("Rule Name") or "").strip()]
    return pd.DataFrame({
        "kernel_id": [int(r["ID"]) for r in rows],
        "section": [r["Section Name"] for r in rows],
        "rule": [r["Rule Name"] for r in rows],
        "rule_type": [r.get("Rule Type", "") for r in rows],
        "description": [r.get("Rule Description", "") for r in rows],
        "estimated_speedup_type": [r.get("Estimated Speedup Type", "") for r in rows],
        "estimated_speedup": [_number(r.get("Estimated Speedup", "")) for r in rows],
    }, columns=["kernel_id", "section", "rule", "rule_type", "description",
                "estimated_speedup_type", "estimated_speedup"])


def ncu_wide(tidy: pd.DataFrame, metrics=None) -> pd.DataFrame:
    """:func:`load_ncu_csv`'s table as ncu's details page lays it out: index ``(section, metric,
    unit)``, a column ``kernel <id>`` each; ``metrics`` keeps those, in that order."""
    w = tidy.pivot_table(index=["section", "metric", "unit"], columns="kernel_id", values="value",
                         aggfunc="first", sort=False)
    w.columns = [f"kernel {c}" for c in w.columns]
    if metrics is not None:
        w = w[w.index.get_level_values("metric").isin(metrics)]
        order = {m: i for i, m in enumerate(metrics)}
        w = w.iloc[np.argsort([order[m] for m in w.index.get_level_values("metric")], kind="stable")]
    return w
