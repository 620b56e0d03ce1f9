"""Steps, the four measures and self/total time on the reference recordings (H200)."""
import json
import re

import pandas as pd
import pytest

import kitlib
from kitlib.analyses import intervals
from kitlib.errors import KitError, KitFileError
from kitlib.analyses.four_measures import annotation_device_time, annotation_summary, four_measures, self_total
from kitlib.readers.profiler_table import profiler_table, read_profiler_table
from kitlib.analyses.steps import active_step_times, active_steps, step_gaps, step_measures, steps_of

from conftest import REF, sql_rows, raw_trace_events
from support.events import event, ns as _ns


@pytest.fixture(scope="module")
def cap():
    return kitlib.open_capture("profiler_5step")


@pytest.fixture(scope="module")
def trace(cap):
    return cap.trace


def test_one_step_finder(trace):
    st = trace.steps
    assert st.columns.tolist() == ["step", "name", "pid", "tid", "start_ns", "end_ns", "dur_ns"]
    assert st["step"].tolist() == [2, 3, 4, 5, 6]
    assert st["dur_ns"].iloc[0] == 80627323
    assert steps_of(trace).equals(st)
    # without ProfilerStep#N the kit's torch_step#N ranges are the steps (cold_start_8step)
    cold = kitlib.open_capture("cold_start_8step").trace.steps
    assert cold["name"].tolist() == [f"torch_step#{i}" for i in range(8)]


def test_step_measures_counts_launches_per_step(trace, nsys_8step_report):
    # what the retired step_table counted: GPU events whose launch lies in the step
    assert step_measures(trace)["gpu_launched"].tolist() == [745] * 5
    assert step_measures(nsys_8step_report)["gpu_launched"].tolist() == [905] + [745] * 7


def test_nsys_steps_from_nvtx(nsys_8step_report):
    st = steps_of(nsys_8step_report)
    assert st["step"].tolist() == list(range(8))
    assert st["dur_ns"].iloc[0] == 2656480289          # torch_step 0: 2,656.48 ms


def test_step_measures_profiler(trace):
    m = step_measures(trace).set_index("step")
    r = m.loc[2]
    assert r["wall_ns"] == 80627323
    assert r["forward_ns"] == 32146161 and r["data_load_ns"] == 420768
    assert r["device_busy_ns"] == 43034894 and r["gpu_sum_ns"] == 43349583 and r["kernel_sum_ns"] == 41744724
    assert (m["device_busy_ns"] <= m["gpu_sum_ns"]).all()
    assert (m["kernel_sum_ns"] <= m["gpu_sum_ns"]).all()
    assert (m["idle_ns"] == m["wall_ns"] - m["device_busy_ns"]).all()
    assert r["gaps"] == 4 and r["longest_gap_ns"] == 10516099


def test_step_measures_nsys_first_step_is_mostly_idle(nsys_8step_report):
    m = step_measures(nsys_8step_report).set_index("step")
    assert m.loc[0, "data_load_ns"] == 1469484230
    assert m.loc[0, "idle_ns"] > 0.95 * m.loc[0, "wall_ns"]
    later = m.loc[1:]
    assert (later["idle_ns"] < 0.2 * later["wall_ns"]).all()      # warm steps: the GPU is mostly busy
    assert m.loc[1, "idle_ns"] == 9394259


def test_step_gaps_name_what_the_host_was_in(nsys_8step_report, trace):
    g = step_gaps(nsys_8step_report, min_gap_ns=1_000_000)
    first = g.iloc[0]
    assert first["step"] == 0 and first["start_in_step_ns"] == 0 and first["dur_ns"] == 1404773345
    assert first["host_label"] == "data_load"
    assert (first["host_event"], first["host_event_kind"]) == ("sem_clockwait", "OS runtime")
    t = step_gaps(trace)
    assert t.iloc[0]["host_label"] == "forward"


def test_four_measures_exact_values_and_order(trace):
    # wall, host_ops_total_sum, device_busy, gpu_sum and kernel_sum are recomputed from the raw
    # JSON in test_golden_derived.py::test_four_measures_of_step_2_from_raw_json; the self sum
    # rests on the profiler's tree (Trace.host_events), which tests/oracle/test_oracle.py checks
    # against torch's own key_averages
    m = four_measures(trace, step=2).set_index("measure")["value_ns"]
    assert m["wall"] == 80627323
    assert m["host_ops_total_sum"] == 103017848
    assert m["host_ops_self_sum"] == 38099312
    assert m["device_busy"] == 43034894
    assert m["gpu_sum"] == 43349583
    assert m["kernel_sum"] == 41744724
    assert m["device_busy"] <= m["gpu_sum"] and m["kernel_sum"] <= m["gpu_sum"]
    assert m["host_ops_self_sum"] <= m["host_ops_top_level"] <= m["host_ops_total_sum"]
    assert m["host_ops_total_sum"] > m["wall"]          # nested totals count work again


def test_four_measures_unknown_step(trace):
    with pytest.raises(KitError, match="no step 99"):
        four_measures(trace, step=99)


def test_kernels_overlap_on_one_stream(trace):
    k = trace.kernels
    assert k["stream"].nunique() == 1
    assert k["dur_ns"].sum() - intervals.busy_ns(k) == 1559332


def test_self_total_matches_profiler_table(trace, cap):
    st = self_total(trace).set_index("name")
    table, totals = profiler_table(cap)
    tab = table.drop_duplicates("name").set_index("name")
    for op in ["aten::convolution_backward", "aten::cudnn_convolution", "aten::cudnn_batch_norm", "aten::add_"]:
        assert st.loc[op, "calls"] == tab.loc[op, "calls"]
        assert abs(st.loc[op, "self_ns"] - tab.loc[op, "self_cpu_ns"]) <= 500      # printed to 1 µs
        assert abs(st.loc[op, "total_ns"] - tab.loc[op, "cpu_total_ns"]) <= 500
    assert st.loc["aten::convolution_backward", "self_ns"] == 17830333
    assert st.loc["aten::convolution_backward", "total_ns"] == 29461674
    assert totals == {"self_cpu_total_ns": 397327000, "self_cuda_total_ns": 216559000}


