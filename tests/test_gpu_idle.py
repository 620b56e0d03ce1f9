"""Why is the GPU idle? (issue 28): kitlib.analyses.gpu_idle, launch_stats and copies.

Three kinds of check:

1. A tiny hand-written trace, every figure worked out on paper below (gaps exactly at the
   30 µs threshold and 1 ns under it, a launch exactly at a kernel's end, a gap across a
   step boundary, two streams, a kernel with no launch, a launch call at exactly 10× its
   API's median and one above, a kernel of exactly 5 µs).
2. The kit's recordings (``profiler_5step``, ``fixed_batch``, the Nsight export
   ``nsys_8step``): the expected figures are computed here from the raw JSON / SQLite with
   plain Python, without kitlib.
3. Holistic Trace Analysis 0.5.0, whose figures ``tools/hta_figures.py`` wrote to
   ``tests/data/hta/hta_figures.json`` (HTA is not installed here: it needs other versions of
   pandas and plotly). Once the known differences are applied, the figures agree exactly.
   The known differences, applied to kitlib's tables before comparing:

   - HTA drops the last ``ProfilerStep`` (``Trace._filter_irrelevant_gpu_kernels``: CPU
     events from the last step's start on, and every GPU event whose correlation matches no
     CPU event left) when a trace has two or more; with one, it drops nothing;
   - so HTA also drops GPU events whose launch is not in the trace (kitlib keeps them and
     calls the gap before one ``no_launch``);
   - HTA rounds ns to µs: starts up (``ceil``), ends down (``floor``), launches too
     (``round_down_time_stamps``);
   - HTA's launch queue counts only launches named ``cudaLaunchKernel``,
     ``cudaLaunchKernelExC``, ``cuLaunchKernel``, ``cudaMemcpyAsync``, ``cudaMemsetAsync``
     (``get_runtime_launch_events_query``: not ``cudaLaunchCooperativeKernel``), and
     counts until the GPU event *starts* (kitlib's ``until="start"``).

   Differences that remain, each checked for what it is:

   - **Overlapping GPU events on one stream** (Hopper's programmatic dependent launch: 130
     pairs in ``profiler_5step``): HTA's gap is the start minus the previous row's end, so an
     overlap adds a *negative* "gap" (below 30 µs: kernel wait), and the gap after an event
     that ends inside its predecessor is measured from that inner end. kitlib measures from
     the end of everything before and counts only positive gaps. On the H200 traces HTA's
     kernel wait is 1,178 µs (``fixed_batch``) and 1,139 µs (``profiler_5step``) lower than
     kitlib's; HTA's rule applied to kitlib's rows gives HTA's figures exactly.
   - **Sub-µs events after rounding** get an end before their start; HTA's interval merge
     (``merge_kernel_intervals``) then counts a negative busy time for one that starts a
     group of its own. The temporal breakdown differs by at most 1 µs per such event (0 on
     traces without them).
   - **A CPU operator with a ``stream`` argument** (Triton's launcher
     ``triton_poi_fused_add_cos_sin_0`` in the Triton trace) is a GPU event for HTA (stream
     0), so HTA's span there is 94 µs where kitlib's (one kernel) is 1 µs.
"""
from __future__ import annotations

import gzip
import json
import math
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from kitlib.analyses import transfers as C
from kitlib.analyses import gpu_idle as G
from kitlib.analyses import kernel_launches as LS
from kitlib.readers.trace import load_trace, trace_from_json

from conftest import PUBLIC, REF, ROOT, raw_trace_events, sql_rows

US = 1000          # ns per µs

