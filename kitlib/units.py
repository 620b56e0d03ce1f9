"""Units for display: the kit's one home for ns -> µs/ms/s and bytes -> MiB/GiB.

Inside kitlib every time is an integer in nanoseconds (``*_ns``) and every size an
integer in bytes (``*_bytes``), so the tools' own digits survive (DESIGN.md, data
contracts). Converting is for showing a number to a person: a table, a plot axis, a
sentence. Do it here, at the edge, so that every place agrees on the factors and the
column names carry the unit they hold.

Binary prefixes for memory: 1 GiB = 2**30 bytes, as ``torch.cuda.memory_allocated``
reports bytes and the profiler's printed tables divide by 1024 (their "GB" is GiB).
"""
from __future__ import annotations

import pandas as pd

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
MIB = 1 << 20
GIB = 1 << 30
GB = 1_000_000_000   # decimal, as Nsight Systems and most vendor sheets write GB

_TIME = {"ns": 1, "us": NS_PER_US, "ms": NS_PER_MS, "s": NS_PER_S}
_SIZE = {"bytes": 1, "kib": 1 << 10, "mib": MIB, "gib": GIB}


def ns_to_us(ns):
    """Nanoseconds to microseconds (float; works on numbers, numpy arrays and pandas objects)."""
    return ns / NS_PER_US


def ns_to_ms(ns):
    """Nanoseconds to milliseconds (float; works on numbers, numpy arrays and pandas objects)."""
    return ns / NS_PER_MS


def ns_to_s(ns):
    """Nanoseconds to seconds (float)."""
    return ns / NS_PER_S


def us_to_ms(us):
    """Microseconds (the profiler's ``key_averages`` unit) to milliseconds."""
    return us / 1_000


def ms_to_ns(ms) -> int:
    """Milliseconds (a quoted figure, say) to whole nanoseconds, rounded."""
    return round(ms * NS_PER_MS)


def bytes_to_mib(n):
    """Bytes to MiB (2**20 bytes)."""
    return n / MIB


def bytes_to_gib(n):
    """Bytes to GiB (2**30 bytes)."""
    return n / GIB


def bytes_to_gb(n):
    """Bytes to decimal GB (10**9 bytes), for axes that sit beside decimal figures."""
    return n / GB


def in_units(table: pd.DataFrame, time: str = "ms", size: str | None = None) -> pd.DataFrame:
    """A copy of ``table`` for display, with unit-suffixed columns converted and renamed.

    Parameters
    ----------
    table : DataFrame
        Any kitlib table: columns ending in ``_ns`` hold nanoseconds, ``_bytes`` bytes.
    time : {"ns", "us", "ms", "s"}
        Unit for every ``*_ns`` column, which becomes ``*_<time>`` (float).
    size : {"bytes", "kib", "mib", "gib"}, optional
        Unit for every ``*_bytes`` column (``*_<size>``); None leaves them as bytes.

    Returns
    -------
    DataFrame
        Same rows and column order; nullable integer columns (<NA>) stay <NA>.

    Raises
    ------
    ValueError
        An unknown unit.
    """
    if time not in _TIME:
        raise ValueError(f"time unit must be one of {', '.join(_TIME)}, not {time!r}")
    if size is not None and size not in _SIZE:
        raise ValueError(f"size unit must be one of {', '.join(_SIZE)}, not {size!r}")
    out = table.copy()
    renames = {}
    for c in out.columns:
        if not isinstance(c, str):
            continue
        if c.endswith("_ns") and time != "ns":
            out[c] = out[c].astype("Float64" if str(out[c].dtype) == "Int64" else "float64") / _TIME[time]
            renames[c] = c[:-3] + "_" + time
        elif size is not None and c.endswith("_bytes") and size != "bytes":
            out[c] = out[c].astype("Float64" if str(out[c].dtype) == "Int64" else "float64") / _SIZE[size]
            renames[c] = c[:-6] + "_" + size
    return out.rename(columns=renames)
