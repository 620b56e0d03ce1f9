"""The analyses added for issue 11's corrections, on the reference recordings."""
from pathlib import Path

import pytest

from kitlib.analyses import dataloader, flop_rates, host_calls
from kitlib.errors import KitError
from kitlib.readers.bundle import open_capture


def test_forward_host_time_is_mostly_not_cuda_calls(ref_trace):
    """Lesson 00: only 3.3-5.1 ms of each 20-35 ms forward range is inside CUDA API calls."""
    t = host_calls.cuda_api_time_in_label(ref_trace("profiler_5step"), "forward")
    assert t["step"].tolist() == [2, 3, 4, 5, 6]
    assert round(t["cuda_api_ns"].min() / 1e6, 2) == 3.28 and round(t["cuda_api_ns"].max() / 1e6, 2) == 5.05
    assert round(t["label_ns"].min() / 1e6, 1) == 20.0 and round(t["label_ns"].max() / 1e6, 1) == 34.7
    assert (t["cuda_api_share"] < 0.17).all() and (t["launch_calls"] == 232).all()
    assert (t["other_host_ns"] + t["cuda_api_ns"] == t["label_ns"]).all()
    with pytest.raises(KitError, match="no 'nope' label"):
        host_calls.cuda_api_time_in_label(ref_trace("profiler_5step"), "nope")


def test_the_slow_uninstrumented_step_is_batch_8_the_second_round():
    st = open_capture("profiler_5step").step_times()["step_ms_uninstrumented"]
    pos = dataloader.batch_positions(3, len(st), 14, 8)
    slow = pos.iloc[max(range(len(st)), key=st.__getitem__)]
    assert (slow["batch"], slow["worker"], slow["round"]) == (8, 0, 1)
    parts = dataloader.split_warmup(st, 3, 14, 8)
    assert len(parts["warm-up"]) == 6 and [round(v, 1) for v in parts["steady"]] == [48.7, 44.1, 44.2, 44.2]
    with pytest.raises(KitError, match="num_workers"):
        dataloader.batch_positions(0, 3, 14, 0)


def test_profiler_cost_shows_once_the_loader_warmup_is_set_apart():
    """Lesson 10: against the whole series within the noise; against the steady steps, slower."""
    from kitlib.analyses.compare import compare
    from kitlib.analyses.steps import active_step_times
    cap = open_capture("profiler_5step")
    st = cap.step_times()
    prof = active_step_times(cap, st)["step_ms_profiled_all_attribution"]
    assert compare(st["step_ms_uninstrumented"], prof).verdict == "no difference beyond the noise"
    steady = dataloader.split_warmup(st["step_ms_uninstrumented"], 3, 14, 8)["steady"]
    assert compare(steady, prof).verdict == "slower"


def test_matched_rates_pair_flops_with_the_time_of_the_same_work():
    cap = open_capture("fixed_batch")
    r = flop_rates.matched_rates(cap.trace, cap.read_json("flop_counter_one_step.json"))
    assert list(r.index) == ["forward convolutions", "convolutions, forward + backward", "whole step"]
    assert r["tflop_per_step"].round(3).tolist() == [1.046, 3.109, 3.109]
    assert r["tflops_estimate"].round(0).tolist() == [206.0, 174.0, 75.0]
    # the convolutions' device time (forward + backward) is a part of the step's busy time
    assert r.loc["convolutions, forward + backward", "device_ms_per_step"] < r.loc["whole step", "device_ms_per_step"]


