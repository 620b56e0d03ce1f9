"""Lesson 12's answers (issue 31) from each rank's raw trace JSON, without the exercise code or
kitlib's analyses: ProfilerStep#N durations, gloo:* collective events matched call by call
(the k-th call of a name on each rank, in start order), the public NCCL pair's kernels merged
by hand. Each key is checked against these figures, accepts them and rejects the near misses
(the injected delay for the measured lateness, the mean for the median, the neighbouring
step or rank, the transfer's share for the waiting's, µs for ms). Issue 26's sentence on the
hidden fraction ("a lower bound") and the multi-rank Nsight Systems seed point are pinned."""
from __future__ import annotations

import functools
import gzip
import json
import statistics
from pathlib import Path

import nbformat
import pytest

from conftest import merged_length

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "data" / "reference"
NCCL = REF / "public-traces"

# The raw-side helpers below are cached (functools.cache; callers only read what they return):
# tools/exercise_mutants.py --kill reruns these tests in children forked from a process that
# ran them, which then rebuild only the questions.


@functools.cache
def _doc(run, rank):
    return json.loads(gzip.decompress((REF / run / f"rank{rank}" / "trace.json.gz").read_bytes()))


@functools.cache
def _steps_and_calls(run):
    """Per rank: ``{step: (start, end)}`` and ``{(name, k): (start, dur, step)}`` in µs (both
    ranks' traces share one baseTimeNanoseconds, checked here)."""
    out, bases = {}, set()
    for r in (0, 1):
        doc = _doc(run, r)
        bases.add(doc["baseTimeNanoseconds"])
        ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
        steps = {int(e["name"].split("#")[1]): (e["ts"], e["ts"] + e["dur"]) for e in ev
                 if e["name"].startswith("ProfilerStep#")}
        calls, seen = {}, {}
        for e in sorted((e for e in ev if e["name"].startswith("gloo:")), key=lambda e: e["ts"]):
            k = seen[e["name"]] = seen.get(e["name"], -1) + 1
            step = next((n for n, (a, b) in steps.items() if a <= e["ts"] < b), None)
            calls[(e["name"], k)] = (e["ts"], e["dur"], step)
        out[r] = (steps, calls)
    assert len(bases) == 1
    return out


def _worst_per_step(run):
    """Per step: (largest lateness µs, last rank) over the calls inside it."""
    sc = _steps_and_calls(run)
    worst = {}
    for key, (t0, _, step) in sc[0][1].items():
        t1 = sc[1][1][key][0]
        if step is None:
            continue
        late, last = abs(t1 - t0), (1 if t1 > t0 else 0)
        worst[step] = max(worst.get(step, (0, None)), (late, last))
    return [worst[s] for s in sorted(worst)]


def test_both_ranks_slower(ex):
    med = {run: statistics.median(e - s for s, e in _steps_and_calls(run)[0][0].values()) / 1e3
           for run in ("ranks_balanced", "ranks_straggler")}
    assert med["ranks_straggler"] - med["ranks_balanced"] > 500 / 2      # rank 0, which does not sleep
    q = ex["both_ranks_slower"]
    assert q.kind == "recall" and q.answer == "both ranks"        # lesson 10 measured rank 0 before and after
    assert q.judge_silently("both ranks") and not q.judge_silently("only the sleeping rank")


def test_straggler_rank_and_late_ms(ex):
    worst = _worst_per_step("ranks_straggler")
    assert [r for _, r in worst] == [1, 1, 1]
    q = ex["straggler_rank"]
    assert q.answer == 1 and q.judge_silently(1) and not q.judge_silently(0)
    lates = [w / 1e3 for w, _ in worst]
    late = statistics.median(lates)
    q = ex["late_ms"]
    assert q.answer == round(late, 1) == 525.6 and q.unit == "ms"
    assert q.judge_silently(late) and q.judge_silently(526)
    misses = {"injected": 500.0, "mean for median": statistics.fmean(lates), "the largest step": max(lates),
              "the smallest step": min(lates), "5 % off": late * 1.05, "µs": late * 1e3}
    assert not [k for k, v in misses.items() if q.judge_silently(v)]
    assert "manifest" in q.judge(500).message