# --------------------------------------------------------------------------- 1. the tiny trace
# Host thread (pid 1, tid 1), times in µs; device 0, streams 7 and 9:
#
#   ProfilerStep#1 [0, 100)                     ProfilerStep#2 [100, 200)
#     aten::mm [0, 25)  ext 1: L1 [1, 2) L2 [3, 4) L3 [20, 21) L7 [2, 2.5)
#     aten::relu [88, 100) ext 3: L4 [90, 100)    aten::add_ [104, 125) ext 2: L5 [105, 116) L6 [121, 122)
#
#   stream 7: K1 [5, 15) (L1)  K2 [45, 55) (L2)  K3 [84.999, 90) (L3)  K4 [95, 98) (L4)
#             K5 [110, 115) (L5)  M6 memcpy HtoD pinned 640,000 B [130, 140) (L6)
#   stream 9: S7 memset 1,000 B [12, 20) (L7)    K8 [138, 150), correlation 99: no launch
#
# Gaps on stream 7 (threshold 30 µs, strict):
#   [15, 45)      30 µs       L2 (3) <= 15: queued; 30 µs is not < 30 µs       -> other
#   [55, 84.999)  29.999 µs   L3 (20) <= 55: queued; < 30 µs                    -> kernel wait
#   [90, 95)      5 µs        L4 starts at 90 = K3's end: queued from the gap's first instant -> kernel wait
#   [98, 110)     12 µs       L5 (105) > 98: host wait, cut at 100: 2 µs in step 1, 10 µs in step 2
#   [115, 130)    15 µs       L6 (121) > 115: host wait (step 2)
# Stream 9: [20, 138) 118 µs before K8, whose launch is unknown -> no_launch: 80 µs in step 1, 38 in step 2.
#
# Per step, stream 7:  step 1: busy 10 + 10 + 5.001 + 3 = 28.001; host 2, kernel 29.999 + 5 = 34.999,
#   other 30 -> gaps 66.999; no work before K1: 5 (28.001 + 66.999 + 5 = 100).
#   step 2: busy 5 + 10 = 15; host 10 + 15 = 25; no work 100 - 15 - 25 = 60.
# Stream 9: step 1 busy 8, no_launch 80, no work 12; step 2 busy 12, no_launch 38, no work 50.
# Over the recording: stream 7 spans [5, 140) = 135 = busy 43.001 + host 27 + kernel 34.999 + other 30;
#   stream 9 spans [12, 150) = 138 = busy 20 + no_launch 118.
TINY_STEPS = [(1, 0, 100), (2, 100, 200)]


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _gpu(cat, name, ts, dur, stream, corr, **args):
    return _x(cat, name, ts, dur, pid=0, tid=stream, device=0, stream=stream, correlation=corr, **args)


def tiny_events():
    rt = lambda name, ts, dur, corr, ext: _x("cuda_runtime", name, ts, dur, correlation=corr,
                                             **{"External id": ext})
    op = lambda name, ts, dur, ext: _x("cpu_op", name, ts, dur, **{"External id": ext})
    return [
        _x("user_annotation", "ProfilerStep#1", 0, 100), _x("user_annotation", "ProfilerStep#2", 100, 100),
        op("aten::mm", 0, 25, 1), op("aten::relu", 88, 12, 3), op("aten::add_", 104, 21, 2),
        rt("cudaLaunchKernel", 1, 1, 1, 1), rt("cudaLaunchKernel", 3, 1, 2, 1),
        rt("cudaLaunchKernel", 20, 1, 3, 1), rt("cudaMemsetAsync", 2, 0.5, 7, 1),
        rt("cudaLaunchKernel", 90, 10, 4, 3),
        rt("cudaLaunchKernel", 105, 11, 5, 2), rt("cudaMemcpyAsync", 121, 1, 6, 2),
        _gpu("kernel", "K1", 5, 10, 7, 1), _gpu("kernel", "K2", 45, 10, 7, 2),
        _gpu("kernel", "K3", 84.999, 5.001, 7, 3), _gpu("kernel", "K4", 95, 3, 7, 4),
        _gpu("kernel", "K5", 110, 5, 7, 5),
        _gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 130, 10, 7, 6, bytes=640_000),
        _gpu("gpu_memset", "Memset (Device)", 12, 8, 9, 7, bytes=1000),
        _gpu("kernel", "K8", 138, 12, 9, 99),
    ]


@pytest.fixture(scope="module")
def tiny():
    return trace_from_json({"traceEvents": tiny_events()}, "tiny_gpu_idle.json")


