"""Several Nsight Systems exports as the ranks of one distributed run, on one clock.

:func:`load_nsys_ranks` reads each rank's export (``report_%q{RANK}`` under torchrun),
names its rank by the ``RANK`` in its recorded process environment
(``META_DATA_CAPTURE``), else by the number its file name ends with, and puts rank
``r``'s time ``t`` at ``t + offset_ns[r]``, ``offset_ns[r] = utcEpochNs[r] -
min(utcEpochNs)`` (``TARGET_INFO_SESSION_START_TIME``): ns since the earliest session's
start. Ranks on different hosts also carry their clocks' difference.
Sources: docs/SOURCES.md#nsys-ranks
"""
from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..errors import KitFileError
from .nsys import load_nsys, nsys_stats

#: Columns of :attr:`NsysRanks.info`.
INFO_COLUMNS = ["rank", "path", "rank_from", "session_start_utc_ns", "offset_ns", "host"]

#: Tables of :class:`kitlib.model.nsys.NsysReport` that :meth:`NsysRanks.table` stacks.
TABLES = ("kernels", "launches", "copies", "sets", "nvtx", "marks", "osrt")

_TIME_COLUMNS = ("start_ns", "end_ns")


@dataclass
class NsysRanks:
    """The Nsight Systems exports of one distributed run (see :func:`load_nsys_ranks`).

    Attributes
    ----------
    reports : dict of int -> NsysReport
        Each rank's report, times on its own session's clock.
    info : DataFrame
        :data:`INFO_COLUMNS`, one row per rank in rank order: ``rank``, ``path``,
        ``rank_from`` (``"RANK in the process environment"`` or ``"file name"``),
        ``session_start_utc_ns`` (``TARGET_INFO_SESSION_START_TIME.utcEpochNs``),
        ``offset_ns`` (what :meth:`table` adds to that rank's times), ``host``
        (``META_DATA_CAPTURE`` ``DEVICE_DISPLAY_NAME``, or ``None``).
    """

    reports: dict
    info: pd.DataFrame
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __repr__(self):
        return f"NsysRanks(ranks {self.ranks}, {len(self.info['host'].dropna().unique())} host(s))"

    @property
    def ranks(self) -> list:
        """The ranks present, ascending."""
        return sorted(self.reports)

    def table(self, name: str) -> pd.DataFrame:
        """One table of every rank's report (one of :data:`TABLES`), stacked, on one clock:
        ``rank`` first, then the report's columns, ``start_ns``/``end_ns`` in ns since the
        earliest session start (own times plus ``offset_ns``), ``dur_ns`` unchanged.

        Raises
        ------
        KeyError
            Not one of :data:`TABLES`.
        """
        if name not in TABLES:
            raise KeyError(f"no table {name!r}; the tables are: {', '.join(TABLES)}")
        parts = []
        offsets = self.info.set_index("rank")["offset_ns"]
        for r in self.ranks:
            df = getattr(self.reports[r], name).copy()
            for c in _TIME_COLUMNS:
                if c in df.columns:
                    df[c] = df[c] + int(offsets[r])
            parts.append(df.assign(rank=r))
        out = pd.concat(parts, ignore_index=True)
        out["rank"] = out["rank"].astype("int64")
        return out[["rank"] + [c for c in out.columns if c != "rank"]]

    def stats(self, name: str, rounded: bool = True) -> pd.DataFrame:
        """:func:`kitlib.readers.nsys.nsys_stats` of every rank, stacked: the report's own
        columns (with their units) after a ``rank`` column, each rank's rows in the
        report's order. Durations need no clock, so they are each rank's own.
        """
        parts = [nsys_stats(self.reports[r], name, rounded=rounded).assign(rank=r) for r in self.ranks]
        out = pd.concat(parts, ignore_index=True)
        return out[["rank"] + [c for c in out.columns if c != "rank"]]


def _capture_facts(path: Path) -> dict:
    """``RANK`` and ``WORLD_SIZE`` from the launched process's environment, the host's
    name and the session's UTC start, read from the export's metadata tables."""
    uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
    con = sqlite3.connect(uri, uri=True)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        facts = {"rank": None, "world_size": None, "host": None, "utc_ns": None}
        if "META_DATA_CAPTURE" in tables:
            for name, value in con.execute("SELECT name, value FROM META_DATA_CAPTURE"):
                name, value = str(name), str(value)
                if name == "DEVICE_DISPLAY_NAME":
                    facts["host"] = value
                elif name.endswith(":ENVIRONMENT_VARIABLE"):
                    m = re.fullmatch(r'(RANK|WORLD_SIZE)="?(-?\d+)"?', value.strip())
                    if m:
                        facts["rank" if m.group(1) == "RANK" else "world_size"] = int(m.group(2))
        if "TARGET_INFO_SESSION_START_TIME" in tables:
            row = con.execute("SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME").fetchone()
            if row and row[0] is not None:
                facts["utc_ns"] = int(row[0])
        return facts
    finally:
        con.close()