def _rank0_waits_and_spans(sc):
    """Rank 0's waits as the kit estimates them (at each call inside a step that rank 0
    started first, the time until rank 1 started it, at most the call's duration) and its
    calls' intervals, both as (start, end) in µs from :func:`_steps_and_calls`."""
    waits, spans = [], []
    for key, (t0, d0, step) in sc[0][1].items():
        if step is None:
            continue
        t1 = sc[1][1][key][0]
        waits.append((t0, t0 + min(max(t1 - t0, 0.0), d0)))
        spans.append((t0, t0 + d0))
    return waits, spans


def test_fast_rank_wait_share_and_what_to_fix(ex):
    """Rank 0's waiting, estimated as the kit does: at each call inside a step that rank 0
    started first, the time until rank 1 started it (at most the call's duration); the union
    of those waits over the union of rank 0's call intervals inside steps."""
    sc = _steps_and_calls("ranks_straggler")
    waits, spans = _rank0_waits_and_spans(sc)
    share = merged_length(waits) / merged_length(spans)      # unions: two Gloo threads run calls at once
    q = ex["fast_rank_wait_share"]
    assert q.answer == round(share, 2) == 0.82 and q.judge_silently(round(share, 3))
    assert q.tolerance_why
    misses = {"transfer share": 1 - share, "5 % off": share * 1.05, "percent": share * 100}
    assert not [k for k, v in misses.items() if q.judge_silently(v)]
    fix = ex["what_to_fix"]
    assert fix.answer == ("fix the straggler" if share >= 0.5 else "faster communication")
    assert fix.judge_silently("fix the straggler") and not fix.judge_silently("faster communication")


def test_excerpt_late_ms_from_the_raw_events(ex):
    sc = _steps_and_calls("ranks_balanced")
    starts = {r: sc[r][1][("gloo:all_reduce", 0)] for r in (0, 1)}
    assert all(s[2] == 2 for s in starts.values())                    # inside ProfilerStep#2
    late = abs(starts[1][0] - starts[0][0]) / 1e3
    q = ex["excerpt_late_ms"]
    assert q.kind == "transfer" and q.answer == pytest.approx(late, abs=5e-4) and round(late, 1) == 125.8
    step_diff = abs(sc[1][0][2][0] - sc[0][0][2][0]) / 1e3
    bcast = abs(sc[1][1][("gloo:broadcast", 0)][0] - sc[0][1][("gloo:broadcast", 0)][0]) / 1e3
    misses = {"step starts": step_diff, "broadcast": bcast, "µs": late * 1e3, "5 % off": late * 1.05,
              "second all_reduce": abs(sc[1][1][("gloo:all_reduce", 1)][0] - sc[0][1][("gloo:all_reduce", 1)][0]) / 1e3}
    assert not [k for k, v in misses.items() if q.judge_silently(v)]
    from kitlib.course.raw_views import collective_excerpt
    from kitlib.readers.ranks import load_traces
    raw = collective_excerpt(load_traces("ranks_balanced"))
    assert len(raw["events"]) == 8 and raw["step"] == 2 and sorted(raw["ranks"].values()) == [0, 1]


@functools.cache
def _hidden(rank):
    k = _public_kernels(rank)
    comm = [(a, b) for a, b, c in k if c]
    comp = [(a, b) for a, b, c in k if not c]
    return (merged_length(comm) + merged_length(comp) - merged_length(comm + comp)) / merged_length(comm)


def test_nccl_hidden_fraction_is_an_estimate_not_a_bound(ex):
    frac = _hidden(0)
    q = ex["nccl_hidden_fraction"]
    assert q.answer == round(frac, 3) and q.judge_silently(frac)
    misses = {"exposed": 1 - frac, "rank 1": _hidden(1), "5 % off": frac * 1.05, "percent": frac * 100}
    assert not [k for k, v in misses.items() if q.judge_silently(v)]
    assert "lower bound" not in q.explain and "either way" in q.explain


def test_lesson12_teaches_nsight_on_several_ranks():
    nb = nbformat.read(next((ROOT / "lessons").glob("12_*.ipynb")), 4)
    text = "\n".join(c.source for c in nb.cells)
    assert "nsys profile" in text and "-o report_%q{RANK}" in text and "torchrun" in text
    assert "The kit holds no such recording" in text


