"""Lesson 09's answers from the recordings, without the exercise code or kitlib analyses
(issue 31): SQL on the Nsight export nsys_8step, its nsys stats CSV (the GPU projection),
its manifest, and SQL on the public CloverLeaf export of the transfer questions. Each key is
checked, and the near misses a learner makes are rejected."""
import csv
import functools
import json
import statistics
from pathlib import Path

import pytest

from conftest import PUBLIC, REF, sql_rows

DB = REF / "nsys_8step" / "report.sqlite"
CLOVER = PUBLIC / "nsys_2024.5_a100_cloverleaf.sqlite"
TID = 0xFFFFFF


def _rejects(q, *near):
    for x in near:
        assert not q.judge_silently(x), (q.key, x)


def test_streams_one_for_all(ex):
    """Every kernel on one stream (lesson 03's finding), but not every GPU operation: memory sets
    on two others. A learner who answers from lesson 03 ("yes") is told what else the report holds."""
    streams = sql_rows(DB, "SELECT DISTINCT streamId FROM CUPTI_ACTIVITY_KIND_KERNEL")
    every = {s for t in ("KERNEL", "MEMCPY", "MEMSET") for (s,) in sql_rows(DB, f"SELECT DISTINCT streamId FROM "
                                                                             f"CUPTI_ACTIVITY_KIND_{t}")}
    sets = {s for (s,) in sql_rows(DB, "SELECT DISTINCT streamId FROM CUPTI_ACTIVITY_KIND_MEMSET")}
    print("kernel streams", streams, "all streams", sorted(every), "memset streams", sorted(sets))
    q = ex["streams_one_for_all"]
    assert q.kind == "predict" and len(streams) == 1 and len(every) == 3 and q.answer is False
    assert (every - {streams[0][0]}) <= sets
    assert q.judge_silently("no") and not q.judge_silently("yes")
    assert "memory sets do not all" in q.judge("yes").message and "2 other stream" in q.judge("yes").message
    assert "3 streams in all" in q.explain


def _backward_ranges():
    """(start, end, globalTid) of each backward NVTX range of the export."""
    return sql_rows(DB, "SELECT start, end, globalTid FROM NVTX_EVENTS WHERE eventType = 59 AND text = 'backward' "
                        "ORDER BY start")


def test_backward_gpu_ops_from_nsys_stats(ex):
    """Nsight credits one GPU operation to each backward range (nsys stats' projection), and it is
    the kernel the range's own thread launched: the FillFunctor seed of loss.backward(); hundreds
    are launched from other threads inside each range. The choice, not the exact count, is asked."""
    with open(REF / "nsys_8step" / "nsys_stats" / "nvtx_gpu_proj_sum.csv") as f:
        bw = {r["Range"]: r for r in csv.DictReader(f)}[":backward"]
    ranges = _backward_ranges()
    own, anyone = [], 0
    for s, e, g in ranges:
        own += [n for (n,) in sql_rows(DB, "SELECT d.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                                           "JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId "
                                           "JOIN StringIds d ON d.id = k.demangledName "
                                           "WHERE r.globalTid = ? AND r.start >= ? AND r.start < ?", g, s, e)]
        anyone += sum(sql_rows(DB, f"SELECT COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN "
                                   f"CUPTI_ACTIVITY_KIND_{t} k ON k.correlationId = r.correlationId "
                                   "WHERE r.start >= ? AND r.start < ?", s, e)[0][0]
                      for t in ("KERNEL", "MEMCPY", "MEMSET"))
    print("Total GPU Ops", bw["Total GPU Ops"], "ranges", len(ranges), "own-thread kernels", len(own),
          "launched inside on any thread, per range", anyone / len(ranges))
    assert int(bw["Total GPU Ops"]) == len(own) == len(ranges) == 8
    assert all("FillFunctor" in n for n in own)
    q = ex["backward_gpu_ops"]
    assert q.kind == "predict" and q.answer == "one or a few" and q.choices == ["none", "one or a few", "hundreds"]
    assert f"{anyone / len(ranges):,.0f} GPU operations a range" in q.explain and anyone / len(ranges) > 200
    assert "FillFunctor" in q.explain and "gradient seed" in q.explain
    for wrong, says in (("none", "FillFunctor"), ("hundreds", "pt_autograd_0")):
        v = q.judge(wrong)
        assert v.correct is False and says in v.message, (wrong, v.message)
    assert not q.is_offered(8) and not q.is_offered(0)


