"""Lesson 12's questions (which rank is holding the others back?)."""
from __future__ import annotations

from . import Exercises, Question

FIX_CHOICES = ["fix the straggler", "faster communication"]


def _fix_norm(s):
    s = str(s).strip().lower()
    return FIX_CHOICES[0] if "straggl" in s else FIX_CHOICES[1] if "comm" in s or "faster" in s else s


def questions(straggler, nccl=None, injected_ms: float | None = None) -> Exercises:
    """Questions of lesson 12, computed from the recordings in hand.

    Parameters
    ----------
    straggler : kitlib.readers.ranks.RankTraces
        The run with an injected straggler (``ranks_straggler`` in replay).
    nccl : RankTraces, optional
        A GPU run with NCCL kernels (the public pair): adds the overlap question.
    injected_ms : float, optional
        The delay the workload injected (from the manifest): a known wrong answer to
        the question that asks what the *traces* show.
    """
    from ...analyses.collectives import comm_overlap, rank_summary, straggler_summary
    s = straggler_summary(straggler)
    slow = s["rank"]
    summ = rank_summary(straggler)
    fast = next(r for r in summ.index if r != slow)
    row = summ.loc[fast]
    share = float(row["wait_share"])
    qs = [Question("straggler_rank", "In the straggler recording, which rank did the others wait for? (a rank "
                                     "number)", slow,
                   f"rank {slow} was the last to arrive at the longest wait of {s['steps_last']} of {s['steps']} "
                   f"steps, and last at {s['last_share']:.0%} of the {s['calls']} collectives inside steps.",
                   tolerance=0, traps=[(fast, f"rank {fast} is the one that waits: its collectives are long "
                                             "because they include waiting for the slow rank.")]),
          Question("late_ms", "Median over the steps: by how many ms was the straggler late at the collective "
                              "where the others waited longest in that step? (from the traces)",
                   round(s["late_by_ms_median"], 1),
                   f"median of the steps' largest lateness = {s['late_by_ms_median']:,.1f} ms "
                   "(straggler_by_step). It includes what the slow rank did between its delay and the collective, "
                   "and the two ranks' timing noise, so it is an estimate of the delay, not the delay itself.",
                   tolerance=0.03,
                   traps=[(injected_ms, "that is the delay the workload was told to inject (the manifest); the "
                                        "question asks what the traces show.")] if injected_ms else []),
          Question("fast_rank_wait_share", f"In the straggler recording, what share of rank {fast}'s time in "
                                           "collectives was waiting for the last rank? (0–1)", round(share, 2),
                   f"rank {fast}: waiting {row['wait_ms']:,.1f} ms and transfer {row['transfer_ms']:,.1f} ms per "
                   f"step, so {share:.0%} of its collective time is waiting (an estimate from start times).",
                   tolerance=0.05, traps=[(round(1 - share, 2), "that is the transfer's share; the question asks "
                                                                  "for the waiting.")]),
          Question("what_to_fix", f"Which would shorten rank {fast}'s steps more: 'fix the straggler' or "
                                  "'faster communication'?",
                   FIX_CHOICES[0] if share >= 0.5 else FIX_CHOICES[1],
                   f"{share:.0%} of rank {fast}'s collective time is waiting for rank {slow}; a faster network "
                   f"would only shorten the transfer part ({row['transfer_ms']:,.1f} ms per step).",
                   normalise=_fix_norm, choices=FIX_CHOICES)]
    if nccl is not None:
        ov = comm_overlap(nccl)
        r0 = ov.index[0]
        frac = float(ov.loc[r0, "hidden_fraction"])
        qs.append(Question("nccl_hidden_fraction", f"In the public NCCL pair, what fraction of rank {r0}'s "
                                                   "communication-kernel time ran while a compute kernel ran too? "
                                                   "(0–1)", round(frac, 3),
                           f"{ov.loc[r0, 'hidden_ms']:,.1f} ms of {ov.loc[r0, 'comm_ms']:,.1f} ms = {frac:.1%} "
                           "(comm_overlap). The trace is subsampled: any compute kernel the sampling removed could "
                           "only have hidden more, so read it as a lower bound.", tolerance=0.03,
                           traps=[(round(1 - frac, 3), "that is the exposed share, not the hidden one.")]))
    return Exercises("Lesson 12 — your turn", qs)
