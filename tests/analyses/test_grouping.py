"""key_averages rebuilt from the trace, checked against the profiler's own rows; call sites."""
import gzip
import hashlib
import json
import math
import re
import zlib
from types import SimpleNamespace

import numpy as np
import orjson
import pandas as pd
import pytest

import kitlib
from kitlib.analyses import callsites as C
from kitlib.analyses import events as E
from kitlib.analyses import grouping as G
from kitlib.analyses.chain import chain, first_op
from kitlib.errors import TraceFormatError

from conftest import REF, raw_trace_events
from support.events import event, gpu_event, launch_event, memory_event, write_trace

COLS = ["count", "host_total_ns", "host_self_ns", "device_total_ns", "device_self_ns"]


@pytest.fixture(scope="module")
def ref():
    cap = kitlib.open_capture("fixed_batch")
    tr = cap.trace
    c = chain(tr)
    ev = E.op_events(tr, c)
    return cap, tr, c, ev


def _diffs(m):
    return m[[f"{c}_diff" for c in COLS]].abs()


@pytest.mark.parametrize("by,key", [("name", "by_name"), ("input_shape", "by_input_shape")])
def test_rebuilt_table_equals_profiler(ref, by, key):
    cap, tr, c, ev = ref
    rows = cap.key_averages()[key]
    m = G.compare_with_profiler(G.group_ops(tr, by=by, events=ev), rows, by=by)
    assert len(m) == len(rows) and (m["only_in"] == "both").all()
    assert (m["count_diff"] == 0).all()
    # every host row (operators, annotations, steps, launches) to the ns the JSON's µs floats carry
    host = m[m["device_type"] == "CPU"]
    assert (_diffs(host) <= 1).all().all()
    # device rows: kernels, copies and sets exactly; the GPU-side annotations are 2 ns longer per range
    # in the exported trace than in the profiler's memory
    dev = m[m["device_type"] == "CUDA"]
    ann = dev["name"].isin(set(tr.gpu.loc[tr.gpu["kind"] == "gpu_annotation", "name"]))
    assert (_diffs(dev[~ann]) <= 1).all().all()
    assert (dev.loc[ann, "device_self_ns_diff"] == 2 * dev.loc[ann, "count_kitlib"]).all()


def test_known_rows(ref):
    cap, tr, c, ev = ref
    t = G.group_ops(tr, by="name", events=ev)
    conv = t[(t["name"] == "aten::cudnn_convolution") & (t["device_type"] == "CPU")].iloc[0]
    assert conv["count"] == 265
    assert conv["device_self_ns"] == conv["device_total_ns"] == 25_404_581
    # the 78 GPU events launched before the window: counted in the kernel rows, in no operator's time
    pre = c[c["link"] == "launched_before_recording"]
    assert len(pre) == 78
    kern = t[(t["device_type"] == "CUDA") & t["name"].isin(set(tr.kernels["name"]))]
    assert kern["device_self_ns"].sum() - ev["device_self_ns"].sum() == pre["gpu_dur_ns"].sum()


def test_by_stack_against_profiler(ref):
    cap, tr, c, ev = ref
    rows = cap.key_averages()["by_stack_5"]
    # torch 2.11 filled no stacks without experimental_config(verbose=True): its by-stack rows are by-name rows
    assert not any(r["stack"] for r in rows)
    st = G.group_ops(tr, by="stack", events=ev)
    assert st["stack"].map(len).max() == 5 and len(st) > len(rows)
    summed = st.groupby(["name", "device_type"], as_index=False)[COLS].sum()
    m = G.compare_with_profiler(summed, rows, by="name")
    assert (m["only_in"] == "both").all() and (m["count_diff"] == 0).all()
    conv = st[st["name"] == "aten::cudnn_convolution"]
    assert conv["stack"].map(lambda s: s[-1].startswith("nn.Module: Conv2d_")).all()


def test_shape_table_and_layout(ref):
    cap, tr, c, ev = ref
    t = G.shape_table(tr, "aten::cudnn_convolution", events=ev)
    assert t["count"].sum() == 265 and t["device_total_ns"].sum() == 25_404_581
    assert t.iloc[0]["first_input"] == "[128, 3, 224, 224]" and t.iloc[0]["count"] == 5
    r = first_op(tr, "aten::cudnn_convolution", step=int(tr.steps["step"].iloc[0]))
    ci = G.conv_inputs(tr, r)
    assert ci.loc["input", "shape"] == [128, 3, 224, 224] and ci.loc["weight", "shape"] == [64, 3, 7, 7]
    assert ci.loc["input", "strides"] == [150528, 1, 672, 3] and ci.loc["input", "layout"] == "channels_last"
    assert G.memory_layout([128, 3, 224, 224], [150528, 50176, 224, 1]) == "contiguous"
    assert E.shapes_key(None) == "[]" and E.shapes_key([[2, 3], []]) == "[[2, 3], []]"
    assert t.iloc[0]["tensors"] == "[128, 3, 224, 224] × [64, 3, 7, 7]"
    # aten::add_ on batch norm's 0-d num_batches_tracked: a labelled key, not a blank one
    add = G.shape_table(tr, "aten::add_", events=ev).set_index("input_shapes")
    assert add.loc["[[], [], []]", "tensors"] == "[] (0-d scalar)" and add.loc["[[], [], []]", "count"] == 265
    assert (add["tensors"] != "").all()


