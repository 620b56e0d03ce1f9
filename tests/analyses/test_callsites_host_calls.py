"""Call sites (lesson 06) and CUDA API time inside a label (lesson 00), worked on paper.

Each tiny trace below is written event by event (µs, as the profiler writes them), and every
figure asserted is worked out by hand from those events: which Python frames enclose each
operator, which of them is the learner's, which module, and the sums per call site. None of
the expected values comes from kitlib. Issue 16 (mutation testing): these pin the figures of
``kitlib.analyses.callsites`` and ``kitlib.analyses.host_calls``.
"""
import json
from types import SimpleNamespace

import pandas as pd
import pytest

from kitlib.analyses import callsites as C
from kitlib.analyses.chain import chain
from kitlib.analyses.events import op_events
from kitlib.analyses.host_calls import cuda_api_time_in_label
from kitlib.errors import KitError
from kitlib.readers.trace import load_trace

from support.events import event, gpu_event, launch_event


def _py(name, ts, dur, pyid, parent, tid):
    return event("python_function", name, ts, dur, tid=tid, **{"Python id": pyid, "Python parent id": parent})


def _op(name, ts, dur, ext, tid):
    return event("cpu_op", name, ts, dur, tid=tid, **{"External id": ext})


def _launch_and_kernel(ts, ext, corr, kernel_ts, kernel_dur):
    """A cudaLaunchKernel on thread (1, 1) and its kernel ``k<corr>`` on stream 7."""
    return [launch_event("cudaLaunchKernel", ts, corr, 1, **{"External id": ext}),
            gpu_event("kernel", f"k{corr}", kernel_ts, kernel_dur, corr, **{"External id": ext})]


# thread 1: the learner's step, a module tree, conv2d (one 5 µs kernel) and relu (7 + 2 µs) inside
# Sequential_0, add (4 µs) outside any module
P1, P2 = "train.py(10): <module>", "train.py(3): step"
P3, P4, P7 = "nn.Module: Sequential_0", "nn.Module: Conv2d_0", "nn.Module: ReLU_1"
P5 = "torch/nn/modules/conv.py(534): _conv_forward"
P6, P8 = "<built-in method conv2d of type object at 0x1>", "<built-in method relu of type object at 0x1>"
# thread 2: no frame is the learner's (frozen, dist-packages, site-packages, stdlib package, C)
Q1, Q2 = "<frozen runpy>(198): _run_module_as_main", "/usr/lib/python3/dist-packages/foo/bar.py(5): g"
Q3, Q4 = "/opt/venv/lib/python3.11/site-packages/baz.py(7): h", "logging/__init__.py(1500): info"
Q5 = "<built-in function mul>"
# thread 4: the learner's main() under autograd's backward frame, a stdlib module and a stdlib package
R1, R2 = "train.py(20): main", "torch/autograd/__init__.py(250): backward"
R3, R4 = "typing.py(100): inner", "logging/__init__.py(1500): info"


def _sites_trace(tmp_path):
    ev = [_py(P1, 0, 200, 1, 0, 1), _py(P2, 1, 190, 2, 1, 1), _py(P3, 2, 100, 3, 2, 1), _py(P4, 3, 40, 4, 3, 1),
          _py(P5, 4, 38, 5, 4, 1), _py(P6, 5, 36, 6, 5, 1), _op("aten::conv2d", 6, 30, 1, 1),
          *_launch_and_kernel(10, 1, 101, 300, 5),
          _py(P7, 50, 40, 7, 3, 1), _py(P8, 51, 38, 8, 7, 1), _op("aten::relu", 52, 30, 2, 1),
          *_launch_and_kernel(60, 2, 102, 310, 7), *_launch_and_kernel(70, 2, 103, 320, 2),
          _op("aten::add", 150, 10, 3, 1), *_launch_and_kernel(151, 3, 104, 330, 4),
          _py(Q1, 0, 100, 20, 0, 2), _py(Q2, 1, 98, 21, 20, 2), _py(Q3, 2, 96, 22, 21, 2), _py(Q4, 3, 94, 23, 22, 2),
          _py(Q5, 4, 92, 24, 23, 2), _op("aten::mul", 5, 20, 4, 2),
          _op("aten::sub", 0, 10, 5, 3),
          _py(R1, 0, 100, 30, 0, 4), _py(R2, 1, 98, 31, 30, 4), _py(R3, 2, 96, 32, 31, 4), _py(R4, 3, 94, 33, 32, 4),
          _op("aten::div", 4, 10, 6, 4)]
    path = tmp_path / "sites.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    return load_trace(path)


