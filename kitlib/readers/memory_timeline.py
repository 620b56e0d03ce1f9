"""Memory by category over time: the JSON that ``prof.export_memory_timeline(path.json)`` writes.

Sources: docs/SOURCES.md#memory-timeline-format"""
from __future__ import annotations

import pandas as pd

from ..errors import KitFileError
from .files import read_json_file

#: The categories, in the order of ``sizes[1:]``.
CATEGORIES = ("parameter", "optimizer_state", "input", "temporary", "activation", "gradient",
              "autograd_detail", "unknown")


def load_memory_timeline(path) -> pd.DataFrame:
    """Read an ``export_memory_timeline(...json)`` file: one row per change, in file order.

    Columns ``time_ns`` (the file's µs × 1,000, on its own clock), ``<category>_bytes`` for each
    of :data:`CATEGORIES`, ``total_bytes``. KitFileError: not ``[times, sizes]`` with 9 integers
    per time."""
    data = read_json_file(path)
    ok = (isinstance(data, list) and len(data) == 2 and all(isinstance(x, list) for x in data)
          and len(data[0]) == len(data[1]))
    if not ok:
        raise KitFileError(path, "not a memory timeline: expected [times, sizes] as written by "
                                 "prof.export_memory_timeline('….json', device=…)")
    times, sizes = data
    if any(not isinstance(r, list) or len(r) != 1 + len(CATEGORIES) for r in sizes):
        raise KitFileError(path, f"each entry of sizes must hold {1 + len(CATEGORIES)} numbers "
                                 "(an unused slot, then one per category)")
    cols = {f"{c}_bytes": [int(r[i + 1]) for r in sizes] for i, c in enumerate(CATEGORIES)}
    out = pd.DataFrame({"time_ns": [int(t) * 1000 for t in times], **cols})
    out["total_bytes"] = out[[f"{c}_bytes" for c in CATEGORIES]].sum(axis=1)
    return out
