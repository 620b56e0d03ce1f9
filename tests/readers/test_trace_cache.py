"""The columnar trace cache: the same tables back, keyed by content, never trusting a bad entry."""
from __future__ import annotations

import shutil

import pandas as pd
import pytest

import kitlib
from kitlib.readers import trace_cache

from conftest import PUBLIC, REF


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KITLIB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "1")
    return tmp_path / "cache" / "traces"


def _same(a, b):
    for name in trace_cache.TABLES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)
    assert a.meta == b.meta


@pytest.mark.parametrize("src", [REF / "fixed_batch" / "trace.json.gz",
                                 PUBLIC / "kineto_2021-06_resnet50_v100.json.gz",
                                 PUBLIC / "tracelens_torch2.6_h100_bert_small.json.gz"],
                         ids=["h200-2.11", "pytorch-1.9", "torch-2.6"])
def test_cached_load_gives_the_same_tables(cache, monkeypatch, src):
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "0")
    fresh = kitlib.load_trace(src)
    assert not cache.exists()                       # off means off
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "1")
    first = kitlib.load_trace(src)
    trace_cache.wait()                              # the entry is written after the tables return
    assert len(list(cache.iterdir())) == 1
    again = kitlib.load_trace(src)
    _same(fresh, first)
    _same(fresh, again)
    assert again.path == src


def test_a_copy_hits_the_same_entry_and_another_torch_does_not(cache, tmp_path):
    src = REF / "fixed_batch" / "trace.json.gz"
    kitlib.load_trace(src)
    copy = tmp_path / "copy.json.gz"
    shutil.copy(src, copy)
    kitlib.load_trace(copy)
    trace_cache.wait()
    assert len(list(cache.iterdir())) == 1          # keyed by content, not by path
    kitlib.load_trace(src, torch_version="2.14.1")
    trace_cache.wait()
    assert len(list(cache.iterdir())) == 2          # the rule of the tree depends on it


def test_damaged_entry_is_rebuilt_not_trusted(cache):
    src = PUBLIC / "tracelens_torch2.6_h100_bert_small.json.gz"
    good = kitlib.load_trace(src)
    trace_cache.wait()
    entry = next(cache.iterdir())
    f = entry / "ops.arrow"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF                    # one flipped byte inside the data
    f.write_bytes(bytes(data))
    assert trace_cache.load(entry.name, src) is None
    assert not entry.exists()                       # deleted
    _same(good, kitlib.load_trace(src))             # and rebuilt from the JSON
    trace_cache.wait()
    assert (cache / entry.name).exists()


def test_clear(cache):
    kitlib.load_trace(PUBLIC / "tracelens_torch2.6_h100_bert_small.json.gz")
    assert trace_cache.clear() == 1 and not cache.exists()
    assert trace_cache.clear() == 0


def test_object_columns_are_stored_once_per_distinct_value(cache):
    """Shapes and grids are Arrow dictionary columns: a cached load decodes each distinct
    value once (profiler_5step repeats the same shapes over its steps), not once per row."""
    import pyarrow as pa

    src = REF / "profiler_5step" / "trace.json.gz"
    fresh = kitlib.load_trace(src)
    trace_cache.wait()
    entry = next(cache.iterdir())
    ops = pa.ipc.open_file(pa.memory_map(str(entry / "ops.arrow"))).read_all()
    dims = ops.column("input_dims").combine_chunks()
    assert pa.types.is_dictionary(dims.type)
    n_distinct = len({repr(v) for v in fresh.ops["input_dims"]})
    assert len(dims.dictionary) == n_distinct < len(fresh.ops) / 10
    again = kitlib.load_trace(src)
    _same(fresh, again)
    assert isinstance(again.gpu["grid"].dropna().iloc[0], tuple)