STEP = ("train.py(3): step", "train.py", 3, "step")
# per operator: stack (innermost first), user_frame, file, line, function, module, module_type, module_path
EXPECTED = {
    "aten::sub": ((), None, None, None, None, None, None, None),
    "aten::mul": ((Q5, Q4, Q3, Q2, Q1), Q4, "logging/__init__.py", 1500, "info", None, None, None),
    "aten::div": ((R4, R3, R2, R1), R1, "train.py", 20, "main", None, None, None),
    "aten::conv2d": ((P6, P5, P4, P3, P2, P1), *STEP, "Conv2d_0", "Conv2d", "Sequential_0 › Conv2d_0"),
    "aten::relu": ((P8, P7, P3, P2, P1), *STEP, "ReLU_1", "ReLU", "Sequential_0 › ReLU_1"),
    "aten::add": ((P2, P1), *STEP, None, None, None),
}
SITE_COLS = ["stack", "user_frame", "file", "line", "function", "module", "module_type", "module_path"]


def _none(v):
    return None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else v


def test_parse_frame_and_user_frame_rules():
    assert C.parse_frame("torchvision/models/resnet.py(266): _forward_impl") == {
        "file": "torchvision/models/resnet.py", "line": 266, "function": "_forward_impl"}
    assert C.parse_frame(P6) == {"file": None, "line": None, "function": P6}
    assert C.parse_frame("nn.Module: Conv2d_0") == {"file": None, "line": None, "function": "nn.Module: Conv2d_0"}
    assert C.parse_frame(None) == {"file": None, "line": None, "function": None}
    assert C.parse_frame("") == {"file": None, "line": None, "function": ""}
    user = {"train.py(3): step": True, "mylib/models.py(12): build": True,
            "torchvision/models/resnet.py(266): _forward_impl": True,
            P5: False, P6: False, P3: False, Q1: False, "<frozen os>(680): __getitem__": False,
            Q2: False, Q3: False, "C:/env/Lib/site-packages/x.py(1): f": False,
            Q4: False, "logging\\__init__.py(1500): info": False,       # a Windows path of the stdlib
            "typing.py(100): inner": False, "copy.py(1): deepcopy": False, "enum.py(700): __call__": False}
    assert {f: C.is_user_frame(f) for f in user} == user
    assert C.is_user_frame("torchvision/models/resnet.py(266): _forward_impl", ("torch/", "torchvision/")) is False
    assert C.is_user_frame("train.py(3): step", ("torch/", "train.py")) is False


def test_callsites_every_column_worked_on_paper(tmp_path):
    """Thread 1: conv2d's innermost user frame is ``train.py(3): step`` (the torch frame, the C
    frame and the module pseudo-frames are not the learner's); its module is the innermost
    pseudo-frame, the path outermost first. Thread 2 has no user frame: the innermost frame with
    a source line stands in (the stdlib package ``logging``, not the C frame ``mul``). Thread 4:
    ``typing.py`` and ``logging/`` are stdlib, autograd's ``backward`` frame is kept in the
    stack (callsites asks for unfiltered stacks). Thread 3 has no Python frame."""
    tr = _sites_trace(tmp_path)
    ev = op_events(tr, chain(tr))
    t = C.callsites(tr, ev)
    assert len(t) == len(ev) and t["name"].tolist() == ev["name"].tolist()
    assert list(t.columns) == list(ev.columns) + SITE_COLS
    assert str(t["line"].dtype) == "Int64"
    ops = t[t["source"] == "ops"].set_index("name")
    assert sorted(ops.index) == sorted(EXPECTED)
    for name, want in EXPECTED.items():
        assert tuple(_none(ops.loc[name, c]) for c in SITE_COLS) == want, name
    # each launch has the call site of the operator around it
    la = t[t["source"] == "launches"].sort_values("start_ns")
    assert la["start_ns"].tolist() == [10_000, 60_000, 70_000, 151_000]
    for (_, r), op in zip(la.iterrows(), ["aten::conv2d", "aten::relu", "aten::relu", "aten::add"]):
        assert tuple(_none(r[c]) for c in SITE_COLS) == EXPECTED[op]
    # the events given are the rows returned: only the operators, in the order given
    sub = ev[ev["source"] == "ops"].iloc[::-1]
    t2 = C.callsites(tr, sub)
    assert t2["name"].tolist() == sub["name"].tolist()
    assert [_none(v) for v in t2["user_frame"]] == [EXPECTED[n][1] for n in sub["name"]]
    # without the table's events: computed; with torchvision-like internal prefixes
    assert C.callsites(tr)["name"].tolist() == ev["name"].tolist()
    mine = C.callsites(tr, ev, internal=("torch/", "train.py"))
    assert _none(mine.loc[mine["name"] == "aten::conv2d", "user_frame"].iloc[0]) == P5
    assert _none(mine.loc[mine["name"] == "aten::div", "user_frame"].iloc[0]) == R4   # innermost source line


