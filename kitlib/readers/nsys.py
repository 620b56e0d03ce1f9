"""Nsight Systems SQLite export → pandas tables, and the ``nsys stats`` reports.

:func:`load_nsys` turns an ``nsys export --type sqlite`` file into an :class:`NsysReport`
whose tables use :mod:`kitlib.readers.trace`'s column names where the meaning is the same
(``name, pid, tid, start_ns, dur_ns, end_ns, correlation, device, stream``; times integer
ns on the session's clock). What comes in is checked here: a value of the wrong type, an
absent required column or an empty ``StringIds`` that events point into raises
:class:`~kitlib.errors.NsysFormatError`; a row that cannot be placed in time is left out
and a name that cannot be read replaced, each counted in :attr:`NsysReport.defects`
with a :class:`~kitlib.errors.KitDataWarning`. :func:`nsys_stats` reproduces the
``nsys stats --format csv`` reports the course reads.
Sources: docs/SOURCES.md#nsys-export
"""
from __future__ import annotations

import sqlite3
import warnings
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import KitDataWarning, KitFileError, NsysFormatError
from ..model.nsys import NsysReport, defect_table, launches_by_correlation  # noqa: F401  (NsysReport's home is the model)
from ..model.nsys import nvtx_gpu_projection, range_nesting  # noqa: F401  (their home is the model)
from .files import check_regular_file
from ..model.sources import as_source
from ..model.schema import DEFECT_COLUMNS, NSYS_COLUMNS, STEP_COLUMNS  # noqa: F401

__all__ = ["NsysReport", "load_nsys", "nsys_stats", "nvtx_gpu_projection", "decode_global_tid",
           "STATS_REPORTS", "DEFECT_COLUMNS"]

# NVTX event types (ENUM_NSYS_EVENT_TYPE in the export).
NVTX_MARK = 34
NVTX_PUSHPOP = 59
NVTX_STARTEND = 60
NVTX_DOMAIN_CREATE = 75
_RANGE_STYLE = {NVTX_PUSHPOP: "PushPop", NVTX_STARTEND: "StartEnd"}

# eventClass of CUPTI_ACTIVITY_KIND_RUNTIME rows (ENUM_NSYS_EVENT_CLASS).
_API_KIND = {0: "runtime", 1: "driver"}

# Used when an export has no ENUM_CUDA_MEMCPY_OPER table (its labels, schema 3.x).
_COPY_KIND = {0: "Unknown", 1: "Host-to-Device", 2: "Device-to-Host", 3: "Host-to-Array",
              4: "Array-to-Host", 5: "Array-to-Array", 6: "Array-to-Device",
              7: "Device-to-Array", 8: "Device-to-Device", 9: "Host-to-Host",
              10: "Peer-to-Peer", 11: "Unified Host-to-Device",
              12: "Unified Device-to-Host", 13: "Unified Device-to-Device"}

# Which export table feeds each NsysReport table.
SOURCE_TABLES = {
    "kernels": "CUPTI_ACTIVITY_KIND_KERNEL",
    "launches": "CUPTI_ACTIVITY_KIND_RUNTIME",
    "copies": "CUPTI_ACTIVITY_KIND_MEMCPY",
    "sets": "CUPTI_ACTIVITY_KIND_MEMSET",
    "nvtx": "NVTX_EVENTS",
    "marks": "NVTX_EVENTS",
    "osrt": "OSRT_API",
    "threads": "ThreadNames",
    "gpus": "TARGET_INFO_GPU",
}

_SQLITE_MAGIC = b"SQLite format 3\x00"


