"""Lessons 07-08 analyses, reconciled with the profiler's own numbers on the reference recordings."""

import pytest

import kitlib
from kitlib.analyses import flops as F
from kitlib.analyses import memory as M
from kitlib.errors import KitError
from kitlib.readers.ncu import NcuFormatError, load_ncu_csv, load_ncu_rules, ncu_wide
from kitlib.course.sources import B300


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
        return {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": ts,
                "args": {"Bytes": nbytes, "Total Allocated": 0, "Total Reserved": 0, "Addr": addr,
                         "Device Type": dev, "Device Id": 0 if dev == 1 else -1}}
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
