"""Lessons 07-08 analyses, reconciled with the profiler's own numbers on the reference recordings."""

import gzip
import json
import math
import re

import numpy as np
import pandas as pd
import pytest

import kitlib
from kitlib.analyses import flops as F
from kitlib.analyses import memory as M
from kitlib.errors import KitError
from kitlib.readers.ncu import NcuFormatError, load_ncu_csv, load_ncu_rules, ncu_wide
from kitlib.course.sources import B300

from conftest import REF, raw_trace_events
from support.events import event, memory_event, ns as _ns


@pytest.fixture(scope="module")
def fixed():
    return kitlib.open_capture("fixed_batch")


@pytest.fixture(scope="module")
def five():
    return kitlib.open_capture("profiler_5step")


# -- memory ------------------------------------------------------------------------

def test_self_cuda_mem_of_every_operator_equals_key_averages(fixed):
    by_op = M.memory_by_operator(fixed.trace)
    cmp = M.compare_with_key_averages(by_op, fixed.key_averages()["by_name"])
    assert len(cmp) >= 100                       # every CPU-side row of key_averages
    bad = cmp[~cmp["match"]]
    assert bad.empty, bad
    conv = by_op.loc["aten::cudnn_convolution"]
    assert int(conv["self_bytes"]) == 28_493_742_080 and int(conv["calls"]) == 265
    # negative rows are reproduced too
    assert int(by_op.loc["backward", "self_bytes"]) == -54_227_302_400
    assert int(by_op.loc["autograd::engine::evaluate_function: ReluBackward0", "self_bytes"]) == -49_327_636_480


@pytest.mark.parametrize("name", ["profiler_5step", "fixed_batch"])
def test_memory_rows_that_tie_keep_the_order_they_first_start(name):
    """Most rows of Self CUDA Mem tie (84 of 111 on profiler_5step: mostly 0 B): those keep
    the order in which each name first starts in the trace (its profiler tree), so the table
    reads the same every time; and every allocator record lies inside some event here, so
    there is no "[memory]" row (key_averages has none for these runs either)."""
    tr = kitlib.open_capture(name).trace
    by_op = M.memory_by_operator(tr)
    assert "[memory]" not in by_op.index
    h = tr.host_events[~tr.host_events["merged"]]
    # the profiler's key: ProfilerStep#N rows are one "ProfilerStep*" row
    key = h["name"].where(~h["name"].str.startswith("ProfilerStep#"), "ProfilerStep*")
    first = h.groupby(key, sort=False)["start_ns"].min()
    ties = by_op[by_op.duplicated("self_bytes", keep=False)]
    assert len(ties) > 70
    for nbytes, group in ties.groupby("self_bytes"):
        starts = [first[k] for k in group.index]
        assert starts == sorted(starts), (nbytes, group.index.tolist())


def test_same_name_child_is_folded_into_its_parent(fixed):
    """aten::div calls aten::div: the profiler keeps one row per call (_remove_dup_nodes)."""
    ev = M.profiler_events(fixed.trace)
    div = ev[ev["name"] == "aten::div"]
    assert len(div) == 10 and int(div["merged"].sum()) == 5
    assert int(M.memory_by_operator(fixed.trace).loc["aten::div", "calls"]) == 5


def test_printed_table_of_profiler_5step(five):
    by_op = M.memory_by_operator(five.trace)
    conv = int(by_op.loc["aten::cudnn_convolution", "self_bytes"])
    assert conv == 28_514_713_600
    assert M.format_memory(conv) == "26.56 GB"          # the profiler's GB are GiB
    assert M.format_memory(28_493_742_080) == "26.54 GB" == f"{B300['cudnn_conv_self_cuda_mem_gb']:.2f} GB"
    table = M.parse_memory_table(five.file("key_averages_tables.txt").read_text())
    gpu_labels = set(five.trace.gpu.loc[five.trace.gpu["kind"] == "gpu_annotation", "name"])
    by_name = table[table["table"] != 1]                 # table 1 is grouped by input shape
    checked = 0
    for r in by_name.itertuples():
        if r.name not in by_op.index:
            continue
        if r.name in gpu_labels:
            # the GPU-side copy of a label is its own row, with no memory at all
            assert r.cuda_mem == "0 B" and r.self_cuda_mem == "0 B"
            continue
        assert M.format_memory(int(by_op.loc[r.name, "self_bytes"])) == r.self_cuda_mem, r.name
        assert M.format_memory(int(by_op.loc[r.name, "total_bytes"])) == r.cuda_mem, r.name
        assert int(by_op.loc[r.name, "calls"]) == r.calls, r.name
        checked += 1
    assert checked >= 40


def test_parse_memory_table_refuses_other_text():
    with pytest.raises(KitError, match="Self CUDA Mem"):
        M.parse_memory_table("Name  Self CPU\nfoo  1 ms\n")


def test_timeline_peak_and_steps(five, fixed):
    tl = M.memory_timeline(five.trace)
    assert (tl["allocated_bytes"] <= tl["reserved_bytes"]).all()
    assert tl["reserved_bytes"].nunique() == 1 and int(tl["reserved_bytes"].iloc[0]) == 13_352_566_784
    peak = M.memory_peak(tl)
    assert int(peak["allocated_bytes"]) == int(tl["allocated_bytes"].max()) == 11_462_948_352
    assert peak["phase"] == "backward" and peak["op"] == "aten::threshold_backward" and peak["step"] == 2
    per = M.memory_per_step(tl)
    assert list(per["step"]) == [2, 3, 4, 5, 6]
    assert (per["growth_bytes"] == 0).all() and per["start_allocated_bytes"].nunique() == 1
    assert (per["forward_growth_bytes"] > 10e9).all()
    # the running totals agree with the events' bytes
    d = tl["allocated_bytes"].diff().iloc[1:]
    assert (d == tl["bytes"].iloc[1:]).all()


def test_memory_needs_memory_events(five):
    import dataclasses
    empty = dataclasses.replace(five.trace, memory=five.trace.memory.iloc[:0])
    with pytest.raises(M.MemoryDataError, match="profile_memory"):
        M.memory_by_operator(empty)


# -- FLOPs -------------------------------------------------------------------------

def test_flops_per_operator_equal_the_profilers(fixed):
    by_op = F.flops_by_operator(fixed.trace)
    cmp = F.compare_flops_with_key_averages(by_op, fixed.key_averages()["by_name"])
    assert set(cmp.index) == {"aten::conv2d", "aten::addmm", "aten::mm"}
    assert cmp["match"].all(), cmp
    assert int(by_op.loc["aten::conv2d", "flops"]) == 5_231_534_407_680


