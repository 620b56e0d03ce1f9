"""Lesson 10's questions (did my change make it faster?), computed from the reference
``profiler_5step`` (step times and trace) and lesson 12's two-rank runs as a before/after pair."""
from __future__ import annotations

import statistics

from .. import step_series
from . import Exercises, Question, misconception

VERDICTS = ["slower", "faster", "no difference beyond the noise"]
CAUSES = ["the profiler starting up", "the loader starting new workers", "the GPU warming up"]


def verdict_norm(s):
    s = str(s).strip().lower()
    return "no difference beyond the noise" if s.startswith("no") or "noise" in s else s


def questions(capture, series: dict | None = None, trace_capture=None, num_workers: int | None = None,
              batches_per_epoch: int | None = None, fix: dict | None = None) -> Exercises:
    """Questions of lesson 10 from the reference ``profiler_5step`` bundle (``series``: its step times;
    ``trace_capture``: the step table's, default ``capture``). ``num_workers`` and
    ``batches_per_epoch`` are accepted for compatibility; ``fix`` default :func:`fix_pair`."""
    from ...analyses.compare import compare
    from ...analyses.coldstart import loader_epoch_length
    from ...analyses.steps import step_measures
    series = series if series is not None and "step_ms_uninstrumented" in series else capture.step_times()
    tcap = trace_capture if trace_capture is not None else capture
    other = step_series.fix_pair(1) if fix is None else None     # the neighbouring row: rank 1
    fix = fix if fix is not None else step_series.fix_pair(0)
    per = loader_epoch_length(capture)
    before = step_series.batches_before_profiled(series)
    persistent = bool(capture.workload.get("persistent_workers"))
    cause = CAUSES[1] if before % per == 0 and not persistent else CAUSES[2]
    first = series["step_ms_profiled_all_attribution"][0]
    qs = [Question(
        "first_step_cause", "The profiled series starts with one step more than ten times longer than the "
                            "others. Lessons 00 and 04 met this step: which cause did they find?", cause,
        f"capture.py drew {before} batches from the loader before the profiled loop ({step_series.WARMUP_BATCHES} "
        f"warm-up, {len(series['step_ms_uninstrumented'])} timed, {step_series.FIXED_BATCHES} for the fixed batch), "
        f"and an epoch has {per}: the profiled loop's first step took batch {before % per} of epoch {before // per}. "
        f"With persistent_workers=False a new epoch forks the loader's {capture.workload['num_workers']} workers "
        f"again and waits for their first batch: that is the {first:,.1f} ms step. The profiler records nothing in "
        "its wait step, and its start-up runs inside p.step(), after the clock has stopped.",
        kind="recall", choices=CAUSES,
        traps=[(CAUSES[0], "the clock stops before p.step(), where the profiler starts up; in its wait step it "
                           "records nothing."),
               (CAUSES[2], "the GPU had just run the 20 timed steps before this one: it was warm.")])]

    table = step_series.by_batch(capture, series)
    same = table.dropna(subset=["uninstrumented_ms", "profiled_ms"])
    u_same, p_same = same["uninstrumented_ms"].tolist(), same["profiled_ms"].tolist()
    diff = statistics.median(p_same) - statistics.median(u_same)
    mean_diff = statistics.fmean(p_same) - statistics.fmean(u_same)
    steady = table.loc[~table["loader_warmup"], "uninstrumented_ms"].dropna().tolist()
    active = table.loc[table["profiler_step"] == "active", "profiled_ms"].tolist()
    unlike = statistics.median(active) - statistics.median(steady)
    batches = f"{same.index.min()}–{same.index.max()}"
    qs.append(Question(
        "same_batches_difference_ms", f"Like with like: take the batches of their epoch that both series timed "
                                      f"({batches}). Median profiled step minus median uninstrumented step over "
                                      "those batches, in ms (negative if the profiled steps were quicker)?",
        round(diff, 4),
        f"profiled median {statistics.median(p_same):,.2f} ms − uninstrumented median "
        f"{statistics.median(u_same):,.2f} ms = {diff:+,.2f} ms, over batches {batches} of each series' epoch, "
        "all in the loader's first round.", kind="compute", unit="ms",
        where="the table by batch of the epoch, columns uninstrumented_ms and profiled_ms, the rows with both",
        traps=[(round(-diff, 2), "the sign is reversed: the difference is profiled minus uninstrumented "
                                 "(after minus before)."),
               (round(mean_diff, 2), "that is the difference of the means; the question asks for medians."),
               (round(unlike, 2), "that compares the steady uninstrumented steps with the active profiled steps: "
                                  "different places in the loader's epoch, not the batches both series timed.")]))
    c_same = compare(u_same, p_same)
    qs.append(Question(
        "same_batches_verdict", f"Predict: over batches {batches}, are the profiled steps 'slower', 'faster' "
                                "or 'no difference beyond the noise' than the uninstrumented ones?",
        c_same.verdict, c_same.text + " The profiler does cost host time (the trace shows it below), but four "
                                      "steps a side in the loader's warm-up round, each side scattered over more "
                                      "than 10 ms, cannot show it.",
        kind="predict", normalise=verdict_norm, choices=VERDICTS,
        traps=[("slower", "the profiler does add host work, but is it visible above this spread? Four steps a "
                          "side, in the loader's warm-up round, scatter by more than 10 ms.")]))

    n_u, n_p = len(steady), len(active)
    floor = step_series.min_p_value(n_u, n_p)
    qs.append(Question(
        "min_p_4_vs_5", f"The unlike comparison ({n_u} steady uninstrumented steps against {n_p} active profiled "
                        "steps) printed a Mann-Whitney p. What is the smallest two-sided p this test can give "
                        f"with {n_u} and {n_p} values?", round(floor, 6),
        f"2 of the C({n_u + n_p}, {n_u}) = {2 / floor:,.0f} equally likely ways of placing the ranks are as "
        f"extreme as 'all above' or 'all below': p ≥ {floor:.4f}. The printed p is that floor: the most extreme "
        "arrangement possible, not strong evidence.", kind="compute",
        where="the count of ways to choose which ranks of the combined values belong to one side",
        traps=[(floor / 2, "that is one-sided; the test asks whether either side is larger (two-sided)."),
               (step_series.min_p_value(n_u, n_u), f"that is {n_u} against {n_u}; the profiled side has {n_p}."),
               (0.05, "that is the usual threshold, not what the test can reach.")]))

    sm = step_measures(tcap.trace)
    last = sm.iloc[-1]
    share = float(last["idle_ns"] / last["wall_ns"])
    from ...readers.bundle import open_capture
    fsm = step_measures(open_capture("fixed_batch").trace)
    flast = fsm.iloc[-1]
    f_share = float(flast["idle_ns"] / flast["wall_ns"])
    f_yes = f_share > 0.1
    qs.append(Question(
        "gpu_idle_over_tenth", "Predict, before the step tables: fixed_batch ran the same steps under the same "
                               "profiler settings (shapes, memory, stacks, FLOPs) and schedule, without the "
                               f"loader: one batch kept on the GPU. In its last active step (step "
                               f"{int(flast['step'])}), does the GPU sit idle for more than a tenth of the step's "
                               "wall time? (yes/no)", f_yes,
        f"{'yes' if f_yes else 'no'}: fixed_batch's step {int(flast['step'])} idles "
        f"{flast['idle_ns'] / 1e6:,.2f} ms of {flast['wall_ns'] / 1e6:,.2f} ms ({f_share:.0%}), while "
        f"profiler_5step's step {int(last['step'])}, under the same attribution with the loader, idles for "
        f"{'more' if share > 0.1 else 'no more'} than a tenth of its wall time (how much, you work out from its "
        f"row of the table), with data_load only {last['data_load_ns'] / 1e6:,.2f} ms. "
        + ("The profiler's recording alone did not make the host fall behind the GPU here. What else differs in "
           "profiler_5step is the loader: eight worker processes and a pin-memory thread share the CPU with the main "
           "thread, and each step adds the batch's copy and layout conversion. That the loader holds the host back "
           "is a hypothesis: a trace of profiler_5step's steady steps, after the loader's first round, would test it."
           if not f_yes and share > 0.1 else ""),
        kind="predict",
        traps=[(not f_yes, f"the steps of profiler_5step idle {sm['idle_ns'].min() / 1e6:,.1f}–"
                           f"{sm['idle_ns'].max() / 1e6:,.1f} ms (wall_ms minus device_busy_ms in lesson 00's "
                           "table), but that recording also ran the loader; the question is whether the "
                           "profiler alone leaves the GPU waiting.")]
        if not f_yes and share > 0.1 else []))
    qs.append(Question(
        "idle_share", f"In {tcap.name}'s step {int(last['step'])}, what fraction of the step's wall time was the "
                      "GPU idle? (0–1)",
        round(share, 4),
        f"idle {last['idle_ns'] / 1e6:,.2f} ms / wall {last['wall_ns'] / 1e6:,.2f} ms = {share:.3f}.",
        kind="compute", where="the step table, columns idle_ms and wall_ms",
        traps=[misconception("profiled_is_unprofiled", 0, "in a profiled step the host falls behind, and the "
                                                           "GPU waits."),
               (round(1 - share, 3), "that is the busy share; the question asks how much of the step the GPU "
                                     "was idle."),
               (round(float(last["idle_ns"] / last["device_busy_ns"]), 3), "that divides by the busy time; "
                                                                            "the question asks for a share of "
                                                                            "the wall time.")]))

    b, a = fix["before"], fix["after"]
    d = statistics.median(a) - statistics.median(b)
    traps = [(round(-d, 1), "the sign is reversed: after minus before, negative when the fix made it faster."),
             (round(statistics.fmean(a) - statistics.fmean(b), 1), "that is the difference of the means; the "
                                                                     "question asks for medians.")]
    if fix.get("removed_ms"):
        traps.append((-fix["removed_ms"], "that is the sleep the fix removed (the manifest); the question asks "
                                          "what the step times measured."))
    if other is not None:
        od = statistics.median(other["after"]) - statistics.median(other["before"])
        traps.append((round(od, 1), "that is the other rank's step times; the question asks about rank 0."))
    qs.append(Question(
        "fix_difference_ms", f"A fix, before and after (lesson 12's CPU runs, rank 0, the {len(a)} active steps "
                             "of each): median step after minus median step before, in ms?", round(d, 2),
        f"median {statistics.median(a):,.1f} ms after − {statistics.median(b):,.1f} ms before = {d:+,.1f} ms.",
        kind="compute", unit="ms", where="the two step_times.json files, the last three step_ms_profiled "
                                          "values of each (the schedule's active steps)", traps=traps))
    p_floor = step_series.min_p_value(len(b), len(a))
    qs.append(Question(
        "fix_rank_test_can_decide", f"With {len(b)} steps before and {len(a)} after, can a two-sided "
                                    "Mann-Whitney test ever reach p < 0.05? (yes/no)", p_floor < 0.05,
        f"its smallest p is 2 / C({len(a) + len(b)}, {len(b)}) = {p_floor:.2g}: even the most extreme outcome "
        "cannot pass 0.05. Measure more steps a side.", kind="transfer",
        traps=[(True, f"count the arrangements: with {len(b)} and {len(a)} values the most extreme one has "
                      f"p = {p_floor:.2g}.")]))
    qs += _diff_questions(capture)
    return Exercises("Lesson 10 — your turn", qs)