# --------------------------------------------------------------------------- issue 29's questions
@functools.cache
def _nccl_calls(rank):
    """Each NCCL call of the public pair's ``rank`` from its raw JSON: (operator name,
    Input Dims as text, operator ts, kernel ts, kernel end) in µs, the kernel found through
    the cudaLaunchKernel inside the operator (same correlation); in kernel-start order."""
    doc = json.loads(gzip.decompress((NCCL / f"hta_2024-03_nccl_sampled_rank{rank}.json.gz").read_bytes()))
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    kern = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_")}
    ops = [e for e in ev if e["name"].startswith("nccl:")]
    out = []
    for la in ev:
        if la.get("cat") == "cuda_runtime" and la["args"].get("correlation") in kern:
            op = next(o for o in ops if o["tid"] == la["tid"] and o["ts"] <= la["ts"] <= o["ts"] + o["dur"])
            k = kern[la["args"]["correlation"]]
            out.append((op["name"], json.dumps(op["args"]["Input Dims"]), op["ts"], k["ts"], k["ts"] + k["dur"]))
    return sorted(out, key=lambda c: c[3])


def test_end_gap_ms_from_the_raw_kernels(ex):
    """The first nccl:all_to_all of each rank: their kernels end 62.789 ms apart (rank 0's
    ends 30.669 ms after it starts, rank 1's 93.458 ms after rank 0's starts), and rank 0's
    second all-to-all ends at the same µs as rank 1's first: its real partner."""
    a2a = {r: [c for c in _nccl_calls(r) if c[0] == "nccl:all_to_all"] for r in (0, 1)}
    gap = abs(a2a[1][0][4] - a2a[0][0][4]) / 1e3
    assert round(gap, 3) == 62.789 and a2a[0][1][4] == a2a[1][0][4]
    q = ex["end_gap_ms"]
    assert q.kind == "compute" and q.unit == "ms" and q.answer == round(gap, 3) and q.judge_silently(gap)
    misses = {"starts": abs(a2a[1][0][3] - a2a[0][0][3]) / 1e3, "enqueue": abs(a2a[1][0][2] - a2a[0][0][2]) / 1e3,
              "µs": gap * 1e3, "5 % off": gap * 1.05}
    assert not [k for k, v in misses.items() if q.judge_silently(v)]
    assert "starts" in q.judge(misses["starts"]).message


def test_clock_offset_prediction_from_the_raw_ends(ex):
    """The calls that are one call (same name and Input Dims, ends within 1 ms) end 0.008 to
    0.332 ms apart as recorded; with rank 1's clock 5 ms ahead, 4.668 to 5.332 ms: all about
    5 ms apart, the clocks' difference."""
    c0, c1 = _nccl_calls(0), _nccl_calls(1)
    diffs = [(b[4] - a[4]) / 1e3 for a in c0 for b in c1 if a[:2] == b[:2] and abs(b[4] - a[4]) <= 1000]
    assert len(diffs) == 4 and max(map(abs, diffs)) == pytest.approx(0.332)
    moved = [abs(d + 5.0) for d in diffs]
    assert all(4 < m < 6 for m in moved)
    q = ex["clock_offset"]
    assert q.kind == "predict" and q.answer == "all about 5 ms apart"
    assert q.judge_silently("all about 5 ms apart") and not q.judge_silently("still within 1 ms")


def _step551_exposed_share(rank):
    """A rank's exposed share of communication in ProfilerStep#551 of the public pair, from its
    raw kernels: the ncclKernel_ kernels starting in the step (C) against every other kernel;
    (C less its overlap with the others) / C."""
    doc = json.loads(gzip.decompress((NCCL / f"hta_2024-03_nccl_sampled_rank{rank}.json.gz").read_bytes()))
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    s = next(e for e in ev if e["name"] == "ProfilerStep#551")
    k = [e for e in ev if e.get("cat") == "kernel"]
    comm = [(e["ts"], e["ts"] + e["dur"]) for e in k if e["name"].startswith("ncclKernel_")
            and s["ts"] <= e["ts"] < s["ts"] + s["dur"]]
    comp = [(e["ts"], e["ts"] + e["dur"]) for e in k if not e["name"].startswith("ncclKernel_")]
    c = merged_length(comm)
    return (c - (c + merged_length(comp) - merged_length(comm + comp))) / c


