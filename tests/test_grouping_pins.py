"""grouping's remaining figures pinned: the profiler's own rows read into a table
(key_averages_table), the side-by-side comparison (compare_with_profiler) and lesson 05's
convolution inputs (conv_inputs, memory_layout). Lesson 06's trace-size and capture-cost
tables (attribution_bytes, capture_cost) are pinned in test_grouping.py's last section.

Every expected value is read by the test itself from the tool's own file (the bundles'
key_averages.json.gz, the trace JSON, manifest.json, step_times.json) or worked on paper;
none is kitlib's own output pasted in.
"""
import gzip
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import kitlib
from kitlib.analyses import grouping as G

from conftest import raw_trace_events

REF = Path(__file__).resolve().parent.parent / "data" / "reference"
TIMES = {"host_total_ns": "cpu_time_total_us", "host_self_ns": "self_cpu_time_total_us",
         "device_total_ns": "device_time_total_us", "device_self_ns": "self_device_time_total_us"}
MEMORY = {"cpu_memory_bytes": "cpu_memory_usage_bytes", "self_cpu_memory_bytes": "self_cpu_memory_usage_bytes",
          "device_memory_bytes": "device_memory_usage_bytes",
          "self_device_memory_bytes": "self_device_memory_usage_bytes", "flops": "flops"}
KA_COLUMNS = ["name", "device_type", "input_shapes", "stack", "count", *TIMES, *MEMORY]


def _key_averages():
    """fixed_batch's key_averages.json.gz: the profiler's own rows (µs, bytes, FLOPs)."""
    with gzip.open(REF / "fixed_batch" / "key_averages.json.gz", "rt") as f:
        return json.load(f)


# -- key_averages_table ------------------------------------------------------------------