def test_tiny_events_joined(tiny):
    ev = G.device_events(tiny)
    assert list(ev.columns) == G.EVENT_COLUMNS
    assert ev[["stream", "name"]].values.tolist() == [
        [7, "K1"], [7, "K2"], [7, "K3"], [7, "K4"], [7, "K5"], [7, "Memcpy HtoD (Pinned -> Device)"],
        [9, "Memset (Device)"], [9, "K8"]]
    assert ev["launch_start_ns"].isna().tolist() == [False] * 7 + [True]
    assert ev.loc[5, ["copy_kind", "src_memory", "dst_memory", "bytes"]].tolist() == ["HtoD", "Pinned", "Device", 640_000]
    assert ev["op_name"].tolist()[:6] == ["aten::mm"] * 3 + ["aten::relu", "aten::add_", "aten::add_"]


def test_tiny_gaps(tiny):
    g = G.stream_gaps(tiny)
    assert g[["stream", "step", "start_ns", "end_ns", "category"]].values.tolist() == [
        [7, 1, 15 * US, 45 * US, "other"],               # exactly 30 µs: not under the threshold
        [7, 1, 55 * US, 84_999, "kernel_wait"],          # 1 ns under it
        [7, 1, 90 * US, 95 * US, "kernel_wait"],         # launch at exactly the kernel's end
        [7, 1, 98 * US, 100 * US, "host_wait"],          # one host wait, cut at the step boundary
        [7, 2, 100 * US, 110 * US, "host_wait"],
        [7, 2, 115 * US, 130 * US, "host_wait"],
        [9, 1, 20 * US, 100 * US, "no_launch"],
        [9, 2, 100 * US, 138 * US, "no_launch"]]
    assert g["gap"].tolist() == [0, 1, 2, 3, 3, 4, 5, 5]
    assert g["gap_ns"].tolist()[3:5] == [12 * US, 12 * US]
    # a threshold of 29,999 ns makes the 29,999-ns gap "other" (strict), 30,001 makes 30 µs kernel wait
    assert G.stream_gaps(tiny, kernel_wait_max_ns=29_999)["category"].tolist()[1] == "other"
    assert G.stream_gaps(tiny, kernel_wait_max_ns=30_001)["category"].tolist()[0] == "kernel_wait"


def test_tiny_breakdown_by_step(tiny):
    b = G.idle_breakdown(tiny)
    cols = ["step", "stream", "window_ns", "busy_ns", "host_wait_ns", "kernel_wait_ns", "other_ns",
            "no_launch_ns", "gaps_ns", "no_work_ns", "gaps"]
    assert b[cols].values.tolist() == [
        [1, 7, 100 * US, 28_001, 2 * US, 34_999, 30 * US, 0, 66_999, 5 * US, 4],
        [1, 9, 100 * US, 8 * US, 0, 0, 0, 80 * US, 80 * US, 12 * US, 1],
        [2, 7, 100 * US, 15 * US, 25 * US, 0, 0, 0, 25 * US, 60 * US, 2],
        [2, 9, 100 * US, 12 * US, 0, 0, 0, 38 * US, 38 * US, 50 * US, 1]]
    assert (b["busy_ns"] + b["gaps_ns"] + b["no_work_ns"] == b["window_ns"]).all()


def test_tiny_breakdown_over_the_recording(tiny):
    b = G.idle_breakdown(tiny, by="recording")
    assert b[["stream", "window_ns", "busy_ns", "host_wait_ns", "kernel_wait_ns", "other_ns", "no_launch_ns",
              "gaps"]].values.tolist() == [
        [7, 135 * US, 43_001, 27 * US, 34_999, 30 * US, 0, 5],        # the host wait across the boundary: one gap
        [9, 138 * US, 20 * US, 0, 0, 0, 118 * US, 1]]