def test_forward_self_cuda_is_its_gpu_spans(trace, cap):
    table, totals = profiler_table(cap)
    s = annotation_summary(trace, table, totals).set_index("name")
    assert s.loc["forward", "table_self_cuda_ns"] == 130924000
    assert s.loc["forward", "span_sum_ns"] == 130924496
    assert abs(s.loc["forward", "span_sum_ns"] - s.loc["forward", "table_self_cuda_ns"]) < 1000
    assert s.loc["forward", "busy_ns"] == 75575311           # the kernels keep it busy only part of the span
    # the footer total = kernels + copies + sets, annotation spans left out
    assert trace.kernels["dur_ns"].sum() == pytest.approx(totals["self_cuda_total_ns"], abs=1000)
    a = annotation_device_time(trace)
    assert ((a["span_ns"] - a["rebuilt_span_ns"]).abs() <= 2).all()


def test_read_profiler_table_bad_input(tmp_path):
    p = tmp_path / "not_a_table.txt"
    p.write_text("hello\nworld\n")
    with pytest.raises(KitFileError, match="0 profiler table"):
        read_profiler_table(p)
    with pytest.raises(KitFileError, match="no such file"):
        read_profiler_table(tmp_path / "missing.txt")


def test_steps_of_bad_source():
    with pytest.raises(KitError, match="expected a kitlib Trace"):
        steps_of("trace.json")


def test_innermost_range_search_is_the_containing_range_that_starts_last(trace):
    """host_context's search (model.window.label_at: blocks of ranges, not a scan of the
    whole table per time) gives, for every time, what the definition gives: of the ranges
    containing it, the one that starts last in start order (longest first)."""
    import numpy as np
    import pandas as pd
    from kitlib.model.window import label_at
    ops = trace.ops[(trace.ops["kind"] != "python") & (trace.ops["tid"] == trace.steps["tid"].iloc[0])]
    r = ops.sort_values(["start_ns", "dur_ns"], ascending=[True, False])
    s, e = r["start_ns"].to_numpy(), r["end_ns"].to_numpy()
    rng = np.random.default_rng(0)
    times = np.concatenate([rng.integers(s.min() - 1000, e.max() + 1000, 400), s[::997], e[::991]])
    got = label_at(times, ops)
    for t, label in zip(times, got):
        k = np.flatnonzero((s <= t) & (e > t))
        if k.size:
            assert label is not pd.NA and label == r.index[k[-1]]
        else:
            assert label is pd.NA
    assert (~got.isna()).sum() > 300


# -- step_measures: the shape of its table, the CPU-only branch, options and boundaries ----
# (mutmut's survivors on step_measures, 1 December 2026: each test names what it pins)

def test_step_measures_columns_dtypes_and_index(trace):
    """The exact table a lesson prints: columns in order, integer dtypes (phases Int64,
    <NA> where absent; counts int64) and a plain 0..n-1 index (no stray ``index`` column)."""
    m = step_measures(trace)
    assert m.columns.tolist() == ["step", "start_ns", "end_ns", "wall_ns", "data_load_ns", "h2d_ns",
                                  "forward_ns", "backward_ns", "optimizer_ns", "device_busy_ns", "gpu_sum_ns",
                                  "kernel_sum_ns", "idle_ns", "gaps", "longest_gap_ns", "gpu_launched"]
    assert m.index.equals(__import__("pandas").RangeIndex(5))
    assert {c: str(m[c].dtype) for c in m.columns if c.endswith("_ns") and c.split("_")[0] in
            ("data", "h2d", "forward", "backward", "optimizer")} == dict.fromkeys(
        ["data_load_ns", "h2d_ns", "forward_ns", "backward_ns", "optimizer_ns"], "Int64")
    assert [str(m[c].dtype) for c in ("gaps", "longest_gap_ns", "gpu_launched")] == ["int64"] * 3
    assert "note" not in m.attrs


def test_step_measures_on_a_recording_without_gpu_work():
    """The kit's two-rank CPU recording (Gloo): no device, so every device column is <NA>
    (Int64), no launches, a note says why, and the index is 0..n-1."""
    import pandas as pd
    from conftest import REF
    tr = kitlib.load_trace(REF / "ranks_balanced" / "rank0" / "trace.json.gz")
    assert tr.gpu.empty
    m = step_measures(tr)
    device = ["device_busy_ns", "gpu_sum_ns", "kernel_sum_ns", "idle_ns", "gaps", "longest_gap_ns"]
    phases = [c for c in m.columns if c.endswith("_ns") and c not in device + ["start_ns", "end_ns", "wall_ns"]]
    assert phases and m.columns.tolist() == ["step", "start_ns", "end_ns", "wall_ns"] + phases + device + ["gpu_launched"]
    for c in device:
        assert str(m[c].dtype) == "Int64" and m[c].isna().all(), c
    assert m["gpu_launched"].tolist() == [0] * len(m) and len(m) == len(tr.steps) > 0
    assert m.attrs["note"] == "no GPU activity in this recording: the device columns are <NA>"
    assert m.index.equals(pd.RangeIndex(len(m)))
    assert m["wall_ns"].tolist() == tr.steps["dur_ns"].tolist()


def test_step_measures_phases_and_min_gap_are_honoured(trace):
    """``phases`` chooses the phase columns (a phase that never occurs gets none, rather than
    zeros); ``min_gap_ns`` above every gap leaves no gap to count (0, not 1)."""
    full = step_measures(trace)
    some = step_measures(trace, phases=("forward", "no_such_phase"))
    assert [c for c in some.columns if c.endswith("_ns")][3:5] == ["forward_ns", "device_busy_ns"]
    assert "no_such_phase_ns" not in some.columns and "backward_ns" not in some.columns
    assert some["forward_ns"].equals(full["forward_ns"])
    # per step, the idle gaps over 1 ms that step_gaps lists, 0 where it lists none
    listed = step_gaps(trace, 1_000_000)
    assert full["gaps"].tolist() == [int((listed["step"] == s).sum()) for s in full["step"]] == [4, 1, 1, 0, 0]
    assert full["longest_gap_ns"].tolist() == [int(listed.loc[listed["step"] == s, "dur_ns"].max())
                                               if (listed["step"] == s).any() else 0 for s in full["step"]]
    none = step_measures(trace, min_gap_ns=10**15)
    assert none["gaps"].tolist() == [0] * 5 and none["longest_gap_ns"].tolist() == [0] * 5
    assert none["device_busy_ns"].equals(full["device_busy_ns"])