def decode_global_tid(global_tid):
    """Split Nsight's serialized ``globalTid`` / ``globalPid`` (int, array or Series) into
    ``(pid, tid)`` of the same type: ``pid = (id >> 24) & 0xFFFFFF``, ``tid = id & 0xFFFFFF``
    (the VM id above bit 48 dropped).
    Sources: docs/SOURCES.md#nsys-export
    """
    if isinstance(global_tid, pd.Series):
        g = global_tid.astype("Int64")
        return (g // (1 << 24)) % (1 << 24), g % (1 << 24)
    g = np.asarray(global_tid, dtype=np.int64) if not isinstance(global_tid, int) else global_tid
    return (g >> 24) & 0xFFFFFF, g & 0xFFFFFF


# --------------------------------------------------------------------------- loading
def load_nsys(path) -> NsysReport:
    """Read an ``nsys export --type sqlite`` file into an :class:`NsysReport`.

    Parameters
    ----------
    path : str, os.PathLike or kitlib.readers.bundle.Capture
        The ``.sqlite`` export, or an opened ``nsys`` bundle (its ``report.sqlite`` checked
        against the manifest's sha256, read once: ``Capture.nsys``). A bundle *folder*:
        ``kitlib.open_capture(folder).nsys``.

    Returns
    -------
    NsysReport
        Tables described in :class:`NsysReport`; columns a schema version lacks are <NA>.

    Raises
    ------
    KitFileError
        The file does not exist or is a folder.
    NsysFormatError
        Empty, not SQLite (an unexported ``.nsys-rep``), not an Nsight export, truncated or
        corrupt; a column kitlib needs absent, text/blob/fraction in an integer column
        (named, with the first row), or ``StringIds`` empty while events point into it.
    BundleError
        A bundle whose ``report.sqlite`` is missing or differs from its manifest.

    Warns
    -----
    KitDataWarning
        Rows left out (no place in time) or names replaced; counted in :attr:`NsysReport.defects`.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> from kitlib.readers.nsys import load_nsys
    >>> print(load_nsys(open_capture("nsys_8step")).describe())
    report.sqlite (Nsight Systems 2025.3.2.0, 1 GPU(s): NVIDIA H200)
      kernels 4340, API calls 12084, memcpy 541, memset 1612
      NVTX ranges 40, OS runtime calls 2392, threads 289
      absent tables: none
      defects read around: none
    """
    if hasattr(path, "manifest") and hasattr(path, "file") and hasattr(path, "nsys"):
        return path.nsys              # a Capture: its report, read (and its sha256 checked) once
    path = _resolve(path)
    _check_sqlite_file(path)
    uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
    try:
        con = sqlite3.connect(uri, uri=True)
    except sqlite3.Error as e:  # pragma: no cover - file vanished between checks
        raise NsysFormatError(path, f"cannot be opened as SQLite: {e}") from None
    try:
        return _read_report(path, con)
    except (sqlite3.DatabaseError, pd.errors.DatabaseError) as e:   # pandas wraps sqlite's
        cause = str(e.__cause__ or e)
        if cause.startswith(("no such column", "no such table")):   # a schema kitlib missed
            raise NsysFormatError(path, f"the export's schema is not one kitlib knows ({cause}); "
                                        "export it again with `nsys export --type sqlite`") from None
        raise NsysFormatError(path, "the SQLite file is corrupt or truncated "
                                    f"({cause}); export it again with "
                                    "`nsys export --type sqlite`") from None
    finally:
        con.close()


def _resolve(path) -> Path:
    if hasattr(path, "manifest") and hasattr(path, "file"):       # a Capture
        return path.file("report.sqlite")
    p = Path(path)
    if p.is_dir() and (p / "manifest.json").is_file():
        raise KitFileError(p, "is a capture bundle folder, not an export: open it with "
                              f"kitlib.open_capture({str(p)!r}).nsys, or pass the Capture itself")
    return p


def _check_sqlite_file(path: Path) -> None:
    """Clear errors for files SQLite would refuse with a terse message."""
    if path.is_dir():
        raise KitFileError(path, "is a folder, not an Nsight Systems SQLite export")
    size = check_regular_file(path).st_size        # a FIFO or a device: refused, never opened
    if size == 0:
        raise NsysFormatError(path, "the file is empty (0 bytes); was the export interrupted?")
    with open(path, "rb") as f:
        head = f.read(100)
    if not head.startswith(_SQLITE_MAGIC):
        hint = ""
        if path.suffix in (".nsys-rep", ".qdrep"):
            hint = ("; this is an Nsight Systems report, export it first with "
                    f"`nsys export --type sqlite {path.name}`")
        elif head[:1] in (b"{", b"["):
            hint = "; it looks like JSON (a torch.profiler trace? use kitlib.readers.trace)"
        raise NsysFormatError(path, f"not an SQLite database (it starts with {head[:16]!r}){hint}")
    if len(head) < 100:
        raise NsysFormatError(path, f"truncated SQLite file: only {size} bytes, "
                                    "shorter than the 100-byte SQLite header")
    # The header records the page size and, when valid, the page count
    # (https://www.sqlite.org/fileformat.html, "The Database Header").
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    if head[24:28] == head[92:96] and pages and size < page_size * pages:
        raise NsysFormatError(path, f"truncated SQLite file: its header says {page_size * pages} "
                                    f"bytes, the file has {size}; copy or export it again")


def _tables(con) -> set:
    rows = con.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
    return {r[0] for r in rows}


def _columns(con, table) -> set:
    return {r[1] for r in con.execute(f'PRAGMA table_info("{table}")')}


class _SchemaProblem(Exception):
    """A table kitlib cannot read: raised inside the readers, turned into an
    NsysFormatError naming the file in :func:`_read_report`."""

    def __init__(self, table, column, problem, message=None):
        super().__init__(message or f"table {table}, column {column!r}: {problem}")
        self.table, self.column, self.problem = table, column, problem


def _missing_column(table, column, why=None):
    why = why or {"nameId": "which kitlib needs to name each call",
                  "bytes": "which kitlib needs for the bytes each operation moved",
                  "globalTid": "which kitlib needs to tell the threads apart"}.get(
        column, "which kitlib needs to place its events in time and link them")
    return _SchemaProblem(table, column, "absent", f"table {table} has no column {column!r}, "
                          f"{why} (a renamed column, or an export schema kitlib does not know)")


# Columns without which rows cannot be placed, linked or named: refused when absent.
_REQUIRED = {
    "CUPTI_ACTIVITY_KIND_KERNEL": ("start", "end", "correlationId"),
    "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end", "correlationId", "globalTid", "nameId"),
    "CUPTI_ACTIVITY_KIND_DRIVER": ("start", "end", "correlationId", "globalTid", "nameId"),
    "CUPTI_ACTIVITY_KIND_MEMCPY": ("start", "end", "correlationId", "bytes"),
    "CUPTI_ACTIVITY_KIND_MEMSET": ("start", "end", "correlationId", "bytes"),
    "NVTX_EVENTS": ("start", "eventType", "globalTid"),
    "OSRT_API": ("start", "end", "globalTid", "nameId"),
    "StringIds": ("id", "value"),
    "ThreadNames": ("globalTid",),
}

# Columns that hold text; every other column kitlib reads must hold integers (or NULL).
_TEXT_COLUMNS = {"text", "name", "chipName", "busLocation", "uuid"}

# Beyond these (146 years, 13 days) a value is no time, and sums would overflow int64.
_MAX_ABS_TIME_NS = 1 << 62
_MAX_DUR_NS = 1 << 50

"""Columns of :attr:`NsysReport.defects`."""




