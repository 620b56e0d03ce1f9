"""The kernel breakdown (issue 41): kitlib.analyses.kernel_launches.kernel_types and top_kernels
against Holistic Trace Analysis' rule, worked out here from the raw trace JSON without kitlib.

``tests/data/hta/hta_figures.json`` holds no kernel breakdown, so the expected figures are
computed below by HTA's rule (``hta/utils/utils.py`` ``get_kernel_type``,
``hta/analyzers/breakdown_analysis.py`` ``get_gpu_kernel_breakdown``): every event with a
``stream`` in its args is a GPU event; ``ncclKernel`` in its name makes it COMMUNICATION,
``Memcpy`` or ``Memset`` MEMORY, anything else COMPUTATION (the rule of 2022; later releases
changed it, and :func:`hta_type` checks that none of their rules differs on these traces); per rank and type the names with
the most time are kept and the rest are one ``others`` row. kitlib decides memory by the
event's category, not its name, so the two sides reach the type by different roads. The
comparison uses every GPU event of the trace (HTA itself would first drop the last
ProfilerStep's events; that cut is the gpu_idle tests' business, not the breakdown's).

Traces: the public NCCL pair (HTA's sampled A100 run, two ranks: communication, copies and
sets), HTA's 2022 A100 trace (rank 3: two NCCL kernels, 882 copies and sets) and Kineto's
2021 V100 trace (old category names ``Kernel``/``Memcpy``/``Memset``, no NCCL).
"""
from __future__ import annotations

import re
from collections import defaultdict

import pytest

from kitlib.analyses.gpu_idle import GpuIdleError
from kitlib.analyses.kernel_launches import KERNEL_TYPES, kernel_types, top_kernels
from kitlib.readers.ranks import load_traces
from kitlib.readers.trace import load_trace

from conftest import PUBLIC, REF, raw_trace_events

NCCL = REF / "public-traces"
SINGLE = ["hta_2022-08_a100_rank3.json.gz", "kineto_2021-06_resnet50_v100.json.gz"]


def hta_types(name: str) -> tuple:
    """The type HTA's ``get_kernel_type`` gives a name, by each of the rules its releases have
    used (``hta/utils/utils.py``): ``ncclKernel`` in the name (2022); a name starting with
    ``nccl`` or holding ``gloo:`` (later); ``^nccl.*Kernel``, memory ``^(Memcpy|Memset|dma)``
    and OTHER for the rest matching ``(.*(Memcpy)|(Memset))|(.*Sync)`` (the newest)."""
    memory = "Memcpy" in name or "Memset" in name
    old = "COMMUNICATION" if "ncclKernel" in name else "MEMORY" if memory else "COMPUTATION"
    mid = "COMMUNICATION" if name.startswith("nccl") or "gloo:" in name else \
        "MEMORY" if memory else "COMPUTATION"
    new = "COMMUNICATION" if re.match(r"^nccl.*Kernel", name) else \
        "MEMORY" if re.match(r"(^Memcpy)|(^Memset)|(^dma)", name) else \
        "OTHER" if re.match(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)", name) else "COMPUTATION"
    return old, mid, new


def hta_type(name: str) -> str:
    """HTA's type of a name; the test's traces hold no name on which its releases differ."""
    types = hta_types(name)
    assert len(set(types)) == 1, (name, types)
    return types[0]


def raw_gpu_events(path) -> list:
    """(type, name, dur_ns) of every event with a stream (HTA's ``stream != -1``)."""
    out = []
    for e in raw_trace_events(path):
        args = e.get("args")
        if e.get("ph") == "X" and isinstance(args, dict) and "stream" in args:
            assert e.get("cat") in {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}, e
            out.append((hta_type(e["name"]), e["name"], round(e["dur"] * 1000)))
    return out


def raw_types(events) -> dict:
    """{type: (events, sum_ns)}."""
    out = {t: [0, 0] for t in KERNEL_TYPES}
    for t, _, d in events:
        out[t][0] += 1
        out[t][1] += d
    return {t: tuple(v) for t, v in out.items()}


def raw_top(events, top: int) -> dict:
    """{type: [(name, calls, sum_ns), …]}: the ``top`` names by time (ties by name), then others."""
    by = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for t, n, d in events:
        by[t][n][0] += 1
        by[t][n][1] += d
    out = {}
    for t, names in by.items():
        ranked = sorted(names.items(), key=lambda kv: (-kv[1][1], kv[0]))
        rows = [(n, c, s) for n, (c, s) in ranked[:top]]
        rest = ranked[top:]
        if rest:
            rows.append(("others", sum(c for _, (c, _) in rest), sum(s for _, (_, s) in rest)))
        out[t] = rows
    return out