def test_conv_and_matmul_formulas():
    assert F.profiler_flops("aten::conv2d", [[128, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], []],
                            ["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "1"]) == 2 * 128 * 112 * 112 * 7 * 7 * 3 * 64
    assert F.profiler_flops("aten::addmm", [[101], [128, 2048], [2048, 101], [], []]) == 2 * 128 * 2048 * 101
    assert F.profiler_flops("aten::bmm", [[4, 8, 16], [4, 16, 32]]) == 2 * 4 * 8 * 16 * 32
    assert F.profiler_flops("aten::relu_", [[1, 2]]) is None
    with pytest.raises(KitError, match="stride"):
        F.profiler_flops("aten::conv2d", [[1, 3, 8, 8], [4, 3, 3, 3]], None)


def test_flop_counter_reference_and_rates(fixed):
    t = F.flop_counter_table(fixed.read_json("flop_counter_one_step.json"))
    assert round(t["tflop"].sum(), 3) == 3.109
    assert round(t.loc["aten.convolution", "tflop"], 3) == 1.046
    assert round(t.loc["aten.convolution_backward", "tflop"], 3) == 2.062
    assert t.loc["aten.convolution_backward", "pass"] == "backward"
    r = F.rate_estimates(fixed.trace, fixed.read_json("flop_counter_one_step.json"))
    conv = r.loc["forward convolutions (with_flops)"]
    assert round(conv["tflop_per_step"], 3) == 1.046
    # the forward convolutions' device time: the profiler's aten::cudnn_convolution row in
    # key_averages.json.gz (25,404.581 µs over the 5 steps), so 1.046 TFLOP in 5.081 ms a step
    conv_ns = round(next(x for x in fixed.key_averages()["by_name"]
                         if x["key"] == "aten::cudnn_convolution")["device_time_total_us"] * 1000)
    assert conv_ns == 25_404_581
    assert conv["device_ms_per_step"] == pytest.approx(conv_ns / 5 / 1e6, abs=1e-9)
    assert conv["tflops_estimate"] == pytest.approx(1_046_306_881_536 / (conv_ns / 5 * 1e-9) / 1e12, rel=1e-12)
    assert round(conv["tflops_estimate"], 1) == 205.9 < 494.5          # below the H200's dense TF32 peak
    step = r.loc["whole training step (FlopCounterMode)"]
    # the union of the window's GPU events per step (kitlib's figure, pinned), and the rate it makes
    assert step["device_ms_per_step"] == pytest.approx(41.628497, abs=1e-6)
    assert step["tflops_estimate"] == pytest.approx(3_108_867_932_160 / (step["device_ms_per_step"] * 1e-3) / 1e12)
    with pytest.raises(KitError):
        F.flop_counter_table({"total": 1})


def test_device_time_covered_says_what_is_not_counted(fixed):
    cov = F.device_time_covered(fixed.trace)
    assert cov.loc["aten::conv2d", "counted"] and not cov.loc["aten::convolution_backward", "counted"]
    assert cov["device_time_ns"].sum() == fixed.trace.kernels["dur_ns"].sum()
    assert cov.loc[cov["counted"], "device_time_ns"].sum() < 0.25 * cov["device_time_ns"].sum()


@pytest.mark.torch_run
def test_live_flop_counter_on_cpu_tiny_batch():
    """FlopCounterMode over the workload on the CPU, one image at 224 x 224: FLOPs are
    linear in the batch, so each count is 1/128 of the H200 reference count (batch 128,
    data/reference/fixed_batch/flop_counter_one_step.json)."""
    pytest.importorskip("torch")
    from kitlib.capture.workload import WorkloadConfig
    from kitlib.capture.experiments import workload_step_flops
    got = workload_step_flops(WorkloadConfig(batch_size=1, image_size=224, device="cpu", num_workers=0))
    ref = kitlib.open_capture("fixed_batch").read_json("flop_counter_one_step.json")
    assert got["by_op"] == {k: v // 128 for k, v in ref["by_op"].items()}
    assert got["by_op"]["aten.convolution"] == 8_174_272_512          # 1,046,306,881,536 / 128
    assert got["total"] == sum(got["by_op"].values()) == ref["total"] // 128


def test_peak_table():
    t = F.peak_table("NVIDIA H200")
    assert {"B300", "B200", "H100", "A100", "H200 = the capture's GPU (NVIDIA H200)"} <= set(t.index)
    assert "H200" not in t.index and len(t) == 5   # one row per GPU: the capture's is renamed, not repeated
    assert t.loc["A100", "TF32_tflops"] == 156.0 and t.loc["H200 = the capture's GPU (NVIDIA H200)", "TF32_tflops"] == 494.5
    assert t["source"].str.contains("nvidia.com").sum() == 5
    assert F.peak_for("NVIDIA H100 PCIe") == (None, None)
    assert F.peak_table("Quadro P1000", who="this GPU").loc["this GPU (Quadro P1000)"].isna().sum() == 3
    with pytest.raises(KitError):
        F.achieved_tflops(1e12, 0)


# -- Nsight Compute ----------------------------------------------------------------

NCU = kitlib.readers.bundle.reference_dir() / "ncu" / "conv_kernels_speed_of_light.csv"


def test_ncu_reader():
    d = load_ncu_csv(NCU)
    assert list(d.columns) == ["kernel_id", "kernel_name", "block_size", "grid_size", "section", "metric",
                               "unit", "value", "value_text"]
    assert sorted(d["kernel_id"].unique()) == [0, 1, 2] and len(d) == 120
    k0 = d[d["kernel_id"] == 0].set_index("metric")
    assert k0.loc["Memory Throughput", "value"] == 54.83 and k0.loc["Memory Throughput", "unit"] == "%"
    assert k0.loc["DRAM Frequency", "value"] == 3_198_738_005.84
    assert k0.loc["Duration", "unit"] == "ns"
    assert set(d["section"]) == {"GPU Speed Of Light Throughput", "Launch Statistics", "Occupancy"}
    w = ncu_wide(d, ["Duration", "Achieved Occupancy"])
    assert w.shape == (2, 3)
    rules = load_ncu_rules(NCU)
    assert "AchievedOccupancy" in set(rules["rule"])


def test_ncu_reader_refuses_other_csv(tmp_path):
    p = tmp_path / "not_ncu.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(NcuFormatError, match="not an Nsight Compute CSV"):
        load_ncu_csv(p)
    q = tmp_path / "raw.csv"
    q.write_text('"ID","Kernel Name","gpu__time_duration.sum"\n"0","k","1"\n')
    with pytest.raises(NcuFormatError, match="details"):
        load_ncu_csv(q)


def test_step_flop_counts_and_ncu_capture():
    from kitlib.course import step_flop_counts
    fixed = kitlib.open_capture("fixed_batch")
    own = step_flop_counts(fixed)
    assert own == fixed.read_json("flop_counter_one_step.json") and own["total"] > 0
    # a replayed capture without its own count falls back to fixed_batch's
    assert step_flop_counts(kitlib.open_capture("profiler_5step"))["total"] == own["total"]
    from kitlib.course import ncu_capture
    nc = ncu_capture(fixed)
    assert nc.kind == "ncu" and ncu_capture(nc) is nc


# ---- memory.py: survivors of the 1 December mutation run

def test_format_memory_at_the_unit_boundaries():
    """The profiler's ``_format_memory`` (torch/autograd/profiler_util.py) switches unit at
    ``abs(nbytes) >= 1024**k``: exactly 1 KiB, 1 MiB, 1 GiB already print in the larger unit.
    Values worked on paper: 1024 / 1024 = 1.00; 1048575 / 1024 = 1023.999 -> "1024.00 KB"."""
    assert M.format_memory(1023) == "1023 B"
    assert M.format_memory(1024) == "1.00 KB"
    assert M.format_memory(-1024) == "-1.00 KB"            # a free larger than the allocations
    assert M.format_memory(1024 ** 2 - 1) == "1024.00 KB"
    assert M.format_memory(1024 ** 2) == "1.00 MB"
    assert M.format_memory(-(1024 ** 2)) == "-1.00 MB"
    assert M.format_memory(1024 ** 3) == "1.00 GB"
    assert M.format_memory(-(1024 ** 3)) == "-1.00 GB"
    assert M.format_memory(0) == "0 B"


def test_compare_with_key_averages_on_a_hand_built_table():
    """Three rebuilt rows against four profiler rows, worked on paper: ``a`` has a CPU row
    and a GPU-side copy (0 B) that are summed, ``b`` differs only in Self CUDA Mem, ``d`` only
    in its call count, ``c`` has no profiler row and ``kernel`` no rebuilt row: both left out.
    The rows carry exactly the four fields the comparison needs, nothing more."""
    import pandas as pd
    by_op = pd.DataFrame({"calls": [2, 1, 1, 4], "alloc_bytes": [9, 9, 9, 9],
                          "total_bytes": [100, 0, 50, 8], "self_bytes": [60, 0, 50, 8]},
                         index=pd.Index(["a", "b", "c", "d"], name="key"))

    def row(key, count, total, self_):
        return {"key": key, "count": count, "device_memory_usage_bytes": total,
                "self_device_memory_usage_bytes": self_}
    rows = [row("a", 2, 100, 60), row("kernel", 7, 0, 0), row("b", 1, 0, 7), row("a", 2, 0, 0),
            row("d", 3, 8, 8)]
    got = M.compare_with_key_averages(by_op, rows)
    assert list(got.columns) == ["calls", "profiler_calls", "total_bytes", "profiler_total_bytes",
                                 "self_bytes", "profiler_self_bytes", "match"]
    assert list(got.index) == ["a", "b", "d"]               # the rebuilt table's order
    assert got.to_dict("index") == {
        "a": {"calls": 2, "profiler_calls": 2, "total_bytes": 100, "profiler_total_bytes": 100,
              "self_bytes": 60, "profiler_self_bytes": 60, "match": True},
        "b": {"calls": 1, "profiler_calls": 1, "total_bytes": 0, "profiler_total_bytes": 0,
              "self_bytes": 0, "profiler_self_bytes": 7, "match": False},
        "d": {"calls": 4, "profiler_calls": 3, "total_bytes": 8, "profiler_total_bytes": 8,
              "self_bytes": 8, "profiler_self_bytes": 8, "match": False}}
    assert all(str(t) == "int64" for t in got.dtypes[:-1]) and str(got.dtypes["match"]) == "bool"


def test_compare_with_key_averages_refuses_rows_without_memory_in_words():
    rows = [{"key": "a", "count": 1, "cpu_time_total_us": 3.0}]     # recorded without profile_memory
    import pandas as pd
    by_op = pd.DataFrame({"calls": [1], "total_bytes": [0], "self_bytes": [0]}, index=["a"])
    with pytest.raises(KitError) as e:
        M.compare_with_key_averages(by_op, rows)
    assert str(e.value) == ("key_averages rows lack ['device_memory_usage_bytes', "
                            "'self_device_memory_usage_bytes']: were they recorded with profile_memory=True?")


# Two tables as ``key_averages().table()`` prints them (torch/autograd/profiler_util.py,
# ``_build_table``: columns joined by two spaces, a dashed rule above and below, then the
# "Self CPU time total" lines): one with the memory columns, then one of the same profile
# recorded without profile_memory, which has more columns but no "Self CUDA Mem".
_TWO_TABLES = """\
---------------  ------------  ------------  ------------  ------------
           Name     Self CPU      CUDA Mem  Self CUDA Mem    # of Calls
---------------  ------------  ------------  ------------  ------------
    aten::empty      1.000ms       1.00 KB       1.00 KB             3
    aten::relu_      2.000ms           0 B    -512.00 MB             2
---------------  ------------  ------------  ------------  ------------
Self CPU time total: 3.000ms
Self CUDA time total: 1.000ms


---------------  ------------  ------------  ------------  ------------  ------------  ------------
           Name    Self CPU %      Self CPU   CPU total %     CPU total  CPU time avg    # of Calls
---------------  ------------  ------------  ------------  ------------  ------------  ------------
      aten::add        50.00%       1.000ms        50.00%       1.000ms     500.000us             2
---------------  ------------  ------------  ------------  ------------  ------------  ------------
Self CPU time total: 2.000ms
"""

# A table grouped by stack (``group_by_stack_n``): each row is followed by one line per
# further stack frame, every other cell empty, and a line of spaces (``_build_table``).
_STACK_TABLE = """\
---------------  ------------  ------------  ------------  --------------------
           Name      CUDA Mem  Self CUDA Mem    # of Calls  Source Location     
---------------  ------------  ------------  ------------  --------------------
    aten::empty       1.00 KB       1.00 KB             3  train.py(10): step  
                                                           train.py(20): main  
                                                                               
    aten::relu_          0 B           0 B             2  train.py(11): step  
                                                                               
---------------  ------------  ------------  ------------  --------------------
Self CPU time total: 3.000ms
Self CUDA time total: 1.000ms
"""


def test_parse_memory_table_reads_only_the_tables_with_memory_columns():
    got = M.parse_memory_table(_TWO_TABLES)
    assert got.to_dict("records") == [
        {"table": 0, "name": "aten::empty", "cuda_mem": "1.00 KB", "self_cuda_mem": "1.00 KB", "calls": 3},
        {"table": 0, "name": "aten::relu_", "cuda_mem": "0 B", "self_cuda_mem": "-512.00 MB", "calls": 2}]


def test_parse_memory_table_skips_the_stack_lines_of_a_row():
    got = M.parse_memory_table(_STACK_TABLE)
    assert got.to_dict("records") == [
        {"table": 0, "name": "aten::empty", "cuda_mem": "1.00 KB", "self_cuda_mem": "1.00 KB", "calls": 3},
        {"table": 0, "name": "aten::relu_", "cuda_mem": "0 B", "self_cuda_mem": "0 B", "calls": 2}]


def test_parse_memory_table_refuses_in_words():
    with pytest.raises(KitError) as e:
        M.parse_memory_table(_TWO_TABLES.split("\n\n\n")[1])      # only the table without memory
    assert str(e.value) == ("no profiler table with 'CUDA Mem' and 'Self CUDA Mem' columns in this text "
                            "(was it printed from a profile recorded with profile_memory=True?)")


@pytest.fixture(scope="module")
def tiny_memory_trace(tmp_path_factory):
    """A step holding three operators, ``aten::empty`` nested in ``aten::zeros``, and eight
    allocator records (µs; seven on the GPU, Device Type 1; one of 8 B on the CPU, Device Type 0)."""
    import json

    def rec(ts, nbytes, addr, dev=1):
        return memory_event(ts, nbytes, addr, device_type=dev, device_id=0 if dev == 1 else -1)
    ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 10.0, "dur": 40.0},
          {"ph": "X", "cat": "cpu_op", "name": "aten::zeros", "pid": 1, "tid": 1, "ts": 12.0, "dur": 10.0},
          {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 13.0, "dur": 2.0},
          {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 30.0, "dur": 5.0},
          rec(10.0, 512, 1), rec(13.0, 1024, 2), rec(15.0, 1, 3), rec(18.0, -512, 1), rec(30.0, 2048, 4),
          rec(35.0, -1024, 2), rec(60.0, 4096, 5), rec(14.0, 8, 9, dev=0)]
    p = tmp_path_factory.mktemp("tiny_memory") / "trace.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    return kitlib.load_trace(p)


def test_memory_by_event_worked_on_paper(tiny_memory_trace):
    """Every column of every event, by hand (records counted at both ends of an event):
    the step [10, 50] µs holds the GPU records at 10 (+512), 13 (+1024), 15 (+1), 18 (-512),
    30 (+2048) and 35 (-1024); aten::zeros [12, 22] those at 13, 15, 18; the first aten::empty
    [13, 15] those at 13 and 15 (a 1-byte allocation is an allocation); the second [30, 35]
    those at 30 and 35; the one at 60 lies in none. Self = total - the children's totals:
    step 3585 - 1025 - 2048 = 512 allocated, 1536 - 512 - 1024 = 0 freed; aten::zeros
    1025 - 1025 = 0 allocated, 512 - 0 = 512 freed. The step's key is the profiler's
    "ProfilerStep*"; the columns are profiler_events' (``key`` after ``name``), then the counts."""
    got = M.memory_by_event(tiny_memory_trace)           # device="cuda" by default
    assert got.columns.tolist() == ["source", "row", "name", "key", "kind", "pid", "tid", "start_ns",
                                    "end_ns", "parent", "merged", "n_memory_events", "alloc_bytes",
                                    "free_bytes", "total_bytes", "self_alloc_bytes", "self_free_bytes",
                                    "self_bytes"]
    assert got["name"].tolist() == ["ProfilerStep#3", "aten::zeros", "aten::empty", "aten::empty"]
    assert got["key"].tolist() == ["ProfilerStep*", "aten::zeros", "aten::empty", "aten::empty"]
    assert got["start_ns"].tolist() == [10_000, 12_000, 13_000, 30_000]
    assert got["end_ns"].tolist() == [50_000, 22_000, 15_000, 35_000]
    assert got["parent"].tolist() == [-1, 0, 1, 0] and not got["merged"].any()
    counts = got[["n_memory_events", "alloc_bytes", "free_bytes", "total_bytes",
                  "self_alloc_bytes", "self_free_bytes", "self_bytes"]]
    assert counts.to_numpy().tolist() == [[6, 3585, 1536, 2049, 512, 0, 512],
                                          [3, 1025, 512, 513, 0, 512, -512],
                                          [2, 1025, 0, 1025, 1025, 0, 1025],
                                          [2, 2048, 1024, 1024, 2048, 1024, 1024]]
    assert all(str(t) == "int64" for t in counts.dtypes), counts.dtypes     # bytes stay whole numbers
    # the CPU's one record (8 B at 14 µs) lies in the step, aten::zeros and the first aten::empty
    cpu = M.memory_by_event(tiny_memory_trace, "cpu", events=M.profiler_events(tiny_memory_trace))
    assert cpu[counts.columns].to_numpy().tolist() == [[1, 8, 0, 8, 0, 0, 0], [1, 8, 0, 8, 0, 0, 0],
                                                       [1, 8, 0, 8, 8, 0, 8], [0, 0, 0, 0, 0, 0, 0]]
    assert M.memory_by_event(tiny_memory_trace, 1).equals(got)       # a c10 DeviceType code works too


def test_memory_analyses_refuse_in_words(tmp_path, tiny_memory_trace):
    """A trace without allocator records, and a device that is neither "cuda", "cpu" nor a
    c10 DeviceType code: each refusal says what is missing in full."""
    import json
    p = tmp_path / "no_memory.json"
    p.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}]}))
    tr = kitlib.load_trace(p)
    with pytest.raises(M.MemoryDataError) as e:
        M.memory_by_event(tr)
    assert str(e.value) == (f"{tr.path}: the trace has no memory events; record it with "
                            "torch.profiler.profile(profile_memory=True)")
    assert str(p) in str(e.value)
    with pytest.raises(KitError) as e:
        M.memory_by_event(tiny_memory_trace, "gpu")
    assert str(e.value) == "device must be 'cuda', 'cpu' or a c10 DeviceType code, not 'gpu'"
    assert M.memory_by_event(tiny_memory_trace, "CUDA")["n_memory_events"].tolist() == [6, 3, 2, 2]