class _Context:
    """What every table reader shares: the string table, the defects found so
    far, and the tables whose column types were already checked."""

    def __init__(self, con, tables, strings):
        self.con, self.tables, self.strings = con, tables, strings
        self.defects: list = []
        self.typed: set = set()

    def note(self, table, source, column, problem, rowids) -> None:
        rowids = pd.Series(rowids)
        if len(rowids):
            first = pd.to_numeric(rowids, errors="coerce").min()
            self.defects.append((table, source, column, problem, len(rowids),
                                 int(first) if pd.notna(first) else -1))


def _check_types(ctx: _Context, table: str, columns) -> None:
    """Refuse a table where a column kitlib reads as integers holds text, a blob or a
    fraction (SQLite keeps whatever it is given, whatever the declared type)."""
    cols = sorted(c for c in columns if c not in _TEXT_COLUMNS and c != "rowid")
    key = (table, tuple(cols))
    if not cols or key in ctx.typed:
        return
    ctx.typed.add(key)
    bad = "('text', 'blob', 'real')"
    counts = ctx.con.execute("SELECT " + ", ".join(
        f'COALESCE(SUM(typeof("{c}") IN {bad}), 0)' for c in cols) + f' FROM "{table}"').fetchone()
    for c, n in zip(cols, counts):
        if n:
            rowid, value, kind = ctx.con.execute(
                f'SELECT rowid, "{c}", typeof("{c}") FROM "{table}" '
                f'WHERE typeof("{c}") IN {bad} LIMIT 1').fetchone()
            what = {"text": "text", "blob": "binary data", "real": "a fraction"}[kind]
            raise _SchemaProblem(table, c, f"{n} row(s) hold {what} where Nsight Systems writes "
                                           f"an integer (first at rowid {rowid}: {value!r:.60})")


def _select(ctx: _Context, table, want: dict, where: str = "") -> pd.DataFrame:
    """``SELECT`` the columns of ``want`` (``{source name: our name}``) that ``table`` has,
    the others <NA>; an absent :data:`_REQUIRED` column or a bad integer column raises ``_SchemaProblem``.
    """
    have = _columns(ctx.con, table) | {"rowid"}
    for c in _REQUIRED.get(table, ()):
        if c not in have:
            raise _missing_column(table, c)
    got = [c for c in want if c in have] or ["rowid"]
    _check_types(ctx, table, got)
    sql = f'SELECT {", ".join(f"{chr(34)}{c}{chr(34)}" if c != "rowid" else c for c in got)} ' \
          f'FROM "{table}" {where}'
    df = pd.DataFrame(ctx.con.execute(sql).fetchall(), columns=got, dtype=object)
    df = df.rename(columns=want)
    for c in want:
        if c not in have:
            df[want[c]] = pd.NA
        elif c in _TEXT_COLUMNS:           # text columns: bytes (a blob) read as text
            df[want[c]] = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v
                           for v in df[want[c]]]
    return df[list(want.values())]


def _as_int(s: pd.Series) -> pd.Series:
    """int64, or nullable Int64 where a value is missing."""
    s = pd.to_numeric(s, errors="coerce")
    return s.astype("int64") if s.notna().all() else s.astype("Int64")


def _ints(df: pd.DataFrame, *cols) -> pd.DataFrame:
    for c in cols:
        df[c] = _as_int(df[c])
    return df


def _placed(ctx: _Context, df: pd.DataFrame, attr: str, source: str,
            required: dict, open_end: bool = False) -> pd.DataFrame:
    """The rows that can be placed in time and linked (others left out, noted in ``ctx``):
    no NULL in ``required``, ``end >= start``, |time| ≤ 2**62 ns, duration ≤ 2**50 ns; with
    ``open_end`` a NULL ``end_ns`` is kept (Int64 ``end_ns``/``dur_ns``).
    """
    df = _ints(df, "start_ns", "end_ns", *required)
    start, end = df["start_ns"].astype("float64"), df["end_ns"].astype("float64")
    cols = {"start_ns": "start", **({} if open_end else {"end_ns": "end"}), **required}
    checks = [(df[ours].isna(), theirs, "NULL where a value is needed") for ours, theirs in cols.items()] + [
        ((start.abs() > _MAX_ABS_TIME_NS) | (end.abs() > _MAX_ABS_TIME_NS), "start/end",
         "a time beyond +/-2**62 ns, not a timestamp"),
        (end < start, "end", "end before start"),
        ((end - start) > _MAX_DUR_NS, "end", "a duration over 2**50 ns (13 days), longer than any recording")]
    keep = pd.Series(True, index=df.index)
    for bad, column, problem in checks:          # each row noted once, under the first check it fails
        bad = (keep & bad).fillna(False).astype(bool)
        ctx.note(attr, source, column, f"{problem}: row(s) left out", df.loc[bad, "_rowid"])
        keep &= ~bad
    df = df[keep.astype(bool)].copy()
    for c in ("start_ns", *required, *([] if open_end else ["end_ns"])):
        df[c] = df[c].astype("int64")
    df["dur_ns"] = df["end_ns"] - df["start_ns"]
    return df


def _threads_of(df: pd.DataFrame) -> pd.DataFrame:
    """``global_tid`` (int64, already checked) → ``pid, tid``."""
    df["pid"], df["tid"] = decode_global_tid(df["global_tid"].to_numpy(dtype=np.int64))
    return df