def test_callsites_of_a_trace_without_python_frames(tmp_path):
    """Recorded without ``with_stack``: no stack, no call site, no module; ``line`` stays Int64."""
    path = tmp_path / "nostack.json"
    path.write_text(json.dumps({"traceEvents": [_op("aten::sub", 0, 10, 5, 3), _op("aten::mul", 20, 10, 6, 3)]}))
    tr = load_trace(path)
    t = C.callsites(tr)
    assert t["name"].tolist() == ["aten::sub", "aten::mul"]
    assert str(t["line"].dtype) == "Int64" and t["line"].isna().all()
    for c in SITE_COLS:
        assert [_none(v) for v in t[c]] == ([()] * 2 if c == "stack" else [None] * 2), c
    got = C.group_by_callsite(tr)
    assert [tuple(r) for r in got.itertuples(index=False)] == [("(none)", 2, 0, 0, 20_000)]


def test_callsite_of_worked_on_paper(tmp_path):
    tr = _sites_trace(tmp_path)
    t = C.callsites(tr, op_events(tr, chain(tr)))
    row = {n: int(tr.ops.index[tr.ops["name"] == n][0]) for n in EXPECTED}
    keys = ["name", "user_frame", "file", "line", "function", "module", "module_type", "module_path", "stack"]
    for name, want in EXPECTED.items():
        got = C.callsite_of(tr, row[name], t)
        assert list(got) == keys
        assert got == {"name": name, **dict(zip(SITE_COLS, want))}, name
        assert got["line"] is None or type(got["line"]) is int
    assert C.callsite_of(tr, row["aten::conv2d"])["line"] == 3
    # a table made with other internal prefixes is used as given; internal= reaches callsites
    mine = C.callsites(tr, internal=("torch/", "train.py"))
    assert C.callsite_of(tr, row["aten::conv2d"], mine)["user_frame"] == P5
    assert C.callsite_of(tr, row["aten::conv2d"], internal=("torch/", "train.py"))["user_frame"] == P5
    assert C.callsite_of(tr, row["aten::conv2d"], mine)["line"] == 534
    with pytest.raises(KeyError, match="row 10000 is not an operator or annotation of this trace"):
        C.callsite_of(tr, 10_000, t)
    py_row = int(tr.ops.index[tr.ops["name"] == P2][0])        # a Python frame is not a host event
    with pytest.raises(KeyError, match=f"row {py_row} is not an operator"):
        C.callsite_of(tr, py_row, t)


def test_kernel_callsites_worked_on_paper(tmp_path):
    tr = _sites_trace(tmp_path)
    c = chain(tr)
    t = C.callsites(tr, op_events(tr, c))
    cols = ["user_frame", "module", "module_type", "module_path"]
    want = {"k101": EXPECTED["aten::conv2d"], "k102": EXPECTED["aten::relu"], "k103": EXPECTED["aten::relu"],
            "k104": EXPECTED["aten::add"]}
    for k in (C.kernel_callsites(tr, t, c), C.kernel_callsites(tr)):
        assert list(k.columns) == list(c.columns) + cols
        assert k.index.equals(pd.RangeIndex(4)) and k["gpu_name"].tolist() == ["k101", "k102", "k103", "k104"]
        for _, r in k.iterrows():
            w = want[r["gpu_name"]]
            assert [_none(r[x]) for x in cols] == [w[1], w[5], w[6], w[7]], r["gpu_name"]
    # the chain and table given are used as given
    part = C.kernel_callsites(tr, t, c.iloc[[3, 0]])
    assert part["gpu_name"].tolist() == ["k104", "k101"] and part.index.equals(pd.RangeIndex(2))
    assert [_none(v) for v in part["module"]] == [None, "Conv2d_0"]
    mine = C.callsites(tr, internal=("torch/", "train.py"))
    for k in (C.kernel_callsites(tr, mine, c), C.kernel_callsites(tr, internal=("torch/", "train.py"))):
        # conv's innermost source line is the torch frame; relu and add fall back to train.py(3)
        assert [_none(v) for v in k["user_frame"]] == [P5, P2, P2, P2]