def test_step_measures_phase_bounds_and_threads(tmp_path):
    """A phase counts in a step when its range lies inside the step on the step's own
    thread: a range ending exactly at the step's end counts, one on another thread does
    not, and a zero-length range at the step's very end is not in it (it starts where the
    step ends: half-open [start, end), kitlib.model.window), so that column is absent.
    Built by hand: one ProfilerStep#1 of 1000 µs on thread 1."""
    import json
    def ann(name, ts, dur, tid=1):
        return event("user_annotation", name, ts, dur, tid=tid)
    events = [ann("ProfilerStep#1", 0, 1000),
              ann("forward", 100, 200), ann("forward", 150, 300, tid=2),     # the second: another thread
              ann("backward", 400, 600),                                     # ends exactly at the step's end
              ann("optimizer", 1000, 0)]                                     # zero length, at the end
    path = tmp_path / "bounds.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    m = step_measures(kitlib.load_trace(path))
    assert m[["forward_ns", "backward_ns"]].iloc[0].tolist() == [200_000, 600_000]
    assert "optimizer_ns" not in m.columns
    assert "h2d_ns" not in m.columns and m["gpu_launched"].tolist() == [0]


def test_step_gaps_columns(trace):
    """step_gaps' table as documented: the step first, then the gap, then the host's context."""
    g = step_gaps(trace)
    assert g.columns.tolist()[:6] == ["step", "start_ns", "end_ns", "dur_ns", "start_in_step_ns", "host_label"]
    assert g.columns.tolist()[6:] == ["host_event", "host_event_kind"]


def test_step_gaps_host_context_is_read_at_each_gaps_midpoint(nsys_8step_report):
    """What the host was inside is read at the middle of each gap (start + dur // 2), on the
    steps' thread: the same rows host_context gives for those times (the first gap of
    nsys_8step lasts over a second, long enough for the midpoint to matter)."""
    from kitlib.analyses.steps import host_context
    for source in (nsys_8step_report, kitlib.open_capture("cold_start_8step").trace):
        g = step_gaps(source)
        mid = (g["start_ns"] + g["dur_ns"] // 2).to_numpy()
        want = host_context(source, mid, tid=int(steps_of(source)["tid"].iloc[0]))
        cols = ["host_label", "host_event", "host_event_kind"]
        assert g[cols].reset_index(drop=True).equals(want[cols].reset_index(drop=True))
        assert len(g) > 0


def test_four_measures_bounds_and_a_given_chain(tmp_path):
    """Which events belong to a step, worked on paper. Built by hand: ProfilerStep#1 from 0
    to 1000 µs on thread 1 and ProfilerStep#2 after it. An operator counts when it starts inside [start, end): one at
    the step's first µs counts, one starting exactly at its end does not. A GPU event
    counts when its launch starts inside [start, end) too (kitlib.model.window: the launch
    at the step's end is step 2's). A ``chain_df`` passed in is the one used."""
    import json
    from kitlib.analyses.chain import chain

    def x(cat, name, ts, dur, tid=1, **args):
        return event(cat, name, ts, dur, tid=tid, **args)
    events = [x("user_annotation", "ProfilerStep#1", 0, 1000), x("user_annotation", "ProfilerStep#2", 1000, 1000),
              x("cpu_op", "aten::add", 0, 10, **{"External id": 1}),          # at the start: in
              x("cpu_op", "aten::mul", 1000, 10, **{"External id": 2}),       # at the end: out (step 2's)
              x("cuda_runtime", "cudaLaunchKernel", 0, 5, correlation=11, **{"External id": 1}),
              x("cuda_runtime", "cudaLaunchKernel", 1000, 5, correlation=12, **{"External id": 2}),
              x("cuda_runtime", "cudaLaunchKernel", 1001, 5, correlation=13, **{"External id": 2}),
              x("kernel", "k_first", 20, 30, tid=7, correlation=11, device=0, stream=7),
              x("kernel", "k_at_end", 1020, 40, tid=7, correlation=12, device=0, stream=7),
              x("kernel", "k_after", 1100, 50, tid=7, correlation=13, device=0, stream=7)]
    path = tmp_path / "bounds.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    tr = kitlib.load_trace(path)
    m = four_measures(tr).set_index("measure")
    assert m.loc["host_ops_total_sum", "value_ns"] == 10_000            # aten::add only
    assert m.loc["host_ops_total_sum", "what"].startswith("totals of 1 operators")
    assert m.loc["gpu_sum", "value_ns"] == 30_000                       # k_first (k_at_end is step 2's)
    assert m.loc["device_busy", "value_ns"] == 30_000 and m.loc["kernel_sum", "value_ns"] == 30_000
    # self_total's step filter is the same [start, end)
    assert self_total(tr, step=1, kinds=("op",))["name"].tolist() == ["aten::add"]
    assert self_total(tr, step=2, kinds=("op",))["name"].tolist() == ["aten::mul"]
    given = chain(tr)
    given["gpu_dur_ns"] = given["gpu_dur_ns"] * 2
    assert four_measures(tr, chain_df=given).set_index("measure").loc["gpu_sum", "value_ns"] == 60_000


def test_annotation_device_time_says_why_a_cpu_trace_has_none():
    """A CPU recording (the oracle's resnet18) has record_function labels but none projected
    onto a GPU: the error names the file and says so."""
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "tests" / "data" / "oracle-cpu" / "resnet18" / "trace.json.gz"
    with pytest.raises(KitError) as info:
        annotation_device_time(kitlib.load_trace(path))
    assert str(info.value).endswith("resnet18/trace.json.gz: no gpu_user_annotation events: the trace has no "
                                    "record_function label projected onto the GPU")


# ---- survivors of the 1 December mutation run

def _printed_self_cuda(path):
    """Self CUDA (ns) and Self CUDA % of each name of the first table printed in ``path``
    (the profiler's own ``key_averages().table()`` text), read here without kitlib."""
    import re
    lines = path.read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if line.strip().startswith("Name"))
    cols = re.split(r"\s{2,}", lines[header].strip())
    unit = {"ns": 1e-3, "us": 1, "ms": 1e3, "s": 1e6}
    rows = {}
    for line in lines[header + 2:]:
        if line.startswith("---"):
            break
        cells = re.split(r"\s{2,}", line.strip())
        d = dict(zip(cols, cells))
        num, u = re.fullmatch(r"([0-9.]+)(ns|us|ms|s)", d["Self CUDA"]).groups()
        rows.setdefault(d["Name"], (round(float(num) * unit[u] * 1000), float(d["Self CUDA %"].rstrip("%"))))
    total = next(line for line in lines if line.startswith("Self CUDA time total:"))
    num, u = re.fullmatch(r"Self CUDA time total: ([0-9.]+)(ns|us|ms|s)", total.strip()).groups()
    return rows, round(float(num) * unit[u] * 1000)