def test_callsite_of_first_convolution(ref):
    cap, tr, c, ev = ref
    table = C.callsites(tr, ev)
    r = first_op(tr, "aten::cudnn_convolution", step=int(tr.steps["step"].iloc[0]))
    cs = C.callsite_of(tr, r, table)
    assert cs["user_frame"] == "torchvision/models/resnet.py(266): _forward_impl"
    assert cs["line"] == 266 and cs["module"] == "Conv2d_0" and cs["module_path"] == "ResNet_0 › Conv2d_0"
    assert cs["stack"][0].startswith("<built-in method conv2d")
    # with torchvision counted as library code, the call site is the training script's line
    cs2 = C.callsite_of(tr, r, internal=("torch/", "torchvision/"))
    assert cs2["user_frame"] == "capture_tables.py(15): step"
    # backward operators borrow their forward operator's stack: the last forward conv is the first backward one
    bw = table[table["name"] == "aten::convolution_backward"].iloc[0]
    fw = table[table["name"] == "aten::cudnn_convolution"]
    assert bw["module"] == fw[fw["start_ns"] < bw["start_ns"]].iloc[-1]["module"]
    k = C.kernel_callsites(tr, table, c)
    assert k["module"].isna().sum() >= 78


@pytest.mark.torch_run
def test_live_cpu_capture_with_stacks(tmp_path):
    """The same rebuild against a fresh CPU capture whose profiler DID keep stacks (verbose=True)."""
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, _ExperimentalConfig, profile, record_function
    from kitlib.capture.recipes import key_average_rows
    from kitlib.readers.trace import load_trace
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4))
    x, y = torch.randn(4, 3, 16, 16), torch.randint(0, 4, (4,))

    def step():
        with record_function("forward"):
            loss = torch.nn.functional.cross_entropy(m(x), y)
        with record_function("backward"):
            loss.backward()
    step()
    with profile(activities=[ProfilerActivity.CPU], with_stack=True, record_shapes=True,
                 experimental_config=_ExperimentalConfig(verbose=True)) as p:
        step()
    p.export_chrome_trace(str(tmp_path / "t.json"))
    tr = load_trace(tmp_path / "t.json")
    ev = E.op_events(tr)   # the Python-frame rule comes from the trace itself
    for by, kw in [("name", {}), ("input_shape", {"group_by_input_shape": True}), ("stack", {"group_by_stack_n": 5})]:
        rows = key_average_rows(p.key_averages(**kw))
        if by == "stack" and not any(r["stack"] for r in rows):
            pytest.skip("this torch keeps no stacks in key_averages")
        mm = G.compare_with_profiler(G.group_ops(tr, by=by, events=ev), rows, by=by)
        assert (mm["only_in"] == "both").all(), mm[mm["only_in"] != "both"]
        assert (mm[["count_diff", "host_total_ns_diff", "host_self_ns_diff"]].abs() <= 1).all().all()


# --------------------------------------------------------------------------- lesson 06's trace sizes and capture cost
# attribution_bytes and capture_cost, every cell from the raw files (trace JSON, manifest.json,
# step_times.json) or worked on paper on a hand-built trace and bundle.
_ROWS = ["as recorded", "without Python frames (with_stack)", "without input shapes (record_shapes)",
         "without allocator events (profile_memory)", "without all three"]
_COST_COLS = ["options", "steps", "median_step_ms", "trace_gzip_bytes", "bytes_per_step", "events_per_step"]


def _compact(obj):
    # what attribution_bytes writes: compact JSON (orjson.dumps gives these bytes for plain ASCII data)
    return json.dumps(obj, separators=(",", ":")).encode()


@pytest.fixture(scope="module")
def raw_traces():
    """The raw trace JSON of two bundles, read with gzip and json only."""
    out = {}
    for name in ("profiler_5step", "cold_start_8step"):
        with gzip.open(REF / name / "trace.json.gz", "rb") as f:
            out[name] = orjson.loads(f.read())     # the same floats as json, faster
    return out


# a hand-built trace: one event of each kind the three options add, and two that none removes
_PY = {"ph": "X", "cat": "python_function", "name": "train.py(3): step", "pid": 1, "tid": 1, "ts": 9, "dur": 8,
       "args": {"Python id": 1}}
_ADD = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
        "args": {"External id": 7, "Input Dims": [[2, 3], [2, 3]], "Input type": ["float", "float"],
                 "Concrete Inputs": ["", ""], "Record function id": 0}}
_MEM = {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 12, "s": "t",
        "args": {"Bytes": 512, "Total Allocated": 512}}
_ITER = {"ph": "i", "cat": "cpu_instant_event", "name": "Iteration Start: PyTorch Profiler", "pid": 1, "tid": 1,
         "ts": 1, "s": "g"}
_EMPTY = {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 11, "dur": 1, "args": {}}
_MUL = {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 13, "dur": 2,
        "args": {"Input Strides": [[3, 1]]}}
