"""Lesson 08's FLOP tables, every cell derived without kitlib (the mutation run's flops pins).

The expected values come from the tools' own files, read here with ``gzip`` and ``json``
only: the raw Chrome-trace JSON (``Input Dims``, ``Concrete Inputs``, ``ts``/``dur`` of each
``cpu_op``, kernel and ``ProfilerStep#N``), the profiler's own ``key_averages`` rows of
``fixed_batch`` (its ``count`` and ``flops`` per operator, its device time of
``aten::cudnn_convolution``) and FlopCounterMode's ``flop_counter_one_step.json``. The FLOP
formulas are PyTorch's ``computeFlops`` (``torch/csrc/profiler/util.cpp``), written out again
below. Peak rates are NVIDIA's datasheet figures, halved for the dense rate. A few tables are
worked on paper from tiny hand-built inputs: shapes no shipped trace has (asymmetric or grouped
convolutions, empty and size-1 dimensions, baddbmm) by the same formulas and the cases where
PyTorch gives 0, tiny Chrome traces written here (calls at a step's edges, a launch from the
first row), the mismatch rows of the key_averages comparison, FlopCounterMode counts that do
not add up, GPU names with a PCIe or NVL suffix.

Each test names the lesson-08 figure it pins; the README's mutation-testing table lists the
surviving mutants of ``kitlib/analyses/flops.py`` they catch.
"""
import gzip
import json
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import kitlib
from kitlib.analyses import flops as F
from kitlib.errors import KitError

from conftest import raw_trace_events

REF = Path(__file__).resolve().parent.parent / "data" / "reference"
PUBLIC = REF / "public-traces"
COUNTED = ("aten::conv2d", "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::mul", "aten::add")


def _ns(us):
    return round(us * 1000)      # Kineto writes µs with 3 decimals: ns, as kitlib reads them


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

@pytest.fixture(scope="module")
def fixed():
    return kitlib.open_capture("fixed_batch")


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
    raw = raw_trace_events(PUBLIC / name)
    steps = _raw_steps(raw)
    assert [s[0] for s in steps] == [551, 552]
    calls = [e for e in raw if e.get("cat") == "cpu_op" and e.get("ph") == "X" and e["name"] in COUNTED]
    by_key = {}
    for e in calls:
        by_key.setdefault((e["name"], _ns(e["ts"]), _ns(e["dur"])), []).append(e)
    ev = F.flops_by_event(kitlib.load_trace(PUBLIC / name))
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
    path = PUBLIC / "hta_2024-03_nccl_sampled_rank0.json.gz"
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
    return {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts, "dur": 10,
            "args": {"External id": ts, "Input Dims": [[2, 3], [3, 4]], "Concrete Inputs": ["", ""]}}


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