def test_nccl_exposed_share_from_the_raw_kernels(ex):
    """Rank 0, ProfilerStep#551 of the public pair: the NCCL kernels starting in it against
    every other kernel; exposed / all communication = 172.3 / 195.3 ms."""
    share = _step551_exposed_share(0)
    q = ex["nccl_exposed_share"]
    assert q.answer == round(share, 3) == 0.882 and q.judge_silently(share)
    misses = {"hidden": 1 - share, "5 % off": share * 1.05, "percent": share * 100}
    assert not [k for k, v in misses.items() if q.judge_silently(v)]
    # the hidden share, to 3 decimals as the table gives it, meets its feedback (l12 mutants
    # #131-#133). Unrounded (0.11809...) it does not: a trap is matched within the answer's
    # relative tolerance (0.057 % of 0.882), and the trap's own value is rounded to 3 decimals
    assert q.traps[0][0] == round(1 - share, 3)
    assert "that is the hidden share" in q.judge(round(1 - share, 3)).message.lower()


def test_gloo_exposed_wait_share_from_the_raw_events(ex):
    """The kit's Gloo straggler run, rank 0, ProfilerStep#3: its gloo:* calls in the step (C),
    every operator on the ProfilerStep's own thread but the collective ones (P: the one rule
    of compute, collectives.compute_intervals), the waits at each call
    (until rank 1 started the same call, by name and order, at most the call); waiting
    exposed |W \\ P| over exposed |C \\ P|, by a sweep over the boundaries."""
    sc = _steps_and_calls("ranks_straggler")
    doc = _doc("ranks_straggler", 0)
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    main = {e["tid"] for e in ev if e["name"].startswith("ProfilerStep#")}
    comp = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") == "cpu_op" and e["tid"] in main
            and not e["name"].startswith(("record_param_comms", "c10d::", "nccl:", "gloo:"))]
    calls = [(key, t0, d0) for key, (t0, d0, step) in sc[0][1].items() if step == 3]
    C = [(t0, t0 + d0) for _, t0, d0 in calls]
    W = [(t0, t0 + min(max(sc[1][1][key][0] - t0, 0.0), d0)) for key, t0, d0 in calls]

    def outside(spans):            # |spans \ comp|
        return merged_length(spans) - (merged_length(spans) + merged_length(comp) - merged_length(spans + comp))
    share = outside(W) / outside(C)
    q = ex["gloo_exposed_wait_share"]
    assert q.kind == "compute" and q.answer == pytest.approx(round(share, 3), abs=1e-3) and q.judge_silently(share)
    assert round(share, 3) == 0.979       # 0.965 when compute was aten:: operators on any thread
    misses = {"transfer": 1 - share, "5 % off": share * 1.05, "percent": share * 100}
    assert not [k for k, v in misses.items() if q.judge_silently(v)]
    # the answer to 3 decimals, and its two traps (the exposed share of all the calls' time,
    # the transfer's share) with their feedback (l12 mutants #143-#148)
    assert q.answer == round(share, 3)
    exposed_share = outside(C) / merged_length(C)
    assert [t for t, _ in q.traps] == [round(exposed_share, 3), round(1 - share, 3)]
    assert "exposed share of all its communication" in q.judge(round(exposed_share, 3)).message
    assert "transfer's share of the exposed time" in q.judge(round(1 - share, 3)).message


