"""Lesson 12's raw view: a few events of each rank's trace as torch.profiler wrote them, to
match the k-th call of a collective across ranks by hand (the last rank to start it is the
one the others waited for). ``ts`` and ``dur`` in µs on each rank's clock; ``pid`` → rank
from each trace's ``distributedInfo``."""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import KitError
from ..readers.files import read_bytes_maybe_gz

__all__ = ["collective_excerpt", "nccl_call_excerpt", "KEEP"]

#: The fields of each event the excerpt keeps (the rest are ids and bookkeeping).
KEEP = ("ph", "cat", "name", "pid", "tid", "ts", "dur")


def _events(path: Path) -> dict:
    raw = read_bytes_maybe_gz(path)           # a FIFO, a device, a gzip bomb: a KitFileError
    try:
        try:                        # orjson is faster; json reads what it refuses (NaN, huge ints)
            import orjson
            return orjson.loads(raw)
        except (ImportError, ValueError):
            return json.loads(raw)
    except (OSError, ValueError, RecursionError) as e:     # json recurses on deep nesting
        raise KitError(f"{path}: not a readable trace ({e})") from None


def _rank_docs(runs):
    """``(path, rank, trace document)`` per file of ``runs``, the rank from ``distributedInfo``."""
    for path in runs.info["path"]:
        doc = _events(path)
        rank = (doc.get("distributedInfo") or {}).get("rank")
        if rank is None:
            raise KitError(f"{path}: no distributedInfo rank")
        yield path, int(rank), doc


def collective_excerpt(runs, step: int | None = None, calls: int = 3) -> dict:
    """Each rank's ``ProfilerStep#N`` (``step``, default the first all share) and its first ``calls``
    ``gloo:*`` events: ``{ranks: {pid: rank}, base_ns: {rank: baseTimeNanoseconds}, step, events}``,
    events trimmed to :data:`KEEP`, rank by rank in start order.

    Raises KitError: no ``distributedInfo`` rank, no common step, or no ``gloo:*`` events (NCCL)."""
    docs, bases = {}, {}
    for _, rank, doc in _rank_docs(runs):
        docs[rank] = doc["traceEvents"]
        bases[rank] = int(doc.get("baseTimeNanoseconds") or 0)
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


def nccl_call_excerpt(runs, calls: int = 3) -> dict:
    """Each rank's first ``calls`` NCCL collectives: the ``nccl:*`` operator (``Input Dims``), its
    ``cudaLaunchKernel`` and that kernel (same ``correlation``): ``{ranks, base_ns, events}``.

    Raises KitError: no ``distributedInfo`` rank, or no NCCL kernel launched in an ``nccl:*`` operator."""
    out, pids, bases = [], {}, {}
    for path, rank, doc in _rank_docs(runs):
        bases[rank] = int(doc.get("baseTimeNanoseconds") or 0)
        ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
        kernels = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "kernel"
                   and str(e.get("name", "")).startswith(("ncclKernel_", "ncclDevKernel_"))}
        launches = [e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")
                    and (e.get("args") or {}).get("correlation") in kernels]
        ops = [e for e in ev if str(e.get("name", "")).startswith("nccl:")]
        found = []
        for la in launches:
            op = next((o for o in ops if o["tid"] == la["tid"] and o["ts"] <= la["ts"] <= o["ts"] + o["dur"]), None)
            if op is not None:
                found.append((kernels[la["args"]["correlation"]], la, op))
        if not found:
            raise KitError(f"{path}: no NCCL kernel launched inside an nccl:* operator")
        found.sort(key=lambda f: f[0]["ts"])
        for k, la, op in found[:calls]:
            pids[op["pid"]] = rank
            out += [{**{f: op[f] for f in KEEP if f in op}, "args": {"Input Dims": op["args"].get("Input Dims")}},
                    {**{f: la[f] for f in KEEP if f in la}, "args": {"correlation": la["args"]["correlation"]}},
                    {**{f: k[f] for f in KEEP if f in k}, "args": {"correlation": k["args"]["correlation"]}}]
    return {"ranks": pids, "base_ns": bases, "events": out}
