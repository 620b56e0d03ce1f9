"""Read the traces of one distributed run, one per rank, into one object.

:func:`load_traces` reads each rank's torch.profiler trace and names its rank by the
trace's ``distributedInfo`` (``rank``, ``world_size``, ``backend``), never by the file
name. Times stay on each host's own clock: ranks on different hosts carry those hosts'
clock difference; nothing here shifts a trace.
Sources: docs/SOURCES.md#rank-traces
"""
from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..errors import KitFileError
from .bundle import MANIFEST, folder_label, label_for, note_source, open_capture, reference_dir
from .trace import load_trace
from ..model.ranks import INFO_COLUMNS, RankTraces  # noqa: F401  (their home is the model)

#: Files a kit bundle holds beside its traces: never read as traces.
_SIDE_FILES = {"manifest.json", "step_times.json", "key_averages.json", "wallclock.json",
               "workload.json"}


def _trace_files(folder: Path) -> tuple[list, dict, dict]:
    """The trace files of a folder, the hosts by file (from a kit manifest) and the
    manifest's ``distributed`` entry."""
    m = folder / MANIFEST
    if m.is_file():
        cap = open_capture(folder)
        dist = cap.manifest.get("distributed")
        if not isinstance(dist, dict) or not isinstance(dist.get("ranks"), list):
            raise KitFileError(m, f"a {cap.kind} bundle, not a multi-rank one (no 'distributed' entry "
                                  "listing the ranks' traces)")
        files, hosts = [], {}
        for entry in dist["ranks"]:
            if not isinstance(entry, dict) or "trace" not in entry:
                raise KitFileError(m, f"'distributed.ranks' entry {str(entry)[:80]!r} names no trace")
            if not isinstance(entry["trace"], str):
                raise KitFileError(m, f"'distributed.ranks' entry of rank {entry.get('rank')!r} names its trace "
                                      f"by {str(entry['trace'])[:80]}, a {type(entry['trace']).__name__}, "
                                      "not a file name")
            p = cap.file(entry["trace"])              # checked against its sha256
            files.append(p)
            hosts[p] = entry.get("host")
        return files, hosts, dist
    files = sorted(p for p in folder.rglob("*")
                   if p.is_file() and p.name not in _SIDE_FILES
                   and (p.name.endswith(".json") or p.name.endswith(".json.gz")))
    return files, {}, {}


