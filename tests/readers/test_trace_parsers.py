"""load_trace parses a trace with msgspec into typed events (fast, little memory) and
falls back to orjson's dict for anything else; both must give the same tables.

Oracle: ``trace_from_json`` over ``orjson.loads`` of the same file (the dict path, which
the rest of the suite pins against the profiler's own tables), compared table by table,
value by value, on every trace the kit ships and the public traces of other versions.
"""
from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pandas as pd
import pytest

from kitlib.errors import KitFileError, TraceFormatError
from kitlib.readers import trace as T

ROOT = Path(__file__).resolve().parents[2]
def _distinct(paths) -> list:
    """The paths with distinct contents, the first of each in sorted order (a file shipped
    twice, such as the 2021 V100 trace in tests/data and data/reference/public-other, gives
    the same tables both times: it is parsed once)."""
    import hashlib
    seen, out = set(), []
    for p in sorted(paths):
        digest = hashlib.sha256(p.read_bytes()).digest()
        if digest not in seen:
            seen.add(digest)
            out.append(p)
    return out


TRACES = _distinct(
    [p for p in (ROOT / "data" / "reference").rglob("*.json.gz")]
    + [p for p in (ROOT / "tests" / "data" / "public-traces").glob("*.json.gz")]
    + [p for p in (ROOT / "tests" / "data" / "oracle-cpu").rglob("*.json*")]
    + [p for p in (ROOT / "tests" / "data" / "bugcases").rglob("*.json*")])


def _json_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


@pytest.mark.parametrize("path", TRACES, ids=lambda p: str(p.relative_to(ROOT)))
def test_fast_and_dict_paths_give_the_same_tables(path, monkeypatch):
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "0")
    raw = _json_bytes(path)
    doc = T._decode_trace(raw)
    obj = orjson.loads(raw)
    ordinary = isinstance(obj, dict) and "traceEvents" in obj
    try:
        by_dict = T.trace_from_json(obj, path)
    except TraceFormatError as err:                      # a bugcase the kit refuses: same refusal
        with pytest.raises(TraceFormatError) as fast:
            T.load_trace(path)
        assert str(fast.value) == str(err)
        return
    del obj, raw
    fast = T.load_trace(path)
    if ordinary:
        assert doc is not None, "an ordinary trace must take the msgspec path"
    for name in ("ops", "launches", "gpu", "memory", "other", "host_events"):
        pd.testing.assert_frame_equal(getattr(fast, name), getattr(by_dict, name), check_exact=True, obj=name)
    meta_f = {k: v for k, v in fast.meta.items() if k != "json_bytes"}
    assert meta_f == by_dict.meta


def test_the_reference_trace_takes_the_fast_path_and_keeps_its_counts():
    """Counts from the raw JSON itself (PROVENANCE: profiler_5step)."""
    path = ROOT / "data" / "reference" / "profiler_5step" / "trace.json.gz"
    raw = _json_bytes(path)
    doc = T._decode_trace(raw)
    assert isinstance(doc, T._TraceDoc)
    events = orjson.loads(raw)["traceEvents"]
    assert len(doc.traceEvents) == len(events)
    tr = T.trace_from_json(doc, path)
    n_kernels = sum(e.get("ph") == "X" and e.get("cat") == "kernel" for e in events)
    assert (tr.gpu["kind"] == "kernel").sum() == n_kernels
    assert tr.meta["n_events"] == len(events)


def _one_op(args: bytes) -> bytes:
    return (b'{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":10,"dur":5,'
            b'"args":' + args + b'}]}')


def test_invalid_utf8_in_an_args_key_no_table_reads_is_still_refused(tmp_path):
    p = tmp_path / "t.json"
    p.write_bytes(_one_op(b'{"unread": "\xff"}'))
    with pytest.raises(KitFileError, match="not UTF-8"):
        T.load_trace(p)


def test_a_number_strict_json_refuses_in_a_read_arg_gets_the_strict_parsers_message(tmp_path):
    p = tmp_path / "t.json"
    p.write_bytes(_one_op(b'{"External id": 1e400}'))
    with pytest.raises(KitFileError, match=r"t\.json: invalid JSON at line 1, column \d+ .*infinity"):
        T.load_trace(p)
    p.write_bytes(_one_op(b'{"Input Dims": [[1e400]]}'))
    with pytest.raises(KitFileError, match="infinity"):
        T.load_trace(p)


def test_args_that_are_not_an_object_are_named_as_on_the_dict_path(tmp_path):
    p = tmp_path / "t.json"
    p.write_bytes(_one_op(b"[1, 2]"))
    with pytest.raises(TraceFormatError) as fast:
        T.load_trace(p)
    with pytest.raises(TraceFormatError) as slow:
        T.trace_from_json(orjson.loads(p.read_bytes()), p)
    assert str(fast.value) == str(slow.value)
    assert "'args' is a list, not an object" in str(fast.value)