@pytest.mark.parametrize("key", ["by_name", "by_input_shape", "by_stack_5"])
def test_key_averages_table_every_cell_from_the_profilers_rows(key):
    """Lessons 05 and 06 read the profiler's rows through this table: every cell, the column
    order and the int64 dtypes, from key_averages.json.gz itself. A row is a device (CUDA) row
    when its key is the name of a GPU event in the raw trace (a kernel, memcpy, memset or
    gpu_user_annotation) and it has no host time; µs become ns rounded to the nearest ns."""
    rows = _key_averages()[key]
    gpu_names = {e["name"] for e in raw_trace_events(REF / "fixed_batch" / "trace.json.gz") if e.get("ph") == "X"
                 and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")}
    got = G.key_averages_table(rows)
    assert list(got.columns) == KA_COLUMNS
    assert len(got) == len(rows) and list(got.index) == list(range(len(rows)))
    for c in ["count", *TIMES, *MEMORY]:
        assert got[c].dtype == np.int64, c
    assert got["name"].tolist() == [r["key"] for r in rows]
    assert got["input_shapes"].tolist() == [r["input_shapes"] for r in rows]
    assert got["stack"].tolist() == [tuple(r["stack"]) for r in rows]
    assert got["count"].tolist() == [r["count"] for r in rows]
    want_type = ["CUDA" if r["key"] in gpu_names and r["cpu_time_total_us"] == 0 else "CPU" for r in rows]
    assert got["device_type"].tolist() == want_type
    assert 0 < want_type.count("CUDA") < len(rows)          # 67 device rows of 168 (by name)
    for new, old in TIMES.items():
        assert got[new].tolist() == [round(r[old] * 1000) for r in rows], new
    for new, old in MEMORY.items():
        assert got[new].tolist() == [r[old] for r in rows], new
    # the memory columns are not all zero: a wrong source column would show
    assert any(r["device_memory_usage_bytes"] for r in rows) and any(r["self_device_memory_usage_bytes"] for r in rows)


def test_key_averages_table_of_function_event_avg_rows_on_paper():
    """Rows named as FunctionEventAvg names its fields (cpu_time_total … in µs, *_memory_usage),
    without input_shapes or stack, with the exporter's device_type ("DeviceType.CUDA"): the
    exporter's type is trusted even where the times alone would say otherwise, the shapes
    default to "[]" and the stack to (), a missing memory figure is 0."""
    rows = [
        # an operator with no host time left after rounding, all its device time its own: the
        # exporter says CPU, and CPU it stays (the times alone would say CUDA)
        {"key": "aten::mm", "count": 2, "cpu_time_total": 0.0, "self_cpu_time_total": 0.0,
         "device_time_total": 1.5, "self_device_time_total": 1.5, "device_type": "DeviceType.CPU",
         "cpu_memory_usage": 512, "self_cpu_memory_usage": 256, "device_memory_usage": 2048,
         "self_device_memory_usage": float("nan"), "flops": 100},
        {"key": "gemm_kernel", "count": 2, "cpu_time_total": 0.0, "self_cpu_time_total": 0.0,
         "device_time_total": 3.0004, "self_device_time_total": 3.0004, "device_type": "DeviceType.CUDA",
         "cpu_memory_usage": 0, "self_cpu_memory_usage": 0, "device_memory_usage": 0,
         "self_device_memory_usage": 64, "flops": 0},
        {"key": "forward", "count": 1, "cpu_time_total": 12.3456, "self_cpu_time_total": 2.0,
         "device_time_total": 4.5, "self_device_time_total": 0.0, "device_type": "cuda",
         "cpu_memory_usage": 0, "self_cpu_memory_usage": 0, "device_memory_usage": 4096,
         "self_device_memory_usage": 0, "flops": 0},
    ]
    got = G.key_averages_table(rows)
    assert list(got.columns) == KA_COLUMNS
    assert got["device_type"].tolist() == ["CPU", "CUDA", "CUDA"]
    assert got["input_shapes"].tolist() == ["[]", "[]", "[]"]
    assert got["stack"].tolist() == [(), (), ()]
    # µs × 1000, rounded: 3.0004 µs = 3000.4 ns -> 3000; 12.3456 µs -> 12346 ns
    assert got["host_total_ns"].tolist() == [0, 0, 12346]
    assert got["host_self_ns"].tolist() == [0, 0, 2000]
    assert got["device_total_ns"].tolist() == [1500, 3000, 4500]
    assert got["device_self_ns"].tolist() == [1500, 3000, 0]
    assert got["cpu_memory_bytes"].tolist() == [512, 0, 0]
    assert got["self_cpu_memory_bytes"].tolist() == [256, 0, 0]
    assert got["device_memory_bytes"].tolist() == [2048, 0, 4096]
    assert got["self_device_memory_bytes"].tolist() == [0, 64, 0]      # NaN -> 0
    assert got["flops"].tolist() == [100, 0, 0]
    for c in ["count", *TIMES, *MEMORY]:
        assert got[c].dtype == np.int64, c


def test_key_averages_table_device_rows_without_device_type_on_paper():
    """The kit's bundles write no device_type: a row is CUDA when it has no host time (total
    AND self) and its device time, above 0, is all self time."""
    def row(key, cpu, self_cpu, dev, self_dev):
        return {"key": key, "count": 1, "input_shapes": "[]", "stack": [], "cpu_time_total_us": cpu,
                "self_cpu_time_total_us": self_cpu, "device_time_total_us": dev,
                "self_device_time_total_us": self_dev}
    rows = [row("kernel_1ns", 0.0, 0.0, 0.001, 0.001),    # 1 ns of device time, all self: CUDA
            row("wrapper", 5.0, 0.0, 2.0, 2.0),           # host time, none of it self: CPU
            row("idle_op", 0.0, 0.0, 0.0, 0.0),           # no time at all: CPU
            row("launcher", 3.0, 3.0, 2.0, 0.0),          # an operator: CPU
            row("kernel", 0.0, 0.0, 7.25, 7.25)]          # CUDA
    got = G.key_averages_table(rows)
    assert got["device_type"].tolist() == ["CUDA", "CPU", "CPU", "CPU", "CUDA"]
    assert got["device_total_ns"].tolist() == [1, 2000, 0, 2000, 7250]
    assert list(got.columns) == KA_COLUMNS[:9]            # no memory or FLOP fields: no such columns


# -- compare_with_profiler -----------------------------------------------------------------

def _prof_row(key, count, cpu, self_cpu, dev, self_dev, shapes="[]", stack=(), flops=None):
    r = {"key": key, "count": count, "input_shapes": shapes, "stack": list(stack), "cpu_time_total_us": cpu,
         "self_cpu_time_total_us": self_cpu, "device_time_total_us": dev, "self_device_time_total_us": self_dev}
    if flops is not None:
        r["flops"] = flops
    return r


CMP_COLS = ["count", "host_total_ns", "host_self_ns", "device_total_ns", "device_self_ns"]


def _expected(keys, kit, prof, only_in, cols=CMP_COLS):
    """The comparison worked on paper: kit/prof are lists of value lists (None = no row)."""
    d = {k: v for k, v in keys.items()}
    for i, c in enumerate(cols):
        d[f"{c}_kitlib"] = [np.nan if k is None else float(k[i]) for k in kit]
    for i, c in enumerate(cols):
        d[f"{c}_profiler"] = [np.nan if p is None else float(p[i]) for p in prof]
    d["only_in"] = only_in
    for i, c in enumerate(cols):
        d[f"{c}_diff"] = [(0 if k is None else k[i]) - (0 if p is None else p[i]) for k, p in zip(kit, prof)]
    return d


@pytest.mark.parametrize("explicit", [True, False], ids=["by=name", "default by"])
def test_compare_by_name_keys_on_one_side_on_paper(explicit):
    """Lesson 05's comparison by name: a key on both sides, one only in the rebuilt table, one
    only in the profiler's; the missing side's cells are NaN and count as 0 in the diff."""
    rebuilt = pd.DataFrame({"name": ["aten::add_", "aten::mm", "kern"], "device_type": ["CPU", "CPU", "CUDA"],
                            "count": [4, 2, 3], "host_total_ns": [9000, 5000, 0], "host_self_ns": [8000, 1000, 0],
                            "device_total_ns": [600, 3000, 3000], "device_self_ns": [0, 0, 3000],
                            "flops": [0, 64, 0]})
    prof = [_prof_row("aten::mm", 2, 5.001, 1.0, 3.0, 0.0),          # -> 5001, 1000, 3000, 0 ns
            _prof_row("aten::zero_", 1, 0.75, 0.75, 0.0, 0.0)]       # only in the profiler
    got = (G.compare_with_profiler(rebuilt, prof, by="name") if explicit
           else G.compare_with_profiler(rebuilt, prof))
    # no flops field in the profiler's rows: no flops columns; an outer merge sorts its keys
    want = pd.DataFrame(_expected(
        {"name": ["aten::add_", "aten::mm", "aten::zero_", "kern"], "device_type": ["CPU", "CPU", "CPU", "CUDA"]},
        kit=[[4, 9000, 8000, 600, 0], [2, 5000, 1000, 3000, 0], None, [3, 0, 0, 3000, 3000]],
        prof=[None, [2, 5001, 1000, 3000, 0], [1, 750, 750, 0, 0], None],
        only_in=["kitlib", "both", "profiler", "kitlib"]))
    assert list(got.columns) == list(want.columns)
    assert got["only_in"].tolist() == want["only_in"].tolist()
    assert not isinstance(got["only_in"].dtype, pd.CategoricalDtype)
    assert got["only_in"].map(type).eq(str).all()
    pd.testing.assert_frame_equal(got.drop(columns="only_in"), want.drop(columns="only_in"), check_dtype=False)
    assert all(got[f"{c}_diff"].notna().all() for c in CMP_COLS)


def test_compare_by_input_shape_and_by_stack_with_flops_on_paper():
    """by="input_shape" keys on the shapes string too; by="stack" on the stack, given as
    lists on the rebuilt side (as a table read back from JSON holds them) and compared as
    tuples; FLOPs are compared when both sides have them."""
    rebuilt = pd.DataFrame({"name": ["aten::mm", "aten::mm"], "device_type": ["CPU", "CPU"],
                            "input_shapes": ["[[2, 3], [3, 4]]", "[[5, 6], [6, 7]]"], "count": [1, 1],
                            "host_total_ns": [100, 200], "host_self_ns": [100, 200], "device_total_ns": [10, 20],
                            "device_self_ns": [0, 0], "flops": [48, 420]})
    prof = [_prof_row("aten::mm", 1, 0.1, 0.1, 0.01, 0.0, shapes="[[2, 3], [3, 4]]", flops=48),
            _prof_row("aten::mm", 1, 0.3, 0.3, 0.0, 0.0, shapes="[[8, 8], [8, 8]]", flops=1024)]
    got = G.compare_with_profiler(rebuilt, prof, by="input_shape")
    cols = CMP_COLS + ["flops"]
    want = pd.DataFrame(_expected(
        {"name": ["aten::mm"] * 3, "device_type": ["CPU"] * 3,
         "input_shapes": ["[[2, 3], [3, 4]]", "[[5, 6], [6, 7]]", "[[8, 8], [8, 8]]"]},
        kit=[[1, 100, 100, 10, 0, 48], [1, 200, 200, 20, 0, 420], None],
        prof=[[1, 100, 100, 10, 0, 48], None, [1, 300, 300, 0, 0, 1024]],
        only_in=["both", "kitlib", "profiler"], cols=cols))
    assert list(got.columns) == list(want.columns)
    assert got["only_in"].tolist() == ["both", "kitlib", "profiler"]
    pd.testing.assert_frame_equal(got.drop(columns="only_in"), want.drop(columns="only_in"), check_dtype=False)

    f1, f2 = ("a.py(1): f", "b.py(2): g"), ("a.py(1): f", "c.py(3): h")
    rebuilt = pd.DataFrame({"name": ["aten::mm", "aten::mm"], "device_type": ["CPU", "CPU"],
                            "stack": [list(f1), list(f2)], "count": [1, 2], "host_total_ns": [100, 200],
                            "host_self_ns": [100, 200], "device_total_ns": [0, 0], "device_self_ns": [0, 0]})
    prof = [_prof_row("aten::mm", 1, 0.1, 0.1, 0.0, 0.0, stack=f1),
            _prof_row("aten::mm", 5, 0.5, 0.5, 0.0, 0.0, stack=())]
    got = G.compare_with_profiler(rebuilt, prof, by="stack")
    assert "input_shapes" not in got.columns
    assert got["stack"].tolist() == [(), f1, f2]
    assert got["only_in"].tolist() == ["profiler", "both", "kitlib"]
    assert got["count_diff"].tolist() == [-5, 0, 2]
    assert got["host_total_ns_diff"].tolist() == [-500, 0, 200]
    assert got["count_profiler"].isna().tolist() == [False, False, True]


def test_compare_by_stack_on_the_reference_rows():
    """The profiler's by_stack_5 rows of fixed_batch hold no stacks (torch 2.11 without
    verbose): compared by="stack" against a table with one framed key, only the empty stacks
    meet; every profiler row keeps its own figures from key_averages.json.gz."""
    rows = _key_averages()["by_stack_5"]
    assert not any(r["stack"] for r in rows)
    first = rows[0]
    rebuilt = pd.DataFrame({"name": [first["key"]], "device_type": ["CPU"], "stack": [("x.py(1): f",)],
                            "count": [1], "host_total_ns": [1], "host_self_ns": [1], "device_total_ns": [0],
                            "device_self_ns": [0]})
    got = G.compare_with_profiler(rebuilt, rows, by="stack")
    assert len(got) == len(rows) + 1
    assert sorted(got["only_in"].tolist()) == ["kitlib"] + ["profiler"] * len(rows)
    prof = got[got["only_in"] == "profiler"]
    assert sorted(prof["count_profiler"].astype(int).tolist()) == sorted(r["count"] for r in rows)
    assert sorted((-prof["count_diff"]).astype(int).tolist()) == sorted(r["count"] for r in rows)
    assert sorted((-prof["host_self_ns_diff"]).astype(int).tolist()) == sorted(
        round(r["self_cpu_time_total_us"] * 1000) for r in rows)
    assert prof["count_kitlib"].isna().all()


# -- conv_inputs, memory_layout, _tensors_label ---------------------------------------------------

def _first_in_first_step(events, name):
    """The first ``name`` operator inside the earliest ProfilerStep#N range of the raw trace."""
    steps = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"
                    and e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"])
    s = steps[0]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e["name"] == name
           and s["ts"] <= e["ts"] <= s["ts"] + s["dur"]]
    return min(ops, key=lambda e: e["ts"])