def _names(ctx: _Context, df: pd.DataFrame, id_col: str, attr: str, source: str,
           column: str) -> pd.Series:
    """The text of the string ids in ``df[id_col]``; a NULL or dangling id gets a noted,
    bracketed placeholder (never <NA>, which a group-by would drop).
    """
    ids = df[id_col]
    out = pd.Series(ids.map(ctx.strings), index=df.index, dtype=object)
    null = ids.isna()
    dangling = out.isna() & ~null
    ctx.note(attr, source, column, "NULL string id: named '[unnamed]'", df.loc[null, "_rowid"])
    ctx.note(attr, source, column, "string id not in StringIds: named '[string id N]'",
             df.loc[dangling, "_rowid"])
    out[null] = "[unnamed]"
    out[dangling] = [f"[string id {v}]" for v in ids[dangling]]
    return out


# Text (or tuple) columns; of the others these are int64 even when empty, the rest Int64.
_OBJECT = {"name", "short_name", "raw_name", "api", "copy_kind", "src_kind", "dst_kind",
           "domain", "style", "process", "chip", "bus", "uuid", "compute_capability",
           "grid", "block"}
_INT64 = {"start_ns", "dur_ns", "end_ns", "correlation", "pid", "tid", "range_id", "depth"}


def _empty_dtypes(attr: str) -> dict:
    """dtypes of an empty NsysReport table, so that arithmetic and string joins
    on it work as on a full one (``domain + ":" + name`` on no rows)."""
    out = {c: object if c in _OBJECT else "int64" if c in _INT64 else "Int64"
           for c in COLUMNS[attr]}
    if attr == "nvtx":
        out.update(end_ns="Int64", dur_ns="Int64")
    if attr in ("kernels", "copies", "sets"):
        out.update(tid="Int64")
    return out


def _empty(attr: str) -> pd.DataFrame:
    return pd.DataFrame(columns=COLUMNS[attr]).astype(_empty_dtypes(attr))


def _table(df: pd.DataFrame, columns, sort=("start_ns",)) -> pd.DataFrame:
    df = df[list(columns)]
    if sort and len(df):
        df = df.sort_values(list(sort), kind="stable")
    if not len(df):
        attr = next(a for a, c in COLUMNS.items() if c == list(columns))
        return _empty(attr)
    return df.reset_index(drop=True)


# Columns of each NsysReport table (see its docstring for meanings and units).
COLUMNS = NSYS_COLUMNS


def _read_strings(path: Path, con, tables) -> dict:
    have = _columns(con, "StringIds")
    for c in _REQUIRED["StringIds"]:
        if c not in have:
            raise _missing_column("StringIds", c, "which holds every name the other tables "
                                                  "point at")
    ctx = _Context(con, tables, {})
    _check_types(ctx, "StringIds", ["id"])
    return {i: (v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v))
            for i, v in con.execute('SELECT id, value FROM "StringIds"') if v is not None}


# The string ids events point at: an empty StringIds is refused only if one is used.
_NAME_REFERENCES = [("CUPTI_ACTIVITY_KIND_KERNEL", "demangledName"),
                    ("CUPTI_ACTIVITY_KIND_RUNTIME", "nameId"), ("OSRT_API", "nameId"),
                    ("NVTX_EVENTS", "textId"), ("ThreadNames", "nameId")]


def _read_report(path: Path, con) -> NsysReport:
    tables = _tables(con)
    if "StringIds" not in tables or not tables & {*SOURCE_TABLES.values(), "META_DATA_EXPORT"}:
        shown = ", ".join(sorted(tables)[:8]) + (", ..." if len(tables) > 8 else "")
        raise NsysFormatError(path, "an SQLite database, but not an Nsight Systems export "
                                    "(it lacks StringIds and the event tables; its tables: "
                                    f"{shown or 'none'})")
    try:
        strings = _read_strings(path, con, tables)
        if not strings:
            for table, column in _NAME_REFERENCES:
                if table in tables and column in _columns(con, table):
                    n = con.execute(f'SELECT COUNT(*) FROM "{table}" '
                                    f'WHERE "{column}" IS NOT NULL').fetchone()[0]
                    if n:
                        raise _SchemaProblem("StringIds", "value", f"the table is empty, but {n} "
                                             f"row(s) of {table} name themselves through "
                                             f"{column}: no name can be read; export it again")
        meta = {}
        if "META_DATA_EXPORT" in tables and {"name", "value"} <= _columns(con, "META_DATA_EXPORT"):
            meta.update(con.execute('SELECT name, value FROM "META_DATA_EXPORT"').fetchall())
        if "ANALYSIS_DETAILS" in tables and \
                {"startTime", "stopTime"} <= _columns(con, "ANALYSIS_DETAILS"):
            row = con.execute('SELECT startTime, stopTime FROM "ANALYSIS_DETAILS"').fetchone()
            if row and all(isinstance(v, int) for v in row):
                meta["session_start_ns"], meta["session_end_ns"] = row
        ctx = _Context(con, tables, strings)
        t = {attr: _READERS[attr](ctx) if source in tables
             else _empty(attr) for attr, source in SOURCE_TABLES.items()}
    except _SchemaProblem as e:
        raise NsysFormatError(path, str(e)) from None
    # A GPU operation records only its process; the thread is its launch's.
    launch_tid = launches_by_correlation(t["launches"])["tid"]
    for attr in ("kernels", "copies", "sets"):
        df = t[attr]
        if len(df):
            key = pd.MultiIndex.from_arrays([df["pid"], df["correlation"]])
            df["tid"] = pd.array(launch_tid.reindex(key).to_numpy(), dtype="Int64")
    missing = sorted({s for s in SOURCE_TABLES.values() if s not in tables})
    defects = defect_table(ctx.defects)
    if len(defects):
        lines = "; ".join(f"{d.source}.{d.column}: {d.rows} {d.problem}"
                          for d in defects.itertuples())
        warnings.warn(f"{path}: read despite defects ({lines}); see NsysReport.defects",
                      KitDataWarning, stacklevel=3)
    return NsysReport(path=path, **t, missing=missing, meta=meta, defects=defects)