_EVENTS = [_PY, _ADD, _MEM, _ITER, _EMPTY, _MUL]
# the same events with their shape arguments taken out, worked by hand (key order kept)
_ADD_NO_SHAPES = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
                  "args": {"External id": 7, "Record function id": 0}}
_MUL_NO_SHAPES = {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 13, "dur": 2,
                  "args": {}}
_VARIANTS = {  # each row's events, on paper
    "as recorded": _EVENTS,
    "without Python frames (with_stack)": [_ADD, _MEM, _ITER, _EMPTY, _MUL],
    "without input shapes (record_shapes)": [_PY, _ADD_NO_SHAPES, _MEM, _ITER, _EMPTY, _MUL_NO_SHAPES],
    "without allocator events (profile_memory)": [_PY, _ADD, _ITER, _EMPTY, _MUL],   # the [memory] instant only
    "without all three": [_ADD_NO_SHAPES, _ITER, _EMPTY, _MUL_NO_SHAPES],
}


def _expected_sizes(texts):
    gz = {k: len(zlib.compress(b, 6)) for k, b in texts.items()}   # zlib level 6: a .json.gz's deflate stream
    return {k: (len(_VARIANTS[k]), len(b), gz[k], gz[k] / gz["as recorded"]) for k, b in texts.items()}


def _size_rows(t):
    return {k: (int(r["events"]), int(r["json_bytes"]), int(r["gzip_bytes"]), float(r["share_of_gzip"]))
            for k, r in t.iterrows()}


def test_attribution_bytes_of_a_hand_built_trace_object():
    doc = {"schemaVersion": 1, "traceEvents": _EVENTS, "traceName": "t.json"}
    before = json.dumps(doc)
    t = G.attribution_bytes(doc)
    assert list(t.index) == _ROWS
    assert list(t.columns) == ["events", "json_bytes", "gzip_bytes", "share_of_gzip"]
    # each variant is the whole document again, its other top-level keys kept in place
    texts = {k: _compact({"schemaVersion": 1, "traceEvents": evs, "traceName": "t.json"})
             for k, evs in _VARIANTS.items()}
    assert _size_rows(t) == _expected_sizes(texts)
    assert json.dumps(doc) == before                                  # the input is left as it was


def test_attribution_bytes_of_a_bare_event_list_and_what_it_refuses():
    # a trace that is a bare list of events (the Chrome format allows it): each variant is a bare list
    t = G.attribution_bytes(list(_EVENTS))
    assert list(t.index) == _ROWS
    assert _size_rows(t) == _expected_sizes({k: _compact(evs) for k, evs in _VARIANTS.items()})
    for bad in ({"schemaVersion": 1}, {"traceEvents": None}, "trace"):
        with pytest.raises(TraceFormatError, match="'traceEvents'"):
            G.attribution_bytes(bad)


def test_attribution_bytes_event_counts_on_the_reference_trace(raw_traces):
    doc = raw_traces["profiler_5step"]
    ev = doc["traceEvents"]
    # counted in the raw JSON: Python frames (with_stack), allocator instants (profile_memory)
    py = sum(e.get("cat") == "python_function" for e in ev)
    mem = sum(e.get("ph") == "i" and e.get("name") == "[memory]" for e in ev)
    other_instants = sum(e.get("ph") == "i" and e.get("name") != "[memory]" for e in ev)
    both = sum(e.get("cat") == "python_function" and e.get("ph") == "i" and e.get("name") == "[memory]" for e in ev)
    assert (len(ev), py, mem, other_instants, both) == (73507, 22977, 10150, 2, 0)
    t = G.attribution_bytes(doc)
    assert list(t.index) == _ROWS
    assert t["events"].tolist() == [len(ev), len(ev) - py, len(ev), len(ev) - mem, len(ev) - py - mem]
    # taking out a share makes both texts smaller; the shares are of the recorded gzip size
    assert (t["json_bytes"].iloc[1:] < t["json_bytes"].iloc[0]).all()
    assert (t["gzip_bytes"].iloc[1:] < t["gzip_bytes"].iloc[0]).all()
    assert t["share_of_gzip"].tolist() == (t["gzip_bytes"] / t["gzip_bytes"].iloc[0]).tolist()
    assert t.loc["as recorded", "share_of_gzip"] == 1.0


def _steps_in(doc, label):
    return sum(e.get("ph") == "X" and e.get("cat") == "user_annotation"
               and re.fullmatch(rf"{label}#\d+", str(e.get("name"))) is not None for e in doc["traceEvents"])