def test_conv_inputs_of_lesson_05_from_raw_json():
    """Lesson 05's table of the first aten::cudnn_convolution of the first step, every cell
    from that event's args in the raw trace (Input Dims, Input Strides, Input type)."""
    from kitlib.analyses.chain import first_op
    tr = kitlib.open_capture("fixed_batch").trace
    raw = _first_in_first_step(raw_trace_events(REF / "fixed_batch" / "trace.json.gz"), "aten::cudnn_convolution")["args"]
    assert raw["Input Dims"][:2] == [[128, 3, 224, 224], [64, 3, 7, 7]]
    assert raw["Input Strides"][:2] == [[150528, 1, 672, 3], [147, 1, 21, 3]]
    assert raw["Input type"][:3] == ["float", "float", "ScalarList"]
    row = first_op(tr, "aten::cudnn_convolution", step=int(tr.steps["step"].iloc[0]))
    got = G.conv_inputs(tr, row)
    assert list(got.columns) == ["shape", "strides", "layout", "dtype", "reading"]
    assert list(got.index) == ["input", "weight"]
    assert got["shape"].tolist() == raw["Input Dims"][:2]
    assert got["strides"].tolist() == raw["Input Strides"][:2]
    # channels last on paper: N stride H*W*C (224*224*3 = 150528; 7*7*3 = 147), C stride 1,
    # H stride W*C (672; 21), W stride C (3; 3)
    assert got["layout"].tolist() == ["channels_last", "channels_last"]
    assert got["dtype"].tolist() == ["float", "float"]
    assert got["reading"].tolist() == ["128 images × 3 channels × 224×224 pixels", "64 filters, each 3 channels × 7×7"]