def _first_data_load():
    return sql_rows(DB, "SELECT start, end FROM NVTX_EVENTS WHERE text = 'data_load' ORDER BY start LIMIT 1")[0]


def _pin_tid():
    (g,), = sql_rows(DB, "SELECT t.globalTid FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId "
                         "WHERE s.value = 'pt_data_pin'")
    return g


def _pin_allocs():
    """The first data_load range (ns) and the durations (ns) of the pin-memory thread's
    cudaHostAlloc calls that start inside it, from the SQLite export."""
    s0, e0 = _first_data_load()
    durs = [d for (d,) in sql_rows(DB, "SELECT r.end - r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
                                       "ON s.id = r.nameId WHERE s.value LIKE 'cudaHostAlloc%' AND r.globalTid = ? "
                                       "AND r.start >= ? AND r.start < ?", _pin_tid(), s0, e0)]
    return s0, e0, durs


def test_pin_alloc_share(ex):
    s0, e0, durs = _pin_allocs()
    share = sum(durs) / (e0 - s0)
    q = ex["pin_alloc_share"]
    assert q.kind == "compute" and len(durs) == 17 and q.answer == pytest.approx(share, rel=1e-12)
    assert q.judge_silently(round(share, 3)) and q.judge_silently(0.324)
    _rejects(q, share * 1.05, share * 0.95, 1 - share, share * 100,        # outside the calls; a percentage
             max(durs) / (e0 - s0),                                         # the longest call only
             sum(durs) / (e0 - s0 + sum(durs)))


def test_batches_before_batch0(ex):
    """The main thread's waits (sem_clockwait, OS runtime rows on its own thread) that end
    inside the first data_load after the pin thread's first cudaHostAlloc began: one wake-up
    per pinned batch, and only the last one brought batch 0."""
    s0, e0 = _first_data_load()
    (first_alloc,), = sql_rows(DB, "SELECT MIN(r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
                                   "ON s.id = r.nameId WHERE s.value LIKE 'cudaHostAlloc%' AND r.globalTid = ? "
                                   "AND r.start >= ? AND r.start < ?", _pin_tid(), s0, e0)
    (main,), = sql_rows(DB, "SELECT globalTid FROM NVTX_EVENTS WHERE text = 'data_load' LIMIT 1")
    woke = [e for (e,) in sql_rows(DB, "SELECT o.end FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId "
                                       "WHERE s.value = 'sem_clockwait' AND o.globalTid = ? AND o.end > ? "
                                       "AND o.end <= ?", main, first_alloc, e0)]
    q = ex["batches_before_batch0"]
    assert q.kind == "compute" and q.answer == len(woke) - 1 == 7
    _rejects(q, 6, 8, 17, 16)
    assert "counts batch 0 itself" in q.judge(8).message