def test_parse_memory_table_keeps_a_row_whose_source_location_is_empty():
    """In a table grouped by stack, an operator with no Python stack (one run by autograd's
    own thread) has an empty Source Location cell; the row is read, not dropped (it was
    until 1 December: split on runs of spaces, the row had one cell too few)."""
    table = "\n".join([
        "---------------  ------------  ------------  ------------  --------------------",
        "           Name      CUDA Mem  Self CUDA Mem    # of Calls  Source Location     ",
        "---------------  ------------  ------------  ------------  --------------------",
        "    aten::empty       1.00 KB       1.00 KB             3  train.py(10): step  ",
        "                                                           train.py(20): main  ",
        "       aten::mm       2.00 KB       2.00 KB             1                      ",
        "---------------  ------------  ------------  ------------  --------------------",
        "Self CPU time total: 3.000ms", ""])
    assert M.parse_memory_table(table).to_dict("records") == [
        {"table": 0, "name": "aten::empty", "cuda_mem": "1.00 KB", "self_cuda_mem": "1.00 KB", "calls": 3},
        {"table": 0, "name": "aten::mm", "cuda_mem": "2.00 KB", "self_cuda_mem": "2.00 KB", "calls": 1}]


# ================================================================================================
# Lesson 08's FLOP tables, every cell derived without kitlib (the mutation run's flops pins).
#
# The expected values come from the tools' own files, read here with ``gzip`` and ``json``
# only: the raw Chrome-trace JSON (``Input Dims``, ``Concrete Inputs``, ``ts``/``dur`` of each
# ``cpu_op``, kernel and ``ProfilerStep#N``), the profiler's own ``key_averages`` rows of
# ``fixed_batch`` (its ``count`` and ``flops`` per operator, its device time of
# ``aten::cudnn_convolution``) and FlopCounterMode's ``flop_counter_one_step.json``. The FLOP
# formulas are PyTorch's ``computeFlops`` (``torch/csrc/profiler/util.cpp``), written out again
# below. Peak rates are NVIDIA's datasheet figures, halved for the dense rate. A few tables are
# worked on paper from tiny hand-built inputs: shapes no shipped trace has (asymmetric or grouped
# convolutions, empty and size-1 dimensions, baddbmm) by the same formulas and the cases where
# PyTorch gives 0, tiny Chrome traces written here (calls at a step's edges, a launch from the
# first row), the mismatch rows of the key_averages comparison, FlopCounterMode counts that do
# not add up, GPU names with a PCIe or NVL suffix.
#
# Each test names the lesson-08 figure it pins; the README's mutation-testing table lists the
# surviving mutants of ``kitlib/analyses/flops.py`` they catch.
# ================================================================================================