def test_conv_inputs_of_a_two_input_operator_from_raw_json():
    """Any operator with two recorded inputs reads: the first aten::mm of fixed_batch (the
    classifier's backward: two 2-d inputs, exactly two dims in its args) has no 4-d tensor,
    so its layouts are "n/a" and its readings the shapes themselves."""
    from kitlib.analyses.chain import first_op
    tr = kitlib.open_capture("fixed_batch").trace
    raw = min((e for e in raw_trace_events(REF / "fixed_batch" / "trace.json.gz") if e.get("ph") == "X" and e.get("cat") == "cpu_op"
               and e["name"] == "aten::mm"), key=lambda e: e["ts"])["args"]
    assert raw["Input Dims"] == [[128, 101], [101, 2048]] and raw["Input Strides"] == [[101, 1], [2048, 1]]
    got = G.conv_inputs(tr, first_op(tr, "aten::mm"))
    assert got["shape"].tolist() == raw["Input Dims"]
    assert got["strides"].tolist() == raw["Input Strides"]
    assert got["layout"].tolist() == ["n/a", "n/a"]
    assert got["dtype"].tolist() == raw["Input type"] == ["float", "float"]
    assert got["reading"].tolist() == ["[128, 101]", "[101, 2048]"]


def test_conv_inputs_refuses_a_trace_recorded_without_shapes():
    """cold_start_8step was recorded with record_shapes off (its manifest's recipe): the
    convolution has no Input Dims, and the refusal names the operator, its row and the fix."""
    from kitlib.analyses.chain import first_op
    manifest = json.loads((REF / "cold_start_8step" / "manifest.json").read_text())
    assert manifest["recipe"]["record_shapes"] is False
    tr = kitlib.open_capture("cold_start_8step").trace
    row = first_op(tr, "aten::cudnn_convolution")
    with pytest.raises(KeyError) as err:
        G.conv_inputs(tr, row)
    assert err.value.args == (f"operator 'aten::cudnn_convolution' (row {row}) has no recorded input shapes; "
                              "record the trace with record_shapes=True",)