def test_tiny_queue_length(tiny):
    # stream 7, until the end: +1 at each launch's start, -1 at each event's end; at 90 µs
    # L4 starts as K3 ends: the length stays 1 (no row). Stream 9: S7 only (K8 has no launch).
    q = G.queue_length(tiny)
    assert q[["stream", "time_ns", "queue_length"]].values.tolist() == [
        [7, 1 * US, 1], [7, 3 * US, 2], [7, 15 * US, 1], [7, 20 * US, 2], [7, 55 * US, 1], [7, 98 * US, 0],
        [7, 105 * US, 1], [7, 115 * US, 0], [7, 121 * US, 1], [7, 140 * US, 0],
        [9, 2 * US, 1], [9, 20 * US, 0]]
    assert q.attrs["left_out"] == 1
    # until the start (HTA's counter): the length falls when each event starts
    qs = G.queue_length(tiny, until="start")
    assert qs[qs["stream"] == 7][["time_ns", "queue_length"]].values.tolist() == [
        [1 * US, 1], [3 * US, 2], [5 * US, 1], [20 * US, 2], [45 * US, 1], [84_999, 0], [90 * US, 1],
        [95 * US, 0], [105 * US, 1], [110 * US, 0], [121 * US, 1], [130 * US, 0]]


def test_tiny_queue_summary(tiny):
    # step 1, stream 7: 0 on [0,1), 1 on [1,3), 2 on [3,15), 1 on [15,20), 2 on [20,55), 1 on [55,98),
    #   0 on [98,100): integral 2 + 24 + 5 + 70 + 43 = 144 µs -> mean 1.44; max 2; empty 1 + 2 = 3 µs.
    # step 2, stream 7: 1 on [105,115) and [121,140): integral 29 µs -> 0.29; empty 5 + 6 + 60 = 71 µs.
    # stream 9: 1 on [2, 20): 0.18 and empty 82 µs in step 1; nothing in step 2.
    s = G.queue_summary(tiny)
    assert s[["step", "stream", "queue_length_max", "queue_empty_ns", "queue_full_ns", "blocked_host_ns"]].values.tolist() == [
        [1, 7, 2, 3 * US, 0, 0], [1, 9, 1, 82 * US, 0, 0], [2, 7, 1, 71 * US, 0, 0], [2, 9, 0, 100 * US, 0, 0]]
    assert s["queue_length_mean"].tolist() == pytest.approx([1.44, 0.18, 0.29, 0.0], abs=1e-12)
    assert "no stream's queue ever reached 1,024" in s.attrs["note"]
    # a queue limit of 2: stream 7 is full on [3,15) and [20,55) in step 1 = 47 µs; L3 began at 20 µs
    # with 1 queued (not full); no launch began while 2 were queued, so nothing was blocked
    s2 = G.queue_summary(tiny, max_queue_length=2)
    assert s2.loc[0, ["queue_full_ns", "blocked_launches"]].tolist() == [47 * US, 0]
    # limit 1: L2 (3 µs) and L7 ... L7 is on stream 9; on stream 7, L2 began with 1 queued (1 µs of
    # host time) and L3 began with 1 queued (1 µs): 2 launches, 2 µs blocked in step 1
    s1 = G.queue_summary(tiny, max_queue_length=1)
    assert s1.loc[0, ["blocked_launches", "blocked_host_ns"]].tolist() == [2, 2 * US]


def test_tiny_concurrency(tiny):
    # step 1: stream 7 busy 28.001 µs, stream 9 busy [12, 20) = 8 µs, both on [12, 15) = 3 µs:
    #   union 33.001 -> two streams 3, one 30.001, none 66.999. Step 2: [138, 140) both: 2 µs;
    #   union 15 + 12 - 2 = 25 -> one 23, none 75.
    c = G.stream_concurrency(tiny)
    assert c[["step", "streams", "streams_0_ns", "streams_1_ns", "streams_2plus_ns", "streams_max"]].values.tolist() == [
        [1, 2, 66_999, 30_001, 3 * US, 2], [2, 2, 75 * US, 23 * US, 2 * US, 2]]
    # over [5, 150) = 145 µs: union 43.001 + 20 - 5 = 58.001; both busy 3 + 2 = 5
    r = G.stream_concurrency(tiny, by="recording")
    assert r[["window_ns", "streams_0_ns", "streams_1_ns", "streams_2plus_ns"]].values.tolist() == [
        [145 * US, 86_999, 53_001, 5 * US]]