def test_annotation_summary_rows_columns_and_shares_from_the_tools_files(trace, cap):
    """Every column of annotation_summary on profiler_5step against the tools' own files:
    the labels in the order their first gpu_user_annotation starts and their span counts
    and summed durations (raw trace JSON); each label's "Self CUDA" and "Self CUDA %" as
    printed in key_averages_tables.txt (first table; ``backward`` is not among its rows);
    the two shares over the footer's "Self CUDA time total" (216.559 ms), in percent."""
    import collections
    import gzip
    import re
    import pandas as pd
    from kitlib.readers.profiler_table import profiler_table
    # the raw JSON's gpu_user_annotation events, read off its text (Kineto writes "cat", "name",
    # then "ts" and "dur" in µs): a regex instead of json.loads keeps the test fast
    text = gzip.decompress((cap.path / "trace.json.gz").read_bytes()).decode()
    spans = sorted(((float(ts), name, dur) for name, ts, dur in re.findall(
        r'"cat": "gpu_user_annotation", "name": "([^"]*)",[^{}]*?"ts": ([0-9.]+), "dur": ([0-9.]+)', text)))
    assert len(spans) == text.count('"gpu_user_annotation"') == 20
    order = list(dict.fromkeys(name for _, name, _ in spans))
    assert order == ["h2d", "forward", "backward", "Optimizer.step#SGD.step"]        # not alphabetical
    calls = collections.Counter(name for _, name, _ in spans)
    span_sum = collections.Counter()
    for _, name, dur in spans:
        span_sum[name] += int(round(float(dur) * 1000))                             # printed µs digits as ns
    printed, total = _printed_self_cuda(cap.path / "key_averages_tables.txt")
    assert total == 216_559_000

    table, totals = profiler_table(cap)
    s = annotation_summary(trace, table, totals)
    assert s.columns.tolist() == ["name", "calls", "table_self_cuda_ns", "span_sum_ns", "busy_ns",
                                  "idle_in_spans_ns", "table_pct_of_total", "work_pct_of_total"]
    assert s["name"].tolist() == order
    assert str(s["table_self_cuda_ns"].dtype) == "Int64"
    s = s.set_index("name")
    for name in order:
        assert s.loc[name, "calls"] == calls[name] == 5
        assert s.loc[name, "span_sum_ns"] == span_sum[name]
        assert s.loc[name, "idle_in_spans_ns"] == span_sum[name] - s.loc[name, "busy_ns"]
        # busy share: the label's busy time over the footer total, in percent
        assert s.loc[name, "work_pct_of_total"] == pytest.approx(s.loc[name, "busy_ns"] / total * 100, rel=1e-12)
        if name not in printed:
            assert name == "backward" and pd.isna(s.loc[name, "table_self_cuda_ns"])
            assert pd.isna(s.loc[name, "table_pct_of_total"])
            continue
        ns, pct = printed[name]
        assert s.loc[name, "table_self_cuda_ns"] == ns
        assert s.loc[name, "table_pct_of_total"] == pytest.approx(ns / total * 100, rel=1e-12)
        assert abs(s.loc[name, "table_pct_of_total"] - pct) <= 0.005             # the printed 2 decimals
    assert printed["forward"] == (130_924_000, 60.46)
    # forward's busy time (75575311 ns, test_forward_self_cuda_is_its_gpu_spans) over 216.559 ms
    assert s.loc["forward", "work_pct_of_total"] == pytest.approx(75_575_311 / 216_559_000 * 100, rel=1e-12)