REF_PUBLIC = REF / "public-traces"
COUNTED = ("aten::conv2d", "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::mul", "aten::add")


def _key_averages():
    with gzip.open(REF / "fixed_batch" / "key_averages.json.gz", "rt") as f:
        return json.load(f)["by_name"]


def _flop_counter():
    return json.loads((REF / "fixed_batch" / "flop_counter_one_step.json").read_text())


def _prod(dims):
    return math.prod(int(d) for d in dims)


def _computeflops(name, dims, concrete):
    """PyTorch's ``computeFlops`` for the operators ``with_flops`` counts, written out here."""
    if name == "aten::conv2d":
        (n, c_in, h, w), (c_out, _, kh, kw) = dims[0], dims[1]
        stride, pad, dil, groups = (json.loads(concrete[i]) for i in range(3, 7))
        h_out = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
        w_out = (w + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
        return 2 * n * h_out * w_out * kh * kw * c_in * c_out // groups
    if name in ("aten::mm", "aten::addmm"):
        a, b = (dims[0], dims[1]) if name == "aten::mm" else (dims[1], dims[2])
        return 2 * a[0] * a[1] * b[1]                       # 2 · M · K · N
    if name in ("aten::bmm", "aten::baddbmm"):
        a, b = (dims[0], dims[1]) if name == "aten::bmm" else (dims[1], dims[2])
        return 2 * a[0] * a[1] * a[2] * b[2]                # 2 · B · M · K · N
    return _prod(dims[0])                                   # mul, add: elements of the first input


def _raw_steps(ev):
    """(step number, start ns, end ns) of each ProfilerStep#N annotation."""
    return sorted((int(e["name"].split("#")[1]), _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
                  for e in ev if e.get("cat") == "user_annotation" and e.get("name", "").startswith("ProfilerStep#"))


def _step_of(steps, t):
    """The ProfilerStep#N whose [start, end] holds t; the later one where two touch; None outside."""
    inside = [n for n, s, e in steps if s <= t <= e]
    return inside[-1] if inside else None


# -- flops_by_event, flops_by_operator (lesson 08's first tables) ---------------------------

def test_flops_by_event_whole_table_of_fixed_batch_from_raw_json(fixed):
    """Every counted call of fixed_batch: its name, start, duration, step, shapes and the
    count PyTorch's formula gives; 265 conv2d, 10 mm, 5 addmm, none outside a step."""
    raw = raw_trace_events(REF / "fixed_batch" / "trace.json.gz")
    steps = _raw_steps(raw)
    assert [s[0] for s in steps] == [2, 3, 4, 5, 6]
    calls = sorted((e for e in raw if e.get("cat") == "cpu_op" and e.get("ph") == "X" and e["name"] in COUNTED),
                   key=lambda e: _ns(e["ts"]))
    assert len(calls) == 280
    ev = F.flops_by_event(fixed.trace)
    assert list(ev.columns) == ["row", "name", "start_ns", "dur_ns", "step", "input_dims", "flops"]
    assert str(ev["step"].dtype) == "Int64" and ev["flops"].dtype == np.int64
    assert ev["name"].tolist() == [e["name"] for e in calls]
    assert ev["start_ns"].tolist() == [_ns(e["ts"]) for e in calls]
    assert ev["dur_ns"].tolist() == [_ns(e["dur"]) for e in calls]
    assert ev["step"].tolist() == [_step_of(steps, _ns(e["ts"])) for e in calls]
    assert ev["step"].value_counts().sort_index().tolist() == [56] * 5        # 53 conv2d, 2 mm, 1 addmm a step
    assert [list(map(list, d)) for d in ev["input_dims"]] == [e["args"]["Input Dims"] for e in calls]
    assert ev["flops"].tolist() == [_computeflops(e["name"], e["args"]["Input Dims"], e["args"].get("Concrete Inputs"))
                                    for e in calls]


@pytest.mark.parametrize("name", ["hta_2024-03_nccl_sampled_rank0.json.gz", "hta_2024-03_nccl_sampled_rank1.json.gz"])
def test_flops_by_event_steps_of_the_public_ranks_from_raw_json(name):
    """The step of each counted call (mm, addmm, bmm, mul, add on two threads) of the public
    NCCL ranks, two steps (551, 552); a call inside a same-named call on its thread (the
    profiler folds it into its parent) is the only kind left out."""
    raw = raw_trace_events(REF_PUBLIC / name)
    steps = _raw_steps(raw)
    assert [s[0] for s in steps] == [551, 552]
    calls = [e for e in raw if e.get("cat") == "cpu_op" and e.get("ph") == "X" and e["name"] in COUNTED]
    by_key = {}
    for e in calls:
        by_key.setdefault((e["name"], _ns(e["ts"]), _ns(e["dur"])), []).append(e)
    ev = F.flops_by_event(kitlib.load_trace(REF_PUBLIC / name))
    seen = set()
    for name_, t, d, step, fl in zip(ev["name"], ev["start_ns"], ev["dur_ns"], ev["step"], ev["flops"]):
        (e,) = by_key[(name_, t, d)]
        seen.add(id(e))
        assert step == _step_of(steps, t), (name_, t)
        assert fl == _computeflops(name_, e["args"]["Input Dims"], None), (name_, t)
    assert ev["step"].notna().all() and set(ev["step"]) == {551, 552}

    def folded(e):       # inside a cpu_op of the same name, on the same thread
        t0, t1 = _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])
        return any(p is not e and p["name"] == e["name"] and p["tid"] == e["tid"]
                   and _ns(p["ts"]) <= t0 and t1 <= _ns(p["ts"]) + _ns(p["dur"]) for p in calls)
    left_out = [e for e in calls if id(e) not in seen]
    assert left_out and all(folded(e) for e in left_out)
    assert len(ev) + len(left_out) == len(calls)


