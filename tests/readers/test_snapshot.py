"""kitlib.readers.snapshot: the restricted unpickler and the tables of a CUDA memory snapshot.

Figures for the reference recording (H200, profiler_5step/memory_snapshot.pickle,
3 training steps under _record_memory_history) are recomputed here from the raw
dict with plain Python, so the tests fail if kitlib's tables drift from the file.
"""
import gzip
import os
import pickle
import pickletools
from collections import Counter
from pathlib import Path

import pytest

from kitlib.readers.bundle import open_capture
from kitlib.errors import KitFileError, UnsafePickleError
from kitlib.readers.snapshot import load_memory_snapshot, load_plain_pickle, python_stack, top_frame

REFERENCE = Path(__file__).resolve().parents[2] / "data" / "reference" / "profiler_5step"


@pytest.fixture(scope="module")
def ref_path():
    return open_capture(REFERENCE).file("memory_snapshot.pickle")    # sha256-checked


@pytest.fixture(scope="module")
def raw_snapshot(ref_path):
    data = ref_path.read_bytes()
    ops = {op.name for op, _, _ in pickletools.genops(data)}
    assert not ops & {"GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "REDUCE", "NEWOBJ", "BUILD"}
    return pickle.loads(data)        # safe: no opcode above can build an object


@pytest.fixture(scope="module")
def snap(ref_path):
    return load_memory_snapshot(ref_path)


# -- the reference recording ----------------------------------------------------------

def test_reference_loads_with_the_restricted_unpickler(ref_path, raw_snapshot):
    assert load_plain_pickle(ref_path) == raw_snapshot
    assert set(raw_snapshot) == {"segments", "device_traces", "allocator_settings", "external_annotations"}


def test_segments_and_blocks(snap, raw_snapshot):
    segs = raw_snapshot["segments"]
    assert len(snap.segments) == len(segs) == 144
    assert Counter(snap.segments.segment_type) == Counter(s["segment_type"] for s in segs) \
        == {"large": 107, "small": 37}
    assert snap.reserved_bytes() == sum(s["total_size"] for s in segs) == 13_352_566_784
    assert snap.allocated_bytes() == sum(s["allocated_size"] for s in segs) == 437_928_448
    assert snap.segments.total_size_bytes.max() == 520_093_696          # one 496 MiB segment
    blocks = [b for s in segs for b in s["blocks"]]
    assert len(snap.blocks) == len(blocks) == 763
    assert Counter(snap.blocks.state) == {"active_allocated": 648, "inactive": 115}
    live = [b for b in blocks if b["state"] == "active_allocated"]
    assert sum(b["size"] for b in live) == snap.allocated_bytes()
    assert snap.requested_bytes() == sum(b["requested_size"] for b in live) == 430_021_480
    assert snap.segments.n_blocks.sum() == 763
    assert snap.allocator_settings["expandable_segments"] is False


def _plain_history(raw_snapshot):
    """Running requested bytes after each event, from the raw dict, plain Python."""
    trace = raw_snapshot["device_traces"][0]
    end = sum(b["requested_size"] for s in raw_snapshot["segments"] for b in s["blocks"]
              if b["state"] == "active_allocated")
    net = sum(e["size"] if e["action"] == "alloc" else -e["size"]
              for e in trace if e["action"] in ("alloc", "free_requested"))
    cur, out = end - net, []
    for e in trace:
        cur += {"alloc": e["size"], "free_requested": -e["size"]}.get(e["action"], 0)
        out.append(cur)
    return end - net, out


def test_history_running_totals_and_peak(snap, raw_snapshot):
    trace = raw_snapshot["device_traces"][0]
    ev = snap.events
    assert len(ev) == len(trace) == 8649
    assert Counter(ev.action) == {"alloc": 2883, "free_requested": 2883, "free_completed": 2883}
    start, running = _plain_history(raw_snapshot)
    assert start == 430_021_480              # model + grads + momentum before the 3 steps
    assert ev.allocated_bytes.tolist() == running
    assert ev.allocated_bytes.iloc[-1] == snap.requested_bytes()
    assert (ev.active_bytes >= ev.allocated_bytes).all()
    assert (ev.reserved_bytes == 13_352_566_784).all()   # no segment_alloc/free: cache was warm
    peak = max(running)
    assert peak == 11_434_331_248
    # the same peak in each of the three steps, always right after backward begins
    assert [i for i, v in enumerate(running) if v == peak] == [884, 3767, 6650]
    p = snap.peak()
    assert (p["index"], p.allocated_bytes, p.size_bytes) == (884, peak, trace[884]["size"]) \
        == (884, peak, 51_380_224)
    assert p.time_us - trace[0]["time_us"] == 14_271
    assert p.annotations == "backward"
    assert p.top_frame == "autograd:ReluBackward0"
    s = snap.summary()
    assert (s["peak_allocated_bytes"], s["peak_index"], s["peak_after_us"]) == (peak, 884, 14_271)
    assert s["history_start_allocated_bytes"] == start
    assert s["history_span_us"] == trace[-1]["time_us"] - trace[0]["time_us"] == 105_449


def test_largest_live_at_peak(snap, raw_snapshot):
    # Independently: start from the live blocks at the end and undo the history backwards.
    trace = raw_snapshot["device_traces"][0]
    live = {b["address"]: b["requested_size"] for s in raw_snapshot["segments"] for b in s["blocks"]
            if b["state"] == "active_allocated"}
    for e in reversed(trace[885:]):
        if e["action"] == "alloc":
            del live[e["addr"]]
        elif e["action"] == "free_requested":
            live[e["addr"]] = e["size"]
    every = snap.largest_live_at_peak(n=None)
    assert sorted(every.size_bytes) == sorted(live.values())
    assert every.size_bytes.sum() == sum(live.values()) == 11_434_331_248
    top = snap.largest_live_at_peak(10)
    assert top.size_bytes.tolist() == sorted(live.values(), reverse=True)[:10] \
        == [411_041_792] * 9 + [205_520_896]      # 128 x 64 x 112 x 112 and 128 x 256 x 56 x 56 fp32
    assert Counter(top.top_frame.iloc[:9]) == {"torch/nn/modules/conv.py:548:_conv_forward": 5,
                                               "torch/nn/functional.py:2846:batch_norm": 4}
    assert top.top_frame.iloc[9] == "torch/nn/functional.py:835:_max_pool2d"
    assert (top.annotations == "forward").all()
    assert top.call_stack.iloc[0][0] == top.top_frame.iloc[0]
    assert any(f.endswith(":step") for f in top.call_stack.iloc[0])     # the capture script's step()
    assert top.share_of_peak.iloc[0] == pytest.approx(411_041_792 / 11_434_331_248)


def test_allocations_pair_allocs_with_frees(snap, raw_snapshot):
    a = snap.allocations
    assert a.alloc_index.notna().sum() == 2883
    # 161 allocations made before the history were freed during it; 648 - 161 are never touched
    assert (a.alloc_index.isna() & a.free_index.notna()).sum() == 161
    assert a.free_index.isna().sum() == 648
    assert ((a.free_index > a.alloc_index) | a.alloc_index.isna() | a.free_index.isna()).all()


def test_gzip_compressed_snapshot(tmp_path, ref_path, snap):
    gz = tmp_path / "memory_snapshot.pickle.gz"
    gz.write_bytes(gzip.compress(ref_path.read_bytes()))
    s = load_memory_snapshot(gz)
    assert s.summary() | {"file": None} == snap.summary() | {"file": None}


# -- hand-made snapshots ------------------------------------------------------------

PY_FRAMES = [{"filename": "??", "line": 0, "name": "c10::malloc"},
             {"filename": "/venv/lib/python3.12/site-packages/torch/nn/functional.py", "line": 7,
              "name": "relu"},
             {"filename": "/home/me/train.py", "line": 42, "name": "step"}]


def test_stack_helpers():
    assert python_stack(PY_FRAMES) == ("torch/nn/functional.py:7:relu", "/home/me/train.py:42:step")
    assert top_frame(PY_FRAMES) == "torch/nn/functional.py:7:relu"
    engine = [{"filename": "??", "line": 0, "name": "c10::malloc"},
              {"filename": "Functions.cpp", "line": 0,
               "name": "torch::autograd::generated::ConvolutionBackward0_apply_functional(std::vector)"}]
    assert top_frame(engine) == "autograd:ConvolutionBackward0"
    assert top_frame([]) is None and top_frame(None) is None


def _write_pickle(path, obj):
    path.write_bytes(pickle.dumps(obj))
    return path


def test_small_history_with_segments(tmp_path):
    blocks = [{"address": 1000, "size": 512, "requested_size": 500, "state": "active_allocated",
               "frames": PY_FRAMES},
              {"address": 1512, "size": 1536, "requested_size": 0, "state": "inactive", "frames": []}]
    segment = {"device": 0, "address": 1000, "total_size": 2048, "allocated_size": 512,
               "active_size": 512, "requested_size": 500, "stream": 0, "segment_type": "small",
               "blocks": blocks}

    def e(action, addr, size, t):
        return {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
                "frames": PY_FRAMES}
    trace = [e("segment_alloc", 1000, 2048, 10), e("alloc", 1000, 500, 11), e("alloc", 1512, 300, 12),
             e("free_requested", 1512, 300, 13), e("free_completed", 1512, 300, 14)]
    notes = [{"stage": "START", "name": "forward", "device": 0, "time_us": 11},
             {"stage": "START", "name": "relu", "device": 0, "time_us": 12},
             {"stage": "END", "name": "relu", "device": 0, "time_us": 13}]
    snap = load_memory_snapshot(_write_pickle(tmp_path / "s.pickle", {
        "segments": [segment], "device_traces": [trace], "external_annotations": notes}))
    ev = snap.events
    assert ev.allocated_bytes.tolist() == [0, 500, 800, 500, 500]
    assert ev.active_bytes.tolist() == [0, 500, 800, 800, 500]
    assert ev.reserved_bytes.tolist() == [2048] * 5
    assert ev.annotations.tolist()[1:] == ["forward", "forward > relu", "forward", "forward"]
    assert ev.annotations.isna().iloc[0]
    assert snap.peak()["index"] == 2
    assert snap.largest_live_at_peak().size_bytes.tolist() == [500, 300]
    assert snap.blocks.top_frame.iloc[0] == "torch/nn/functional.py:7:relu"
    assert snap.reserved_bytes() == 2048 and snap.allocated_bytes() == 512
    assert snap.requested_bytes() == 500


def test_snapshot_without_history_or_times(tmp_path):
    seg = {"device": 0, "address": 0, "total_size": 1024, "allocated_size": 0, "active_size": 0,
           "stream": 0, "segment_type": "small",
           "blocks": [{"address": 0, "size": 1024, "state": "inactive"}]}
    snap = load_memory_snapshot(_write_pickle(tmp_path / "a.pickle", {"segments": [seg], "device_traces": [[]]}))
    assert snap.events.empty and snap.allocations.empty
    with pytest.raises(KitFileError, match="no allocator history"):
        snap.peak()
    assert snap.summary()["reserved_bytes"] == 1024
    seg = dict(seg, allocated_size=512, blocks=[{"address": 0, "size": 512, "state": "active_allocated"},
                                                {"address": 512, "size": 512, "state": "inactive"}])
    old = {"segments": [seg], "device_traces": [[{"action": "alloc", "addr": 0, "size": 8, "frames": []}]]}
    ev = load_memory_snapshot(_write_pickle(tmp_path / "b.pickle", old)).events
    # no requested_size in old blocks: the block size stands in for it
    assert ev.time_us.isna().all() and ev.allocated_bytes.tolist() == [512]


# -- refusing what must not be read ----------------------------------------------------

class _Evil:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("protocol", [0, 2, 4, pickle.HIGHEST_PROTOCOL])
def test_pickle_that_would_run_code_is_refused_and_nothing_runs(tmp_path, protocol):
    marker = tmp_path / "PWNED"
    bad = tmp_path / "memory_snapshot.pickle"
    bad.write_bytes(pickle.dumps({"segments": [], "x": _Evil(marker)}, protocol=protocol))
    with pytest.raises(UnsafePickleError) as info:
        load_memory_snapshot(bad)
    assert not marker.exists()
    msg = str(info.value)
    assert str(bad) in msg
    assert f"{os.system.__module__}.system" in msg and os.system.__module__ in ("posix", "nt", "os")
    assert isinstance(info.value, KitFileError)


def test_gzipped_evil_pickle_and_other_globals_are_refused(tmp_path):
    marker = tmp_path / "PWNED"
    bad = tmp_path / "evil.pickle.gz"
    bad.write_bytes(gzip.compress(pickle.dumps(_Evil(marker))))
    with pytest.raises(UnsafePickleError, match=r"\.system"):
        load_plain_pickle(bad)
    assert not marker.exists()
    import collections
    import datetime
    for obj, name in ((collections.OrderedDict(a=1), "collections.OrderedDict"),
                      (datetime.date(2026, 11, 29), "datetime.date"),
                      (Path("/x"), "pathlib")):
        with pytest.raises(UnsafePickleError, match=name):
            load_plain_pickle(_write_pickle(tmp_path / "o.pickle", obj))
    # the hand-written classic: GLOBAL 'builtins eval' then REDUCE
    classic = tmp_path / "c.pickle"
    classic.write_bytes(b"cbuiltins\neval\n(V__import__('os').system('touch " + str(marker).encode()
                        + b"')\ntR.")
    with pytest.raises(UnsafePickleError, match="builtins.eval"):
        load_plain_pickle(classic)
    assert not marker.exists()
    persistent = tmp_path / "p.pickle"
    persistent.write_bytes(b"Pfoo\n.")
    with pytest.raises(UnsafePickleError, match="persistent"):
        load_plain_pickle(persistent)


def test_plain_containers_are_fine(tmp_path):
    obj = {"a": [1, 2.5, None, True], "b": (b"x", "y"), "c": {1, 2}, "d": frozenset({3})}
    assert load_plain_pickle(_write_pickle(tmp_path / "ok.pickle", obj)) == obj


@pytest.mark.parametrize("make, message", [
    (lambda p: None, "no such file"),
    (lambda p: p.write_bytes(b""), "empty"),
    (lambda p: p.write_bytes(pickle.dumps({"segments": list(range(1000))})[:200]), "truncated pickle"),
    (lambda p: p.write_bytes(gzip.compress(pickle.dumps({"segments": []}))[:15]), "truncated gzip"),
    (lambda p: p.write_bytes(b"{\"segments\": []}\n"), "not a readable pickle"),
    (lambda p: p.write_bytes(pickle.dumps([1, 2, 3])), "not a CUDA memory snapshot"),
    (lambda p: p.write_bytes(pickle.dumps({"device_traces": []})), "not a CUDA memory snapshot"),
    (lambda p: p.write_bytes(pickle.dumps({"segments": [{"device": 0}]})), "kitlib understands"),
])
def test_bad_files_get_clear_errors(tmp_path, make, message):
    p = tmp_path / "memory_snapshot.pickle"
    make(p)
    with pytest.raises(KitFileError, match=message) as info:
        load_memory_snapshot(p)
    assert str(p) in str(info.value)


def test_truncated_reference_is_reported(tmp_path, ref_path):
    cut = tmp_path / "cut.pickle"
    cut.write_bytes(ref_path.read_bytes()[:100_000])
    with pytest.raises(KitFileError, match="truncated pickle"):
        load_memory_snapshot(cut)
