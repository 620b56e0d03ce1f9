"""Derived figures pinned to values computed here from the tools' own files, without kitlib.

Each expected value below is read off a file a tool wrote (the profiler's ``key_averages``
rows, the raw Chrome-trace JSON, Nsight's SQLite export and its ``nsys stats`` CSVs, the
wall-clock stamps of ``cold_start_8step``), by code in this file that uses only ``gzip``,
``json``, ``csv`` and ``sqlite3``; or it is a figure of ``data/reference/PROVENANCE.md``.
kitlib's derived figures (per call, shares, per-step peaks, the cold-start table, the
parent and operator chosen at tie and boundary times) must equal them exactly.

These tests are the ones that catch the five one-line mutations of issue 16 (see the
README's "For developers" section).
"""
import collections
import csv
import gzip
import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from conftest import merged_length, raw_trace_events
from support.events import event, ns as _ns

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "data" / "reference"
PUBLIC = ROOT / "tests" / "data" / "public-traces"
HTA_2022 = "hta_2022-08_a100_rank3.json.gz"


def _key_averages(name="fixed_batch"):
    with gzip.open(REF / name / "key_averages.json.gz", "rt") as f:
        return json.load(f)


# -- per call and shares (grouping) --------------------------------------------------

@pytest.fixture(scope="module")
def fixed_events():
    import kitlib
    from kitlib.analyses import events as E
    from kitlib.analyses.chain import chain
    cap = kitlib.open_capture("fixed_batch")
    tr = cap.trace
    return tr, E.op_events(tr, chain(tr))


def test_device_per_call_is_total_device_time_over_calls(fixed_events):
    """Catches: per-call device time computed from self device time (conv2d 95.9 -> 0.0 µs)."""
    from kitlib.analyses import grouping as G
    tr, ev = fixed_events
    by_name = _key_averages()["by_name"]
    names = collections.Counter(r["key"] for r in by_name)
    # a label seen on both sides (``forward``, ``backward``…) has a CPU and a GPU row: left out here
    rows = {r["key"]: r for r in by_name if names[r["key"]] == 1}
    conv2d = rows["aten::conv2d"]          # the profiler's row: 265 calls, 25,404.581 µs total, 0 self
    assert conv2d["count"] == 265 and conv2d["self_device_time_total_us"] == 0.0
    total_ns = round(conv2d["device_time_total_us"] * 1000)
    assert total_ns == 25_404_581
    t = G.group_ops(tr, by="name", events=ev)
    cpu = t[t["device_type"] == "CPU"].set_index("name")
    assert cpu.loc["aten::conv2d", "device_per_call_ns"] == pytest.approx(total_ns / 265, abs=1e-6)  # 95,866.34 ns
    assert round(cpu.loc["aten::conv2d", "device_per_call_ns"] / 1000, 1) == 95.9
    # every operator row: per call = the profiler's device total / its count (to the JSON's ns)
    checked = 0
    for name, r in cpu.iterrows():
        p = rows.get(name)
        if p is None or p["device_time_total_us"] == 0:
            continue
        assert r["device_per_call_ns"] == pytest.approx(p["device_time_total_us"] * 1000 / p["count"], abs=1), name
        assert r["host_per_call_ns"] == pytest.approx(p["cpu_time_total_us"] * 1000 / p["count"], abs=1), name
        checked += 1
    assert checked >= 40


def test_shape_table_shares_are_device_time_shares(fixed_events):
    """Catches: ``device_share`` computed by call count in ``grouping.shape_table``."""
    from kitlib.analyses import grouping as G
    tr, ev = fixed_events
    raw = [r for r in _key_averages()["by_input_shape"] if r["key"] == "aten::cudnn_convolution"]
    total = sum(round(r["device_time_total_us"] * 1000) for r in raw)
    assert total == 25_404_581 and len(raw) == 23
    first = max(raw, key=lambda r: r["device_time_total_us"])   # the stem convolution, 5 calls
    assert first["count"] == 5 and round(first["device_time_total_us"] * 1000) == 3_909_209
    t = G.shape_table(tr, "aten::cudnn_convolution", events=ev)
    assert len(t) == 23 and t["device_share"].sum() == pytest.approx(1.0)
    assert t.iloc[0]["device_share"] == pytest.approx(3_909_209 / 25_404_581, abs=1e-7)   # 0.1539, not 5/265
    assert t.iloc[0]["device_per_call_ns"] == pytest.approx(3_909_209 / 5, abs=1)
    for r in t.itertuples():
        assert r.device_share == pytest.approx(r.device_total_ns / 25_404_581, abs=1e-12)
    assert list(t.columns) == ["input_shapes", "first_input", "tensors", "count", "device_total_ns",
                               "device_per_call_ns", "device_share", "host_total_ns"]
    # an operator that launches nothing: no device time, so every share is 0, not 0/0
    empty = G.shape_table(tr, "aten::empty", events=ev)
    assert len(empty) == 1 and empty.loc[0, "device_total_ns"] == 0 and empty.loc[0, "device_share"] == 0.0


# -- per-step memory peaks (memory) ------------------------------------------------

