"""Damaged torch.profiler traces: a kitlib error naming the file, the event and the problem,
or a load with the defect counted — never a bare exception, a silent empty table, or a
number turned wrong. And the analyses never raise a bare exception on what loaded.

Each case starts from a small real-schema trace (``tests/data/bugcases/graph-launch-step``)
and damages one thing, as found by seeded damage of the kit's recordings (issue 17).
"""
from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest

import kitlib
from kitlib.analyses import flops as F
from kitlib.analyses import grouping as G
from kitlib.analyses.chain import impossible_gpu_events
from kitlib.analyses.steps import step_measures
from kitlib.errors import KitError, KitFileError, TraceFormatError

BASE = json.loads((Path(__file__).resolve().parents[2] / "tests" / "data" / "bugcases" / "graph-launch-step" / "trace.json")
                  .read_text())


def _write_doc(tmp_path, doc, name="t.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return p


def _damaged(tmp_path, mutate):
    d = copy.deepcopy(BASE)
    mutate(d)
    return _write_doc(tmp_path, d)


def _first(d, cat):
    return next(e for e in d["traceEvents"] if e.get("cat") == cat)


def _analyse(tr):
    """Everything a lesson would run on a loaded trace."""
    kitlib.chain(tr)
    kitlib.lint(tr)
    G.group_ops(tr)
    G.group_ops(tr, by="input_shape")
    step_measures(tr)


REFUSED = [
    ("pid an object", lambda d: _first(d, "cpu_op").update(pid={"a": 1}), r"aten::mm.*'pid' that is a dict"),
    ("tid a list", lambda d: _first(d, "cpu_op").update(tid=[1]), r"'tid' that is a list"),
    ("tid missing", lambda d: [e.pop("tid", None) for e in d["traceEvents"]], r"has no 'tid'"),
    ("id at 2**63", lambda d: _first(d, "cpu_op")["args"].update({"External id": 2 ** 63}),
     r"'External id' = '9223372036854775808' does not fit in a 64-bit integer"),
    ("correlation as text", lambda d: _first(d, "kernel")["args"].update({"correlation": "abc"}),
     r"gemm_kernel_a.*'correlation' = 'abc' is a str, not an integer id"),
    ("base time as text", lambda d: d.update(baseTimeNanoseconds="x"), r"'baseTimeNanoseconds' is 'x'"),
    ("name a number", lambda d: _first(d, "user_annotation").update(name=5), r"'name' that is a int, not text"),
    ("every category lost", lambda d: [e.pop("cat", None) for e in d["traceEvents"]],
     r"no torch.profiler events|none of its"),
]


@pytest.mark.parametrize("what,mutate,message", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_with_the_file_and_the_problem(tmp_path, what, mutate, message):
    p = _damaged(tmp_path, mutate)
    with pytest.raises(TraceFormatError, match=message) as e:
        kitlib.load_trace(p)
    assert str(p) in str(e.value)


def test_loaded_with_the_defect_counted(tmp_path):
    # metadata whose args are a list or a string: names lost, events kept, count said
    p = _damaged(tmp_path, lambda d: d["traceEvents"].extend([
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": [1]},
        {"ph": "M", "name": "process_name", "pid": 1, "args": "main"}]))
    tr = kitlib.load_trace(p)
    assert tr.meta["unusable_metadata_events"] == 2 and len(tr.gpu) == len(kitlib.load_trace(
        _write_doc(tmp_path, BASE, "base.json")).gpu)
    _analyse(tr)
    # a category that is a list is an unknown category, counted as such
    p = _damaged(tmp_path, lambda d: _first(d, "cpu_op").update(cat=["cpu_op"]))
    tr = kitlib.load_trace(p)
    assert tr.meta["unread_complete_events"] == 1 and any(k.startswith("list") for k in tr.meta["category_counts"])
    _analyse(tr)
    # an id written as digits is that id
    p = _damaged(tmp_path, lambda d: _first(d, "kernel")["args"].update({"correlation": "12"}))
    assert 12 in set(kitlib.load_trace(p).gpu["correlation"].dropna())


def test_memory_records_are_known_by_their_fields_not_only_their_name(tmp_path):
    src = Path(__file__).resolve().parents[2] / "tests" / "data" / "oracle-cpu" / "resnet18" / "trace.json.gz"
    d = json.loads(gzip.decompress(src.read_bytes()))
    n = sum(e.get("name") == "[memory]" for e in d["traceEvents"])
    for e in d["traceEvents"]:
        if e.get("name") == "[memory]":
            del e["name"]
    tr = kitlib.load_trace(_write_doc(tmp_path, d))
    assert len(tr.memory) == n == 3670


def test_json_nested_thousands_deep_is_a_kit_error(tmp_path):
    p = _write_doc(tmp_path, '{"traceEvents": [{"ph": "X", "args": ' + "[" * 5000 + "]" * 4999 + "}]}")
    with pytest.raises(KitFileError, match="invalid JSON") as e:
        kitlib.load_trace(p)
    assert str(p) in str(e.value)


def test_analyses_give_results_on_what_loaded(tmp_path):
    # no correlation ids at all: nothing can be linked, and nothing raises
    tr = kitlib.load_trace(_damaged(tmp_path, lambda d: [e.get("args", {}).pop("correlation", None)
                                                         for e in d["traceEvents"]]))
    _analyse(tr)
    c = kitlib.chain(tr)
    assert set(c["link"]) == {"no_launch"}
    # kernels whose launches were all lost
    tr = kitlib.load_trace(_damaged(tmp_path, lambda d: d.update(traceEvents=[
        e for e in d["traceEvents"] if e.get("cat") not in ("cuda_runtime", "cuda_driver")])))
    _analyse(tr)
    assert (kitlib.chain(tr)["launch_row"] == -1).all()
    # Input Dims that are not a list at all: refused at the reader, naming the event
    with pytest.raises(TraceFormatError, match=r"aten::mm.*'Input Dims' is a str \('garbage'\), not a list"):
        kitlib.load_trace(_damaged(tmp_path, lambda d: [e["args"].update({"Input Dims": "garbage"})
                                                        for e in d["traceEvents"] if e.get("cat") == "cpu_op"]))
    # a list whose entries are not shapes: group_ops goes on without FLOPs; the FLOP reader says why
    tr = kitlib.load_trace(_damaged(tmp_path, lambda d: [e["args"].update({"Input Dims": [[{"a": 1}], []]})
                                                         for e in d["traceEvents"] if e.get("cat") == "cpu_op"]))
    _analyse(tr)
    assert "flops" not in G.group_ops(tr).columns
    with pytest.raises(KitError, match=r"t\.json: aten::mm: its Input Dims"):
        F.flops_by_event(tr)


def test_gpu_events_that_cannot_have_happened_are_counted_and_left_out(tmp_path):
    def damage(d):
        k = [e for e in d["traceEvents"] if e.get("cat") == "kernel"]
        k[0]["dur"] = 0                            # a kernel of 0 ns in a ns-resolution trace
        launch = next(e for e in d["traceEvents"] if e.get("cat") in ("cuda_runtime", "cuda_driver")
                      and e["args"].get("correlation") == k[1]["args"]["correlation"])
        k[1]["ts"] = launch["ts"] - 5              # before its own launch
        _first(d, "cpu_op")["ts"] += 0.001         # a trace timed to the ns (not whole µs)
    tr = kitlib.load_trace(_damaged(tmp_path, damage))
    bad = impossible_gpu_events(tr)
    assert sorted(bad["reason"]) == ["before_launch", "zero_duration"]
    f = {x.code: x for x in kitlib.lint(tr)}["impossible_gpu_events"]
    assert f.evidence["gpu_events"] == 2
    # group_ops leaves exactly those two out of its CUDA rows: the counts and self time of
    # the rest, summed straight from the trace's GPU table
    rows = G.group_ops(tr)
    cuda = rows[rows["device_type"] == "CUDA"]
    kept = tr.gpu[~tr.gpu.index.isin(bad["gpu_row"])]
    assert len(kept) == len(tr.gpu) - 2
    assert cuda["count"].sum() == len(kept) and cuda["device_self_ns"].sum() == int(kept["dur_ns"].sum())


def test_viewer_size_is_the_json_not_the_gzip(tmp_path):
    tr = kitlib.open_capture("profiler_5step").trace
    assert tr.meta["json_bytes"] > 5 * tr.path.stat().st_size
    f = {x.code: x for x in kitlib.lint(tr, max_bytes=tr.path.stat().st_size + 1)}
    assert f["too_large_for_viewer"].evidence["file_bytes"] == tr.meta["json_bytes"]
