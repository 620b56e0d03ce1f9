"""Lesson 08's answers (issue 31), each worked out here from the tools' own files, without the
exercise code or kitlib's analyses: the raw trace JSON of ``fixed_batch`` (orjson), the
profiler's ``key_averages()`` rows (``fixed_batch/key_averages.json.gz``, its ``flops`` column),
FlopCounterMode's ``flop_counter_one_step.json``, the printed table of ``profiler_5step``
(``key_averages_tables.txt``) and the H200 datasheet figures. Each question must accept that
figure and reject the near misses a learner makes: 5 % off, MACs for FLOPs, the stride forgotten,
the neighbouring recording, the FLOPs of other work, elements for bytes."""
from __future__ import annotations

import gzip
import json
import re

import pytest

from conftest import REF, merged_length, per_raw, raw_trace_events, unwrapped

H200_TF32_TFLOPS, H200_TB_PER_S = 494.5, 4.8        # dense TF32 (989 "with sparsity" ÷ 2); HBM3e, datasheet


@pytest.fixture(scope="module")
def key_averages_doc():
    return json.loads(gzip.decompress((REF / "fixed_batch" / "key_averages.json.gz").read_bytes()))


@pytest.fixture(scope="module")
def counter():
    return json.loads((REF / "fixed_batch" / "flop_counter_one_step.json").read_text())