def _read_kernels(ctx) -> pd.DataFrame:
    source = "CUPTI_ACTIVITY_KIND_KERNEL"
    df = _select(ctx, source, {
        "rowid": "_rowid", "start": "start_ns", "end": "end_ns", "globalPid": "global_tid",
        "correlationId": "correlation", "deviceId": "device", "contextId": "context",
        "streamId": "stream", "demangledName": "name_id", "shortName": "short_id",
        "gridX": "gx", "gridY": "gy", "gridZ": "gz", "blockX": "bx", "blockY": "by", "blockZ": "bz",
        "registersPerThread": "registers_per_thread", "staticSharedMemory": "static_smem_bytes",
        "dynamicSharedMemory": "dynamic_smem_bytes"})
    df = _placed(ctx, df, "kernels", source, {"global_tid": "globalPid",
                                               "correlation": "correlationId"})
    df = _ints(_threads_of(df), "device", "context", "stream", "registers_per_thread",
               "static_smem_bytes", "dynamic_smem_bytes")
    df["short_name"] = df["short_id"].map(ctx.strings)
    # The demangled name, else the short one; a kernel with neither gets a placeholder.
    df["name_id"] = df["name_id"].where(df["name_id"].map(ctx.strings).notna(), df["short_id"])
    df["name"] = _names(ctx, df, "name_id", "kernels", source, "demangledName")
    df["grid"] = list(zip(df["gx"], df["gy"], df["gz"]))
    df["block"] = list(zip(df["bx"], df["by"], df["bz"]))
    return _table(df, COLUMNS["kernels"])


def _read_launches(ctx) -> pd.DataFrame:
    want = {"rowid": "_rowid", "start": "start_ns", "end": "end_ns", "globalTid": "global_tid",
            "correlationId": "correlation", "nameId": "name_id", "eventClass": "event_class",
            "returnValue": "return_value"}
    # runtime and driver calls share RUNTIME; a separate DRIVER table is read too
    parts = []
    for t in ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_DRIVER"):
        if t in ctx.tables:
            df = _placed(ctx, _select(ctx, t, want), "launches", t,
                         {"global_tid": "globalTid", "correlation": "correlationId"})
            df["raw_name"] = _names(ctx, df, "name_id", "launches", t, "nameId")
            parts.append(df)
    df = _ints(_threads_of(pd.concat(parts, ignore_index=True)), "return_value")
    df["name"] = df["raw_name"].str.replace(r"_v\d+$", "", regex=True)
    # Without eventClass, the name tells: runtime calls are cuda*, driver calls cu*.
    by_name = np.where(df["raw_name"].str.startswith("cuda"), "runtime", "driver")
    df["api"] = df["event_class"].map(_API_KIND).fillna(pd.Series(by_name, index=df.index))
    return _table(df, COLUMNS["launches"])


def _labels(con, tables, enum_table, fallback=None) -> dict:
    if enum_table in tables and {"id", "label"} <= _columns(con, enum_table):
        return dict(con.execute(f'SELECT id, label FROM "{enum_table}"').fetchall())
    return dict(fallback or {})


_GPU_OP = {"rowid": "_rowid", "start": "start_ns", "end": "end_ns", "globalPid": "global_tid",
           "correlationId": "correlation", "deviceId": "device", "contextId": "context",
           "streamId": "stream", "bytes": "bytes"}
_GPU_OP_REQUIRED = {"global_tid": "globalPid", "correlation": "correlationId"}


def _note_null_bytes(ctx, df, attr, source) -> None:
    ctx.note(attr, source, "bytes", "NULL: the row(s) count in the time reports but not in "
             "cuda_gpu_mem_size_sum", df.loc[df["bytes"].isna(), "_rowid"])


def _read_copies(ctx) -> pd.DataFrame:
    source = "CUPTI_ACTIVITY_KIND_MEMCPY"
    df = _select(ctx, source, {**_GPU_OP, "copyKind": "kind_id", "srcKind": "src_id",
                               "dstKind": "dst_id"})
    df = _placed(ctx, df, "copies", source, _GPU_OP_REQUIRED)
    df = _ints(_threads_of(df), "bytes", "device", "context", "stream")
    _note_null_bytes(ctx, df, "copies", source)
    df["copy_kind"] = df["kind_id"].map(_labels(ctx.con, ctx.tables, "ENUM_CUDA_MEMCPY_OPER",
                                                _COPY_KIND))
    df["copy_kind"] = df["copy_kind"].fillna("Unknown")
    df["name"] = "[CUDA memcpy " + df["copy_kind"] + "]"
    mem = _labels(ctx.con, ctx.tables, "ENUM_CUDA_MEM_KIND")
    df["src_kind"], df["dst_kind"] = df["src_id"].map(mem), df["dst_id"].map(mem)
    return _table(df, COLUMNS["copies"])


def _read_sets(ctx) -> pd.DataFrame:
    source = "CUPTI_ACTIVITY_KIND_MEMSET"
    df = _select(ctx, source, {**_GPU_OP, "value": "value"})
    df = _placed(ctx, df, "sets", source, _GPU_OP_REQUIRED)
    df = _ints(_threads_of(df), "bytes", "value", "device", "context", "stream")
    _note_null_bytes(ctx, df, "sets", source)
    df["name"] = "[CUDA memset]"
    return _table(df, COLUMNS["sets"])