def test_capture_cost_of_two_reference_bundles_from_their_files(raw_traces):
    full, cold = kitlib.open_capture("profiler_5step"), kitlib.open_capture("cold_start_8step")
    t = G.capture_cost({"full": full, "cold": cold})
    assert list(t.index) == ["full", "cold"] and list(t.columns) == _COST_COLS
    man = {n: json.loads((REF / n / "manifest.json").read_text()) for n in ("profiler_5step", "cold_start_8step")}
    # manifest recipes: profiler_5step has all four options on, cold_start_8step none of them
    assert all(man["profiler_5step"]["recipe"][o] for o in ("record_shapes", "with_stack", "profile_memory",
                                                             "with_flops"))
    assert not any(man["cold_start_8step"]["recipe"][o] for o in ("record_shapes", "with_stack", "profile_memory",
                                                                   "with_flops"))
    assert t.loc["full", "options"] == "record_shapes, with_stack, profile_memory, with_flops"
    assert t.loc["cold", "options"] == "none"
    # steps: ProfilerStep#N ranges under a schedule, torch_step#N ranges without one (raw JSON)
    n_full, n_cold = _steps_in(raw_traces["profiler_5step"], "ProfilerStep"), _steps_in(raw_traces["cold_start_8step"],
                                                                                        "torch_step")
    assert (n_full, n_cold) == (5, 8)
    assert t.loc["full", "steps"] == n_full and t.loc["cold", "steps"] == n_cold
    # median_step_ms: step_times.json's profiled series, its wait + warmup steps (1 + 1, manifest) dropped;
    # cold_start_8step has no step_times.json: NaN, a float
    st = json.loads((REF / "profiler_5step" / "step_times.json").read_text())["step_ms_profiled_all_attribution"]
    sched = man["profiler_5step"]["recipe"]["schedule"]
    assert (len(st), sched["wait"] + sched["warmup"]) == (7, 2)
    active = sorted(st[2:])                  # 80.36994, 66.048708, 61.461497, 50.364752, 51.903849
    assert t.loc["full", "median_step_ms"] == active[2] == 61.461497
    med = t.loc["cold", "median_step_ms"]
    assert isinstance(med, float) and math.isnan(med)
    for label, n, name in (("full", n_full, "profiler_5step"), ("cold", n_cold, "cold_start_8step")):
        size = man[name]["files"]["trace.json.gz"]["bytes"]          # 1,342,993 and 1,232,054
        assert size == (REF / name / "trace.json.gz").stat().st_size
        assert t.loc[label, "trace_gzip_bytes"] == size
        assert t.loc[label, "bytes_per_step"] == size / n
        assert t.loc[label, "events_per_step"] == len(raw_traces[name]["traceEvents"]) / n


def _bundle(folder, events, step_times, recipe):
    folder.mkdir()
    (folder / "trace.json").write_text(json.dumps({"traceEvents": events}))
    (folder / "step_times.json").write_text(json.dumps(step_times))
    files = {f: {"sha256": hashlib.sha256((folder / f).read_bytes()).hexdigest(),
                 "bytes": (folder / f).stat().st_size, "what": "hand-built"} for f in ("trace.json", "step_times.json")}
    (folder / "manifest.json").write_text(json.dumps({"format": "kitlib-bundle/1", "kind": "torch_profiler",
                                                      "name": folder.name, "origin": "live", "recipe": recipe,
                                                      "files": files}))
    return kitlib.open_capture(folder)


def test_capture_cost_of_a_hand_built_live_bundle(tmp_path):
    # a live capture's series is step_ms_profiled, timed around every prof.step() of one cycle:
    # wait 1 + warmup 1 + active 1 = 3 values, the last one the active step; its trace is a plain
    # trace.json with one ProfilerStep and 3 events
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": 100, "dur": 50},
              {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 110, "dur": 5, "args": {}},
              {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}}]
    cap = _bundle(tmp_path / "live_one_step", events,
                  {"step_ms_profiled": [9.0, 8.0, 2.0], "step_ms_profiled_all_attribution": [5.0, 5.0, 5.0]},
                  {"schedule": {"wait": 1, "warmup": 1, "active": 1}, "record_shapes": False, "with_stack": True,
                   "profile_memory": False, "with_flops": False})
    size = (tmp_path / "live_one_step" / "trace.json").stat().st_size
    t = G.capture_cost({"stack": cap})
    assert list(t.columns) == _COST_COLS
    assert t.loc["stack"].tolist() == ["with_stack", 1, 2.0, size, size / 1, 3 / 1]


# --------------------------------------------------------------------------- the [memory] row
MEMORY_ROW = __import__("pathlib").Path(__file__).resolve().parents[2] / "tests" / "data" / "memory-row"


@pytest.mark.parametrize("by", ["name", "input_shape"])
def test_records_inside_no_event_are_the_profilers_memory_row(by):
    """tests/data/memory-row (README there): Python frees four tensors between
    operators, so six allocator records fall inside no event; the profiler's own
    key_averages() has a [memory] row for them (count 6, CPU Mem -12,000,004 B, no
    time), and group_ops has the same row, as memory_by_operator does. Every other row
    matches too."""
    import json
    from kitlib.analyses import memory as M
    tr = kitlib.load_trace(MEMORY_ROW / "trace.json")
    rows = json.loads((MEMORY_ROW / f"expected_by_{by}.json").read_text())["rows"]
    profiler = [r for r in rows if r["key"] == "[memory]"]
    assert [(r["count"], r["cpu_memory_usage_bytes"], r["self_cpu_memory_usage_bytes"], r["cpu_time_total_us"])
            for r in profiler] == [(6, -12_000_004, -12_000_004, 0.0)]
    g = G.group_ops(tr, by=by)
    mine = g[g["name"] == "[memory]"]
    assert mine[["device_type", "count", "host_total_ns", "host_self_ns", "cpu_memory_bytes",
                 "self_cpu_memory_bytes", "device_memory_bytes"]].values.tolist() == \
        [["CPU", 6, 0, 0, -12_000_004, -12_000_004, 0]]
    m = G.compare_with_profiler(g, rows, by=by)
    assert (m["only_in"] == "both").all() and len(m) == len(rows)
    diffs = ["count_diff", "cpu_memory_bytes_diff", "self_cpu_memory_bytes_diff", "flops_diff"]
    assert (m[diffs] == 0).all().all()
    assert (m[["host_total_ns_diff", "host_self_ns_diff"]].abs() <= 1).all().all()   # the JSON's float µs
    # the same records, the same row, in memory_by_operator
    by_op = M.memory_by_operator(tr, device="cpu")
    assert by_op.loc["[memory]", ["calls", "total_bytes", "self_bytes"]].tolist() == [6, -12_000_004, -12_000_004]
    assert len(M.records_inside_no_event(tr)) == 6