def test_operator_children_parents_on_paper(tmp_path):
    """operator_children on a hand-built trace, worked by hand. Thread (1, 1): aten::outer
    [0, 100] µs holds a launch L0 [1, 2] and aten::inner [10, 30]; inner holds launch L1
    [12, 17], which holds aten::in_launch [13, 15]; aten::top [200, 210]. Thread (1, 2):
    aten::other [300, 350]. Rows of trace.ops by start: outer 0, inner 1, in_launch 2,
    top 3, other 4. ``parent`` is the parent's row in trace.ops, -1 at the top of a thread
    and -1 where the parent is a launch (not a row of trace.ops)."""
    import json
    from kitlib.analyses.four_measures import operator_children

    def x(cat, n, ts, dur, tid=1, **a):
        return event(cat, n, ts, dur, tid=tid, **a)
    ev = [x("cpu_op", "aten::outer", 0, 100), x("cuda_runtime", "cudaLaunchKernel", 1, 1, correlation=1),
          x("cpu_op", "aten::inner", 10, 20), x("cuda_runtime", "cudaLaunchKernel", 12, 5, correlation=2),
          x("cpu_op", "aten::in_launch", 13, 2), x("cpu_op", "aten::top", 200, 10),
          x("cpu_op", "aten::other", 300, 50, tid=2)]
    path = tmp_path / "children.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    tr = kitlib.load_trace(path)
    assert tr.ops["name"].tolist() == ["aten::outer", "aten::inner", "aten::in_launch", "aten::top", "aten::other"]
    oc = operator_children(tr)
    assert oc.columns.tolist() == ["source", "row", "name", "kind", "tid", "dur_ns", "children_ns", "parent", "merged"]
    assert str(oc["parent"].dtype) == "int64"
    got = oc.set_index(["source", "row"])
    want = {  # (source, row): (name, kind, tid, dur_ns, children_ns, parent)
        ("ops", 0): ("aten::outer", "op", 1, 100_000, 1_000 + 20_000, -1),
        ("launches", 0): ("cudaLaunchKernel", "launch", 1, 1_000, 0, 0),
        ("ops", 1): ("aten::inner", "op", 1, 20_000, 5_000, 0),
        ("launches", 1): ("cudaLaunchKernel", "launch", 1, 5_000, 2_000, 1),
        ("ops", 2): ("aten::in_launch", "op", 1, 2_000, 0, -1),
        ("ops", 3): ("aten::top", "op", 1, 10_000, 0, -1),
        ("ops", 4): ("aten::other", "op", 2, 50_000, 0, -1)}
    assert sorted(got.index) == sorted(want)
    for key, (name, kind, tid, dur, children, parent) in want.items():
        assert got.loc[key, "name"] == name and got.loc[key, "tid"] == tid
        assert got.loc[key, "dur_ns"] == dur and got.loc[key, "children_ns"] == children
        assert got.loc[key, "parent"] == parent and not got.loc[key, "merged"]
        if key[0] == "ops":
            assert got.loc[key, "kind"] == kind
    # the event at position 0 of the tree as a parent: an operator (its children's parent is
    # its row, 0, not that of the event at position 1, aten::first, row 1) and a launch
    # (its child's parent is -1); worked by hand as above
    for name, events, want in [
            ("first_is_op", [x("cpu_op", "aten::outer", 0, 100), x("cpu_op", "aten::first", 1, 1),
                             x("cpu_op", "aten::inner", 10, 10)], [-1, 0, 0]),
            ("first_is_launch", [x("cuda_runtime", "cudaLaunchKernel", 0, 5, correlation=1),
                                 x("cpu_op", "aten::under", 1, 2)], [-1])]:
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps({"traceEvents": events}))
        oc = operator_children(kitlib.load_trace(p))
        assert oc.loc[oc["source"] == "ops", "parent"].tolist() == want


# ================================================================================================
# The step helpers, pinned on inputs worked on paper and on the raw files.
#
# ``kitlib.analyses.steps``' ``active_steps`` / ``active_step_times`` are checked on
# hand-built series against the rule of their docstring (the last ``active`` values of a
# series that holds exactly ``wait + warmup + active``; only ``step_ms_profiled*`` series
# are cut; ``capture=None`` leaves the series as they are). ``host_context``, ``step_gaps``
# and ``device_work`` are checked against the raw recordings read here without kitlib: the
# torch.profiler trace of ``profiler_5step`` (gzip JSON, µs with 3 decimals) and the Nsight
# Systems export of ``nsys_8step`` (sqlite3; thread ids are the low 24 bits of
# ``globalTid``), and on four-line traces written here (ties at equal start times, a trace
# without steps). Every expected value is computed here by an exhaustive search, not
# kitlib's (block search, sweeps).
# ================================================================================================

T24 = 0xFFFFFF                             # globalTid & T24: the thread id


# -- steps: the schedule's active steps --------------------------------------------------

def test_active_steps_reads_each_schedule_key_and_counts_a_missing_one_as_zero():
    """Worked on paper from the docstring's rule: a series of exactly ``wait + warmup + active``
    values keeps its last ``active``; a key the schedule lacks counts as 0 (the function's
    ``schedule.get(key, 0)``)."""
    v = [10, 11, 12, 13]
    # wait missing: 0 + 1 + 3 = 4 values -> the last 3
    assert active_steps(v, {"warmup": 1, "active": 3}) == [11, 12, 13]
    # warmup missing: 1 + 0 + 3 = 4 -> the last 3
    assert active_steps(v, {"wait": 1, "active": 3}) == [11, 12, 13]
    # active missing: 0 active steps -> nothing to cut, the series as it is (even though
    # 1 + 2 + one active step would make the 4 values)
    assert active_steps(v, {"wait": 1, "warmup": 2}) == v
    # both wait and warmup missing: 0 + 0 + 4 = 4 -> all 4 are active
    assert active_steps(v, {"active": 4}) == v
    # wait missing, and the series is not 1 + 0 + ... : 0 + 2 + 2 = 4 -> the last 2
    assert active_steps(v, {"warmup": 2, "active": 2}) == [12, 13]


def test_active_step_times_cuts_only_the_profiled_series_and_leaves_live_series_alone():
    """Hand-built series. With ``capture=None`` (a live series, already active-only) every
    series comes back unchanged; with a capture whose schedule is wait 1, warmup 1, active 2,
    a ``step_ms_profiled*`` series of 4 values loses its first 2, and an uninstrumented
    series of the same length (4) is left whole."""
    series = {"step_ms_uninstrumented": [1.0, 2.0, 3.0, 4.0], "step_ms_profiled": [9.0, 8.0, 7.0, 6.0]}
    assert active_step_times(None, series) == series

    class Cap:                                      # what active_step_times reads of a Capture
        recipe = {"schedule": {"wait": 1, "warmup": 1, "active": 2}}

        def step_times(self):
            return series
    got = active_step_times(Cap())
    assert got == {"step_ms_uninstrumented": [1.0, 2.0, 3.0, 4.0], "step_ms_profiled": [7.0, 6.0]}
    with pytest.raises(KitError, match=r"^active_step_times: need a capture or a series$"):
        active_step_times(None)


# -- steps: what the host was inside (host_context), from the raw recordings ------------


def _innermost(rows, t):
    """The innermost of ``rows`` ``(start, end, name, kind)`` containing ``t``
    (``start <= t < end``): the latest start, and of equal starts the shortest (ranges on
    one thread nest); None if none. An exhaustive search, not kitlib's block search."""
    inside = [r for r in rows if r[0] <= t < r[1]]
    return max(inside, key=lambda r: (r[0], -(r[1] - r[0]))) if inside else None


