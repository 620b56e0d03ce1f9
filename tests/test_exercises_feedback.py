"""Exercises judge understanding: several right answers where the facts allow, targeted
feedback for the known wrong ones."""
from kitlib.course.exercises import Question, l11


def test_routes_admit_both_timeline_tools_where_both_answer():
    ex = l11.questions()
    for key in ("backward_thread", "copy_overlap", "op_of_kernel"):
        for answer in ("both", "nsys", "torch.profiler", "torch.profiler and nsys"):
            assert ex.check(key, answer).correct, (key, answer)
        assert not ex.check(key, "ncu").correct
    assert not ex.check("conv_bound", "both").correct
    wrong = ex.check("idle_before_first_step", "torch.profiler")
    assert not wrong.correct and "does not answer" in wrong.message


def test_lesson10_no_longer_claims_nsight_traces_the_workers():
    why = {k: w for k, _, _, _, w in l11.ROUTES}
    assert "trace-fork-before-exec" in why["idle_before_first_step"]
    assert "backtrace" in why["line_of_code"]


def test_a_trap_answer_gets_its_own_feedback_first():
    q = Question("x", "FLOPs?", 2000.0, "explained", traps=[(1000.0, "those are MACs: a MAC is two FLOPs")])
    v = q.judge(1000)
    assert v.correct is False and "MACs" in v.message and "explained" not in v.message
    assert q.judge(2000).correct


def test_lesson01_feedback_says_host_and_device_need_not_overlap():
    from kitlib.course.exercises import l02
    from kitlib.readers.bundle import open_capture
    ex = l02.questions(open_capture("profiler_5step"))
    assert "763.8 µs after the operator's host interval has ended" in ex["add_host_and_device"].explain
    assert "overlap in time" not in ex["add_host_and_device"].explain
    q = ex["queue_delay_us"]
    # 844.61 µs from the launch's start, 831.681 µs from its end: both read off the raw JSON
    # in test_golden_derived.py::test_queue_delay_of_the_first_convolution_from_raw_json
    assert q.answer == 844.61 and "launch's end" in q.judge(831.681).message


def test_lesson04_half_the_tensor_adds_are_gradient_sums_on_the_autograd_thread():
    from kitlib.course.exercises import l05
    from kitlib.readers.bundle import open_capture
    q = l05.questions(open_capture("fixed_batch"))["add_autograd_per_step"]
    # 80 aten::add_ on the autograd thread in 5 steps (tid 446 in the raw JSON; lesson 05's table)
    assert q.answer == 80 / 5 == 16 and q.judge(16).correct
    assert "both threads" in q.judge(32).message and "per step" in q.judge(80).message


def test_lesson07_macs_trap_and_backward_ratio():
    from kitlib.course.exercises import l08
    from kitlib.readers.bundle import open_capture
    ex = l08.questions(open_capture("fixed_batch"))
    q = ex["first_conv_gflop"]
    # 2·N·H_out·W_out·K_h·K_w·C_in·C_out for the stem convolution; half of it is the MAC count
    assert q.answer == round(2 * 128 * 112 * 112 * 7 * 7 * 3 * 64 / 1e9, 3) == 30.212
    assert "MACs" in q.judge(15.106).message
    # FlopCounterMode (fixed_batch/flop_counter_one_step.json): backward ÷ forward convolution FLOPs
    assert ex["bwd_fwd_ratio"].answer == round(2_062_402_191_360 / 1_046_306_881_536, 2) == 1.97


def test_lesson06_traps_the_b300_figure_and_decimal_gb():
    from kitlib.course.exercises import l07
    from kitlib.readers.bundle import open_capture
    q = l07.questions(open_capture("profiler_5step"))["conv_self_gib"]
    # PROVENANCE.md: 28,514,713,600 bytes of Self CUDA Mem in profiler_5step, printed in GiB
    assert q.answer == round(28_514_713_600 / 2**30, 2) == 26.56 and q.judge(26.56).correct
    assert "B300" in q.judge(26.54).message          # the source's figure, not this capture's
    assert "GiB" in q.judge(28.51).message           # decimal GB typed for the profiler's GiB


def test_lesson09_questions_follow_the_pinning_story():
    """The cold start's pinning story is lesson 09's worked case now (issue 26)."""
    from kitlib.course.exercises import l09
    from kitlib.readers.bundle import open_capture
    ex = l09.questions(open_capture("nsys_8step"))
    assert round(ex["pin_alloc_share"].answer, 3) == 0.324 and ex["batches_before_batch0"].answer == 7
    assert "counts batch 0 itself" in ex.check("batches_before_batch0", 8).message