@functools.cache
def _budget_raw(run):
    """Per rank and step, ms from the raw JSON: (step, operators, blocked, outside, all in
    collectives). Operators: cpu_op events on the ProfilerStep's thread, collective operators
    left out; blocked: the gloo:* calls' union less the operators; outside: the rest."""
    out = {}
    for r in (0, 1):
        ev = [e for e in _doc(run, r)["traceEvents"] if e.get("ph") == "X"]
        for s in (e for e in ev if e["name"].startswith("ProfilerStep#")):
            a, b = s["ts"], s["ts"] + s["dur"]

            def cut(es):
                return [(max(e["ts"], a), min(e["ts"] + e["dur"], b)) for e in es
                        if e["ts"] < b and e["ts"] + e["dur"] > a]
            ops = cut(e for e in ev if e.get("cat") == "cpu_op" and e["tid"] == s["tid"]
                      and not e["name"].startswith(("record_param_comms", "c10d::", "nccl:", "gloo:")))
            comm = cut(e for e in ev if e["name"].startswith("gloo:"))
            o, c = merged_length(ops), merged_length(comm)
            blocked = merged_length(ops + comm) - o
            out[r, int(s["name"].split("#")[1])] = tuple(x / 1e3 for x in (s["dur"], o, blocked,
                                                                           s["dur"] - o - blocked, c))
    return out


def test_straggler_part_and_outside_ops_excess_from_the_raw_events(ex):
    """Rank 1 sleeps 500 ms before every step: per step, its excess over rank 0 between
    operators is 470.7, 526.7, 465.0 ms (median 470.7); in operators +37 ms median, swinging
    ±196 ms; blocked in a collective it is rank 0 that spends the time. Near misses: step time
    less all collective time (964.2), the two runs' median steps (884.7), the mean, the whole
    compute difference (operators included, 501.7)."""
    raw = _budget_raw("ranks_straggler")
    steps = sorted({s for _, s in raw})
    d = {k: [raw[1, s][i] - raw[0, s][i] for s in steps] for k, i in
         (("step", 0), ("ops", 1), ("blocked", 2), ("outside", 3), ("in_coll", 4))}
    assert [round(x, 1) for x in d["outside"]] == [470.7, 526.7, 465.0]
    assert round(statistics.median(d["ops"])) == 37 and round((max(d["ops"]) - min(d["ops"])) / 2) == 196
    assert statistics.median(d["blocked"]) < 0 < statistics.median(d["outside"])
    q = ex["straggler_part"]
    assert q.kind == "predict" and q.answer == "between operators"
    assert q.judge_silently("between operators")
    assert not q.judge_silently("operators") and not q.judge_silently("blocked in a collective")
    q = ex["delay_excess_ms"]
    med = statistics.median(d["outside"])
    assert q.kind == "compute" and q.answer == round(med, 1) == 470.7 and q.judge_silently(med)
    assert q.judge_silently(471)                       # three significant figures
    all_coll = statistics.median(a - b for a, b in zip(d["step"], d["in_coll"]))
    runs = (statistics.median(v[0] for v in raw.values())
            - statistics.median(v[0] for v in _budget_raw("ranks_balanced").values()))
    compute = statistics.median(a + b for a, b in zip(d["ops"], d["outside"]))
    misses = {"all collectives": all_coll, "run to run": runs, "mean": statistics.mean(d["outside"]),
              "compute": compute, "µs": med * 1e3, "rank 1 alone": raw[1, steps[1]][3]}
    assert [round(misses[k], 1) for k in ("all collectives", "run to run", "compute")] == [964.2, 884.7, 501.7]
    assert not [k for k, v in misses.items() if q.judge_silently(v)]
    # the straggler's step time alone cannot name it: rank 1's median step is not the longer one
    assert statistics.median(d["step"]) < 0


def test_drift_within_the_straggler_run_from_step_times_json():
    """The lesson's drift check: rank 0 of ranks_straggler stepped in 1,884 ms without the
    profiler and 2,450 ms with it (+30 %), the balanced run within 4 %."""
    from kitlib.course.ranks import drift_within
    from kitlib.readers.ranks import load_traces
    un = statistics.median(json.loads((REF / "ranks_straggler" / "rank0" / "step_times.json").read_text())
                           ["step_ms_uninstrumented"])
    pr = statistics.median(v[0] for (r, _), v in _budget_raw("ranks_straggler").items() if r == 0)
    assert (round(un), round(pr), round((pr / un - 1) * 100)) == (1884, 2450, 30)
    assert f"rank 0 stepped in {un:,.0f} ms without the profiler and {pr:,.0f} ms with it (+30 %)" in \
        drift_within(load_traces("ranks_straggler"))
    assert drift_within(load_traces("ranks_balanced")).startswith("no drift seen")