def test_tiny_verdicts(tiny):
    # the device's queue (both streams) is empty on [0,1) and [98,100) in step 1 (3 µs, 3 %); the
    # device is busy 33.001 % of it: neither CPU-bound (< 20 %) nor GPU-bound (busy < 90 %) -> mixed.
    # Step 2: empty 71 % -> CPU-bound; host wait 10 + 15 = 25 µs.
    v = G.step_verdicts(tiny)
    assert v[["step", "wall_ns", "device_busy_ns", "queue_empty_ns", "host_wait_ns", "queue_length_max",
              "verdict"]].values.tolist() == [
        [1, 100 * US, 33_001, 3 * US, 2 * US, 3, "mixed"], [2, 100 * US, 25 * US, 71 * US, 25 * US, 1, "CPU-bound"]]
    assert v["queue_length_mean"].tolist() == pytest.approx([1.62, 0.29], abs=1e-12)
    assert v.loc[1, "evidence"].startswith("queue empty 71.0 % of the step (0.071 of 0.100 ms), GPU busy 25.0 %")
    # the rule's edges: at exactly 20 % empty a step is CPU-bound; at 90 % busy and 5 % empty, GPU-bound
    assert G.step_verdicts(tiny, cpu_bound_empty_share=0.71)["verdict"].tolist() == ["mixed", "CPU-bound"]
    assert G.step_verdicts(tiny, gpu_bound_empty_share=0.03, gpu_bound_busy_share=0.33001,
                           cpu_bound_empty_share=0.9)["verdict"].tolist() == ["GPU-bound", "mixed"]


def test_tiny_launch_stats(tiny):
    ls = LS.launch_stats(tiny)
    assert ls[["step", "op_name", "launch_name", "launch_dur_ns", "queue_delay_ns", "outlier", "short_kernel"]].values.tolist() == [
        [1, "aten::mm", "cudaLaunchKernel", 1 * US, 4 * US, False, False],       # K1
        [1, "aten::mm", "cudaMemsetAsync", 500, 10 * US, False, False],           # S7
        [1, "aten::mm", "cudaLaunchKernel", 1 * US, 42 * US, False, False],      # K2
        [1, "aten::mm", "cudaLaunchKernel", 1 * US, 64_999, False, False],       # K3: 5.001 µs, not short
        [1, "aten::relu", "cudaLaunchKernel", 10 * US, 5 * US, False, True],     # K4: exactly 10 x the median
        [2, "aten::add_", "cudaLaunchKernel", 11 * US, 5 * US, True, False],     # K5: 11 x; exactly 5 µs
        [2, "aten::add_", "cudaMemcpyAsync", 1 * US, 9 * US, False, False]]      # M6
    assert ls["api_median_launch_ns"].tolist()[0] == 1 * US and ls.attrs["left_out"] == 1
    s = LS.launch_summary(tiny)
    assert s[["step", "op_name", "launches", "kernels", "launch_sum_ns", "launch_median_ns", "launch_max_ns",
              "queue_delay_median_ns", "queue_delay_max_ns", "outliers", "short_kernels", "gpu_sum_ns"]].values.tolist() == [
        [2, "aten::add_", 2, 1, 12 * US, 1 * US, 11 * US, 5 * US, 9 * US, 1, 0, 15 * US],
        [1, "aten::relu", 1, 1, 10 * US, 10 * US, 10 * US, 5 * US, 5 * US, 0, 1, 3 * US],
        [1, "aten::mm", 4, 3, 3500, 1 * US, 1 * US, 10 * US, 64_999, 0, 0, 33_001]]
    assert s["short_kernel_share"].tolist() == [0.0, 1.0, 0.0]
    by_step = LS.launch_summary(tiny, by=("step",))
    assert by_step[["step", "launches", "kernels", "short_kernels"]].values.tolist() == [[1, 5, 4, 1], [2, 2, 1, 0]]
    assert by_step["short_kernel_share"].tolist() == [0.25, 0.0]