def test_no_memory_row_where_every_record_is_inside_an_event(ref):
    """fixed_batch: every allocator record lies inside some event, and the profiler's
    table (its key_averages.json) has no [memory] row; neither has group_ops."""
    from kitlib.analyses import memory as M
    cap, tr, c, ev = ref
    assert not any(r["key"] == "[memory]" for r in cap.key_averages()["by_name"])
    assert len(tr.memory) and len(M.records_inside_no_event(tr)) == 0
    assert "[memory]" not in set(G.group_ops(tr, events=ev)["name"])


# ================================================================================================
# ``grouping.group_ops`` pinned column by column, row by row and in its row order.
#
# Written against the survivors of a mutation run (README, "For developers"): each test
# names the kind of one-line change it catches. The oracle is the profiler's own
# ``key_averages()`` of the same run (``data/reference/fixed_batch/key_averages.json.gz``,
# saved by ``data/reference/how_captured/capture_tables.py``) or sums over the same trace.
# ================================================================================================

REF_COLUMNS = ["name", "device_type", "count", "host_total_ns", "host_self_ns", "device_total_ns",
               "device_self_ns", "cpu_memory_bytes", "self_cpu_memory_bytes", "device_memory_bytes",
               "self_device_memory_bytes", "flops", "host_per_call_ns", "device_per_call_ns"]


@pytest.fixture(scope="module")
def fixed_grouped(ref_trace):
    t = ref_trace("fixed_batch")
    return t, G.group_ops(t)


def _key_averages_by_name():
    from conftest import REF
    return pd.DataFrame(json.loads(gzip.open(REF / "fixed_batch" / "key_averages.json.gz").read())["by_name"])


def test_memory_and_flops_columns_equal_key_averages_row_by_row(fixed_grouped):
    """CPU/CUDA Mem, Self CPU/CUDA Mem and FLOPs of every name the profiler prints once
    (162 of 168; forward, backward and Optimizer.step#SGD.step appear as a CPU and a CUDA
    row), exactly, as int64; a row without allocations has 0, not a filler value."""
    _, g = fixed_grouped
    ka = _key_averages_by_name()
    twice = set(ka["key"][ka["key"].duplicated()]) | set(g["name"][g["name"].duplicated()])
    assert twice == {"forward", "backward", "Optimizer.step#SGD.step"}
    m = g[~g["name"].isin(twice)].merge(ka[~ka["key"].isin(twice)], left_on="name", right_on="key",
                                        suffixes=("", "_profiler"), validate="one_to_one")
    assert len(m) == 162
    for ours, theirs in [("count", "count_profiler"), ("cpu_memory_bytes", "cpu_memory_usage_bytes"),
                         ("self_cpu_memory_bytes", "self_cpu_memory_usage_bytes"),
                         ("device_memory_bytes", "device_memory_usage_bytes"),
                         ("self_device_memory_bytes", "self_device_memory_usage_bytes"), ("flops", "flops_profiler")]:
        assert g[ours].dtype == np.int64, ours
        assert (m[ours] == m[theirs]).all(), (ours, m.loc[m[ours] != m[theirs], ["name", ours, theirs]].head())
    # rows with no allocation at all exist and read 0 (the profiler prints them blank or 0)
    assert ((m["cpu_memory_usage_bytes"] == 0) & (m["device_memory_usage_bytes"] == 0)).sum() > 50


def test_columns_order_and_index(fixed_grouped):
    """The documented columns in order, a fresh 0..n-1 index, sorted by self device time,
    then self host time, largest first (key_averages' table sorted by self CUDA time)."""
    _, g = fixed_grouped
    assert g.columns.tolist() == REF_COLUMNS
    assert isinstance(g.index, pd.RangeIndex) and g.index.start == 0 and g.index.step == 1
    d, h = g["device_self_ns"].to_numpy(), g["host_self_ns"].to_numpy()
    assert (d[:-1] >= d[1:]).all()
    tie = d[:-1] == d[1:]
    assert (h[:-1][tie] >= h[1:][tie]).all() and tie.any()
    assert g["name"].iloc[0] == _key_averages_by_name().sort_values("self_device_time_total_us", ascending=False)["key"].iloc[0]
    for c in REF_COLUMNS[2:12]:
        assert g[c].dtype == np.int64, c