def test_nullable_ids_above_2_53_come_back_exact(cache, tmp_path):
    """Int64 columns with missing values are read into pandas' Int64 directly, never
    through float64, which would round an id above 2**53."""
    import gzip
    import json

    big = 2**53 + 1
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0,
           "args": {"External id": big}},
          {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 4.0, "dur": 1.0}]
    src = tmp_path / "t.json.gz"
    src.write_bytes(gzip.compress(json.dumps({"traceEvents": ev}).encode()))
    first = kitlib.load_trace(src)
    again = kitlib.load_trace(src)
    assert again.ops["external_id"].tolist() == [big, pd.NA] == first.ops["external_id"].tolist()


def test_large_work_shows_a_progress_bar_unless_turned_off(monkeypatch, capsys):
    """A bar for loads of PROGRESS_MIN_BYTES of JSON and analyses of PROGRESS_MIN_EVENTS
    events (both seconds of work); forced on here for a small trace, and
    KITLIB_PROGRESS=0 (what the tests set) hides it even when asked for."""
    from kitlib import progress
    from kitlib.analyses import grouping

    src = PUBLIC / "tracelens_torch2.6_h100_bert_small.json.gz"
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "0")
    monkeypatch.setenv("KITLIB_PROGRESS", "1")
    tr = kitlib.load_trace(src, progress=True)
    assert "loading tracelens_torch2.6_h100_bert_small.json.gz" in capsys.readouterr().err
    monkeypatch.setattr(progress, "PROGRESS_MIN_EVENTS", 1)
    grouping.group_ops(tr)
    assert "group_ops (" in capsys.readouterr().err
    monkeypatch.setenv("KITLIB_PROGRESS", "0")
    kitlib.load_trace(src, progress=True)
    grouping.group_ops(tr)
    assert capsys.readouterr().err == ""


def test_an_unchanged_file_is_not_read_again_and_a_changed_one_is(cache, tmp_path, monkeypatch):
    """The file's sha256 is remembered with its stat (device, inode, size, mtime, ctime):
    a second load of the same file skips reading it; a file rewritten in place, even
    with its old size and modification time put back, is hashed again and gets the
    tables of its new content."""
    import json
    import os
    import time

    from kitlib.readers import trace as trace_mod

    def write(name):
        ev = [{"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}]
        return json.dumps({"traceEvents": ev}).encode()

    src = tmp_path / "t.json"
    src.write_bytes(write("aten::mm"))
    reads = []
    real = trace_mod.read_file_bytes
    monkeypatch.setattr(trace_mod, "read_file_bytes", lambda p: reads.append(p) or real(p))
    assert kitlib.load_trace(src).ops["name"].tolist() == ["aten::mm"]
    assert kitlib.load_trace(src).ops["name"].tolist() == ["aten::mm"]
    assert reads == [src, src]          # just written: its hash is not trusted yet ("racy"), so read again
    reads.clear()
    # the same, its hash remembered as if taken long after the file last changed
    now = trace_cache._now_ns()
    monkeypatch.setattr(trace_cache, "_now_ns", lambda: now + 10 * trace_cache.RACY_NS)
    assert kitlib.load_trace(src).ops["name"].tolist() == ["aten::mm"]
    assert reads == [src]
    reads.clear()
    assert kitlib.load_trace(src).ops["name"].tolist() == ["aten::mm"]
    assert reads == []                                  # served from the cache without reading the file
    st = src.stat()
    time.sleep(0.05)                                    # past a tick of the file system's coarse clock
    src.write_bytes(write("aten::mv"))                  # same length, new content
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))  # modification time put back
    assert src.stat().st_size == st.st_size and src.stat().st_mtime_ns == st.st_mtime_ns
    assert kitlib.load_trace(src).ops["name"].tolist() == ["aten::mv"]
    assert reads == [src]
    assert trace_cache.clear() == 2 and not (cache.parent / "trace-hashes").exists()


