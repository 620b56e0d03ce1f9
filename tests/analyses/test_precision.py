"""The ns the kit promises (issue 41, precision): each fault on the trace that showed it or
on a small trace built to show it, with the independent figure (plain Python ints and
``Decimal`` from the raw JSON, no kitlib) printed beside kitlib's.

1. ``stream_gaps`` classified a gap with the next launch's start as float64: at 1.7e18 ns
   (times since the epoch) the doubles are 256 ns apart, so a launch 100 ns after the
   stream went idle read as "before" and a host wait became a kernel wait (or "other").
2. ``chain`` reindexed its launch and operator tables with -1 for a GPU event without one,
   which made the int64 times float64: ±128 ns on a whole-µs trace since the epoch.
3. Copy bandwidth on a whole-µs trace: bytes ÷ the truncated duration read 6-16 % high;
   the profiler's own ``memory bandwidth (GB/s)`` (bytes ÷ the exact ns) is taken instead.
4. A whole-µs trace's truncation overrun (a child written ending 1 µs after its parent,
   the mis-nesting PyTorch fixed in its profiler, pytorch/pytorch PR #129554) stays the
   parent's child, and no self time anywhere is negative.
"""
from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from kitlib.analyses.chain import chain
from kitlib.analyses.four_measures import self_total
from kitlib.analyses.gpu_idle import stream_gaps
from kitlib.analyses.transfers import LINKS, copies, copy_summary
from kitlib.readers.trace import load_trace, trace_from_json
from support.events import exact_ns as _ns

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = ROOT / "tests" / "data" / "public-traces"
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}


def _exact_events(path: Path) -> list:
    """``traceEvents`` with every fraction as a Decimal (no float anywhere)."""
    b = path.read_bytes()
    if path.suffix == ".gz":
        b = gzip.decompress(b)
    d = json.loads(b, parse_float=Decimal)
    return d["traceEvents"] if isinstance(d, dict) else d


def _host_wait_by_stream(evs: list) -> dict:
    """Per (device, stream): ns of the gaps whose next GPU event was launched after the
    stream went idle (the end of everything before on it), worked out in Python ints."""
    launch = {}
    for e in evs:
        if e.get("ph") == "X" and e.get("cat") in LAUNCH_CATS and "correlation" in (e.get("args") or {}):
            launch.setdefault(e["args"]["correlation"], _ns(e["ts"]))
    by: dict = {}
    for e in evs:
        if e.get("ph") == "X" and e.get("cat") in GPU_CATS:
            a = e.get("args") or {}
            s = _ns(e["ts"])
            by.setdefault((a.get("device", e.get("pid")), a.get("stream")), []).append(
                (s, s + _ns(e["dur"]), a.get("correlation")))
    out = {}
    for key, lst in by.items():
        lst.sort(key=lambda t: (t[0], t[1]))
        reach, hw = lst[0][1], 0
        for s, e, c in lst[1:]:
            if s > reach and c in launch and launch[c] > reach:
                hw += s - reach
            reach = max(reach, e)
        out[key] = hw
    return out


def _kitlib_host_wait(tr) -> dict:
    g = stream_gaps(tr)
    return {(int(d), int(s)): int(v) for (d, s), v in
            g[g["category"] == "host_wait"].groupby(["device", "stream"])["dur_ns"].sum().items()}


# --- 1. gap classes at epoch times with ns fractions -------------------------------------