def load_traces(source, *, progress: bool | None = None, workers: int | None = None,
                partial: bool = False) -> RankTraces:
    """Read the traces of one distributed run: one torch.profiler trace per rank.

    Parameters
    ----------
    source : str, os.PathLike or list of them
        A folder, or the trace files. A kit bundle folder gives the traces its manifest
        lists (sha256-checked); any other folder every ``*.json``/``*.json.gz`` under it
        (but the kit's side files). A name such as ``"ranks_straggler"`` is a kit recording.
    progress : bool, optional
        Progress bars (see :func:`kitlib.load_trace`; one over the traces from
        :data:`PROGRESS_MIN_FILES` traces on).
    workers : int, optional
        Worker processes that parse traces not yet in the trace cache (default
        :func:`default_workers`; ``1``: all in this process).
    partial : bool
        ``True``: the traces are a sample of a larger run's ranks. Default ``False``: every
        rank of the world size must be there.

    Returns
    -------
    RankTraces
        ``traces`` by rank (``distributedInfo.rank``) and ``info``. A single trace without
        ``distributedInfo`` is rank 0 of an unknown world size.

    Raises
    ------
    KitFileError
        No such folder or no trace; a file that is not a trace; with several traces: one
        without ``distributedInfo``, two of one rank, traces of different runs (world size,
        backend, process groups, a rank out of range, no overlap in time); without
        ``partial``, missing ranks (named).
    ValueError
        ``workers`` is not a whole number of 1 or more.

    Examples
    --------
    >>> from kitlib.readers.ranks import load_traces
    >>> load_traces("ranks_balanced")
    RankTraces(ranks [0, 1] of world size 2, backend gloo)
    """
    if isinstance(source, (list, tuple)):
        files, hosts, dist, folder = [Path(p) for p in source], {}, {}, None
        if not files:
            raise KitFileError("<no files>", "load_traces was given an empty list of trace files")
    else:
        folder = Path(source)
        if not folder.exists() and not folder.is_absolute() and len(folder.parts) == 1:
            if (reference_dir() / folder).exists():
                folder = reference_dir() / folder
        if not folder.exists():
            raise KitFileError(folder, "no such folder or file")
        if folder.is_file():
            files, hosts, dist, folder = [folder], {}, {}, None
        else:
            files, hosts, dist = _trace_files(folder)
            if not files:
                raise KitFileError(folder, "holds no trace files (*.json or *.json.gz)")
    traces = _read_all(files, progress, workers)
    rows = []
    for p, t in zip(files, traces):
        d = t.meta.get("distributed")
        if not isinstance(d, dict) or "rank" not in d:
            if len(files) > 1:
                raise KitFileError(p, "has no 'distributedInfo' (rank, world_size, backend): it was not "
                                      f"recorded under torch.distributed, so it cannot be placed among the "
                                      f"other {len(files) - 1} rank trace(s) of "
                                      f"{folder if folder is not None else 'this list'}")
            d = {"rank": 0}
        try:
            rank = int(d["rank"])
            world = d.get("world_size")
            world = None if world is None else int(world)
        except (TypeError, ValueError):
            raise KitFileError(p, f"'distributedInfo' has a rank or world_size that is not a whole "
                                  f"number: {str(d)[:120]}") from None
        base = int(t.meta.get("base_time_ns") or 0)
        starts = [df["start_ns"].min() for df in (t.ops, t.launches, t.gpu) if len(df)]
        ends = [(df["start_ns"] + df["dur_ns"]).max() for df in (t.ops, t.launches, t.gpu) if len(df)]
        rows.append({"rank": rank, "world_size": world, "backend": d.get("backend"),
                     "host": hosts.get(p), "path": str(p),
                     "first_ns": base + int(min(starts)) if starts else None,
                     "last_ns": base + int(max(ends)) if ends else None,
                     "_pg": repr(d.get("pg_config"))})
    info = pd.DataFrame(rows)
    _check_one_run(info, folder)
    if not partial:
        _check_all_ranks(info, folder, dist)
    order = info.sort_values("rank", kind="stable")
    out = RankTraces(traces={int(r["rank"]): traces[i] for i, r in order.iterrows()},
                     info=order.drop(columns="_pg").reset_index(drop=True)[INFO_COLUMNS],
                     source=folder, manifest=dist)
    if folder is not None and not dist:   # no kit bundle (a bundle was labelled when opened)
        note_source(folder, folder_label(folder))
    out.label = label_for(folder)
    return out


def wall_step_times(traces: RankTraces) -> pd.DataFrame:
    """Every rank's wall-clock step times, as the kit's capture wrote them (each rank's
    ``rank{r}/step_times.json``, sha256-checked).

    Returns
    -------
    DataFrame
        ``rank, series, i, step_ms``: one row per step of each series
        (``step_ms_uninstrumented``, ``step_ms_profiled``), ``i`` from 0, ``step_ms`` in ms.
        Empty for loose trace files.

    Raises
    ------
    KitFileError
        A ``step_times.json`` that is not an object of lists of numbers (named).
    """
    cols = ["rank", "series", "i", "step_ms"]
    if traces.source is None or not traces.manifest:
        return pd.DataFrame(columns=cols)
    cap = open_capture(traces.source)
    rows = []
    for r in traces.ranks:
        name = f"rank{r}/step_times.json"
        if not cap.has(name):
            continue
        data = cap.read_json(name)
        if not isinstance(data, dict):
            raise KitFileError(cap.file(name), "is not a JSON object of step-time series")
        for series, values in data.items():
            if not isinstance(values, list) or not all(isinstance(v, (int, float)) for v in values):
                raise KitFileError(cap.file(name), f"series {series!r} is not a list of step times in ms")
            rows += [{"rank": int(r), "series": str(series), "i": i, "step_ms": float(v)}
                     for i, v in enumerate(values)]
    return pd.DataFrame(rows, columns=cols)


