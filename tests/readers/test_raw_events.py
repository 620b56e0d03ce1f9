"""kitlib.readers.files.read_trace_events: the one raw reader behind the lessons' hand-work
(kitlib.course.raw_views.trace_events).

It must give exactly the events Python's json gives (values and types), on every shipped
trace and on public traces of other versions, and refuse bad files with a kitlib error
naming the file. It exists to keep a learner's kernel small (issue 38): its peak memory
is measured in benchmarks/bench_class.py, not asserted here.
"""
import gzip
import json
from pathlib import Path

import pytest

from kitlib.course import raw_views
from kitlib.errors import KitFileError
from kitlib.readers.bundle import open_capture
from kitlib.readers.files import read_trace_events

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted((ROOT / "data").rglob("trace.json.gz"))
PUBLIC = sorted((ROOT.parent / "shared" / "public-traces").glob("*.json.gz"))


def _typed(x):
    """A value with its types spelled out, so 1 and 1.0 (or True and 1) differ."""
    if isinstance(x, dict):
        return {k: _typed(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_typed(v) for v in x]
    return (type(x).__name__, x)


def _json_events(path):
    doc = json.loads(gzip.decompress(Path(path).read_bytes()))
    return doc["traceEvents"] if isinstance(doc, dict) else doc


@pytest.mark.parametrize("path", SHIPPED[:6] + PUBLIC[:4], ids=lambda p: f"{p.parent.name}/{p.name}")
def test_the_events_json_gives(path):
    ours = read_trace_events(path)
    assert len(ours) > 0
    assert _typed(ours) == _typed(_json_events(path))


def test_the_lessons_loader_is_the_one_reader():
    cap = open_capture("profiler_5step")
    events = read_trace_events(cap.file("trace.json.gz"))
    assert raw_views.trace_events(cap.file("trace.json.gz")) == events
    assert raw_views.trace_events(cap) == events


def test_the_lessons_refuse_a_bad_file_as_the_readers_do(tmp_path):
    """The raw views and the rank excerpts give the readers' own KitFileError, naming the file."""
    from types import SimpleNamespace

    import pandas as pd
    p = tmp_path / "trace.json"
    p.write_bytes(b'{"traceEvents": [{"ph": "X",')
    with pytest.raises(KitFileError) as theirs:
        read_trace_events(p)
    runs = SimpleNamespace(info=pd.DataFrame({"path": [str(p)], "rank": [0]}), traces={0: SimpleNamespace(meta={})})
    for read in (raw_views.trace_events, raw_views.collective_excerpt, raw_views.nccl_call_excerpt):
        with pytest.raises(KitFileError) as mine:
            read(runs if "excerpt" in read.__name__ else p)
        assert str(mine.value) == str(theirs.value) and str(mine.value).startswith(f"{p}: ")


def test_what_only_json_reads_and_a_bare_list(tmp_path):
    p = tmp_path / "nan.json"
    p.write_bytes(b'{"traceEvents": [{"ts": NaN, "id": 123456789012345678901234567890}], "x": 1}')
    (ev,) = read_trace_events(p)
    assert ev["ts"] != ev["ts"] and ev["id"] == 123456789012345678901234567890
    p.write_bytes(b'[{"ph": "X"}]')
    assert read_trace_events(p) == [{"ph": "X"}]


@pytest.mark.parametrize("raw, words", [
    (b'{"traceEvents": [{"ph": "X",', ("invalid JSON", "cut off")),
    (b'{"schemaVersion": 1}', ("no traceEvents list",)),
    (b'{"traceEvents": {"ph": "X"}}', ("no traceEvents list",)),
    (b"", ("empty",)),
])
def test_bad_files_name_the_file_and_the_reason(tmp_path, raw, words):
    p = tmp_path / "bad.json"
    p.write_bytes(raw)
    with pytest.raises(KitFileError) as info:
        read_trace_events(p)
    assert str(info.value).startswith(f"{p}: ")
    for w in words:
        assert w in str(info.value)


def test_not_a_regular_file(tmp_path):
    with pytest.raises(KitFileError, match="is a folder"):
        read_trace_events(tmp_path)


def test_only_the_categories_asked_for_in_file_order():
    path = ROOT / "data" / "reference" / "profiler_5step" / "trace.json.gz"
    every = read_trace_events(path)
    cats = ("kernel", "cuda_runtime", None)
    assert read_trace_events(path, cats=cats) == [e for e in every if e.get("cat") in cats]
    assert len([e for e in every if e.get("cat") in cats]) == 2705 + 8588 + 68   # kernels, launches, metadata


def test_categories_on_what_only_json_reads(tmp_path):
    p = tmp_path / "nan.json"
    p.write_bytes(b'{"traceEvents": [{"cat": "kernel", "ts": NaN}, {"cat": "cpu_op", "ts": 1}]}')
    (ev,) = read_trace_events(p, cats=["kernel"])
    assert ev["cat"] == "kernel" and ev["ts"] != ev["ts"]
