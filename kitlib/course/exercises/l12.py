"""Lesson 12's questions (which rank is holding the others back?)."""
from __future__ import annotations

from . import Exercises, Question

FIX_CHOICES = ["fix the straggler", "faster communication"]
GROW_CHOICES = ["only the sleeping rank", "both ranks"]
CLOCK_CHOICES = ["all about 5 ms apart", "still within 1 ms", "apart by different amounts"]
#: The three parts of a step (stragglers.step_budget) the prediction ``straggler_part`` offers.
PART_CHOICES = ["operators", "between operators", "blocked in a collective"]
#: The clock difference the prediction ``clock_offset`` asks about (ms, rank 1 ahead).
CLOCK_SHIFT_MS = 5.0


def _fix_norm(s):
    s = str(s).strip().lower()
    return FIX_CHOICES[0] if "straggl" in s else FIX_CHOICES[1] if "comm" in s or "faster" in s else s


def excerpt_lateness(excerpt: dict, name: str = "gloo:all_reduce", k: int = 0) -> dict:
    """The lateness at the ``k``-th ``name`` call of a raw excerpt, from its events alone:
    ``last_rank``, ``late_ms`` (last rank's start minus first's, on absolute clocks), ``dur_diff_ms``,
    ``step_start_diff_ms`` and ``first_call_late_ms`` (at the excerpt's first collective)."""
    ranks, base = excerpt["ranks"], excerpt.get("base_ns", {})

    def start_us(e):
        return e["ts"] + base.get(ranks[e["pid"]], 0) / 1e3
    calls, steps, firsts = {}, {}, {}
    for e in excerpt["events"]:
        r = ranks[e["pid"]]
        if e["name"].startswith("ProfilerStep#"):
            steps[r] = start_us(e)
        else:
            firsts.setdefault(r, e)
            if e["name"] == name:
                calls.setdefault(r, []).append(e)
    at = {r: es[k] for r, es in calls.items() if len(es) > k}
    if len(at) < 2:
        raise ValueError(f"the excerpt holds call {k} of {name} on fewer than two ranks")
    order = sorted(at, key=lambda r: start_us(at[r]))
    first, last = at[order[0]], at[order[-1]]
    f_order = sorted(firsts, key=lambda r: start_us(firsts[r]))
    return {"last_rank": order[-1], "late_ms": (start_us(last) - start_us(first)) / 1e3,
            "dur_diff_ms": (first["dur"] - last["dur"]) / 1e3,
            "step_start_diff_ms": (max(steps.values()) - min(steps.values())) / 1e3,
            "first_call_late_ms": (start_us(firsts[f_order[-1]]) - start_us(firsts[f_order[0]])) / 1e3}


def excerpt_end_gap(excerpt: dict, name: str = "nccl:all_to_all") -> dict:
    """From a raw NCCL excerpt, each rank's first ``name`` call: ``end_gap_ms``, ``start_gap_ms`` (its
    kernels, by ``correlation``) and ``enqueue_gap_ms`` (the operators), absolute, ms.

    Raises ValueError: ``name`` on fewer than two ranks."""
    ranks = excerpt["ranks"]
    ev = excerpt["events"]
    first = {}
    for i, e in enumerate(ev):
        if e["name"] == name and ranks[e["pid"]] not in first:
            corr = ev[i + 1]["args"]["correlation"]
            kern = next(k for k in ev if k["cat"] == "kernel" and k["args"]["correlation"] == corr)
            first[ranks[e["pid"]]] = (e, kern)
    if len(first) < 2:
        raise ValueError(f"the excerpt holds {name} on fewer than two ranks")
    (o0, k0), (o1, k1) = first[min(first)], first[max(first)]
    return {"end_gap_ms": abs((k1["ts"] + k1["dur"]) - (k0["ts"] + k0["dur"])) / 1e3,
            "start_gap_ms": abs(k1["ts"] - k0["ts"]) / 1e3, "enqueue_gap_ms": abs(o1["ts"] - o0["ts"]) / 1e3}