def test_tiny_copies(tiny):
    cp = C.copies(tiny, device="H200")
    # 640,000 bytes in 10 µs = 64 GB/s = the H200's PCIe Gen5 x16 per direction; K8 [138, 150)
    # runs beside the copy [130, 140) for 2 µs
    assert cp[["step", "copy_kind", "host_memory", "bytes", "dur_ns", "gb_per_s", "peak_gb_per_s",
               "share_of_peak", "kernel_overlap_ns"]].values.tolist() == [
        [2, "HtoD", "Pinned", 640_000, 10 * US, 64.0, 64.0, 1.0, 2 * US]]
    assert C.copies(tiny, device="B300")["peak_gb_per_s"].tolist() == [128.0]
    unknown = C.copies(tiny)                  # the trace names no GPU
    assert np.isnan(unknown["peak_gb_per_s"].iloc[0]) and "no datasheet peak" in unknown.attrs["device"]
    s = C.copy_summary(tiny, device="H200")
    assert s[["copy_kind", "host_memory", "copies", "bytes", "dur_ns", "gb_per_s", "kernel_overlap_share"]].values.tolist() == [
        ["HtoD", "Pinned", 1, 640_000, 10 * US, 64.0, 0.2]]


def test_tiny_temporal(tiny):
    # [5, 150): 145 µs; busy union 58.001; compute = kernels K1-K5, K8: 10+10+5.001+3+5+12 = 45.001
    t = G.temporal_breakdown(tiny)
    assert t[["span_ns", "idle_ns", "compute_ns", "non_compute_ns"]].values.tolist() == [
        [145 * US, 145 * US - 58_001, 45_001, 13 * US]]


# --------------------------------------------------------------------------- bad input
def test_cpu_only_trace_is_told_so():
    tr = load_trace(PUBLIC / "hta_2024-07_cpu_only.json.gz")
    for fn in (G.stream_gaps, G.idle_breakdown, G.queue_length, G.queue_summary, G.stream_concurrency,
               G.temporal_breakdown, G.step_verdicts, LS.launch_stats, C.copies):
        with pytest.raises(G.GpuIdleError, match="no GPU events.*CPU-only") as info:
            fn(tr)
        assert "hta_2024-07_cpu_only.json.gz" in str(info.value)


def test_trace_without_launches():
    ev = [e for e in tiny_events() if e["cat"] != "cuda_runtime"]
    tr = trace_from_json({"traceEvents": ev}, "no_launches.json")
    for fn in (G.stream_gaps, G.idle_breakdown, G.queue_length, G.queue_summary, G.step_verdicts, LS.launch_stats):
        with pytest.raises(G.GpuIdleError, match="no_launches.json: none of its 8 GPU events has its launch"):
            fn(tr)
    # what needs no launch still answers: streams busy, the temporal breakdown, the copies
    assert G.stream_concurrency(tr)["streams_2plus_ns"].tolist() == [3 * US, 2 * US]
    assert C.copies(tr, device="H200")["gb_per_s"].tolist() == [64.0]


def test_one_stream_says_concurrency_cannot_occur(ref_trace):
    c = G.stream_concurrency(ref_trace("profiler_5step"))
    assert (c["streams_2plus_ns"] == 0).all() and (c["streams"] == 1).all()
    assert "one stream only" in c.attrs["note"]


def test_no_steps_and_no_copies():
    ev = [e for e in tiny_events() if not e["name"].startswith("ProfilerStep")]
    tr = trace_from_json({"traceEvents": ev}, "no_steps.json")
    with pytest.raises(G.GpuIdleError, match="no_steps.json: no steps found"):
        G.idle_breakdown(tr)
    assert G.idle_breakdown(tr, by="recording")["host_wait_ns"].tolist() == [27 * US, 0]
    assert G.stream_gaps(tr)["step"].isna().all()
    ev = [e for e in tiny_events() if e["cat"] != "gpu_memcpy"]
    with pytest.raises(G.GpuIdleError, match="no copies .*6 kernel, 1 memset"):
        C.copies(trace_from_json({"traceEvents": ev}, "no_copies.json"))
    with pytest.raises(G.GpuIdleError, match="expected a kitlib Trace"):
        G.device_events(pd.DataFrame())
    with pytest.raises(ValueError, match="until"):
        G.queue_length(trace_from_json({"traceEvents": tiny_events()}), until="middle")
