"""Lesson 04's answers from the recordings, without the exercise code or kitlib analyses
(issue 31): the raw JSON of cold_start_8step (gzip + orjson), step_times.json and the
manifest of profiler_5step, and the recording script's order of steps
(data/reference/how_captured/capture.py: 3 warm-up steps, the timed steps, one batch for the
fixed-batch timing, then the profiled steps, all from one loader). Each key is checked, and
the near misses a learner makes are rejected."""
import functools
import json
import math
import re
import statistics
from pathlib import Path

import pytest

from conftest import PUBLIC, raw_trace_events

REF = Path(__file__).resolve().parents[2] / "data" / "reference"


def _data_load_us():
    """Every step's data_load annotation (cat user_annotation) in µs, in time order."""
    ev = raw_trace_events(REF / "cold_start_8step" / "trace.json.gz")
    dl = sorted((e["ts"], e["dur"]) for e in ev
                if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e.get("name") == "data_load")
    assert len(dl) == 8
    return [d for _, d in dl]


def _timing():
    t = json.loads((REF / "profiler_5step" / "step_times.json").read_text())
    m = json.loads((REF / "profiler_5step" / "manifest.json").read_text())["workload"]
    images = int(re.search(r"([\d,]+) JPEGs", m["dataset"]).group(1).replace(",", ""))
    return t, images, m["batch_size"]


def test_first_load_ratio_and_its_order(ex):
    d = _data_load_us()
    ratio = d[0] / statistics.median(d[1:])
    q = ex["first_load_ratio"]
    assert q.kind == "compute" and q.answer == pytest.approx(ratio, rel=1e-9)
    assert q.judge_silently(float(f"{ratio:.3g}"))                      # three significant figures
    for near in (ratio * 1.05, ratio * 0.95,
                 d[0] / statistics.mean(d[1:]),                          # the mean for the median
                 d[0] / d[1],                                            # step 1 alone: the neighbouring row
                 d[1] / statistics.median(d[1:]),                        # the wrong step
                 ratio / 1000):
        assert not q.judge_silently(near), near
    p = ex["first_load_order"]
    assert p.kind == "predict" and p.answer == str(10 ** round(math.log10(ratio))) == "10000"
    assert p.judge_silently("10,000") and p.judge_silently(10000) and p.judge_silently("10000×")
    assert not p.judge_silently("1000") and not p.judge_silently("100000")


def test_first_load_ratio_traps_say_mean_or_step_1(ex):
    """The mean for the median and step 1 alone are told apart (mutation survivor #40 of l04:
    the mean trap computed as a product was never met)."""
    d = _data_load_us()
    q = ex["first_load_ratio"]
    assert "mean of the later steps" in q.judge(d[0] / statistics.mean(d[1:])).message
    assert "step 1 alone" in q.judge(d[0] / d[1]).message
    assert sorted(t for t, _ in q.traps) == pytest.approx(sorted([d[0] / statistics.mean(d[1:]), d[0] / d[1]]),
                                                          rel=1e-9)


def test_slowest_batch_in_epoch(ex):
    t, images, batch = _timing()
    u = t["step_ms_uninstrumented"]
    per_epoch = images // batch                                          # drop_last=True
    slow = u.index(max(u))
    batch_in_epoch = (3 + slow) % per_epoch                              # after 3 warm-up steps
    q = ex["slowest_batch_in_epoch"]
    assert q.kind == "compute" and q.answer == batch_in_epoch == 8
    for near in (0, 7, 9, slow, 3 + slow + 1):
        assert not q.judge_silently(near), near
    assert "batch 0 starts an epoch" in q.judge(0).message.lower()


