"""What the ``Examples`` of ``kitlib.course``, ``kitlib.plots`` and ``kitlib.paths`` showed, as
tests (issue 39: those examples were never collected as doctests, so nothing ran them; each
assertion is the example's own output)."""
import os
import tempfile
from pathlib import Path

import pytest

from kitlib.errors import KitError
from kitlib.readers.ranks import load_traces


@pytest.fixture(scope="module")
def public_pair():
    return load_traces("public-traces", partial=True)


@pytest.fixture(scope="module")
def balanced_and_straggler():
    return load_traces("ranks_balanced"), load_traces("ranks_straggler")


def test_shipped_recordings():
    from kitlib.course.cli import shipped_recordings
    r = shipped_recordings()
    assert ("profiler_5step" in r, "clinic/cpu/case_b" in r, r["public-traces"].name) == (
        True, True, "public-traces")


def test_nccl_call_excerpt(public_pair):
    from kitlib.course.raw_views import nccl_call_excerpt
    raw = nccl_call_excerpt(public_pair, calls=1)
    assert [(e["cat"], e["name"][:22]) for e in raw["events"][:3]] == [
        ("user_annotation", "nccl:all_to_all"), ("cuda_runtime", "cudaLaunchKernel"),
        ("kernel", "ncclKernel_SendRecv_RI")]


def test_self_and_total_memory_of_raw_events():
    from kitlib.course.raw_views import self_and_total
    ex = [{"ph": "X", "name": "op", "ts": 0.0, "dur": 10.0},
          {"ph": "X", "name": "child", "ts": 1.0, "dur": 2.0},
          {"ph": "i", "name": "[memory]", "ts": 2.0, "args": {"Bytes": 100}},
          {"ph": "i", "name": "[memory]", "ts": 10.0, "args": {"Bytes": -100}}]
    assert self_and_total(ex) == (-100, 0)


def test_min_p_value():
    from kitlib.course.step_series import min_p_value
    assert (round(min_p_value(4, 5), 4), min_p_value(3, 3)) == (0.0159, 0.1)


def test_raw_views_trimmed_and_events_frame():
    from kitlib.course.raw_views import events_frame, trimmed
    evs = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1.0, "dur": 5.0, "pid": 1, "tid": 1,
            "args": {"External id": 7, "Input Dims": [[2, 2], [2, 2]]}}]
    t = trimmed(evs[0])
    assert t == {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1.0,
                 "dur": 5.0, "args": {"External id": 7}}
    assert list(t) == ["ph", "cat", "name", "pid", "tid", "ts", "dur", "args"]   # the key order shown
    assert events_frame(evs)[["cat", "name", "external_id"]].to_dict("records") == [
        {"cat": "cpu_op", "name": "aten::mm", "external_id": 7}]


def test_as_json_lines():
    from kitlib.course.raw_views import as_json_lines
    assert as_json_lines([{"ph": "X", "cat": "kernel", "name": "k", "ts": 1.5, "dur": 2.0}]) == (
        '{"ph":"X","cat":"kernel","name":"k","ts":1.5,"dur":2.0}')
    e = {"ph": "X", "cat": "kernel", "name": "k", "ts": 1.0, "dur": 2.0, "args": {"stream": 7, "grid": [1]}}
    assert as_json_lines([e], keys=["cat", "ts", "dur", "args"], args=["stream"]) == (
        '{"cat":"kernel","ts":1.0,"dur":2.0,"args":{"stream":7}}')


def test_diff_rows_text_and_short_name():
    from kitlib.course.diff_rows import rows_text, short_name
    rows = {"steps": [{"ph": "X", "name": "ProfilerStep#1", "ts": 0.0, "dur": 9.0}],
            "kernels": [{"name": "k", "ts": 2.0, "dur": 1.5, "args": {"correlation": 7}}],
            "launches": [{"name": "cudaLaunchKernel", "ts": 1.0, "dur": 0.5, "args": {"correlation": 7}}]}
    assert rows_text(rows) == "\n".join([
        "# steps", '{"name":"ProfilerStep#1","ts":0.0,"dur":9.0}',
        "# kernels", '{"name":"k","ts":2.0,"dur":1.5,"args":{"correlation":7}}',
        "# launches", '{"name":"cudaLaunchKernel","ts":1.0,"dur":0.5,"args":{"correlation":7}}'])
    assert short_name("void at::native::(anonymous namespace)::max_pool_backward_nhwc<float, float>"
                      "(int, float*)") == "at::native::max_pool_backward_nhwc<…>"
    assert short_name("Memcpy HtoD (Pinned -> Device)") == "Memcpy HtoD (Pinned -> Device)"


