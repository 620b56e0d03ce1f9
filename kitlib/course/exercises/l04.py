"""Lesson 04's questions."""
from __future__ import annotations

from . import Exercises, Question
from ...units import ns_to_ms


def questions(capture_or_captures) -> Exercises:
    """Questions of lesson 04 (why does the GPU sit idle before the first step?).

    Parameters
    ----------
    capture_or_captures : Capture or dict
        An Nsight Systems capture (with ``report.sqlite``), or a dict with ``"nsys"``
        (that capture) and optionally ``"timing"`` (a capture with ``step_times.json``
        holding ``step_ms_uninstrumented``).
    """
    from ...analyses.coldstart import batch_copies, data_load_ranges, gap_activity, step_time_stats
    from ...analyses.pinning import main_thread_waits, pin_thread_allocs, wakes_after_pinning
    from ..sources import B300
    caps = capture_or_captures if isinstance(capture_or_captures, dict) else {"nsys": capture_or_captures}
    rep = caps["nsys"].nsys
    dl = data_load_ranges(rep)
    first = dl.iloc[0]
    bc = batch_copies(rep)
    after = bc[bc["batch_end_after_range_ns"] > 0]
    act = gap_activity(rep, int(first["start_ns"]), int(first["end_ns"]))
    main = act[(act["tid"] == act["pid"]) & (act["source"] == "OS runtime")].iloc[0]
    b0 = bc.iloc[0]
    qs = [
        Question("first_data_load_ms", "In the Nsight Systems recording (nsys_8step), how long was the first step's "
                 "data_load NVTX range, in ms?",
                 round(ns_to_ms(first["dur_ns"]), 2),
                 f"{ns_to_ms(first['dur_ns']):,.2f} ms, against {ns_to_ms(dl['dur_ns'].iloc[1:].median()):,.3f} ms "
                 "(median) in the later steps: the workers were started and had to produce their first batches, "
                 "and the pin-memory thread had to page-lock each of them.",
                 traps=[(B300["first_data_load_ms"], "that is the B300 figure quoted from the source texts; the "
                                                     "question asks about the H200 recording nsys_8step.")]),
        Question("copy_after_range_step0", "In step 0, did the batch's host-to-device copy end after the data_load "
                                           "range closed? (yes/no)", bool(b0["batch_end_after_range_ns"] > 0),
                 f"copy end minus range end = {ns_to_ms(b0['batch_end_after_range_ns']):+,.3f} ms in step 0; in "
                 f"{len(after)} of {len(bc)} steps the copy ended after the range. A range's end is the host "
                 "leaving a block, not the end of the transfer it submitted."),
        Question("main_thread_wait", "Which OS-runtime call took most of the main thread's time during the "
                                     "first data_load?", main["call"],
                 f"{main['call']}: {ns_to_ms(main['in_window_ns']):,.1f} ms in {int(main['calls'])} calls. It says "
                 "the thread waited, not on what: the worker processes were not traced."),
    ]
    main_tid = int(rep.nvtx.loc[rep.nvtx["name"] == "data_load", "tid"].iloc[0])
    try:
        allocs = pin_thread_allocs(rep, int(first["start_ns"]), int(first["end_ns"]))
    except Exception:   # no pin-memory thread in this report (pin_memory=False)
        allocs = None
    if allocs is not None and len(allocs):
        share = allocs["dur_ns"].sum() / first["dur_ns"]
        qs.append(Question("pin_alloc_share", "What fraction of the first data_load range did the pin-memory "
                                              "thread spend inside cudaHostAlloc? (0–1)", round(float(share), 3),
                           f"{len(allocs)} calls, {ns_to_ms(allocs['dur_ns'].sum()):,.1f} ms of "
                           f"{ns_to_ms(first['dur_ns']):,.1f} ms = {share:.1%}, one after the other on one thread.",
                           tolerance=0.03))
        wakes = wakes_after_pinning(main_thread_waits(rep, int(first["start_ns"]), int(first["end_ns"]), main_tid),
                                    allocs)
        if len(wakes):
            qs.append(Question("batches_before_batch0", "How many pinned batches did the main thread receive and "
                                                        "put aside before batch 0 arrived?", len(wakes) - 1,
                               f"it woke {len(wakes)} times after the pin thread began, once per pinning cycle, and "
                               f"went on only after the last: {len(wakes) - 1} batches were pinned before batch 0. "
                               "Whether batch 0 reached the pin thread late or waited in its queue, the report "
                               "cannot say.", tolerance=0,
                               traps=[(len(wakes), "that counts batch 0 itself; the question asks how many came "
                                                   "before it.")]))
    if "timing" in caps:
        times = caps["timing"].step_times().get("step_ms_uninstrumented")
        if times:
            s = step_time_stats({"u": times}).loc["u"]
            qs.append(Question("median_step_ms", "What is the median of the uninstrumented step times, in ms?",
                               round(float(s["median_ms"]), 3),
                               f"median {s['median_ms']:,.3f} ms over {int(s['n'])} steps (p25–p75 "
                               f"{s['p25_ms']:,.1f}–{s['p75_ms']:,.1f} ms); the mean {s['mean_ms']:,.1f} ms is "
                               f"pulled up by one step of {s['max_ms']:,.1f} ms."))
    return Exercises("Lesson 04 — your turn", qs)
