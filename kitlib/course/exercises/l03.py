"""Lesson 03's questions."""
from __future__ import annotations

from . import Exercises, Question
from ...units import ns_to_ms


def questions(capture_or_captures) -> Exercises:
    """Questions of lesson 03 (why does the GPU sit idle before the first step?).

    Parameters
    ----------
    capture_or_captures : Capture or dict
        An Nsight Systems capture (with ``report.sqlite``), or a dict with ``"nsys"``
        (that capture) and optionally ``"timing"`` (a capture with ``step_times.json``
        holding ``step_ms_uninstrumented``).
    """
    from ...analyses.coldstart import batch_copies, data_load_ranges, gap_activity, step_time_stats
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
                 "(median) in the later steps: the workers were started and had to produce their first batches."),
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
    if "timing" in caps:
        times = caps["timing"].step_times().get("step_ms_uninstrumented")
        if times:
            s = step_time_stats({"u": times}).loc["u"]
            qs.append(Question("median_step_ms", "What is the median of the uninstrumented step times, in ms?",
                               round(float(s["median_ms"]), 3),
                               f"median {s['median_ms']:,.3f} ms over {int(s['n'])} steps (p25–p75 "
                               f"{s['p25_ms']:,.1f}–{s['p75_ms']:,.1f} ms); the mean {s['mean_ms']:,.1f} ms is "
                               f"pulled up by one step of {s['max_ms']:,.1f} ms."))
    return Exercises("Lesson 03 — your turn", qs)
