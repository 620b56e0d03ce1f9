"""HTA's own figures for the traces kitlib's GPU-idle analyses are checked against.

Run with a Python that has Holistic Trace Analysis 0.5 installed, in a virtual
environment of its own (HTA pins other versions of pandas and plotly than the kit):

    python -m venv /tmp/htavenv && /tmp/htavenv/bin/pip install "HolisticTraceAnalysis==0.5.*"
    /tmp/htavenv/bin/python tools/hta_figures.py > tests/data/hta/hta_figures.json

For each trace it runs, on a folder holding only that trace (HTA reads a folder as the
ranks of one job):

- ``TraceAnalysis.get_idle_time_breakdown(ranks=[rank], visualize=False)``: idle time per
  stream and category (µs), default ``consecutive_kernel_delay=30``;
- ``TraceAnalysis.get_queue_length_time_series(ranks=[rank])``: the queue length per
  stream; kept as figures that do not depend on the order HTA's unstable sort gives to
  changes at one timestamp: the most launched-but-not-started operations after any
  timestamp, the time integral of the length and the time it was above 0 (µs), and the
  number of launches HTA counted (the +1 rows);
- ``TraceAnalysis.get_temporal_breakdown(visualize=False)``: idle, compute and non-compute
  time (µs) of the rank.

It also writes what HTA kept of the trace (its ``ProfilerStep``\\s, its GPU events per
stream), so a test can apply the same cuts to kitlib's tables. ``tests/analyses/test_gpu_idle.py``
reads the JSON; it never imports HTA.
"""
from __future__ import annotations

import json
import logging
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TRACES = [
    "tests/data/public-traces/hta_2022-08_a100_rank3.json.gz",
    "tests/data/public-traces/kineto_2021-06_resnet50_v100.json.gz",
    "tests/data/public-traces/tracelens_torch2.6_h100_bert_small.json.gz",
    "tests/data/public-traces/hta_2024-10_triton_driver_launch.json.gz",
    "data/reference/public-traces/hta_2024-03_nccl_sampled_rank0.json.gz",
    "data/reference/public-traces/hta_2024-03_nccl_sampled_rank1.json.gz",
    "data/reference/profiler_5step/trace.json.gz",
    "data/reference/fixed_batch/trace.json.gz",
]


def _num(x):
    """A JSON-able number (HTA hands out numpy scalars)."""
    x = float(x)
    return int(x) if x == int(x) else x


def figures(path: Path) -> dict:
    from hta.trace_analysis import TraceAnalysis
    tmp = Path(tempfile.mkdtemp(prefix="hta-figures-"))
    try:
        shutil.copy(path, tmp / path.name)
        an = TraceAnalysis(trace_dir=str(tmp))
        rank = an.t.get_ranks()[0]
        df = an.t.get_trace(rank)
        sym = an.t.symbol_table.get_sym_table()
        names = df["name"].map(lambda i: sym[i] if 0 <= i < len(sym) else "")
        cats = df["cat"].map(lambda i: sym[i] if 0 <= i < len(sym) else "")
        steps = sorted(n for n in set(names) if n.startswith("ProfilerStep#"))
        out = {"rank": int(rank), "profiler_steps_in_trace": steps,
               "gpu_events_per_stream": {}, "idle_us": {}, "queue": {}, "temporal_us": {}}
        gpu = df[df["stream"].ne(-1)]
        for (s, c), n in gpu.groupby([gpu["stream"], cats[gpu.index]]).size().items():
            out["gpu_events_per_stream"].setdefault(str(int(s)), {})[c] = int(n)
        idle, _ = an.get_idle_time_breakdown(ranks=[rank], visualize=False)
        for r in idle.itertuples():
            out["idle_us"].setdefault(str(int(r.stream)), {})[r.idle_category] = _num(r.idle_time)
        series = an.get_queue_length_time_series(ranks=[rank]).get(rank)
        if series is not None:
            for s, q in series.groupby("stream"):
                # the length after every change at a timestamp (order-free), as a step function
                post = q.groupby("ts", sort=True)["queue_length"].last()
                ts, v = post.index.to_numpy(), post.to_numpy()
                dt = ts[1:] - ts[:-1]
                out["queue"][str(int(s))] = {
                    "launches": int((q["queue_length"].diff().fillna(q["queue_length"]) > 0).sum()),
                    "rows": int(len(q)), "timestamps": int(len(ts)),
                    "max_after_timestamp": int(v.max()), "final": int(v[-1]),
                    "integral_us": _num((v[:-1] * dt).sum()), "nonzero_us": _num(dt[v[:-1] > 0].sum()),
                    "hta_describe_mean": float(q["queue_length"].mean()),
                    "hta_describe_max": int(q["queue_length"].max())}
        tb = an.get_temporal_breakdown(visualize=False)
        row = tb[tb["rank"] == rank].iloc[0]
        for k in ("idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)"):
            out["temporal_us"][k] = _num(row[k])
        return out
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    logging.disable(logging.WARNING)
    import hta
    from importlib.metadata import version
    doc = {"made_by": "tools/hta_figures.py",
           "command": "/tmp/htavenv/bin/python tools/hta_figures.py > tests/data/hta/hta_figures.json",
           "hta_version": version("HolisticTraceAnalysis"), "python": platform.python_version(),
           "pandas": version("pandas"), "numpy": version("numpy"),
           "hta_module": os.path.relpath(Path(hta.__file__).parent, sys.prefix), "traces": {}}
    for rel in TRACES:
        doc["traces"][rel] = figures(ROOT / rel)
    json.dump(doc, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
