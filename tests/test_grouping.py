"""key_averages rebuilt from the trace, checked against the profiler's own rows; call sites."""
import pytest

import kitlib
from kitlib.analyses import callsites as C
from kitlib.analyses import events as E
from kitlib.analyses import grouping as G
from kitlib.analyses.chain import chain, first_op

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
import gzip
import hashlib
import json
import orjson
import math
import re
import zlib
from pathlib import Path

from kitlib.errors import TraceFormatError

_REF = Path(__file__).resolve().parent.parent / "data" / "reference"
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
        with gzip.open(_REF / name / "trace.json.gz", "rb") as f:
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


def _rows(t):
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
    assert _rows(t) == _expected_sizes(texts)
    assert json.dumps(doc) == before                                  # the input is left as it was


def test_attribution_bytes_of_a_bare_event_list_and_what_it_refuses():
    # a trace that is a bare list of events (the Chrome format allows it): each variant is a bare list
    t = G.attribution_bytes(list(_EVENTS))
    assert list(t.index) == _ROWS
    assert _rows(t) == _expected_sizes({k: _compact(evs) for k, evs in _VARIANTS.items()})
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
    man = {n: json.loads((_REF / n / "manifest.json").read_text()) for n in ("profiler_5step", "cold_start_8step")}
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
    st = json.loads((_REF / "profiler_5step" / "step_times.json").read_text())["step_ms_profiled_all_attribution"]
    sched = man["profiler_5step"]["recipe"]["schedule"]
    assert (len(st), sched["wait"] + sched["warmup"]) == (7, 2)
    active = sorted(st[2:])                  # 80.36994, 66.048708, 61.461497, 50.364752, 51.903849
    assert t.loc["full", "median_step_ms"] == active[2] == 61.461497
    med = t.loc["cold", "median_step_ms"]
    assert isinstance(med, float) and math.isnan(med)
    for label, n, name in (("full", n_full, "profiler_5step"), ("cold", n_cold, "cold_start_8step")):
        size = man[name]["files"]["trace.json.gz"]["bytes"]          # 1,342,993 and 1,232,054
        assert size == (_REF / name / "trace.json.gz").stat().st_size
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
MEMORY_ROW = __import__("pathlib").Path(__file__).resolve().parent / "data" / "memory-row"


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
