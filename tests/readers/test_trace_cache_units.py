"""The trace cache's functions one by one: its settings, keys, remembered hashes, and an entry
stored, waited for, loaded and cleared. These were the ``Examples`` of
``kitlib/readers/trace_cache.py`` (issue 39: tests, not reading); each assertion is one of
their shown outputs. The cache as a whole is tested in tests/readers/test_trace_cache.py."""
from __future__ import annotations

import os
from pathlib import Path
from unittest.mock import patch

import pytest

from kitlib.model.examples import tiny_trace
from kitlib.readers import trace_cache


@pytest.fixture
def kit_cache(tmp_path, monkeypatch):
    """``KITLIB_CACHE`` pointed at an empty folder of the test's own."""
    monkeypatch.setenv("KITLIB_CACHE", str(tmp_path))
    yield tmp_path
    trace_cache.wait()                  # no write of this test's left running into the next one


def test_enabled_is_off_with_0(monkeypatch):
    monkeypatch.setenv("KITLIB_TRACE_CACHE", "0")
    assert trace_cache.enabled() is False


def test_folder_is_traces_under_kitlib_cache(kit_cache):
    assert trace_cache.folder() == Path(kit_cache) / "traces"


def test_shared_dir_from_the_setting(monkeypatch):
    monkeypatch.setenv("KITLIB_SHARED_CACHE", "/opt/kitlib/cache")
    assert str(trace_cache.shared_dir()) == "/opt/kitlib/cache"
    monkeypatch.setenv("KITLIB_SHARED_CACHE", "")
    assert trace_cache.shared_dir() is None


def test_the_learners_own_cache_is_read_last():
    assert trace_cache.roots()[-1] is None


def test_content_hash_is_sha256():
    assert trace_cache.content_hash(b"abc")[:16] == "ba7816bf8f01cfea"


def test_key_for_depends_on_the_torch_version_and_the_content():
    doc = b'{"traceEvents": []}'
    a = trace_cache.key_for(doc, torch_version="2.11.0")
    b = trace_cache.key_for(doc, torch_version="2.12.0")
    assert (len(a), a == b) == (64, False)
    assert a == trace_cache.key_for(None, "2.11.0", content=trace_cache.content_hash(doc))


def test_stat_signature(tmp_path):
    name = tmp_path / "empty"
    name.write_bytes(b"")
    sig = trace_cache.stat_signature(os.stat(name))
    assert (len(sig), sig[2]) == (5, 0)


def test_remembered_hash_is_trusted_only_when_the_file_is_old_enough_and_unchanged(kit_cache):
    p = kit_cache / "trace.json"
    p.write_text("{}")
    assert trace_cache.remember_hash(p, p.stat(), "abc") is None
    assert trace_cache.remembered_hash(p, p.stat()) is None      # changed < RACY_NS ago: not trusted
    with patch.object(trace_cache, "RACY_NS", 0):
        assert trace_cache.remembered_hash(p, p.stat()) == "abc"
    p.write_text("{ }")                                          # any change: hashed again
    assert trace_cache.remembered_hash(p, p.stat()) is None


def test_remember_hash_of_the_content(kit_cache):
    p = kit_cache / "trace.json"
    p.write_text("{}")
    with patch.object(trace_cache, "RACY_NS", 0):
        trace_cache.remember_hash(p, p.stat(), trace_cache.content_hash(b"{}"))
        assert trace_cache.remembered_hash(p, p.stat())[:16] == "44136fa355b3678a"


def test_clear_removes_each_entry_once(kit_cache):
    assert trace_cache.store("k1", tiny_trace()) is None
    assert (trace_cache.clear(), trace_cache.clear()) == (1, 0)


def test_store_writes_the_entry_in_a_thread(kit_cache):
    assert trace_cache.store("k1", tiny_trace()) is None          # returns at once; a thread writes
    assert trace_cache.wait("k1") is None
    assert sorted(p.name for p in (trace_cache.folder() / "k1").iterdir())[:3] == [
        "entry.json", "gpu.arrow", "host_events.arrow"]


def test_wait_for_every_pending_write(kit_cache):
    trace_cache.store("k1", tiny_trace())
    assert trace_cache.wait() is None                             # every pending write of this process
    assert (trace_cache.folder() / "k1" / "entry.json").is_file()


def test_load_what_was_stored(kit_cache):
    assert trace_cache.load("k1", "tiny.json") is None            # nothing stored yet
    trace_cache.store("k1", tiny_trace())
    tables, meta = trace_cache.load("k1", "tiny.json")
    assert sorted(tables) == ["gpu", "host_events", "launches", "memory", "ops", "other"]
    assert tables["ops"]["name"].tolist() == ["ProfilerStep#1", "aten::relu", "aten::add"]
    assert meta["format"] == "kineto"
