"""kitlib.align, kitlib.lint, kitlib.analyses.compare and kitlib.capture.nsys_recipes on the real recordings.

Ground truth: the `nsys stats` CSVs shipped with data/reference/nsys_8step, the manifests of
cold_start_8step / nsys_8step, the reference step_times.json, and the public traces
(tests/data/public-traces/SOURCES.md).
"""
import dataclasses
import gzip
import json
import math
import re
import sqlite3
import stat
from collections import Counter, defaultdict
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

import kitlib
from kitlib import open_capture
from kitlib.analyses.align import (ATTRIBUTIONS, _same_run, align, align_summary, gpu_work, launch_threads,
                                   operator_ranges, project)
from kitlib.errors import KitError
from kitlib.analyses.lint import Finding, lint
from kitlib.analyses.compare import compare, compare_series, settings_present
from kitlib.readers.nsys import load_nsys, nvtx_gpu_projection
from kitlib.capture import nsys_recipes as nc
from kitlib.analyses.steps import labelled_ranges

from conftest import PUBLIC, REF, raw_trace_events
from support.events import event, gpu_event, launch_event, ns, shifted, write_trace


@pytest.fixture(scope="module")
def lesson_pair():
    return open_capture("cold_start_8step"), open_capture("nsys_8step")


@pytest.fixture(scope="module")
def by_thread(lesson_pair):
    return align(*lesson_pair, attribution="thread")


@pytest.fixture(scope="module")
def by_time(lesson_pair):
    return align(*lesson_pair, attribution="time")


# --------------------------------------------------------------------------- align
def test_project_thread_rule_is_nsights_projection(nsys_8step_report):
    p = project(labelled_ranges(nsys_8step_report), gpu_work(nsys_8step_report), "thread")
    nv = nvtx_gpu_projection(nsys_8step_report)
    m = p.merge(nv[["tid", "start_ns", "name", "proj_dur_ns", "gpu_ops"]], on=["tid", "start_ns", "name"],
                suffixes=("", "_nsight"))
    assert len(m) == len(nv) == 40
    assert (m["proj_dur_ns"] == m["proj_dur_ns_nsight"]).all()
    assert (m["gpu_ops"] == m["gpu_ops_nsight"]).all()


def test_thread_attribution_equals_nsys_stats_csv(lesson_pair, by_thread):
    csv = pd.read_csv(lesson_pair[1].file("nsys_stats/nvtx_gpu_proj_sum.csv")).set_index("Range")
    nsys_label = {"step": ":torch_step", "data_load": ":data_load", "forward": ":forward",
                  "backward": ":backward", "optimizer": ":optimizer"}
    for label, rng in nsys_label.items():
        rows = by_thread[by_thread["label"] == label]
        assert rows["nsys_gpu_proj_ns"].sum() == csv.loc[rng, "Total Proj Time (ns)"]
        assert rows["nsys_gpu_ops"].sum() == csv.loc[rng, "Total GPU Ops"]
        assert rows["nsys_host_ns"].sum() == csv.loc[rng, "Total Range Time (ns)"]
    assert by_thread["nsys_gpu_proj_ns"][by_thread["label"] == "backward"].sum() == 5792
    assert set(by_thread["attribution"]) == {"thread"}


def test_time_attribution_follows_the_autograd_thread(by_thread, by_time):
    bt = by_thread[by_thread["label"] == "backward"]
    bw = by_time[by_time["label"] == "backward"]
    assert bt["nsys_kernels"].sum() == 8                  # one kernel per step on the main thread
    assert bw["nsys_kernels"].sum() > 2000                # autograd's kernels
    # every kernel of a warm step is credited to some phase under the time rule
    s1 = by_time[by_time["step"] == 1].set_index("label")
    phases = s1.loc[["data_load", "forward", "backward", "optimizer"], "nsys_kernels"].sum()
    assert phases == s1.loc["step", "nsys_kernels"] == 541
    assert s1.loc["step", "prof_kernels"] == 541         # the torch.profiler run: same work per step


def test_launch_threads(nsys_8step_report, lesson_pair):
    th = launch_threads(nsys_8step_report).set_index("thread")
    assert th.loc["pt_autograd_0", "kernels"] == 2360 and th.loc["pt_autograd_0", "tid"] == 1283
    assert th.loc["pt_autograd_0", "labelled_ranges"] == 0
    assert th["kernels"].sum() == len(nsys_8step_report.kernels) == 4340
    pt = launch_threads(lesson_pair[0].trace)
    assert pt["kernels"].tolist() == [2360, 1963]
    assert pt["labelled_ranges"].iloc[0] == 0


def test_align_says_runs_and_data_load_differ(by_time):
    a = by_time.attrs
    assert a["same_run"] is False
    assert a["data_load_covers"] == {"torch.profiler": "next(batches) only",
                                     "nsight": "next(batches) and the .to(device, non_blocking=True) transfer submission"}
    assert any("different runs" in n for n in a["notes"])
    dl = by_time[by_time["label"] == "data_load"]
    assert (~dl["comparable"]).all() and dl["note"].str.startswith("data_load differs").all()
    h2d = by_time[by_time["label"] == "h2d"]
    assert h2d["nsys_host_ns"].isna().all() and (~h2d["comparable"]).all()
    assert len(by_time) == 8 * 6
    # the cold step: first data_load 1,523 ms (profiler) and 1,469.48 ms (Nsight, PROVENANCE.md)
    first = by_time[(by_time["step"] == 0) & (by_time["label"] == "data_load")].iloc[0]
    assert first["nsys_host_ns"] == 1469484230
    assert round(first["prof_host_ns"] / 1e6) == 1523


def test_align_summary_and_errors(by_time, nsys_8step_report):
    s = align_summary(by_time)
    assert s.loc["backward", "nsys_kernels"] == s.loc["backward", "prof_kernels"] == 296
    # Nsight's GPU projection of each torch_step range: its nvtx_gpu_proj_sum.csv row
    # (nsys stats' printed output) gives their total, median, min and max over the 8 steps
    proj = by_time.loc[by_time["label"] == "step", "nsys_gpu_proj_ns"].astype("int64").tolist()
    csv = pd.read_csv(REF / "nsys_8step" / "nsys_stats" / "nvtx_gpu_proj_sum.csv").set_index("Range")
    row = csv.loc[":torch_step"]
    assert sum(proj) == row["Total Proj Time (ns)"] == 1_571_220_674
    assert (min(proj), max(proj)) == (row["Proj Min (ns)"], row["Proj Max (ns)"])
    assert np.median(proj) == row["Proj Med (ns)"] == 44_234_545
    # the summary leaves out the cold step 0: the median of steps 1-7, 44,226,705 ns
    assert s.loc["step", "nsys_gpu_proj_ms"] == pytest.approx(np.median(proj[1:]) / 1e6, abs=1e-9)
    assert s.loc["step", "nsys_gpu_proj_ms"] == pytest.approx(44.226705, abs=1e-9)
    with pytest.raises(KitError, match="attribution"):
        align(nsys_8step_report, nsys_8step_report, attribution="nope")
    with pytest.raises(KitError, match="expected"):
        align(nsys_8step_report, nsys_8step_report)


def test_operator_ranges_from_emit_nvtx():
    er = load_nsys(REF / "nsys_emit_nvtx" / "report.sqlite")
    ops = operator_ranges(er)
    # every emit_nvtx operator range carries ", op_id = N" in its text: counted in the SQLite
    con = sqlite3.connect(f"file:{REF / 'nsys_emit_nvtx' / 'report.sqlite'}?mode=ro", uri=True)
    n = con.execute("SELECT COUNT(*) FROM NVTX_EVENTS WHERE text LIKE '%op_id = %'").fetchone()[0]
    con.close()
    assert len(ops) == n == 5370
    conv = ops[ops["op"] == "aten::convolution"].iloc[0]
    assert (conv["seq"], conv["op_id"]) == (537, 2)
    assert conv["sizes"].startswith("[[128, 3, 224, 224], [64, 3, 7, 7]")
    th = launch_threads(er).set_index("thread")
    assert (ops["tid"] == th.loc["pt_autograd_0", "tid"]).sum() == 3170


# --------------------------------------------------------------------------- lint
def codes(findings):
    return {f.code: f for f in findings}


def test_lint_public_traces(public_trace):
    v100 = codes(lint(public_trace("kineto_2021-06_resnet50_v100.json.gz")))
    assert v100["pageable_copies"].evidence["copies"] == 12
    assert v100["pageable_copies"].evidence["bytes"] == 115607040
    assert "launches_without_gpu" not in v100 and "no_gpu_events" not in v100
    cpu = codes(lint(public_trace("hta_2024-07_cpu_only.json.gz")))
    assert set(cpu) == {"cpu_only"}
    forced = codes(lint(public_trace("hta_2024-07_cpu_only.json.gz"), recipe={"activities": ["CPU", "CUDA"]}))
    assert forced["no_gpu_events"].severity == "error"
    hta = codes(lint(public_trace("hta_2022-08_a100_rank3.json.gz")))
    assert hta["pageable_copies"].evidence["copies"] == 60           # Device -> Pageable reads
    assert hta["over_100_percent"].evidence["worst_annotation_ns"] == 0   # overlap of streams
    bert = codes(lint(public_trace("tracelens_torch2.6_h100_bert_small.json.gz")))
    assert bert["gpu_annotations"].evidence["annotations"] == 1
    assert "missing_stacks" not in bert                              # with_stack on and frames present
    for f in list(v100.values()) + list(hta.values()):
        assert f.meaning and f.action and isinstance(f, Finding)


def test_lint_reference_traces(ref_trace):
    fixed = codes(lint(ref_trace("fixed_batch")))
    assert fixed["gpu_without_launches"].evidence["launched_before_recording"] == 78
    five = codes(lint(ref_trace("profiler_5step")))
    assert five["backward_flops_absent"].evidence["convolution_backward_calls"] == 265
    assert five["backward_flops_absent"].evidence["counted_calls"] == 280
    assert five["gpu_annotations"].evidence["annotations"] == 20
    over = five["over_100_percent"].evidence                   # annotations summed with kernels
    assert over["worst_sum_ns"] > over["worst_wall_ns"] > over["worst_sum_ns"] - over["worst_annotation_ns"]
    assert "launches_without_gpu" not in five and "step_without_kernels" not in five


def test_lint_detects_damaged_traces(ref_trace):
    t = ref_trace("profiler_5step")
    kern = t.gpu[t.gpu["kind"] == "kernel"]
    dropped = dataclasses.replace(t, gpu=t.gpu.drop(kern.index[:10]).reset_index(drop=True))
    f = codes(lint(dropped))["launches_without_gpu"]
    assert f.evidence["without_gpu_event"] == 10
    nostack = dataclasses.replace(t, ops=t.ops[t.ops["kind"] != "python"])
    assert codes(lint(nostack))["missing_stacks"].evidence["python_events"] == 0
    big = codes(lint(t, max_events=50_000))["too_large_for_viewer"]
    assert big.evidence["events"] == 73507
    step = t.steps.iloc[0]
    no_launch = t.launches[(t.launches["start_ns"] < step["start_ns"]) | (t.launches["start_ns"] >= step["end_ns"])]
    assert codes(lint(dataclasses.replace(t, launches=no_launch.reset_index(drop=True))))["step_without_kernels"].evidence["steps"] == \
        [int(step["step"])]
    with pytest.raises(KitError):
        lint("not a trace")