def test_the_kits_bundles_are_read_once_per_process_and_never_stale(tmp_path, monkeypatch):
    """Opening a reference bundle again (lesson 09 opens nsys_8step three times; a lesson's
    last cell re-opens its capture) hands back what was already read; a bundle outside the
    reference folder is read afresh, and a file changed inside a reference copy is never
    served from before the change."""
    import shutil
    import kitlib
    from conftest import REF
    from kitlib.model._values import kept
    a, b = kitlib.open_capture("nsys_8step"), kitlib.open_capture("nsys_8step")
    # read once: the same (read-only) tables; each caller its own report (issue 27)
    assert a is not b and a.nsys is not b.nsys and kept(a.nsys, "kernels") is kept(b.nsys, "kernels")
    assert kitlib.open_capture("profiler_5step").memory_snapshot is kitlib.open_capture("profiler_5step").memory_snapshot
    # a copy outside the reference folder: its own reads
    own = tmp_path / "own" / "nsys_8step"
    shutil.copytree(REF / "nsys_8step", own)
    assert kept(kitlib.open_capture(own).nsys, "kernels") is not kept(kitlib.open_capture(own).nsys, "kernels")
    # a reference folder of one's own (KITLIB_REFERENCE): shared until a file changes
    ref = tmp_path / "ref"
    shutil.copytree(REF / "profiler_5step", ref / "profiler_5step")
    monkeypatch.setenv("KITLIB_REFERENCE", str(ref))
    first = kitlib.open_capture("profiler_5step")
    assert first.path == ref / "profiler_5step"
    t = first.trace
    assert kept(kitlib.open_capture("profiler_5step").trace, "ops") is kept(t, "ops")
    trace_file = ref / "profiler_5step" / "trace.json.gz"
    trace_file.write_bytes(trace_file.read_bytes()[:-10])       # cut short: no longer the manifest's file
    with pytest.raises(kitlib.errors.BundleError):
        kitlib.open_capture("profiler_5step").trace


def test_the_entry_is_written_after_the_tables_return_whole_and_as_they_were(cache, monkeypatch):
    """The first load returns its tables before the cache entry is written (the write is
    off the critical path, in a background thread); until the write ends there is no
    entry, only a temporary folder (never a half-written entry); and a change made to
    the trace meanwhile does not reach the entry."""
    import threading

    trace_cache.wait()                  # an earlier test's write in the background: not this one's
    src = PUBLIC / "tracelens_torch2.6_h100_bert_small.json.gz"
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "0")
    fresh = kitlib.load_trace(src)
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "1")
    go, started = threading.Event(), threading.Event()
    real = trace_cache._dictionary

    def held(values):                   # the writer stops at its first object column
        started.set()
        assert go.wait(60)
        return real(values)

    monkeypatch.setattr(trace_cache, "_dictionary", held)
    first = kitlib.load_trace(src)       # returns while the writer is held
    assert started.wait(60)
    assert [p.name for p in cache.iterdir() if not p.name.startswith(".")] == []
    edits = (lambda: first.ops.__setitem__("name", "changed"),     # the learner's edits, after the return
             lambda: first.gpu.__setitem__("extra", 1), lambda: first.meta.__setitem__("mine", True))
    for edit in edits:
        try:
            edit()
        except TypeError:                                # a read-only value refuses it: fine too
            pass
    go.set()
    trace_cache.wait()
    (entry,) = [p for p in cache.iterdir()]              # the temporary folder renamed into place
    assert not entry.name.startswith(".") and (entry / "entry.json").is_file()
    _same(fresh, kitlib.load_trace(src))


