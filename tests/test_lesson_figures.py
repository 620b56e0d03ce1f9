"""The key figures each lesson prints in replay mode, against where they come from.

``tests/test_lessons.py`` runs every notebook under Jupyter and checks that it runs; here
the code cells of the lessons that print figures of the reference recordings run in one
process (as ``tools/run_lesson.py`` does), and the printed text must hold each key figure.
Every expected figure is a tool's printed output (the profiler's table footer, ``nsys
stats``), a ``data/reference/PROVENANCE.md`` figure, a B300 source figure
(``kitlib.course.sources``), arithmetic done here, or a value recomputed from the raw
JSON/SQLite in ``tests/test_golden_derived.py`` (named beside it).
"""
import ast
import contextlib
import io
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LESSONS = {p.name[:2]: p for p in (ROOT / "lessons").glob("[0-9][0-9]_*.ipynb")}
REF = ROOT / "data" / "reference"


def _run(n, monkeypatch, tmp_path):
    """The text a lesson prints, run cell by cell in one namespace (the value of a cell's
    last expression printed, as a notebook shows it)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    monkeypatch.setenv("KITLIB_MODE", "replay")
    monkeypatch.chdir(tmp_path)
    nb = json.loads(LESSONS[n].read_text())
    out = io.StringIO()
    ns = {"__name__": "__main__", "display": lambda *objs: [print(o) for o in objs]}
    with pd.option_context("display.width", 200, "display.max_columns", 30), contextlib.redirect_stdout(out):
        for i, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
            tree = ast.parse("".join(cell["source"]))
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            exec(compile(tree, f"lesson{n}:cell{i}", "exec"), ns)
            if last is not None:
                val = eval(compile(ast.Expression(last.value), f"lesson{n}:cell{i}", "eval"), ns)
                if val is not None and type(val).__name__ not in ("Figure", "Axes"):
                    print(val)
            plt.close("all")
    return out.getvalue()


def _has(text, pattern):
    assert re.search(pattern, text), f"not printed: {pattern!r}"


@pytest.fixture
def lesson(monkeypatch, tmp_path):
    return lambda n: _run(n, monkeypatch, tmp_path)


def test_lesson00_step_table(lesson):
    text = lesson("00")
    # step 2: wall 80.627 ms (ProfilerStep#2's dur, 80,627.323 µs in the raw JSON), device busy
    # 43.035 ms and 745 GPU events launched (test_four_measures_of_step_2_from_raw_json)
    _has(text, r"\n\d+\s+2\s+80\.627\s.*\s43\.035\s+745\n")
    for step, wall in [(3, "66.181"), (4, "61.567"), (5, "50.449"), (6, "51.999")]:
        _has(text, rf"\n\d+\s+{step}\s+{re.escape(wall)}\s")   # ProfilerStep#N durations, raw JSON


def test_lesson02_chain_of_the_first_convolution(lesson):
    text = lesson("02")
    # PROVENANCE.md: host interval 184.909 µs; launches of 27.598, 6.971 and 12.929 µs; the
    # third launch's kernel runs 732.513 µs
    _has(text, r"host interval 184\.909 µs")
    # (the launches table shows µs: launch start since the operator's, then the launch's duration)
    _has(text, r"cudaLaunchKernel\s+[\d.]+\s+27\.598\s")
    _has(text, r"cudaLaunchKernel\s+[\d.]+\s+6\.971\s")
    _has(text, r"cudaLaunchKernelExC\s+[\d.]+\s+12\.929\s.*\s732\.513\n")
    # PROVENANCE.md: 78 GPU events at the start of the window were launched before it
    _has(text, r"launched_before_recording\s+78\n")


def test_lesson03_four_measures_and_the_footer(lesson):
    text = lesson("03")
    # recomputed from the raw JSON in test_four_measures_of_step_2_from_raw_json
    for measure, ms in [("wall", "80.627323"), ("host_ops_total_sum", "103.017848"),
                        ("device_busy", "43.034894"), ("gpu_sum", "43.349583"), ("kernel_sum", "41.744724")]:
        _has(text, rf"{measure}\s+\w+\s+{re.escape(ms)}\s")
    _has(text, r"host_ops_self_sum\s+host\s+38\.099312\s")
    # the profiler's own printed table (key_averages_tables.txt) ends with its footer
    footer = re.search(r"Self CUDA time total: ([\d.]+)ms", (REF / "profiler_5step" / "key_averages_tables.txt").read_text())
    assert footer.group(1) == "216.559"
    _has(text, rf"summed GPU time, whole trace: {footer.group(1)} ms")
    _has(text, rf"Self CUDA time total \(footer\): {footer.group(1)} ms")


def test_lesson04_cold_start_table(lesson):
    from kitlib.course.sources import B300
    text = lesson("04")
    # recomputed from report.sqlite, nvtx_sum.csv, wallclock.json and the raw JSON in
    # test_cold_start_table_from_the_tools_files; B300 column from kitlib.course.sources
    b300_dl = f"{B300['first_data_load_ms']:.3f}"
    b300_copy = f"{B300['first_h2d_copy_end_ms'] - B300['first_data_load_end_ms']:.3f}"
    assert (b300_dl, b300_copy) == ("535.258", "0.949")
    _has(text, rf"first data_load range \(Nsight NVTX\)\s+Nsight Systems\s+1469\.484\s+{b300_dl}\n")
    _has(text, r"end of first data_load since torch_step start\s+Nsight Systems\s+1469\.487\s")
    _has(text, rf"batch copy end minus range end, step 0\s+Nsight Systems\s+-0\.117\s+{b300_copy}\n")
    _has(text, r"first next\(\) \(wall clock, perf_counter_ns\)\s+perf_counter_ns\s+1523\.312\s")
    _has(text, r"first data_load range \(torch\.profiler annotation\)\s+torch\.profiler\s+1523\.362\s")


def test_lesson05_shape_table(lesson):
    text = lesson("05")
    # key_averages.json.gz (by_input_shape): 23 groups of aten::cudnn_convolution, 265 calls;
    # the stem convolution 3,909.209 µs over 5 calls = 781.8 µs a call, 3,909,209 / 25,404,581
    # = 0.154 of the operator's device time (test_shape_table_shares_are_device_time_shares)
    _has(text, r"265 calls \(53 per step\) in 23 shape groups")
    share = f"{3_909_209 / 25_404_581:.3f}"
    _has(text, rf"\[128, 3, 224, 224\] × \[64, 3, 7, 7\]\s+5\s+3909\.2\s+781\.8\s+{share}\n")
    _has(text, r"GPU events launched before the window: 78\b")      # PROVENANCE.md


def test_lesson07_memory(lesson):
    text = lesson("07")
    # PROVENANCE.md: 28,514,713,600 bytes, which the profiler prints as 26.56 GB (GiB)
    _has(text, r"aten::cudnn_convolution\s+265\s+\d+\s+\d+\s+28514713600\s+26\.56 GB\n")
    # per-step peaks: max of the raw [memory] records' Total Allocated in each step
    # (test_per_step_memory_peaks_from_raw_json): 11,462,948,352 bytes in every step
    _has(text, r"trace peak of each profiled step \(GB\): \[11\.463, 11\.463, 11\.463, 11\.463, 11\.463\]")
    _has(text, r"peak allocated 11\.46 GB in step 2, phase backward, after aten::threshold_backward")


def test_lesson08_flops(lesson):
    text = lesson("08")
    stem = 2 * 128 * 112 * 112 * 7 * 7 * 3 * 64            # 2·N·H_out·W_out·K_h·K_w·C_in·C_out
    _has(text, rf"kitlib, from the trace: {stem:,} FLOPs")
    fc = json.loads((REF / "fixed_batch" / "flop_counter_one_step.json").read_text())
    with_flops = 5_231_534_407_680 / 5     # the profiler's aten::conv2d flops (key_averages) a step
    _has(text, rf"with_flops per step: {with_flops / 1e12:.3f} TFLOP = {100 * with_flops / fc['total']:.1f}% "
               rf"of the step's {fc['total'] / 1e12:.3f} TFLOP")
    # forward convolutions: 1.046 TFLOP in 25,404,581 ns / 5 (key_averages' device total)
    _has(text, rf"forward convolutions [^\n]*\s{1_046_306_881_536 / (25_404_581 / 5 * 1e-9) / 1e12:.3f}\s")