def test_flops_by_event_without_shapes_names_the_file_and_the_fix():
    """cold_start_8step was recorded without record_shapes: its aten::conv2d calls carry no
    ``Input Dims`` in the raw JSON, and the error says which file and what to record."""
    path = REF / "cold_start_8step" / "trace.json.gz"
    raw = raw_trace_events(path)
    convs = [e for e in raw if e.get("cat") == "cpu_op" and e.get("name") == "aten::conv2d"]
    assert convs and not any("Input Dims" in e["args"] for e in convs)
    with pytest.raises(KitError, match=re.escape(str(path)) + r": aten::conv2d: no input shapes; "
                                       r"record with record_shapes=True"):
        F.flops_by_event(kitlib.load_trace(path))


def _profiler_flops_rows():
    """key_averages rows with a FLOP count (the profiler's own 'Total FLOPs')."""
    return {r["key"]: r for r in _key_averages() if r["flops"]}


def test_flops_by_operator_is_the_profilers_total_flops_column(fixed):
    """flops_by_operator of fixed_batch, whole table: the profiler's own count and FLOPs of
    each operator (key_averages.json.gz), the mean per call, largest first."""
    rows = _profiler_flops_rows()
    assert set(rows) == {"aten::conv2d", "aten::mm", "aten::addmm"}
    order = sorted(rows, key=lambda k: -rows[k]["flops"])
    assert order == ["aten::conv2d", "aten::mm", "aten::addmm"]
    got = F.flops_by_operator(fixed.trace)
    assert list(got.columns) == ["calls", "flops", "flops_per_call"]
    assert got.index.tolist() == order
    assert got["calls"].tolist() == [rows[k]["count"] for k in order]                # 265, 10, 5
    assert got["flops"].tolist() == [rows[k]["flops"] for k in order]
    assert got["flops_per_call"].tolist() == [rows[k]["flops"] / rows[k]["count"] for k in order]
    assert got.loc["aten::mm", "flops_per_call"] == 52_953_088       # 2 · 128 · 101 · 2048 (Input Dims [128, 101], [101, 2048])


def test_flops_by_operator_of_one_step_from_the_events_given(fixed):
    """Lesson 08 passes its own ``flops_by_event`` table; given step 2's rows only, the table
    is one step's: a fifth of the profiler's 5-step counts and FLOPs."""
    ev = F.flops_by_event(fixed.trace)
    got = F.flops_by_operator(fixed.trace, ev[ev["step"] == 2])
    rows = _profiler_flops_rows()
    assert got.index.tolist() == ["aten::conv2d", "aten::mm", "aten::addmm"]
    assert got["calls"].tolist() == [rows[k]["count"] // 5 for k in got.index]       # 53, 2, 1
    assert got["flops"].tolist() == [rows[k]["flops"] // 5 for k in got.index]


# -- profiler_flops on shapes no shipped trace has ------------------------------------------

#: (operator, Input Dims, Concrete Inputs, FLOPs), each worked here by PyTorch's computeFlops
#: (torch/csrc/profiler/util.cpp): conv2d 2·N·H_out·W_out·K_h·K_w·C_in·C_out / groups, and 0
#: for a non-4-d input or weight, groups 0, or a stride that is not two non-zero numbers;
#: mm/addmm prod(mat1) / K · prod(mat2) · 2; bmm/baddbmm the same, also / B; 0 for an empty
#: mat1, K = 0, or (bmm, baddbmm) B = 0. addmm and baddbmm take mat1, mat2 at inputs 2 and 3.
ON_PAPER = [
    # stride (2, 1), padding (1, 0), dilation (2, 1), groups 2 on a 1×2×9×7 input, 4×1×3×2 weight:
    # H_out = (9 + 2 − 2·2 − 1) // 2 + 1 = 4, W_out = (7 + 0 − 1·1 − 1) // 1 + 1 = 6,
    # 2 · 1 · 4 · 6 · 3 · 2 · 2 · 4 / 2 = 1,152
    ("aten::conv2d", [[1, 2, 9, 7], [4, 1, 3, 2], [], [], [], [], []], ["", "", "", "[2, 1]", "[1, 0]", "[2, 1]", "2"], 1152),
    ("aten::conv2d", [[2, 9, 7], [4, 2, 3, 3], [], [], [], [], []], ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "1"], 0),
    ("aten::conv2d", [[1, 2, 9, 7], [4, 3, 3], [], [], [], [], []], ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "1"], 0),
    ("aten::conv2d", [[1, 2, 9, 7], [4, 2, 3, 3], [], [], [], [], []], ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "0"], 0),
    ("aten::conv2d", [[1, 2, 9, 7], [4, 2, 3, 3], [], [], [], [], []], ["", "", "", "[1, 0]", "[0, 0]", "[1, 1]", "1"], 0),
    ("aten::conv2d", [[1, 2, 9, 7], [4, 2, 3, 3], [], [], [], [], []], ["", "", "", "[0, 1]", "[0, 0]", "[1, 1]", "1"], 0),
    ("aten::mm", [[3, 1], [1, 4]], None, 2 * 3 * 1 * 4),                # an outer product: K = 1
    ("aten::mm", [[2, 0], [0, 4]], None, 0),                            # K = 0
    ("aten::mm", [[], [3]], None, 0),                                   # empty mat1
    ("aten::bmm", [[1, 2, 3], [1, 3, 4]], None, 2 * 1 * 2 * 3 * 4),     # B = 1
    ("aten::bmm", [[0, 2, 3], [0, 3, 4]], None, 0),                     # B = 0
    ("aten::bmm", [[2, 3, 0], [2, 0, 4]], None, 0),                     # K = 0 (M = 3)
    ("aten::baddbmm", [[4, 8, 32], [4, 8, 16], [4, 16, 32], [], []], None, 2 * 4 * 8 * 16 * 32),
    ("aten::baddbmm", [[0, 2, 4], [0, 2, 3], [0, 3, 4], [], []], None, 0),
]