def _nvtx_events(ctx, event_type: int, attr: str) -> pd.DataFrame:
    """NVTX events of one type with ``name``, ``domain``, ``pid`` and ``tid``;
    rows that cannot be placed are left out and noted under ``attr``."""
    source = "NVTX_EVENTS"
    have = _columns(ctx.con, source)
    every = lambda: [-1] * ctx.con.execute(f'SELECT COUNT(*) FROM "{source}" '   # noqa: E731
                                           f'WHERE eventType = {event_type}').fetchone()[0]
    if event_type != NVTX_MARK and "end" not in have:
        ctx.note(attr, source, "end", "column absent: every range reads as never closed, so "
                 "nvtx_sum, the GPU projection and the steps leave them out", every())
    if not {"text", "textId"} & have:
        ctx.note(attr, source, "text/textId", "both columns absent: every range is named ''", every())
    df = _select(ctx, source, {
        "rowid": "_rowid", "start": "start_ns", "end": "end_ns", "eventType": "event_type",
        "text": "text", "textId": "text_id", "globalTid": "global_tid",
        "endGlobalTid": "end_global_tid", "domainId": "domain_id", "category": "category"},
        where=f"WHERE eventType IN ({event_type}, {NVTX_DOMAIN_CREATE})")
    df["range_id"] = df["_rowid"]
    df["event_type"] = _as_int(df["event_type"])
    name = pd.Series(df["text_id"].map(ctx.strings), index=df.index, dtype=object)
    df["name"] = name.fillna(pd.Series(df["text"], index=df.index, dtype=object)).fillna("")
    # a domain is named by its domain-create event, per process; domain 0 has none (":text")
    dom = df[(df["event_type"] == NVTX_DOMAIN_CREATE) & df["global_tid"].notna()]
    dom_pid = decode_global_tid(dom["global_tid"])[0]
    domains = dict(zip(zip(dom_pid, dom["domain_id"]), dom["name"]))
    df = df[df["event_type"] == event_type].copy()
    df = _placed(ctx, df, attr, source, {"global_tid": "globalTid"}, open_end=event_type != NVTX_MARK)
    df = _threads_of(df)
    df["domain"] = [domains.get((p, d), "") for p, d in zip(df["pid"], df["domain_id"])]
    return df


def _read_nvtx(ctx) -> pd.DataFrame:
    r = pd.concat([_nvtx_events(ctx, NVTX_PUSHPOP, "nvtx"),
                   _nvtx_events(ctx, NVTX_STARTEND, "nvtx")], ignore_index=True)
    r["style"] = r["event_type"].map(_RANGE_STYLE)
    r = _ints(r, "category", "range_id")
    r["end_ns"] = pd.array(r["end_ns"], dtype="Int64")          # <NA>: never closed
    r["dur_ns"] = r["end_ns"] - r["start_ns"]
    if len(r) and r["end_ns"].isna().all() and "end" in _columns(ctx.con, "NVTX_EVENTS"):
        ctx.note("nvtx", "NVTX_EVENTS", "end", "NULL in every range: none was closed, so "
                 "nvtx_sum, the GPU projection and the steps are empty", r["range_id"])
    # end_tid only where a start/end range was closed on another thread.
    egt = _as_int(r["end_global_tid"])
    other = egt.notna() & (egt != r["global_tid"])
    r["end_tid"] = decode_global_tid(egt.where(other))[1].astype("Int64")
    # Outer ranges first: by start, then longest (an open range counts as endless).
    r["_end"] = r["end_ns"].astype("float64").fillna(np.inf)
    r = r.sort_values(["start_ns", "_end", "range_id"], ascending=[True, False, True])
    r["depth"], _ = range_nesting(r)
    return _table(r, COLUMNS["nvtx"], sort=None)


def _read_marks(ctx) -> pd.DataFrame:
    return _table(_nvtx_events(ctx, NVTX_MARK, "marks"), COLUMNS["marks"])


def _read_osrt(ctx) -> pd.DataFrame:
    source = "OSRT_API"
    # eventClass 31/32 mark where OS runtime tracing started and stopped: not calls
    where = "WHERE eventClass IS NULL OR eventClass NOT IN (31, 32)" \
        if "eventClass" in _columns(ctx.con, source) else ""
    df = _select(ctx, source, {"rowid": "_rowid", "start": "start_ns", "end": "end_ns",
                               "globalTid": "global_tid", "nameId": "name_id",
                               "returnValue": "return_value", "nestingLevel": "nesting_level"},
                 where=where)
    df = _placed(ctx, df, "osrt", source, {"global_tid": "globalTid"})
    df = _ints(_threads_of(df), "return_value", "nesting_level")
    df["name"] = _names(ctx, df, "name_id", "osrt", source, "nameId")
    return _table(df, COLUMNS["osrt"])


def _read_threads(ctx) -> pd.DataFrame:
    source = "ThreadNames"
    df = _select(ctx, source, {"rowid": "_rowid", "globalTid": "global_tid", "nameId": "name_id",
                               "priority": "priority"})
    df = _as_int(df["global_tid"]).to_frame().join(df.drop(columns="global_tid"))
    null = df["global_tid"].isna()
    ctx.note("threads", source, "globalTid", "NULL where a value is needed: row(s) left out",
             df.loc[null, "_rowid"])
    df = df[~null].copy()
    df["global_tid"] = df["global_tid"].astype("int64")
    df = _threads_of(df)
    df["name"] = _names(ctx, df, "name_id", "threads", source, "nameId")
    df["process"] = None
    if "PROCESSES" in ctx.tables:
        pr = _select(ctx, "PROCESSES", {"pid": "pid", "name": "name"})
        pr = pr[pr["pid"].notna()].drop_duplicates("pid")
        df["process"] = df["pid"].map(pr.set_index(_as_int(pr["pid"]))["name"])
    return _table(_ints(df, "priority"), COLUMNS["threads"], sort=("pid", "tid"))