GROUP_COLS = ["ops", "gpu_events", "device_self_ns", "host_self_ns"]


@pytest.mark.parametrize("by,rows", [
    # worked by hand: host self time = duration - launches inside (1 µs each); device time of the
    # kernels each operator launched; groups at equal device time keep the order they first start
    (("user_frame",), [("train.py(3): step", 7, 4, 18_000, 70_000), ("(none)", 1, 0, 0, 10_000),
                       ("train.py(20): main", 1, 0, 0, 10_000), (Q4, 1, 0, 0, 20_000)]),
    (("module",), [("ReLU_1", 3, 2, 9_000, 30_000), ("Conv2d_0", 2, 1, 5_000, 30_000),
                   ("(none)", 5, 1, 4_000, 50_000)]),
    (("module_type",), [("ReLU", 3, 2, 9_000, 30_000), ("Conv2d", 2, 1, 5_000, 30_000),
                        ("(none)", 5, 1, 4_000, 50_000)]),
    (("user_frame", "name"), [("train.py(3): step", "aten::relu", 1, 2, 9_000, 28_000),
                              ("train.py(3): step", "aten::conv2d", 1, 1, 5_000, 29_000),
                              ("train.py(3): step", "aten::add", 1, 1, 4_000, 9_000),
                              ("(none)", "aten::sub", 1, 0, 0, 10_000),
                              ("train.py(20): main", "aten::div", 1, 0, 0, 10_000),
                              (Q4, "aten::mul", 1, 0, 0, 20_000),
                              ("train.py(3): step", "cudaLaunchKernel", 4, 0, 0, 4_000)]),
])
def test_group_by_callsite_worked_on_paper(tmp_path, by, rows):
    tr = _sites_trace(tmp_path)
    t = C.callsites(tr, op_events(tr, chain(tr)))
    for got in (C.group_by_callsite(tr, by=by, table=t), C.group_by_callsite(tr, by=by)):
        assert list(got.columns) == list(by) + GROUP_COLS
        assert got.index.equals(pd.RangeIndex(len(rows)))
        assert [str(got[c].dtype) for c in GROUP_COLS] == ["int64"] * 4
        assert [tuple(r) for r in got.itertuples(index=False)] == rows


def test_group_by_callsite_uses_the_table_and_prefixes_given(tmp_path):
    tr = _sites_trace(tmp_path)
    t = C.callsites(tr, op_events(tr, chain(tr)))
    default = C.group_by_callsite(tr)
    assert default["user_frame"].tolist() == ["train.py(3): step", "(none)", "train.py(20): main", Q4]
    ops_only = C.group_by_callsite(tr, table=t[t["source"] == "ops"])      # no launch rows: 3 fewer µs
    assert [tuple(r) for r in ops_only.itertuples(index=False)][0] == ("train.py(3): step", 3, 4, 18_000, 66_000)
    for got in (C.group_by_callsite(tr, internal=("torch/", "train.py")),
                C.group_by_callsite(tr, table=C.callsites(tr, internal=("torch/", "train.py")))):
        # with train.py internal: conv2d and its launch fall back to the torch frame, relu/add to
        # train.py(3) (their innermost source line), div to logging/ (its innermost source line)
        assert [tuple(r) for r in got.itertuples(index=False)] == [
            ("train.py(3): step", 5, 3, 13_000, 40_000), (P5, 2, 1, 5_000, 30_000),
            ("(none)", 1, 0, 0, 10_000), (Q4, 2, 0, 0, 30_000)]


def _api(name, ts, dur, corr, tid=1, cat="cuda_runtime"):
    return event(cat, name, ts, dur, tid=tid, correlation=corr)


def _ann(name, ts, dur, tid=1):
    return event("user_annotation", name, ts, dur, tid=tid)