def _conv_flops(e):
    """2·N·H_out·W_out·K_h·K_w·C_in·C_out/groups from a raw aten::conv2d event's args."""
    (n, c_in, h, w), (c_out, _, kh, kw) = e["args"]["Input Dims"][:2]
    stride, pad, dil = (json.loads(v) for v in e["args"]["Concrete Inputs"][3:6])
    groups = int(e["args"]["Concrete Inputs"][6])
    ho = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (w + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    return 2 * n * ho * wo * kh * kw * c_in * c_out // groups, (ho, wo)


def _convs(bundle):
    return per_raw(raw_trace_events(REF / bundle / "trace.json.gz"), "conv2d",
                   lambda raw: [e for e in raw if e.get("ph") == "X" and e.get("name") == "aten::conv2d"])


def test_every_question_is_pinned(ex):
    assert [q.key for q in ex.questions] == ["with_flops_share", "bwd_fwd_ratio", "other_conv_gflop",
                                             "conv_tflops_5step", "gpu_busy_share", "stem_intensity"]
    assert [q.kind for q in ex.questions] == ["predict", "compute", "transfer", "compute", "predict", "compute"]


def test_the_formula_on_the_raw_shapes_is_the_profilers_count(key_averages_doc):
    """The test's own formula, on every raw aten::conv2d, sums to the profiler's flops column."""
    convs = _convs("fixed_batch")
    tool = next(r for r in key_averages_doc["by_name"] if r["key"] == "aten::conv2d")
    assert sum(_conv_flops(e)[0] for e in convs) == tool["flops"] == 5_231_534_407_680
    assert len(convs) == tool["count"] == 265


def test_with_flops_share(ex, key_averages_doc, counter):
    per_step = sum(r["flops"] or 0 for r in key_averages_doc["by_name"]) / 5
    share = per_step / counter["total"]
    assert round(share, 3) == 0.337
    q = ex["with_flops_share"]
    assert q.answer == "about a third" and q.judge_silently("about a third")
    assert not any(q.judge_silently(c) for c in ("under a sixth", "about half", "about two thirds", "all of it"))


def test_with_flops_share_wrong_predictions_are_pointed_not_told(key_averages_doc):
    """A new learner (December 2026): a wrong prediction of with_flops_share got the text Reveal
    gives, the answer first. A wrong choice now says which way it is off (above the answer:
    too high; below: too low) and why, naming the operators the profiler's flops column counts
    (from its own rows) and the one it leaves out, and where the outcome shows it; neither the
    answer nor its figures (the share, the TFLOPs) nor the explanation. Reveal still explains."""
    from kitlib.course import exercises
    from kitlib.course.exercises import l08
    from kitlib.readers.bundle import open_capture
    ex = exercises.lesson08(open_capture("fixed_batch"))       # its own: the tries are counted
    q = ex["with_flops_share"]
    counted = [r["key"] for r in key_averages_doc["by_name"] if r.get("flops")]
    assert sorted(counted) == ["aten::addmm", "aten::conv2d", "aten::mm"]
    labels = [c for _, c in l08.SHARE_CHOICES]
    right = labels.index(q.answer)
    revealed = ex.reveal("with_flops_share").message
    assert q.explain in revealed and "1.046 of 3.109 TFLOP" in q.explain
    for i, choice in enumerate(labels):
        if i == right:
            continue
        said = ex.check("with_flops_share", choice).message
        assert said.split(" is not what the recording shows. ")[1].startswith("Too high" if i > right else "Too low")
        assert all(op in said for op in counted) and "aten::convolution_backward" in said, said
        assert "FlopCounterMode's table" in said
        assert q.answer not in said and q.explain not in said and said not in revealed, said
        assert not re.search(r"\d+\.\d+ ?%|TFLOP\b|\b3\.109\b|\b1\.046\b", said), said
    assert ex.predicted("with_flops_share").message.endswith(q.explain)   # the first, wrong: explained there


def test_bwd_fwd_ratio(ex, counter):
    ratio = counter["by_op"]["aten.convolution_backward"] / counter["by_op"]["aten.convolution"]
    q = ex["bwd_fwd_ratio"]
    assert q.answer == ratio and q.judge_silently(1.97)
    for wrong in (1 / ratio, ratio * 1.05, ratio * 0.95, 2.0, 1.9):
        assert not q.judge_silently(wrong), wrong                 # inverted, 5 %, "about twice"
    assert "other way" in q.judge(1 / ratio).message


def test_other_conv_gflop(ex):
    e = next(e for e in _convs("fixed_batch") if e["args"]["Concrete Inputs"][3] == "[2, 2]"
             and e["args"]["Input Dims"][1][2:] == [1, 1])
    assert e["args"]["Input Dims"][:2] == [[128, 256, 56, 56], [512, 256, 1, 1]]
    flops, out = _conv_flops(e)
    assert (flops, out) == (26_306_674_688, (28, 28))
    q = ex["other_conv_gflop"]
    assert q.answer == flops / 1e9 and q.unit == "GFLOP"
    assert "[128, 256, 56, 56]" in q.prompt and "[512, 256, 1, 1]" in q.prompt and "stride [2, 2]" in q.prompt
    assert q.judge_silently(26.3)
    for wrong in (flops / 2e9, 4 * flops / 1e9, flops / 1e9 * 1.05, flops / 1e9 * 0.95, flops / 1e12, flops / 1e6):
        assert not q.judge_silently(wrong), wrong                 # MACs, stride forgotten, 5 %, TFLOP, MFLOP
    assert "MACs" in q.judge(flops / 2e9).message and "stride" in q.judge(4 * flops / 1e9).message


def _printed_5step(name, column):
    """A cell of profiler_5step's first printed table, in ms."""
    text = (REF / "profiler_5step" / "key_averages_tables.txt").read_text().split("\n\n")[0]
    heads = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "Self CUDA", "Self CUDA %",
             "CUDA total"]
    for line in text.splitlines():
        if line[:55].strip() == name:
            v = re.split(r"\s{2,}", line[55:].strip())[heads.index(column)]
            return float(v[:-2]) if v.endswith("ms") else float(v[:-2]) / 1e3
    raise KeyError(name)


def test_conv_tflops_5step(ex, key_averages_doc, counter):
    # the same shapes in both recordings: the same FLOPs
    assert sum(_conv_flops(e)[0] for e in _convs("profiler_5step")) == 5_231_534_407_680
    flops_per_step = 5_231_534_407_680 / 5
    cuda_ms = _printed_5step("aten::cudnn_convolution", "CUDA total")
    assert cuda_ms == 25.515
    rate = flops_per_step / (cuda_ms / 5 * 1e-3) / 1e12
    q = ex["conv_tflops_5step"]
    assert q.judge_silently(rate) and q.judge_silently(205) and q.unit == "TFLOP/s"
    fixed_rate = flops_per_step / (next(r for r in key_averages_doc["by_name"] if r["key"] == "aten::conv2d")
                                   ["device_time_total_us"] / 5 * 1e-6) / 1e12
    cpu_rate = flops_per_step / (_printed_5step("aten::cudnn_convolution", "CPU total") / 5 * 1e-3) / 1e12
    mixed = counter["total"] / (cuda_ms / 5 * 1e-3) / 1e12
    for wrong in (fixed_rate, cpu_rate, mixed, rate * 1.05, rate * 0.95, rate * 1e3):
        assert not q.judge_silently(wrong), wrong   # the other recording, CPU time, mixed pair, 5 %, ×1000
    assert "fixed_batch" in q.judge(fixed_rate).message


