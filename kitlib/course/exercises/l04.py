"""Lesson 04's questions (why does the GPU sit idle before the first step?), from torch.profiler
and wall-clock stamps; what Nsight Systems adds is lesson 09's."""
from __future__ import annotations

import math

from . import Exercises, Question

#: Orders of magnitude offered for the first ``data_load``'s ratio to the later ones.
ORDERS = ["10", "100", "1000", "10000", "100000"]

#: capture.py's use of one loader: warm-up steps, (uninstrumented steps,) the fixed batch, profiled steps.
WARMUP_STEPS, FIXED_BATCHES, PROFILED_STEPS = 3, 1, 7

#: The "what if" of the transfer question: a larger dataset of the same kind.
WHAT_IF_IMAGES = 2560

#: A public trace the lesson never prints (ResNet-50 on a V100, ``num_workers=0``; public-other/SOURCES.md).
PUBLIC_TRACE = "public-other/kineto_2021-06_resnet50_v100.json.gz"
#: The DataLoader's own annotation of each ``next()`` in a single-process loader.
LOADER_EVENT = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def public_trace_path():
    """The public trace's path among the kit's recordings (``data/reference/public-other``)."""
    from ...readers.bundle import reference_dir
    return reference_dir() / PUBLIC_TRACE


def loader_shares(path) -> list:
    """Per ``ProfilerStep#N`` of a raw trace, the share of the step in the DataLoader's ``__next__``
    annotations starting inside it (read from the raw JSON, as the learner does)."""
    from ...readers.files import read_trace_events
    ev = read_trace_events(path)    # the values json gives, as the learner's json.loads
    steps = sorted((e["ts"], e["dur"]) for e in ev
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))
    loads = [(e["ts"], e["dur"]) for e in ev if e.get("ph") == "X" and e.get("name") == LOADER_EVENT]
    return [sum(d for t, d in loads if s <= t < s + dur) / dur for s, dur in steps]


def _divisor_text(num_ms: float, den_ms: float, ratio: float) -> str:
    """``den_ms`` with the fewest decimals (4 to 6) for which the printed numerator over it gives
    ``ratio`` as printed (to the unit)."""
    for decimals in range(4, 7):
        text = f"{den_ms:,.{decimals}f}"
        if f"{round(num_ms, 3) / float(text.replace(',', '')):,.0f}" == f"{ratio:,.0f}":
            return text
    return text


def _order(x: float) -> str:
    """The power of ten nearest to ``x`` (on a log scale), as one of :data:`ORDERS`."""
    return str(10 ** min(max(round(math.log10(x)), 1), 5))


def _norm_order(s) -> str:
    """``"10,000×"``, ``"1e4"``, ``10000`` → ``"10000"`` (other text: as written)."""
    t = str(s).strip().lower().replace(",", "").replace("×", "").replace("x", "").replace(" ", "")
    try:
        v = float(t)
    except ValueError:
        return t
    return str(int(v)) if math.isfinite(v) and v == int(v) else t     # nan, inf: as written


def refork_step(images: int, batch: int, uninstrumented: int, drop_last: bool = True) -> int | None:
    """The profiled step (from 0) whose ``next()`` begins a new loader epoch (workers forked again)
    for ``images`` at ``batch`` a step, after ``WARMUP_STEPS + uninstrumented + FIXED_BATCHES``
    batches; None if none does."""
    per_epoch = images // batch if drop_last else -(-images // batch)
    first = WARMUP_STEPS + uninstrumented + FIXED_BATCHES
    for i in range(PROFILED_STEPS):
        b = first + i
        if b > 0 and b % per_epoch == 0:
            return i
    return None