# --------------------------------------------------------------------------- measure
def test_compare_synthetic():
    rng = np.random.default_rng(1)
    a = 40 + rng.normal(0, 0.5, 30)
    assert compare(a, a - 2).verdict == "faster"
    assert compare(a, a + 2).verdict == "slower"
    c = compare(a, 40 + rng.normal(0, 0.5, 30))
    assert c.verdict == "no difference beyond the noise" and c.ci_low_ms < 0 < c.ci_high_ms
    assert compare(a, a - 2, seed=3).ci_low_ms == compare(a, a - 2, seed=3).ci_low_ms   # seeded
    with pytest.raises(KitError):
        compare([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(KitError):
        compare([1, 2, float("nan")], [1, 2, 3])


def test_compare_on_reference_step_times():
    st = open_capture("profiler_5step").step_times()
    fixed = compare(st["step_ms_uninstrumented"], st["step_ms_fixed_batch"])
    assert fixed.verdict == "faster"
    assert fixed.before_median_ms == pytest.approx(np.median(st["step_ms_uninstrumented"]))
    assert round(fixed.after_median_ms, 2) == 42.61
    prof = compare(st["step_ms_uninstrumented"], st["step_ms_profiled_all_attribution"])
    assert prof.verdict == "no difference beyond the noise"      # 10 vs 7 noisy steps
    assert prof.difference_ms > 0
    table = compare_series(st, "step_ms_uninstrumented")
    assert list(table.index) == ["step_ms_fixed_batch", "step_ms_profiled_all_attribution"]
    present = settings_present(st)
    assert present["present"].iloc[:4].tolist() == [True, False, False, True]


# --------------------------------------------------------------------------- nsys_capture
def test_profile_command_of_reference_recipe():
    cmd = nc.profile_command("nsys_8step", "out/report", nsys="nsys", python="python3")
    assert cmd[:9] == ["nsys", "profile", "-t", "cuda,nvtx,osrt", "--osrt-threshold=10000", "--sample=none",
                       "--cpuctxsw=none", "--cuda-memory-usage=false", "-o"]
    assert "--capture-range=cudaProfilerApi" not in cmd
    i = cmd.index("python3")
    assert cmd[i:i + 4] == ["python3", "-m", "kitlib.capture.nsys_recipes", "run-workload"]
    assert "--data-load-covers-h2d" in cmd
    sysv = nc.profile_command("system", "r", python="p")
    assert "--sample=process-tree" in sysv and "--cpuctxsw=process-tree" in sysv


def test_emit_nvtx_and_matched_commands():
    cmd = nc.profile_command("emit_nvtx", "r", python="p")
    assert cmd[2:4] == ["-t", "cuda,nvtx"] and not any(c.startswith("--osrt") for c in cmd)
    assert "--capture-range=cudaProfilerApi" in cmd and "--capture-range-end=stop" in cmd
    assert cmd[cmd.index("run-workload"):] == ["run-workload", "--steps", "2", "--warmup-steps", "3",
                                               "--data-load-covers-h2d", "--capture-range", "--emit-nvtx",
                                               "--record-shapes"]
    assert "--no-data-load-covers-h2d" in nc.profile_command("matched", "r", python="p")
    assert nc.collectors("emit_nvtx") == {"cuda": True, "nvtx": True, "osrt": False, "osrt_threshold_ns": None,
                                          "cpu_sampling": False, "context_switches": False,
                                          "cuda_memory_usage": False, "trace_forks": False,
                                          "capture_range": "cudaProfilerApi",
                                          "emit_nvtx": True}
    assert nc.export_command("r.nsys-rep", "r.sqlite") == ["nsys", "export", "--type", "sqlite",
                                                            "--force-overwrite", "true", "-o", "r.sqlite",
                                                            "r.nsys-rep"]
    a = nc._parser().parse_args(cmd[cmd.index("run-workload"):])
    assert (a.steps, a.warmup_steps, a.emit_nvtx, a.capture_range, a.record_shapes) == (2, 3, True, True, True)
    with pytest.raises(KitError):
        nc.NsysRecipe("bad", cuda=False, nvtx=False, osrt=False)


def test_nsys_not_found_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("KITLIB_NSYS", raising=False)
    with pytest.raises(nc.NsysNotFound, match="Install Nsight Systems"):
        nc.find_nsys(locations=[str(tmp_path / "none" / "*" / "nsys")])
    with pytest.raises(nc.NsysNotFound, match="not an executable"):
        nc.find_nsys(tmp_path / "missing" / "nsys")
    with pytest.raises(nc.NsysNotFound):
        nc.capture_nsys("nsys_8step", tmp_path / "out", nsys=tmp_path / "missing")
    assert not (tmp_path / "out").exists()                     # failed before any work
    fake = tmp_path / "2025.3.1" / "host" / "target-linux-x64" / "nsys"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    imp = tmp_path / "2025.3.1" / "host" / "linux-desktop-glibc_2_11_3-x64" / "QdstrmImporter"
    imp.parent.mkdir(parents=True)
    imp.write_text("#!/bin/sh\n")
    imp.chmod(imp.stat().st_mode | stat.S_IEXEC)
    found = nc.find_nsys(locations=[str(tmp_path / "*" / "host" / "target-linux-x64" / "nsys")])
    assert found == fake
    assert nc.find_importer(found) == imp
    assert nc.find_nsys(fake) == fake


def test_compare_every_field_recomputed_on_the_reference_step_times():
    """Lesson 10's verdict on profiler_5step/step_times.json (uninstrumented vs the fixed
    batch), every field recomputed here without kitlib: medians with the standard library,
    IQRs as numpy's linear percentiles, the Mann-Whitney p-value with SciPy, and the
    bootstrap interval by resampling each set with numpy's default_rng(0), 10,000 times."""
    import statistics
    from scipy.stats import mannwhitneyu
    st = open_capture("profiler_5step").step_times()
    a = np.asarray(st["step_ms_uninstrumented"], dtype=float)
    b = np.asarray(st["step_ms_fixed_batch"], dtype=float)
    rng = np.random.default_rng(0)
    ma = np.median(a[rng.integers(0, a.size, (10_000, a.size))], axis=1)
    mb = np.median(b[rng.integers(0, b.size, (10_000, b.size))], axis=1)
    lo, hi = np.quantile(mb - ma, [0.025, 0.975])
    med_a, med_b = statistics.median(a), statistics.median(b)
    iqr_a, iqr_b = (float(np.percentile(v, 75) - np.percentile(v, 25)) for v in (a, b))
    p = mannwhitneyu(a, b, alternative="two-sided").pvalue
    c = compare(a, b)
    assert (c.n_before, c.n_after, c.confidence) == (10, 10, 0.95)
    assert (c.before_median_ms, c.after_median_ms, c.before_iqr_ms, c.after_iqr_ms) == (med_a, med_b, iqr_a, iqr_b)
    assert (c.difference_ms, c.relative) == (med_b - med_a, (med_b - med_a) / med_a)
    assert (c.ci_low_ms, c.ci_high_ms, c.p_value) == (lo, hi, p)
    assert hi < 0 and c.verdict == "faster" and c.significant
    assert c.text == (f"median {med_a:,.2f} ms (IQR {iqr_a:,.2f}, n=10) → {med_b:,.2f} ms (IQR {iqr_b:,.2f}, n=10): "
                      f"{med_b - med_a:+,.2f} ms ({(med_b - med_a) / med_a:+.1%}); 95% bootstrap interval of the "
                      f"difference [{lo:+,.2f}, {hi:+,.2f}] ms, Mann-Whitney p = {p:.2g}. "
                      "The interval excludes 0: faster beyond the noise.")
    assert c._repr_markdown_() == f"**faster** — {c.text}"
    # printed, the same words, wrapped at spaces to a notebook's width (issue 40)
    assert str(c).split() == c.text.split() and max(map(len, str(c).splitlines())) <= 95 < len(c.text)
    noisy = compare(a, st["step_ms_profiled_all_attribution"], confidence=0.9)
    assert noisy.verdict == "no difference beyond the noise" and not noisy.significant
    assert noisy.ci_low_ms <= 0 <= noisy.ci_high_ms and noisy.confidence == 0.9
    assert noisy.text.endswith("; 90% bootstrap interval of the difference "
                               f"[{noisy.ci_low_ms:+,.2f}, {noisy.ci_high_ms:+,.2f}] ms, Mann-Whitney p = "
                               f"{noisy.p_value:.2g}. The interval includes 0: the change is within the "
                               "step-to-step noise; measure more steps before claiming anything.")
    slower = compare(b, a)
    assert slower.verdict == "slower" and slower.text.endswith("The interval excludes 0: slower beyond the noise.")


def test_compare_calls_a_small_steady_slowdown_slower():
    """Half a millisecond on a 10 ms step, with 0.01 ms of noise: the interval lies wholly
    above 0 (between 0 and 1 ms), so the verdict is "slower"; the same sets swapped, "faster"."""
    before = 10 + 0.01 * np.sin(np.arange(20))
    after = before + 0.5
    c = compare(before, after)
    assert 0 < c.ci_low_ms < c.ci_high_ms < 1 and c.verdict == "slower"
    assert compare(after, before).verdict == "faster"


def test_compare_refuses_in_words():
    for args, kwargs, message in [
            (([1, 2, 3], [1, 2, 3]), {"confidence": 1.0}, "compare: confidence must lie between 0 and 1, not 1.0"),
            (([1, 2, 3], [1, 2, 3]), {"confidence": 0}, "compare: confidence must lie between 0 and 1, not 0"),
            (([1.0, 2.0], [1, 2, 3]), {}, "compare: before_ms holds 2 measurement(s); repeat the measurement at "
                                          "least 3 times (10 or more for a useful interval)"),
            (([1, 2, 3], [1, 2]), {}, "compare: after_ms holds 2 measurement(s); repeat the measurement at "
                                      "least 3 times (10 or more for a useful interval)"),
            (([1, 2, float("nan")], [1, 2, 3]), {}, "compare: before_ms holds NaN, inf or negative times"),
            (([1, 2, 3], [1, 2, -3]), {}, "compare: after_ms holds NaN, inf or negative times"),
            ((None, [1, 2, 3]), {}, "compare: before_ms must be a sequence of step times in ms"),
            (([1, 2, 3], ["a", "b", "c"]), {}, "compare: after_ms must be a sequence of step times in ms")]:
        with pytest.raises(KitError) as info:
            compare(*args, **kwargs)
        assert str(info.value) == message
    assert compare([0.0, 1.0, 2.0], [0.0, 1.0, 2.0]).n_before == 3          # 3 values, a zero time: accepted


def test_compare_series_and_settings_present_tables():
    """Each row of compare_series is compare() against the baseline, field for field;
    settings_present lists the four settings in order (the key found, n, median) and then
    the series that are none of them."""
    st = open_capture("profiler_5step").step_times()
    t = compare_series(st, "step_ms_uninstrumented", confidence=0.9, seed=4)
    assert t.columns.tolist() == ["n", "median_ms", "iqr_ms", "difference_ms", "relative", "ci_low_ms",
                                  "ci_high_ms", "p_value", "verdict"]
    assert str(t["n"].dtype) == "int64"
    for name in ("step_ms_fixed_batch", "step_ms_profiled_all_attribution"):
        c = compare(st["step_ms_uninstrumented"], st[name], confidence=0.9, seed=4)
        assert t.loc[name].tolist() == [c.n_after, c.after_median_ms, c.after_iqr_ms, c.difference_ms, c.relative,
                                        c.ci_low_ms, c.ci_high_ms, c.p_value, c.verdict]
    # by default, the same seed (0) and level (95 %) as compare()'s own defaults
    default = compare_series(st, "step_ms_uninstrumented").loc["step_ms_fixed_batch"]
    c = compare(st["step_ms_uninstrumented"], st["step_ms_fixed_batch"])
    assert (default["ci_low_ms"], default["ci_high_ms"]) == (c.ci_low_ms, c.ci_high_ms)
    with pytest.raises(KitError) as info:
        compare_series(st, "step_ms_nope")
    assert str(info.value) == ("compare_series: no series 'step_ms_nope' (have: step_ms_uninstrumented, "
                               "step_ms_fixed_batch, step_ms_profiled_all_attribution)")
    assert compare_series({"only": [1, 2, 3]}, "only").empty
    p = settings_present(st)
    assert p.index.tolist() == ["uninstrumented", "NVTX ranges only", "torch.profiler, no attribution",
                                "torch.profiler, shapes+memory+stacks+FLOPs", "step_ms_fixed_batch"]
    assert p.columns.tolist() == ["series", "n", "median_ms", "present"]
    assert p["series"].tolist() == ["step_ms_uninstrumented", "", "", "step_ms_profiled_all_attribution",
                                    "step_ms_fixed_batch"]
    assert p["n"].tolist() == [10, 0, 0, 7, 10] and p["present"].tolist() == [True, False, False, True, True]
    assert p["median_ms"].iloc[[0, 3, 4]].tolist() == [float(np.median(st[k])) for k in
                                                       ("step_ms_uninstrumented", "step_ms_profiled_all_attribution",
                                                        "step_ms_fixed_batch")]
    assert p["median_ms"].iloc[1:3].isna().all()
    # the live name of the full setting is found too
    live = settings_present({"step_ms_profiler_full": [3.0, 1.0, 2.0]})
    assert live.loc["torch.profiler, shapes+memory+stacks+FLOPs", ["series", "n", "median_ms"]].tolist() == \
        ["step_ms_profiler_full", 3, 2.0]


# ---- align.py helpers: survivors of the 1 December mutation run
# Each expected value below is read off the tools' own files by code in this section (the
# conftest's raw_trace_events, gzip and orjson only, and sqlite3: the raw Chrome-trace JSON,
# Nsight's SQLite export), or worked on paper for a tiny hand-built table.
import collections

from kitlib.readers.trace import load_trace

_WORK_DOC_COLUMNS = ["kind", "pid", "tid", "correlation", "launch_start_ns", "launch_end_ns",
                     "start_ns", "end_ns", "dur_ns"]      # gpu_work's docstring, in order


def _sqlite(name):
    return sqlite3.connect(f"file:{REF / name / 'report.sqlite'}?mode=ro", uri=True)


_CUPTI_OPS = {"kernel": "CUPTI_ACTIVITY_KIND_KERNEL", "memcpy": "CUPTI_ACTIVITY_KIND_MEMCPY",
              "memset": "CUPTI_ACTIVITY_KIND_MEMSET"}


def _nsys_launched_ops(name):
    """(kind, pid, tid, correlation, launch start, launch end, start, end, dur) of every GPU
    operation in the export's CUPTI tables, joined to the CUDA runtime call of the same
    correlationId in the same process; pid and tid are the two 24-bit fields of the call's
    globalTid (Nsight Systems' export documentation: globalTid = pid << 24 | tid). Also the
    number of GPU operations in those tables."""
    con = _sqlite(name)
    rows = con.execute(" UNION ALL ".join(
        f"SELECT '{kind}', r.globalTid, g.correlationId, r.start, r.end, g.start, g.end FROM {t} g "
        f"JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = g.correlationId "
        f"AND (r.globalTid >> 24) = (g.globalPid >> 24)" for kind, t in _CUPTI_OPS.items())).fetchall()
    n_ops = sum(con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in _CUPTI_OPS.values())
    con.close()
    return sorted((kind, (gt >> 24) & 0xFFFFFF, gt & 0xFFFFFF, corr, ls, le, s, e, e - s)
                  for kind, gt, corr, ls, le, s, e in rows), n_ops


@pytest.mark.parametrize("name", ["nsys_8step", "nsys_emit_nvtx"])
def test_gpu_work_of_an_nsight_export_is_its_cupti_tables(name):
    """Every row of gpu_work on an Nsight export: each GPU operation of the CUPTI tables with
    the CUDA runtime call that launched it (launch_end_ns is the call's end, end_ns the
    operation's end), sorted by launch."""
    want, n_ops = _nsys_launched_ops(name)
    w = gpu_work(open_capture(name).nsys)
    assert len(w) == len(want) == n_ops          # every operation's launch is in these exports
    assert w.columns.tolist() == _WORK_DOC_COLUMNS
    assert w.index.equals(pd.RangeIndex(len(want)))
    assert sorted(map(tuple, w.astype(object).values.tolist())) == want
    assert w["launch_start_ns"].is_monotonic_increasing


def test_gpu_work_of_a_trace_is_its_raw_launches_and_gpu_events():
    """gpu_work on fixed_batch, row for row from the raw JSON: each kernel / gpu_memcpy /
    gpu_memset event beside the cuda_runtime or cuda_driver event of its correlation (the launch:
    its ts and ts + dur), times in ns. The trace's first launch (correlation 12829) queues a
    kernel: it is the first row. GPU events whose launch is not in the trace are left out."""
    raw = raw_trace_events(REF / "fixed_batch" / "trace.json.gz")
    launch = {}
    for e in raw:
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e["args"]:
            launch.setdefault(e["args"]["correlation"], []).append(e)
    kinds = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
    want = []
    for e in raw:
        if e.get("ph") == "X" and e.get("cat") in kinds:
            if e["args"]["correlation"] not in launch:         # launched before the recording began
                continue
            (la,) = launch[e["args"]["correlation"]]          # exactly one launch per GPU event here
            want.append((kinds[e["cat"]], la["pid"], la["tid"], e["args"]["correlation"], ns(la["ts"]),
                         ns(la["ts"]) + ns(la["dur"]), ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), ns(e["dur"])))
    first = min((l for ls in launch.values() for l in ls), key=lambda l: l["ts"])
    assert first["args"]["correlation"] == 12829
    w = gpu_work(open_capture("fixed_batch").trace)
    # 3,788 GPU events (2,762 kernels, 1,021 memsets, 5 copies); 78 were launched before the recording
    assert len(w) == len(want) == 3710
    assert w.columns.tolist() == _WORK_DOC_COLUMNS
    assert w.index.equals(pd.RangeIndex(len(want)))
    assert sorted(map(tuple, w.astype(object).values.tolist())) == sorted(want)
    assert w["correlation"].iloc[0] == 12829 and w["launch_start_ns"].iloc[0] == ns(first["ts"])


def test_gpu_work_of_a_cpu_only_trace_is_empty_with_numeric_threads():
    """ranks_balanced's rank 0 was recorded on the CPU: its raw JSON has no kernel, memcpy or
    memset event, so gpu_work is empty, with the documented columns and pid/tid numbers as on
    any other recording (what launch_threads groups by)."""
    path = REF / "ranks_balanced" / "rank0" / "trace.json.gz"
    raw = raw_trace_events(path)
    assert not [e for e in raw if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    w = gpu_work(load_trace(path))
    assert w.empty and w.columns.tolist() == _WORK_DOC_COLUMNS
    assert pd.api.types.is_numeric_dtype(w["pid"]) and pd.api.types.is_numeric_dtype(w["tid"])


_THREADS_DOC_COLUMNS = ["pid", "tid", "thread", "kernels", "gpu_ops", "kernel_share", "labelled_ranges"]


@pytest.mark.parametrize("name", ["nsys_8step", "nsys_emit_nvtx"])
def test_launch_threads_of_an_nsight_export_from_its_tables(name):
    """One row per launching thread, counted in the SQLite: kernels and GPU operations it
    launched (the CUPTI join above), its name (ThreadNames -> StringIds), the NVTX ranges on it
    (NVTX_EVENTS rows with an end), the share of all kernels; most kernels first."""
    ops, _ = _nsys_launched_ops(name)
    kernels = collections.Counter((p, t) for kind, p, t, *_ in ops if kind == "kernel")
    gpu_ops = collections.Counter((p, t) for _, p, t, *_ in ops)
    con = _sqlite(name)
    names = {((gt >> 24) & 0xFFFFFF, gt & 0xFFFFFF): v for gt, v in con.execute(
        "SELECT t.globalTid, s.value FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId")}
    nvtx = collections.Counter(gt & 0xFFFFFF for (gt,) in con.execute(
        "SELECT globalTid FROM NVTX_EVENTS WHERE end IS NOT NULL"))
    con.close()
    th = launch_threads(open_capture(name).nsys)
    assert th.columns.tolist() == _THREADS_DOC_COLUMNS
    assert th.index.equals(pd.RangeIndex(len(gpu_ops)))
    assert th["kernels"].is_monotonic_decreasing
    total = sum(kernels.values())
    want = sorted([p, t, names[(p, t)], kernels[(p, t)], n, kernels[(p, t)] / total, nvtx[t]]
                  for (p, t), n in gpu_ops.items())
    assert sorted(th.astype(object).values.tolist()) == want
    assert str(th["labelled_ranges"].dtype) == "int64"
    assert th["kernel_share"].sum() == pytest.approx(1.0)


def test_launch_threads_of_a_trace_from_its_raw_json():
    """cold_start_8step: the launching threads counted in the raw JSON (GPU events joined to
    their launch by correlation): autograd's thread 536 launches 2,360 kernels (3,186 GPU
    operations) and carries no user_annotation; the main thread 449 launches 1,963 (2,934) and
    carries the 72 user_annotation ranges (8 steps: ProfilerStep#N and its phases)."""
    raw = raw_trace_events(REF / "cold_start_8step" / "trace.json.gz")
    launch = {e["args"]["correlation"]: e for e in raw if e.get("ph") == "X"
              and e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e["args"]}
    kernels, gpu_ops = collections.Counter(), collections.Counter()
    for e in raw:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            la = launch.get(e["args"]["correlation"])
            if la is not None:
                gpu_ops[(la["pid"], la["tid"])] += 1
                kernels[(la["pid"], la["tid"])] += e["cat"] == "kernel"
    labelled = collections.Counter(e["tid"] for e in raw if e.get("ph") == "X" and e.get("cat") == "user_annotation")
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in raw if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert kernels == {(449, 536): 2360, (449, 449): 1963} and gpu_ops == {(449, 536): 3186, (449, 449): 2934}
    assert labelled == {449: 72} and names[(449, 536)] == "thread 536 (pt_autograd_0)"
    th = launch_threads(open_capture("cold_start_8step").trace)
    assert th.columns.tolist() == _THREADS_DOC_COLUMNS
    assert th[["pid", "tid", "kernels", "gpu_ops", "labelled_ranges"]].values.tolist() == \
        [[449, 536, 2360, 3186, 0], [449, 449, 1963, 2934, 72]]
    assert th["kernel_share"].tolist() == [2360 / 4323, 1963 / 4323]
    assert str(th["labelled_ranges"].dtype) == "int64"
    # the thread's name: the trace's own thread_name metadata, found by (pid, tid) (it was ""
    # until 1 December: launch_threads looked the names up by tid alone)
    assert th["thread"].tolist() == [names[(449, 536)], names[(449, 449)]] == \
        ["thread 536 (pt_autograd_0)", "thread 449 (python3)"]


def test_operator_ranges_row_for_row_from_the_sqlite():
    """operator_ranges on nsys_emit_nvtx, from NVTX_EVENTS (its text column): the ranges
    whose text carries ", op_id = N" or ", seq = N" (5,370 of the 5,378; the other 8 are
    torch_step#N / forward / backward / optimizer), split here with str.partition: op (before the
    first comma), seq (1,158 forward operators) and op_id as numbers, sizes (its text, "" in the
    684 ranges written without one), tid (globalTid's low 24 bits), start, end - start, and depth
    (how many other ranges of the thread enclose it)."""
    con = _sqlite("nsys_emit_nvtx")
    rows = con.execute("SELECT text, globalTid, start, end FROM NVTX_EVENTS WHERE end IS NOT NULL").fetchall()
    con.close()
    enclosing = {}                         # (globalTid, start, end) -> ranges of its thread enclosing it
    for gt in {r[1] for r in rows}:
        se = np.array([(s, e) for _, g, s, e in rows if g == gt])
        inside = (se[:, None, 0] <= se[None, :, 0]) & (se[:, None, 1] >= se[None, :, 1])  # [i, j]: j inside i
        enclosing.update({(gt, s, e): n - 1 for (s, e), n in zip(se.tolist(), inside.sum(axis=0).tolist())})

    def field(text, key):
        rest = text.partition(f", {key} = ")[2]
        if key == "sizes":                 # a list of lists, up to the input_op_ids field or the end
            return rest.partition(", input_op_ids = ")[0]
        return int(rest.partition(",")[0]) if rest else None

    want = []
    for text, gt, s, e in rows:
        if ", op_id = " not in text and ", seq = " not in text:
            continue
        depth = enclosing[(gt, s, e)]
        want.append([text.partition(",")[0].strip(), field(text, "seq"), field(text, "op_id"),
                     field(text, "sizes") or "", gt & 0xFFFFFF, s, e - s, depth])
    assert len(rows) == 5378 and len(want) == 5370
    assert sum(w[1] is not None for w in want) == 1158 and sum(w[3] == "" for w in want) == 684
    ops = operator_ranges(open_capture("nsys_emit_nvtx").nsys)
    assert ops.columns.tolist() == ["op", "seq", "op_id", "sizes", "tid", "start_ns", "dur_ns", "depth"]
    assert [str(ops[c].dtype) for c in ["seq", "op_id", "start_ns", "dur_ns"]] == ["Int64", "Int64", "int64", "int64"]
    assert ops.index.equals(pd.RangeIndex(5370))
    got = [[None if v is pd.NA else v for v in r] for r in ops.astype(object).values.tolist()]
    assert sorted(got, key=repr) == sorted(want, key=repr)


def test_align_summary_is_the_median_of_the_warm_steps(by_time):
    """align_summary, recomputed from the align table it is given with plain numpy: per label,
    in the table's own label order (step, then the phases as align lists them), the median over
    steps 1-7 of each figure (ns -> ms for the times), and comparable only where every one of
    those steps is."""
    s = align_summary(by_time)
    labels = list(dict.fromkeys(by_time["label"]))         # first-seen order
    assert labels == ["step", "data_load", "h2d", "forward", "backward", "optimizer"]
    assert s.index.tolist() == labels
    assert s.columns.tolist() == ["prof_host_ms", "nsys_host_ms", "prof_gpu_proj_ms", "nsys_gpu_proj_ms",
                                  "prof_kernels", "nsys_kernels", "comparable"]
    warm = by_time[by_time["step"] >= 1]
    for lab in labels:
        rows = warm[warm["label"] == lab]
        for c in ["prof_host", "nsys_host", "prof_gpu_proj", "nsys_gpu_proj"]:
            v = rows[f"{c}_ns"].dropna().astype("int64").to_numpy()
            if len(v):
                assert s.loc[lab, f"{c}_ms"] == pytest.approx(np.median(v) / 1e6, rel=1e-12), (lab, c)
            else:
                assert pd.isna(s.loc[lab, f"{c}_ms"]), (lab, c)
        for c in ["prof_kernels", "nsys_kernels"]:
            v = rows[c].dropna().astype("int64").to_numpy()
            assert (s.loc[lab, c] == np.median(v)) if len(v) else pd.isna(s.loc[lab, c]), (lab, c)
        assert s.loc[lab, "comparable"] == bool(rows["comparable"].all()), lab
    assert s["comparable"].tolist() == [True, False, False, True, True, True]   # data_load, h2d: see above


def test_align_summary_leaves_out_step_0_only_when_asked_and_when_others_remain():
    """A hand-built align table, one label, steps 0, 1, 2 with every time 1, 2 and 4 ms and
    10, 20, 40 kernels; step 0 not comparable. Worked on paper: the default leaves out step 0
    (median of 2 and 4 ms: 3 ms, 30 kernels, comparable); skip_first=False keeps it (2 ms, 20
    kernels, not comparable); a table of step 0 alone keeps it anyway (1 ms); steps 0 and 1:
    step 1 alone (2 ms, 20 kernels)."""
    def table(steps):
        ms, kern = {0: 1, 1: 2, 2: 4}, {0: 10, 1: 20, 2: 40}
        t = pd.DataFrame({"step": steps, "label": ["step"] * len(steps), "comparable": [k > 0 for k in steps]})
        for c in ["prof_host_ns", "nsys_host_ns", "prof_gpu_proj_ns", "nsys_gpu_proj_ns"]:
            t[c] = pd.array([ms[k] * 1_000_000 for k in steps], dtype="Int64")
        for c in ["prof_kernels", "nsys_kernels"]:
            t[c] = pd.array([kern[k] for k in steps], dtype="Int64")
        return t

    def figures(s):
        assert s.index.tolist() == ["step"]
        r = s.loc["step"]
        assert r[["prof_host_ms", "nsys_host_ms", "prof_gpu_proj_ms"]].tolist() == [r["nsys_gpu_proj_ms"]] * 3
        assert r["prof_kernels"] == r["nsys_kernels"]
        return r["nsys_host_ms"], r["nsys_kernels"], bool(r["comparable"])

    assert figures(align_summary(table([0, 1, 2]))) == (3.0, 30, True)
    assert figures(align_summary(table([0, 1, 2]), skip_first=False)) == (2.0, 20, False)
    assert figures(align_summary(table([0]))) == (1.0, 10, False)
    assert figures(align_summary(table([0, 1]))) == (2.0, 20, True)


def _hand_work(rows):
    return pd.DataFrame(rows, columns=_WORK_DOC_COLUMNS[:4] + ["launch_start_ns", "launch_end_ns", "start_ns", "end_ns"]) \
        .assign(dur_ns=lambda w: w["end_ns"] - w["start_ns"])


def test_project_on_a_hand_built_table_boundaries_included():
    """Two ranges on thread (1, 10): A = [100, 200] ns, B = [300, 400] ns (nothing launched in B).
    Four launches (kind, pid, tid, correlation, launch start-end, GPU start-end):
      1 kernel (1, 10) at 100-120, GPU 1000-1010  -- starts at A's start
      2 memcpy (1, 10) at 150-200, GPU 1020-1050  -- ends at A's end
      3 kernel (1, 11) at 200-210, GPU 1060-1100  -- another thread, starts at A's end
      4 kernel (2, 10) at 150-160, GPU 2000-2005  -- another process
    Worked on paper. "thread" (the default): A gets 1 and 2 (both inside [100, 200] on thread 10):
    2 GPU ops, 1 kernel of 10 ns, projected 1000-1050 (50 ns). "time": A gets 1, 2 and 3 (their
    launches start in [100, 200] in process 1): 3 ops, 2 kernels, 10 + 40 = 50 ns, 1000-1100
    (100 ns). B: 0 ops, 0 kernels, 0 ns, no projection (<NA>), under both rules."""
    ranges = pd.DataFrame({"name": ["A", "B"], "pid": [1, 1], "tid": [10, 10], "start_ns": [100, 300],
                           "end_ns": [200, 400]})
    work = _hand_work([["kernel", 1, 10, 1, 100, 120, 1000, 1010], ["memcpy", 1, 10, 2, 150, 200, 1020, 1050],
                       ["kernel", 1, 11, 3, 200, 210, 1060, 1100], ["kernel", 2, 10, 4, 150, 160, 2000, 2005]])
    cols = ["gpu_ops", "kernels", "kernel_sum_ns", "proj_start_ns", "proj_end_ns", "proj_dur_ns"]
    nothing = [0, 0, 0, None, None, None]

    def figures(p):
        assert p.columns.tolist() == ranges.columns.tolist() + cols
        assert p[ranges.columns].equals(ranges)
        assert [str(p[c].dtype) for c in cols] == ["Int64"] * 6
        return [[None if v is pd.NA else v for v in r] for r in p[cols].astype(object).values.tolist()]

    assert figures(project(ranges, work, "thread")) == [[2, 1, 10, 1000, 1050, 50], nothing]
    assert figures(project(ranges, work)) == [[2, 1, 10, 1000, 1050, 50], nothing]
    assert figures(project(ranges, work, "time")) == [[3, 2, 50, 1000, 1100, 100], nothing]
    # no ranges: no rows, the same columns
    empty = project(ranges.iloc[:0], work, "time")
    assert empty.empty and empty.columns.tolist() == ranges.columns.tolist() + cols
    assert [str(empty[c].dtype) for c in cols] == ["Int64"] * 6
    with pytest.raises(KitError) as info:
        project(ranges, work, "nope")
    assert str(info.value) == "unknown attribution 'nope'; use one of thread, time"


# ================================================================================================
# Lesson 09's align() tables, every cell derived without kitlib.
#
# ``align(profiler, nsys, attribution)`` lines a torch.profiler recording up with an Nsight
# Systems export: per matched step and label, each tool's host duration and the GPU work
# credited to the range(s) (launches, kernels, their summed durations, the GPU projection),
# then ``comparable``/``note`` per row and ``attrs`` (rule, same run?, what ``data_load``
# covers, the notes lesson 09 prints). Here every figure is recomputed from the raw files:
#
# - torch.profiler: the ``trace.json.gz`` events read with ``json`` (times as exact decimals,
#   µs with three decimals, so ``µs × 1000`` is the ns value): ``user_annotation`` ranges
#   (``torch_step#N`` / ``ProfilerStep#N`` steps and the phase labels), ``cuda_runtime`` /
#   ``cuda_driver`` launches and the ``kernel`` / ``gpu_memcpy`` / ``gpu_memset`` events they
#   queued, joined on ``args.correlation``.
# - Nsight Systems: ``report.sqlite`` read with sqlite3: ``NVTX_EVENTS`` ranges,
#   ``CUPTI_ACTIVITY_KIND_RUNTIME`` launches and the KERNEL / MEMCPY / MEMSET rows joined on
#   (process, ``correlationId``); thread ids are the low 24 bits of ``globalTid``, process
#   ids the next 24.
# - The two crediting rules as the module docstring of ``kitlib/analyses/align.py`` states
#   them: ``"time"``, a launch by any thread of the range's process starting inside
#   ``[start, end]``; ``"thread"``, a launch on the range's own thread starting and ending
#   inside it (Nsight's NVTX GPU projection). A phase of step k is a range of that label on
#   the step's thread inside the step's interval; steps are matched in time order.
# - ``comparable``, ``note`` and ``attrs`` from each bundle's ``manifest.json``
#   (``workload.data_load_covers``; no manifest names a ``run_id``) and the rules written in
#   ``align``'s docstring.
#
# Each test calls ``align`` itself (no shared fixture holding its output), so that mutmut,
# which runs only the tests during which a function ran, runs every one of them against
# align's mutants; the raw files are parsed once per module.
# ================================================================================================

ALIGN_STEP = re.compile(r"^(?:ProfilerStep|torch_step)(?:#(\d+))?$")
ALIGN_GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
PHASES = ["data_load", "h2d", "forward", "backward", "optimizer"]   # align's docstring: PHASES order
COLUMNS = ["step", "prof_step", "nsys_step", "label",
           "prof_host_ns", "prof_gpu_proj_ns", "prof_gpu_ops", "prof_kernels", "prof_kernel_sum_ns",
           "nsys_host_ns", "nsys_gpu_proj_ns", "nsys_gpu_ops", "nsys_kernels", "nsys_kernel_sum_ns",
           "attribution", "comparable", "note"]
FIGURES = ["host_ns", "gpu_ops", "kernels", "kernel_sum_ns", "gpu_proj_ns"]


# --------------------------------------------------------------------------- the raw files
def _decimal_ns(us):
    return int(us * 1000)                  # an exact Decimal of µs with three decimals


def _work(launch, ops):
    """Arrays of the GPU operations whose launch is in the recording, with that launch."""
    rows = [(key, kind == "kernel", *launch[key], s, e) for key, kind, s, e in ops]
    names = ["key", "kern", "pid", "tid", "ls", "le", "gs", "ge"]
    return {n: np.array(v) for n, v in zip(names, zip(*rows))}


def _prof_raw(name):
    """(ranges, work) of a torch.profiler trace; a range is (name, pid, tid, start_ns, end_ns)."""
    raw = json.loads(gzip.open(REF / name / "trace.json.gz").read(), parse_float=Decimal)
    ev = [e for e in raw["traceEvents"] if e.get("ph") == "X"]
    ranges = [(e["name"], e["pid"], e["tid"], _decimal_ns(e["ts"]), _decimal_ns(e["ts"]) + _decimal_ns(e["dur"]))
              for e in ev if e.get("cat") == "user_annotation"]
    launch = {e["args"]["correlation"]: (e["pid"], e["tid"], _decimal_ns(e["ts"]), _decimal_ns(e["ts"]) + _decimal_ns(e["dur"]))
              for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e["args"]}
    ops = [(e["args"]["correlation"], ALIGN_GPU_CATS[e["cat"]], _decimal_ns(e["ts"]), _decimal_ns(e["ts"]) + _decimal_ns(e["dur"]))
           for e in ev if e.get("cat") in ALIGN_GPU_CATS and e["args"].get("correlation") in launch]
    return ranges, _work(launch, ops)


def _nsys_raw(name):
    """(ranges, work) of an Nsight Systems export, in the same shapes."""
    con = sqlite3.connect(f"file:{REF / name / 'report.sqlite'}?mode=ro", uri=True)
    try:
        ranges = con.execute("SELECT coalesce(e.text, s.value), (e.globalTid >> 24) & 16777215, "
                             "e.globalTid & 16777215, e.start, e.end FROM NVTX_EVENTS e "
                             "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.end IS NOT NULL").fetchall()
        launch = {(p, c): (p, t, s, e) for p, t, c, s, e in con.execute(
            "SELECT (globalTid >> 24) & 16777215, globalTid & 16777215, correlationId, start, end "
            "FROM CUPTI_ACTIVITY_KIND_RUNTIME")}
        ops = []
        for table, kind in (("KERNEL", "kernel"), ("MEMCPY", "memcpy"), ("MEMSET", "memset")):
            ops += [((p, c), kind, s, e) for p, c, s, e in con.execute(
                f"SELECT (globalPid >> 24) & 16777215, correlationId, start, end FROM CUPTI_ACTIVITY_KIND_{table}")
                if (p, c) in launch]
    finally:
        con.close()
    w = _work(launch, ops)
    w["key"] = np.array([p * 2**32 + c for (p, c), *_ in ops])
    return ranges, w


def _numbered_steps(ranges):
    """[(step number, range)] in time order: the number after '#', else the position."""
    st = sorted((r for r in ranges if ALIGN_STEP.match(r[0])), key=lambda r: r[3])
    return [(int(ALIGN_STEP.match(r[0]).group(1) or i), r) for i, r in enumerate(st)]


def _credit(rs, w, rule):
    """(host_ns, gpu_ops, kernels, kernel_sum_ns, gpu_proj_ns) of the ranges rs, None without any."""
    if not rs:
        return None
    host = ops = kern = ksum = 0
    union = np.zeros(len(w["ls"]), bool)
    for _, pid, tid, s, e in rs:
        m = (w["pid"] == pid) & (w["ls"] >= s)
        m &= (w["ls"] <= e) if rule == "time" else (w["tid"] == tid) & (w["le"] <= e)
        k = m & w["kern"]
        host, ops = host + e - s, ops + len(set(w["key"][m].tolist()))
        kern, ksum = kern + int(k.sum()), ksum + int((w["ge"][k] - w["gs"][k]).sum())
        union |= m
    proj = int(w["ge"][union].max() - w["gs"][union].min()) if union.any() else None
    return host, ops, kern, ksum, proj


def _expected(prof, nsys, rule):
    """align's rows from the raw files: [step, prof_step, nsys_step, label, 5 prof figures, 5 nsys figures]."""
    (pr, pw), (nr, nw) = prof, nsys
    ps, ns = _numbered_steps(pr), _numbered_steps(nr)
    have = {r[0] for r in pr} | {r[0] for r in nr}
    rows = []
    for k in range(min(len(ps), len(ns))):
        for lab in ["step"] + [p for p in PHASES if p in have]:
            row = [k, ps[k][0], ns[k][0], lab]
            for (_, st), ranges, w in ((ps[k], pr, pw), (ns[k], nr, nw)):
                rs = [st] if lab == "step" else [r for r in ranges if r[0] == lab and r[2] == st[2]
                                                 and r[3] >= st[3] and r[4] <= st[4]]
                row += list(_credit(rs, w, rule) or [None] * 5)
            rows.append(row)
    return rows


def _figures(table):
    """The same columns of align's table, <NA> as None."""
    cols = ["step", "prof_step", "nsys_step", "label"] + [f"{s}_{c}" for s in ("prof", "nsys") for c in FIGURES]
    return [[None if v is pd.NA else v if isinstance(v, str) else int(v) for v in r]
            for r in table[cols].astype(object).itertuples(index=False)]


def _covers(name):
    manifest = json.loads((REF / name / "manifest.json").read_text())
    assert "run_id" not in manifest                  # so align cannot call the two the same run
    return manifest["workload"]["data_load_covers"]


@pytest.fixture(scope="module")
def ranges_and_work():
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = _nsys_raw(name) if (REF / name / "report.sqlite").exists() else _prof_raw(name)
        return cache[name]
    return get


def _check_dtypes(t):
    assert t.columns.tolist() == COLUMNS
    assert {c: str(t[c].dtype) for c in ["step", "prof_step", "nsys_step", "comparable"]} == \
        {"step": "int64", "prof_step": "int64", "nsys_step": "int64", "comparable": "bool"}
    assert {str(t[c].dtype) for c in COLUMNS if c.endswith(("_ns", "_ops", "_kernels"))} == {"Int64"}


# --------------------------------------------------------------------------- lesson 09's pair
@pytest.mark.parametrize("rule", ["time", "thread"])
def test_lesson_pair_every_cell_from_the_raw_files_and_manifests(ranges_and_work, rule):
    """align(cold_start_8step, nsys_8step) as lesson 09 calls it: every figure of the 48 rows
    (8 steps x step + 5 phases) recomputed from trace.json.gz and report.sqlite, and the
    comparable/note columns and attrs from the two manifests."""
    t = align(open_capture("cold_start_8step"), open_capture("nsys_8step"), attribution=rule)
    _check_dtypes(t)
    exp = _expected(ranges_and_work("cold_start_8step"), ranges_and_work("nsys_8step"), rule)
    assert len(exp) == 48 and [r[3] for r in exp[:6]] == ["step"] + PHASES
    assert _figures(t) == exp
    # sanity of the recomputation itself: Nsight's own first data_load range (PROVENANCE.md, 1,469.48 ms)
    assert exp[1][3] == "data_load" and round(exp[1][9] / 1e4) == 146948
    cov_p, cov_n = _covers("cold_start_8step"), _covers("nsys_8step")
    assert cov_p != cov_n
    notes = {"step": "", "h2d": "no 'h2d' range in Nsight (its work is inside data_load there)",
             "data_load": f"data_load differs: torch.profiler = {cov_p}; Nsight = {cov_n}"}
    for row in t.itertuples():
        note = notes.get(row.label, "")
        if row.label == "step" and row.step == 0:
            note = "first step: cold start (loader workers starting, first-use costs)"
        assert (row.note, row.comparable, row.attribution) == (note, row.label not in ("h2d", "data_load"), rule)
    assert t.attrs == {
        "attribution": ATTRIBUTIONS[rule], "same_run": False,
        "data_load_covers": {"torch.profiler": cov_p, "nsight": cov_n},
        "notes": [f"attribution '{rule}': {ATTRIBUTIONS[rule]}.",
                  "cold_start_8step and nsys_8step are different runs: step-for-step figures also differ by "
                  "run-to-run variation, not only by tool.",
                  f"data_load covers different work: torch.profiler {cov_p}; Nsight {cov_n}."]}


def test_lesson_pair_read_as_files_has_no_manifests(ranges_and_work):
    """The same recordings given as a Trace and an NsysReport (no bundle, so no manifest):
    the same figures; whether they are one run, and what data_load covers, is unknown, so
    data_load is not flagged (unknown on both sides) while h2d still is."""
    caps = open_capture("cold_start_8step"), open_capture("nsys_8step")
    t = align(caps[0].trace, caps[1].nsys, attribution="time")
    _check_dtypes(t)
    assert _figures(t) == _expected(ranges_and_work("cold_start_8step"), ranges_and_work("nsys_8step"), "time")
    h2d = t["label"] == "h2d"
    assert (t["comparable"] == ~h2d).all()
    assert set(t.loc[h2d, "note"]) == {"no 'h2d' range in Nsight (its work is inside data_load there)"}
    assert set(t.loc[t["label"] == "data_load", "note"]) == {""}
    assert t.attrs == {"attribution": ATTRIBUTIONS["time"], "same_run": None,
                       "data_load_covers": {"torch.profiler": None, "nsight": None},
                       "notes": [f"attribution 'time': {ATTRIBUTIONS['time']}.",
                                 "whether the two recordings are the same run is not known (no manifests given)."]}


# --------------------------------------------------------------------------- the other shipped pair
def test_fixed_batch_beside_emit_nvtx(ranges_and_work):
    """fixed_batch (ProfilerStep#2-#6) beside nsys_emit_nvtx (torch_step#3, #4), the fixed-batch
    pair: two steps matched, no data_load or h2d in either, both manifests saying data_load is
    next(batches) only, so every row is comparable and no data_load note is added."""
    t = align(open_capture("fixed_batch"), open_capture("nsys_emit_nvtx"), attribution="time")
    _check_dtypes(t)
    exp = _expected(ranges_and_work("fixed_batch"), ranges_and_work("nsys_emit_nvtx"), "time")
    assert [r[:4] for r in exp] == [[k, 2 + k, 3 + k, lab] for k in range(2)
                                    for lab in ["step", "forward", "backward", "optimizer"]]
    assert _figures(t) == exp
    assert t["comparable"].all() and t["note"].tolist() == \
        ["first step: cold start (loader workers starting, first-use costs)"] + [""] * 7
    cov = _covers("fixed_batch")
    assert cov == _covers("nsys_emit_nvtx") == "next(batches) only"
    assert t.attrs == {"attribution": ATTRIBUTIONS["time"], "same_run": False,
                       "data_load_covers": {"torch.profiler": cov, "nsight": cov},
                       "notes": [f"attribution 'time': {ATTRIBUTIONS['time']}.",
                                 "fixed_batch and nsys_emit_nvtx are different runs: step-for-step figures "
                                 "also differ by run-to-run variation, not only by tool."]}


def test_a_label_only_nsight_has(ranges_and_work):
    """fixed_batch has no data_load range, nsys_8step has one per step: the data_load rows
    say so and are not comparable (the default labels are those of either tool)."""
    t = align(open_capture("fixed_batch").trace, open_capture("nsys_8step").nsys, attribution="time")
    assert _figures(t) == _expected(ranges_and_work("fixed_batch"), ranges_and_work("nsys_8step"), "time")
    dl = t[t["label"] == "data_load"]
    assert len(dl) == 5 and set(dl["note"]) == {"no 'data_load' range in torch.profiler"}
    assert not dl["comparable"].any() and dl["prof_host_ns"].isna().all()
    assert t.loc[t["label"] != "data_load", "comparable"].all()


def test_a_label_only_torch_profiler_has(ranges_and_work):
    """The other way round: cold_start_8step has data_load and h2d ranges, nsys_emit_nvtx
    neither (one fixed on-device batch); only the h2d rows add where its work went."""
    t = align(open_capture("cold_start_8step").trace, open_capture("nsys_emit_nvtx").nsys, attribution="time")
    assert _figures(t) == _expected(ranges_and_work("cold_start_8step"), ranges_and_work("nsys_emit_nvtx"), "time")
    assert t.loc[t["label"].isin(["data_load", "h2d"]), ["label", "note", "comparable"]].values.tolist() == \
        [["data_load", "no 'data_load' range in Nsight", False],
         ["h2d", "no 'h2d' range in Nsight (its work is inside data_load there)", False]] * 2


@pytest.mark.parametrize("side", ["profiler", "nsight"])
def test_one_manifest_given(side):
    """A bundle on one side, a bare file on the other: what data_load covers is known on
    one side only ("unknown" on the other, so the data_load rows are not comparable), and
    whether the two are one run is not known."""
    cold, nsys = open_capture("cold_start_8step"), open_capture("nsys_8step")
    known = _covers("cold_start_8step" if side == "profiler" else "nsys_8step")
    t = align(cold, nsys.nsys) if side == "profiler" else align(cold.trace, nsys)
    cov_p, cov_n = (known, "unknown") if side == "profiler" else ("unknown", known)
    dl = t[t["label"] == "data_load"]
    assert len(dl) == 8 and not dl["comparable"].any()
    assert set(dl["note"]) == {f"data_load differs: torch.profiler = {cov_p}; Nsight = {cov_n}"}
    assert t.attrs["same_run"] is None
    assert t.attrs["data_load_covers"] == {"torch.profiler": known if side == "profiler" else None,
                                           "nsight": None if side == "profiler" else known}
    assert t.attrs["notes"] == [f"attribution 'time': {ATTRIBUTIONS['time']}.",
                                "whether the two recordings are the same run is not known (no manifests given).",
                                f"data_load covers different work: torch.profiler {cov_p}; Nsight {cov_n}."]


# --------------------------------------------------------------------------- refusals and same run
def test_align_refuses_in_words():
    """The messages of align's own refusals (an nsys bundle given as the profiler side is
    refused earlier, by the bundle itself: it has no trace)."""
    cold, nsys = open_capture("cold_start_8step"), open_capture("nsys_8step")
    for args, kwargs, message in [
            ((cold, nsys), {"attribution": "nope"}, "unknown attribution 'nope'; use one of thread, time"),
            ((cold.trace, cold.trace), {}, "align: expected a NsysReport or nsys Capture, got Trace"),
            ((nsys.nsys, nsys.nsys), {}, "align: expected a Trace or torch_profiler Capture, got NsysReport")]:
        with pytest.raises(KitError) as info:
            align(*args, **kwargs)
        assert str(info.value) == message


def test_same_run_needs_both_manifests_and_one_run_id():
    """Worked on paper from _same_run's docstring (live nsys captures write ``run_id``)."""
    assert _same_run({"run_id": "r1"}, {"run_id": "r1"}) is True
    assert _same_run({"run_id": "r1"}, {"run_id": "r2"}) is False
    assert _same_run({}, {}) is False                     # both known, neither names a run
    assert _same_run({"run_id": "r1"}, {}) is False
    assert _same_run(None, {"run_id": "r1"}) is None and _same_run({"run_id": "r1"}, None) is None


# ================================================================================================
# kitlib.lint's findings pinned on the shipped recordings: each finding's code, severity
# and evidence recomputed from the raw trace JSON by the test itself, and the checks'
# boundaries worked on paper.
# ================================================================================================

# Kineto's categories (torch/csrc/profiler/kineto_shim.cpp, libkineto ActivityType names)
GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset",
            "memset": "memset", "gpu_user_annotation": "gpu_annotation"}
LAUNCH_CATS = ("cuda_runtime", "runtime", "cuda_driver")
STEP = re.compile(r"^(ProfilerStep|torch_step)#(\d+)$")     # the profiler's and the kit's step labels

# The severity each check is documented with (kitlib/analyses/lint.py, Finding.severity):
# "error" when the trace cannot answer its question, "warning" when naive figures are
# wrong, "info" for a limit to keep in mind.
SEVERITY = {"no_gpu_events": "error", "cpu_only": "info", "launches_without_gpu": "warning",
            "impossible_gpu_events": "error", "gpu_without_launches": "warning",
            "gpu_annotations": "warning", "step_without_kernels": "warning",
            "over_100_percent": "warning", "missing_stacks": "warning", "external_ids_fell_back": "info",
            "flops_unreadable": "warning", "backward_flops_absent": "info", "pageable_copies": "warning",
            "too_large_for_viewer": "warning"}


def _text_ns(us):
    """µs with three decimals (the JSON's text) to exact ns."""
    whole = math.floor(us)
    return int(whole) * 1000 + int(round((us - whole) * 1000))


def _raw_parts(path):
    """The trace's own JSON, read without kitlib: GPU rows, launches, host events, steps."""
    evs = raw_trace_events(path)
    gpu, launches, host, steps = [], [], [], []
    for e in evs:
        if e.get("ph") != "X":
            continue
        cat, args = str(e.get("cat", "")).lower(), e.get("args") or {}
        s = _text_ns(e["ts"])
        d = int(round(e.get("dur", 0) * 1000))
        if cat in GPU_CATS:
            gpu.append(dict(kind=GPU_CATS[cat], name=e["name"], s=s, e=s + d, d=d, corr=args.get("correlation"),
                            bytes=args.get("bytes")))
        elif cat in LAUNCH_CATS:
            launches.append(dict(name=e["name"], s=s, corr=args.get("correlation")))
        elif cat in ("cpu_op", "user_annotation", "python_function"):
            host.append(dict(cat=cat, name=e["name"], tid=e.get("tid"), s=s, e=s + d, dims=args.get("Input Dims")))
            m = STEP.match(e["name"])
            if cat == "user_annotation" and m:
                steps.append((int(m.group(2)), s, s + d))
    return dict(gpu=gpu, launches=launches, host=host, steps=sorted(steps))


def _overlap_ns(rows, s0, s1):
    return sum(max(0, min(r["e"], s1) - max(r["s"], s0)) for r in rows)


def expected_evidence(r):
    """code -> evidence, worked from the raw JSON by the rules lint's docstring states."""
    out = {}
    work = [g for g in r["gpu"] if g["kind"] != "gpu_annotation"]
    ann = [g for g in r["gpu"] if g["kind"] == "gpu_annotation"]
    corr = {la["corr"] for la in r["launches"] if la["corr"] is not None}
    orphan = [g for g in work if g["corr"] not in corr]
    if orphan:
        oldest = min(corr)
        out["gpu_without_launches"] = {
            "gpu_events": len(orphan), "launched_before_recording": sum(g["corr"] < oldest for g in orphan),
            "no_launch": sum(g["corr"] >= oldest for g in orphan), "gpu_sum_ns": sum(g["d"] for g in orphan)}
    if ann:
        out["gpu_annotations"] = {"annotations": len(ann), "annotation_sum_ns": sum(g["d"] for g in ann),
                                  "kernel_sum_ns": sum(g["d"] for g in work if g["kind"] == "kernel")}
    over = []
    for step, s0, s1 in r["steps"]:
        total = _overlap_ns(r["gpu"], s0, s1)          # every GPU row, annotations included: a sum, not busy time
        if work and s1 > s0 and total > s1 - s0:
            over.append((step, total, s1 - s0, _overlap_ns(ann, s0, s1)))
    if over:
        w = max(over, key=lambda o: o[1] / o[2])
        out["over_100_percent"] = {"steps": [o[0] for o in over], "worst_step": w[0], "worst_sum_ns": w[1],
                                   "worst_wall_ns": w[2], "worst_annotation_ns": w[3]}
    pageable = [g for g in work if g["kind"] == "memcpy" and "Pageable" in g["name"]]
    if pageable:
        out["pageable_copies"] = {"copies": len(pageable), "bytes": sum(g["bytes"] or 0 for g in pageable),
                                  "copy_sum_ns": sum(g["d"] for g in pageable)}
    return out


# The operators with_flops counts (torch/csrc/profiler/util.cpp, computeFlops) that a ResNet-50
# step calls; the profiler's own FLOPs per name are in fixed_batch/key_averages.json.gz.
FLOP_NAMES = ("aten::conv2d", "aten::addmm", "aten::mm")


def _backward_flops_evidence(r):
    """``backward_flops_absent``'s evidence from the raw JSON and the profiler's own rows:
    calls and FLOPs the profiler counted (its key_averages rows with FLOPs, of the
    fixed_batch run: the same calls with the same Input Dims as each shipped 5-step run,
    checked here), the counted calls inside an autograd node (a ``…Backward…`` event
    around them on their thread) and the ``convolution_backward`` operators."""
    ka = json.load(gzip.open(REF / "fixed_batch" / "key_averages.json.gz"))["by_name"]
    counted = [row for row in ka if row.get("flops")]
    assert sorted(row["key"] for row in counted) == sorted(FLOP_NAMES)
    calls = Counter((h["name"], json.dumps(h["dims"])) for h in r["host"] if h["cat"] == "cpu_op" and h["name"] in FLOP_NAMES)
    fixed = _raw_parts(REF / "fixed_batch" / "trace.json.gz")
    assert calls == Counter((h["name"], json.dumps(h["dims"])) for h in fixed["host"]
                            if h["cat"] == "cpu_op" and h["name"] in FLOP_NAMES)
    assert sum(calls.values()) == sum(row["count"] for row in counted)
    by_tid = defaultdict(list)
    for h in r["host"]:
        if "Backward" in h["name"]:
            by_tid[h["tid"]].append(h)
    in_backward = sum(any(a["s"] <= h["s"] and h["e"] <= a["e"] for a in by_tid[h["tid"]])
                      for h in r["host"] if h["cat"] == "cpu_op" and h["name"] in FLOP_NAMES)
    return {"counted_calls": sum(row["count"] for row in counted),
            "counted_flops": sum(row["flops"] for row in counted),
            "backward_calls_counted": in_backward,
            "convolution_backward_calls": sum(h["cat"] == "cpu_op" and "convolution_backward" in h["name"]
                                              for h in r["host"])}


TRACES = [REF / "fixed_batch" / "trace.json.gz", REF / "profiler_5step" / "trace.json.gz",
          REF / "cold_start_8step" / "trace.json.gz", REF / "public-traces" / "hta_2024-03_nccl_sampled_rank0.json.gz",
          PUBLIC / "tracelens_torch2.6_h100_bert_small.json.gz", PUBLIC / "hta_2024-10_triton_driver_launch.json.gz"]

# Which checks fire on each recording, and why (each reason is recomputed below):
CODES = {
    "fixed_batch": ["gpu_without_launches", "gpu_annotations", "over_100_percent", "backward_flops_absent",
                    "python_frames_rule"],
    "profiler_5step": ["gpu_annotations", "over_100_percent", "backward_flops_absent", "python_frames_rule"],
    "cold_start_8step": ["gpu_annotations", "over_100_percent"],
    "hta_2024-03_nccl_sampled_rank0.json.gz": ["pageable_copies"],
    "tracelens_torch2.6_h100_bert_small.json.gz": ["gpu_annotations", "python_frames_rule"],
    "hta_2024-10_triton_driver_launch.json.gz": [],
}


def _shared_trace(path, ref_trace, public_trace):
    """The suite's shared copy of a trace (conftest's session caches)."""
    if path.name == "trace.json.gz":
        return ref_trace(path.parent.name)
    if path.parent == PUBLIC:
        return public_trace(path.name)
    return kitlib.load_trace(path)


def _label(p):
    return p.parent.name if p.name == "trace.json.gz" else p.name


@pytest.mark.parametrize("path", TRACES, ids=_label)
def test_lint_codes_severities_and_evidence_from_raw_json(path, ref_trace, public_trace):
    """Every finding on six recordings: the checks that fire (in the documented order),
    their severity, and each number of their evidence worked from the JSON itself."""
    r = _raw_parts(path)
    found = lint(_shared_trace(path, ref_trace, public_trace))
    assert [f.code for f in found] == CODES[_label(path)]
    assert all(isinstance(f, Finding) and f.severity == SEVERITY.get(f.code, f.severity) for f in found)
    exp = expected_evidence(r)
    by_code = {f.code: f for f in found}
    for code, ev in exp.items():
        assert by_code[code].evidence == ev, code
        assert all(type(v) is int or isinstance(v, list) for v in by_code[code].evidence.values())
    for f in found:                                   # every finding says what it means and what to do
        assert isinstance(f.meaning, str) and isinstance(f.action, str) and f.meaning and f.action
    if "backward_flops_absent" in by_code:
        assert by_code["backward_flops_absent"].evidence == _backward_flops_evidence(r)
        n = by_code["backward_flops_absent"].evidence["backward_calls_counted"]
        assert f"while {n} backward call(s) that reach aten::mm" in by_code["backward_flops_absent"].meaning
    if path.name == "trace.json.gz":                  # the bundle: its recipe adds no finding to these,
        cap = kitlib.open_capture(path.parent.name)   # and its manifest names the torch that recorded it
        torch = json.loads((path.parent / "manifest.json").read_text())["provenance"]["torch"]
        children = tuple(int(x) for x in torch.split("+")[0].split(".")[:2]) >= (2, 12)
        want = [(f.code, f.severity, f.evidence) if f.code != "python_frames_rule" else
                (f.code, "info", {**f.evidence, "frames_are_children": children, "inferred": False}) for f in found]
        assert [(f.code, f.severity, f.evidence) for f in lint(cap)] == want
    if "python_frames_rule" in by_code:
        n_py = sum(h["cat"] == "python_function" for h in r["host"])
        ev = by_code["python_frames_rule"].evidence
        assert ev["python_frames"] == n_py
        assert f"the trace holds {n_py:,} Python frames" in by_code["python_frames_rule"].meaning
    if "over_100_percent" in by_code:                 # the worst step's share, as printed
        ev = exp["over_100_percent"]
        pct = f"worst: step {ev['worst_step']}, {ev['worst_sum_ns'] / ev['worst_wall_ns']:.0%}"
        assert pct in by_code["over_100_percent"].meaning
        assert f"in {len(ev['steps'])} step(s)" in by_code["over_100_percent"].meaning
    if "pageable_copies" in by_code:                  # each copy name with its count
        names = Counter(g["name"] for g in r["gpu"] if g["kind"] == "memcpy" and "Pageable" in g["name"])
        listed = "; ".join(f"{n} ×{c}" for n, c in names.most_common())
        assert f"copies use pageable host memory ({listed})" in by_code["pageable_copies"].meaning


# --------------------------------------------------------------------------- on paper
# Tiny traces written as Kineto writes them (the fields of tests/data/bugcases'
# traces); times in µs, so 1.0 is 1,000 ns. Every expected figure below is counted by hand.
T0 = 1_000_000.0        # an arbitrary clock origin, µs


def _load_at_t0(tmp_path, events, devices=1, options=None, name="t.json"):
    """The trace of ``events`` (built with times from 0) on a clock starting at T0, loaded."""
    top = {"schemaVersion": 1}
    if devices:
        top["deviceProperties"] = [{"id": i, "name": "NVIDIA H200"} for i in range(devices)]
    top.update(options or {})          # Kineto writes record_shapes, with_stack, ... at the top level
    return kitlib.load_trace(write_trace(tmp_path / name, [
        {"name": "process_name", "ph": "M", "ts": T0, "pid": 1, "tid": 0, "args": {"name": "python3"}},
        {"name": "thread_name", "ph": "M", "ts": T0, "pid": 1, "tid": 1, "args": {"name": "thread 1 (python3)"}},
        *shifted(events, T0)], **top))


def _codes(found):
    return {f.code: f for f in found}


def test_launches_without_gpu_counted_by_hand(tmp_path):
    """Which calls count as launches (the pattern, or an API that shares a correlation id with
    GPU work elsewhere), how many have no GPU event, and how many come at the very end."""
    t = _load_at_t0(tmp_path, [
        launch_event("cudaLaunchKernel", 1.0, 1), gpu_event("kernel", "k1", 10.0, 5.0, 1),
        launch_event("cudaLaunchKernel", 2.0, 2), gpu_event("kernel", "k2", 20.0, 5.0, 2),
        launch_event("cudaLaunchKernel", 19.999, 3),           # starts 1 ns before the last GPU start: late
        launch_event("cuLaunchKernel", 5.0, 4),                 # the driver's launch, no GPU event: early
        launch_event("cudaMemcpyAsync", 3.0, 5), gpu_event("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 30.0, 2.0, 5, bytes=64),
        launch_event("cudaMemcpyAsync", 40.0, 6),              # shares its name with a call that made GPU work
        launch_event("cudaStreamSynchronize", 41.0, 7),        # launches nothing: not counted
    ])
    f = _codes(lint(t))["launches_without_gpu"]
    assert f.severity == "warning"
    # launches: corr 1, 2, 3, 4 (by name) and 5, 6 (cudaMemcpyAsync made GPU work) = 6;
    # without a GPU event: 3, 4, 6; late (at or after 29.999 µs, 1 ns before the last GPU
    # start, the copy's 30.0 µs): only corr 6 at 40.0 µs
    assert f.evidence == {"kernel_launches": 6, "without_gpu_event": 3, "after_last_gpu_start": 1,
                          "last_gpu_end_ns": int((T0 + 32.0) * 1000)}
    # without the copy, the last GPU start is k2's (20.0 µs): corr 3 at 19.999 µs is then late too
    t2 = _load_at_t0(tmp_path, [
        launch_event("cudaLaunchKernel", 1.0, 1), gpu_event("kernel", "k1", 10.0, 5.0, 1),
        launch_event("cudaLaunchKernel", 2.0, 2), gpu_event("kernel", "k2", 20.0, 5.0, 2),
        launch_event("cudaLaunchKernel", 19.999, 3), launch_event("cudaLaunchKernel", 19.998, 4)], name="t2.json")
    f2 = _codes(lint(t2))["launches_without_gpu"]
    assert f2.evidence == {"kernel_launches": 4, "without_gpu_event": 2, "after_last_gpu_start": 1,
                           "last_gpu_end_ns": int((T0 + 25.0) * 1000)}


def _step(n, ts, dur):
    return event("user_annotation", f"ProfilerStep#{n}", ts, dur)


def test_step_findings_counted_by_hand(tmp_path):
    """A step with operators and no launch that made GPU work; the summed GPU rows of a step
    against its wall time (a sum above 100 % is flagged, exactly 100 % is not), and the worst
    step picked by ratio, not by size."""
    t = _load_at_t0(tmp_path, [
        _step(1, 0.0, 10.0),                                         # 10,000 ns
        event("cpu_op", "aten::mm", 1.0, 2.0), launch_event("cudaLaunchKernel", 1.5, 1),
        gpu_event("kernel", "k1", 2.0, 6.0, 1), gpu_event("kernel", "k1b", 2.0, 6.0, 1, stream=8),   # 12,000 ns: 120 %
        _step(2, 10.0, 100.0),                                       # 100,000 ns
        event("cpu_op", "aten::mm", 11.0, 2.0), launch_event("cudaLaunchKernel", 11.5, 2),
        gpu_event("kernel", "k2", 12.0, 60.0, 2), gpu_event("kernel", "k2b", 12.0, 50.0, 2, stream=8),   # 110 %
        gpu_event("gpu_user_annotation", "phase", 105.0, 10.0, 2, stream=9),   # 5,000 ns inside step 2
        _step(3, 110.0, 20.0),
        event("cpu_op", "aten::add", 111.0, 1.0), event("cpu_op", "aten::mul", 112.0, 1.0),
        launch_event("cudaLaunchKernel", 111.5, 3),                       # no GPU event for corr 3
        _step(4, 130.0, 10.0),                                       # exactly 100 %: not flagged
        event("cpu_op", "aten::mm", 130.0, 1.0), launch_event("cudaLaunchKernel", 130.5, 4),
        gpu_event("kernel", "k4", 130.0, 10.0, 4),
    ])
    f = _codes(lint(t))
    assert f["step_without_kernels"].evidence == {"steps": [3], "operators": 2}
    assert "1 step(s) ran operators but launched no GPU work" in f["step_without_kernels"].meaning
    over = f["over_100_percent"]
    # step 1: 12,000 / 10,000 = 120 %; step 2: (60,000 + 50,000 + 5,000) / 100,000 = 115 %
    assert over.evidence == {"steps": [1, 2], "worst_step": 1, "worst_sum_ns": 12_000, "worst_wall_ns": 10_000,
                             "worst_annotation_ns": 0}
    assert "in 2 step(s)" in over.meaning and "(worst: step 1, 120%)" in over.meaning
    assert over.severity == f["step_without_kernels"].severity == "warning"


def test_step_findings_cut_to_the_step_and_the_annotation_share(tmp_path):
    """GPU rows are cut to the step's window; the worst step's annotation time is reported."""
    t = _load_at_t0(tmp_path, [
        _step(1, 0.0, 10.0),
        event("cpu_op", "aten::mm", 1.0, 1.0), launch_event("cudaLaunchKernel", 1.5, 1),
        gpu_event("kernel", "k1", 5.0, 20.0, 1),                          # 5,000 ns inside step 1
        gpu_event("gpu_user_annotation", "forward", -5.0, 12.0, 1, stream=9),   # 7,000 ns inside
        _step(2, 10.0, 10.0),                                        # k1's other 10,000 ns: 100 %, not over
        event("cpu_op", "aten::mm", 11.0, 1.0),
    ])
    f = _codes(lint(t))
    assert f["over_100_percent"].evidence == {"steps": [1], "worst_step": 1, "worst_sum_ns": 12_000,
                                              "worst_wall_ns": 10_000, "worst_annotation_ns": 7_000}
    assert f["step_without_kernels"].evidence == {"steps": [2], "operators": 1}


def test_what_says_cuda_was_requested(tmp_path):
    """No GPU work at all: an error when CUDA was asked for (the recipe's activities, the
    trace's deviceProperties or its CUDA calls, in that order of evidence), else a CPU-only note."""
    ops = [event("cpu_op", "aten::mm", 1.0, 2.0), event("cpu_op", "aten::add", 4.0, 1.0)]
    cpu = _load_at_t0(tmp_path, ops, devices=0, name="cpu.json")
    assert [(f.code, f.severity, f.evidence) for f in lint(cpu)] == [("cpu_only", "info", {"cpu_events": 2, "gpu_events": 0})]
    only = lint(cpu)[0]
    assert only.meaning.startswith("a CPU-only recording") and only.action.startswith("for device time")
    for recipe in ({"activities": ["ProfilerActivity.CPU", "ProfilerActivity.CUDA"]}, {"activities": ["cuda"]}):
        f = _codes(lint(cpu, recipe=recipe))["no_gpu_events"]
        assert f.severity == "error" and f.evidence == {"launches": 0, "gpus_listed": 0}
        assert "although CUDA was requested (the recipe lists the CUDA activity)" in f.meaning
    assert [f.code for f in lint(cpu, recipe={"activities": ["CPU"]})] == ["cpu_only"]
    assert [f.code for f in lint(cpu, recipe={"activities": None})] == ["cpu_only"]
    two = _load_at_t0(tmp_path, ops, devices=2, name="two.json")
    f = _codes(lint(two))["no_gpu_events"]
    assert f.evidence == {"launches": 0, "gpus_listed": 2}
    assert "(the trace lists 2 GPU(s) in deviceProperties)" in f.meaning
    calls = _load_at_t0(tmp_path, ops + [launch_event("cudaLaunchKernel", 1.5, 1), launch_event("cudaMalloc", 2.0, 2),
                                    launch_event("cudaLaunchKernel", 2.5, 3)], devices=0, name="calls.json")
    f = _codes(lint(calls))["no_gpu_events"]
    assert f.evidence == {"launches": 3, "gpus_listed": 0}
    assert "(the trace holds 3 CUDA API calls)" in f.meaning


def test_viewer_size_limits_are_strict(tmp_path):
    """``too_large_for_viewer`` fires above a limit, not at it; by default the size is the
    JSON text's (what a viewer parses), the events every table's rows."""
    ev = [event("cpu_op", "aten::mm", 1.0, 2.0), launch_event("cudaLaunchKernel", 1.5, 1), gpu_event("kernel", "k", 3.0, 1.0, 1)]
    t = _load_at_t0(tmp_path, ev)
    size = (tmp_path / "t.json").stat().st_size          # plain JSON: the file is the text
    n = 3 + 2                                             # three complete events and two metadata events
    assert "too_large_for_viewer" not in _codes(lint(t, max_bytes=size, max_events=n))
    f = _codes(lint(t, max_bytes=size - 1, max_events=n))["too_large_for_viewer"]
    assert f.severity == "warning"
    assert f.evidence == {"file_bytes": size, "events": n, "max_bytes": size - 1, "max_events": n}
    f = _codes(lint(t, max_bytes=size, max_events=n - 1))["too_large_for_viewer"]
    assert f.evidence == {"file_bytes": size, "events": n, "max_bytes": size, "max_events": n - 1}
    f = _codes(lint(t, file_bytes=10, max_bytes=9))["too_large_for_viewer"]
    assert f.evidence["file_bytes"] == 10


def test_options_stacks_and_the_python_frame_rule(tmp_path):
    """with_stack on (in the trace or in the recipe) but no frame: ``missing_stacks``; a recipe
    cannot switch off what the trace says was on. Python frames: which rule, and whether inferred."""
    ev = [event("cpu_op", "aten::mm", 1.0, 2.0), launch_event("cudaLaunchKernel", 1.5, 1), gpu_event("kernel", "k", 3.0, 1.0, 1)]
    on = _load_at_t0(tmp_path, ev, options={"with_stack": True}, name="on.json")
    f = _codes(lint(on))["missing_stacks"]
    assert f.severity == "warning" and f.evidence == {"python_events": 0, "call_stacks": 0}
    assert "missing_stacks" in _codes(lint(on, recipe={"with_stack": False}))
    assert "missing_stacks" in _codes(lint(on, recipe={"with_stack": None}))
    off = _load_at_t0(tmp_path, ev, name="off.json")
    assert lint(off) == []
    assert [x.code for x in lint(off, recipe={"with_stack": True})] == ["missing_stacks"]
    assert lint(off, recipe={"with_stack": None, "record_shapes": True}) == []
    assert lint(off, recipe={"with_stack": False, "with_flops": False}) == []   # off on both sides
    # two Python frames in the 2.11 format (no CallFrom): not children, inferred, a warning
    py = ev + [event("python_function", "train.py(3): step", 0.5, 4.0), event("python_function", "nn.Module: Linear", 0.8, 3.0)]
    old = _load_at_t0(tmp_path, py, options={"with_stack": True}, name="old.json")
    f = _codes(lint(old))["python_frames_rule"]
    assert f.severity == "warning"
    assert f.evidence == {"python_frames": 2, "frames_are_children": False, "inferred": True}
    assert "the trace holds 2 Python frames" in f.meaning and "the torch ≤ 2.11 rule (they are not)" in f.meaning
    assert old.meta["python_frames_rule"] in f.meaning
    assert f.action.startswith("open the trace through its bundle")
    # the same frames, the recording's torch named: not inferred, an info
    new = kitlib.load_trace(tmp_path / "old.json", torch_version="2.14.1")
    f = _codes(lint(new))["python_frames_rule"]
    assert f.severity == "info" and f.evidence == {"python_frames": 2, "frames_are_children": True, "inferred": False}
    assert "the torch ≥ 2.12 rule (they are children)" in f.meaning
    assert f.action.startswith("nothing to do")


def test_flops_unreadable_and_copies_without_bytes(tmp_path):
    """with_flops on, but the shapes cannot be read into FLOPs; a pageable copy that carries no
    byte count counts 0 bytes."""
    ev = [event("cpu_op", "aten::mm", 1.0, 2.0, **{"Input Dims": [[2, 3]]}), launch_event("cudaLaunchKernel", 1.5, 1),
          gpu_event("kernel", "k", 3.0, 1.0, 1),
          launch_event("cudaMemcpyAsync", 2.0, 2), gpu_event("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 5.0, 2.0, 2),
          launch_event("cudaMemcpyAsync", 2.5, 3), gpu_event("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 8.0, 1.5, 3, bytes=512)]
    t = _load_at_t0(tmp_path, ev, options={"with_flops": True, "record_shapes": True})
    f = _codes(lint(t))
    assert f["flops_unreadable"].severity == "warning" and f["flops_unreadable"].evidence == {"operators": 1}
    assert f["pageable_copies"].evidence == {"copies": 2, "bytes": 512, "copy_sum_ns": 3_500}
    assert "(Memcpy HtoD (Pageable -> Device) ×2)" in f["pageable_copies"].meaning


def test_a_finding_prints_its_evidence_with_thousands_separators():
    f = Finding("gpu_annotations", "warning", "labels on a GPU stream", "sum kernels only",
                {"annotations": 15, "annotation_sum_ns": 80_119_630, "steps": [2, 3], "inferred": True})
    assert str(f) == ("[warning] gpu_annotations: labels on a GPU stream → sum kernels only "
                      "(annotations=15, annotation_sum_ns=80,119,630, steps=[2, 3], inferred=True)")