def test_choice_fit_css_caps_the_font():
    from kitlib.course.widgets import choice_fit_css
    assert "font-size: min(var(--jp-widgets-font-size), 13.2px)" in choice_fit_css("case_a_fix", 95)


def test_clock_shifted_fails_the_end_check(public_pair):
    from kitlib.analyses.collectives import match_summary
    from kitlib.course.ranks import clock_shifted
    s = match_summary(clock_shifted(public_pair, 1, 5.0))
    # every call now ends 5 ms apart: none passes the check
    assert (s["verified"], s["ends_apart"]) == (0, 7)


def test_uninstrumented_steps_and_drift(balanced_and_straggler, public_pair):
    from kitlib.course.ranks import drift_within, runs_compared, uninstrumented_compared, uninstrumented_step_ms
    balanced, straggler = balanced_and_straggler
    assert round(uninstrumented_step_ms(balanced), 1) == 1506.0
    assert uninstrumented_compared(balanced, straggler) == (
        "timed without the profiler (the sleep included): balanced 1,506 ms, straggler 1,903 ms "
        "per step (+397 ms)")
    assert drift_within(balanced) == (
        "no drift seen: on every rank the profiled steps are within 4 % of the uninstrumented ones")
    assert drift_within(public_pair)[:60] == "no steps timed without the profiler in this run (recorded wi"
    expected = (
        "both runs recorded on vm on 2026-11-30: the same machine and day, not the same conditions "
        "(a shared host's load changes between runs and within one); uninstrumented steps (median "
        "over ranks, step_times.json) 1,506 ms and 1,903 ms; within each run, balanced: no drift "
        "seen: on every rank the profiled steps are within 4 % of the uninstrumented ones; "
        "straggler: the machine drifted: rank 0 stepped in 1,884 ms without the profiler and "
        "2,450 ms with it (+30 %); rank 1 stepped in 1,918 ms without the profiler and 2,418 ms "
        "with it (+26 %), far more than the profiler costs: compare ranks within a step, not this "
        "run with another")
    assert " ".join(runs_compared(balanced, straggler).split()) == expected   # as NORMALIZE_WHITESPACE


def test_plot_exposed_communication_title(public_pair):
    import matplotlib
    matplotlib.use("Agg")
    from kitlib.plots.ranks import plot_exposed_communication
    import matplotlib.pyplot as plt
    ax = plot_exposed_communication(public_pair)
    title = ax.get_title()
    plt.close(ax.figure)
    assert " ".join(title.split()) == (                                    # as NORMALIZE_WHITESPACE
        "step 551: rank 0 exposed 172.3 of 195.3 ms of communication; rank 1 exposed 134.3 of "
        "168.0 ms of communication")


def test_make_folder_refuses_a_file():
    from kitlib.paths import make_folder
    f = Path(tempfile.mkdtemp()) / "notes.txt"
    f.write_text("mine")
    with pytest.raises(KitError) as e:
        make_folder(f, "workspace --dest")
    assert str(e.value) == f"workspace --dest {f}: is a file, not a folder; give a folder"


def test_json_wrapped_breaks_between_fields():
    import json
    from kitlib.course.raw_views import json_wrapped
    e = {"ph": "X", "cat": "kernel", "name": "k", "ts": 1.5, "dur": 2.0, "args": {"stream": 7, "correlation": 3}}
    assert json_wrapped(e, 40) == ('{"ph": "X", "cat": "kernel",\n'
                                   '  "name": "k", "ts": 1.5, "dur": 2.0,\n'
                                   '  "args": {"stream": 7,\n'
                                   '  "correlation": 3}}')   # (the docstring's old example, never run, was wrong)
    assert json.loads(json_wrapped(e, 20)) == e


def test_cut_table_keeps_columns_and_cuts_names():
    from kitlib.course.raw_views import cut_table
    t = "\n".join(["----------  -----  -----", "      Name      A      B", "----------  -----  -----",
                   "aten::long    1.0    2.0", "----------  -----  -----", "Self CPU time total: 3"])
    assert cut_table(t, ["Name", "B"], name_width=8) == "\n".join([
        "--------  -----", "    Name      B", "--------  -----", "aten:...    2.0", "--------  -----",
        "Self CPU time total: 3"])


