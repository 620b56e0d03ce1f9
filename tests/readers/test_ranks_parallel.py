"""load_traces in worker processes: the same RankTraces as the serial read, with the trace
cache on (workers parse and write the cache, this process reads it) and off (workers
send the tables back), and its errors.

Input: the kit's ranks_straggler pair made into three ranks (a third copy of rank 0's
trace, its distributedInfo saying rank 2 of world size 3), written here.
"""
from __future__ import annotations

import gzip
import json
import time

import pandas as pd
import pytest

from kitlib.errors import KitFileError
from kitlib.readers import ranks as R
from kitlib.readers import trace as trace_mod
from kitlib.readers import trace_cache
from kitlib.readers.bundle import reference_dir


@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory):
    d = tmp_path_factory.mktemp("three_ranks")
    src = reference_dir() / "ranks_straggler"
    for rank, frm in ((0, 0), (1, 1), (2, 0)):
        doc = json.loads(gzip.decompress((src / f"rank{frm}" / "trace.json.gz").read_bytes()))
        doc["distributedInfo"] = dict(doc["distributedInfo"], rank=rank, world_size=3)
        (d / f"rank{rank}.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode(), 1))
    return d


def _same(a, b):
    assert a.ranks == b.ranks == [0, 1, 2]
    pd.testing.assert_frame_equal(a.info, b.info)
    for r in a.ranks:
        for name in ("ops", "launches", "gpu", "memory", "other"):
            pd.testing.assert_frame_equal(getattr(a.traces[r], name), getattr(b.traces[r], name), check_exact=True)
        assert a.traces[r].meta["distributed"] == b.traces[r].meta["distributed"]


def test_workers_give_the_serial_result_cache_off(three_ranks, monkeypatch):
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "0")
    serial = R.load_traces(three_ranks, workers=1, progress=False)
    parallel = R.load_traces(three_ranks, workers=2, progress=False)
    _same(serial, parallel)
    assert serial.info["world_size"].tolist() == [3, 3, 3]
    # rank 2 is rank 0's trace under another rank: the same events
    pd.testing.assert_frame_equal(parallel.traces[2].ops, parallel.traces[0].ops)


def _older_than_racy(files):
    """Wait until every file last changed at least trace_cache.RACY_NS ago: a hash taken
    sooner is not trusted ("racy", see remembered_hash), and a file so young is hashed
    again at every load. The fixture's files are that young when this test runs first
    (alone, or first on its xdist worker); after the module's first test they are not,
    and this waits for nothing."""
    newest = max(p.stat().st_ctime_ns for p in files)
    left = newest + trace_cache.RACY_NS - time.time_ns()
    if left > 0:
        time.sleep(left / 1e9 + 0.01)


def test_workers_fill_the_cache_and_the_caller_reads_it(three_ranks, tmp_path, monkeypatch):
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "1")
    monkeypatch.setenv("KITLIB_CACHE", str(tmp_path / "cache"))
    files = sorted(three_ranks.glob("*.json.gz"))
    _older_than_racy(files)
    assert not any(R._cached(p) for p in files)
    parallel = R.load_traces(three_ranks, workers=2, progress=False)
    assert all(R._cached(p) for p in files)                  # written by the workers
    entries = [e for e in (tmp_path / "cache" / "traces").iterdir() if not e.name.startswith(".")]
    assert len(entries) == 3
    # this process reads the workers' entries without reading a trace file again (read here,
    # workers=1, so that a file read would show in this process's list)
    reads = []
    real = trace_mod.read_file_bytes
    monkeypatch.setattr(trace_mod, "read_file_bytes", lambda p: reads.append(p) or real(p))
    from_cache = R.load_traces(three_ranks, workers=1, progress=False)
    print("trace files read by this process, from the cache:", len(reads))
    assert reads == []
    _same(from_cache, parallel)
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "0")
    _same(R.load_traces(three_ranks, workers=1, progress=False), parallel)
    assert len(reads) == 3                                   # the cache off: each file parsed here


def test_bad_workers_and_a_bad_file_among_many(three_ranks, tmp_path, monkeypatch):
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "0")
    with pytest.raises(ValueError, match="workers must be"):
        R.load_traces(three_ranks, workers=0)
    bad = tmp_path / "rank9.json.gz"
    bad.write_bytes(gzip.compress(b'{"traceEvents": [')[:-4])
    files = [three_ranks / "rank0.json.gz", three_ranks / "rank1.json.gz", bad]
    with pytest.raises(KitFileError) as e:
        R.load_traces(files, workers=2, progress=False)
    assert "rank9.json.gz" in str(e.value)


def test_default_workers(monkeypatch):
    assert R.default_workers(1) == R.default_workers(R.PARALLEL_MIN_FILES - 1) == 1   # two ranks: no pool
    monkeypatch.setattr(R.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert R.default_workers(R.PARALLEL_MIN_FILES) == 2 and R.default_workers(1000) == 2   # one per core
    monkeypatch.setattr(R.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    assert R.default_workers(5) == 5                                                   # one per trace