def _raw_step_memory(name="profiler_5step"):
    """Per ProfilerStep#N of the raw JSON: the [memory] records of the GPU (Device Type 1)
    inside the step's interval, in time order."""
    ev = raw_trace_events(REF / name / "trace.json.gz")
    steps = [e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")]
    mem = sorted((e for e in ev if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1),
                 key=lambda e: e["ts"])
    out = {}
    for s in steps:
        inside = [m["args"] for m in mem if s["ts"] <= m["ts"] <= s["ts"] + s["dur"]]
        out[int(s["name"].split("#")[1])] = inside
    return out


def test_per_step_memory_peaks_from_raw_json():
    """Catches: a step's memory peak taken as its last value in ``memory.memory_per_step``."""
    import kitlib
    from kitlib.analyses import memory as M
    raw = _raw_step_memory()
    assert sorted(raw) == [2, 3, 4, 5, 6]
    per = M.memory_per_step(M.memory_timeline(kitlib.open_capture("profiler_5step").trace)).set_index("step")
    for step, recs in raw.items():
        assert per.loc[step, "events"] == len(recs) == 1922
        assert per.loc[step, "peak_allocated_bytes"] == max(r["Total Allocated"] for r in recs) == 11_462_948_352
        assert per.loc[step, "end_allocated_bytes"] == recs[-1]["Total Allocated"] == 437_928_448
        assert per.loc[step, "start_allocated_bytes"] == recs[0]["Total Allocated"] - recs[0]["Bytes"] == 437_928_448
        assert per.loc[step, "reserved_max_bytes"] == max(r["Total Reserved"] for r in recs) == 13_352_566_784
    assert list(per.reset_index().columns) == ["step", "events", "start_allocated_bytes", "peak_allocated_bytes",
                                               "growth_bytes", "end_allocated_bytes", "forward_growth_bytes",
                                               "reserved_max_bytes"]
    # the peak is far above where the step ends: a "last value" would read 0.44 GB
    assert (per["peak_allocated_bytes"] - per["end_allocated_bytes"] == 11_025_019_904).all()


# -- the cold-start table (coldstart) --------------------------------------------

def _nsys_first_step(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        q = con.execute
        rows = q("SELECT n.start, n.end, COALESCE(n.text, s.value) FROM NVTX_EVENTS n "
                 "LEFT JOIN StringIds s ON s.id = n.textId "
                 "WHERE COALESCE(n.text, s.value) IN ('data_load', 'torch_step') ORDER BY n.start").fetchall()
        dl = [r for r in rows if r[2] == "data_load"]
        st = [r for r in rows if r[2] == "torch_step"]
        ds, de = dl[0][:2]
        # the batch's host-to-device copies (copyKind 1) whose cudaMemcpyAsync ran inside that range
        copies = q("SELECT m.end FROM CUPTI_ACTIVITY_KIND_MEMCPY m JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
                   "ON r.correlationId = m.correlationId WHERE m.copyKind = 1 AND r.start BETWEEN ? AND ?",
                   (ds, de)).fetchall()
    finally:
        con.close()
    return {"first_dl": de - ds, "second_dl": dl[1][1] - dl[1][0], "end_in_step": de - st[0][0],
            "copies": len(copies), "copy_end_after": max(c[0] for c in copies) - de}


def test_cold_start_table_from_the_tools_files():
    """Catches: the second ``data_load`` row used instead of the first in ``cold_start_figures``."""
    import kitlib
    from kitlib.analyses import coldstart
    from kitlib.course.sources import B300
    from kitlib.readers.nsys import load_nsys
    nsys = _nsys_first_step(REF / "nsys_8step" / "report.sqlite")
    assert nsys["copies"] == 2                                    # images and labels
    # nsys stats nvtx_sum prints the longest data_load range (the cold first one) as its Max
    with open(REF / "nsys_8step" / "nsys_stats" / "nvtx_sum.csv") as f:
        printed = {r["Range"]: r for r in csv.DictReader(f)}
    assert int(printed[":data_load"]["Max (ns)"]) == nsys["first_dl"] == 1_469_484_230   # PROVENANCE: 1,469.48 ms
    assert nsys["second_dl"] == 429_487
    with open(REF / "cold_start_8step" / "wallclock.json") as f:
        wall = json.load(f)
    first_next = wall["steps"][0]["next_end_ns"] - wall["steps"][0]["next_start_ns"]
    assert first_next == 1_523_311_936                                                   # PROVENANCE: 1,523 ms
    dl = sorted((e for e in raw_trace_events(REF / "cold_start_8step" / "trace.json.gz")
                 if e.get("ph") == "X" and e.get("name") == "data_load"), key=lambda e: e["ts"])
    profiler_first = round(dl[0]["dur"] * 1000)
    assert profiler_first == 1_523_361_537

    cold = kitlib.open_capture("cold_start_8step")
    f = coldstart.cold_start_figures(report=load_nsys(kitlib.open_capture("nsys_8step")), trace=cold.trace,
                                     wallclock=coldstart.read_wallclock(cold.read_json("wallclock.json")),
                                     b300=B300).set_index("measure")
    assert f["value_ns"].to_dict() == {
        "first data_load range (Nsight NVTX)": nsys["first_dl"],
        "end of first data_load since torch_step start": nsys["end_in_step"],       # 1,469,486,714
        "batch copy end minus range end, step 0": nsys["copy_end_after"],           # -116,850
        "first next() (wall clock, perf_counter_ns)": first_next,
        "first data_load range (torch.profiler annotation)": profiler_first,
    }
    assert nsys["end_in_step"] == 1_469_486_714 and nsys["copy_end_after"] == -116_850
    # which tool measured each row, as the lesson's table shows it
    assert f["tool"].tolist() == ["Nsight Systems"] * 3 + ["perf_counter_ns", "torch.profiler"]
    assert list(f.columns) == ["value_ns", "b300_ns", "tool"] and str(f["b300_ns"].dtype) == "Int64"
    # the B300 column: the source texts' figures (kitlib.course.sources), ms -> ns
    assert f.loc["first data_load range (Nsight NVTX)", "b300_ns"] == round(B300["first_data_load_ms"] * 1e6)
    assert f.loc["batch copy end minus range end, step 0", "b300_ns"] == round(
        (B300["first_h2d_copy_end_ms"] - B300["first_data_load_end_ms"]) * 1e6)


# -- ties and boundaries on the public 2022 trace ----------------------------------

@pytest.fixture(scope="module")
def hta2022():
    from kitlib.readers.trace import load_trace
    return load_trace(PUBLIC / HTA_2022), raw_trace_events(PUBLIC / HTA_2022)


def _brute_innermost(raw):
    """For each runtime call (by correlation id): the operator or annotation on its thread
    that contains its start, innermost = latest start, then shortest, then last in the file
    (an exhaustive search, not a sweep)."""
    ops = [e for e in raw if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    by = collections.defaultdict(list)
    for i, e in enumerate(ops):
        by[(e["pid"], e["tid"])].append(i)
    arr = {k: (np.array([ops[i]["ts"] for i in v]), np.array([ops[i]["dur"] for i in v]), v) for k, v in by.items()}
    out, ties = {}, set()
    for e in raw:
        if e.get("ph") != "X" or e.get("cat") != "cuda_runtime":
            continue
        corr = e["args"]["correlation"]
        k = (e["pid"], e["tid"])
        if k not in arr:
            out[corr] = None
            continue
        s, d, idx = arr[k]
        cand = np.flatnonzero((s <= e["ts"]) & (s + d >= e["ts"]))
        if not len(cand):
            out[corr] = None
            continue
        late = cand[s[cand] == s[cand].max()]
        if len(late) > 1:
            ties.add(corr)
        best = late[d[late] == d[late].min()][-1]
        o = ops[idx[best]]
        out[corr] = (o["name"], o["ts"] * 1000)
    return out, ties


def test_operator_of_each_launch_at_equal_start_times(hta2022):
    """Catches: equal start times ordered shortest first in ``model.window.label_at``
    (the enclosing operator would be chosen instead of the innermost one)."""
    from kitlib.analyses.chain import chain, innermost_op_at
    tr, raw = hta2022
    expected, ties = _brute_innermost(raw)
    assert len(ties) == 26          # launches inside two operators that start in the same µs
    L = tr.launches
    got = {}
    for (pid, tid), g in L.groupby(["pid", "tid"]):
        rows = innermost_op_at(tr, pid, tid, g["start_ns"].to_numpy())
        for corr, r in zip(g["correlation"], rows):
            got[int(corr)] = None if r < 0 else (tr.ops.at[r, "name"], int(tr.ops.at[r, "start_ns"]))
    assert len(got) == 24_692 and got == expected
    # the chain (kernels, copies, sets) links the same operators, the tied ones included
    c = chain(tr)
    assert len(c) == 9_450
    linked = {int(k): (n, int(s)) for k, n, s in zip(c["correlation"], c["op_name"], c["op_start_ns"])}
    assert all(linked[k] == expected[k] for k in linked)
    tied = sorted(k for k in linked if k in ties)
    assert tied == [1773222, 1809973, 1847628, 1866500]
    # e.g. correlation 1809973: aten::_local_scalar_dense starts in the same µs as the
    # operator around it, and is shorter: it is the launching operator
    assert linked[1809973] == ("aten::_local_scalar_dense", 1661203462779215000)


def _host(tr, name, ts_us):
    h = tr.host_events
    r = h[(h["name"] == name) & (h["start_ns"] == ts_us * 1000) & (h["tid"] == 3113936)]
    assert len(r) == 1, (name, ts_us)
    return r.iloc[0]


def _raw_main(raw, name, ts_us):
    e = [e for e in raw if e.get("ph") == "X" and e.get("tid") == 3113936 and e["name"] == name and e["ts"] == ts_us]
    assert len(e) == 1
    return e[0]


def test_host_tree_at_equal_starts_and_shared_ends(hta2022):
    """The profiler's rule (``EventList._populate_cpu_children``): sorted by start, longest
    first, ties in file order; an event is a child of the innermost open event it starts
    inside and does not outlast; starting exactly at an event's end makes a sibling.
    The cases are read off the raw JSON of the main thread (tid 3113936, whole µs)."""
    tr, raw = hta2022
    h = tr.host_events
    base = 1661203462598000

    def parent(name, ts):
        p = _host(tr, name, base + ts)["parent"]
        return None if p < 0 else (h.at[p, "name"], int(h.at[p, "start_ns"]) // 1000 - base)

    # equal starts, different ends: the longer one is the parent
    pub, emp = _raw_main(raw, "## metrics:publish ##", base + 810), _raw_main(raw, "aten::empty", base + 810)
    assert (pub["dur"], emp["dur"]) == (9, 1)
    assert parent("aten::empty", 810) == ("## metrics:publish ##", 810)
    # equal starts and equal ends: the file's order decides (aten::zeros is written first)
    z, e = _raw_main(raw, "aten::zeros", base + 834), _raw_main(raw, "aten::empty", base + 834)
    assert z["dur"] == e["dur"] == 1 and raw.index(z) < raw.index(e)
    assert parent("aten::empty", 834) == ("aten::zeros", 834)
    # a zero-length event at the exact end of two others is their sibling, not their child
    zero = _raw_main(raw, "aten::zero_", base + 804)
    assert zero["dur"] == 0
    assert [_raw_main(raw, "aten::zeros", base + t)["ts"] + _raw_main(raw, "aten::zeros", base + t)["dur"]
            for t in (801, 802)] == [base + 804] * 2
    assert parent("aten::zero_", 804) == ("ProfilerStep#1009", 772)
    assert parent("aten::zeros", 802) == ("aten::zeros", 801)
    # a shared end: aten::zeros [743, 757] inside aten::zeros [738, 757] is its child,
    # and the profiler folds a same-name only child into its parent
    inner, outer = _raw_main(raw, "aten::zeros", base + 743), _raw_main(raw, "aten::zeros", base + 738)
    assert inner["ts"] + inner["dur"] == outer["ts"] + outer["dur"]
    assert parent("aten::zeros", 743) == ("aten::zeros", 738)
    r = _host(tr, "aten::zeros", base + 743)
    assert bool(r["merged"]) and h.at[_host(tr, "aten::empty", base + 744)["profiler_parent"], "start_ns"] == (base + 738) * 1000
    # the zero-length aten::zero_ at 756 starts before that shared end: a child of the outer zeros
    assert h.at[_host(tr, "aten::zero_", base + 756)["profiler_parent"], "start_ns"] == (base + 738) * 1000


# -- lesson 03's four measures and lesson 02's queue delay, from the raw JSON -----------

def _step_work(ev, step_name, ns=_ns):
    """A step's raw events, picked here without kitlib: ``(step, ops, gpu)``, the step's
    event, the cpu_op events starting in its [start, end) and the GPU events (kernels,
    copies, sets) whose launch (by correlation id) starts in [start, end]; ``ns`` turns
    the JSON's µs into ns."""
    s = next(e for e in ev if e.get("name") == step_name)
    t0, t1 = ns(s["ts"]), ns(s["ts"]) + ns(s["dur"])
    ops = [e for e in ev if e.get("cat") == "cpu_op" and e.get("ph") == "X" and t0 <= ns(e["ts"]) < t1]
    launch_ts = {e["args"]["correlation"]: ns(e["ts"]) for e in ev
                 if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
           and t0 <= launch_ts.get(e["args"].get("correlation"), -1) <= t1]
    return s, ops, gpu


def test_four_measures_of_step_2_from_raw_json():
    """``four_measures(profiler_5step, step=2)``: the step's interval, its operators' totals,
    and the GPU events its launches made (correlation ids), summed and merged here."""
    from kitlib.analyses.four_measures import four_measures
    from kitlib.readers.trace import load_trace
    ev = raw_trace_events(REF / "profiler_5step" / "trace.json.gz")
    s, ops, gpu = _step_work(ev, "ProfilerStep#2")
    busy = merged_length([(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in gpu])
    expected = {"wall": _ns(s["dur"]), "host_ops_total_sum": sum(_ns(e["dur"]) for e in ops),
                "device_busy": busy, "gpu_sum": sum(_ns(e["dur"]) for e in gpu),
                "kernel_sum": sum(_ns(e["dur"]) for e in gpu if e["cat"] == "kernel")}
    assert expected == {"wall": 80_627_323, "host_ops_total_sum": 103_017_848, "device_busy": 43_034_894,
                        "gpu_sum": 43_349_583, "kernel_sum": 41_744_724}
    m = four_measures(load_trace(REF / "profiler_5step" / "trace.json.gz"), step=2).set_index("measure")["value_ns"]
    assert {k: int(m[k]) for k in expected} == expected


@pytest.mark.parametrize("rank,expected", [
    (0, {"wall": 607_312_000, "host_ops_total_sum": 370_921_000, "device_busy": 278_680_000,
         "gpu_sum": 302_241_000, "kernel_sum": 301_579_000}),
    (1, {"wall": 607_904_000, "host_ops_total_sum": 373_015_000, "device_busy": 272_003_000,
         "gpu_sum": 306_242_000, "kernel_sum": 303_575_000})])
def test_four_measures_on_epoch_times_from_raw_json(rank, expected):
    """The public NCCL pair writes times since the Unix epoch (1.68e18 ns, beyond float64's
    exact integers): ``four_measures`` of its first step (ProfilerStep#551) must keep every
    ns. Recomputed here with exact integer and decimal arithmetic from the raw JSON."""
    from decimal import Decimal
    from kitlib.analyses.four_measures import four_measures
    from kitlib.readers.trace import load_trace
    path = REF / "public-traces" / f"hta_2024-03_nccl_sampled_rank{rank}.json.gz"
    with gzip.open(path, "rt") as f:
        ev = json.load(f, parse_float=Decimal)["traceEvents"]

    def ns(us):
        return int(Decimal(us) * 1000)
    s, ops, gpu = _step_work(ev, "ProfilerStep#551", ns)
    got = {"wall": ns(s["dur"]), "host_ops_total_sum": sum(ns(e["dur"]) for e in ops),
           "device_busy": merged_length([(ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in gpu]),
           "gpu_sum": sum(ns(e["dur"]) for e in gpu), "kernel_sum": sum(ns(e["dur"]) for e in gpu if e["cat"] == "kernel")}
    assert got == expected
    m = four_measures(load_trace(path), step=551).set_index("measure")["value_ns"]
    assert {k: int(m[k]) for k in expected} == expected


def test_four_measures_whole_table_of_step_2_from_raw_json():
    """The rest of lesson 03's table as a learner reads it: each row's clock and its
    sentence, whose counts (2,696 operators on 2 threads, 745 GPU events, 541 kernels)
    and the top-level figure (each thread's operator intervals merged, 45,281,443 ns) are
    counted here from the raw JSON; host_ops_self_sum (38,099,312 ns) rests on the
    profiler's tree, which tests/oracle/test_oracle.py checks against key_averages()."""
    from kitlib.analyses.four_measures import four_measures
    from kitlib.readers.trace import load_trace
    ev = raw_trace_events(REF / "profiler_5step" / "trace.json.gz")
    s, ops, gpu = _step_work(ev, "ProfilerStep#2")
    threads = sorted({e["tid"] for e in ops}, key=str)
    top = sum(merged_length([(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in ops if e["tid"] == t])
              for t in threads)
    n_kernels = sum(e["cat"] == "kernel" for e in gpu)
    assert (len(ops), len(threads), len(gpu), n_kernels, top) == (2696, 2, 745, 541, 45_281_443)
    got = four_measures(load_trace(REF / "profiler_5step" / "trace.json.gz"), step=2)
    assert got.columns.tolist() == ["measure", "clock", "value_ns", "what"]
    assert got.index.tolist() == list(range(7)) and str(got["value_ns"].dtype) == "int64"
    assert [tuple(r) for r in got[["measure", "clock", "what"]].itertuples(index=False)] == [
        ("wall", "host", f"host interval of {s['name']}"),
        ("host_ops_total_sum", "host", f"totals of {len(ops):,} operators summed: nested calls counted again"),
        ("host_ops_self_sum", "host", "self times summed: each ns of operator time once, CUDA API calls left out"),
        ("host_ops_top_level", "host", f"operator intervals merged per thread, summed over {len(threads)} thread(s)"),
        ("device_busy", "device", f"union of the {len(gpu):,} kernels, copies and sets the step launched"),
        ("gpu_sum", "device", "the same GPU events' durations summed"),
        ("kernel_sum", "device", f"durations of the {n_kernels:,} kernels summed"),
    ]
    assert int(got.set_index("measure").loc["host_ops_top_level", "value_ns"]) == top


def test_queue_delay_of_the_first_convolution_from_raw_json():
    """Lesson 02's queue delay: the first aten::cudnn_convolution's third launch (PROVENANCE.md:
    cudaLaunchKernelExC 12.929 µs) to the start of its kernel (732.513 µs long)."""
    from kitlib import open_capture
    from kitlib.course.exercises import l02
    ev = raw_trace_events(REF / "profiler_5step" / "trace.json.gz")
    conv = min((e for e in ev if e.get("name") == "aten::cudnn_convolution"), key=lambda e: e["ts"])
    a, b = _ns(conv["ts"]), _ns(conv["ts"]) + _ns(conv["dur"])
    launches = sorted((e for e in ev if e.get("cat") == "cuda_runtime" and e["tid"] == conv["tid"]
                       and e["name"].startswith("cudaLaunch") and a <= _ns(e["ts"]) <= b), key=lambda e: e["ts"])
    assert [(e["name"], e["dur"]) for e in launches] == [
        ("cudaLaunchKernel", 27.598), ("cudaLaunchKernel", 6.971), ("cudaLaunchKernelExC", 12.929)]
    third = launches[2]
    kernel = next(e for e in ev if e.get("cat") == "kernel" and e["args"]["correlation"] == third["args"]["correlation"])
    assert kernel["dur"] == 732.513
    delay_us = (_ns(kernel["ts"]) - _ns(third["ts"])) / 1000
    from_end_us = (_ns(kernel["ts"]) - _ns(third["ts"]) - _ns(third["dur"])) / 1000
    assert (delay_us, from_end_us) == (844.61, 831.681)
    q = l02.questions(open_capture("profiler_5step"))["queue_delay_us"]
    assert q.answer == delay_us and q.judge(delay_us).correct is True
    assert q.judge(from_end_us).correct is False          # measured from the launch's end: a trap


def test_shape_table_computes_its_own_events_the_same(fixed_events):
    """Lessons call ``shape_table(trace, name)`` without events: the same table."""
    from kitlib.analyses import grouping as G
    tr, ev = fixed_events
    own = G.shape_table(tr, "aten::cudnn_convolution")
    given = G.shape_table(tr, "aten::cudnn_convolution", events=ev)
    assert own.equals(given) and len(own) == 23
    # first_input is the first tensor of the profiler's input_shapes, for every group
    raw = {r["input_shapes"]: json.loads(r["input_shapes"])[0]
           for r in _key_averages()["by_input_shape"] if r["key"] == "aten::cudnn_convolution"}
    assert {r.input_shapes: r.first_input for r in own.itertuples()} == {k: str(v) for k, v in raw.items()}


def test_memory_peak_row_from_raw_json():
    """``memory_peak``: the first record holding the most allocated memory, its position
    among the GPU's [memory] records in time order, and the most ever reserved."""
    import kitlib
    from kitlib.analyses import memory as M
    ev = raw_trace_events(REF / "profiler_5step" / "trace.json.gz")
    mem = sorted((e for e in ev if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1),
                 key=lambda e: e["ts"])
    alloc = [e["args"]["Total Allocated"] for e in mem]
    pos = alloc.index(max(alloc))
    assert len(mem) == 9_610 and max(alloc) == 11_462_948_352
    tl = M.memory_timeline(kitlib.open_capture("profiler_5step").trace)
    peak = M.memory_peak(tl)
    assert peak["position"] == pos and peak["start_ns"] == _ns(mem[pos]["ts"])
    assert peak["reserved_max_bytes"] == max(e["args"]["Total Reserved"] for e in mem) == 13_352_566_784
    with pytest.raises(M.MemoryDataError, match="^the memory timeline is empty: no allocator events"):
        M.memory_peak(tl.iloc[:0])


def test_annotation_device_time_every_row_from_raw_json():
    """Lesson 03's table behind the ``forward`` row's Self CUDA: each gpu_user_annotation of
    profiler_5step (20), the host label with its External id, the GPU events of the same
    stream whose launch lies inside that label on its thread but outside every other label
    nested in it, and what they add up to; rebuilt here from the raw JSON with exact
    decimal arithmetic."""
    from decimal import Decimal
    import kitlib
    from kitlib.analyses.four_measures import annotation_device_time
    with gzip.open(REF / "profiler_5step" / "trace.json.gz", "rt") as f:
        ev = json.load(f, parse_float=Decimal)["traceEvents"]

    def ns(us):
        return int(Decimal(us) * 1000)
    labels = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "user_annotation"]
    by_ext = {}
    for e in sorted(labels, key=lambda e: ns(e["ts"])):
        by_ext.setdefault(e["args"].get("External id"), e)
    launch = {e["args"]["correlation"]: (e["tid"], ns(e["ts"])) for e in ev
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    work = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    want = []
    for g in (e for e in ev if e.get("cat") == "gpu_user_annotation"):
        h = by_ext[g["args"]["External id"]]
        h0, h1 = ns(h["ts"]), ns(h["ts"]) + ns(h["dur"])
        nested = [(ns(n["ts"]), ns(n["ts"]) + ns(n["dur"])) for n in labels if n is not h and n["tid"] == h["tid"]
                  and ns(n["ts"]) >= h0 and ns(n["ts"]) + ns(n["dur"]) <= h1]
        mine = []
        for k in work:
            tid, t = launch.get(k["args"].get("correlation"), (None, None))
            if tid == h["tid"] and h0 <= t <= h1 and k["args"].get("stream") == g["tid"] \
                    and not any(a <= t <= b for a, b in nested):
                mine.append((ns(k["ts"]), ns(k["ts"]) + ns(k["dur"])))
        busy = merged_length(mine)
        want.append((g["name"], g["tid"], ns(g["ts"]), ns(g["dur"]), len(mine),
                     max(b for _, b in mine) - min(a for a, _ in mine) if mine else 0,
                     busy, sum(b - a for a, b in mine), ns(g["dur"]) - busy, h["tid"]))
    got = annotation_device_time(kitlib.open_capture("profiler_5step").trace)
    assert got.columns.tolist() == ["name", "stream", "span_start_ns", "span_ns", "events", "rebuilt_span_ns",
                                    "busy_ns", "sum_ns", "idle_in_span_ns", "host_tid"]
    assert sorted(tuple(r) for r in got.itertuples(index=False)) == sorted(want)
    assert len(want) == 20 and {w[0] for w in want} >= {"forward", "backward", "h2d"}
    fwd = [w for w in want if w[0] == "forward"]
    assert sum(w[3] for w in fwd) == 130_924_496          # the spans' sum: Self CUDA of forward, 130.924 ms


def test_memory_held_at_the_peak_from_raw_json():
    """Lesson 07's table of what holds memory at the peak: the GPU's [memory] records of
    profiler_5step up to the peak, the last record at each address kept when it is an
    allocation, summed per operator (each record's operator as memory_timeline labels it,
    checked against the raw JSON in test_memory_timeline_labels_from_raw_json); what
    Total Allocated counts beyond that was allocated before the recording began. Largest
    first; ties by operator name."""
    import pandas as pd
    import kitlib
    from kitlib.analyses import memory as M
    ev = raw_trace_events(REF / "profiler_5step" / "trace.json.gz")
    mem = sorted((e for e in ev if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1),
                 key=lambda e: e["ts"])
    alloc = [e["args"]["Total Allocated"] for e in mem]
    pos = alloc.index(max(alloc))
    trace = kitlib.open_capture("profiler_5step").trace
    tl = M.memory_timeline(trace)
    last = {}
    for i, e in enumerate(mem[: pos + 1]):
        last[e["args"]["Addr"]] = (e["args"]["Bytes"], tl["op"].iloc[i])
    per_op = {}
    for nbytes, op in last.values():
        if nbytes > 0:
            n, b = per_op.get(op, (0, 0))
            per_op[op] = (n + 1, b + nbytes)
    before = alloc[pos] - sum(b for _, b in per_op.values())
    rows = [(op, n, b) for op, (n, b) in per_op.items()] + [("(before the recording)", None, before)]
    rows.sort(key=lambda r: (-r[2], r[0] == "(before the recording)", r[0]))
    got = M.memory_held_at(trace, tl, pos)
    assert got.columns.tolist() == ["op", "allocations", "held_bytes", "share_of_allocated"]
    assert str(got["allocations"].dtype) == "Int64" and str(got["held_bytes"].dtype) == "int64"
    assert [(r.op, None if r.allocations is pd.NA else int(r.allocations), int(r.held_bytes))
            for r in got.itertuples()] == rows
    assert got["share_of_allocated"].tolist() == [b / alloc[pos] for _, _, b in rows]
    assert (got["op"].iloc[0], before, len(rows)) == ("aten::cudnn_convolution", 341_229_568, 10)
    # the first record (position 0): its own allocation, and what was allocated before
    first = M.memory_held_at(trace, tl, 0)
    assert [(r.op, int(r.held_bytes)) for r in first.itertuples()] == sorted(
        [(tl["op"].iloc[0], mem[0]["args"]["Bytes"]),
         ("(before the recording)", mem[0]["args"]["Total Allocated"] - mem[0]["args"]["Bytes"])],
        key=lambda r: -r[1])
    with pytest.raises(M.MemoryDataError, match=r"^position 9610 is outside the memory timeline \(0 to 9609\)$"):
        M.memory_held_at(trace, tl, len(mem))
    with pytest.raises(M.MemoryDataError, match=r"^position -1 is outside"):
        M.memory_held_at(trace, tl, -1)


def _printed_table(path, table=0):
    """Rows of one of the profiler's printed tables (``key_averages().table()``), by name:
    the columns as printed (text)."""
    blocks = path.read_text().split("\n\n")
    lines = [ln for ln in blocks[table].splitlines() if ln.strip()]
    head = [i for i, ln in enumerate(lines) if ln.startswith("---")]
    header = lines[head[0] + 1]
    # column ends: each printed header is right-aligned to its column's end
    import re as _re
    cols = [(m.group(0).strip(), m.end()) for m in _re.finditer(r"\S+(?: \S+)*", header)]
    rows = {}
    for ln in lines[head[1] + 1:head[2]]:
        vals, start = {}, 0
        for name, end in cols:
            vals[name] = ln[start:end].strip()
            start = end
        rows[vals["Name"]] = vals
    return rows


def _printed_us(text):
    v, unit = float(text[:-2]), text[-2:]
    return v * {"us": 1e3, "ms": 1e6}[unit] if unit in ("us", "ms") else float(text[:-1]) * 1e9


def test_per_call_times_equal_the_profilers_printed_averages(ref_trace):
    """The profiler prints "CPU time avg" and "CUDA time avg" (total ÷ calls) in its own
    table (profiler_5step/key_averages_tables.txt, by name): kitlib's per-call columns
    must print the same digits."""
    from kitlib.analyses import grouping as G
    printed = _printed_table(REF / "profiler_5step" / "key_averages_tables.txt")
    assert printed["aten::cudnn_convolution"]["CUDA time avg"] == "96.284us"
    tr = ref_trace("profiler_5step")
    t = G.group_ops(tr, by="name")
    cpu = t[t["device_type"] == "CPU"].set_index("name")
    checked = 0
    for name in ["aten::convolution_backward", "aten::cudnn_batch_norm_backward", "aten::cudnn_batch_norm",
                 "aten::cudnn_convolution", "aten::add_"]:
        p = printed[name]
        assert int(p["# of Calls"]) == cpu.loc[name, "count"], name
        for col, ours in [("CUDA time avg", "device_per_call_ns"), ("CPU time avg", "host_per_call_ns")]:
            got = cpu.loc[name, ours]
            digits = f"{got / 1e3:.3f}us" if got < 1e6 else f"{got / 1e6:.3f}ms"
            assert digits == p[col], (name, col, got)
            checked += 1
    assert checked == 10


def test_op_summary_of_the_first_convolution(ref_trace):
    """Lesson 02's figures for the first aten::cudnn_convolution of ProfilerStep#2: all in
    PROVENANCE.md, and its three GPU events (51.648 + 3.457 + 732.513 µs in the raw JSON)."""
    from kitlib.analyses.chain import first_op, op_summary
    tr = ref_trace("profiler_5step")
    s = op_summary(tr, first_op(tr, "aten::cudnn_convolution", step=2))
    assert s["op_host_us"] == 184.909 and s["launch_count"] == 3
    assert s["launches"] == [("cudaLaunchKernel", 27.598), ("cudaLaunchKernel", 6.971), ("cudaLaunchKernelExC", 12.929)]
    assert s["longest_kernel"].startswith("sm80_xmma_fprop_implicit_gemm_")
    assert (s["longest_kernel_us"], s["longest_kernel_launch_index"], s["longest_kernel_launch_us"]) == (732.513, 3, 12.929)
    assert s["kernel_sum_us"] == pytest.approx(51.648 + 3.457 + 732.513, abs=1e-9)
    assert s["input_dims"][:2] == [[128, 3, 224, 224], [64, 3, 7, 7]]
    assert list(s) == ["op_name", "op_host_us", "input_dims", "launch_count", "launches", "longest_kernel",
                       "longest_kernel_us", "longest_kernel_launch_index", "longest_kernel_launch_us", "kernel_sum_us"]
    assert s["op_name"] == "aten::cudnn_convolution"
    # an operator that launched nothing (a view): no longest kernel, nothing summed
    v = op_summary(tr, first_op(tr, "aten::view", step=2))
    assert (v["op_name"], v["launch_count"], v["launches"], v["kernel_sum_us"]) == ("aten::view", 0, [], 0.0)
    assert [v[k] for k in list(v)[5:9]] == [None, None, None, None]


def test_host_tree_at_shared_ends_in_a_ns_trace():
    """A ns-resolution trace (torch 2.14 CPU oracle recording, tests/data/oracle-cpu/resnet18):
    the Python frames still open when the profiler stopped all end at the same instant; each
    is the child of its caller (the frame that starts just before it), not a sibling."""
    from kitlib.readers.trace import load_trace
    path = ROOT / "tests" / "data" / "oracle-cpu" / "resnet18" / "trace.json.gz"
    chain_of_frames = ["recorder.py(264): <module>", "recorder.py(260): main", "recorder.py(221): record",
                       "torch/profiler/profiler.py(1236): step", "torch/profiler/profiler.py(1344): _transit_action",
                       "torch/profiler/profiler.py(455): stop_trace", "torch/autograd/profiler.py(427): __exit__"]
    raw = [e for e in raw_trace_events(path) if e.get("ph") == "X" and e.get("cat") == "python_function"]
    frames = [max((e for e in raw if e["name"] == n), key=lambda e: e["ts"]) for n in chain_of_frames]   # the last call
    ends = {_ns(e["ts"]) + _ns(e["dur"]) for e in frames}
    assert len(ends) == 1                                     # one shared end, in the raw JSON
    assert [_ns(e["ts"]) for e in frames] == sorted(_ns(e["ts"]) for e in frames)
    tr = load_trace(path)
    h = tr.host_events
    for caller, callee in zip(frames, frames[1:]):
        r = h[(h["name"] == callee["name"]) & (h["start_ns"] == _ns(callee["ts"]))]
        assert len(r) == 1
        p = h.loc[r.iloc[0]["parent"]]
        assert (p["name"], p["start_ns"]) == (caller["name"], _ns(caller["ts"])), callee["name"]


def test_memory_timeline_labels_from_raw_json():
    """Each GPU allocator record of profiler_5step gets the step and phase label that contain
    it (the latest starting, ends inclusive) and, for step 2, the innermost operator on its
    thread: found here by exhaustive search over the raw JSON."""
    import pandas as pd
    import kitlib
    from kitlib.analyses import memory as M
    ev = raw_trace_events(REF / "profiler_5step" / "trace.json.gz")
    mem = sorted((e for e in ev if e.get("name") == "[memory]" and e["args"].get("Device Type") == 1),
                 key=lambda e: e["ts"])
    t = np.array([_ns(e["ts"]) for e in mem])

    def latest_containing(intervals):
        s = np.array([a for a, _, _ in intervals])
        e = np.array([b for _, b, _ in intervals])
        out = []
        for x in t:
            hit = np.flatnonzero((s <= x) & (e >= x))
            out.append(intervals[hit[np.argmax(s[hit])]][2] if len(hit) else None)
        return out

    steps = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), int(e["name"].split("#")[1]))
             for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")]
    phases = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), e["name"]) for e in ev
              if e.get("cat") == "user_annotation" and e["name"] in ("data_load", "h2d", "forward", "backward", "optimizer")]
    tl = M.memory_timeline(kitlib.open_capture("profiler_5step").trace)
    assert tl.columns.tolist() == ["start_ns", "tid", "bytes", "allocated_bytes", "reserved_bytes", "device_id",
                                   "step", "phase", "op"]
    assert tl.index.tolist() == list(range(len(mem)))
    assert {c: str(tl[c].dtype) for c in ["start_ns", "tid", "bytes", "allocated_bytes", "reserved_bytes",
                                          "device_id", "step"]} == {
        "start_ns": "int64", "tid": "int64", "bytes": "int64", "allocated_bytes": "int64",
        "reserved_bytes": "int64", "device_id": "int64", "step": "Int64"}
    assert tl["start_ns"].tolist() == t.tolist()
    for col, key in (("tid", None), ("bytes", "Bytes"), ("allocated_bytes", "Total Allocated"),
                     ("reserved_bytes", "Total Reserved"), ("device_id", "Device Id")):
        assert tl[col].tolist() == [e["tid"] if key is None else e["args"][key] for e in mem], col
    assert [None if s is pd.NA else int(s) for s in tl["step"].tolist()] == latest_containing(steps)
    expected_phase = latest_containing(phases)
    assert [p if isinstance(p, str) else None for p in tl["phase"]] == expected_phase   # no label: NaN
    assert sum(p is None for p in expected_phase) > 0          # some records fall between the labels
    # the innermost operator of each record of step 2, on the record's own thread
    ops = [e for e in ev if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    first = [i for i, e in enumerate(mem) if steps[0][0] <= t[i] <= steps[0][1]]
    by_tid = {}
    for k, e in enumerate(ops):
        by_tid.setdefault(e["tid"], []).append(k)
    arrays = {tid: (np.array([_ns(ops[k]["ts"]) for k in ks]), np.array([_ns(ops[k]["dur"]) for k in ks]), ks)
              for tid, ks in by_tid.items()}
    for i in first:
        s, d, ks = arrays[mem[i]["tid"]]
        hit = np.flatnonzero((s <= t[i]) & (s + d >= t[i]))
        late = hit[s[hit] == s[hit].max()]
        best = late[d[late] == d[late].min()][-1]
        assert tl.at[i, "op"] == ops[ks[best]]["name"], i
    assert len(first) == 1922


def test_step_time_stats_from_the_raw_step_times():
    """Lesson 04's step-time table: each series of profiler_5step/step_times.json summarised
    here with the standard library (quartiles by linear interpolation, numpy's default)."""
    import statistics
    from kitlib.analyses import coldstart
    from kitlib.errors import KitError
    series = json.loads((REF / "profiler_5step" / "step_times.json").read_text())
    series = {k: v for k, v in series.items() if k.startswith("step_ms_")}
    st = coldstart.step_time_stats(series)
    for name, vals in series.items():
        med = statistics.median(vals)
        q1, _, q3 = statistics.quantiles(vals, n=4, method="inclusive")
        want = {"n": len(vals), "median_ms": med, "p25_ms": q1, "p75_ms": q3, "iqr_ms": q3 - q1,
                "min_ms": min(vals), "max_ms": max(vals), "mean_ms": statistics.fmean(vals),
                "outliers": sum(v > 2 * med for v in vals), "max_over_median": max(vals) / med}
        got = st.loc[name].to_dict()
        assert set(got) == set(want), name
        for k, w in want.items():
            assert got[k] == pytest.approx(w, rel=1e-12), (name, k)
    u = st.loc["step_ms_uninstrumented"]
    assert (round(u["p25_ms"], 3), round(u["p75_ms"], 3), round(u["iqr_ms"], 3)) == (44.915, 59.198, 14.283)
    with pytest.raises(KitError, match=r"^step times 'x': empty or holds NaN/inf"):
        coldstart.step_time_stats({"x": []})
    with pytest.raises(KitError, match=r"^step times 'y': not a list of numbers"):
        coldstart.step_time_stats({"y": ["fast"]})


@pytest.fixture(scope="module", params=["profiler_5step", "fixed_batch"])
def decimal_doc(request):
    """``(name, path, doc)``: a reference trace parsed with exact decimals (``parse_float=Decimal``,
    so µs × 1000 is the exact ns), once per recording for the three tests below (pytest runs
    all of one recording's tests, then the other's; each parse takes about a second)."""
    from decimal import Decimal
    path = REF / request.param / "trace.json.gz"
    return request.param, path, json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)


def test_op_events_carry_each_runtime_calls_external_id_from_raw_json(decimal_doc):
    """op_events' rows of CUDA runtime/driver calls (source "launches") keep the External id
    the raw JSON gives each call (none: <NA>), matched by name and start (ts in µs × 1000),
    and every call the raw JSON holds is a row, each once."""
    from decimal import Decimal

    import pandas as pd

    import kitlib
    from kitlib.analyses.events import op_events
    name, path, doc = decimal_doc
    want = collections.Counter((e["name"], int(Decimal(e["ts"]) * 1000), e.get("args", {}).get("External id"))
                               for e in doc["traceEvents"]
                               if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver"))
    ev = op_events(kitlib.load_trace(path))
    la = ev[ev["source"] == "launches"]
    assert all(x is pd.NA or type(x) is int for x in la["external_id"])   # as the operators' ids
    got = collections.Counter((n, int(s), None if pd.isna(x) else int(x))
                              for n, s, x in zip(la["name"], la["start_ns"], la["external_id"]))
    assert got == want
    assert sum(1 for k in want if k[2] is not None) > 1000      # most launches carry one


def test_op_events_operator_ids_from_raw_json(decimal_doc):
    """Each operator row of op_events (source "ops") carries the raw JSON's External id,
    Sequence number and Fwd thread id of its event (matched by name and start, ts µs ×
    1000), as Python ints, <NA> where the raw event has none."""
    from decimal import Decimal

    import pandas as pd

    import kitlib
    from kitlib.analyses.events import op_events
    name, path, doc = decimal_doc
    raw = collections.Counter(
        (e["name"], int(Decimal(e["ts"]) * 1000)) + tuple(e.get("args", {}).get(k) for k in
                                                          ("External id", "Sequence number", "Fwd thread id"))
        for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation"))
    ev = op_events(kitlib.load_trace(path))
    ops = ev[ev["source"] == "ops"]
    cols = ["external_id", "sequence_number", "fwd_thread_id"]
    for c in cols:
        assert all(x is pd.NA or type(x) is int for x in ops[c]), c
    got = collections.Counter((n, int(s)) + tuple(None if x is pd.NA else x for x in ids)
                              for n, s, *ids in zip(ops["name"], ops["start_ns"], *(ops[c] for c in cols)))
    assert not got - raw                                   # every row is a raw event, ids included
    assert sum(got.values()) > 0.9 * sum(v for k, v in raw.items() if not k[0].startswith("ProfilerStep"))
    assert (ops["sequence_number"].notna().sum(), ops["fwd_thread_id"].notna().sum()) > (1000, 1000)


def test_gpu_events_whole_table_from_raw_json(decimal_doc):
    """gpu_events: one row per GPU event of the raw JSON (kernel, gpu_memcpy, gpu_memset,
    gpu_user_annotation), its name as key, start/end/duration in ns (ts, dur µs × 1000),
    and the constant columns key_averages gives device rows."""
    from decimal import Decimal

    import kitlib
    from kitlib.analyses.events import gpu_events
    name, path, doc = decimal_doc
    kinds = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset", "gpu_user_annotation": "gpu_annotation"}
    want = collections.Counter(
        (e["name"], kinds[e["cat"]], int(Decimal(e["ts"]) * 1000), int(Decimal(e["ts"]) * 1000) + int(Decimal(e["dur"]) * 1000))
        for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in kinds)
    g = gpu_events(kitlib.load_trace(path))
    assert g.columns.tolist() == ["name", "key", "kind", "device_type", "start_ns", "end_ns", "dur_ns", "input_shapes",
                                  "host_self_ns", "device_self_ns", "device_total_ns", "n_gpu_events", "source", "row"]
    assert collections.Counter(zip(g["name"], g["kind"], g["start_ns"], g["end_ns"])) == want
    assert (g["key"] == g["name"]).all() and (g["dur_ns"] == g["end_ns"] - g["start_ns"]).all()
    assert (g["device_self_ns"] == g["dur_ns"]).all() and (g["device_total_ns"] == g["dur_ns"]).all()
    assert set(g["device_type"]) == {"CUDA"} and set(g["input_shapes"]) == {"[]"} and set(g["source"]) == {"gpu"}
    assert set(g["host_self_ns"]) == {0} and set(g["n_gpu_events"]) == {1} and g["row"].tolist() == list(range(len(g)))


def test_op_stacks_reach_a_frame_at_row_0_on_paper(tmp_path):
    """A Python frame that is the trace's first row (row 0) is still its children's parent:
    aten::add inside train.py(2): inner inside train.py(1): outer (row 0) has the stack
    (inner, outer), innermost first, as key_averages(group_by_stack_n=...) forms it."""
    import kitlib
    from kitlib.analyses.events import op_events, op_stacks
    ev = [{"ph": "X", "cat": "python_function", "name": "train.py(1): outer", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
          {"ph": "X", "cat": "python_function", "name": "train.py(2): inner", "pid": 1, "tid": 1, "ts": 10, "dur": 50},
          {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 20, "dur": 5,
           "args": {"External id": 1}}]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": ev}))
    tr = kitlib.load_trace(tmp_path / "t.json")
    assert tr.ops["name"].tolist()[0] == "train.py(1): outer"
    events = op_events(tr)
    assert events["name"].tolist() == ["aten::add"]
    assert op_stacks(tr, events) == [("train.py(2): inner", "train.py(1): outer")]


def test_enclosing_python_on_paper(tmp_path):
    """The innermost Python frame open on the event's own thread (same pid and tid) when it
    began, as a row label of trace.ops; -1 where none is: aten::add inside the frame (row 0),
    aten::mul on another thread, aten::sub in another process on a thread of the same
    number, aten::div after the frame ended; a trace without Python frames: all -1. And
    op_stacks works out op_events itself when not given them."""
    import kitlib
    from kitlib.analyses.events import enclosing_python, op_events, op_stacks

    def op(name, pid, tid, ts, ext):
        return event("cpu_op", name, ts, 5, pid, tid, **{"External id": ext})
    ops = [op("aten::add", 1, 1, 20, 1), op("aten::mul", 1, 2, 30, 2), op("aten::sub", 2, 1, 40, 3),
           op("aten::div", 1, 1, 200, 4)]
    frame = {"ph": "X", "cat": "python_function", "name": "train.py(1): outer", "pid": 1, "tid": 1, "ts": 0, "dur": 100}
    (tmp_path / "py.json").write_text(json.dumps({"traceEvents": [frame] + ops}))
    (tmp_path / "nopy.json").write_text(json.dumps({"traceEvents": ops}))
    tr = kitlib.load_trace(tmp_path / "py.json")
    events = op_events(tr)
    assert events["name"].tolist() == ["aten::add", "aten::mul", "aten::sub", "aten::div"]
    got = enclosing_python(tr, events)
    assert got.tolist() == [0, -1, -1, -1] and str(got.dtype) == "int64"
    assert op_stacks(tr) == op_stacks(tr, events) == [("train.py(1): outer",), (), (), ()]
    bare = kitlib.load_trace(tmp_path / "nopy.json")
    assert enclosing_python(bare, op_events(bare)).tolist() == [-1, -1, -1, -1]


def test_op_stacks_options_on_the_reference_trace():
    """op_stacks' options do what they say on profiler_5step (recorded with_stack): n=1 keeps
    only the innermost frame of each stack; backward=False leaves an event outside every
    Python frame of its thread with no stack, and backward=True (the default) gives some of
    them the forward operator's stack, so the two differ."""
    import kitlib
    from kitlib.analyses.events import enclosing_python, op_events, op_stacks
    tr = kitlib.load_trace(REF / "profiler_5step" / "trace.json.gz")
    ev = op_events(tr)
    full = op_stacks(tr, ev)
    one = op_stacks(tr, ev, n=1)
    assert one == [s[:1] for s in full] and any(len(s) > 1 for s in full)
    plain, inherited = op_stacks(tr, ev, backward=False), op_stacks(tr, ev, backward=True)
    outside = enclosing_python(tr, ev) < 0
    assert all(plain[i] == () for i in outside.nonzero()[0])
    assert any(inherited[i] != () for i in outside.nonzero()[0]) and plain != inherited


# -- step_time_stats, memory_per_step, memory_peak, _containing: mutants of 1 December ------

def test_step_time_stats_outliers_and_dtypes_on_paper():
    """``step_time_stats`` on two series worked on paper. An outlier is a step *above*
    ``outlier_factor`` × the median (2 by default): in ``at`` the slowest step is exactly 2 ×
    the median (6 ms over 3 ms) and is not one, in ``above`` it is 7 ms and is one; with
    ``outlier_factor=1.5`` (4.5 ms) ``at`` has one. ``n`` and ``outliers`` are integers in the
    table the lessons print, the rest float64; one row per series, in the order given."""
    from kitlib.analyses import coldstart
    st = coldstart.step_time_stats({"at": [3.0, 1.0, 6.0, 2.0, 4.0], "above": [7.0, 1.0, 2.0, 3.0, 4.0]})
    assert st.index.tolist() == ["at", "above"]
    assert st.columns.tolist() == ["n", "median_ms", "p25_ms", "p75_ms", "iqr_ms", "min_ms", "max_ms", "mean_ms",
                                   "outliers", "max_over_median"]
    assert [str(t) for t in st.dtypes] == ["int64"] + ["float64"] * 7 + ["int64", "float64"]
    # sorted 1 2 3 4 6: median 3; quartiles at positions 1 and 3 (linear interpolation) = 2 and 4;
    # mean 16 / 5; slowest over median 6 / 3
    assert st.loc["at"].tolist() == [5, 3.0, 2.0, 4.0, 2.0, 1.0, 6.0, 3.2, 0, 2.0]
    # sorted 1 2 3 4 7: mean 17 / 5 = 3.4; 7 > 2 × 3
    assert st.loc["above"].tolist() == pytest.approx([5, 3.0, 2.0, 4.0, 2.0, 1.0, 7.0, 3.4, 1, 7 / 3], rel=1e-15)
    assert coldstart.step_time_stats({"at": [3.0, 1.0, 6.0, 2.0, 4.0]}, outlier_factor=1.5).loc["at", "outliers"] == 1


def test_containing_labels_on_paper():
    """``model.window.label_at``, which gives each allocator record of ``memory_timeline``
    its phase (and ``step_of`` its step): the row of the latest-starting range, if that range
    still holds the time (half-open [start, end): kitlib.model.window), else <NA>. Ranges
    given out of order: first [0, 5), second [10, 20), inner [12, 15) (inside second, starting
    later), last [30, 40). Worked on paper: -1 before all; 0 first's start, 5 its end (in
    none); 7 in the gap after first; 10 second's start; 12 inner; 15 inner's end (second
    again); 25 in no range; 30 last's start, 40 its end (in none).
    Without ranges (a trace with no phase labels) every time gets <NA>."""
    import pandas as pd
    from kitlib.model.window import label_at

    def names(starts, ends, labels, times):
        r = pd.DataFrame({"start_ns": starts, "end_ns": ends, "name": labels}, index=range(10, 10 + len(starts)))
        at = label_at(times, r)
        assert str(at.dtype) == "Int64"
        return [r.at[k, "name"] if k is not pd.NA else "-" for k in at]

    t = np.array([-1, 0, 5, 7, 10, 12, 15, 25, 30, 40, 41], dtype=np.int64)
    assert names([30, 10, 0, 12], [40, 20, 5, 15], ["last", "second", "first", "inner"], t) == \
        ["-", "first", "-", "-", "second", "inner", "second", "-", "last", "-", "-"]
    assert names([], [], [], t) == ["-"] * len(t)
    # after inner ends (16, 18), second still holds the time: second, as memory_timeline's
    # docstring says ("open at that moment"); 21 is past both
    assert names([10, 12], [20, 15], ["second", "inner"], [11, 13, 16, 18, 20, 21]) == \
        ["second", "inner", "second", "second", "-", "-"]
    assert names([0, 10], [25, 20], ["outer", "inner"], [22]) == ["outer"]