def load_nsys_ranks(sources, partial: bool = False) -> NsysRanks:
    """Read several Nsight Systems SQLite exports (a list, or a folder's ``*.sqlite``) as the
    ranks of one run; ``partial=True`` when they are a sample of a larger run's ranks (else
    every rank of a recorded ``WORLD_SIZE`` must be there).

    Returns
    -------
    NsysRanks
        ``reports`` by rank and ``info`` (:data:`INFO_COLUMNS`).

    Raises
    ------
    KitFileError
        No exports; a file that is not an Nsight export; a rank found neither in ``RANK`` nor
        in the file name; two exports of one rank; no ``TARGET_INFO_SESSION_START_TIME``;
        sessions that do not overlap or differ in ``WORLD_SIZE``; without ``partial``,
        missing ranks (named).
    """
    if isinstance(sources, (str, Path)):
        folder = Path(sources)
        if not folder.is_dir():
            raise KitFileError(folder, "no such folder of Nsight Systems exports")
        files = sorted(folder.glob("*.sqlite"))
        if not files:
            raise KitFileError(folder, "holds no Nsight Systems exports (*.sqlite)")
    else:
        files = [Path(p) for p in sources]
        if not files:
            raise KitFileError("<no files>", "load_nsys_ranks was given an empty list of exports")
    reports, rows, worlds = {}, [], {}
    for p in files:
        rep = load_nsys(p)                      # names the file if it is no export
        facts = _capture_facts(p)
        rank, how = facts["rank"], "RANK in the process environment"
        if rank is None:
            m = re.search(r"(\d+)$", p.stem)
            if m:
                rank, how = int(m.group(1)), "file name"
            elif len(files) == 1:
                rank, how = 0, "only export: taken as 0"
            else:
                raise KitFileError(p, "says not which rank it is: no RANK in the environment its process was "
                                      "started with (META_DATA_CAPTURE) and no number at the end of its name "
                                      "(record with nsys profile -o report_%q{RANK})")
        if rank in reports:
            other = next(r["path"] for r in rows if r["rank"] == rank)
            raise KitFileError(p, f"is rank {rank} ({how}), and so is {other}: keep one export per rank of one run")
        if facts["utc_ns"] is None:
            raise KitFileError(p, "has no TARGET_INFO_SESSION_START_TIME (the UTC time its session started): "
                                  "it cannot be placed on the other ranks' clock")
        reports[rank] = rep
        worlds[rank] = facts["world_size"]
        m = rep.meta
        rows.append({"rank": rank, "path": str(p), "rank_from": how, "session_start_utc_ns": facts["utc_ns"],
                     "host": facts["host"], "_lo": facts["utc_ns"] + int(m.get("session_start_ns") or 0),
                     "_hi": facts["utc_ns"] + int(m.get("session_end_ns") or 0)})
    info = pd.DataFrame(rows).sort_values("rank", kind="stable").reset_index(drop=True)
    if len(info) > 1 and int(info["_lo"].max()) > int(info["_hi"].min()):
        late, early = info.loc[info["_lo"].idxmax()], info.loc[info["_hi"].idxmin()]
        raise KitFileError(late["path"], f"started recording after {early['path']} had stopped (UTC session "
                                         "times): the ranks of one run record at the same time, so these "
                                         "come from different runs")
    worlds = {w for w in worlds.values() if w is not None}
    if len(worlds) > 1:
        raise KitFileError(info["path"].iloc[0], f"these exports record different WORLD_SIZE values "
                                                 f"({', '.join(map(str, sorted(worlds)))}): not the ranks of one run")
    if worlds and not partial:
        world = worlds.pop()
        missing = sorted(set(range(world)) - {int(r) for r in info["rank"]})
        if missing:
            where = folder if isinstance(sources, (str, Path)) else info["path"].iloc[0]
            raise KitFileError(where, f"holds the export(s) of rank(s) {', '.join(map(str, info['rank']))} of a run "
                                      f"of WORLD_SIZE {world}: rank(s) {', '.join(map(str, missing[:8]))}"
                                      f"{f' and {len(missing) - 8} more' if len(missing) > 8 else ''} missing. "
                                      "Export every rank's report, or, for a sample of a larger run's ranks, "
                                      "load_nsys_ranks(..., partial=True)")
    info["offset_ns"] = info["session_start_utc_ns"] - int(info["session_start_utc_ns"].min())
    info = info[INFO_COLUMNS].astype({"rank": "int64", "session_start_utc_ns": "int64", "offset_ns": "int64"})
    return NsysRanks(reports={int(r): reports[int(r)] for r in info["rank"]}, info=info)


__all__ = ["NsysRanks", "load_nsys_ranks", "INFO_COLUMNS", "TABLES"]
