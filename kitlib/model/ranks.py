"""The traces of one distributed run, one per rank: the value the multi-rank analyses take.

:func:`kitlib.readers.ranks.load_traces` builds it from a folder or a list of files.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ._values import handed_out, kept

#: Columns of :attr:`RankTraces.info`.
INFO_COLUMNS = ["rank", "world_size", "backend", "host", "path", "first_ns", "last_ns"]

@dataclass
class RankTraces:
    """The traces of one distributed run (see :func:`kitlib.readers.ranks.load_traces`).

    ``traces``: rank -> :class:`kitlib.model.Trace`, in rank order. ``info``: a row per rank,
    :data:`INFO_COLUMNS` (``world_size``, ``backend`` from ``distributedInfo``; ``host`` from the
    kit's manifest, else None; ``first_ns``/``last_ns``: first start, last end, ns since the epoch
    on that host). ``source``: the folder (None for a list of files). ``manifest``: a kit
    bundle's ``distributed`` entry, else ``{}``.

    Examples
    --------
    Two ranks of an NCCL run (:func:`kitlib.model.examples.tiny_rank_docs`):

    >>> from kitlib.model.examples import tiny_rank_folder
    >>> from kitlib.readers.ranks import load_traces
    >>> traces = load_traces(tiny_rank_folder())
    >>> traces
    RankTraces(ranks [0, 1] of world size 2, backend nccl)
    >>> traces.info[["rank", "world_size", "backend", "host", "first_ns", "last_ns"]]
       rank  world_size backend  host  first_ns   last_ns
    0     0           2    nccl  None         0  20000000
    1     1           2    nccl  None         0  20000000
    """

    traces: dict
    info: pd.DataFrame
    source: Path | None = None
    manifest: dict = field(default_factory=dict)
    #: Which recording these are, for the note under a lesson's tables: a bundle's or folder's label.
    label: str | None = None
    _cache: dict = field(default_factory=dict, repr=False, compare=False)   # keyed: never stale

    def __repr__(self):
        return (f"RankTraces(ranks {self.ranks} of world size {self.world_size}, backend "
                f"{self.backend})")

    @property
    def ranks(self) -> list:
        """The ranks present, ascending.

        Examples
        --------
        >>> from kitlib.model.examples import tiny_rank_folder
        >>> from kitlib.readers.ranks import load_traces
        >>> load_traces(tiny_rank_folder()).ranks
        [0, 1]
        """
        return sorted(self.traces)

    @property
    def world_size(self) -> int | None:
        """``distributedInfo.world_size`` (the same in every trace; ``None`` when absent).

        Examples
        --------
        >>> from kitlib.model.examples import tiny_rank_folder
        >>> from kitlib.readers.ranks import load_traces
        >>> load_traces(tiny_rank_folder()).world_size
        2
        """
        v = self.info["world_size"].iloc[0]
        return None if pd.isna(v) else int(v)

    @property
    def backend(self) -> str | None:
        """``distributedInfo.backend`` (``nccl``, ``gloo``, …; ``None`` when absent).

        Examples
        --------
        >>> from kitlib.model.examples import tiny_rank_folder
        >>> from kitlib.readers.ranks import load_traces
        >>> load_traces(tiny_rank_folder()).backend
        'nccl'
        """
        return self.info["backend"].iloc[0]

    def table(self, name: str) -> pd.DataFrame:
        """One :class:`Trace` table of every rank (``ops``, ``launches``, ``gpu``, ``kernels``,
        ``memory``, ``other``, ``steps``; else KeyError), stacked rank by rank with an int64 ``rank``
        column first, index 0..n-1, each rank's own row labels in ``row`` (what ``parent`` refers to).

        Examples
        --------
        >>> from kitlib.model.examples import tiny_rank_folder
        >>> from kitlib.readers.ranks import load_traces
        >>> load_traces(tiny_rank_folder()).table("kernels")[["rank", "row", "stream", "start_ns"]].head(2)
           rank  row  stream  start_ns
        0     0    0       7   1000000
        1     0    1      20   3100000
        """
        allowed = ("ops", "launches", "gpu", "kernels", "memory", "other", "steps")
        if name not in allowed:
            raise KeyError(f"no table {name!r}; the tables are: {', '.join(allowed)}")
        # memo per set of tables the ranks' traces keep now: it cannot go stale
        src = {"kernels": "gpu", "steps": "ops"}.get(name, name)
        deps = tuple((r, kept(self.traces[r], src)) for r in self.ranks)
        hit = self._cache.get(name)
        if hit is None or len(hit[0]) != len(deps) \
                or any(a[0] != b[0] or a[1] is None or a[1] is not b[1] for a, b in zip(hit[0], deps)):
            parts = []
            for r in self.ranks:
                df = getattr(self.traces[r], name)
                parts.append(df.rename_axis("row").reset_index().assign(rank=r))
            out = pd.concat(parts, ignore_index=True)
            out["rank"] = out["rank"].astype("int64")
            hit = self._cache[name] = (deps, out[["rank"] + [c for c in out.columns if c != "rank"]])
        return handed_out(hit[1])

    @property
    def ops(self) -> pd.DataFrame:
        """Every rank's ``ops`` with a ``rank`` column (see :meth:`table`).

        Examples
        --------
        >>> from kitlib.model.examples import tiny_rank_folder
        >>> from kitlib.readers.ranks import load_traces
        >>> load_traces(tiny_rank_folder()).ops[["rank", "row", "name", "parent"]].head(2)
           rank  row            name  parent
        0     0    0  ProfilerStep#1      -1
        1     0    1        aten::mm       0
        """
        return self.table("ops")

    @property
    def gpu(self) -> pd.DataFrame:
        """Every rank's ``gpu`` with a ``rank`` column (see :meth:`table`).

        Examples
        --------
        >>> from kitlib.model.examples import tiny_rank_folder
        >>> from kitlib.readers.ranks import load_traces
        >>> load_traces(tiny_rank_folder()).gpu.groupby("rank").size().tolist()
        [5, 4]
        """
        return self.table("gpu")

    @property
    def steps(self) -> pd.DataFrame:
        """Every rank's steps (``ProfilerStep#N``) with a ``rank`` column (see :meth:`table`).

        Examples
        --------
        >>> from kitlib.model.examples import tiny_rank_folder
        >>> from kitlib.readers.ranks import load_traces
        >>> load_traces(tiny_rank_folder()).steps[["rank", "step", "name", "start_ns", "dur_ns"]]
           rank  step            name  start_ns    dur_ns
        0     0     1  ProfilerStep#1         0  10000000
        1     0     2  ProfilerStep#2  10000000  10000000
        2     1     1  ProfilerStep#1         0  10000000
        3     1     2  ProfilerStep#2  10000000  10000000
        """
        return self.table("steps")