def test_a_write_that_fails_leaves_no_entry_and_the_load_its_tables(cache, monkeypatch):
    src = PUBLIC / "tracelens_torch2.6_h100_bert_small.json.gz"

    def broken(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(trace_cache, "_crc", broken)     # fails after some tables are written
    tr = kitlib.load_trace(src)
    trace_cache.wait()
    assert len(tr.ops) and list(cache.iterdir()) == []   # no entry, no temporary folder left


def test_a_writer_that_never_finished_leaves_nothing_for_long(cache):
    """A process stopped mid-write (a kernel restarted) leaves its temporary folder; the
    next write sweeps it once it is an hour old, never a fresh one (another writer's)."""
    import os
    import time

    cache.mkdir(parents=True)
    old, fresh = cache / ".0123456789ab-dead", cache / ".ba9876543210-busy"
    for d in (old, fresh):
        d.mkdir()
        (d / "ops.arrow").write_bytes(b"half")
    hour_ago = time.time() - trace_cache.STALE_S - 60
    os.utime(old, (hour_ago, hour_ago))
    kitlib.load_trace(PUBLIC / "tracelens_torch2.6_h100_bert_small.json.gz")
    trace_cache.wait()
    names = sorted(p.name for p in cache.iterdir())
    assert not old.exists() and fresh.exists() and len(names) == 2      # the new entry and the busy writer's


# -- issue 41: an entry must belong to the file it is read for ---------------------------------
def _two_traces(tmp_path):
    """Two small traces of different content and size, with the op names each holds."""
    import json
    out = {}
    for name, ops in (("a", ["aten::mm", "aten::add"]), ("b", ["aten::conv2d"])):
        ev = [{"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": 1.0 + 3 * i, "dur": 2.0}
              for i, n in enumerate(ops)]
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps({"traceEvents": ev}))
        out[name] = (p, ops)
    return out


def _entry_of(path):
    return trace_cache.folder() / trace_cache.key_for(path.read_bytes())


def test_an_entry_copied_over_another_traces_entry_is_not_trusted(cache, tmp_path):
    t = _two_traces(tmp_path)
    (a, a_ops), (b, b_ops) = t["a"], t["b"]
    assert kitlib.load_trace(a).ops["name"].tolist() == a_ops
    assert kitlib.load_trace(b).ops["name"].tolist() == b_ops
    trace_cache.wait()
    ea, eb = _entry_of(a), _entry_of(b)
    shutil.rmtree(ea)
    shutil.copytree(eb, ea)                          # B's entry in A's folder
    got = kitlib.load_trace(a).ops["name"].tolist()
    print("A's ops from the raw JSON", a_ops, "kitlib after the copy", got)
    assert got == a_ops                              # A's tables, parsed again: not B's
    trace_cache.wait()
    assert kitlib.load_trace(a).ops["name"].tolist() == a_ops     # and on every later load


def test_an_edited_hash_memo_does_not_lead_to_another_traces_tables(cache, tmp_path, monkeypatch):
    import json
    t = _two_traces(tmp_path)
    (a, a_ops), (b, b_ops) = t["a"], t["b"]
    monkeypatch.setattr(trace_cache, "RACY_NS", 0)  # the memo is trusted without reading the file
    kitlib.load_trace(a), kitlib.load_trace(b)
    trace_cache.wait()
    memo = trace_cache._memo(a)
    m = json.loads(memo.read_text())
    m["sha256"] = trace_cache.content_hash(b.read_bytes())        # A's memo now names B's content
    memo.write_text(json.dumps(m))
    assert trace_cache.remembered_hash(a, a.stat()) == m["sha256"]
    assert kitlib.load_trace(a).ops["name"].tolist() == a_ops
    assert kitlib.load_trace(b).ops["name"].tolist() == b_ops    # B's sound entry is kept for B
    assert _entry_of(b).is_dir()


def test_an_edited_dtype_in_an_entry_is_not_trusted(cache, tmp_path):
    import json
    a, a_ops = _two_traces(tmp_path)["a"]
    fresh = kitlib.load_trace(a)
    trace_cache.wait()
    f = _entry_of(a) / "entry.json"
    entry = json.loads(f.read_text())
    assert entry["tables"]["ops"]["dtypes"]["start_ns"] == "int64"
    entry["tables"]["ops"]["dtypes"]["start_ns"] = "float64"
    f.write_text(json.dumps(entry))
    again = kitlib.load_trace(a)
    assert str(again.ops["start_ns"].dtype) == "int64"
    _same(fresh, again)
