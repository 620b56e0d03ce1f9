"""Memory by category over time: the JSON that ``prof.export_memory_timeline(path.json)`` writes.

``torch.profiler.profile.export_memory_timeline(path, device)`` with a ``.json`` path
writes ``[times, sizes]`` (PyTorch ``torch/profiler/_memory_profiler.py``,
``MemoryProfileTimeline._coalesce_timeline`` and ``export_memory_timeline``):

- ``times``: one timestamp per change, in **µs** (the profiler divides its ns by
  1,000 and truncates). In PyTorch 2.11 they count from the Unix epoch, which is not
  the clock of the Chrome trace the same profiler exports: compare times within the
  timeline, not with a trace's ``start_ns``;
- ``sizes``: for each timestamp, the bytes held per category *after* the change,
  a list of ``1 + 8`` integers: an unused first slot, then ``PARAMETER``,
  ``OPTIMIZER_STATE``, ``INPUT``, ``TEMPORARY``, ``ACTIVATION``, ``GRADIENT``,
  ``AUTOGRAD_DETAIL`` and tensors the profiler could not categorise.

The profile must have been recorded with ``profile_memory=True``,
``record_shapes=True`` and ``with_stack=True``. (The ``.json.gz`` "raw" variant, one
row per allocation event, is another format and is not read here.)
"""
from __future__ import annotations

import pandas as pd

from ..errors import KitFileError
from .files import read_json_file

#: The categories, in the order of ``sizes[1:]``.
CATEGORIES = ("parameter", "optimizer_state", "input", "temporary", "activation", "gradient",
              "autograd_detail", "unknown")


def load_memory_timeline(path) -> pd.DataFrame:
    """Read an ``export_memory_timeline(...json)`` file.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    DataFrame, one row per change, in file order
        ``time_ns`` (the file's µs × 1,000; its own clock, see the module's notes), one ``<category>_bytes`` column per entry of
        :data:`CATEGORIES`, and ``total_bytes`` (their sum).

    Raises
    ------
    KitFileError
        Not JSON, or not ``[times, sizes]`` with one list of 9 integers per time.
    """
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