def test_what_to_fix_turns_away_what_is_no_choice(ex):
    """A word that names neither choice ("yes", "no") is not one of the choices and costs no
    try (l12 mutants #4, #5: the normaliser's ``in`` made ``not in``, which turned every such
    word into "faster communication", a wrong try)."""
    fix = ex["what_to_fix"]
    for word in ("yes", "no"):
        assert "is not one of the choices" in fix.judge(word).message, word
    assert fix.judge_silently("straggler") and fix.judge_silently("the straggler")
    assert not fix.judge_silently("communication")


def test_excerpt_late_ms_explained_from_the_raw_events(ex):
    """"rank 1 started it 125.815 ms after the other rank ... The early rank's all_reduce lasted
    125.852 ms longer", both from the raw JSON (l12 mutants #20: the other rank named; #24,
    #25: the duration difference ×1000 or a sum)."""
    sc = _steps_and_calls("ranks_balanced")
    starts = {r: sc[r][1][("gloo:all_reduce", 0)] for r in (0, 1)}
    first, last = sorted((0, 1), key=lambda r: starts[r][0])
    late = (starts[last][0] - starts[first][0]) / 1e3
    longer = (starts[first][1] - starts[last][1]) / 1e3
    q = ex["excerpt_late_ms"]
    assert q.explain.startswith(f"rank {last} started it {late:,.3f} ms after the other rank")
    assert f"The early rank's all_reduce lasted {longer:,.3f} ms longer" in q.explain


def test_excerpt_late_ms_traps_from_the_raw_events(ex):
    """The two near misses of the excerpt question, the ProfilerStep#2 starts' difference and
    the first gloo:broadcast's lateness, at 3 decimals from the raw JSON, each with its own
    feedback (l12 mutants #27-#34: a trap's value changed, never met)."""
    sc = _steps_and_calls("ranks_balanced")
    step_diff = abs(sc[1][0][2][0] - sc[0][0][2][0]) / 1e3
    bcast = abs(sc[1][1][("gloo:broadcast", 0)][0] - sc[0][1][("gloo:broadcast", 0)][0]) / 1e3
    q = ex["excerpt_late_ms"]
    assert [t for t, _ in q.traps] == [round(step_diff, 3), round(bcast, 3)]
    assert "difference of the ranks' profilerstep starts" in q.judge(step_diff).message.lower()
    assert "that is the first gloo:broadcast" in q.judge(bcast).message.lower()


def _comm_hidden_ms(rank):
    """(hidden, communication) ms of the public pair's ``rank``: the communication kernels'
    union and its part under compute kernels, from the raw JSON."""
    frac = _hidden(rank)
    ev = _public_kernels(rank)
    comm = merged_length([(a, b) for a, b, c in ev if c]) / 1e3
    return frac * comm, comm