def test_equal_input_shapes_are_one_object(tmp_path):
    """Each distinct args text is decoded once: equal shapes share one list."""
    ev = (b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%d,"dur":1,'
          b'"args":{"Input Dims":[[2,3],[3,4]],"External id":%d}}')
    p = tmp_path / "t.json"
    p.write_bytes(b'{"traceEvents":[' + b",".join(ev % (i * 10, i) for i in range(3)) + b"]}")
    ops = T.load_trace(p).ops
    dims = ops["input_dims"].tolist()
    assert dims[0] == [[2, 3], [3, 4]] and dims[0] is dims[1] is dims[2]
    assert ops["external_id"].tolist() == [0, 1, 2]


# --------------------------------------------------------------------------- exact 17-digit times
#: A hand-written trace on the epoch clock, µs with ns fractions as recent Kineto writes
#: them (17 significant digits and more): the parent starts at ...456.789 and lasts
#: 10.211 µs, so it ends at ...467.000 exactly, where its child (...460.001 + 6.999)
#: ends too. A float64 holds these times only to 0.25 µs: read through one, the parent
#: starts 39 ns early and ends at ...466.961, before its child, which becomes a sibling.
_T0 = "1712181098123"          # the 13 leading digits every time shares
_EPOCH_EVENTS = [
    ("X", "cpu_op", "ProfilerStep#1", 1, "456.789", "10.211", {}),
    ("X", "cpu_op", "aten::conv2d", 1, "460.001", "6.999", {}),
    ("X", "cuda_runtime", "cudaLaunchKernel", 1, "462.125", "3.5", {"correlation": 7}),
    ("X", "kernel", "sm90_xmma", 7, "470.333", "1.001", {"correlation": 7, "device": 0, "stream": 7}),
    ("X", "cpu_op", "aten::relu", 1, "467.000", "0.123", {}),
    ("i", "cpu_instant_event", "[memory]", 1, "463.457", None,
     {"Bytes": 512, "Addr": 1, "Total Allocated": 512, "Total Reserved": 2048, "Device Type": 1, "Device Id": 0}),
]


def _epoch_trace(bare_list: bool = False) -> bytes:
    evs = []
    for ph, cat, name, tid, ts, dur, args in _EPOCH_EVENTS:
        e = f'{{"ph":"{ph}","cat":"{cat}","name":"{name}","pid":1,"tid":{tid},"ts":{_T0}{ts}'
        e += (f',"dur":{dur}' if dur else ',"s":"t"') + f',"args":{orjson.dumps(args).decode()}}}'
        evs.append(e)
    body = "[" + ",\n".join(evs) + "]"
    return (body if bare_list else '{"traceEvents":' + body + "}").encode()


def _printed_ns(ts: str) -> int:
    """The profiler's own figure: the time as printed, in ns (digits, no float)."""
    whole, _, frac = (_T0 + ts).partition(".")
    return int(whole) * 1000 + int((frac + "000")[:3])


@pytest.mark.parametrize("form", ["object.json", "object.json.gz", "bare_list.json"])
def test_17_digit_times_are_read_exactly_from_the_json_text(tmp_path, monkeypatch, form):
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "0")
    raw = _epoch_trace(bare_list=form.startswith("bare"))
    p = tmp_path / form.replace("object", "t").replace("bare_list", "t")
    p.write_bytes(gzip.compress(raw) if form.endswith(".gz") else raw)
    if form.startswith("bare"):
        assert T._decode_trace(raw) is None                   # the orjson route, made exact too
    tr = T.load_trace(p)
    ops = tr.ops.set_index("name")
    # profiler (the printed digits) beside kitlib, every table
    assert _printed_ns("456.789") == 1712181098123456789
    assert ops.loc["ProfilerStep#1", "start_ns"] == 1712181098123456789
    for name, table in [("ProfilerStep#1", "ops"), ("aten::conv2d", "ops"), ("aten::relu", "ops"),
                        ("cudaLaunchKernel", "launches"), ("sm90_xmma", "gpu"), ("[memory]", "memory")]:
        ph, cat, _, _, ts, dur, _ = next(e for e in _EPOCH_EVENTS if e[2] == name)
        row = getattr(tr, table).set_index("name").loc[name]
        assert row["start_ns"] == _printed_ns(ts), (name, row["start_ns"], _printed_ns(ts))
        if dur:
            assert row["dur_ns"] == round(float(dur) * 1000)
    # the child ends with its parent exactly, and is its child
    assert ops.loc["ProfilerStep#1", "end_ns"] == ops.loc["aten::conv2d", "end_ns"] == 1712181098123467000
    step = tr.ops.index[tr.ops["name"] == "ProfilerStep#1"][0]
    assert ops.loc["aten::conv2d", "parent"] == step and ops.loc["aten::conv2d", "depth"] == 1
    # relu starts where the step ends: a sibling, not a child (half-open at the end)
    assert ops.loc["aten::relu", "start_ns"] == 1712181098123467000 and ops.loc["aten::relu", "depth"] == 0
    assert tr.steps["name"].tolist() == ["ProfilerStep#1"]


