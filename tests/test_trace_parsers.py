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

ROOT = Path(__file__).resolve().parents[1]
TRACES = sorted(
    [p for p in (ROOT / "data" / "reference").rglob("*.json.gz")]
    + [p for p in (ROOT / "tests" / "data" / "public-traces").glob("*.json.gz")]
    + [p for p in (ROOT / "tests" / "data" / "oracle-cpu").rglob("*.json*")]
    + [p for p in (ROOT / "tests" / "data" / "bugcases").rglob("*.json*")])


def _raw(path: Path) -> bytes:
    data = path.read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


@pytest.mark.parametrize("path", TRACES, ids=lambda p: str(p.relative_to(ROOT)))
def test_fast_and_dict_paths_give_the_same_tables(path, monkeypatch):
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "0")
    raw = _raw(path)
    doc = T._decode_trace(raw)
    try:
        by_dict = T.trace_from_json(orjson.loads(raw), path)
    except TraceFormatError as err:                      # a bugcase the kit refuses: same refusal
        with pytest.raises(TraceFormatError) as fast:
            T.load_trace(path)
        assert str(fast.value) == str(err)
        return
    fast = T.load_trace(path)
    if isinstance(orjson.loads(raw), dict) and "traceEvents" in orjson.loads(raw):
        assert doc is not None, "an ordinary trace must take the msgspec path"
    for name in ("ops", "launches", "gpu", "memory", "other", "host_events"):
        pd.testing.assert_frame_equal(getattr(fast, name), getattr(by_dict, name), check_exact=True, obj=name)
    meta_f = {k: v for k, v in fast.meta.items() if k != "json_bytes"}
    assert meta_f == by_dict.meta


def test_the_reference_trace_takes_the_fast_path_and_keeps_its_counts():
    """Counts from the raw JSON itself (PROVENANCE: profiler_5step)."""
    path = ROOT / "data" / "reference" / "profiler_5step" / "trace.json.gz"
    raw = _raw(path)
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