def _merge(spans):
    """Union of ``[start, end)`` spans: overlapping and touching ones merged, zero-length ones
    dropped (the rule of ``kitlib.analyses.intervals``' module docstring)."""
    out = []
    for s, e in sorted(x for x in spans if x[1] > x[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def test_step_gaps_of_the_nsys_export_and_what_the_main_thread_was_inside():
    """``step_gaps(nsys_8step)`` recomputed from the export with sqlite3: steps are the
    ``torch_step`` NVTX ranges; device work the KERNEL, MEMCPY and MEMSET rows merged over
    streams; a gap is idle time inside a step, the step's ends counting as edges, longer
    than 1 ms. At each gap's midpoint (start + dur // 2) on the steps' thread:
    ``host_label`` is the innermost NVTX range; ``host_event`` the innermost OS-runtime
    call (OSRT_API), else CUDA API call (CUPTI_ACTIVITY_KIND_RUNTIME, named without its
    ``_v<digits>`` version suffix, as ``NsysReport.launches`` documents), else that NVTX range."""
    from kitlib.analyses.steps import step_gaps
    from kitlib.readers.nsys import load_nsys
    db = REF / "nsys_8step" / "report.sqlite"
    nvtx = sql_rows(db, "SELECT e.start, e.end, coalesce(e.text, s.value), e.globalTid & 16777215 FROM NVTX_EVENTS e "
                        "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.end IS NOT NULL ORDER BY e.start")
    steps = [(s, e, tid) for s, e, name, tid in nvtx if name == "torch_step"]
    assert len(steps) == 8 and {tid for *_, tid in steps} == {1213}
    main = 1213
    work = _merge([(s, e) for t in ("KERNEL", "MEMCPY", "MEMSET")
                   for s, e in sql_rows(db, f"SELECT start, end FROM CUPTI_ACTIVITY_KIND_{t}")])
    expected = []
    for k, (w0, w1, _) in enumerate(steps):
        busy = [(max(s, w0), min(e, w1)) for s, e in work if min(e, w1) > max(s, w0)]
        edges = [w0] + [x for b in busy for x in b] + [w1]
        for gs, ge in zip(edges[0::2], edges[1::2]):
            if ge - gs > 1_000_000:
                expected.append((k, gs, ge, ge - gs, gs - w0))
    assert len(expected) == 85                  # the gaps, as counted here from the export
    osrt = [(s, e, n, "OS runtime") for s, e, n, g in sql_rows(
        db, "SELECT o.start, o.end, s.value, o.globalTid FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId")
        if g & T24 == main]
    api = [(s, e, re.sub(r"_v\d+$", "", n), "CUDA API") for s, e, n, g in sql_rows(
        db, "SELECT r.start, r.end, s.value, r.globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
            "JOIN StringIds s ON s.id = r.nameId") if g & T24 == main]
    labels = [(s, e, n, "NVTX") for s, e, n, tid in nvtx if tid == main]
    host = []
    for _, gs, _, dur, _ in expected:
        t = gs + dur // 2
        lb = _innermost(labels, t)
        ev = _innermost(osrt, t) or _innermost(api, t) or lb
        host.append((lb[2] if lb else "", ev[2] if ev else "", ev[3] if ev else ""))
    kinds = [h[2] for h in host]
    # what the 85 midpoints fall in, as counted here: every branch of the rule is reached
    assert [kinds.count(k) for k in ("OS runtime", "CUDA API", "NVTX", "")] == [46, 11, 28, 0]

    got = step_gaps(load_nsys(db))
    assert list(got.columns) == ["step", "start_ns", "end_ns", "dur_ns", "start_in_step_ns",
                                 "host_label", "host_event", "host_event_kind"]
    assert list(got[["step", "start_ns", "end_ns", "dur_ns", "start_in_step_ns"]].itertuples(index=False, name=None)) \
        == expected
    assert list(got[["host_label", "host_event", "host_event_kind"]].itertuples(index=False, name=None)) == host


def test_host_context_of_the_nsys_export_falls_back_from_os_runtime_to_cuda_api_to_nvtx():
    """``host_context(nsys_8step, times)`` with the default thread (the steps' thread, 1213)
    at times picked in the export with sqlite3: inside an OS-runtime call; inside a CUDA
    API call and no OS-runtime call; inside an NVTX range and neither call; before the
    first event (nothing: empty strings)."""
    from kitlib.analyses.steps import host_context
    from kitlib.readers.nsys import load_nsys
    db = REF / "nsys_8step" / "report.sqlite"
    main = 1213
    nvtx = [(s, e, n, "NVTX") for s, e, n, g in sql_rows(
        db, "SELECT e.start, e.end, coalesce(e.text, s.value), e.globalTid FROM NVTX_EVENTS e "
            "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.end IS NOT NULL") if g & T24 == main]
    osrt_all = sql_rows(db, "SELECT o.start, o.end, s.value, o.globalTid FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId")
    api_all = sql_rows(db, "SELECT r.start, r.end, s.value, r.globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                           "JOIN StringIds s ON s.id = r.nameId")
    osrt = [(s, e, n, "OS runtime") for s, e, n, g in osrt_all if g & T24 == main]
    api = [(s, e, re.sub(r"_v\d+$", "", n), "CUDA API") for s, e, n, g in api_all if g & T24 == main]
    other_api = [(s, e) for s, e, n, g in api_all if g & T24 != main]

    def expect(t):
        lb = _innermost(nvtx, t)
        ev = _innermost(osrt, t) or _innermost(api, t) or lb
        return (t, lb[2] if lb else "", ev[2] if ev else "", ev[3] if ev else "")

    # midpoints of main-thread API calls outside any OS-runtime call (the first 40), of the
    # first 20 OS-runtime calls, of the NVTX ranges, and of other threads' API calls
    t_api = [s + (e - s) // 2 for s, e, *_ in sorted(api) if _innermost(osrt, s + (e - s) // 2) is None][:40]
    t_os = [s + (e - s) // 2 for s, e, *_ in sorted(osrt)][:20]
    t_nvtx = [s + (e - s) // 2 for s, e, *_ in nvtx]
    t_other = [s + (e - s) // 2 for s, e in sorted(other_api)][:40]
    t_before = [min(s for s, *_ in nvtx + osrt + api) - 1_000]
    times = t_api + t_os + t_nvtx + t_other + t_before
    expected = [expect(t) for t in times]
    kinds = [x[3] for x in expected]
    assert all(k in kinds for k in ("OS runtime", "CUDA API", "NVTX", ""))
    got = host_context(load_nsys(db), times)
    assert list(got.columns) == ["time_ns", "host_label", "host_event", "host_event_kind"]
    assert list(got.itertuples(index=False, name=None)) == expected


@pytest.fixture(scope="module")
def trace5():
    return raw_trace_events(REF / "profiler_5step" / "trace.json.gz")


def test_host_context_of_a_trace_on_the_steps_thread_by_default_and_on_a_named_thread(trace5):
    """``host_context(profiler_5step, times[, tid])`` against the raw JSON. The steps
    (``ProfilerStep#N``, cat ``user_annotation``) run on tid 449; autograd's backward
    operators on tid 536. ``host_label``: the innermost ``user_annotation`` on the thread
    containing the time; ``host_event``: the innermost ``cpu_op`` or ``user_annotation``
    there (kind ``step`` for ``ProfilerStep#N``, ``annotation`` for the other labels,
    ``op`` for operators; python frames are not events here)."""
    import kitlib
    from kitlib.analyses.steps import host_context

    def rows(tid, cats):
        return [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), e["name"],
                 "op" if e["cat"] == "cpu_op" else "step" if e["name"].startswith("ProfilerStep#") else "annotation")
                for e in trace5 if e.get("ph") == "X" and e.get("tid") == tid and e.get("cat") in cats]
    steps = [e for e in trace5 if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    assert {e["tid"] for e in steps} == {449} and len(steps) == 5
    labels, events = rows(449, ("user_annotation",)), rows(449, ("user_annotation", "cpu_op"))
    back = rows(536, ("user_annotation", "cpu_op"))
    assert len(labels) == 45 and len(back) == 7925      # counted in the JSON: a guard on the reading

    def expect(t, lab, ev):
        lb, e = _innermost(lab, t), _innermost(ev, t)
        return (t, lb[2] if lb else "", e[2] if e else "", e[3] if e else "")

    mid = lambda r: r[0] + (r[1] - r[0]) // 2          # noqa: E731
    # kitlib searches the events in blocks of 1024 (in start order): times just before the
    # events at the block edges, and the exact ends of the labels (a range ending at t does
    # not contain t; the one around it, opened blocks earlier, does)
    starts = sorted(r[0] for r in events)
    edges = [starts[j] - 1 for m in range(1, len(starts) // 1024 + 1) for j in (m * 1024 - 1, m * 1024, m * 1024 + 1)
             if j < len(starts)]
    times = ([mid(r) for r in labels] + [mid(r) for r in events[::97]]
             + [r[0] + 1 for r in labels if r[3] == "step"]    # a step's first ns: inside it alone
             + [r[1] for r in labels] + edges
             + [min(r[0] for r in events) - 1_000])            # before the first event: nothing
    tr = kitlib.open_capture("profiler_5step").trace
    got = host_context(tr, times)                      # default: the steps' thread, 449
    want = [expect(t, labels, events) for t in times]
    assert {w[3] for w in want} == {"step", "annotation", "op", ""}
    assert list(got.itertuples(index=False, name=None)) == want
    # a named thread: the backward thread has operators and no labels
    t_back = [mid(r) for r in back[::151]]
    got = host_context(tr, t_back, tid=536)
    want = [expect(t, [], back) for t in t_back]
    assert {w[3] for w in want} == {"op"}
    assert list(got.itertuples(index=False, name=None)) == want
    # no times: an empty table, times still int64 ns
    none = host_context(tr, [])
    assert len(none) == 0 and str(none["time_ns"].dtype) == "int64"


def test_host_context_at_equal_start_times_takes_the_shorter_range(tmp_path):
    """A four-line trace worked on paper (µs in the JSON, ns in kitlib). At equal starts
    the longer range encloses the shorter one, so the shorter is the innermost: in
    [1010, 1030) µs that is ``inner`` (written first) inside ``outer`` [1010, 1050); in
    [1060, 1065) ``aten::add`` inside ``aten::mm`` [1060, 1070) (written second)."""
    import kitlib
    from kitlib.analyses.steps import host_context
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000.0, "dur": 100.0},
          {"ph": "X", "cat": "user_annotation", "name": "inner", "pid": 1, "tid": 1, "ts": 1010.0, "dur": 20.0},
          {"ph": "X", "cat": "user_annotation", "name": "outer", "pid": 1, "tid": 1, "ts": 1010.0, "dur": 40.0},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1060.0, "dur": 10.0},
          {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1060.0, "dur": 5.0}]
    p = tmp_path / "trace.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    got = host_context(kitlib.load_trace(p), [1_015_000, 1_040_000, 1_062_000, 1_067_000, 1_090_000])
    assert list(got.itertuples(index=False, name=None)) == [
        (1_015_000, "inner", "inner", "annotation"),
        (1_040_000, "outer", "outer", "annotation"),
        (1_062_000, "ProfilerStep#1", "aten::add", "op"),
        (1_067_000, "ProfilerStep#1", "aten::mm", "op"),
        (1_090_000, "ProfilerStep#1", "ProfilerStep#1", "step")]


# -- steps: the device's work, from the raw recordings -----------------------------------

def test_device_work_of_the_nsys_export_from_sqlite():
    """``device_work(nsys_8step)`` against the export read with sqlite3: every KERNEL
    (kind ``kernel``, no byte count: <NA>, as a Trace's kernels have), MEMCPY (``memcpy``)
    and MEMSET (``memset``) row, with its start, end, duration, stream and bytes, in start
    order (no two start at the same ns here), index 0..n-1."""
    from kitlib.analyses.steps import device_work
    from kitlib.readers.nsys import load_nsys
    db = REF / "nsys_8step" / "report.sqlite"
    rows = [("kernel", s, e, e - s, st, None) for s, e, st in sql_rows(db, "SELECT start, end, streamId FROM CUPTI_ACTIVITY_KIND_KERNEL")]
    rows += [("memcpy", s, e, e - s, st, b) for s, e, st, b in sql_rows(db, "SELECT start, end, streamId, bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY")]
    rows += [("memset", s, e, e - s, st, b) for s, e, st, b in sql_rows(db, "SELECT start, end, streamId, bytes FROM CUPTI_ACTIVITY_KIND_MEMSET")]
    assert (len(rows), len({r[1] for r in rows})) == (6493, 6493)       # 4340 + 541 + 1612, distinct starts
    rows.sort(key=lambda r: r[1])
    got = device_work(load_nsys(db))
    assert list(got.columns) == ["kind", "name", "start_ns", "end_ns", "dur_ns", "stream", "bytes"]
    assert got.index.tolist() == list(range(6493))
    assert [str(t) for t in got[["start_ns", "end_ns", "dur_ns"]].dtypes] == ["int64"] * 3
    kernels = got["kind"] == "kernel"
    assert all(b is pd.NA for b in got.loc[kernels, "bytes"])
    got_rows = [(k, s, e, d, st, None if k == "kernel" else b) for k, s, e, d, st, b in
                got[["kind", "start_ns", "end_ns", "dur_ns", "stream", "bytes"]].itertuples(index=False, name=None)]
    assert got_rows == rows


def test_device_work_of_a_trace_from_raw_json(trace5):
    """``device_work(profiler_5step)``: the JSON's ``kernel``, ``gpu_memcpy`` and
    ``gpu_memset`` events as kinds ``kernel``, ``memcpy``, ``memset``, start and duration in
    ns, stream from ``args``; the documented columns only, in start order, index 0..n-1."""
    import kitlib
    from kitlib.analyses.steps import device_work
    kinds = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
    rows = sorted(((kinds[e["cat"]], _ns(e["ts"]), _ns(e["dur"]), e["args"]["stream"]) for e in trace5
                   if e.get("ph") == "X" and e.get("cat") in kinds), key=lambda r: r[1])
    assert len(rows) == 2705 + 15 + 1005
    got = device_work(kitlib.open_capture("profiler_5step").trace)
    assert list(got.columns) == ["kind", "name", "start_ns", "end_ns", "dur_ns", "stream", "bytes"]
    assert got.index.tolist() == list(range(len(rows)))
    assert list(got[["kind", "start_ns", "dur_ns", "stream"]].itertuples(index=False, name=None)) == rows


# -- steps: a recording without steps is refused, named with its file -------------------

def _no_steps_message(path, hint=""):
    # the message, worked from steps_of's source text (STEP_RANGE is "torch_step")
    return (f"{path}: no steps found (looked for ProfilerStep#N, torch_step#N annotations and "
            f"'torch_step' NVTX ranges){hint}")


def test_steps_of_a_trace_without_steps_says_what_it_looked_for(tmp_path):
    """A one-operator trace (no ``ProfilerStep#N``, no ``torch_step#N``): refused, no hint."""
    import kitlib
    from kitlib.analyses.steps import steps_of
    p = tmp_path / "trace.json"
    p.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1000.0, "dur": 10.0}]}))
    tr = kitlib.load_trace(p)
    with pytest.raises(KitError) as e:
        steps_of(tr)
    assert str(e.value) == _no_steps_message(tr.path)