def _epoch_trace_text():
    """Two gaps on one stream at 1.7e18 ns, each after a launch made 100 ns after the stream
    went idle (host waits). The kernels end on multiples of 256 ns, which a float64 holds;
    end + 100 ns is not, and a float64 rounds it back onto the end."""
    m = 1712181098123456 * 1000
    m -= m % 256                                       # float64 holds m exactly
    evs, t = [], m
    def launch(ts, c):
        evs.append(f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,'
                   f'"ts":{Decimal(ts) / 1000},"dur":1.000,"args":{{"correlation":{c}}}}}')
    def kernel(name, ts, dur_ns, c):
        evs.append(f'{{"ph":"X","cat":"kernel","name":"{name}","pid":0,"tid":7,"ts":{Decimal(ts) / 1000},'
                   f'"dur":{Decimal(dur_ns) / 1000},"args":{{"stream":7,"device":0,"correlation":{c}}}}}')
    launch(t - 8_000, 1)
    kernel("a", t - 5_000, 5_000, 1)                   # ends at m
    launch(t + 100, 2)                                  # 100 ns after: a host wait
    kernel("b", t + 2_000, 256 * 20 - 2_000, 2)         # a short gap (2 µs): kernel wait if misread
    t2 = t + 256 * 20                                   # b ends here, a multiple of 256
    launch(t2 + 100, 3)
    kernel("c", t2 + 40_000, 1_000, 3)                  # a long gap (40 µs): "other" if misread
    return '{"traceEvents": [' + ",".join(evs) + "]}", m, t2


def test_epoch_ns_fractions_keep_the_gap_class(tmp_path):
    text, m, t2 = _epoch_trace_text()
    # the premise: a float64 cannot tell the launch from the end it follows
    assert float(m + 100) == float(m) and float(t2 + 100) == float(t2)
    p = tmp_path / "epoch.json"
    p.write_text(text)
    tr = load_trace(p)
    g = stream_gaps(tr)
    indep = _host_wait_by_stream(_exact_events(p))
    kit = _kitlib_host_wait(tr)
    print(f"host wait: kitlib {kit} ns, independent (Python ints from the JSON text) {indep} ns")
    print(g[["start_ns", "end_ns", "category", "next_launch_start_ns"]].to_string())
    assert list(g["category"]) == ["host_wait", "host_wait"]
    assert g["next_launch_start_ns"].tolist() == [m + 100, t2 + 100]
    assert kit == indep == {(0, 7): 2_000 + 40_000}


@pytest.mark.parametrize("name", ["tracelens_torch2.6_h100_bert_small.json.gz",
                                  "hta_2022-08_a100_rank3.json.gz"])
def test_public_host_wait_against_python_ints(name):
    """No public trace in the kit has epoch times with ns fractions (the TraceLens one has
    fractions on a relative clock, HTA's whole µs since the epoch): on both, kitlib's host
    wait per stream equals the independent figure to the ns."""
    p = PUBLIC / name
    indep = _host_wait_by_stream(_exact_events(p))
    kit = _kitlib_host_wait(load_trace(p))
    print(f"{name}: host wait per (device, stream), ns: kitlib {kit}, independent {indep}")
    assert kit == {k: v for k, v in indep.items() if v}


# --- 2. chain: exact launch and operator starts where a row is missing ---------------------

def test_chain_times_exact_when_a_launch_is_missing():
    """The 2021 ResNet-50 trace (whole µs since the epoch, 1.6e18 ns), with its first
    kernel launch taken out (as if made before the profiler's window opened): every launch
    and operator start in the chain equals the JSON's µs × 1000, to the ns."""
    evs = _exact_events(PUBLIC / "kineto_2021-06_resnet50_v100.json.gz")
    first = next(i for i, e in enumerate(evs) if e.get("cat") in LAUNCH_CATS and e.get("name") == "cudaLaunchKernel")
    gone = evs[first]["args"]["correlation"]
    evs = evs[:first] + evs[first + 1:]
    doc = json.loads(json.dumps({"traceEvents": evs}, default=float))   # its times are whole µs
    tr = trace_from_json(doc)
    c = chain(tr)
    assert (c["correlation"] == gone).sum() == 1 and c["launch_start_ns"].isna().sum() >= 1
    want_l = {e["args"]["correlation"]: _ns(e["ts"]) for e in evs
              if e.get("ph") == "X" and e.get("cat") in LAUNCH_CATS and "correlation" in e.get("args", {})}
    has = c["launch_start_ns"].notna()
    got_l = dict(zip(c.loc[has, "correlation"].astype(int), c.loc[has, "launch_start_ns"].astype(int)))
    off = [got_l[k] - want_l[k] for k in got_l]
    print(f"{len(got_l):,} launches; largest |kitlib - exact| = {max(map(abs, off))} ns; "
          f"e.g. kitlib {next(iter(got_l.values()))}, exact {want_l[next(iter(got_l))]}")
    assert off == [0] * len(off)
    ops = tr.ops
    has = c["op_row"] >= 0
    exact_op = {(e["name"], _ns(e["ts"])) for e in evs
                if e.get("ph") == "X" and e.get("cat") in ("Operator", "cpu_op", "user_annotation")}
    got_op = set(zip(c.loc[has, "op_name"], c.loc[has, "op_start_ns"].astype(int)))
    print(f"{len(got_op):,} distinct operators in the chain, {len(got_op - exact_op)} not at an exact start")
    assert got_op and got_op <= exact_op
    assert (c.loc[has, "op_start_ns"].to_numpy(np.int64) == ops.loc[c.loc[has, "op_row"], "start_ns"].to_numpy()).all()


