"""Lesson 03's answers (issue 31), each worked out here from the tools' own files: the raw
trace JSON of ``profiler_5step`` (orjson, no kitlib), the profiler's printed table
(``key_averages_tables.txt``) and the public NCCL trace; then each question must accept that
figure and reject the near misses a learner makes (5 % off, the other unit, the total for
the self, the neighbouring row, the sum for the union)."""
from __future__ import annotations

import re

import pytest

from conftest import REF, merged_length, raw_trace_events

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


@pytest.fixture(scope="module")
def ex():
    from kitlib.course import exercises, lesson_capture
    return exercises.lesson03(lesson_capture("profiler_5step"))


@pytest.fixture(scope="module")
def raw():
    return raw_trace_events(REF / "profiler_5step" / "trace.json.gz")


def _step(raw, n):
    return next(e for e in raw if e.get("ph") == "X" and e.get("name") == f"ProfilerStep#{n}")


def _launched_in(raw, n):
    """The GPU events whose CUDA call (same correlation) started inside ProfilerStep#n."""
    s = _step(raw, n)
    corr = {e["args"]["correlation"] for e in raw if e.get("cat") in ("cuda_runtime", "cuda_driver")
            and s["ts"] <= e["ts"] <= s["ts"] + s["dur"] and "correlation" in e.get("args", {})}
    return [e for e in raw if e.get("cat") in GPU_CATS and e["args"].get("correlation") in corr]


def _union_us(events):
    return merged_length([(e["ts"], e["ts"] + e["dur"]) for e in events])


def _printed(name, column):
    """A cell of the first printed table (by name), in ms."""
    text = (REF / "profiler_5step" / "key_averages_tables.txt").read_text().split("\n\n")[0]
    heads = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "Self CUDA"]
    for line in text.splitlines():
        if line[:55].strip() == name:
            cells = re.split(r"\s{2,}", line[55:].strip())
            v = cells[heads.index(column)]
            return float(v[:-2]) if v.endswith("ms") else float(v[:-2]) / 1e3
    raise KeyError(name)


def test_every_question_is_pinned(ex):
    assert [q.key for q in ex.questions] == ["total_sum_exceeds_wall", "busy_or_sum", "idle_ms", "children_ms",
                                             "forward_gpu_work_ms", "gpu_overlap_ms", "excerpt_busy_us"]
    assert [q.kind for q in ex.questions] == ["predict", "predict", "compute", "compute", "compute", "compute",
                                              "transfer"]


def test_total_sum_exceeds_wall(ex, raw):
    s = _step(raw, 2)
    totals = sum(e["dur"] for e in raw if e.get("cat") == "cpu_op" and s["ts"] <= e["ts"] < s["ts"] + s["dur"])
    assert round(totals / 1e3, 3) == 103.018 and s["dur"] == 80627.323     # lesson 03's four-measures table
    q = ex["total_sum_exceeds_wall"]
    assert q.answer is True and q.judge_silently("yes") and not q.judge_silently("no")


def test_busy_or_sum(ex, raw):
    gpu = _launched_in(raw, 2)
    assert len(gpu) == 745
    union, total = _union_us(gpu), sum(e["dur"] for e in gpu)
    assert round(union, 1) == 43034.9 and round(total, 3) == 43349.583
    q = ex["busy_or_sum"]
    assert q.answer == "sum" and q.judge_silently("sum")
    assert not q.judge_silently("busy") and not q.judge_silently("equal")


def test_idle_ms_is_wall_minus_the_union_of_step_4(ex, raw):
    def idle(n, measure):
        return (_step(raw, n)["dur"] - measure(_launched_in(raw, n))) / 1e3
    want = idle(4, _union_us)
    q = ex["idle_ms"]
    assert abs(q.answer - want) < 0.0015 and q.judge_silently(round(want, 2))
    assert "Step 4" in q.prompt
    summed = idle(4, lambda g: sum(e["dur"] for e in g))            # busy = the sum: the misconception
    assert not q.judge_silently(round(summed, 2))
    assert "busy = the sum of kernel times" in q.judge(round(summed, 3)).message
    for near in (want * 1.05, want * 0.95, want * 1e3, idle(3, _union_us), idle(5, _union_us)):
        assert not q.judge_silently(near), near