def test_default_is_by_name_and_a_wrong_key_is_named(fixed_grouped):
    t, g = fixed_grouped
    pd.testing.assert_frame_equal(G.group_ops(t, events=None), g)
    with pytest.raises(ValueError, match=r"by must be 'name', 'input_shape' or 'stack', not 'shape'"):
        G.group_ops(t, by="shape")


def test_without_gpu_rows_the_host_rows_are_unchanged(fixed_grouped):
    """include_gpu=False leaves out the CUDA rows (kernels, memcpy, memset) only."""
    t, g = fixed_grouped
    host = G.group_ops(t, include_gpu=False)
    assert set(host["device_type"]) == {"CPU"} and set(g["device_type"]) == {"CPU", "CUDA"}
    cols = ["name", "count", "host_total_ns", "host_self_ns", "device_total_ns", "device_self_ns"]
    a = host[cols].sort_values("name").reset_index(drop=True)
    b = g.loc[g["device_type"] == "CPU", cols].sort_values("name").reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


def test_the_python_frames_rule_travels_with_the_table(fixed_grouped):
    t, g = fixed_grouped
    assert g.attrs["python_frames_rule"] == t.meta["python_frames_rule"]
    assert "Python frames" in g.attrs["python_frames_rule"]


def test_every_grouping_keeps_every_call_and_every_ns(fixed_grouped):
    """By name, by input shape and by stack are three cuts of the same events: counts and
    self times add up to the same totals (no event dropped for a missing shape or stack)."""
    t, g = fixed_grouped
    totals = g[["count", "host_self_ns", "device_self_ns"]].sum()
    for by in ("input_shape", "stack"):
        other = G.group_ops(t, by=by)
        pd.testing.assert_series_equal(other[["count", "host_self_ns", "device_self_ns"]].sum(), totals, check_names=False)
        key = {"input_shape": "input_shapes", "stack": "stack"}[by]
        assert other[key].isna().sum() == 0
    # and the CUDA rows' self time is all the GPU time of the window's launches
    cuda = g[g["device_type"] == "CUDA"]
    assert cuda["count"].sum() == len(t.gpu) and cuda["device_self_ns"].sum() == int(t.gpu["dur_ns"].sum())


# -- 1 December, the survivors of the whole-module run: each test calls group_ops itself -----
# (mutmut credits a module fixture's analysis to the first test that uses it, so the tests
# above, which read ``fixed``, were never run against most of group_ops' mutants.)

def _paper_group_trace(tmp_path):
    """A hand-built trace, thread (1, 1), times in µs:
    aten::b [0, 10] launches kb (4 µs on the GPU) by cudaLaunchKernel [2, 3];
    aten::a [20, 30] launches ka (4 µs) by cudaLaunchKernel [22, 23];
    aten::c [40, 45] with input [[4]] and aten::c [50, 55] with input [[5]], no launch.
    a and b have the same figures, and so do ka and kb: ties, b and kb first in time."""
    from kitlib.readers.trace import load_trace
    ev = []
    for name, ts, dur, ext, dims in (("aten::b", 0, 10, 1, [[2, 3]]), ("aten::a", 20, 10, 2, [[2, 3]]),
                                     ("aten::c", 40, 5, 3, [[4]]), ("aten::c", 50, 5, 4, [[5]])):
        ev.append(event("cpu_op", name, ts, dur, **{"External id": ext, "Input Dims": dims}))
    for ts, ext, corr, kernel, kts in ((2, 1, 101, "kb", 100), (22, 2, 102, "ka", 110)):
        ev.append(launch_event("cudaLaunchKernel", ts, corr, 1, **{"External id": ext}))
        ev.append(gpu_event("kernel", kernel, kts, 4, corr, **{"External id": ext}))
    return load_trace(write_trace(tmp_path / "paper.json", ev))


#: group_ops(by="name") of the paper trace, worked by hand (ns): a/b total 10 µs, self 10 - 1
#: (the launch is a child) = 9 µs, their kernel's 4 µs as self and total device time; each
#: kernel a CUDA row of its own; aten::c 2 calls, 2 x 5 µs; the two launches 2 x 1 µs. Sorted by
#: device self then host self time, largest first; ties (b/a, kb/ka) in the order they first
#: appear (b at 0 µs before a at 20 µs, kb at 100 µs before ka at 110 µs), not by name.
_PAPER_BY_NAME = [
    # name, device_type, count, host_total, host_self, device_total, device_self
    ("aten::b", "CPU", 1, 10_000, 9_000, 4_000, 4_000),
    ("aten::a", "CPU", 1, 10_000, 9_000, 4_000, 4_000),
    ("kb", "CUDA", 1, 0, 0, 4_000, 4_000),
    ("ka", "CUDA", 1, 0, 0, 4_000, 4_000),
    ("aten::c", "CPU", 2, 10_000, 10_000, 0, 0),
    ("cudaLaunchKernel", "CPU", 2, 2_000, 2_000, 0, 0),
]