def _paper_trace():
    """Four operators worked on paper (the columns conv_inputs reads of trace.ops)."""
    ops = pd.DataFrame({
        "name": ["conv_nonsquare", "mm_no_strides", "conv_no_strides_or_types", "one_input", "no_shapes"],
        "input_dims": [[[2, 3, 4, 5], [6, 3, 1, 2], [6]], [[2, 3], [3, 4]], [[1, 2, 3, 3], [4, 2, 1, 1]],
                       [[1, 2, 3, 3]], None],
        "input_strides": [[[60, 20, 5, 1], [6, 2, 2, 1], [1]], None, None, [[18, 9, 3, 1]], None],
        "input_types": [["c10::Half", "float", "double"], ["float", "float"], None, ["float"], None]},
        index=[10, 11, 12, 13, 14])
    return SimpleNamespace(ops=ops)


def test_conv_inputs_on_paper():
    tr = _paper_trace()
    a = G.conv_inputs(tr, 10)
    # [2, 3, 4, 5] with strides [3*4*5, 4*5, 5, 1] = [60, 20, 5, 1]: contiguous;
    # [6, 3, 1, 2] with [3*1*2, 1*2, 2, 1] = [6, 2, 2, 1]: contiguous. H != W: each read in its place
    assert a.to_dict("list") == {
        "shape": [[2, 3, 4, 5], [6, 3, 1, 2]], "strides": [[60, 20, 5, 1], [6, 2, 2, 1]],
        "layout": ["contiguous", "contiguous"], "dtype": ["c10::Half", "float"],
        "reading": ["2 images × 3 channels × 4×5 pixels", "6 filters, each 3 channels × 1×2"]}
    assert list(a.index) == ["input", "weight"]
    b = G.conv_inputs(tr, 11)           # exactly two inputs, 2-d, no strides recorded (as the public traces)
    assert b.to_dict("list") == {"shape": [[2, 3], [3, 4]], "strides": [None, None], "layout": ["n/a", "n/a"],
                                 "dtype": ["float", "float"], "reading": ["[2, 3]", "[3, 4]"]}
    c = G.conv_inputs(tr, 12)           # 4-d, but neither strides nor types recorded
    assert c.to_dict("list") == {
        "shape": [[1, 2, 3, 3], [4, 2, 1, 1]], "strides": [None, None], "layout": ["n/a", "n/a"],
        "dtype": [None, None], "reading": ["1 images × 2 channels × 3×3 pixels", "4 filters, each 2 channels × 1×1"]}
    for row, name in [(13, "one_input"), (14, "no_shapes")]:
        with pytest.raises(KeyError, match=rf"operator '{name}' \(row {row}\) has no recorded input shapes"):
            G.conv_inputs(tr, row)