def questions(capture_or_captures) -> Exercises:
    """Questions of lesson 04, from the cold-start capture, or ``{"cold": ..., "timing": ...}`` (a
    capture with ``step_times.json``); ``{"nsys": ...}`` (the key's old call) opens ``cold_start_8step``."""
    import numpy as np

    from ...analyses.coldstart import data_load_ranges, epoch_positions, loader_epoch_length
    caps = capture_or_captures if isinstance(capture_or_captures, dict) else {"cold": capture_or_captures}
    cold = caps.get("cold")
    if cold is None:
        from .. import replay_capture
        cold = replay_capture("cold_start_8step")
    dl = data_load_ranges(cold.trace)["dur_ns"].to_numpy(dtype=float)
    first, later = dl[0], dl[1:]
    ratio = first / float(np.median(later))
    qs = [
        Question("first_load_order",
                 "Predict, before the next cell: the first step's data_load range (cold_start_8step) is about how "
                 "many times as long as a typical later one (the median of the other seven)? Pick the nearest "
                 "power of ten.", _order(ratio),
                 f"nearer {int(_order(ratio)):,} than any other power of ten (you work out the exact ratio "
                 "below): the first next() waits for the workers to be forked, import, open "
                 "their files and decode a whole batch each, and for the pin-memory thread to page-lock it; "
                 "later, the batch is already waiting in the queue.",
                 kind="predict", choices=ORDERS, normalise=_norm_order),
        Question("first_load_ratio",
                 "From the data_load table: the first step's range divided by the median of the seven later "
                 "ones?", float(ratio),
                 f"{first / 1e6:,.3f} ms / {_divisor_text(first / 1e6, np.median(later) / 1e6, ratio)} ms = "
                 f"{ratio:,.0f}. The median, not the "
                 "mean, so that one odd later step does not set the yardstick.",
                 kind="compute", where="the data_load table: step 0's dur_ms over the median of steps 1–7's",
                 traps=[(float(first / later.mean()), "that divides by the mean of the later steps; the question "
                                                      "asks for the median."),
                        (float(first / later[0]), "that divides by step 1 alone; take the median of steps 1–7.")]),
    ]
    if "timing" in caps:
        timing = caps["timing"]
        times = timing.step_times().get("step_ms_uninstrumented")
        per_epoch = loader_epoch_length(timing)
        if times:
            pos = epoch_positions(WARMUP_STEPS, len(times), per_epoch)
            slow = pos.iloc[int(np.argmax(times))]
            qs.append(Question(
                "slowest_batch_in_epoch",
                "In the epoch-position table, which batch of its epoch (batch_in_epoch) did the slowest "
                "uninstrumented step consume?", int(slow["batch_in_epoch"]),
                f"batch {int(slow['batch_in_epoch'])} of epoch {int(slow['epoch'])}: not an epoch start, so not "
                "a worker restart; with 8 workers it is the first batch of the workers' second round.",
                kind="compute", where="the epoch-position table: the uninstrumented row with the largest step_ms",
                traps=[(0, "batch 0 starts an epoch, and no uninstrumented step did: look for the largest step_ms "
                           "among the uninstrumented rows.")]))
            w = timing.workload or {}
            batch = int(w.get("batch_size", 128))
            what_if = refork_step(WHAT_IF_IMAGES, batch, len(times), w.get("drop_last", True))
            now = refork_step(per_epoch * batch, batch, len(times))
            first_p = WARMUP_STEPS + len(times) + FIXED_BATCHES
            per_new = WHAT_IF_IMAGES // batch
            qs.append(Question(
                "refork_step_if_larger",
                f"What if the dataset had {WHAT_IF_IMAGES:,} images instead (same batch size, same script: "
                "3 warm-up steps, the timed uninstrumented steps, one batch for the fixed-batch timing, then 7 "
                "profiled steps, one loader throughout)? At which profiled step index (from 0) would the loader "
                "fork its workers again?", what_if,
                f"{WHAT_IF_IMAGES:,} / {batch} = {per_new} batches an epoch; the profiled series starts at batch "
                f"{first_p} of the loader, so batch {per_new * (first_p // per_new + 1)} (profiled step {what_if}) "
                f"begins epoch {first_p // per_new + 1}. In the recording ({per_epoch} an epoch) it was profiled "
                f"step {now}: the slow first profiled step.",
                kind="transfer", where="the recording script's order of steps (the epoch boundary section)",
                traps=[(now, f"that is the recorded case ({per_epoch} batches an epoch); redo the count with "
                             f"{per_new}."),
                       (what_if + 1 if what_if is not None else -1,
                        "one too many: either you counted from 1 (the index starts at 0) or you left out the batch "
                        "taken for the fixed-batch timing, which moves the loader on by one.")]))
    path = public_trace_path()
    if path is not None and path.exists():
        shares = loader_shares(path)
        med = float(np.median(shares)) * 100
        qs.append(Question(
            "public_loader_share",
            f"Transfer, on a public torch.profiler trace the lesson has not shown (ResNet-50 on a V100, "
            f"num_workers=0: {PUBLIC_TRACE}): in each ProfilerStep#N, what share of the step did the DataLoader's "
            f"own annotation ({LOADER_EVENT}) take? Give the median over the steps, in %.", med,
            f"{med:.1f} % (median of {len(shares)} steps, from {min(shares):.1%} to {max(shares):.1%}): with "
            "num_workers=0 the main process loads and decodes every batch itself, so the loader sits on the "
            "critical path of every step, not only the first. There are no workers to start, and nothing overlaps "
            "the loading either: workers (the reference recording has 8) take that time off the step.",
            kind="transfer", unit="%", where="the raw JSON's ProfilerStep#N events and the DataLoader events "
                                             "inside each",
            traps=[(float(np.mean(shares)) * 100, "that is the mean of the steps' shares; the question asks for "
                                                  "the median."),
                   (shares[0] * 100, "that is the first step alone; take the median over all the steps.")]))
    return Exercises("Lesson 04 — your turn", qs)
