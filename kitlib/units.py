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


#: The longest line the kit prints (characters): a notebook's output shows about 105 of
#: 13 px monospace whole in JupyterLab at 1280 x 800 with the file browser open (848 px), and
#: breaks a longer line anywhere, mid-word (issue 40); a few are kept in hand, as for code.
PRINT_CHARS = 95


def wrapped(text, width: int = PRINT_CHARS, indent: str = "    ", line_end: str = "") -> str:
    """``text`` for ``print``: each line longer than ``width`` broken at spaces, never inside a
    word, its continuation lines indented by ``indent`` beyond the line's own indentation.

    The kit's one way to fit a sentence, a list or a command to a notebook's width (a
    sentence is the same words; only where the line breaks moves). ``line_end`` is written at
    the end of each broken line but the last (``" \\\\"`` for a shell command that can still be
    pasted). A single word longer than the room left stays whole, on a line of its own.

    Examples
    --------
    >>> print(wrapped("first data_load 535.258 ms; the texts give no later ranges", 30))
    first data_load 535.258 ms;
        the texts give no later
        ranges
    >>> print(wrapped("ncu --clock-control none -k regex:conv --launch-count 3", 30, line_end=" \\\\"))
    ncu --clock-control none -k \\
        regex:conv \\
        --launch-count 3
    >>> wrapped("short\\n  two lines", 30)
    'short\\n  two lines'
    """
    import textwrap
    out = []
    for line in str(text).split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[:len(line) - len(line.lstrip(" "))]
        parts = textwrap.wrap(line[len(lead):], width - len(line_end), initial_indent=lead,
                              subsequent_indent=lead + indent, break_long_words=False, break_on_hyphens=False)
        out.append((line_end + "\n").join(parts or [line]))
    return "\n".join(out)


def print_wrapped(*values, sep: str = " ", width: int = PRINT_CHARS, indent: str = "    ",
                  line_end: str = "") -> None:
    """``print(*values, sep=sep)``, its lines :func:`wrapped` to a notebook's width.

    Examples
    --------
    >>> print_wrapped("in the step times:", "uninstrumented median 12.0 ms (30 steps)", width=30)
    in the step times:
        uninstrumented median 12.0
        ms (30 steps)
    """
    print(wrapped(sep.join(str(v) for v in values), width, indent, line_end))