def test_memory_layout_on_paper():
    """The three layouts of the tutorial's rule, and "n/a" unless shape and strides are both 4-d."""
    assert G.memory_layout([128, 3, 224, 224], [150528, 50176, 224, 1]) == "contiguous"
    assert G.memory_layout([128, 3, 224, 224], [150528, 1, 672, 3]) == "channels_last"
    assert G.memory_layout([2, 3, 4, 5], [60, 20, 1, 4]) == "other"       # H, W transposed
    assert G.memory_layout([2, 3, 4, 5], [60, 20, 5]) == "n/a"            # 3 strides for 4 dims
    assert G.memory_layout([2, 3, 4], [12, 4, 1, 1]) == "n/a"             # 3 dims, 4 strides
    assert G.memory_layout([2, 3, 4, 5], None) == "n/a"                   # strides not recorded
    assert G.memory_layout([2, 3, 4, 5], []) == "n/a"
    assert G.memory_layout(None, [60, 20, 5, 1]) == "n/a"
    assert G.memory_layout([], []) == "n/a" and G.memory_layout([2, 3], [3, 1]) == "n/a"


def test_tensors_label_of_the_profilers_own_shape_keys():
    """shape_table's ``tensors`` column: the first two non-empty shapes of the profiler's own
    input_shapes strings (fixed_batch's by_input_shape rows), "[]" for a key with no shapes
    at all (its 99 kernel, runtime and annotation rows), "[] (0-d scalar)" when every
    shape is empty."""
    rows = _key_averages()["by_input_shape"]
    bw = next(r["input_shapes"] for r in rows if r["key"] == "aten::convolution_backward")
    assert bw.startswith("[[128, 2048, 7, 7], [128, 512, 7, 7], [2048, 512, 1, 1], []")
    assert G._tensors_label(bw) == "[128, 2048, 7, 7] × [128, 512, 7, 7]"
    none = [r["input_shapes"] for r in rows if r["input_shapes"] == "[]"]
    assert len(none) == 99 and {G._tensors_label(s) for s in none} == {"[]"}
    assert G._tensors_label("[[], [], []]") == "[] (0-d scalar)"
    assert G._tensors_label("[[2, 3], [], [3, 4], [4]]") == "[2, 3] × [3, 4]"
    assert G._tensors_label("[[5], []]") == "[5]"
    assert G._tensors_label("(none)") == "(none)"