def _expected_group_ops(rows, shapes=None):
    cols = ["name", "device_type", "count", "host_total_ns", "host_self_ns", "device_total_ns", "device_self_ns"]
    df = pd.DataFrame(rows, columns=cols)
    if shapes is not None:
        df.insert(2, "input_shapes", shapes)
    for c in cols[2:]:
        df[c] = df[c].astype(np.int64)
    df["host_per_call_ns"] = df["host_total_ns"] / df["count"]
    df["device_per_call_ns"] = df["device_total_ns"] / df["count"]
    return df


def _same_table(got, want):
    assert got.columns.tolist() == want.columns.tolist()
    assert isinstance(got.index, pd.RangeIndex) and got.index.equals(pd.RangeIndex(len(want)))
    for c in want.columns:
        assert got[c].tolist() == want[c].tolist(), c
        if want[c].dtype.kind in "if":
            assert got[c].dtype == want[c].dtype, c


def test_group_ops_rows_order_and_ties_on_paper(tmp_path):
    """Every cell of group_ops on the paper trace, by name and by input shape, with and
    without the GPU rows; the fresh 0..n-1 index; ties keep their first-appearance order."""
    tr = _paper_group_trace(tmp_path)
    _same_table(G.group_ops(tr), _expected_group_ops(_PAPER_BY_NAME))
    _same_table(G.group_ops(tr, include_gpu=False), _expected_group_ops([r for r in _PAPER_BY_NAME if r[1] == "CPU"]))
    # by input shape: aten::c splits into its two shapes (1 call, 5 µs each, [[4]] first in time);
    # GPU rows and launches have no shapes: "[]"
    rows = _PAPER_BY_NAME[:4] + [("aten::c", "CPU", 1, 5_000, 5_000, 0, 0)] * 2 + _PAPER_BY_NAME[5:]
    shapes = ["[[2, 3]]", "[[2, 3]]", "[]", "[]", "[[4]]", "[[5]]", "[]"]
    _same_table(G.group_ops(tr, by="input_shape"), _expected_group_ops(rows, shapes))


def test_group_ops_carries_the_traces_python_frames_rule(tmp_path, ref_trace):
    """attrs["python_frames_rule"] is the rule the trace was read with (its meta), on the
    paper trace (no Python frames) and on fixed_batch (frames of torch <= 2.11: not children)."""
    tr = _paper_group_trace(tmp_path)
    g = G.group_ops(tr)
    assert g.attrs == {"python_frames_rule": tr.meta["python_frames_rule"]}
    assert g.attrs["python_frames_rule"].startswith("no Python frames in the trace")
    fb = ref_trace("fixed_batch")
    g = G.group_ops(fb, include_gpu=False)
    assert g.attrs == {"python_frames_rule": fb.meta["python_frames_rule"]}
    assert "Python frames" in g.attrs["python_frames_rule"] and "not children" in g.attrs["python_frames_rule"]


def test_memory_and_flops_per_event_on_paper(tmp_path):
    """_with_memory_and_flops (what group_ops and shape_table sum) on a hand-built trace:
    aten::mm [0, 10] µs with inputs [2, 3] x [3, 4], and inside it aten::empty [2, 4] µs;
    two CUDA memory records (Device Type 1): +512 B at 3 µs (inside both) and -128 B at
    8 µs (inside aten::mm only); no CPU record.
    By hand: aten::empty CUDA Mem 512, self 512; aten::mm CUDA Mem 512 - 128 = 384, self
    384 - 512 (its child's) = -128; CPU Mem 0 everywhere (no CPU record: 0, not missing);
    FLOPs of mm = 2 x 2 x 3 x 4 = 48 (the profiler's formula), of empty 0. All int64."""
    from kitlib.analyses.events import op_events
    from kitlib.readers.trace import load_trace

    def mem(ts, nbytes, total):
        return memory_event(ts, nbytes, 4096, allocated=total, reserved=2048)
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10,
           "args": {"External id": 1, "Input Dims": [[2, 3], [3, 4]]}},
          {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 2, "dur": 2,
           "args": {"External id": 2, "Input Dims": []}},
          mem(3, 512, 512), mem(8, -128, 384)]
    path = tmp_path / "memory.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    tr = load_trace(path)
    w = G._with_memory_and_flops(tr, op_events(tr)).set_index("name")
    want = {"cpu_memory_bytes": [0, 0], "self_cpu_memory_bytes": [0, 0], "device_memory_bytes": [384, 512],
            "self_device_memory_bytes": [-128, 512], "flops": [48, 0]}
    for c, values in want.items():
        assert w.loc[["aten::mm", "aten::empty"], c].tolist() == values, c
        assert w[c].dtype == np.int64, c
    # and the same figures in group_ops' rows
    g = G.group_ops(tr).set_index("name")
    for c, values in want.items():
        assert g.loc[["aten::mm", "aten::empty"], c].tolist() == values, c
        assert g[c].dtype == np.int64, c