# --- 3. copy bandwidth: the profiler's own figure ---------------------------------------------

def test_copy_bandwidth_is_the_profilers_own():
    """HTA's trace_diff control trace (A100, whole µs): DtoD max 934.0 GB/s as Kineto wrote it,
    where bytes ÷ the truncated µs gives 990.9; memsets are not copies."""
    p = PUBLIC / "hta_2022-08_a100_rank3.json.gz"
    evs = _exact_events(p)
    raw = [e for e in evs if e.get("ph") == "X" and e.get("cat") == "gpu_memcpy"]
    sets = [e for e in evs if e.get("ph") == "X" and e.get("cat") == "gpu_memset"]
    dtod = [e for e in raw if "DtoD" in e["name"]]
    own_max = max(Decimal(e["args"]["memory bandwidth (GB/s)"]) for e in dtod)
    naive_max = max(Decimal(e["args"]["bytes"]) / _ns(e["dur"]) for e in dtod)
    # the group's figure: all bytes over all exact times (bytes ÷ GB/s each)
    group = sum(e["args"]["bytes"] for e in dtod) / sum(
        Decimal(e["args"]["bytes"]) / Decimal(e["args"]["memory bandwidth (GB/s)"]) for e in dtod)
    tr = load_trace(p)
    cp = copies(tr)
    s = copy_summary(tr, by=("copy_kind",)).set_index("copy_kind")
    print(f"DtoD max: kitlib {cp.loc[cp['copy_kind'] == 'DtoD', 'gb_per_s'].max():.1f} GB/s, Kineto's own "
          f"{float(own_max):.1f} (bytes ÷ truncated µs: {float(naive_max):.1f}); DtoD group: kitlib "
          f"{s.loc['DtoD', 'gb_per_s']:.2f}, independent {float(group):.2f}; copies {len(cp)} "
          f"(JSON: {len(raw)} gpu_memcpy, {len(sets)} gpu_memset apart)")
    assert round(float(own_max), 1) == 934.0 and round(float(naive_max), 1) == 990.9
    assert cp.loc[cp["copy_kind"] == "DtoD", "gb_per_s"].max() == pytest.approx(float(own_max), rel=1e-12)
    assert s.loc["DtoD", "gb_per_s"] == pytest.approx(float(group), rel=1e-9)
    assert len(cp) == len(raw) == 228 and len(sets) == 654
    assert cp.attrs["device"] == "NVIDIA A100-PG509-200: datasheet peaks of the A100"
    assert s.loc["DtoD", "peak_gb_per_s"] == 1019.5 and s.loc["HtoD", "peak_gb_per_s"] == 32.0


def test_copy_bandwidth_without_the_arg_is_bytes_over_ns():
    """A copy without the profiler's figure: bytes ÷ dur_ns, as before."""
    cp = {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7,
          "ts": 10, "dur": 2, "args": {"stream": 7, "device": 0, "correlation": 1, "bytes": 100000}}
    got = copies(trace_from_json({"traceEvents": [cp]}), device="V100")
    print(f"kitlib {got['gb_per_s'][0]} GB/s, 100000 B / 2000 ns = {100000 / 2000}")
    assert got["gb_per_s"][0] == 50.0 and got["peak_gb_per_s"][0] == 16.0
    assert set(LINKS) >= {"A100", "V100", "H100", "H200", "B300"}


# --- 4. the whole-µs truncation overrun --------------------------------------------------------