def test_a_float64_would_have_moved_them():
    """Why the second parse: the nearest doubles are off by tens of ns."""
    parent = T._ns([float(_T0 + "456.789")])[0]
    child = T._ns([float(_T0 + "460.001")])[0]
    assert (parent, child) == (1712181098123456750, 1712181098123460000)    # 39 ns early, 1 ns early
    assert parent + 10_211 == 1712181098123466961 < child + 6_999 == 1712181098123466999  # child outlives parent


def test_the_exact_reading_of_one_number():
    f = T._exact_float
    assert type(f("1712181098123456.789")) is T._ExactUs and f("1712181098123456.789").ns == 1712181098123456789
    assert f("1712181098123456.7894").ns == 1712181098123456789        # sub-ns digits: nearest
    assert f("1712181098123456.7895").ns == 1712181098123456790        # ... half to even
    assert f("1712181098123456.7885").ns == 1712181098123456788
    assert f("1.7121810981234567e15").ns == 1712181098123456700
    assert f("-1712181098123456.5").ns == -1712181098123456500
    assert type(f("5139038785142.318")) is float                     # the kit's clock: a float is exact
    assert type(f("1e300")) is float                                  # out of range: refused later, as before
    assert f("1712181098123456.789") == float("1712181098123456.789")


def test_only_long_float_times_pay_for_the_second_parse(monkeypatch, tmp_path):
    """The kit's traces (µs since boot) and integer epoch traces keep the first parse;
    a trace with float times beyond 2**43 µs is read once more, exactly."""
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "0")
    calls = []
    real = T._decode_exact
    monkeypatch.setattr(T, "_decode_exact", lambda raw: calls.append(len(raw)) or real(raw))
    for path in (ROOT / "data" / "reference" / "profiler_5step" / "trace.json.gz",
                 ROOT / "tests" / "data" / "public-traces" / "kineto_2021-06_resnet50_v100.json.gz"):
        T.load_trace(path)
        assert calls == [], path.name
    p = tmp_path / "t.json"
    p.write_bytes(_epoch_trace())
    T.load_trace(p)
    assert calls == [len(_epoch_trace())]
    # a document parsed by the caller keeps its floats (the text is gone): no error
    tr = T.trace_from_json(orjson.loads(_epoch_trace()))
    assert tr.ops["start_ns"].iloc[0] == 1712181098123456750


def test_the_reference_trace_on_the_epoch_clock_reads_the_same_to_the_ns(tmp_path, monkeypatch):
    """profiler_5step with every ``ts`` moved onto the epoch clock (+1,707,042,000 s, so
    17-19 digit µs with ns fractions, as recent Kineto writes them), the digits shifted
    as text: every table's starts move by exactly that much, durations, parents and
    self times do not."""
    import re
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "0")
    src = ROOT / "data" / "reference" / "profiler_5step" / "trace.json.gz"
    shift_ns = 1_707_042_000_000_000_000

    def moved(m):
        whole, _, frac = m.group(2).decode().partition(".")
        ns = int(whole) * 1000 + int((frac + "000")[:3]) + shift_ns
        return m.group(1) + f"{ns // 1000}.{ns % 1000:03d}".encode()
    p = tmp_path / "epoch.json"
    p.write_bytes(re.sub(rb'("ts": ?)(\d+(?:\.\d+)?)', moved, _json_bytes(src)))
    a, b = T.load_trace(src), T.load_trace(p)
    for name in ("ops", "launches", "gpu", "memory"):
        x, y = getattr(a, name), getattr(b, name)
        assert len(x) == len(y) > 0
        assert ((y["start_ns"] - x["start_ns"]) == shift_ns).all(), name
        assert (y["dur_ns"] == x["dur_ns"]).all(), name
    for col in ("parent", "depth"):
        assert (a.ops[col] == b.ops[col]).all(), col
    assert (a.host_events["children_ns"] == b.host_events["children_ns"]).all()


def test_python_parent_ids_in_a_loop_still_load(tmp_path, monkeypatch):
    """A damaged trace whose Python frames name each other as parents (f's parent is g,
    g's is f) loads on both paths: parents by id, depths by the one pass over the rows
    (depth = the parent's depth as far as it is known, + 1), never a walk up the loop."""
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "0")

    def frame(name, ts, dur, pid, parent):
        return {"ph": "X", "cat": "python_function", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
                "args": {"Python id": pid, "Python parent id": parent}}
    doc = {"traceEvents": [frame("f", 0, 100, 1, 2), frame("g", 10, 20, 2, 1), frame("h", 12, 5, 3, 2),
                           {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 13, "dur": 1}]}
    path = tmp_path / "loop.json"
    path.write_bytes(orjson.dumps(doc))
    for tr in (T.load_trace(path), T.trace_from_json(doc)):
        assert tr.ops[["name", "parent", "depth"]].values.tolist() == [
            ["f", 1, 1], ["g", 0, 2], ["h", 1, 3], ["aten::mm", -1, 0]]