def test_cuda_api_time_in_label_worked_on_paper(tmp_path):
    """Steps [0, 100) and [100, 200) µs. forward #1 [10, 50): the calls at 10 (its first µs, 5 µs),
    20 (memset, 3 µs) and 30 (driver launch, 2 µs) count; the one at 50 (its end) does not, nor
    one on another thread. forward #2 starts at 100, where step 1 ends and step 2 begins: step 2.
    forward #3 [250, 260) lies in no step. forward #4 lasts 1 ns, with a call at its start."""
    ev = [_ann("ProfilerStep#1", 0, 100), _ann("ProfilerStep#2", 100, 100),
          _ann("forward", 10, 40), _api("cudaLaunchKernel", 10, 5, 1), _api("cudaMemsetAsync", 20, 3, 2),
          _api("cuLaunchKernel", 30, 2, 3, cat="cuda_driver"), _api("cudaLaunchKernel", 50, 2, 4),
          _api("cudaLaunchKernel", 35, 4, 5, tid=2),
          _ann("forward", 100, 20), _api("cudaLaunchKernel", 110, 6, 6),
          _ann("forward", 250, 10), _api("cudaDeviceSynchronize", 255, 1, 7),
          _ann("forward", 300, 0.001), _api("cudaLaunchKernel", 300, 0.5, 8),
          _ann("backward", 400, 10)]
    path = tmp_path / "labels.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    tr = load_trace(path)
    got = cuda_api_time_in_label(tr, "forward")
    assert list(got.columns) == ["step", "tid", "label_ns", "cuda_api_ns", "cuda_api_calls", "launch_calls",
                                 "other_host_ns", "cuda_api_share"]
    assert [str(t) for t in got.dtypes] == ["Int64"] + ["int64"] * 6 + ["float64"]
    assert got["step"].tolist()[:2] == [1, 2] and got["step"].isna().tolist() == [False, False, True, True]
    assert got["tid"].tolist() == [1, 1, 1, 1]
    assert got["label_ns"].tolist() == [40_000, 20_000, 10_000, 1]
    assert got["cuda_api_ns"].tolist() == [10_000, 6_000, 1_000, 500]
    assert got["cuda_api_calls"].tolist() == [3, 1, 1, 1]
    assert got["launch_calls"].tolist() == [2, 1, 0, 1]
    assert got["other_host_ns"].tolist() == [30_000, 14_000, 9_000, -499]
    assert got["cuda_api_share"].tolist() == [0.25, 0.3, 0.1, 500.0]
    # a label without API calls inside: none counted, share 0
    assert cuda_api_time_in_label(tr, "backward")[["cuda_api_ns", "cuda_api_share"]].values.tolist() == [[0, 0.0]]


def test_cuda_api_time_in_label_names_the_missing_label(tmp_path):
    path = tmp_path / "labels.json"
    path.write_text(json.dumps({"traceEvents": [_ann("forward", 0, 10)]}))
    tr = load_trace(path)
    with pytest.raises(KitError) as e:
        cuda_api_time_in_label(tr, "backward")
    assert str(e.value) == f"{tr.path}: no 'backward' label (record_function) in this trace"
    bare = SimpleNamespace(ops=tr.ops)                   # an object without a path
    with pytest.raises(KitError) as e:
        cuda_api_time_in_label(bare, "backward")
    assert str(e.value) == "trace: no 'backward' label (record_function) in this trace"


# --- moved from the docstrings of kitlib/analyses/callsites.py (issue 39) -------------------

def test_callsites_docstring_examples_on_the_tiny_profile():
    from kitlib.analyses.callsites import callsite_of, callsites, is_user_frame, kernel_callsites
    from kitlib.model.examples import tiny_profile_doc
    from kitlib.readers.trace import trace_from_json
    assert is_user_frame("<built-in method conv2d>") is False
    tr = trace_from_json(tiny_profile_doc())
    c = callsites(tr)
    assert c["name"].tolist() == ["ProfilerStep#1", "forward", "aten::conv2d", "cudaLaunchKernel", "aten::relu",
                                  "cudaLaunchKernel"]
    assert c["user_frame"].isna().tolist() == [True] + [False] * 5 and c["module"].isna().tolist()[0]
    assert c["user_frame"].tolist()[1:] == ["model.py(5): forward"] * 5
    assert c["module"].tolist()[1:] == ["Net_0"] * 5
    conv = int(tr.ops.index[tr.ops["name"] == "aten::conv2d"][0])
    site = callsite_of(tr, conv)
    assert (site["file"], site["line"], site["function"], site["module_type"]) == ("model.py", 5, "forward", "Net")
    assert site["stack"] == ("model.py(5): forward", "nn.Module: Net_0", "train.py(10): <module>")
    k = kernel_callsites(tr)[["gpu_name", "user_frame", "module"]]
    assert k.values.tolist() == [["conv_kernel", "model.py(5): forward", "Net_0"],
                                 ["relu_kernel", "model.py(5): forward", "Net_0"]]