def _read_gpus(ctx) -> pd.DataFrame:
    df = _select(ctx, "TARGET_INFO_GPU", {
        "id": "device", "cuDevice": "cuda_device", "name": "name", "chipName": "chip",
        "busLocation": "bus", "smCount": "sm_count", "totalMemory": "memory_bytes",
        "memoryBandwidth": "memory_bandwidth_bytes_per_s", "clockRate": "clock_hz",
        "l2CacheSize": "l2_cache_bytes", "computeMajor": "major", "computeMinor": "minor",
        "uuid": "uuid"})
    df["compute_capability"] = [f"{a}.{b}" if pd.notna(a) else None
                                for a, b in zip(df["major"], df["minor"])]
    df = _ints(df, "device", "cuda_device", "sm_count", "memory_bytes",
               "memory_bandwidth_bytes_per_s", "clock_hz", "l2_cache_bytes")
    return _table(df, COLUMNS["gpus"], sort=("device",))


_READERS = {"kernels": _read_kernels, "launches": _read_launches, "copies": _read_copies,
            "sets": _read_sets, "nvtx": _read_nvtx, "marks": _read_marks, "osrt": _read_osrt,
            "threads": _read_threads, "gpus": _read_gpus}


# --------------------------------------------------------------------------- nsys stats
def _summary(values: pd.Series, keys: dict) -> pd.DataFrame:
    """Per group (``keys``: ``{output column: Series}``), as ``nsys stats``: total, count,
    mean, median, min, max, sample std (0 for one value); largest total first.
    """
    g = values.astype("float64").groupby([k.rename(c) for c, k in keys.items()])
    s = pd.DataFrame({"total": g.sum(), "count": g.size(), "avg": g.mean(), "med": g.median(),
                      "min": g.min(), "max": g.max(), "std": g.std(ddof=1).fillna(0.0)})
    s = s.astype({"total": "int64", "count": "int64", "min": "int64", "max": "int64"})
    s = s.reset_index()
    return s.sort_values(["total", *keys], ascending=[False] + [True] * len(keys),
                         kind="stable").reset_index(drop=True)


def _time_sum(durations: pd.Series, keys: dict, count: str) -> pd.DataFrame:
    """The layout of nvtx_sum, cuda_gpu_kern_sum, cuda_api_sum, osrt_sum, ..."""
    s = _summary(durations, keys)
    grand = s["total"].sum()
    out = pd.DataFrame({
        "Time (%)": 100.0 * s["total"] / grand if grand else 0.0,
        "Total Time (ns)": s["total"], count: s["count"], "Avg (ns)": s["avg"],
        "Med (ns)": s["med"], "Min (ns)": s["min"], "Max (ns)": s["max"], "StdDev (ns)": s["std"]})
    for c in keys:
        out[c] = s[c]
    return out


def _nvtx_sum(rep):
    r = rep.nvtx[rep.nvtx["end_ns"].notna()]
    return _time_sum(r["dur_ns"], {"Style": r["style"], "Range": r["domain"] + ":" + r["name"]},
                     "Instances")


def _kern_sum(rep):
    return _time_sum(rep.kernels["dur_ns"], {"Name": rep.kernels["name"]}, "Instances")


def _api_sum(rep):
    # nsys stats removes a version suffix only when it has four digits
    # (cudaLaunchKernel_v7000 -> cudaLaunchKernel, while cudaLaunchKernelExC_v11060
    # and cuGetProcAddress_v2 stay): what the reference CSV shows.
    a = rep.launches
    return _time_sum(a["dur_ns"], {"Name": a["raw_name"].str.replace(r"_v\d{4}$", "", regex=True)},
                     "Num Calls")


def _osrt_sum(rep):
    return _time_sum(rep.osrt["dur_ns"], {"Name": rep.osrt["name"]}, "Num Calls")


def _mem_ops(rep) -> pd.DataFrame:
    cols = ["name", "dur_ns", "bytes"]
    return pd.concat([rep.copies[cols], rep.sets[cols]], ignore_index=True)


def _mem_time_sum(rep):
    m = _mem_ops(rep)
    return _time_sum(m["dur_ns"], {"Operation": m["name"]}, "Count")


def _mem_size_sum(rep):
    m = _mem_ops(rep)
    m = m[m["bytes"].notna()]                 # NULL bytes: counted in NsysReport.defects
    s = _summary(m["bytes"], {"Operation": m["name"]})
    mb = 1e6                                          # nsys stats' MB are 10**6 bytes
    return pd.DataFrame({
        "Total (MB)": s["total"] / mb, "Count": s["count"], "Avg (MB)": s["avg"] / mb,
        "Med (MB)": s["med"] / mb, "Min (MB)": s["min"] / mb, "Max (MB)": s["max"] / mb,
        "StdDev (MB)": s["std"] / mb, "Operation": s["Operation"]})


def _nvtx_gpu_proj_sum(rep):
    p = nvtx_gpu_projection(rep)
    s = _summary(p["proj_dur_ns"], {"Range": p["range"], "Style": p["style"]})
    more = p.groupby(["range", "style"]).agg(
        range_total=("dur_ns", "sum"), ops=("gpu_ops", "sum"), avg_ops=("gpu_ops", "mean"),
        lvl=("level", "mean"), child=("children", "mean"))
    more = more.reindex(pd.MultiIndex.from_frame(s[["Range", "Style"]])).reset_index(drop=True)
    return pd.DataFrame({
        "Range": s["Range"], "Style": s["Style"], "Total Proj Time (ns)": s["total"],
        "Total Range Time (ns)": more["range_total"].astype("int64"),
        "Range Instances": s["count"], "Proj Avg (ns)": s["avg"], "Proj Med (ns)": s["med"],
        "Proj Min (ns)": s["min"], "Proj Max (ns)": s["max"], "Proj StdDev (ns)": s["std"],
        "Total GPU Ops": more["ops"].astype("int64"), "Avg GPU Ops": more["avg_ops"],
        "Avg Range Lvl": more["lvl"], "Avg Num Child": more["child"]})