@pytest.mark.parametrize("name, dims, concrete, want", ON_PAPER)
def test_profiler_flops_on_paper(name, dims, concrete, want):
    """Shapes the shipped traces do not have (asymmetric strides, padding and dilation,
    groups, empty and size-1 dimensions, baddbmm): the count PyTorch's formula gives, as an
    integer (its arithmetic is uint64, divisions truncated)."""
    got = F.profiler_flops(name, dims, concrete)
    assert got == want and type(got) is int


def test_profiler_flops_conv2d_without_groups_in_the_trace():
    """Concrete Inputs that stop before groups (position 6): refused, as without stride."""
    with pytest.raises(KitError, match="stride/padding/dilation/groups not in the trace's Concrete Inputs"):
        F.profiler_flops("aten::conv2d", [[1, 2, 9, 7], [4, 2, 3, 3], [], [], [], []],
                         ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]"])


# -- FlopCounterMode's table -----------------------------------------------------------

def test_flop_counter_table_whole_table_from_the_json():
    """Lesson 08's FlopCounterMode table of one step: each op's count from
    flop_counter_one_step.json, in TFLOP (10¹²), its share of the total, and its pass
    (convolution_backward and the linear layer's two backward mm are backward)."""
    counts = _flop_counter()
    t = F.flop_counter_table(counts)
    order = sorted(counts["by_op"], key=lambda k: -counts["by_op"][k])
    assert order == ["aten.convolution_backward", "aten.convolution", "aten.mm", "aten.addmm"]
    assert t.index.tolist() == order
    assert list(t.columns) == ["flops", "tflop", "share", "pass"]
    assert t["flops"].dtype == np.int64
    assert t["flops"].tolist() == [counts["by_op"][k] for k in order]
    assert t["tflop"].tolist() == [counts["by_op"][k] / 1e12 for k in order]
    assert t["share"].tolist() == [counts["by_op"][k] / counts["total"] for k in order]
    assert t["pass"].tolist() == ["backward", "forward", "backward", "forward"]


def test_flop_counter_table_on_paper():
    """Hand-built counts: an attention backward is backward by its name; an empty count
    keeps integer FLOPs; parts that do not add up to the total are refused, in figures."""
    t = F.flop_counter_table({"total": 10, "by_op": {"aten._scaled_dot_product_efficient_attention_backward": 6,
                                                     "aten.bmm": 4}})
    assert t["pass"].tolist() == ["backward", "forward"] and t["share"].tolist() == [0.6, 0.4]
    empty = F.flop_counter_table({"total": 0, "by_op": {}})
    assert len(empty) == 0 and empty["flops"].dtype == np.int64
    with pytest.raises(KitError, match=r"FlopCounterMode parts add up to 5, not the total 6"):
        F.flop_counter_table({"total": 6, "by_op": {"aten.mm": 5}})
    with pytest.raises(KitError, match=r"not a FlopCounterMode result"):
        F.flop_counter_table({"total": 1})


# -- rates and peaks ------------------------------------------------------------------

def test_achieved_tflops_of_the_forward_convolutions():
    """The profiler's aten::conv2d FLOPs over its aten::cudnn_convolution device time
    (key_averages.json.gz, 5 steps): about 206 TFLOP/s; one FLOP in one ns is 10⁻³ TFLOP/s;
    a time that is not positive is refused."""
    by = {r["key"]: r for r in _key_averages()}
    flops = by["aten::conv2d"]["flops"]                                              # 5,231,534,407,680
    ns = round(by["aten::cudnn_convolution"]["device_time_total_us"] * 1000)         # 25,404,581
    assert F.achieved_tflops(flops, ns) == pytest.approx(flops / ns / 1e3, rel=1e-14)
    assert round(F.achieved_tflops(flops, ns), 1) == 205.9
    assert F.achieved_tflops(1, 1) == pytest.approx(1e-3, rel=1e-14)
    for bad in (0, -5):
        with pytest.raises(KitError, match=f"device time must be positive to get a rate, not {bad} ns"):
            F.achieved_tflops(1e12, bad)


#: NVIDIA's figures (sources quoted in kitlib's PEAK_TFLOPS): FP32 dense; TF32 and BF16
#: "with sparsity", halved here for the dense rate; HGX figures are for 8 GPUs.
DATASHEET = {                     # FP32, TF32 (sparse), BF16 (sparse), GPUs
    "B300": (600.0, 18_000.0, 36_000.0, 8),       # HGX B300: 600 TFLOPS, 18 PFLOPS*, 36 PFLOPS*
    "B200": (600.0, 18_000.0, 36_000.0, 8),       # HGX B200
    "H200": (67.0, 989.0, 1_979.0, 1),            # H200 SXM: 67 TFLOPS, 989*, 1,979*
    "H100": (67.0, 989.0, 1_979.0, 1),            # H100 SXM
    "A100": (19.5, 312.0, 624.0, 1),              # A100 SXM4 80GB: 19.5, 312* (156 dense), 624* (312 dense)
}


@pytest.mark.parametrize("gpu", ["NVIDIA H200", None], ids=["recordings' GPU", "no GPU named"])
def test_peak_table_from_the_datasheets(gpu):
    """Lesson 08's peak table for the GPU of every shipped recording (their manifests and
    traces say ``NVIDIA H200``) and for none: every figure from the datasheet."""
    got = F.peak_table(gpu)
    assert list(got.columns) == ["FP32_tflops", "TF32_tflops", "BF16_tflops", "source"]
    label = {"H200": "H200 = the capture's GPU (NVIDIA H200)"} if gpu else {}
    assert got.index.tolist() == [label.get(k, k) for k in DATASHEET]
    for k, (fp32, tf32, bf16, n) in DATASHEET.items():
        row = got.loc[label.get(k, k)]
        assert (row["FP32_tflops"], row["TF32_tflops"], row["BF16_tflops"]) == (fp32 / n, tf32 / n / 2, bf16 / n / 2)
        assert "nvidia.com" in row["source"]


def test_peak_for_the_recordings_gpu_and_the_variants_it_refuses():
    """The recordings' GPU is an H200 SXM; PCIe and NVL variants of H100 and H200 have
    lower peaks than the SXM rows, so they get none (the docstring's rule)."""
    key, rates = F.peak_for("NVIDIA H200")
    assert key == "H200" and (rates["FP32"], rates["TF32"], rates["BF16"]) == (67.0, 494.5, 989.5)
    assert F.peak_for(None) == (None, None)
    for name in ("NVIDIA H200 NVL", "NVIDIA H100 NVL", "NVIDIA H200 PCIe", "NVIDIA H100 PCIe"):
        assert F.peak_for(name) == (None, None), name


# -- the profiler's own FLOPs beside the rebuilt ones ------------------------------------

def test_compare_flops_with_key_averages_whole_table(fixed):
    """Lesson 08's comparison on fixed_batch: for each operator either side counts, the
    rebuilt calls and FLOPs (the raw JSON's calls, PyTorch's formula on their shapes) beside
    the profiler's own (key_averages.json.gz); every row matches."""
    raw = [e for e in raw_trace_events(REF / "fixed_batch" / "trace.json.gz")
           if e.get("cat") == "cpu_op" and e.get("ph") == "X" and e["name"] in COUNTED]
    rebuilt = {}
    for e in raw:
        c, f = rebuilt.get(e["name"], (0, 0))
        rebuilt[e["name"]] = (c + 1, f + _computeflops(e["name"], e["args"]["Input Dims"], e["args"].get("Concrete Inputs")))
    prof = _profiler_flops_rows()
    got = F.compare_flops_with_key_averages(F.flops_by_operator(fixed.trace), _key_averages())
    assert list(got.columns) == ["calls", "profiler_calls", "flops", "profiler_flops", "match"]
    assert got.index.tolist() == ["aten::addmm", "aten::conv2d", "aten::mm"]      # the outer join's sorted names
    assert got["calls"].tolist() == [rebuilt[k][0] for k in got.index]
    assert got["flops"].tolist() == [rebuilt[k][1] for k in got.index]
    assert got["profiler_calls"].tolist() == [prof[k]["count"] for k in got.index]
    assert got["profiler_flops"].tolist() == [prof[k]["flops"] for k in got.index]
    assert got["match"].dtype == bool and got["match"].tolist() == [True, True, True]