def test_refork_step_and_divisor_text():
    from kitlib.course.exercises.l04 import _divisor_text, refork_step
    assert (refork_step(1792, 128, 10), refork_step(2560, 128, 10)) == (0, 6)   # 14 and 20 batches an epoch
    assert _divisor_text(1523.361537, 0.13645, 1523.361537 / 0.13645) == "0.13645"   # 0.1364 would give 11,168


def test_excerpt_end_gap(public_pair):
    from kitlib.course.exercises.l12 import excerpt_end_gap
    from kitlib.course.raw_views import nccl_call_excerpt
    got = {k: round(v, 3) for k, v in excerpt_end_gap(nccl_call_excerpt(public_pair)).items()}
    assert got == {'end_gap_ms': 62.789, 'start_gap_ms': 35.534, 'enqueue_gap_ms': 14.797}


def test_exercises_misconception_and_default_tolerance():
    from kitlib.course.exercises import Question, default_tolerance, misconception
    q = Question("n", "How many launches?", 3, "three", kind="compute",
                 traps=[misconception("one_op_one_kernel", 1)])
    assert "one operator = one kernel" in q.judge(1).message
    assert default_tolerance(3) == 0
    assert round(default_tolerance(844.61), 6) == 0.000592     # 845 is off by 0.39 µs; 0.5 µs is allowed


def test_exercises_shown_and_answer_shown():
    from kitlib.course.exercises import _answer_shown, _shown
    assert (_shown(10**400, 3.5), _shown(-10**5000, 3.5), _shown(1, True)) == ('1.00e+400', '-1.00e+5000', 'yes')
    assert (_shown(10000, "100"), _shown("1000", "100"), _shown(-2449.6, 3.5), _shown("slower", "faster")) == (
        '10,000', '1,000', '-2,449.6', "'slower'")
    assert (_answer_shown(11164.247248076219), _answer_shown(0.32387271348941254), _answer_shown(844.61)) == (
        '11,164', '0.3239', '844.61')
    assert (_answer_shown("10000"), _answer_shown(28_493_742_080), _answer_shown("forward")) == (
        '10,000', '28,493,742,080', "'forward'")


def test_exercises_held_back_text_and_scorecard():
    from kitlib.course.exercises import Exercises, Question
    ex = Exercises("t", [Question("p", "Predict?", 3, "three", kind="predict"),
                         Question("c", "How many?", 4, "four", kind="compute"),
                         Question("d", "How many more?", 5, "five", kind="compute")])
    assert " ".join(ex._held_back_text(ex.questions).split()) == (
        "the outcome is held back until you predict p and answer c, d: each in its form (or with "
        "ex.check(key, answer)), or call ex.reveal(key); it then shows here.")
    ex = Exercises("t", [Question("a_n", "How many?", 3, "three", kind="compute"),
                         Question("a_m", "How many more?", 4, "four", kind="compute")])
    _ = ex.check("a_n", 3); _ = ex.check("a_m", 5); _ = ex.check("a_m", 4)   # noqa: E702
    assert ex.scorecard(group=lambda k: k.split("_")[0]).to_string() == (
        "       questions  right_first_try  right  wrong_tries\n"
        "group                                                \n"
        "a              2                1      2            1")


def test_labels_install_returns_true_once_installed():
    """install() raised NameError (a leftover loop over an undefined ``flush``) after registering its
    hooks, so it never marked the shell installed: a second call registered them again."""
    import subprocess
    import sys
    code = ("from IPython.core.interactiveshell import InteractiveShell\n"
            "ip = InteractiveShell.instance()\n"
            "from kitlib.course import labels\n"
            "first, again = labels.install(ip), labels.install(ip)\n"
            "ours = [cb for cb in ip.events.callbacks['pre_run_cell'] if cb.__name__ == 'kitlib_pre_run_cell']\n"
            "print(first, again, len(ours))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True", "True", "1"]


def test_l01_recorded_steps():
    from kitlib.course.exercises.l01 import recorded_steps
    assert recorded_steps({"wait": 1, "warmup": 1, "active": 3}, 5) == 3