STATS_REPORTS = {
    "nvtx_sum": _nvtx_sum,
    "nvtx_gpu_proj_sum": _nvtx_gpu_proj_sum,
    "cuda_gpu_kern_sum": _kern_sum,
    "cuda_api_sum": _api_sum,
    "cuda_gpu_mem_time_sum": _mem_time_sum,
    "cuda_gpu_mem_size_sum": _mem_size_sum,
    "osrt_sum": _osrt_sum,
}
"""The ``nsys stats`` reports :func:`nsys_stats` reproduces, by name."""

# Digits nsys stats prints after the decimal point; other columns are integers or text.
_DIGITS = {"Time (%)": 1, "Avg (ns)": 1, "Med (ns)": 1, "StdDev (ns)": 1, "Proj Avg (ns)": 1,
           "Proj Med (ns)": 1, "Proj StdDev (ns)": 1, "Avg GPU Ops": 1, "Avg Range Lvl": 1,
           "Avg Num Child": 1, "Total (MB)": 3, "Avg (MB)": 3, "Med (MB)": 3, "Min (MB)": 3,
           "Max (MB)": 3, "StdDev (MB)": 3}


def nsys_stats(report, name: str, rounded: bool = True) -> pd.DataFrame:
    """Reproduce one ``nsys stats --format csv --report NAME`` table.

    Parameters
    ----------
    report : NsysReport or path
        A loaded report, or anything :func:`load_nsys` accepts.
    name : str
        One of ``nvtx_sum``, ``nvtx_gpu_proj_sum``, ``cuda_gpu_kern_sum``,
        ``cuda_api_sum``, ``cuda_gpu_mem_time_sum``, ``cuda_gpu_mem_size_sum``,
        ``osrt_sum``.
    rounded : bool, default True
        Round fractional columns the way ``nsys stats`` prints them (one
        decimal, three for MB, halves rounded up), so that the result equals
        the CSV read back with :func:`pandas.read_csv`. ``False`` keeps full
        precision.

    Returns
    -------
    DataFrame
        The report's own column headers, with their units, one row per name,
        largest total first (ties in name order):

        - time summaries (``nvtx_sum``, ``cuda_gpu_kern_sum``, ``cuda_api_sum``,
          ``cuda_gpu_mem_time_sum``, ``osrt_sum``): ``Time (%)`` (share of the
          report's summed time), ``Total Time (ns)``, a count (``Instances``,
          ``Num Calls`` or ``Count``), ``Avg (ns)``, ``Med (ns)`` (mean of the
          two middle values for an even count), ``Min (ns)``, ``Max (ns)``,
          ``StdDev (ns)`` (sample standard deviation, n - 1; 0 for one
          instance), then the name: ``Name`` (kernels: demangled; API calls: a
          four-digit ``_vNNNN`` suffix removed), ``Operation`` (``"[CUDA memcpy
          Host-to-Device]"``, ``"[CUDA memset]"``), or ``Style`` and ``Range``
          for NVTX (``"domain:text"``, so ``":forward"`` in the default domain).
        - ``cuda_gpu_mem_size_sum``: the same statistics of bytes moved, in MB
          (10**6 bytes): ``Total (MB)``, ``Count``, ``Avg (MB)``, ... ``Operation``.
        - ``nvtx_gpu_proj_sum``: per range name and style, over the instances
          that have a projection (:func:`nvtx_gpu_projection`): ``Total Proj
          Time (ns)``, ``Total Range Time (ns)`` (their CPU durations), ``Range
          Instances``, ``Proj Avg/Med/Min/Max/StdDev (ns)``, ``Total GPU Ops``,
          ``Avg GPU Ops``, ``Avg Range Lvl`` and ``Avg Num Child``.

        A report whose source tables the export lacks comes back empty, with
        its columns.

    Raises
    ------
    ValueError
        ``name`` is not one of the reports above.
    KitFileError, NsysFormatError
        When ``report`` is a path that :func:`load_nsys` cannot read.

    Notes
    -----
    Column meanings: Nsight Systems "Post-Collection Analysis Guide",
    statistical reports shipped with Nsight Systems. Checked number for number
    against the CSVs ``nsys stats`` 2025.3 wrote for ``data/reference/nsys_8step``
    and ``data/reference/nsys_emit_nvtx`` (tests/readers/test_nsys.py).
    """
    if name not in STATS_REPORTS:
        raise ValueError(f"unknown nsys stats report {name!r}; known: {', '.join(STATS_REPORTS)}")
    report = as_source(report, NsysReport, load_nsys)
    out = STATS_REPORTS[name](report)
    if rounded:
        for c, d in _DIGITS.items():
            if c in out.columns:
                out[c] = _round_half_up(out[c], d)
    return out


def _round_half_up(values: pd.Series, digits: int) -> pd.Series:
    """Round like SQLite's ``round()``, which nsys stats uses: halves go up
    (``331.25 -> 331.3``), where Python's ``round`` gives ``331.2``."""
    q = Decimal(1).scaleb(-digits)
    return pd.Series([float(Decimal(float(v)).quantize(q, ROUND_HALF_UP)) for v in values],
                     index=values.index, dtype="float64")
