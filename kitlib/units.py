"""Units for display: the kit's one home for ns -> µs/ms/s and bytes -> MiB/GiB.

Inside kitlib every time is an integer in nanoseconds (``*_ns``) and every size in bytes
(``*_bytes``); convert only at the edge, for a person. Memory uses binary prefixes (1 GiB =
2**30 bytes), as ``torch.cuda.memory_allocated`` and the profiler's tables ("GB" is GiB)."""
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
    """A copy of ``table`` for display: every ``*_ns`` column in ``time`` (``ns``, ``us``, ``ms``,
    ``s``) renamed ``*_<time>``, every ``*_bytes`` column in ``size`` (``bytes``, ``kib``,
    ``mib``, ``gib``; ``None`` leaves them) renamed ``*_<size>``; nullable integers stay
    ``<NA>``. Raises ``ValueError`` for an unknown unit."""
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


#: The longest line the kit prints: JupyterLab at 1280 x 800 shows about 105 characters whole
#: and breaks a longer line mid-word (issue 40).
PRINT_CHARS = 95


def wrapped(text, width: int = PRINT_CHARS, indent: str = "    ", line_end: str = "") -> str:
    r"""``text`` for ``print``: each line longer than ``width`` broken at spaces (never inside a
    word, a longer word on its own line), continuations indented by ``indent``, ``line_end``
    (``" \\"`` for a shell command) ending each broken line but the last."""
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
    """``print(*values, sep=sep)``, its lines :func:`wrapped` to a notebook's width."""
    print(wrapped(sep.join(str(v) for v in values), width, indent, line_end))