def test_compare_flops_with_key_averages_on_paper():
    """Hand-built rows (``key``, ``count``, ``flops`` only): a call count that differs is no
    match even with equal FLOPs; an operator only the profiler counted (one FLOP, a
    one-element mul) is a row with no rebuilt figures; one neither side counts is no row."""
    by_op = pd.DataFrame({"calls": [2, 1], "flops": [8, 3], "flops_per_call": [4.0, 3.0]},
                         index=pd.Index(["aten::mm", "aten::add"], name="name"))
    rows = [{"key": "aten::mm", "count": 2, "flops": 8}, {"key": "aten::add", "count": 3, "flops": 3},
            {"key": "aten::mul", "count": 1, "flops": 1}, {"key": "aten::relu", "count": 4, "flops": 0}]
    got = F.compare_flops_with_key_averages(by_op, rows)
    assert got.index.tolist() == ["aten::add", "aten::mm", "aten::mul"]
    assert got["calls"].tolist()[:2] == [1, 2] and math.isnan(got.loc["aten::mul", "calls"])
    assert got["profiler_calls"].tolist() == [3, 2, 1]
    assert got["flops"].tolist()[:2] == [3, 8] and math.isnan(got.loc["aten::mul", "flops"])
    assert got["profiler_flops"].tolist() == [3, 8, 1]
    assert got["match"].tolist() == [False, True, False]
    with pytest.raises(KitError, match=r"key_averages rows lack 'flops': were they recorded with with_flops=True\?"):
        F.compare_flops_with_key_averages(by_op, [{"key": "aten::mm", "count": 2}])


# -- rate estimates ----------------------------------------------------------------------