def questions(straggler, nccl=None, injected_ms: float | None = None, balanced=None) -> Exercises:
    """Questions of lesson 12 from ``straggler`` (RankTraces); ``nccl`` adds the overlap question;
    ``injected_ms`` (the manifest's delay) is a known wrong answer; ``balanced`` default
    ``ranks_balanced`` in use."""
    from ...analyses.collectives import (collective_matches, collectives, comm_overlap, exposed_communication,
                                         rank_summary, straggler_by_step, straggler_summary)
    from ..raw_views import collective_excerpt, nccl_call_excerpt
    if balanced is None:
        from ..ranks import recordings
        balanced = recordings(live=False)["balanced"]
    calls = collectives(straggler)               # once per run, handed to every table below
    calls_b = collectives(balanced)
    s = straggler_summary(straggler, calls)
    by_step = straggler_by_step(straggler, calls)
    slow = s["rank"]
    summ = rank_summary(straggler, calls)
    fast = next(r for r in summ.index if r != slow)
    row = summ.loc[fast]
    share = float(row["wait_share"])
    before = rank_summary(balanced, calls_b)
    grew = float(summ.loc[fast, "step_ms"] - before.loc[fast, "step_ms"]) if fast in before.index else 0.0
    delay = injected_ms or 0.0
    grows = GROW_CHOICES[1] if delay and grew >= delay / 2 else GROW_CHOICES[0]
    qs = [Question("both_ranks_slower", f"Recall lesson 10's fix: in the straggler run, rank {slow} sleeps "
                                        f"{delay:,.0f} ms at the start of every step. Whose steps grow, against "
                                        f"the same job without the sleep: '{GROW_CHOICES[0]}' or "
                                        f"'{GROW_CHOICES[1]}'?", grows,
                   f"rank {fast}, which does not sleep, went from {before.loc[fast, 'step_ms']:,.0f} ms to "
                   f"{summ.loc[fast, 'step_ms']:,.0f} ms per step (median): a collective finishes only when every "
                   f"rank has joined it, so rank {fast} spends the sleep waiting inside one.",
                   kind="recall", choices=GROW_CHOICES,
                   traps=[(GROW_CHOICES[0], f"rank {fast} does not sleep, but it cannot finish a collective before "
                                            f"rank {slow} joins it.")]),
          Question("straggler_rank", "In the straggler recording, which rank did the others wait for? (a rank "
                                     "number)", slow,
                   f"rank {slow} was the last to arrive at the longest wait of {s['steps_last']} of {s['steps']} "
                   f"steps, and last at {s['last_share']:.0%} of the {s['calls']} collectives inside steps.",
                   kind="compute", where="the straggler table's last_rank column, at each step's largest late_by_ns",
                   tolerance=0, traps=[(fast, f"rank {fast} is the one that waits: its collectives are long "
                                             "because they include waiting for the slow rank.")]),
          Question("late_ms", "Median over the steps: by how many ms was the straggler late at the collective "
                              "where the others waited longest in that step? (from the traces: "
                              "coll.straggler_table(slow), per step its largest late_by_ns, then the median)",
                   round(s["late_by_ms_median"], 1),
                   f"median of the steps' largest lateness = {s['late_by_ms_median']:,.1f} ms "
                   "(straggler_by_step). It includes what the slow rank did between its delay and the collective, "
                   "and the two ranks' timing noise, so it is an estimate of the delay, not the delay itself.",
                   kind="compute", unit="ms", where="coll.straggler_table(slow): late_by_ns per call, with its step",
                   traps=([(injected_ms, "that is the delay the workload was told to inject (the manifest); the "
                                         "question asks what the traces show.")] if injected_ms else [])
                   + [(round(float(by_step["late_by_ns"].mean()) / 1e6, 1), "that is the mean over the steps; "
                                                                              "the question asks for the median.")]),
          Question("fast_rank_wait_share", f"In the straggler recording, what share of rank {fast}'s time in "
                                           "collectives was waiting for the last rank? (0–1)", round(share, 2),
                   f"rank {fast}: waiting {row['wait_ms']:,.1f} ms and transfer {row['transfer_ms']:,.1f} ms per "
                   f"step, so {share:.0%} of its collective time is waiting (an estimate from start times).",
                   kind="compute", where=f"the step-time table, rank {fast} of the straggler run: wait_ms and "
                                         "in_collectives_ms", tolerance=0.02,
                   tolerance_why="the answer is given to two decimals, as estimates from start times deserve; "
                                 "2 % accepts it worked out to three",
                   traps=[(round(1 - share, 2), "that is the transfer's share; the question asks for the waiting."),
                          (round(float(row["wait_ms"] / row["step_ms"]), 2),
                           "that divides by the whole step; the question asks for a share of its time in "
                           "collectives.")]),
          Question("what_to_fix", f"Which would shorten rank {fast}'s steps more: 'fix the straggler' or "
                                  "'faster communication'?",
                   FIX_CHOICES[0] if share >= 0.5 else FIX_CHOICES[1],
                   f"{share:.0%} of rank {fast}'s collective time is waiting for rank {slow}; a faster network "
                   f"would only shorten the transfer part ({row['transfer_ms']:,.1f} ms per step).",
                   kind="compute", normalise=_fix_norm, choices=FIX_CHOICES,
                   traps=[(FIX_CHOICES[1], f"only the transfer part ({row['transfer_ms']:,.1f} ms per step) would "
                                           "shrink; the waiting stays until the straggler arrives sooner.")])]
    ex_raw = collective_excerpt(balanced)
    lat = excerpt_lateness(ex_raw)
    qs.append(Question("excerpt_late_ms", f"Transfer, by hand: in the raw excerpt of the balanced run "
                                          f"(ProfilerStep#{ex_raw['step']}), how many ms after the first rank did "
                                          "the last rank start the first gloo:all_reduce?", round(lat["late_ms"], 3),
                       f"rank {lat['last_rank']} started it {lat['late_ms']:,.3f} ms after the other rank (the two "
                       "traces share one baseTimeNanoseconds, so their ts compare directly). The early rank's "
                       f"all_reduce lasted {lat['dur_diff_ms']:,.3f} ms longer: the collective ends together on "
                       "both ranks, so its extra duration is the waiting.", kind="transfer", unit="ms",
                       where="the excerpt: the ts of each rank's first gloo:all_reduce (µs)",
                       traps=[(round(lat["step_start_diff_ms"], 3), "that is the difference of the ranks' "
                                                                    "ProfilerStep starts, not of the all_reduce's."),
                              (round(lat["first_call_late_ms"], 3), "that is the first gloo:broadcast; the "
                                                                   "question asks about the first all_reduce.")]))
    if nccl is not None:
        ov = comm_overlap(nccl)
        r0 = ov.index[0]
        frac = float(ov.loc[r0, "hidden_fraction"])
        qs.append(Question("nccl_hidden_fraction", f"In the public NCCL pair, what fraction of rank {r0}'s "
                                                   "communication-kernel time ran while a compute kernel ran too? "
                                                   "(0–1)", round(frac, 3),
                           f"{ov.loc[r0, 'hidden_ms']:,.1f} ms of {ov.loc[r0, 'comm_ms']:,.1f} ms = {frac:.1%} "
                           "(comm_overlap). The trace is subsampled, so this is an estimate, not a bound: a compute "
                           "kernel the sampling dropped would have hidden more, a dropped communication kernel can "
                           "move the fraction either way.", kind="compute",
                           where="the comm_overlap table, rank 0: hidden_ms and comm_ms",
                           traps=[(round(1 - frac, 3), "that is the exposed share, not the hidden one."),
                                  (round(float(ov.iloc[1]["hidden_fraction"]), 3), "that is rank 1's; the question "
                                                                                   "asks about rank 0.")]))
        gap = excerpt_end_gap(nccl_call_excerpt(nccl))
        qs.append(Question("end_gap_ms", "By hand, in the raw rows: follow each rank's first nccl:all_to_all to its "
                                         "kernel (the launch inside it has the kernel's correlation). How many ms "
                                         "apart do the two kernels end?", round(gap["end_gap_ms"], 3),
                           f"{gap['end_gap_ms']:,.3f} ms apart: one collective ends on every rank within a fraction "
                           "of a ms (the last rank's data completes it everywhere), so these are two different calls. "
                           "The sampling dropped different calls on each rank; pairing the k-th call of a name "
                           "would have paired these two.", kind="compute", unit="ms",
                           where="the raw rows: each kernel's ts + dur (µs), then the difference",
                           traps=[(round(gap["start_gap_ms"], 3), "that is the difference of the kernels' starts; "
                                                                  "the check compares their ends."),
                                  (round(gap["enqueue_gap_ms"], 3), "that compares the host operators' ts (the "
                                                                    "enqueue), not the kernels' ends.")]))
        from ..ranks import clock_shifted
        calls_n = collectives(nccl)
        ok = collective_matches(nccl, calls_n).query("verified")["call"]
        moved = collective_matches(clock_shifted(nccl, nccl.ranks[-1], CLOCK_SHIFT_MS))
        spread = moved[moved["call"].isin(set(ok))]["end_spread_ns"] / 1e6
        outcome = (CLOCK_CHOICES[0] if len(spread) and (abs(spread - CLOCK_SHIFT_MS) < 1).all() else
                   CLOCK_CHOICES[1] if len(spread) and (spread <= 1).all() else CLOCK_CHOICES[2])
        qs.append(Question("clock_offset", f"Predict: had rank {nccl.ranks[-1]}'s host clock read "
                                           f"{CLOCK_SHIFT_MS:g} ms ahead of rank {nccl.ranks[0]}'s, how would the "
                                           f"ends of the {len(ok)} verified calls compare: '{CLOCK_CHOICES[0]}', "
                                           f"'{CLOCK_CHOICES[1]}' or '{CLOCK_CHOICES[2]}'?", outcome,
                           f"with the clock moved, the verified calls end {spread.min():,.2f} to {spread.max():,.2f} "
                           "ms apart: the same offset at every call is the clocks' difference, not the calls'. "
                           "So the end check is also the clock check: on one host the offset is about 0; across "
                           "hosts it shows how far the clocks disagree, and every start-time comparison carries it.",
                           kind="predict", choices=CLOCK_CHOICES,
                           traps=[(CLOCK_CHOICES[1], "the calls still end together in real time, but the clocks "
                                                     "that stamp them now differ by the shift.")]))
        ex_n = exposed_communication(nccl, calls_n)
        r0 = ex_n["rank"].min()
        row = ex_n[ex_n["rank"] == r0].iloc[0]
        share_n = float(row["exposed_ms"] / row["comm_ms"])
        other = ex_n[ex_n["rank"] != r0].iloc[0]
        qs.append(Question("nccl_exposed_share", f"In the public NCCL pair, step {int(row['step'])}: what share of "
                                                 f"rank {r0}'s communication time had no compute kernel beside it "
                                                 "(exposed)? (0–1)", round(share_n, 3),
                           f"{row['exposed_ms']:,.1f} ms exposed of {row['comm_ms']:,.1f} ms = {share_n:.1%} "
                           "(exposed_communication). Of the exposed time, "
                           f"{row['exposed_unmatched_ms']:,.1f} ms are calls that could not be matched, so only "
                           f"{row['exposed_wait_ms']:,.1f} ms are known to be waiting for rank 1.",
                           kind="compute", where="the exposed table, that rank and step: exposed_ms and comm_ms",
                           traps=[(round(1 - share_n, 3), "that is the hidden share; the question asks for the "
                                                          "exposed one."),
                                  (round(float(other["exposed_ms"] / other["comm_ms"]), 3),
                                   "that is the other rank's share.")]))
    ex_g = exposed_communication(straggler, calls)
    steps = sorted(set(ex_g["step"]))
    step = steps[len(steps) // 2]
    g = ex_g[(ex_g["rank"] == fast) & (ex_g["step"] == step)].iloc[0]
    share_g = float(g["exposed_wait_ms"] / g["exposed_ms"]) if g["exposed_ms"] else 0.0
    qs.append(Question("gloo_exposed_wait_share", f"From the Gloo exposed table: in the kit's Gloo straggler run, step "
                                                   f"{step}, rank {fast}: what share of its exposed communication "
                                                   f"was waiting for rank {slow}? (0–1)", round(share_g, 3),
                       f"{g['exposed_wait_ms']:,.1f} ms waiting of {g['exposed_ms']:,.1f} ms exposed = "
                       f"{share_g:.1%}. On a CPU there are no kernels: 'beside compute' means the step's own thread "
                       "ran an operator while Gloo's worker thread ran the collective, which on two shared cores "
                       "may not have been at the same instant.",
                       kind="compute", where="the Gloo exposed table: exposed_wait_ms and exposed_ms",
                       traps=[(round(float(g["exposed_ms"] / g["comm_ms"]), 3), "that is the exposed share of all "
                                                                               "its communication."),
                              (round(1 - share_g, 3), "that is the transfer's share of the exposed time.")]))
    qs += _budget_questions(straggler, balanced, slow, fast, calls, calls_b)
    return Exercises("Lesson 12 — your turn", qs)


def _budget_questions(straggler, balanced, slow: int, fast: int, calls=None, calls_b=None) -> list:
    """The robust estimate's two questions (:func:`kitlib.analyses.stragglers.step_budget`):
    which part of the slow rank's step holds its delay (``straggler_part``, a prediction), and
    how much it is per step (``delay_excess_ms``, whose key and prompt name no part)."""
    from ...analyses.stragglers import step_budget
    b = step_budget(straggler, calls)
    full = b.groupby("step")["rank"].transform("nunique") == b["rank"].nunique()
    wide = b[full].pivot(index="step", columns="rank").astype("float64") / 1e6

    def excess(col):                    # the slow rank's value minus the other ranks' median, per step
        w = wide[col]
        return w[slow] - w.drop(columns=slow).median(axis=1)
    parts = {PART_CHOICES[0]: excess("ops_ns"), PART_CHOICES[1]: excess("outside_ops_ns"),
             PART_CHOICES[2]: excess("exposed_ns")}
    med = {k: float(v.median()) for k, v in parts.items()}
    where = max(med, key=med.get)
    ops = parts[PART_CHOICES[0]]
    swing = float(ops.max() - ops.min()) / 2
    out = parts[PART_CHOICES[1]]
    all_coll = excess("step_ns") - excess("in_collectives_ns")
    runs = float(b["step_ns"].median() - step_budget(balanced, calls_b)["step_ns"].median()) / 1e6
    compute = float((excess("step_ns") - excess("exposed_ns")).median())
    q_part = Question(
        "straggler_part", f"Predict: rank {slow}'s steps hold a delay that rank {fast}'s do not. Split every step "
                          f"into three parts; in which does rank {slow} spend more than rank {fast}, by the most "
                          f"(median over the steps): '{PART_CHOICES[0]}', '{PART_CHOICES[1]}' or "
                          f"'{PART_CHOICES[2]}'?", where,
        f"rank {slow} against rank {fast}, median per step: {med[PART_CHOICES[0]]:+,.0f} ms in operators, "
        f"{med[PART_CHOICES[2]]:+,.0f} ms blocked in a collective, and "
        f"{'the most' if where == PART_CHOICES[1] else 'more' if med[PART_CHOICES[1]] > 0 else 'less'} "
        "between operators (how much, you work out from the "
        "step-budget table). A time.sleep is no operator: the profiler records nothing on the thread while it "
        "sleeps, and the other rank spends the same time blocked in the next collective.",
        kind="predict", choices=PART_CHOICES,
        traps=[(c, t) for c, t in [
            (PART_CHOICES[0], f"the operators differ by {med[PART_CHOICES[0]]:+,.0f} ms (median), and swing by "
                              f"±{swing:,.0f} ms from step to step: the same work on a busy shared machine."),
            (PART_CHOICES[2], f"blocked in a collective is where rank {fast} spends the delay: it waits for "
                              f"rank {slow}.")] if c != where])
    q_ms = Question(
        "delay_excess_ms", f"From the step-budget table, in the part of the step that holds rank {slow}'s delay "
                           f"(the answer to straggler_part): per step, rank {slow}'s time in it minus rank "
                           f"{fast}'s; then the median over the steps. How many ms?",
        round(float(out.median()), 1),
        f"per step {', '.join(f'{x:,.1f}' for x in out)} ms, median {out.median():,.1f} ms. It stands clear of "
        f"its own swing (±{(out.max() - out.min()) / 2:,.0f} ms); the operators' difference "
        f"({med[PART_CHOICES[0]]:+,.0f} ms, ±{swing:,.0f} ms) does not, so it is left out.",
        # where: the first wrong try may come before the prediction, so it names no part
        kind="compute", unit="ms", where="the step-budget table: that part's *_ms column for each rank, step by step",
        traps=[(round(float(all_coll.median()), 1),
                "that subtracts all the time inside collectives; with Gloo most of it runs on a worker thread "
                "while backward goes on, so it is hidden, not lost: the rank that hides the most is charged."),
               (round(runs, 1), "that compares this run's steps with the balanced run's: it carries whatever the "
                                "machine did between and during the two runs (see the drift check)."),
               (round(float(out.mean()), 1), "that is the mean over the steps; the question asks for the median."),
               (round(compute, 1), f"that is the whole compute difference, operators included: their "
                                   f"±{swing:,.0f} ms swing makes it as much noise as delay.")])
    return [q_part, q_ms]