def _overrun_events(fraction: str = ""):
    T = 1623142623529000
    ev = lambda n, ts, dur, cat="cpu_op": {"ph": "X", "cat": cat, "name": n, "pid": 1, "tid": 1,
                                           "ts": ts, "dur": dur, "args": {}}
    return [ev("ProfilerStep#1", T, 100, "user_annotation"),
            ev("aten::mm", T + 2, 99),                 # ends at T + 101: 1 µs after the step
            ev("aten::relu", T + 5, 10),
            ev("ProfilerStep#2", T + 101, 50, "user_annotation"),
            ev("aten::add", T + 110, 5)]


def test_overrun_of_one_us_stays_the_parents_child():
    tr = trace_from_json({"traceEvents": _overrun_events()})
    assert tr.meta["time_resolution_ns"] == 1000
    ops = tr.ops.set_index("name")
    h = tr.host_events
    self_ns = dict(zip(h["name"], h["dur_ns"] - h["children_ns"]))
    st = self_total(tr).set_index("name")["self_ns"].to_dict()
    step_row = tr.ops.index[tr.ops["name"] == "ProfilerStep#1"][0]
    # independent: the step holds mm from T+2 to its end at T+100: 98 µs of children, 2 µs self
    print(f"mm's parent: {ops.loc['aten::mm', 'parent']} (the step is row {step_row}); step self: "
          f"kitlib {self_ns['ProfilerStep#1']} ns, by hand 100 µs - 98 µs = 2000 ns; self_total {st}")
    assert ops.loc["aten::mm", "parent"] == step_row
    assert ops.loc["aten::relu", "parent"] == tr.ops.index[tr.ops["name"] == "aten::mm"][0]
    assert ops.loc["aten::add", "parent"] == tr.ops.index[tr.ops["name"] == "ProfilerStep#2"][0]
    assert self_ns["ProfilerStep#1"] == 2_000 and self_ns["aten::mm"] == 89_000
    assert tr.ops.loc[tr.ops["name"] == "aten::mm", "end_ns"].iloc[0] - \
        tr.ops.loc[step_row, "end_ns"] == 1_000                # the overrun is kept, not clamped
    assert min(self_ns.values()) >= 0 and min(st.values()) >= 0


def test_overrun_on_an_ns_trace_is_not_forgiven():
    """The tolerance is for whole-µs traces only: with ns in the times, an operator that
    ends 1 µs after the step is not its child."""
    evs = _overrun_events()
    evs[2]["dur"] = 10.001
    tr = trace_from_json({"traceEvents": evs})
    assert tr.meta["time_resolution_ns"] == 1
    assert tr.ops.set_index("name").loc["aten::mm", "parent"] == -1


def _recordings():
    found = sorted(p for base in ("tests/data", "data/reference")
                   for p in (ROOT / base).rglob("*.json*")
                   if p.name.startswith("trace.json") or (p.parent.name in ("public-traces", "public-other")
                                                           and ".json" in p.name))
    return found


@pytest.mark.parametrize("path", _recordings(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_negative_self_time_in_any_recording(path):
    """No operator, annotation, step or CUDA call has a negative self time (event tree and
    ``self_total``). Python frames are left out: a ``ProfilerStep`` opens inside one frame
    and closes inside the next, so a frame's children overlap and torch's own self CPU time
    is negative there too (``record_oracle_version.py(109): record``: -138.477 µs in
    ``tests/data/oracle_versions/torch-2.14/stack/expected_by_name_with_python.json``),
    which the oracle tests match."""
    tr = load_trace(path)
    h = tr.host_events
    h = h[h["kind"] != "python"]
    s = (h["dur_ns"] - h["children_ns"]).to_numpy()
    worst = int(s.min()) if len(s) else 0
    st = self_total(tr, kinds=("op", "annotation", "step"))
    worst_total = int(st["self_ns"].min()) if len(st) else 0
    print(f"{path.relative_to(ROOT)}: {len(h):,} host events (not Python frames), smallest self time {worst} ns, "
          f"smallest self_total {worst_total} ns (resolution {tr.meta['time_resolution_ns']} ns)")
    assert worst >= 0 and worst_total >= 0