def test_a_source_that_is_not_a_recording_is_refused_in_words():
    """The message, worked from ``check_source``'s text: what was expected and the type given."""
    from kitlib.analyses.steps import device_work, labelled_ranges, steps_of
    for fn in (steps_of, labelled_ranges, device_work):
        with pytest.raises(KitError) as e:
            fn(pd.DataFrame())
        assert str(e.value) == ("source: expected a kitlib Trace (load_trace) or NsysReport (load_nsys), "
                                "got DataFrame")


def test_steps_of_an_export_whose_nvtx_ranges_were_left_out_says_why(tmp_path):
    """nsys_8step with every NVTX range's end cleared: the reader leaves them out and lists
    the defect (table "nvtx", source "NVTX_EVENTS"), so no step is found, and the refusal
    says that the NVTX table's defects are why (the hint never showed until 1 December: it
    looked for "NVTX" in the table column, which says "nvtx")."""
    import warnings

    from support.damage import damaged_export
    from kitlib.analyses.steps import steps_of
    from kitlib.readers.nsys import load_nsys
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                      # the reader's warning about the defect
        rep = load_nsys(damaged_export(tmp_path, "UPDATE NVTX_EVENTS SET end = NULL"))
    assert rep.defects[["table", "source"]].values.tolist() == [["nvtx", "NVTX_EVENTS"]]
    with pytest.raises(KitError) as e:
        steps_of(rep)
    assert str(e.value) == (f"{tmp_path / 'damaged.sqlite'}: no steps found (looked for ProfilerStep#N, torch_step#N "
                            "annotations and 'torch_step' NVTX ranges); the export's NVTX table has defects that "
                            "left ranges out (see the report's 'defects' table)")