def kit_rows(top, rank) -> dict:
    sub = top[top["rank"] == rank]
    return {t: [(r.name, r.calls, r.sum_ns) for r in g.itertuples()] for t, g in sub.groupby("kernel_type")}


def check(kt, tk, rank, path, top):
    raw = raw_gpu_events(path)
    want = raw_types(raw)
    got = kt[kt["rank"] == rank].set_index("kernel_type")
    for t in KERNEL_TYPES:
        print(f"{path.name} rank {rank} {t}: kitlib {int(got.at[t, 'events'])} events "
              f"{int(got.at[t, 'sum_ns']):,} ns; raw JSON by HTA's rule {want[t][0]} events {want[t][1]:,} ns")
        assert (int(got.at[t, "events"]), int(got.at[t, "sum_ns"])) == want[t]
    assert got["share"].sum() == pytest.approx(1.0)
    assert kit_rows(tk, rank) == raw_top(raw, top)


@pytest.mark.parametrize("top", [3, 10])
def test_nccl_pair_two_ranks(top):
    traces = load_traces(NCCL, partial=True)   # two ranks of a run of 128
    kt, tk = kernel_types(traces), top_kernels(traces, top=top)
    assert sorted(kt["rank"].unique()) == [0, 1]
    for rank in (0, 1):
        check(kt, tk, rank, NCCL / f"hta_2024-03_nccl_sampled_rank{rank}.json.gz", top)
    # every type is present on both ranks; the pair moved data with 10 NCCL kernels each
    assert (kt["events"] > 0).all()
    assert kt.loc[kt["kernel_type"] == "COMMUNICATION", "events"].tolist() == [10, 10]


@pytest.mark.parametrize("name", SINGLE)
def test_single_public_traces(name):
    tr = load_trace(PUBLIC / name)
    kt, tk = kernel_types(tr), top_kernels(tr)
    check(kt, tk, 0, PUBLIC / name, 10)
    # others: min/max over the folded events, the mean their sum over their calls
    o = tk[tk["name"] == "others"]
    assert len(o) and ((o["min_ns"] <= o["mean_ns"]) & (o["mean_ns"] <= o["max_ns"])).all()
    assert (o["mean_ns"] == o["sum_ns"] // o["calls"]).all()


def test_busy_is_the_union():
    """busy_ns counts overlap once: on rank 0 of the NCCL pair the communication kernels
    ran beside compute, so the three types' busy times add up to more than the union of all
    GPU events (worked out from the raw JSON: sort the intervals, merge)."""
    traces = load_traces(NCCL, partial=True)   # two ranks of a run of 128
    kt = kernel_types(traces)
    raw = [e for e in raw_trace_events(NCCL / "hta_2024-03_nccl_sampled_rank0.json.gz")
           if e.get("ph") == "X" and isinstance(e.get("args"), dict) and "stream" in e["args"]]
    iv = sorted((round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)) for e in raw)
    union, end = 0, None
    for s, e in iv:
        if end is None or s > end:
            union += e - s
            end = e
        elif e > end:
            union += e - end
            end = e
    r0 = kt[kt["rank"] == 0]
    print(f"rank 0: busy by type {r0['busy_ns'].tolist()}, union of all {union:,} ns")
    assert r0["busy_ns"].sum() > union
    assert (r0["busy_ns"] <= r0["sum_ns"]).all()


def test_cpu_only_trace_says_so():
    tr = load_trace(PUBLIC / "hta_2024-07_cpu_only.json.gz")
    with pytest.raises(GpuIdleError, match=r"hta_2024-07_cpu_only\.json\.gz: no GPU events"):
        kernel_types(tr)
    with pytest.raises(GpuIdleError, match="top must be 1 or more"):
        top_kernels(load_trace(PUBLIC / SINGLE[0]), top=0)


# --- moved from the docstrings of kitlib/analyses/kernel_launches.py (issue 39) -------------

def test_kernel_type_and_top_kernels_docstring_examples():
    import pandas as pd
    from kitlib.analyses.kernel_launches import kernel_type, top_kernels
    from kitlib.model.examples import tiny_trace
    t = kernel_type(pd.DataFrame({"kind": ["kernel", "kernel", "memset", "kernel"],
                                  "name": ["ncclKernel_AllReduce", "ncclDevKernel_AllGather",
                                           "Memset (Device)", "relu_kernel"]}))
    assert t.tolist() == ["COMMUNICATION", "COMMUNICATION", "MEMORY", "COMPUTATION"] and t.dtype == "<U13"
    k = top_kernels(tiny_trace())[["rank", "kernel_type", "name", "calls", "sum_ns", "share"]]
    assert k.values.tolist() == [[0, "COMPUTATION", "relu_kernel", 1, 400, 1.0]]
