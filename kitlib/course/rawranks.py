"""Lesson 12's raw view: a few events of each rank's trace, as torch.profiler wrote them.

A learner who has only the traces (no kitlib) finds a straggler by matching the k-th call
of a collective on every rank and comparing their start times: the last rank to start
it is the one the others waited for. :func:`collective_excerpt` picks the events for
doing that by hand: per rank, one ``ProfilerStep#N`` and the first few ``gloo:*``
collective events that start inside it, each a Chrome-trace complete event (``ph: "X"``,
``ts`` and ``dur`` in µs on that rank's clock), with the ``pid`` → rank map from each
trace's ``distributedInfo``.

Source: the PyTorch profiler's Chrome-trace export (``distributedInfo``,
``ProfilerStep#N`` annotations; Gloo's collectives as ``gloo:*`` user annotations on its
worker threads), as the kit's two-rank recordings hold it (``data/reference/ranks_*``).
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

from ..errors import KitError

__all__ = ["collective_excerpt", "KEEP"]

#: The fields of each event the excerpt keeps (the rest are ids and bookkeeping).
KEEP = ("ph", "cat", "name", "pid", "tid", "ts", "dur")


def _events(path: Path) -> dict:
    raw = Path(path).read_bytes()
    try:
        return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except (OSError, ValueError) as e:
        raise KitError(f"{path}: not a readable trace ({e})") from None


def collective_excerpt(runs, step: int | None = None, calls: int = 3) -> dict:
    """Each rank's step event and its first ``calls`` Gloo collective events, raw.

    Parameters
    ----------
    runs : kitlib.readers.ranks.RankTraces
        A run's traces (each rank's file is read again, raw).
    step : int, optional
        The ``ProfilerStep#N`` to take (default: the first N every rank recorded).
    calls : int
        ``gloo:*`` events per rank, in start order, among those starting inside the step.

    Returns
    -------
    dict
        ``ranks``: ``{pid: rank}`` (from ``distributedInfo``); ``base_ns``: ``{rank:
        baseTimeNanoseconds}`` (each trace's ``ts`` are µs after it; 0 when absent);
        ``step``: N; ``events``: the
        events (each with the fields of :data:`KEEP`), rank by rank, each rank's in start
        order.

    Raises
    ------
    KitError
        A trace has no ``distributedInfo`` rank, no common step, or no ``gloo:*`` events
        in it (an NCCL run's collectives are kernels: use its kernels instead).
    """
    docs, bases = {}, {}
    for path in runs.info["path"]:
        doc = _events(path)
        rank = (doc.get("distributedInfo") or {}).get("rank")
        if rank is None:
            raise KitError(f"{path}: no distributedInfo rank")
        docs[int(rank)] = doc["traceEvents"]
        bases[int(rank)] = int(doc.get("baseTimeNanoseconds") or 0)
    steps = [{int(e["name"].split("#")[1]): e for e in ev if e.get("ph") == "X"
              and str(e.get("name", "")).startswith("ProfilerStep#")} for ev in docs.values()]
    common = sorted(set.intersection(*(set(s) for s in steps)))
    if not common:
        raise KitError("the ranks' traces share no ProfilerStep#N")
    n = common[0] if step is None else int(step)
    if n not in common:
        raise KitError(f"not every rank recorded ProfilerStep#{n} (common: {common})")
    out, pids = [], {}
    for rank in sorted(docs):
        ev = docs[rank]
        s = next(e for e in ev if e.get("ph") == "X" and e.get("name") == f"ProfilerStep#{n}")
        inside = sorted((e for e in ev if e.get("ph") == "X" and str(e.get("name", "")).startswith("gloo:")
                         and s["ts"] <= e["ts"] < s["ts"] + s["dur"]), key=lambda e: e["ts"])
        if not inside:
            raise KitError(f"rank {rank}: no gloo:* events in ProfilerStep#{n}")
        pids[s["pid"]] = rank
        out += [{k: e[k] for k in KEEP if k in e} for e in [s, *inside[:calls]]]
    return {"ranks": pids, "base_ns": bases, "step": n, "events": out}