# --- moved from the docstrings of kitlib/analyses/four_measures.py (issue 39) ---------------

def test_four_measures_docstring_examples_on_the_tiny_traces():
    import pandas as pd
    from kitlib.analyses.four_measures import annotation_device_time, annotation_summary, operator_children
    from kitlib.model.examples import tiny_profile_doc, tiny_trace
    from kitlib.readers.trace import trace_from_json
    oc = operator_children(tiny_trace())[["name", "dur_ns", "children_ns"]]
    assert oc.values.tolist() == [["ProfilerStep#1", 1000, 300], ["aten::relu", 300, 100],
                                  ["cudaLaunchKernel", 100, 0], ["aten::add", 0, 0]]
    tr = trace_from_json(tiny_profile_doc())
    a = annotation_device_time(tr)
    assert a.columns.tolist() == ["name", "stream", "span_start_ns", "span_ns", "events", "rebuilt_span_ns",
                                  "busy_ns", "sum_ns", "idle_in_span_ns", "host_tid"]
    assert a.iloc[0].tolist() == ["forward", 7, 5000, 6500, 2, 6500, 5000, 5000, 1500, 1]
    table = pd.DataFrame({"name": ["forward"], "calls": [1], "self_cuda_ns": [6500], "self_cuda_pct": [130.0]})
    s = annotation_summary(tr, table, {"self_cuda_total_ns": 5000})
    assert s.columns.tolist() == ["name", "calls", "table_self_cuda_ns", "span_sum_ns", "busy_ns",
                                  "idle_in_spans_ns", "table_pct_of_total", "work_pct_of_total"]
    assert s.iloc[0].tolist() == ["forward", 1, 6500, 6500, 5000, 1500, 130.0, 100.0]