#: From this many traces on, :func:`load_traces` shows a bar over the traces it reads in
#: worker processes (unless ``progress=False``).
PROGRESS_MIN_FILES = 8


#: Below this many traces to parse, :func:`load_traces` reads them here, one after
#: another: starting workers and sending two traces back cost more than they save (two
#: ranks of ``ranks_straggler``: 2.7 s here, 5.1 s with two workers on a busy machine).
PARALLEL_MIN_FILES = 4


def default_workers(n_files: int) -> int:
    """Worker processes :func:`load_traces` starts for ``n_files`` traces to parse: one
    per CPU core the process may use, at most one per trace, and none (1: read here)
    below :data:`PARALLEL_MIN_FILES`.
    """
    if n_files < PARALLEL_MIN_FILES:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, n_files))


@dataclass
class _WorkerError:
    """A worker's :class:`KitFileError`, as parts that pickle."""
    kind: type
    path: str
    problem: str


def _parse_in_worker(path: str):
    """In a worker: parse one trace and send it back (pickled). With the cache on,
    ``load_trace`` writes its entry in a background thread, which runs on while this
    worker sends the trace and parses the next (a write takes a fraction of a parse);
    the worker finishes its writes before it exits, and the pool's shutdown waits for that."""
    try:
        return load_trace(path, progress=False)
    except KitFileError as e:       # its (path, problem) signature does not survive pickling: send the parts
        return _WorkerError(type(e), e.path, e.problem)


def _cached(path: Path) -> bool:
    """Whether ``path``'s tables are in the trace cache: the shared one
    (``KITLIB_SHARED_CACHE``), whose hash memos rarely match the file here (an image's
    layers change its device and times), by the file's hash; the learner's own without
    reading the file."""
    from . import trace_cache
    try:
        st = path.stat()
    except OSError:
        return False
    for root in trace_cache.roots():
        known = trace_cache.remembered_hash(path, st, root)
        if known is None and root is not None:
            try:
                known = trace_cache.content_hash(path.read_bytes())
            except OSError:
                return False
        base = trace_cache.folder() if root is None else root / "traces"
        if known is not None and (base / trace_cache.key_for(None, None, content=known) / "entry.json").is_file():
            return True
    return False


def _read_all(files: list, progress, workers) -> list:
    """Every trace of ``files`` (in order): cached ones here, the others in worker
    processes when more than one worker is asked for (see :func:`load_traces`)."""
    from . import trace_cache
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be a whole number of processes, 1 or more, not {workers!r}")
    todo = [p for p in files if not (trace_cache.enabled() and _cached(p))]
    n = default_workers(len(todo)) if workers is None else min(workers, max(len(todo), 1))
    if n <= 1 or len(todo) <= 1:
        return [load_trace(p, progress=progress) for p in files]
    import concurrent.futures as cf
    import multiprocessing as mp
    from ..progress import progress_bar
    show = len(files) >= PROGRESS_MIN_FILES if progress is None else bool(progress)
    bar = progress_bar(f"reading {len(files)} rank traces ({n} worker processes)", len(files), show)
    got = {}
    # fork where there is one (Linux): the workers start with kitlib already imported
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
    with cf.ProcessPoolExecutor(max_workers=n, mp_context=ctx) as pool:
        futures = {pool.submit(_parse_in_worker, str(p)): p for p in todo}
        for fut in cf.as_completed(futures):       # each trace taken in while the workers parse the next
            p, res = futures[fut], fut.result()
            if isinstance(res, _WorkerError):
                bar.close()
                for f in futures:
                    f.cancel()
                raise res.kind(res.path, res.problem)
            got[p] = res
            bar.update(1)
    out = []
    for p in files:
        if p not in got:                            # in the cache before we began
            got[p] = load_trace(p, progress=False)
            bar.update(1)
        out.append(got[p])
    bar.close()
    return out


