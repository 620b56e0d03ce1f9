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


def test_attribution_bytes_and_cost():
    from kitlib.readers.files import read_json_file
    cap = kitlib.open_capture("profiler_5step")
    sizes = G.attribution_bytes(read_json_file(cap.file("trace.json.gz")))
    assert sizes.loc["as recorded", "events"] == 73507
    assert sizes.loc["as recorded", "events"] - sizes.loc["without Python frames (with_stack)", "events"] == 22977
    assert (sizes["gzip_bytes"].iloc[1:] < sizes.loc["as recorded", "gzip_bytes"]).all()
    cost = G.capture_cost({"cold": kitlib.open_capture("cold_start_8step"), "full": cap})
    assert cost.loc["cold", "steps"] == 8 and cost.loc["full", "steps"] == 5
    assert cost.loc["full", "median_step_ms"] == pytest.approx(61.461497)


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