def test_refork_step_if_larger(ex):
    t, images, batch = _timing()
    before = 3 + len(t["step_ms_uninstrumented"]) + 1                    # warm-up, timed, the fixed batch
    # the recorded case: the first profiled step is batch 0 of epoch 1 (the slow 764.5 ms step)
    assert before % (images // batch) == 0 and round(t["step_ms_profiled_all_attribution"][0], 1) == 764.5
    per_epoch = 2560 // batch
    want = next(i for i in range(7) if (before + i) % per_epoch == 0)
    q = ex["refork_step_if_larger"]
    assert q.kind == "transfer" and "2,560 images" in q.prompt and q.answer == want == 6
    for near in (0, want - 1, want + 1):
        assert not q.judge_silently(near), near
    assert "recorded case" in q.judge(0).message and "fixed-batch" in q.judge(want + 1).message.lower()


@functools.cache
def _public_steps_and_loads() -> tuple:
    """The public V100 trace's ProfilerStep#N spans and DataLoader __next__ spans, (ts, dur)
    in time order, from its raw JSON; and per step its load's share of the step. Read once per
    process (the file is large: tools/exercise_mutants.py --kill reruns these tests in children
    forked from a process that ran them)."""
    import gzip
    ev = json.loads(gzip.decompress((PUBLIC / "kineto_2021-06_resnet50_v100.json.gz").read_bytes()))["traceEvents"]
    steps = sorted((e["ts"], e["dur"]) for e in ev if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#"))
    loads = sorted((e["ts"], e["dur"]) for e in ev if e.get("ph") == "X"
                   and e["name"] == "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__")
    shares = [d / sd for (t, d), (s, sd) in zip(loads, steps) if s <= t < s + sd]
    return tuple(steps), tuple(loads), tuple(shares)


def test_public_loader_share(ex):
    """The transfer on the public V100 trace (num_workers=0): per ProfilerStep#N, the
    DataLoader's __next__ annotation over the step, median in %; from the raw JSON here."""
    steps, loads, shares = _public_steps_and_loads()
    assert len(steps) == len(loads) == 6
    assert len(shares) == 6
    med = statistics.median(shares) * 100
    q = ex["public_loader_share"]
    assert q.kind == "transfer" and q.unit == "%" and q.answer == pytest.approx(med, rel=1e-12)
    assert round(med, 1) == 39.5 and q.judge_silently(39.5)
    for near in (med * 1.05, med * 0.95, med / 100,                       # a fraction for a percentage
                 statistics.mean(shares) * 100,                            # the mean for the median
                 shares[0] * 100,                                          # the first step alone
                 sum(d for _, d in loads) / sum(d for _, d in steps) * 100):   # total over total
        assert not q.judge_silently(near), near
    assert "factor" in q.judge(med / 100).message and "mean" in q.judge(statistics.mean(shares) * 100).message


def test_every_question_is_pinned(ex):
    assert [q.key for q in ex.questions] == ["first_load_order", "first_load_ratio", "slowest_batch_in_epoch",
                                             "refork_step_if_larger", "public_loader_share"]


def test_public_loader_share_traps_say_mean_or_first_step(ex):
    """The mean of the steps' shares and the first step alone, computed from the public raw
    JSON, each meet their own feedback (l04 mutation survivors #67, #68: the mean trap divided
    by 100 instead of multiplied passed)."""
    _, _, shares = _public_steps_and_loads()
    q = ex["public_loader_share"]
    assert "mean of the steps' shares" in q.judge(statistics.mean(shares) * 100).message
    assert "first step alone" in q.judge(shares[0] * 100).message
    assert sorted(t for t, _ in q.traps) == pytest.approx(sorted([statistics.mean(shares) * 100, shares[0] * 100]),
                                                          rel=1e-9)


def test_the_explanations_give_the_raw_figures(ex):
    """What a learner reads after answering: first_load_ratio's "1,523.362 ms / 0.13645 ms =
    11,164" from the raw data_load annotations (l04 mutants #36-#38: a figure ×1e6 or ÷1000001),
    the divisor with enough decimals that the printed division gives the printed ratio (with
    four, 1,523.362 / 0.1364 = 11,168: issue 40);
    refork_step_if_larger's worked count, from step_times.json, the manifest and capture.py's
    order of steps (#49-#58: the loader's position or the epoch miscounted)."""
    d = _data_load_us()
    ratio = d[0] / statistics.median(d[1:])
    assert ex["first_load_ratio"].explain.startswith(
        f"{d[0] / 1e3:,.3f} ms / {statistics.median(d[1:]) / 1e3:,.5f} ms = {ratio:,.0f}.")
    num, den, printed = re.match(r"([\d,.]+) ms / ([\d,.]+) ms = ([\d,]+)\.", ex["first_load_ratio"].explain).groups()
    print("printed:", num, "/", den, "=", printed, "| the division as printed:", float(num.replace(",", "")) / float(den))
    assert f"{float(num.replace(',', '')) / float(den):,.0f}" == printed == "11,164"
    t, images, batch = _timing()
    before = 3 + len(t["step_ms_uninstrumented"]) + 1                    # warm-up, timed, the fixed batch
    per_new = 2560 // batch
    want = next(i for i in range(7) if (before + i) % per_new == 0)
    assert ex["refork_step_if_larger"].explain.startswith(
        f"2,560 / {batch} = {per_new} batches an epoch; the profiled series starts at batch {before} of the loader, "
        f"so batch {before + want} (profiled step {want}) begins epoch {(before + want) // per_new}. In the recording "
        f"({images // batch} an epoch) it was profiled step 0")