def test_gpu_busy_share_and_the_misconception(ex, counter):
    raw = raw_trace_events(REF / "fixed_batch" / "trace.json.gz")
    steps = [e for e in raw if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    a, b = min(s["ts"] for s in steps), max(s["ts"] + s["dur"] for s in steps)
    gpu = [(max(e["ts"], a), min(e["ts"] + e["dur"], b)) for e in raw
           if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e["ts"] < b and e["ts"] + e["dur"] > a]
    busy = merged_length(gpu)
    share = busy / (b - a)
    assert round(share, 3) == 0.951 and share > 0.75
    whole_rate = counter["total"] / (busy / 5 * 1e-6) / 1e12                 # FLOPs a step over busy a step
    assert whole_rate / H200_TF32_TFLOPS < 0.25                              # "under a quarter" of the peak
    q = ex["gpu_busy_share"]
    assert q.answer == "over three quarters" and q.judge_silently("over three quarters")
    assert not q.judge_silently("about half")
    fresh = type(q)(q.key, q.prompt, q.answer, q.explain, kind=q.kind, choices=q.choices, traps=q.traps)
    assert "FLOP/s = utilisation" in fresh.judge("under a quarter").message


def test_stem_intensity(ex):
    stem = _convs("fixed_batch")[0]
    (n, c, h, w), (k, _, kh, kw) = stem["args"]["Input Dims"][:2]
    flops, (ho, wo) = _conv_flops(stem)
    elements = n * c * h * w + k * c * kh * kw + n * k * ho * wo
    ai = flops / (4 * elements)
    assert (flops, 4 * elements) == (30_211_571_712, 488_149_760)
    q = ex["stem_intensity"]
    assert q.answer == ai and q.judge_silently(61.9)
    no_output = flops / (4 * (n * c * h * w + k * c * kh * kw))
    for wrong in (no_output, flops / elements, ai * 1.05, ai * 0.95, H200_TF32_TFLOPS / H200_TB_PER_S):
        assert not q.judge_silently(wrong), wrong       # output left out, elements for bytes, 5 %, the ridge point
    assert "output" in q.judge(no_output).message and "4" in q.judge(flops / elements).message
    # the ridge point the lesson prints: 494.5 TFLOP/s ÷ 4.8 TB/s
    from kitlib.course.roofline import ridge_point
    assert ridge_point("H200", "TF32")[0] == H200_TF32_TFLOPS / H200_TB_PER_S
    assert ai < H200_TF32_TFLOPS / H200_TB_PER_S


def test_what_the_ncu_recording_holds():
    """Lesson 08's sentences on the Nsight Compute recording, from its CSV: three kernels, all
    cuDNN's convertTensor_kernel (no convolution), with the same grid (4,096 blocks of 512
    threads), run at the boost clock (--clock-control none: the file's first line warns so),
    one of them a few µs long with almost no DRAM traffic."""
    import csv
    lines = (REF / "ncu" / "conv_kernels_speed_of_light.csv").read_text().splitlines()
    assert "Running with unmodified GPU clocks" in lines[0]
    key_averages_doc = list(csv.DictReader(lines[3:]))
    names = {r["ID"]: r["Kernel Name"] for r in key_averages_doc}
    assert len(names) == 3 and all(n.startswith("void convertTensor_kernel") for n in names.values())
    assert not any("conv" in n.replace("convertTensor", "") for n in names.values())
    assert {(r["Grid Size"], r["Block Size"]) for r in key_averages_doc} == {("(4096, 1, 1)", "(512, 1, 1)")}

    def metric(kid, name):
        return float(next(r["Metric Value"] for r in key_averages_doc if r["ID"] == kid and r["Metric Name"] == name)
                     .replace(",", ""))
    mhz = [metric(k, "SM Frequency") / 1e6 for k in "012"]
    assert [round(m) for m in mhz] == [1970, 1968, 1970] and all(m > 1900 for m in mhz)   # max 1,980 MHz
    assert [metric(k, "Duration") for k in "012"] == [51136, 4192, 268672]
    assert metric("1", "DRAM Throughput") < 1 < metric("0", "DRAM Throughput")
    for k in "02":   # the two long ones keep DRAM busier than the SMs
        assert metric(k, "Memory Throughput") > 2 * metric(k, "Compute (SM) Throughput")
    import kitlib
    assert "--clock-control none" in kitlib.open_capture("ncu").recipe["command"]


def _row(text, name, n):
    """The last ``n`` whitespace-separated cells of the first printed line starting with ``name``."""
    line = next(ln for ln in text.splitlines() if ln.startswith(name + " ") or ln.startswith(name + "\t"))
    return line.rstrip().rsplit(None, n)[1:]


def test_lesson08_tables_whole(executed_lesson, key_averages_doc, counter):
    """Lesson 08's tables, every row in order, from the profiler's key_averages rows and
    FlopCounterMode's file: with_flops per operator (calls, flops, TFLOP), FlopCounterMode's
    count of one step (flops, TFLOP, share, pass), and the first two rates (FLOPs over the
    device time of the kernels under the operators, key_averages' device totals)."""
    text = executed_lesson("08").text
    # with_flops per operator, largest first
    tool = sorted(((r["key"], r["count"], r["flops"]) for r in key_averages_doc["by_name"] if r["flops"]), key=lambda t: -t[2])
    shown = re.search(r"\n\s+calls\s+flops\s+tflop\nname\s*\n((?:.+\n){3})", text).group(1).splitlines()
    assert [ln.split()[:3] for ln in shown] == [[k, str(c), str(f)] for k, c, f in tool]
    assert [float(ln.split()[3]) for ln in shown] == [round(f / 1e12, 6) for _, _, f in tool]
    # FlopCounterMode's table: by FLOPs, with its share of the step and the pass it belongs to
    by_op = sorted(counter["by_op"].items(), key=lambda kv: -kv[1])
    assert [k for k, _ in by_op] == ["aten.convolution_backward", "aten.convolution", "aten.mm", "aten.addmm"]
    for k, f in by_op:
        flops, tflop, share, pass_ = _row(text, k, 4)
        assert (int(flops), float(tflop), float(share)) == (f, round(f / 1e12, 6), round(f / counter["total"], 6))
        assert pass_ == ("backward" if k in ("aten.convolution_backward", "aten.mm") else "forward")
    # the rates: forward convolutions and convolutions forward + backward, per step
    dev = {r["key"]: r["device_time_total_us"] for r in key_averages_doc["by_name"]}
    fwd_ms = dev["aten::conv2d"] / 5 / 1e3
    both_ms = (dev["aten::conv2d"] + dev["aten::convolution_backward"]) / 5 / 1e3
    fwd = next(r["flops"] for r in key_averages_doc["by_name"] if r["key"] == "aten::conv2d") / 5
    both = counter["by_op"]["aten.convolution"] + counter["by_op"]["aten.convolution_backward"]
    for name, flops, ms in (("forward convolutions", fwd, fwd_ms), ("convolutions, forward + backward", both, both_ms)):
        tflop, dev_ms, rate = map(float, re.search(re.escape(name) + r"\s.*?\s([\d.]+)\s+([\d.]+)\s+([\d.]+)\n",
                                                   text).groups())
        assert (tflop, dev_ms, rate) == (round(flops / 1e12, 3), round(ms, 3), round(flops / ms / 1e9, 3))


def _busy_figures():
    """The busy times lesson 08 sets side by side, from fixed_batch's raw JSON (ms over the 5
    steps): GPU events (kernels, copies, memsets) whose correlation id has a CUDA runtime or
    driver call in the file, over the whole trace (the rates table's whole-step row); every GPU
    event over the whole trace; every one cut to the first step's start .. last step's end (the
    busy share and its verdict); every one cut to each step's own interval, summed
    (step_measures' device_busy_ns). And the events without a launch in the file."""
    raw = raw_trace_events(REF / "fixed_batch" / "trace.json.gz")
    steps = [e for e in raw if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    a, b = min(s["ts"] for s in steps), max(s["ts"] + s["dur"] for s in steps)
    gpu = [e for e in raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    calls = {e["args"]["correlation"] for e in raw
             if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    launched = [e for e in gpu if e["args"].get("correlation") in calls]
    before = [e for e in gpu if e["args"].get("correlation") not in calls]

    def spans(es, lo=-float("inf"), hi=float("inf")):
        return [(max(e["ts"], lo), min(e["ts"] + e["dur"], hi)) for e in es if e["ts"] < hi and e["ts"] + e["dur"] > lo]
    ms = {"launched": merged_length(spans(launched)) / 1e3, "all": merged_length(spans(gpu)) / 1e3,
          "window": merged_length(spans(gpu, a, b)) / 1e3,
          "per_step": sum(merged_length(spans(gpu, s["ts"], s["ts"] + s["dur"])) for s in steps) / 1e3}
    return ms, before, a, len(steps)


def test_three_busy_times_each_named_and_explained(executed_lesson):
    """The learner met three "busy ms per step": 41.628 (rates table), 42.6 (the busy-share
    verdict), 42.5 (step_measures). Each is pinned here from the raw JSON, the lesson prints them
    side by side with what each counts, the rates row's label says it counts only GPU events
    with a launch in the trace, and the verdict says which busy time it divides."""
    ms, before, a, n = _busy_figures()
    assert n == 5
    assert [round(ms[k] / n, 3) for k in ("launched", "all", "window", "per_step")] == [41.628, 43.371, 42.579, 42.524]
    # the events without a launch: launched before the recording, run at the start of the first step
    assert len(before) == 78 and max(e["ts"] + e["dur"] for e in before) - a < 10_000
    lesson = executed_lesson("08")
    text = lesson.text
    for name, events, cut, key in (("rates table, whole step", "with a launch in the trace", "whole trace", "launched"),
                                   ("for comparison", "every one", "whole trace", "all"),
                                   ("busy share above", "every one", "first step's start to last step's end", "window"),
                                   ("step_measures", "every one", "each step's own interval", "per_step")):
        _has_line = rf"\n{re.escape(name)}\s+{re.escape(events)}\s+{re.escape(cut)}\s+" \
                    rf"{ms[key]:.3f}\s+{ms[key] / n:.3f}\n"
        assert re.search(_has_line, text), name
    busy_before = merged_length([(e["ts"], e["ts"] + e["dur"]) for e in before]) / 1e3
    end = max(e["ts"] + e["dur"] for e in before)
    assert f"78 GPU events have no launch in the trace: {busy_before:.1f} ms busy, the last ending " \
           f"{(end - a) / 1e3:.1f} ms after the first step's start" in unwrapped(text)   # wrapped to fit
    # the rates table: the whole-step row's time is the launched events' busy time, and its label says so
    _, ms_step, _ = re.search(r"\nwhole step\s.*?\s([\d.]+)\s+([\d.]+)\s+([\d.]+)\n", text).groups()
    assert float(ms_step) == round(ms["launched"] / n, 3) == 41.628
    # (the whole-step row shows once with_flops_share and gpu_busy_share are predicted)
    rates_html = next(o["data"]["text/html"] for c in lesson.nb.cells if c.cell_type == "code"
                      and 'rates.loc[["whole step"]]' in c.source for o in c.outputs if "text/html" in o.get("data", {}))
    assert "GPU busy time of the kernels, copies and memsets with a launch in the trace (whole trace)" in rates_html
    # the prose says why they differ
    md = " ".join(c.source for c in lesson.nb.cells if c.cell_type == "markdown")
    assert "launched before the profiler began recording" in md and "`step_measures`" in md


def test_gpu_busy_share_verdict_names_its_busy_time_and_the_rates_rows(ex):
    """The busy-share verdict's explanation names the busy time it divides (the window's,
    42.6 ms a step) and the rates table's (41.6), both from the raw JSON. Split from
    test_three_busy_times_each_named_and_explained, which reads the executed notebook: this
    half sees the question builder (tools/exercise_mutants.py --kill runs it without the
    notebook)."""
    ms, _, _, n = _busy_figures()
    why = ex["gpu_busy_share"].explain
    assert f"of {ms['window'] / n:.1f} ms busy a step (that busy time ÷ 5 steps: every GPU event from the first " \
           "step's start to the last step's end" in why
    assert f"the rates table's whole-step row divides by {ms['launched'] / n:.1f} ms, the busy time of the GPU " \
           "events with a launch in the trace" in why


def test_the_ncu_table_shows_the_grid_the_text_names(executed_lesson):
    """"the same grid (4,096 blocks of 512 threads)": the Grid Size and Block Size rows of the
    CSV's Launch Statistics are in the table the lesson prints, with the CSV's values, and that
    table's note names the ncu recording only."""
    import csv
    lines = (REF / "ncu" / "conv_kernels_speed_of_light.csv").read_text().splitlines()
    key_averages_doc = list(csv.DictReader(lines[3:]))
    val = {(r["ID"], r["Metric Name"]): float(r["Metric Value"].replace(",", "")) for r in key_averages_doc
           if r["Metric Name"] in ("Grid Size", "Block Size")}
    assert [val[k, "Grid Size"] for k in "012"] == [4096] * 3 and [val[k, "Block Size"] for k in "012"] == [512] * 3
    lesson = executed_lesson("08")
    assert re.search(r"\nLaunch Statistics\s+Grid Size\s+4096\.00\s+4096\.00\s+4096\.00\n\s+Block Size\s+512\.00\s+"
                     r"512\.00\s+512\.00\n", lesson.text)
    md = next(c.source for c in lesson.nb.cells if c.source.startswith("The three launches have the same grid"))
    assert "*Grid Size* and *Block Size* rows" in md and "4,096 blocks of 512 threads" in md
    cell = next(c for c in lesson.nb.cells if c.cell_type == "code" and "ncu_wide(tidy, [\"Duration\", \"Compute" in c.source)
    notes = re.findall(r"\[data: ([^\]]*)\]", "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "")
                                                      for o in cell.outputs))
    assert notes and all(n.split(":")[0] == "ncu" and ";" not in n for n in notes), notes


def test_achieved_vs_peak_labels_leave_the_bars_their_width():
    """The peak bars' labels are short ("peak H200 (capture's GPU)", not "peak H200 = the
    capture's GPU (NVIDIA H200) (TF32, dense)": the precision and "dense" are in the title), so
    the bars get well over half the figure's width."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from kitlib.analyses import flops
    from kitlib.plots.flops import plot_achieved_vs_peak
    peaks = flops.peak_table("NVIDIA H200")
    ax = plot_achieved_vs_peak({"forward convolutions": 205.9, "convolutions, forward + backward": 174.2,
                                "whole step": 74.7}, peaks, "TF32")
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert "peak H200 (capture's GPU)" in labels and "peak A100" in labels
    assert max(len(s) for s in labels if s.startswith("peak")) <= 25
    assert "dense TF32" in ax.get_title()
    assert ax.get_position().width > 0.55
    plt.close(ax.figure)


def test_with_flops_share_and_bwd_fwd_ratio_explained_from_the_files(ex, key_averages_doc, counter):
    """The figures a learner reads in two explanations, from key_averages' flops column and
    FlopCounterMode's JSON: "1.046 of 3.109 TFLOP = 33.7%" (l08 mutants #54, #56: a figure
    ×1e12 instead of ÷) and "aten.convolution_backward 2.062 TFLOP ÷ aten.convolution 1.046
    TFLOP = 1.97" (#60, #62, #64)."""
    per_step = sum(r["flops"] or 0 for r in key_averages_doc["by_name"]) / 5
    total = counter["total"]
    assert f"about a third: {per_step / 1e12:.3f} of {total / 1e12:.3f} TFLOP = {per_step / total:.1%}." \
        in ex["with_flops_share"].explain
    bwd, fwd = counter["by_op"]["aten.convolution_backward"], counter["by_op"]["aten.convolution"]
    assert f"aten.convolution_backward {bwd / 1e12:.3f} TFLOP ÷ aten.convolution {fwd / 1e12:.3f} TFLOP = " \
           f"{bwd / fwd:.2f}:" in ex["bwd_fwd_ratio"].explain


def test_other_conv_gflop_worked_from_the_raw_args(ex):
    """other_conv_gflop's worked example, every figure from the raw event's Input Dims and
    Concrete Inputs: H_out's formula and value, the product and the GFLOP (l08 mutants #74-#96:
    a sign, an index, // for /, ×1e9 for ÷ in the explanation)."""
    e = next(e for e in _convs("fixed_batch") if e["args"]["Concrete Inputs"][3] == "[2, 2]"
             and e["args"]["Input Dims"][1][2:] == [1, 1])
    (n, c_in, h, _), (c_out, _, kh, kw) = e["args"]["Input Dims"][:2]
    stride, pad, dil = (json.loads(v) for v in e["args"]["Concrete Inputs"][3:6])
    groups = int(e["args"]["Concrete Inputs"][6])
    flops, (ho, _) = _conv_flops(e)
    assert f"H_out = W_out = ({h} + 2·{pad[0]} − {dil[0]}·({kh} − 1) − 1) // {stride[0]} + 1 = {ho}; " \
           f"2 · {n} · H_out · W_out · {kh} · {kw} · {c_in} · {c_out} / {groups} = {flops:,} FLOPs = " \
           f"{flops / 1e9:.2f} GFLOP" in ex["other_conv_gflop"].explain


def test_conv_tflops_5step_mixed_pair_trap(ex, counter):
    """The whole step's FLOPs (FlopCounterMode) over profiler_5step's forward convolutions'
    CUDA time (its printed table) meets its own feedback (l08 mutants #103-#106: that trap's
    value ×1e12 or ÷ 1000 instead, never met)."""
    mixed = counter["total"] / (_printed_5step("aten::cudnn_convolution", "CUDA total") / 5 * 1e-3) / 1e12
    assert "the whole step's FLOPs over the forward convolutions' time" in ex["conv_tflops_5step"].judge(mixed).message


def test_gpu_busy_share_explained_from_the_raw_json(ex):
    """"busy 212.9 ms of 223.9 ms = 95%": the GPU events' union inside the profiled steps and
    the steps' span, from the raw JSON (l08 mutants #109, #111: a figure ×1e6 instead of ÷)."""
    raw = raw_trace_events(REF / "fixed_batch" / "trace.json.gz")
    steps = [e for e in raw if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    a, b = min(s["ts"] for s in steps), max(s["ts"] + s["dur"] for s in steps)
    busy = merged_length([(max(e["ts"], a), min(e["ts"] + e["dur"], b)) for e in raw
                          if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e["ts"] < b and e["ts"] + e["dur"] > a])
    assert f"over three quarters: busy {busy / 1e3:.1f} ms of {(b - a) / 1e3:.1f} ms = {busy / (b - a):.0%}." \
        in ex["gpu_busy_share"].explain


def test_stem_intensity_explained_and_its_traps(ex):
    """stem_intensity's explanation (FLOPs ÷ bytes = FLOP/byte, and the roofline's cap at the
    H200's 4.8 TB/s) and its two traps, the output left out and elements for bytes, at the
    values worked out from the raw Input Dims, each with its own feedback (l08 mutants #40-#51,
    #117-#123: an element count or a byte factor changed, the trap never met; #116: the cap
    ÷ instead of ×). The old check matched "output" anywhere in the message, which the
    question's own hint says too."""
    stem = _convs("fixed_batch")[0]
    (n, c, h, w), (k, _, kh, kw) = stem["args"]["Input Dims"][:2]
    flops, (ho, wo) = _conv_flops(stem)
    elements = n * c * h * w + k * c * kh * kw + n * k * ho * wo
    ai = flops / (4 * elements)
    no_output = flops / (4 * (n * c * h * w + k * c * kh * kw))
    q = ex["stem_intensity"]
    assert f"{flops:,} FLOPs ÷ {4 * elements:,} bytes = {ai:.1f} FLOP/byte" in q.explain
    assert f"the roofline caps it at {ai * H200_TB_PER_S:.0f} TFLOP/s" in q.explain
    assert [t for t, _ in q.traps] == pytest.approx([no_output, flops / elements], rel=1e-9)
    assert "the output is written to memory too" in q.judge(no_output).message.lower()
    assert "those are elements, not bytes" in q.judge(flops / elements).message.lower()