def test_matched_rates_every_cell_from_the_profilers_own_figures():
    """Lesson 08's rate table, each cell derived here from figures kitlib did not make: the
    profiler's key_averages() rows of fixed_batch (aten::conv2d's FLOPs; the device time of
    aten::cudnn_convolution, 25,404.581 µs, and of aten::convolution_backward, 63,830.301 µs,
    over 5 steps), FlopCounterMode's count of one step (flop_counter_one_step.json), and the
    union of the GPU events that have a launch in the trace, merged here from the raw JSON
    (208,142,483 ns over the 5 steps)."""
    import gzip
    import json
    cap = open_capture("fixed_batch")
    counts = cap.read_json("flop_counter_one_step.json")
    ka = {x["key"]: x for x in cap.key_averages()["by_name"]}
    fwd_ns = round(ka["aten::cudnn_convolution"]["device_time_total_us"] * 1000)
    bwd_ns = round(ka["aten::convolution_backward"]["device_time_total_us"] * 1000)
    assert (fwd_ns, bwd_ns, ka["aten::conv2d"]["flops"]) == (25_404_581, 63_830_301, 5_231_534_407_680)
    ev = json.loads(gzip.decompress(cap.file("trace.json.gz").read_bytes()))["traceEvents"]
    launched = {e["args"]["correlation"] for e in ev
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    spans = sorted((round(e["ts"] * 1000), round(e["ts"] * 1000) + round(e["dur"] * 1000)) for e in ev
                   if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e["args"].get("correlation") in launched)
    busy, cur = 0, list(spans[0])
    for a, b in spans[1:]:
        if a > cur[1]:
            busy, cur = busy + cur[1] - cur[0], [a, b]
        else:
            cur[1] = max(cur[1], b)
    busy += cur[1] - cur[0]
    assert busy == 208_142_483
    n = 5
    flops = [ka["aten::conv2d"]["flops"] / n,
             counts["by_op"]["aten.convolution"] + counts["by_op"]["aten.convolution_backward"], counts["total"]]
    device_ns = [fwd_ns / n, (fwd_ns + bwd_ns) / n, busy / n]
    r = flop_rates.matched_rates(cap.trace, counts)
    assert r.columns.tolist() == ["flops_from", "time_of", "tflop_per_step", "device_ms_per_step", "tflops_estimate"]
    assert r["flops_from"].tolist() == ["with_flops: aten::conv2d",
                                        "FlopCounterMode: aten.convolution + aten.convolution_backward",
                                        "FlopCounterMode: total"]
    assert r["time_of"].tolist() == ["kernels under aten::conv2d",
                                     "kernels under aten::conv2d and aten::convolution_backward",
                                     "GPU busy time (every kernel, copy and memset launched in the window)"]
    # the same arithmetic in the same order: equal to the last bit
    assert r["tflop_per_step"].tolist() == [f / 1e12 for f in flops]
    assert r["device_ms_per_step"].tolist() == [d / 1e6 for d in device_ns]
    assert r["tflops_estimate"].tolist() == [f / (d * 1e-9) / 1e12 for f, d in zip(flops, device_ns)]


def test_every_same_stream_overlap_was_launched_with_cudaLaunchKernelExC(ref_trace):
    """Lesson 03: 130 kernels start before their predecessor on the stream ends, all from ExC launches."""
    from kitlib.analyses.chain import chain
    from kitlib.analyses.overlap import same_stream_overlaps
    c = chain(ref_trace("profiler_5step"))
    ov = same_stream_overlaps(c)
    assert len(ov) == 130 and set(ov["launch_name"]) == {"cudaLaunchKernelExC"}
    assert (ov["overlap_ns"] > 0).all() and ov["overlap_ns"].max() == 30657
    assert (c.loc[c["gpu_kind"] == "kernel", "launch_name"] == "cudaLaunchKernelExC").sum() == 920


def _first_data_load(rep):
    from kitlib.analyses.coldstart import data_load_ranges
    dl = data_load_ranges(rep)
    main = int(rep.nvtx.loc[rep.nvtx["name"] == "data_load", "tid"].iloc[0])
    return int(dl["start_ns"].iloc[0]), int(dl["end_ns"].iloc[0]), main


def test_pin_thread_serial_host_allocs_in_the_first_data_load():
    """Lesson 04: 17 cudaHostAlloc on pt_data_pin, 475.9 ms, from 764 ms to the range's end."""
    from kitlib.analyses import pinning
    rep = open_capture("nsys_8step").nsys
    s, e, main = _first_data_load(rep)
    a = pinning.pin_thread_allocs(rep, s, e)
    assert len(a) == 17 and int(a["large"].sum()) == 9
    assert round(a["dur_ns"].sum() / 1e6, 1) == 475.9
    assert round(a["start_in_window_ns"].iloc[0] / 1e6) == 764 and e - a["end_ns"].iloc[-1] < 1_000_000
    w = pinning.main_thread_waits(rep, s, e, main)
    assert round(w["dur_ns"].max() / 1e6) == 665          # waiting for the first batch
    wake = pinning.wakes_after_pinning(w, a)
    assert wake["pinning_cycle"].tolist() == list(range(1, 9))   # once per pinning cycle; batch 0 came 8th
    with pytest.raises(KitError, match="no thread named"):
        pinning.pin_thread_allocs(rep, s, e, thread="nope")


def test_main_thread_lock_released_when_the_pin_threads_host_alloc_returns():
    from kitlib.analyses import pinning
    rep = open_capture("nsys_8step").nsys
    s, e, main = _first_data_load(rep)
    c = pinning.lock_contention(rep, s, e, main)
    assert len(c) == 1
    r = c.iloc[0]
    assert (r["inside_call"], r["other_thread"], r["other_call"]) == ("cudaMemcpyAsync", "pt_data_pin", "cudaHostAlloc")
    assert round(r["lock_dur_ns"] / 1e6) == 64 and 0 < r["granted_after_other_returned_ns"] < 50_000


def test_matched_rates_say_what_is_missing(tmp_path):
    """A rate per step needs steps, and the convolutions' device time: a CPU recording (the
    oracle's resnet18) has the first and not the second; a hand-built trace has neither."""
    import json
    import kitlib
    cpu = Path(__file__).resolve().parents[2] / "tests" / "data" / "oracle-cpu" / "resnet18" / "trace.json.gz"
    with pytest.raises(KitError, match=r"resnet18/trace\.json\.gz: no device time under aten::conv2d$"):
        flop_rates.matched_rates(kitlib.load_trace(cpu), {"total": 1, "by_op": {}})
    bare = tmp_path / "no_steps.json"
    bare.write_text(json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1,
                                                 "tid": 1, "ts": 0, "dur": 1}]}))
    with pytest.raises(KitError, match=r"no_steps\.json: rates per step need ProfilerStep#N annotations$"):
        flop_rates.matched_rates(kitlib.load_trace(bare), {"total": 1, "by_op": {}})