@functools.cache
def _public_kernels(rank):
    ev = json.loads(gzip.decompress((NCCL / f"hta_2024-03_nccl_sampled_rank{rank}.json.gz").read_bytes()))
    return [(e["ts"], e["ts"] + e["dur"], e["name"].startswith(("ncclKernel_", "ncclDevKernel_")))
            for e in ev["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]


def test_the_explanations_and_traps_give_the_raw_figures(ex):
    """What a learner reads besides the verdicts, from the raw JSON: both_ranks_slower's medians
    and trap (l12 mutant #73: another rank named); late_ms's mean trap (#77, #79); the
    excerpt's answer to 3 decimals (#92); end_gap_ms's figure and its two traps (#54-#56);
    nccl_hidden_fraction's figures and traps (#98)."""
    med = {run: statistics.median(e - s for s, e in _steps_and_calls(run)[0][0].values()) / 1e3
           for run in ("ranks_balanced", "ranks_straggler")}
    q = ex["both_ranks_slower"]
    assert q.explain.startswith(f"rank 0, which does not sleep, went from {med['ranks_balanced']:,.0f} ms to "
                                f"{med['ranks_straggler']:,.0f} ms per step (median)")
    assert "rank 0 does not sleep, but it cannot finish a collective before rank 1 joins it" \
        in q.judge("only the sleeping rank").message.lower()
    lates = [w / 1e3 for w, _ in _worst_per_step("ranks_straggler")]
    q = ex["late_ms"]
    assert [t for t, _ in q.traps] == [500.0, round(statistics.fmean(lates), 1)]
    assert "mean over the steps" in q.judge(statistics.fmean(lates)).message
    sc = _steps_and_calls("ranks_balanced")
    late = abs(sc[1][1][("gloo:all_reduce", 0)][0] - sc[0][1][("gloo:all_reduce", 0)][0]) / 1e3
    assert ex["excerpt_late_ms"].answer == round(late, 3)
    a2a = {r: [c for c in _nccl_calls(r) if c[0] == "nccl:all_to_all"][0] for r in (0, 1)}
    gap = abs(a2a[1][4] - a2a[0][4]) / 1e3
    q = ex["end_gap_ms"]
    assert q.explain.startswith(f"{gap:,.3f} ms apart: one collective ends on every rank")
    starts, enqueue = abs(a2a[1][3] - a2a[0][3]) / 1e3, abs(a2a[1][2] - a2a[0][2]) / 1e3
    assert [t for t, _ in q.traps] == [round(starts, 3), round(enqueue, 3)]
    assert "(the enqueue), not the kernels' ends" in q.judge(enqueue).message
    hidden, comm = _comm_hidden_ms(0)
    q = ex["nccl_hidden_fraction"]
    assert q.explain.startswith(f"{hidden:,.1f} ms of {comm:,.1f} ms = {hidden / comm:.1%} (comm_overlap)")
    assert [t for t, _ in q.traps] == [round(1 - _hidden(0), 3), round(_hidden(1), 3)]
    assert "exposed share, not the hidden one" in q.judge(1 - _hidden(0)).message
    assert "that is rank 1's" in q.judge(_hidden(1)).message.lower()


def test_fast_rank_wait_share_explained_and_its_traps(ex):
    """rank 0's waiting and transfer ms per step (the waits' union and the rest of its calls'
    union, over the 3 steps) and the two traps (the transfer's share; waiting over the median
    step), at 2 decimals from the raw JSON, each with its feedback (l12 mutants #82-#86)."""
    sc = _steps_and_calls("ranks_straggler")
    waits, spans = _rank0_waits_and_spans(sc)
    n = len(sc[0][0])
    wait_ms, coll_ms = merged_length(waits) / n / 1e3, merged_length(spans) / n / 1e3
    share = wait_ms / coll_ms
    step_ms = statistics.median(e - s for s, e in sc[0][0].values()) / 1e3
    q = ex["fast_rank_wait_share"]
    assert q.explain.startswith(f"rank 0: waiting {wait_ms:,.1f} ms and transfer {coll_ms - wait_ms:,.1f} ms per step, "
                                f"so {share:.0%} of its collective time is waiting")
    assert [t for t, _ in q.traps] == [round(1 - share, 2), round(wait_ms / step_ms, 2)]
    assert "transfer's share" in q.judge(round(1 - share, 2)).message
    assert "divides by the whole step" in q.judge(round(wait_ms / step_ms, 2)).message


def test_clock_offset_still_within_1_ms_meets_its_trap(ex):
    """The likeliest wrong prediction, "still within 1 ms", is told why (l12 mutant #124: the
    trap set on the other wrong choice)."""
    msg = ex["clock_offset"].judge("still within 1 ms").message.lower()
    assert "the calls still end together in real time, but the clocks that stamp them now differ" in msg


def test_step_budget_explanations_and_traps_from_the_raw_events(ex):
    """The robust estimate's figures as a learner reads them, from the raw JSON: straggler_part's
    two medians (l12 mutants #172-#176: another part's figure; the third, between operators, is
    the next question's answer and left out); delay_excess_ms's per-step list, median, both swings and the operators' median (#159-#162, #180-#184), and its
    four traps at 1 decimal with their feedback (#164-#168, #186, #187: a trap's value
    changed); straggler_part's two traps name the operators' median and swing and where rank 0
    spends the delay (#175, #176, #178). The parts as in test_straggler_part_and_outside_ops_excess_from_the_raw_events."""
    raw = _budget_raw("ranks_straggler")
    steps = sorted({s for _, s in raw})
    d = {k: [raw[1, s][i] - raw[0, s][i] for s in steps] for k, i in
         (("step", 0), ("ops", 1), ("blocked", 2), ("outside", 3), ("in_coll", 4))}
    m = {k: statistics.median(v) for k, v in d.items()}
    # between operators is the next question's answer (delay_excess_ms): left out (issue 40)
    assert ex["straggler_part"].explain.startswith(
        f"rank 1 against rank 0, median per step: {m['ops']:+,.0f} ms in operators, {m['blocked']:+,.0f} ms blocked "
        "in a collective, and the most between operators (how much, you work out from the step-budget table).")
    assert f"{m['outside']:,.0f}" not in ex["straggler_part"].explain
    swing = (max(d["ops"]) - min(d["ops"])) / 2
    q = ex["delay_excess_ms"]
    part = ex["straggler_part"]
    assert f"the operators differ by {m['ops']:+,.0f} ms (median), and swing by ±{swing:,.0f} ms" \
        in part.judge("operators").message.lower()
    assert "blocked in a collective is where rank 0 spends the delay: it waits for rank 1" \
        in part.judge("blocked in a collective").message.lower()
    assert q.explain == (
        f"per step {', '.join(f'{x:,.1f}' for x in d['outside'])} ms, median {m['outside']:,.1f} ms. It stands clear "
        f"of its own swing (±{(max(d['outside']) - min(d['outside'])) / 2:,.0f} ms); the operators' difference "
        f"({m['ops']:+,.0f} ms, ±{swing:,.0f} ms) does not, so it is left out.")
    all_coll = statistics.median(a - b for a, b in zip(d["step"], d["in_coll"]))
    runs = (statistics.median(v[0] for v in raw.values())
            - statistics.median(v[0] for v in _budget_raw("ranks_balanced").values()))
    compute = statistics.median(a + b for a, b in zip(d["ops"], d["outside"]))
    mean = statistics.mean(d["outside"])
    assert [t for t, _ in q.traps] == [round(all_coll, 1), round(runs, 1), round(mean, 1), round(compute, 1)]
    assert "subtracts all the time inside collectives" in q.judge(all_coll).message
    assert "compares this run's steps with the balanced run's" in q.judge(runs).message
    assert "mean over the steps" in q.judge(mean).message
    assert "whole compute difference" in q.judge(compute).message


def test_clock_offset_explained_with_the_moved_ends(ex):
    """The explanation's range is the verified calls' end differences from the raw kernels with
    rank 1's clock 5 ms ahead, |Δend + 5|: 4.81 to 5.33 ms (l12 exercise mutant #106: rank 0's
    clock moved instead, |Δend − 5|: 4.67 to 5.19 ms, not the figures of the shift the prompt names)."""
    c0, c1 = _nccl_calls(0), _nccl_calls(1)
    moved = [abs((b[4] - a[4]) / 1e3 + 5.0) for a in c0 for b in c1 if a[:2] == b[:2] and abs(b[4] - a[4]) <= 1000]
    assert len(moved) == 4
    assert f"the verified calls end {min(moved):,.2f} to {max(moved):,.2f} ms apart" in ex["clock_offset"].explain


def test_nccl_exposed_share_other_rank_trap_from_its_raw_kernels(ex):
    """Rank 1's exposed share in the same step (ProfilerStep#551), worked out from its raw
    kernels as rank 0's is above (0.799), typed to 3 decimals, is told "that is the other
    rank's share" (l12 exercise mutants #128, #129: the trap taken from rank 0 itself or from
    rank 1's next step; #134: exposed × communication. #135, the trap at 4 decimals, 0.7995,
    still meets 0.799 and is equivalent at the precision asked)."""
    share = _step551_exposed_share(1)
    q = ex["nccl_exposed_share"]
    assert "step 551" in q.prompt
    r = q.judge(round(share, 3))
    q.wrong_tries = 0
    assert not r.correct and "that is the other rank's share" in r.message.lower(), r.message