def test_shape_table_of_an_operator_that_never_ran(ref_trace):
    """The docstring's promise: an empty table with the usual columns, not an error (a CPU
    rank trace has no cudnn convolution; no trace has ``aten::no_such_op``)."""
    t = ref_trace("ranks_balanced/rank0")
    for name in ("aten::cudnn_convolution", "aten::no_such_op"):
        e = G.shape_table(t, name)
        assert e.empty and list(e.columns) == ["input_shapes", "first_input", "tensors", "count", "device_total_ns",
                                               "device_per_call_ns", "device_share", "host_total_ns"]
        assert str(e["first_input"].dtype) == str(e["tensors"].dtype) == str(e["input_shapes"].dtype)


# ================================================================================================
# grouping's remaining figures pinned: the profiler's own rows read into a table
# (key_averages_table), the side-by-side comparison (compare_with_profiler) and lesson 05's
# convolution inputs (conv_inputs, memory_layout). Lesson 06's trace-size and capture-cost
# tables (attribution_bytes, capture_cost) are pinned in test_grouping.py's last section.
#
# Every expected value is read by the test itself from the tool's own file (the bundles'
# key_averages.json.gz, the trace JSON, manifest.json, step_times.json) or worked on paper;
# none is kitlib's own output pasted in.
# ================================================================================================

TIMES = {"host_total_ns": "cpu_time_total_us", "host_self_ns": "self_cpu_time_total_us",
         "device_total_ns": "device_time_total_us", "device_self_ns": "self_device_time_total_us"}
MEMORY = {"cpu_memory_bytes": "cpu_memory_usage_bytes", "self_cpu_memory_bytes": "self_cpu_memory_usage_bytes",
          "device_memory_bytes": "device_memory_usage_bytes",
          "self_device_memory_bytes": "self_device_memory_usage_bytes", "flops": "flops"}
KA_COLUMNS = ["name", "device_type", "input_shapes", "stack", "count", *TIMES, *MEMORY]


def _key_averages_json():
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
    rows = _key_averages_json()[key]
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


def _expected_comparison(keys, kit, prof, only_in, cols=CMP_COLS):
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
    want = pd.DataFrame(_expected_comparison(
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
    want = pd.DataFrame(_expected_comparison(
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
    rows = _key_averages_json()["by_stack_5"]
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


def _paper_ops():
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
    tr = _paper_ops()
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
    rows = _key_averages_json()["by_input_shape"]
    bw = next(r["input_shapes"] for r in rows if r["key"] == "aten::convolution_backward")
    assert bw.startswith("[[128, 2048, 7, 7], [128, 512, 7, 7], [2048, 512, 1, 1], []")
    assert G._tensors_label(bw) == "[128, 2048, 7, 7] × [128, 512, 7, 7]"
    none = [r["input_shapes"] for r in rows if r["input_shapes"] == "[]"]
    assert len(none) == 99 and {G._tensors_label(s) for s in none} == {"[]"}
    assert G._tensors_label("[[], [], []]") == "[] (0-d scalar)"
    assert G._tensors_label("[[2, 3], [], [3, 4], [4]]") == "[2, 3] × [3, 4]"
    assert G._tensors_label("[[5], []]") == "[5]"
    assert G._tensors_label("(none)") == "(none)"


# --- moved from the docstrings of kitlib/analyses/grouping.py (issue 39) --------------------

def test_key_averages_table_and_compare_docstring_examples():
    from kitlib.analyses.grouping import compare_with_profiler, group_ops, key_averages_table
    from kitlib.model.examples import tiny_trace
    rows = [{"key": "aten::relu", "count": 1, "cpu_time_total_us": 0.3, "self_cpu_time_total_us": 0.3,
             "device_time_total_us": 0.4, "self_device_time_total_us": 0.0},
            {"key": "relu_kernel", "count": 1, "cpu_time_total_us": 0, "self_cpu_time_total_us": 0,
             "device_time_total_us": 0.4, "self_device_time_total_us": 0.4}]
    t = key_averages_table(rows)[["name", "device_type", "count", "host_total_ns", "device_total_ns"]]
    assert t.values.tolist() == [["aten::relu", "CPU", 1, 300, 400], ["relu_kernel", "CUDA", 1, 0, 400]]
    c = compare_with_profiler(group_ops(tiny_trace()), rows[:1])
    assert c.columns.tolist()[:5] == ["name", "device_type", "count_kitlib", "host_total_ns_kitlib",
                                      "host_self_ns_kitlib"]
    assert c["name"].tolist() == ["ProfilerStep*", "aten::add", "aten::relu", "cudaLaunchKernel", "relu_kernel"]
    assert c["count_kitlib"].tolist() == [1, 1, 1, 1, 1]
    assert c["count_profiler"].fillna(-1).tolist() == [-1, -1, 1.0, -1, -1]
    assert c["host_total_ns_profiler"].fillna(-1).tolist() == [-1, -1, 300.0, -1, -1]


def test_capture_cost_docstring_example():
    from kitlib.analyses.grouping import capture_cost
    from kitlib.readers.bundle import open_capture
    c = capture_cost({"full": open_capture("profiler_5step")})
    assert c.index.tolist() == ["full"]
    assert c.loc["full", "steps"] == 5 and c.loc["full", "trace_gzip_bytes"] == 1342993
    assert round(float(c.loc["full", "events_per_step"]), 1) == 14701.4