def test_h2d_pinned_gbps(ex):
    (b, ns), = sql_rows(DB, "SELECT SUM(bytes), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                            "WHERE copyKind = 1 AND srcKind = 1")
    (pb, pns), = sql_rows(DB, "SELECT SUM(bytes), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                              "WHERE copyKind = 1 AND srcKind = 0")
    rates = [x / d for x, d in sql_rows(DB, "SELECT bytes, end - start FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                                            "WHERE copyKind = 1 AND srcKind = 1")]
    gbps = b / ns
    q = ex["h2d_pinned_gbps"]
    assert q.kind == "compute" and q.unit == "GB/s" and q.answer == pytest.approx(gbps, rel=1e-12)
    assert round(gbps, 1) == 55.3 and q.judge_silently(55.3)
    _rejects(q, gbps * 1.05, gbps * 0.95, gbps * 1e3, gbps / 1e3, gbps * 1e9 / 2**30,   # GiB/s
             pb / pns, statistics.mean(rates), gbps / 64 * 100, (b + pb) / (ns + pns))
    assert "pageable" in q.judge(pb / pns).message and "GB" in q.judge(gbps * 1e9 / 2**30).message


def test_syncs_in_steps(ex):
    steps = sql_rows(DB, "SELECT start, end FROM NVTX_EVENTS WHERE text = 'torch_step' ORDER BY start")
    calls = sql_rows(DB, "SELECT s.value, r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
                         "ON s.id = r.nameId")
    waiting = [(n, t) for n, t in calls if n.split("_v")[0] in ("cudaDeviceSynchronize", "cudaStreamSynchronize",
                                                               "cudaEventSynchronize", "cudaMemcpy")]
    inside = [w for w in waiting if any(s <= w[1] < e for s, e in steps)]
    q = ex["syncs_in_steps"]
    assert q.kind == "predict" and q.answer == len(inside) == 0 and len(waiting) == 322
    _rejects(q, 1, 8, 16, 320, 322)
    assert "before the first step" in q.judge(322).message


def test_public_h2d_gbps(ex):
    (b, ns), = sql_rows(CLOVER, "SELECT SUM(bytes), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1")
    (ab, ans), = sql_rows(CLOVER, "SELECT SUM(bytes), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY")
    rates = [x / d for x, d in sql_rows(CLOVER, "SELECT bytes, end - start FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                                                "WHERE copyKind = 1")]
    gbps = b / ns
    q = ex["public_h2d_gbps"]
    assert q.kind == "transfer" and q.unit == "GB/s" and q.answer == pytest.approx(gbps, rel=1e-12)
    assert round(gbps, 1) == 24.1 and q.judge_silently(24.1)
    _rejects(q, gbps * 1.05, gbps * 0.95, ab / ans, statistics.mean(rates), gbps * 1e9 / 2**30, gbps * 1e3)
    assert "device-to-host" in q.judge(ab / ans).message


def test_public_sync_ms(ex):
    rows = dict(sql_rows(CLOVER, "SELECT s.value, SUM(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                                 "JOIN StringIds s ON s.id = r.nameId GROUP BY s.value"))
    n = dict(sql_rows(CLOVER, "SELECT s.value, COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                              "JOIN StringIds s ON s.id = r.nameId GROUP BY s.value"))
    sync_ns = rows["cudaDeviceSynchronize_v3020"]
    q = ex["public_sync_ms"]
    assert q.kind == "transfer" and q.unit == "ms" and q.answer == pytest.approx(sync_ns / 1e6, rel=1e-12)
    assert q.judge_silently(302) and q.judge_silently(301.65)
    _rejects(q, sync_ns / 1e6 * 1.05, sync_ns / 1e6 * 0.95, sync_ns, sync_ns / 1e3,          # ns, µs for ms
             rows["cudaMemcpy_v3020"] / 1e6,                                                # the neighbouring row
             rows["cudaMalloc_v3020"] / 1e6, sync_ns / n["cudaDeviceSynchronize_v3020"] / 1e6)   # mean per call
    assert "neighbouring row" in q.judge(rows["cudaMemcpy_v3020"] / 1e6).message


def test_cpu_sampling(ex):
    col = json.loads((REF / "nsys_8step" / "manifest.json").read_text())["recipe"]["collectors"]
    q = ex["cpu_sampling"]
    assert q.kind == "recall" and q.answer is False is col["cpu_sampling"]
    assert q.judge_silently("no") and not q.judge_silently("yes")


def _queue_empty_and_busy(launch_of, gpu, a, b):
    """Over [a, b): the time nothing was launched and unfinished on the device (+1 at a launch
    call's start, -1 at its GPU operation's end, all streams together) and the time a GPU
    operation ran (their union)."""
    changes = sorted([(launch_of[c], 1) for s, e, c in gpu if c in launch_of] +
                     [(e, -1) for s, e, c in gpu if c in launch_of])
    v, t_prev, empty = 0, a, 0
    for t, d in changes:
        if t >= b:
            break
        if t > a:
            empty += (t - t_prev) if v == 0 else 0
            t_prev = t
        v += d
    empty += (b - t_prev) if v == 0 else 0
    busy, cur = 0, None
    for s, e in sorted((max(s, a), min(e, b)) for s, e, c in gpu if e > a and s < b):
        if cur is None or s > cur[1]:
            busy += 0 if cur is None else cur[1] - cur[0]
            cur = [s, e]
        else:
            cur[1] = max(cur[1], e)
    return empty, busy + (cur[1] - cur[0] if cur else 0)


def _verdict(empty_share, busy_share):
    return ("CPU-bound" if empty_share >= 0.20 else
            "GPU-bound" if empty_share <= 0.05 and busy_share >= 0.90 else "mixed")


@functools.cache
def _last_step_queue() -> tuple:
    """(empty, busy, start, end) in ns of nsys_8step's last torch_step, from the export's
    tables (once per process: tools/exercise_mutants.py --kill's children find it made)."""
    launch_of = dict((c, s) for s, c in sql_rows(DB, "SELECT start, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME"))
    gpu = [r for t in ("KERNEL", "MEMCPY", "MEMSET")
           for r in sql_rows(DB, f"SELECT start, end, correlationId FROM CUPTI_ACTIVITY_KIND_{t}")]
    a, b = sql_rows(DB, "SELECT start, end FROM NVTX_EVENTS WHERE text = 'torch_step' ORDER BY start")[-1]
    return (*_queue_empty_and_busy(launch_of, gpu, a, b), a, b)


def test_queue_verdict(ex):
    """The last step of nsys_8step, from the export's tables: never an empty queue, the GPU busy
    97 % of it: GPU-bound."""
    empty, busy, a, b = _last_step_queue()
    assert empty == 0 and 0.97 < busy / (b - a) < 0.98
    q = ex["queue_verdict"]
    assert q.kind == "predict" and q.answer == _verdict(empty / (b - a), busy / (b - a)) == "GPU-bound"
    assert q.choices == ["CPU-bound", "GPU-bound", "mixed"]
    assert q.judge_silently("GPU-bound")
    _rejects(q, "CPU-bound", "mixed")
    assert "gaps in the kernel row" in q.judge("CPU-bound").message


@functools.cache
def _public_step_queue() -> tuple:
    """(empty, busy, start, end) in ns of the public V100 trace's asked step, from its raw
    JSON, once per process."""
    import gzip
    import orjson
    from kitlib.course.exercises import l09
    events = orjson.loads(gzip.decompress((REF / l09.PUBLIC_TRACE).read_bytes()))["traceEvents"]
    us = lambda x: int(x) * 1000    # noqa: E731  (integer µs in this trace)
    launch_of = {e["args"]["correlation"]: us(e["ts"]) for e in events
                 if e.get("ph") == "X" and e.get("cat") == "Runtime" and "correlation" in e.get("args", {})}
    gpu = [(us(e["ts"]), us(e["ts"]) + us(e["dur"]), e["args"]["correlation"]) for e in events
           if e.get("ph") == "X" and e.get("cat") in ("Kernel", "Memcpy", "Memset")]
    (st,) = [e for e in events if e.get("name") == f"ProfilerStep#{l09.PUBLIC_TRACE_STEP}"]
    a, b = us(st["ts"]), us(st["ts"]) + us(st["dur"])
    return (*_queue_empty_and_busy(launch_of, gpu, a, b), a, b)


def test_public_queue_empty_share(ex):
    """ProfilerStep#7 of the public V100 trace (PyTorch 1.9: categories Runtime, Kernel, Memcpy,
    Memset; whole µs), from its raw JSON."""
    empty, busy, a, b = _public_step_queue()
    q = ex["public_queue_empty_share"]
    assert q.kind == "transfer" and q.answer == pytest.approx(empty / (b - a), rel=1e-12)
    assert round(q.answer, 3) == 0.418 and _verdict(empty / (b - a), busy / (b - a)) == "CPU-bound"
    assert q.judge_silently(round(empty / (b - a), 3))
    _rejects(q, q.answer * 1.05, q.answer * 0.95, 1 - q.answer, busy / (b - a), q.answer * 100)
    assert "host_wait_share" in q.judge(0.437).message        # the neighbouring column


def test_every_question_is_pinned(ex):
    assert [q.key for q in ex.questions] == [
        "streams_one_for_all", "backward_gpu_ops", "pin_alloc_share", "batches_before_batch0", "h2d_pinned_gbps",
        "syncs_in_steps", "public_h2d_gbps", "public_sync_ms", "queue_verdict", "public_queue_empty_share",
        "cpu_sampling"]
    assert Path(CLOVER).exists()


def test_questions_build_on_the_kits_live_recording():
    """A learner's own Nsight recording (the kit's live H200 capture, whose step ranges are
    numbered torch_step#N): every question is there, and the step-based answers follow its
    own rows (SQL here)."""
    from kitlib.course.exercises import l09
    from kitlib.readers.bundle import open_capture
    live = PUBLIC.parent / "live-h200-2026-11-30" / "nsys_8step"
    ex = l09.questions(open_capture(live))
    assert [q.key for q in ex.questions][:6] == ["streams_one_for_all", "backward_gpu_ops", "pin_alloc_share",
                                                 "batches_before_batch0", "h2d_pinned_gbps", "syncs_in_steps"]
    db = live / "report.sqlite"
    steps = sql_rows(db, "SELECT start, end FROM NVTX_EVENTS WHERE eventType = 59 AND text LIKE 'torch_step%'")
    assert len(steps) == 8
    calls = sql_rows(db, "SELECT s.value, r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
                         "WHERE s.value LIKE '%Synchronize%'")
    assert ex["syncs_in_steps"].answer == sum(any(a <= t < b for a, b in steps) for _, t in calls) == 0
    (b, ns), = sql_rows(db, "SELECT SUM(bytes), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                            "WHERE copyKind = 1 AND srcKind = 1")
    assert ex["h2d_pinned_gbps"].answer == pytest.approx(b / ns, rel=1e-12)


def test_queue_section_sentences():
    """The sentences of "Is the GPU waiting for the CPU?", from the export's tables: step 0 waits
    for the host nearly the whole step; steps 1 and 2 run dry for a few ms; from step 3 on the
    queue never empties and its longest length grows step after step; the idle time left there
    is all kernel wait (gaps between queued operations under 30 µs)."""
    launch_of = dict((c, s) for s, c in sql_rows(DB, "SELECT start, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME"))
    gpu = [r for t in ("KERNEL", "MEMCPY", "MEMSET")
           for r in sql_rows(DB, f"SELECT start, end, correlationId, streamId FROM CUPTI_ACTIVITY_KIND_{t}")]
    steps = sql_rows(DB, "SELECT start, end FROM NVTX_EVENTS WHERE text = 'torch_step' ORDER BY start")
    changes = sorted([(launch_of[c], 1) for s, e, c, _ in gpu if c in launch_of] +
                     [(e, -1) for s, e, c, _ in gpu if c in launch_of])
    longest, v, i = [], 0, 0
    for a, b in steps:                      # one sweep: the longest queue inside each step
        while i < len(changes) and changes[i][0] <= a:
            v += changes[i][1]
            i += 1
        top = v
        while i < len(changes) and changes[i][0] < b:
            v += changes[i][1]
            i += 1
            top = max(top, v)
        longest.append(top)
    empty = [_queue_empty_and_busy(launch_of, [g[:3] for g in gpu], a, b)[0] for a, b in steps]
    assert empty[0] / (steps[0][1] - steps[0][0]) > 0.9
    assert all(1e6 < e < 5e6 for e in empty[1:3])
    assert empty[3:] == [0] * 5
    assert all(x < y for x, y in zip(longest[3:], longest[4:]))
    # stream 7's gaps that begin in steps 3-7: the next operation was launched before the gap
    # began, and the gap is under 30 µs (kernel wait)
    reach = None
    for s, e, c, _ in sorted(g for g in gpu if g[3] == 7):
        if reach is not None and s > reach and any(a <= reach < b for a, b in steps[3:]):
            assert launch_of[c] <= reach and s - reach < 30_000
        reach = e if reach is None else max(reach, e)


def test_queue_verdict_explained_for_the_last_step(ex):
    """queue_verdict names the last step and gives its figures, from the export's tables
    (l09 mutants #17: the step before the last, same verdict, other figures; #18: the
    GPU-bound step without its sentence on what would make it shorter)."""
    empty, busy, a, b = _last_step_queue()
    n = len(sql_rows(DB, "SELECT start FROM NVTX_EVENTS WHERE text = 'torch_step'"))
    q = ex["queue_verdict"]
    assert f"from the timeline of step {n - 1} above" in q.prompt
    assert q.explain.startswith(f"GPU-bound: queue empty {100 * empty / (b - a):.1f} % of the step "
                                f"({empty / 1e6:.3f} of {(b - a) / 1e6:.3f} ms), GPU busy {100 * busy / (b - a):.1f} %")
    assert "a faster host would not make this step shorter; shorter or fewer kernels would." in q.explain


def test_public_queue_empty_share_traps_from_the_raw_json(ex):
    """The busy share and 1 − the answer, from the public trace's raw JSON, each meet their
    own feedback (l09 mutants #27, #28: the "1 minus" trap computed as 1 + or 2 −)."""
    empty, busy, a, b = _public_step_queue()
    q = ex["public_queue_empty_share"]
    assert "1 minus the answer" in q.judge(1 - empty / (b - a)).message
    assert "share of the step the GPU was busy" in q.judge(busy / (b - a)).message


def test_syncs_in_steps_explained_from_the_export(ex):
    """The waiting calls outside the steps, counted by SQL: all, before step 0 (of them the
    stream synchronisations) and after the last step (l09 mutants #34: the stream
    synchronisations miscounted; #62: the prompt's list of calls cut short)."""
    steps = sql_rows(DB, "SELECT start, end FROM NVTX_EVENTS WHERE text = 'torch_step' ORDER BY start")
    calls = [(n.split("_v")[0], t) for n, t in sql_rows(DB, "SELECT s.value, r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                                                           "JOIN StringIds s ON s.id = r.nameId")]
    names = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy")
    waiting = [(n, t) for n, t in calls if n in names]
    before = [n for n, t in waiting if t < steps[0][0]]
    after = sum(t >= steps[-1][1] for _, t in waiting)
    q = ex["syncs_in_steps"]
    assert f"({', '.join(names[:-1])} or a plain cudaMemcpy)" in q.prompt
    assert f"The {len(waiting)} waiting calls are outside the steps: {len(before)} before step 0 " \
           f"({before.count('cudaStreamSynchronize')} stream synchronisations" in q.explain
    assert f"and {after} after the last step" in q.explain


def test_pin_alloc_share_explained_and_its_traps(ex):
    """pin_alloc_share's figures and its two traps (the part outside the calls; the calls over
    the range plus the calls), at the values the export gives, each with its feedback (l09
    mutants #40-#44: a trap's value changed, never met)."""
    s0, e0, durs = _pin_allocs()
    share = sum(durs) / (e0 - s0)
    q = ex["pin_alloc_share"]
    assert q.explain.startswith(f"{len(durs)} calls, {sum(durs) / 1e6:,.1f} ms of {(e0 - s0) / 1e6:,.1f} ms = {share:.1%}")
    assert [t for t, _ in q.traps] == pytest.approx([1 - share, sum(durs) / (e0 - s0 + sum(durs))], rel=1e-12)
    assert "outside* cudaHostAlloc" in q.judge(1 - share).message
    assert "divide by the range's length alone" in q.judge(sum(durs) / (e0 - s0 + sum(durs))).message.lower()


def test_batches_before_batch0_explained(ex):
    """"it woke 8 times ... 7 batches were pinned before batch 0", the wake-ups counted by SQL
    as in test_batches_before_batch0 (l09 mutants #49, #50: the second figure miscounted)."""
    s0, e0 = _first_data_load()
    (first_alloc,), = sql_rows(DB, "SELECT MIN(r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
                                   "ON s.id = r.nameId WHERE s.value LIKE 'cudaHostAlloc%' AND r.globalTid = ? "
                                   "AND r.start >= ? AND r.start < ?", _pin_tid(), s0, e0)
    (main,), = sql_rows(DB, "SELECT globalTid FROM NVTX_EVENTS WHERE text = 'data_load' LIMIT 1")
    (woke,), = sql_rows(DB, "SELECT COUNT(*) FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId "
                            "WHERE s.value = 'sem_clockwait' AND o.globalTid = ? AND o.end > ? AND o.end <= ?",
                        main, first_alloc, e0)
    q = ex["batches_before_batch0"]
    assert q.explain.startswith(f"it woke {woke} times after the pin thread began")
    assert f"{woke - 1} batches were pinned before batch 0" in q.explain


def test_h2d_pinned_gbps_share_of_the_link_trap(ex):
    """The rate as a share of the 64 GB/s link (the figure the question's trap takes as the PCIe
    Gen5 x16 link's one-way peak) meets its feedback (l09 mutants #56-#59: that trap's value
    ÷ or × or 65 or 101, never met)."""
    (b, ns), = sql_rows(DB, "SELECT SUM(bytes), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY "
                            "WHERE copyKind = 1 AND srcKind = 1")
    assert "share of the link's peak" in ex["h2d_pinned_gbps"].judge(b / ns / 64 * 100).message


def test_public_sync_ms_explained_and_the_mean_trap(ex):
    """"301.7 ms in 1,312 calls" from SQL on the public export, and the mean per call meets its
    feedback (l09 mutant #5: the calls counted for another function)."""
    (ns, n), = sql_rows(CLOVER, "SELECT SUM(r.end - r.start), COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                                "JOIN StringIds s ON s.id = r.nameId WHERE s.value LIKE 'cudaDeviceSynchronize%'")
    q = ex["public_sync_ms"]
    assert q.explain.startswith(f"{ns / 1e6:,.1f} ms in {n:,} calls")
    assert "mean per call" in q.judge(ns / n / 1e6).message