def test_children_ms_from_the_printed_table(ex):
    total, self_ = _printed("aten::convolution_backward", "CPU total"), _printed("aten::convolution_backward", "Self CPU")
    assert (total, self_) == (29.462, 17.830)
    q = ex["children_ms"]
    assert q.judge_silently(round(total - self_, 3)) and abs(q.answer - (total - self_)) < 0.002
    neighbour = _printed("aten::cudnn_batch_norm_backward", "CPU total") - _printed("aten::cudnn_batch_norm_backward", "Self CPU")
    for near in (total, self_, neighbour, (total - self_) * 1.05, (total - self_) * 1e3):
        assert not q.judge_silently(near), near


def test_forward_gpu_work_ms_is_the_union_inside_the_forward_spans(ex, raw):
    spans = [e for e in raw if e.get("cat") == "gpu_user_annotation" and e["name"] == "forward"]
    gpu = [e for e in raw if e.get("cat") in GPU_CATS]
    busy = 0.0
    for s in spans:
        a, b = s["ts"], s["ts"] + s["dur"]
        busy += merged_length([(max(a, e["ts"]), min(b, e["ts"] + e["dur"])) for e in gpu
                               if e["ts"] < b and e["ts"] + e["dur"] > a])
    span_ms = sum(s["dur"] for s in spans) / 1e3
    assert round(span_ms, 3) == 130.924                      # the printed table's forward Self CUDA
    q = ex["forward_gpu_work_ms"]
    assert abs(q.answer - busy / 1e3) < 0.002 and q.judge_silently(round(busy / 1e3, 2))
    per_span = busy / 1e3 / len(spans)                         # one span's instead of the five
    for near in (span_ms, busy / 1e3 * 1.05, busy, per_span):
        assert not q.judge_silently(near), near


def test_gpu_overlap_ms_is_the_footer_minus_the_union(ex, raw):
    gpu = [e for e in raw if e.get("cat") in GPU_CATS]
    footer = float(re.search(r"Self CUDA time total: ([\d.]+)ms",
                             (REF / "profiler_5step" / "key_averages_tables.txt").read_text()).group(1))
    total = sum(e["dur"] for e in gpu) / 1e3
    assert round(total, 3) == footer == 216.559
    want = total - _union_us(gpu) / 1e3
    q = ex["gpu_overlap_ms"]
    assert abs(q.answer - want) < 0.0015 and q.judge_silently(round(want, 3))
    kernels_only = sum(e["dur"] for e in gpu if e["cat"] == "kernel") / 1e3 - \
        _union_us([e for e in gpu if e["cat"] == "kernel"]) / 1e3
    for near in (total, _union_us(gpu) / 1e3, want * 1.05, want * 1e3):
        assert not q.judge_silently(near), near
    assert abs(kernels_only - want) < 0.01                     # copies and memsets hardly overlap here


def test_excerpt_busy_us_from_the_public_trace(ex):
    import gzip

    import orjson
    from kitlib.course.raw_views import nccl_excerpt
    path = REF / "public-traces" / "hta_2024-03_nccl_sampled_rank0.json.gz"
    events = orjson.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    shown = nccl_excerpt()
    assert len(shown) == 10
    in_file = {(e["ts"], e["dur"], e["args"].get("stream")) for e in events if e.get("cat") == "kernel"}
    assert all((e["ts"], e["dur"], e["args"]["stream"]) in in_file for e in shown)   # events as the file has them
    union = merged_length([(e["ts"], e["ts"] + e["dur"]) for e in shown])
    # the collective (12,119 µs) + the stream-7 kernel that outlasts it by 627 µs + two after it
    assert union == 12119 + 627 + 1196 + 1253 == 15195
    q = ex["excerpt_busy_us"]
    assert q.answer == union and q.judge_silently(15200)
    summed = sum(e["dur"] for e in shown)
    assert "busy = the sum of kernel times" in q.judge(summed).message
    for near in (summed, 12119, union * 1.05, union / 1e3):
        assert not q.judge_silently(near), near