def test_same_stream_overlaps_on_paper():
    """Worked by hand on one stream: kernels [0, 100], [100, 150] (starts exactly at the
    end: not an overlap), [120, 130] (inside the previous: 10 ns), [140, 200] (the latest
    end so far is 150: 10 ns); a copy and another stream's kernel never count."""
    import pandas as pd
    from kitlib.analyses.overlap import same_stream_overlaps
    c = pd.DataFrame({"gpu_kind": ["kernel"] * 5 + ["memcpy"],
                      "device": [0] * 6, "stream": [7, 7, 7, 7, 8, 7],
                      "gpu_name": ["a", "b", "c", "d", "other", "copy"],
                      "gpu_start_ns": [0, 100, 120, 140, 10, 125], "gpu_dur_ns": [100, 50, 10, 60, 5, 10],
                      "launch_name": ["cudaLaunchKernel"] * 6})
    o = same_stream_overlaps(c)
    assert o.columns.tolist() == ["device", "stream", "gpu_name", "gpu_start_ns", "gpu_dur_ns", "launch_name",
                                  "overlap_ns"]
    assert o["gpu_name"].tolist() == ["c", "d"] and o["overlap_ns"].tolist() == [10, 10]
    assert str(o["overlap_ns"].dtype) == "int64" and o.index.tolist() == [0, 1]