#: The kernel lesson 10 counts by hand in both traces before the diff confirms it.
DIFF_KERNEL = "max_pool_backward"


def _diff_questions(capture) -> list:
    """The trace diff's questions: one kernel by hand (``profiler_5step`` → ``fixed_batch``),
    then the same diff on the two Nsight Systems exports (transfer)."""
    from ...analyses.trace_diff import diff_summary, trace_diff
    from ...readers.bundle import open_capture
    after = open_capture("fixed_batch")
    d = trace_diff(capture.trace, after.trace)
    row = d[d["name"].str.contains(DIFF_KERNEL, regex=False)]
    change_us = int(row["device_change_ns"].sum()) / 1000
    from ..diff_rows import kernel_rows
    raw_after = kernel_rows(after, DIFF_KERNEL)
    all_after_us = sum(round(e["dur"] * 1000) for e in raw_after["kernels"]) / 1000
    before_us = int(row["before_device_ns"].sum()) / 1000
    per_call_us = (int(row["after_device_ns"].sum()) / int(row["after_count"].sum())
                   - int(row["before_device_ns"].sum()) / int(row["before_count"].sum())) / 1000
    n_after = int(row["after_count"].sum())
    qs = [Question(
        "maxpool_change_us", "By hand, from the raw rows of the two traces: how much more device time (µs) did the "
                             "max-pool backward kernel take after the change than before, over the kernels "
                             "launched in steps 2–6? (negative if less)", round(change_us, 3),
        f"before: the five kernels' dur add up to {before_us:,.3f} µs. After: the file holds "
        f"{len(raw_after['kernels'])} such kernels, but only {n_after} have a launch in the trace; the other "
        "was launched by the warm-up step, before the profiler's window opened, and belongs to no recorded "
        f"step. Those {n_after} add up to {before_us + change_us:,.3f} µs: {change_us:+,.3f} µs.",
        kind="compute", unit="µs",
        where="the kernels' dur in the raw rows, each kept only if a launch with its correlation id is listed",
        traps=[(round(all_after_us - before_us, 3),
                f"that counts all {len(raw_after['kernels'])} kernels of the fixed-batch file; one has no launch "
                "in the trace (its correlation id matches none): it was launched before the recording began."),
               (round(-change_us, 3), "the sign is reversed: after minus before."),
               (round(per_call_us, 3), "that is the change per call; the question asks for the five calls "
                                       "together.")])]

    before_n, after_n = open_capture("nsys_8step").nsys, open_capture("nsys_emit_nvtx").nsys
    dn = trace_diff(before_n, after_n)
    sn = diff_summary(dn)
    removed_ms = -int(sn.loc["removed", "device_change_ns"]) / 1e6
    steps = dn.attrs["steps"]
    copies_ms = -int(dn.loc[(dn["change"] == "removed") & (dn["kind"] == "memcpy"), "device_change_ns"].sum()) / 1e6
    h200 = -int(diff_summary(d).loc["removed", "device_change_ns"]) / 1e6
    qs.append(Question(
        "nsys_removed_ms", "Transfer: the same change was recorded with Nsight Systems too (nsys_8step reads "
                           "batches from the loader; nsys_emit_nvtx keeps one batch on the GPU). Diff their "
                           "kernels: how much device time (ms), over the steps both exports hold, did the "
                           "removed rows take?", round(removed_ms, 4),
        f"trace_diff on the two exports compares steps {', '.join(map(str, steps))} (the torch_step ranges both "
        f"hold); its removed rows are the host-to-device copies and one conversion kernel: {removed_ms:,.3f} ms "
        f"in {len(steps)} steps, {removed_ms / len(steps):,.2f} ms a step, as in the torch.profiler pair "
        f"({h200 / len(d.attrs['steps']):,.2f} ms a step). emit_nvtx adds ranges on the host, not kernels.",
        kind="transfer", unit="ms",
        where="diff_summary of trace_diff(report_before, report_after), the removed row's device_change_ns",
        traps=[(round(removed_ms / len(steps), 4), f"that is one step's; the question asks for the {len(steps)} "
                                                   "steps both exports hold."),
               (round(copies_ms, 4), "those are the copies alone; one kernel was removed with them."),
               (round(h200, 4), "that is the torch.profiler pair's (five steps); the question asks about the "
                                "Nsight exports.")]))
    return qs