def _check_one_run(info: pd.DataFrame, folder) -> None:
    """Refuse traces that cannot be the ranks of one run (see :func:`load_traces`)."""
    where = f"in {folder}" if folder is not None else "in the list given"
    dup = info[info["rank"].duplicated(keep=False)]
    if len(dup):
        r = int(dup["rank"].iloc[0])
        paths = dup.loc[dup["rank"] == r, "path"].tolist()
        raise KitFileError(paths[0], f"claims rank {r}, and so does {', '.join(paths[1:])} ({where}): "
                                     "two traces of one rank are two runs (or a copied file); keep one "
                                     "trace per rank of a single run")
    for col, what in (("world_size", "world size"), ("backend", "backend"), ("_pg", "process groups")):
        vals = info[col].astype(str).unique()
        if len(vals) > 1:
            first = info.iloc[0]
            other = info[info[col].astype(str) != str(first[col])].iloc[0]
            raise KitFileError(other["path"], f"has {what} {other[col]!s:.80} but {first['path']} has "
                                              f"{first[col]!s:.80} ({where}): these traces come from "
                                              "different runs")
    world = info["world_size"].iloc[0]
    if world is not None and not pd.isna(world):
        bad = info[(info["rank"] < 0) | (info["rank"] >= int(world))]
        if len(bad):
            raise KitFileError(bad["path"].iloc[0], f"claims rank {int(bad['rank'].iloc[0])}, outside "
                                                    f"0..{int(world) - 1} of its world size {int(world)}")
    if len(info) > 1 and info["first_ns"].notna().all() and info["last_ns"].notna().all():
        lo, hi = int(info["first_ns"].max()), int(info["last_ns"].min())
        if lo > hi:
            late = info.loc[info["first_ns"].idxmax()]
            early = info.loc[info["last_ns"].idxmin()]
            raise KitFileError(late["path"], f"starts recording at {_when(late['first_ns'])}, after "
                                             f"{early['path']} stopped ({_when(early['last_ns'])}), "
                                             f"{(lo - hi) / 1e9:,.1f} s apart ({where}): the ranks of one "
                                             "run record at the same time, so these come from different runs")


def _check_all_ranks(info: pd.DataFrame, folder, dist) -> None:
    """Refuse a rank set with ranks of its world size missing (see :func:`load_traces`)."""
    world = info["world_size"].iloc[0]
    if world is None or pd.isna(world):
        return
    have = sorted(int(r) for r in info["rank"])
    missing = sorted(set(range(int(world))) - set(have))
    if not missing:
        return
    where = folder if folder is not None else info["path"].iloc[0]
    names = ", ".join(map(str, missing[:8])) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
    links = []
    if folder is not None and not dist:           # rglob does not go into a symlinked folder
        links = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_symlink() and p.is_dir())
    why = (f"; the symlinked folder(s) {', '.join(links)} were not searched: give the real folder, or copy "
           "the traces in" if links else "")
    raise KitFileError(where, f"holds rank(s) {', '.join(map(str, have))} of a run of world size {int(world)} "
                              f"(its traces' distributedInfo): rank(s) {names} missing{why}. Each rank is "
                              "judged against the others (a straggler is the one they wait for), so load every "
                              "rank's trace; to study a sample of a larger run's ranks, "
                              "load_traces(..., partial=True)")


def _when(ns) -> str:
    return _dt.datetime.fromtimestamp(int(ns) / 1e9, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")


__all__ = ["RankTraces", "load_traces", "wall_step_times", "default_workers", "INFO_COLUMNS", "PROGRESS_MIN_FILES",
           "PARALLEL_MIN_FILES"]