def test_rate_estimates_of_fixed_batch_from_the_tools_files(fixed):
    """Lesson 08's two rates, per step of fixed_batch's five: the profiler's aten::conv2d
    FLOPs over its aten::cudnn_convolution device time (key_averages.json.gz), and
    FlopCounterMode's step total over the union of the GPU events (kernels, copies, sets)
    launched in the window (a runtime call with their correlation id in the raw JSON)."""
    from conftest import merged_length
    by = {r["key"]: r for r in _key_averages()}
    counts = _flop_counter()
    raw = raw_trace_events(REF / "fixed_batch" / "trace.json.gz")
    launched = {e["args"]["correlation"] for e in raw
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    gpu = [e for e in raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
           and e["args"].get("correlation") in launched]
    busy = merged_length([(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in gpu])
    conv_flops = by["aten::conv2d"]["flops"] / 5
    conv_ns = round(by["aten::cudnn_convolution"]["device_time_total_us"] * 1000) / 5
    got = F.rate_estimates(fixed.trace, counts)
    assert got.index.tolist() == ["forward convolutions (with_flops)", "whole training step (FlopCounterMode)"]
    assert list(got.columns) == ["tflop_per_step", "device_ms_per_step", "tflops_estimate"]
    conv, step = got.iloc[0], got.iloc[1]
    assert conv["tflop_per_step"] == pytest.approx(conv_flops / 1e12, rel=1e-15)
    assert conv["device_ms_per_step"] == pytest.approx(conv_ns / 1e6, rel=1e-15)
    assert conv["tflops_estimate"] == pytest.approx(conv_flops / conv_ns / 1e3, rel=1e-14)
    assert step["tflop_per_step"] == pytest.approx(counts["total"] / 1e12, rel=1e-15)              # 3.109
    assert step["device_ms_per_step"] == pytest.approx(busy / 5 / 1e6, rel=1e-15)
    assert step["tflops_estimate"] == pytest.approx(counts["total"] / (busy / 5) / 1e3, rel=1e-14)
    only = F.rate_estimates(fixed.trace)                      # without a FlopCounterMode count: the first row
    assert only.index.tolist() == ["forward convolutions (with_flops)"]
    assert only.iloc[0].tolist() == conv.tolist()


def test_rate_estimates_of_a_trace_without_convolutions():
    """The public NCCL rank has steps and GPU work but no aten::conv2d (raw JSON): its
    convolution row counts no FLOPs in no device time."""
    path = REF_PUBLIC / "hta_2024-03_nccl_sampled_rank0.json.gz"
    assert not any(e.get("name") == "aten::conv2d" for e in raw_trace_events(path))
    got = F.rate_estimates(kitlib.load_trace(path))
    conv = got.loc["forward convolutions (with_flops)"]
    assert conv["tflop_per_step"] == 0.0 and math.isnan(conv["device_ms_per_step"]) and math.isnan(conv["tflops_estimate"])


def test_rate_estimates_refuse_a_trace_without_steps_or_gpu():
    """ranks_balanced/rank0 has ProfilerStep#N annotations but no GPU events (a CPU run):
    no rate, and the error says what is missing."""
    path = REF / "ranks_balanced" / "rank0" / "trace.json.gz"
    raw = raw_trace_events(path)
    assert _raw_steps(raw) and not any(e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") for e in raw)
    with pytest.raises(KitError, match=re.escape(str(path)) + ": rates need ProfilerStep#N annotations and GPU events"):
        F.rate_estimates(kitlib.load_trace(path))


# -- device time under counted operators ---------------------------------------------------

def _raw_covered(path):
    """device_time_covered worked out on the raw JSON: each kernel, copy or set, by its
    correlation id, to the runtime call that launched it; the host events (cpu_op, and
    user_annotation other than ProfilerStep#N) that enclose that call on its thread are its
    operator and the operator's parents. It is counted when one of them is a counted
    operator; its row is the outermost ``aten::`` one, else the innermost host event, else
    ``(no operator)`` (no launch in the trace, or none around it)."""
    raw = raw_trace_events(path)
    host = {}
    for e in raw:
        if e.get("ph") == "X" and (e.get("cat") == "cpu_op" or (e.get("cat") == "user_annotation"
                                                                 and not e["name"].startswith("ProfilerStep#"))):
            host.setdefault((e["pid"], e["tid"]), []).append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), e["name"]))
    host = {k: (np.array([h[0] for h in v]), np.array([h[1] for h in v]), [h[2] for h in v]) for k, v in host.items()}
    launch = {e["args"]["correlation"]: e for e in raw
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    rows = {}
    for g in raw:
        if g.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        top, counted = "(no operator)", False
        call = launch.get(g["args"].get("correlation"))
        if call is not None:
            t0, t1 = _ns(call["ts"]), _ns(call["ts"]) + _ns(call["dur"])
            s, e, names = host[(call["pid"], call["tid"])]
            around = sorted(((s[i], e[i], names[i]) for i in np.flatnonzero((s <= t0) & (e >= t1))),
                            key=lambda h: (h[0], -h[1]))           # outermost first
            counted = any(h[2] in COUNTED for h in around)
            aten = [h[2] for h in around if h[2].startswith("aten::")]
            top = aten[0] if aten else (around[-1][2] if around else "(no operator)")
        n, d, c = rows.get(top, (0, 0, False))
        rows[top] = (n + 1, d + _ns(g["dur"]), c or counted)
    return rows


@pytest.mark.parametrize("name", ["fixed_batch/trace.json.gz", "public-traces/hta_2024-03_nccl_sampled_rank0.json.gz"])
def test_device_time_covered_whole_table_from_raw_json(name):
    """Lesson 08's 'device time under counted operators' table, every row: the GPU events,
    their summed device time and whether a counted operator launched them, by outermost
    aten:: operator (fixed_batch: aten::conv2d's 505 kernels are the counted ones; the
    public rank: annotations such as nccl:all_reduce where no aten:: operator is above)."""
    want = _raw_covered(REF / name)
    tr = kitlib.open_capture("fixed_batch").trace if name.startswith("fixed_batch") else kitlib.load_trace(REF / name)
    got = F.device_time_covered(tr)
    assert list(got.columns) == ["gpu_events", "device_time_ns", "counted"]
    assert got.index.name == "operator" and got["counted"].dtype == bool
    assert {k: (int(n), int(d), bool(c)) for k, n, d, c in
            zip(got.index, got["gpu_events"], got["device_time_ns"], got["counted"])} == want
    assert got["device_time_ns"].tolist() == sorted((d for _, d, _ in want.values()), reverse=True)
    if name.startswith("fixed_batch"):
        assert want["aten::conv2d"] == (505, 25_404_581, True)     # = key_averages' aten::cudnn_convolution device time
        assert want["(no operator)"][2] is False and want["(no operator)"][0] == 78
        assert got.index[:4].tolist() == ["aten::convolution_backward", "aten::cudnn_batch_norm_backward",
                                          "aten::batch_norm", "aten::conv2d"]


@pytest.mark.parametrize("first, counted", [("aten::conv2d", True), ("c10d::allreduce_", False)])
def test_device_time_covered_when_the_first_row_launches_on_paper(tmp_path, first, counted):
    """A tiny trace whose first row (row 0) is the operator that launches a 40 µs kernel,
    and a 5 µs kernel whose launch is not in the trace: the first is that operator's row
    (counted when it is aten::conv2d; under its own name when no aten:: operator is above),
    the second is ``(no operator)``, not counted."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": first, "pid": 1, "tid": 1, "ts": 0, "dur": 100, "args": {"External id": 1}},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
           "args": {"correlation": 7, "External id": 1}},
          {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 20, "dur": 40,
           "args": {"correlation": 7, "External id": 1, "device": 0, "stream": 7}},
          {"ph": "X", "cat": "kernel", "name": "k0", "pid": 0, "tid": 7, "ts": 70, "dur": 5,
           "args": {"correlation": 3, "device": 0, "stream": 7}}]
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": ev}))
    got = F.device_time_covered(kitlib.load_trace(tmp_path / "t.json"))
    assert got.index.tolist() == [first, "(no operator)"]
    assert got["gpu_events"].tolist() == [1, 1] and got["device_time_ns"].tolist() == [40_000, 5_000]
    assert got["counted"].tolist() == [counted, False]


def _mm(ts):
    """A 2×3 by 3×4 aten::mm (2 · 2 · 3 · 4 = 48 FLOPs) starting at ts µs."""
    return event("cpu_op", "aten::mm", ts, 10,
                 **{"External id": ts, "Input Dims": [[2, 3], [3, 4]], "Concrete Inputs": ["", ""]})


def test_flops_by_event_steps_at_the_edges_on_paper(tmp_path):
    """ProfilerStep#1 over [100, 200) µs: a call before it and one after it are in no step;
    one starting at its start is in it, one starting at its end is not (the kit's one
    boundary rule, half-open [start, end): kitlib.model.window). A trace without steps: no step. A
    trace without a counted call: no row, the columns keep their types."""
    step = {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 100, "dur": 100}
    (tmp_path / "t.json").write_text(json.dumps({"traceEvents": [step] + [_mm(t) for t in (10, 100, 150, 200, 300)]}))
    ev = F.flops_by_event(kitlib.load_trace(tmp_path / "t.json"))
    assert ev["start_ns"].tolist() == [10_000, 100_000, 150_000, 200_000, 300_000]
    assert ev["step"].fillna(0).tolist() == [0, 1, 1, 0, 0] and ev["flops"].tolist() == [48] * 5     # 0: no step
    (tmp_path / "n.json").write_text(json.dumps({"traceEvents": [_mm(10)]}))
    ev = F.flops_by_event(kitlib.load_trace(tmp_path / "n.json"))
    assert ev["step"].isna().tolist() == [True] and ev["flops"].tolist() == [48]
    (tmp_path / "e.json").write_text(json.dumps({"traceEvents": [step]}))     # no counted call: no row
    ev = F.flops_by_event(kitlib.load_trace(tmp_path / "e.json"))
    assert len(ev) == 0 and str(ev["step"].dtype) == "Int64" and ev["flops"].dtype == np.int64


# --- moved from the docstrings of kitlib/analyses/memory.py (issue 39) ----------------------

def test_memory_docstring_examples_on_the_tiny_traces():
    from kitlib.model.examples import tiny_profile_doc, tiny_trace
    from kitlib.readers.trace import trace_from_json
    with pytest.raises(M.MemoryDataError) as e:
        M.memory_timeline(tiny_trace())
    assert type(e.value).__name__ == "MemoryDataError" and isinstance(e.value, ValueError)
    assert len(M.records_inside_no_event(tiny_trace())) == 0       # no memory records at all
    tr = trace_from_json(tiny_profile_doc())
    by_op = M.memory_by_operator(tr)
    rows = [{"key": "aten::conv2d", "count": 1, "device_memory_usage_bytes": 4096,
             "self_device_memory_usage_bytes": 4096}]
    c = M.compare_with_key_averages(by_op, rows)
    assert c.index.tolist() == ["aten::conv2d"]
    assert c.loc["aten::conv2d"].tolist() == [1, 1, 4096, 4096, 4096, 4096, True]
    assert c.columns.tolist() == ["calls", "profiler_calls", "total_bytes", "profiler_total_bytes",
                                  "self_bytes", "profiler_self_bytes", "match"]
    tl = M.memory_timeline(tr)
    assert tl[["start_ns", "bytes", "op"]].values.tolist() == [
        [2500, 4096, "aten::conv2d"], [9200, 1024, "aten::relu"], [15000, -4096, "ProfilerStep#1"]]


def test_parse_memory_table_docstring_example():
    text = '''
----------------  ------------  ------------  ------------
            Name      CUDA Mem  Self CUDA Mem    # of Calls
----------------  ------------  ------------  ------------
    aten::conv2d       4.00 Kb       4.00 Kb             1
      aten::relu       1.00 Kb       1.00 Kb             1
----------------  ------------  ------------  ------------
'''
    t = M.parse_memory_table(text)
    assert t.columns.tolist() == ["table", "name", "cuda_mem", "self_cuda_mem", "calls"]
    assert t.values.tolist() == [[0, "aten::conv2d", "4.00 Kb", "4.00 Kb", 1],
                                 [0, "aten::relu", "1.00 Kb", "1.00 Kb", 1]]


def test_memory_per_step_docstring_example(five):
    ps = M.memory_per_step(M.memory_timeline(five.trace))
    assert ps[["step", "events", "forward_growth_bytes"]].head(2).values.tolist() == [
        [2, 1922, 10942159360], [3, 1922, 10942159360]]


# --- moved from the docstrings of kitlib/analyses/flops.py (issue 39) -----------------------

def test_flops_docstring_examples(five):
    from kitlib.model.examples import tiny_profile_doc
    from kitlib.readers.trace import trace_from_json
    ev = F.flops_by_event(five.trace)
    assert (len(ev), ev.columns.tolist()) == (280, ["row", "name", "start_ns", "dur_ns", "step", "input_dims",
                                                    "flops"])
    tr = trace_from_json(tiny_profile_doc())
    c = F.compare_flops_with_key_averages(F.flops_by_operator(tr), [{"key": "aten::conv2d", "count": 1,
                                                                      "flops": 7776}])
    assert c.index.tolist() == ["aten::conv2d"]
    assert c.loc["aten::conv2d"].tolist() == [1, 1, 7776, 7776, True]
    assert F.peak_table("NVIDIA H200").index[2] == "H200 = the capture's GPU (NVIDIA H200)"
    r = F.rate_estimates(tr, counts={"total": 20000, "by_op": {}})
    assert r.index.tolist() == ["forward convolutions (with_flops)", "whole training step (FlopCounterMode)"]
    assert r["device_ms_per_step"].round(6).tolist() == [0.004, 0.005]
    assert r["tflops_estimate"].round(6).tolist() == [0.001944, 0.004]


def test_matched_rates_docstring_example():
    from kitlib.analyses.flop_rates import matched_rates
    from kitlib.model.examples import tiny_profile_doc
    from kitlib.readers.trace import trace_from_json
    counts = {"total": 20000, "by_op": {"aten.convolution": 7776, "aten.convolution_backward": 0}}
    r = matched_rates(trace_from_json(tiny_profile_doc()), counts)
    assert r.index.name == "work"
    assert r.index.tolist() == ["forward convolutions", "convolutions, forward + backward", "whole step"]
    assert r["device_ms_per_step"].round(6).tolist() == [0.004, 0.004, 0.005]
    assert r["tflops_estimate"].round(6).tolist() == [0.001944, 0.001944, 0.004]
