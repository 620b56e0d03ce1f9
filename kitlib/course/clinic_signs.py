"""The clinic's signs (lesson 13): per cause a figure computed from any recording, and the rule
saying when it shows that cause. Lesson 13's feedback uses them: a learner naming the wrong
cause is told what its figure would be and what it is here. Which case holds which cause is
only in the answer key (:data:`kitlib.capture.clinic.CASES`).

Figures are per profiled step, from the trace (:class:`kitlib.model.trace.Trace`); an operator
counts inside a labelled range when it starts and ends in it; for two ranks, the largest.
``tests/test_clinic_signs.py`` recomputes them from the raw JSON."""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..readers.bundle import clinic_dir, open_capture
from ..readers.files import read_json_file
from ..readers.ranks import load_traces


def clinic_folder(device: str = "cpu") -> Path:
    """The shipped clinic set of ``device`` (``data/clinic/cpu``)."""
    return clinic_dir() / device


def index(device: str = "cpu") -> dict:
    """``clinic.json`` of the shipped set: per case its symptom, folders and ``ranks``."""
    return read_json_file(clinic_folder(device) / "clinic.json")


def healthy_name(letter: str, device: str = "cpu") -> str:
    """The folder of case ``letter``'s healthy run (``clinic.json``'s ``baselines``, else ``baseline``)."""
    idx = index(device)
    return (idx.get("baselines") or {}).get(f"case_{letter}", idx["baseline"])


def open_bundle(folder):
    """A clinic bundle: a Capture, or RankTraces for a two-rank folder."""
    folder = Path(folder)
    if (folder / "rank0").is_dir():
        return load_traces(folder)
    return open_capture(folder)


def traces(rec) -> list:
    """The Trace of each rank of a bundle (one for a Capture)."""
    if hasattr(rec, "traces"):
        return [rec.traces[r] for r in sorted(rec.traces)]
    return [rec.trace]


def step_times(rec) -> dict:
    """The bundle's ``step_times.json`` (rank 0's for two ranks), checked against the manifest.

    Raises BundleError: missing, unlisted or changed (issue 41); KitFileError: not JSON."""
    if hasattr(rec, "traces"):
        return open_capture(rec.source).read_json("rank0/step_times.json")
    return rec.step_times()


def ops_inside(ops: pd.DataFrame, ranges: pd.DataFrame) -> np.ndarray:
    """Bool per op of ``ops``: it starts and ends within one of ``ranges`` (``start_ns``, ``end_ns``;
    non-overlapping)."""
    if ranges.empty or ops.empty:
        return np.zeros(len(ops), dtype=bool)
    r = ranges.sort_values("start_ns")
    starts, ends = r["start_ns"].to_numpy("int64"), r["end_ns"].to_numpy("int64")
    s, e = ops["start_ns"].to_numpy("int64"), ops["end_ns"].to_numpy("int64")
    i = np.searchsorted(starts, s, side="right") - 1
    ok = i >= 0
    out = np.zeros(len(ops), dtype=bool)
    out[ok] = e[ok] <= ends[i[ok]]
    return out


#: CUDA runtime calls that make the host wait for the device.
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
#: CUDA runtime calls that take memory from the driver (the caching allocator missing).
ALLOC_CALLS = ("cudaMalloc", "cudaFree")


def trace_signs(tr) -> dict:
    """The per-step figures of one rank's trace: ``steps``, ``data_load_share``,
    ``ops_in_data_load_per_step``, ``contiguous_in_forward_per_step``, ``ops_in_optimizer_per_step``,
    ``isnan_per_step``, ``attribution_events_per_step``, ``python_events_per_step``,
    ``memory_records_per_step``, ``memory_net_bytes_each_step`` (bytes allocated minus freed, per
    step) and their median ``memory_net_bytes_per_step`` (None without memory records),
    ``images_per_step`` (the first convolution's batch), ``step_start_gap_ms`` (median, step start to
    ``data_load``), ``syncs_per_step``, ``pageable_copies_per_step``, ``cuda_allocs_per_step``."""
    ops = tr.ops
    steps = ops[ops["kind"] == "step"].sort_values("start_ns")
    n = len(steps)
    ann = ops[ops["kind"] == "annotation"]
    cpu = ops[ops["kind"] == "op"]
    rng = {k: ann[ann["name"] == k] for k in ("data_load", "forward", "optimizer")}
    conv = cpu[cpu["name"] == "aten::convolution"].sort_values("start_ns")
    dims = conv["input_dims"].iloc[0] if len(conv) else None
    images = int(dims[0][0]) if dims is not None and len(dims) and len(dims[0]) else None
    dl = rng["data_load"].sort_values("start_ns")
    gaps = []
    for s in steps["start_ns"]:
        after = dl.loc[dl["start_ns"] >= s, "start_ns"]
        if len(after):
            gaps.append(int(after.iloc[0]) - int(s))
    calls = tr.launches["name"] if len(tr.launches) else pd.Series([], dtype=str)
    copies = tr.gpu["name"] if len(tr.gpu) else pd.Series([], dtype=str)
    python = int((ops["kind"] == "python").sum())
    mem = tr.memory
    nets, records = [], 0
    for a, b in zip(steps["start_ns"], steps["end_ns"]):
        m = (mem["start_ns"] >= a) & (mem["start_ns"] <= b)
        nets.append(int(mem.loc[m, "bytes"].sum()))
        records += int(m.sum())
    return {
        "steps": n,
        "data_load_share": float(dl["dur_ns"].sum() / steps["dur_ns"].sum()),
        "ops_in_data_load_per_step": float(ops_inside(cpu, dl).sum() / n),
        "contiguous_in_forward_per_step": float(ops_inside(cpu[cpu["name"] == "aten::contiguous"],
                                                        rng["forward"]).sum() / n),
        "ops_in_optimizer_per_step": float(ops_inside(cpu, rng["optimizer"]).sum() / n),
        "isnan_per_step": float((cpu["name"] == "aten::isnan").sum() / n),
        "attribution_events_per_step": float((python + len(tr.memory)) / n),
        "python_events_per_step": float(python / n),
        "memory_records_per_step": float(records / n),
        "memory_net_bytes_per_step": float(statistics.median(nets)) if len(mem) else None,
        "memory_net_bytes_each_step": nets if len(mem) else None,
        "images_per_step": images,
        "step_start_gap_ms": float(statistics.median(gaps) / 1e6) if gaps else float("nan"),
        "syncs_per_step": float(calls.isin(SYNC_CALLS).sum() / n),
        "pageable_copies_per_step": float(copies.str.contains("Pageable", regex=False).sum() / n),
        "cuda_allocs_per_step": float(calls.isin(ALLOC_CALLS).sum() / n),
    }


def signs(rec) -> dict:
    """Every sign of a bundle: :func:`trace_signs` (largest over ranks), ``ranks``, ``median_step_ms``
    (uninstrumented), ``ms_per_image``, ``first_step_over_median`` and :func:`process_signs` (of the
    interleaved blocks for load and CPU share, where the steps were re-timed so)."""
    per = [trace_signs(t) for t in traces(rec)]
    out = {k: max(p[k] for p in per) if per[0][k] is not None else None for k in per[0]}
    out["memory_net_bytes_each_step"] = per[0]["memory_net_bytes_each_step"]
    out["images_per_step"] = per[0]["images_per_step"]
    st = step_times(rec)
    u = st["step_ms_uninstrumented"]
    med = statistics.median(u)
    out.update(ranks=len(per), median_step_ms=float(med),
               ms_per_image=float(med / out["images_per_step"]) if out["images_per_step"] else float("nan"),
               first_step_over_median=float(u[0] / med), **process_signs(st.get("process")))
    if st.get("process_interleaved"):       # the load and CPU share of the blocks the steps above come from
        inter = process_signs(st["process_interleaved"])
        out.update(load_per_core=inter["load_per_core"], cpu_over_wall=inter["cpu_over_wall"])
    return out


def process_signs(p: dict | None) -> dict:
    """From ``step_times.json``'s ``process``: ``rss_growth_bytes_per_step`` (RSS, last minus first
    timed step, per step), ``load_per_core`` (mean 1-minute load average over ``cpu_count``) and
    ``cpu_over_wall``; None each where not recorded."""
    p = p or {}
    rss = [v for v in p.get("rss_bytes_after_step") or [] if v is not None]
    load = [v for v in p.get("loadavg_1min") or [] if v is not None]
    return {"rss_growth_bytes_per_step": float((rss[-1] - rss[0]) / (len(rss) - 1)) if len(rss) >= 2 else None,
            "load_per_core": float(statistics.fmean(load) / p["cpu_count"]) if load and p.get("cpu_count") else None,
            "cpu_over_wall": float(p["process_cpu_s"] / p["wall_s"]) if p.get("wall_s") else None}


@dataclass(frozen=True)
class Cause:
    """A cause a learner may name: its words, fix, and sign: ``figure`` (a key of :func:`signs`),
    ``unit``, ``threshold``, ``would`` (the figure if this were the cause) and ``look`` (where to
    look, never naming the cause)."""

    id: str
    text: str
    fix: str
    figure: str
    unit: str
    would: str
    look: str
    threshold: float

    def shows(self, s: dict) -> bool:
        """Whether signs ``s`` show this cause."""
        v = s[self.figure]
        if self.id == "slow_transform":
            return v >= self.threshold and s["ops_in_data_load_per_step"] < 100
        if self.id == "tiny_batches":
            return v is not None and v <= self.threshold
        if self.id == "straggler_rank":
            return s["ranks"] >= 2 and v >= self.threshold
        if self.id == "busy_machine":      # the diagnosis left when the code shows no cause: a loaded machine
            return (v is not None and v >= self.threshold
                    and not any(c.shows(s) for c in CAUSES.values() if c.id != self.id))
        return v is not None and v >= self.threshold


#: The causes offered in the clinic, in the order the lists show them.
CAUSES = {c.id: c for c in [
    Cause("loader_in_main_process", "the training process makes its own batches (DataLoader num_workers=0)",
          "num_workers > 0, with persistent workers", "ops_in_data_load_per_step", "operators per step",
          "if the training process decoded and transformed the images itself, data_load would hold the "
          "transform's operators, hundreds per step", "Look at what runs inside data_load.", 100),
    Cause("slow_transform", "the loader's workers cannot keep up (a costly transform)",
          "a cheaper transform (crop without upscaling first)", "data_load_share", "of the step",
          "if the workers could not keep up, the training process would wait in data_load for most of each "
          "step, with no operators of its own in there",
          "Look at how much of each step goes to data_load, and at what runs inside it.", 0.65),
    Cause("channels_first_blocks", "a memory-layout mismatch: channels-first tensors inside a channels-last model",
          "keep every tensor channels_last (no plain .contiguous() between blocks)", "contiguous_in_forward_per_step",
          "aten::contiguous calls inside forward per step",
          "if tensors changed layout between the model's blocks, forward would copy them back and forth every "
          "step: aten::contiguous calls inside the forward range, block after block",
          "Look for work inside forward that the healthy run does not do there.", 0.5),
    Cause("profiler_overhead", "the profiler's own overhead (stacks and memory recorded)",
          "time steps without the profiler; profile with the lightest recipe that answers the question",
          "python_events_per_step", "Python-stack events per step",
          "if heavy attribution had been on, the trace would hold Python-stack events (with memory records)",
          "Look at which kinds of events the trace holds besides operators and labels.", 1),
    Cause("optimizer_per_tensor", "the optimizer's per-parameter loop (neither foreach nor fused)",
          "a fused (or foreach) optimizer", "ops_in_optimizer_per_step", "operators inside optimizer per step",
          "if the optimizer looped over its parameters one by one, the optimizer range would hold several "
          "operators per parameter tensor, hundreds per step",
          "Look at how many operators run inside the optimizer range.", 400),
    Cause("anomaly_detection", "a debugging check left on (autograd anomaly detection)",
          "turn anomaly detection off", "isnan_per_step", "aten::isnan calls per step",
          "if anomaly detection were on, every backward node's output would be checked: aten::isnan (with "
          "aten::any) calls every step", "Compare the operator names in key_averages with the healthy run's.", 1),
    Cause("tiny_batches", "batches too small: every operator's fixed cost outweighs its arithmetic",
          "a larger batch (or fewer, larger operators)", "images_per_step", "images per step",
          "if the batches were tiny, the convolutions' Input Dims would show a handful of images",
          "Look at the convolutions' Input Dims and at the time per image.", 4),
    Cause("straggler_rank", "one rank arrives late at every step (a straggler)",
          "remove, or spread over the ranks, the slow rank's extra work", "step_start_gap_ms",
          "ms from a step's start to its data_load (the slowest rank)",
          "if one rank did extra work each step, that rank's steps would open with a gap before data_load and "
          "the other rank would wait for it at the next collective",
          "Look at each rank's steps: what happens before data_load?", 20),
    Cause("sync_every_step", "a host–device sync every step (loss.item())", "read the loss every N steps",
          "syncs_per_step", "cudaStreamSynchronize-type calls per step",
          "if the host waited for the GPU every step, each step would hold a cudaStreamSynchronize (or a "
          "blocking device-to-host copy)", "", 1),
    Cause("pageable_blocking_copies", "pageable, blocking host-to-device copies",
          "pin_memory=True and non_blocking=True", "pageable_copies_per_step", "pageable copies per step",
          "if the batches were copied from pageable memory, the trace would hold Memcpy HtoD (Pageable) rows",
          "", 1),
    Cause("allocator_churn", "allocator churn: memory taken from the driver every step",
          "keep the caching allocator's blocks (no empty_cache in the loop; reuse buffers)",
          "cuda_allocs_per_step", "cudaMalloc/cudaFree calls per step",
          "if the allocator could not reuse its blocks, every step would call cudaMalloc and cudaFree", "", 1),
    Cause("cold_start", "one-time start-up costs inside the measured steps",
          "warm up before timing and leave the first steps out", "first_step_over_median",
          "first timed step over the median",
          "if start-up costs were inside the timed steps, the first ones would take several times the median "
          "and the rest would run at the healthy pace", "", 3),
    Cause("loss_kept_as_tensor", "memory kept alive from step to step (a running loss kept as a tensor)",
          "accumulate a number (total += loss.item()), not the loss tensor", "rss_growth_bytes_per_step",
          "bytes of RSS per step",
          "if every step's graph were kept alive, the process's resident memory (step_times.json's process "
          "entry) would grow by about the same amount every step, whatever the profiler's memory records say",
          "Look at the process's memory after each timed step, beside the step times.", 70e3),
    Cause("busy_machine", "nothing in the code: other processes shared the machine while this run was timed",
          "no code change: time the runs interleaved (ABBA), on a quiet machine", "load_per_core",
          "load average per core",
          "if the machine had been busy, the load average per core around the timed steps (step_times.json's "
          "process entry) would be above 1, and the operators, their counts and shapes would be the healthy "
          "run's: no other cause's sign",
          "Look at the machine's load beside the step times, and compare the operators, counts and shapes with "
          "the healthy run's.", 1.0),
]}

#: The cause list and the fix list, as the questions offer them. The fixes are listed in
#: alphabetical order, not the causes': in the same order, a case's fix sat at its cause's
#: position ("keep every tensor channels_last" third, as "a memory-layout mismatch"), so the
#: cause named gave the fix away (a learner's report, December 2026).
CAUSE_CHOICES = [c.text for c in CAUSES.values()]
FIX_CHOICES = sorted((c.fix for c in CAUSES.values()), key=str.lower)


def _cause_by(field: str, text) -> Cause | None:
    t = str(text).strip().lower()
    return next((c for c in CAUSES.values() if t in (getattr(c, field).lower(), c.id)), None)


def cause_of_text(text) -> Cause | None:
    """The cause whose words (or id) are ``text``, else None."""
    return _cause_by("text", text)


def fix_of_text(text) -> Cause | None:
    """The cause whose fix (or id) is ``text``, else None."""
    return _cause_by("fix", text)


def fmt(v, unit: str = "") -> str:
    """A sign's value as the feedback prints it."""
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return "none"
    if unit == "of the step":
        return f"{v:.3f} {unit}"
    if float(v).is_integer():
        return f"{int(v):,} {unit}".strip()
    return f"{v:,.3g} {unit}".strip() if abs(v) < 100 else f"{v:,.0f} {unit}".strip()


#: The signs read from ``step_times.json``'s ``process`` entry (:func:`process_signs`).
PROCESS_FIGURES = ("rss_growth_bytes_per_step", "load_per_core", "cpu_over_wall")


def not_this(cause: Cause, case: dict, healthy: dict, look: str = "") -> str:
    """The feedback for naming ``cause`` where ``case``'s signs do not show it: its figure here and
    in the ``healthy`` run, then ``look``."""
    unrecorded = "not recorded (step_times.json has no process entry: an older recording)"
    here, base = (unrecorded if v.get(cause.figure) is None and cause.figure in PROCESS_FIGURES
                  else fmt(v[cause.figure], cause.unit) for v in (case, healthy))
    extra = ""
    if cause.id == "slow_transform":
        ops = case["ops_in_data_load_per_step"]        # hundreds: another case's evidence, not this sign's figure
        extra = (", with hundreds of operators per step inside it" if ops >= 100 else
                 f", with {fmt(ops, 'operators per step')} inside it")
    if cause.id == "busy_machine" and (case[cause.figure] or 0) >= cause.threshold:
        extra = (" (the machine was busy, as on most days here; but this recording holds another cause's sign, "
                 "which a busy machine does not leave)")
    if cause.id == "straggler_rank" and case["ranks"] < 2:
        return f"{cause.would}. This job ran as {case['ranks']} rank: there is no other rank to wait. {look}".strip()
    if cause.id in ("sync_every_step", "pageable_blocking_copies", "allocator_churn") and case["syncs_per_step"] == 0 \
            and case["pageable_copies_per_step"] == 0 and case["cuda_allocs_per_step"] == 0:
        extra = " (this job ran on the CPU: its trace holds no CUDA calls at all)"
    return f"{cause.would}. Here it is {here}{extra}; in the healthy run {base}. {look}".strip()


def sign_table(recs: dict) -> pd.DataFrame:
    """One row per recording (``{name: bundle}``), one column per cause: its figure."""
    rows = {}
    for name, rec in recs.items():
        s = rec if isinstance(rec, dict) else signs(rec)
        rows[name] = {c.id: s[c.figure] for c in CAUSES.values()}
    return pd.DataFrame(rows).T


__all__ = ["CAUSES", "CAUSE_CHOICES", "FIX_CHOICES", "Cause", "cause_of_text", "clinic_folder", "complaint_check",
           "fix_of_text", "healthy_name", "index", "process_signs", "reader_counts", "not_this", "open_bundle", "sign_table", "signs", "step_times", "timing_conditions", "trace_signs", "traces"]


def fix_series(letter: str, device: str = "cpu", known: dict | None = None) -> dict:
    """Lesson 10's two series for case ``letter``: ``{before, after, measured, unit}``.

    Uninstrumented step times (rank 0's), per image where the fix changes the batch; where the
    sides differ only in what the profiler recorded, the heavy profile's active steps before
    against the uninstrumented steps after. ``known``: signs already computed, by side."""
    folder = clinic_folder(device) / f"case_{letter}"
    recs = {side: open_bundle(folder / side) for side in ("before", "after")}
    s = {side: (known or {}).get(side) or signs(r) for side, r in recs.items()}
    st = {side: step_times(r) for side, r in recs.items()}
    if s["before"]["python_events_per_step"] > 0 and s["after"]["python_events_per_step"] == 0:
        n = s["before"]["steps"]                               # the schedule's active steps, the last ones
        return {"before": st["before"]["step_ms_profiled"][-n:], "after": list(st["after"]["step_ms_uninstrumented"]),
                "measured": "heavy profile's active steps → uninstrumented steps", "unit": "ms"}
    b, a = (st[x]["step_ms_uninstrumented"] for x in ("before", "after"))
    ib, ia = s["before"]["images_per_step"], s["after"]["images_per_step"]
    if ib != ia:
        return {"before": [v / ib for v in b], "after": [v / ia for v in a],
                "measured": f"uninstrumented steps per image ({ib} → {ia} images)", "unit": "ms/image"}
    return {"before": list(b), "after": list(a), "measured": "uninstrumented steps", "unit": "ms"}


def same_position(letter: str, device: str = "cpu") -> bool:
    """Whether both sides of case ``letter`` timed the same warm-up and timed steps."""
    folder = clinic_folder(device) / f"case_{letter}"
    keys = ("pre_steps", "timing_steps")
    rec = [open_capture(folder / side).recipe for side in ("before", "after")]
    return all(rec[0].get(k) == rec[1].get(k) for k in keys)


#: Loads per core differing by more than this factor (not interleaved): the load can explain the difference.
LOAD_RATIO = 1.2


def timing_conditions(letter: str, device: str = "cpu") -> dict:
    """How case ``letter``'s two series were timed: ``interleaved`` (ABBA blocks), each side's
    ``load_per_core_before``/``_after`` (None where not recorded) and ``trust`` in words: yes when
    interleaved, else no where the loads differ by more than :data:`LOAD_RATIO`, else doubtful."""
    folder = clinic_folder(device) / f"case_{letter}"
    st = {side: step_times(open_bundle(folder / side)) for side in ("before", "after")}
    inter = all(str(v.get("uninstrumented_order", "")).startswith("interleaved") for v in st.values())
    load = {side: process_signs(v.get("process_interleaved") if inter else v.get("process"))["load_per_core"]
            for side, v in st.items()}
    b, a = load["before"], load["after"]
    if inter:
        trust = "yes: interleaved (ABBA blocks), the machine's load fell on both sides alike"
    elif b is None or a is None:
        trust = ("doubtful: not interleaved, load not recorded; only a difference far beyond the machine's own "
                 "swings between runs can be trusted")
    elif max(a, b) > LOAD_RATIO * min(a, b):
        trust = (f"no: not interleaved, and the machine was busier during the {'before' if b > a else 'after'} run "
                 f"(load {b:.2f} vs {a:.2f} per core): the difference can be the machine's")
    else:
        trust = f"doubtful: not interleaved (load {b:.2f} vs {a:.2f} per core)"
    return {"interleaved": inter, "load_per_core_before": b, "load_per_core_after": a, "trust": trust}


def fix_table(letters, device: str = "cpu") -> pd.DataFrame:
    """Lesson 10's comparison of each case's fix: one row per case (medians, difference, 95 %
    bootstrap interval, verdict, in ``unit``) with :func:`timing_conditions`."""
    from ..analyses.compare import compare
    rows = []
    for x in letters:
        f = fix_series(x, device)
        c = compare(f["before"], f["after"])
        rows.append({"case": f"case_{x}", "measured": f["measured"], "unit": f["unit"], "n_before": c.n_before,
                     "n_after": c.n_after, "before_median": c.before_median_ms, "after_median": c.after_median_ms,
                     "difference": c.difference_ms, "ci_low": c.ci_low_ms, "ci_high": c.ci_high_ms,
                     "same_position": same_position(x, device), "verdict": c.verdict,
                     **timing_conditions(x, device)})
    return pd.DataFrame(rows).set_index("case")


def plot_fixes(letters, device: str = "cpu", ax=None):
    """Each case's two series as dots relative to its *before* median, medians marked."""
    import matplotlib.pyplot as plt
    from ..plots import fig_size
    if ax is None:
        _, ax = plt.subplots(figsize=fig_size(11, 4))
    rng = np.random.default_rng(0)
    for i, x in enumerate(letters):
        f = fix_series(x, device)
        ref = statistics.median(f["before"])
        for j, (side, colour) in enumerate((("before", "#c0392b"), ("after", "#2471a3"))):
            v = np.asarray(f[side]) / ref
            pos = i + (j - 0.5) * 0.36
            ax.scatter(pos + rng.uniform(-0.07, 0.07, len(v)), v, s=9, color=colour, alpha=0.6,
                       label=side if i == 0 else None)
            ax.hlines(np.median(v), pos - 0.13, pos + 0.13, color="black", lw=2)
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    ax.set_xticks(range(len(letters)), [f"case_{x}" for x in letters])
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    ticks = [t for t in (0.1, 0.2, 0.5, 1, 2, 5, 10) if lo <= t <= hi]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))   # 0.5×, not 5×10⁻¹
    ax.yaxis.set_minor_locator(NullLocator())
    ax.axhline(1, color="0.6", lw=0.8, ls=":")
    ax.set_ylabel("step time / median before (log scale)")
    ax.set_title("each fix, measured: uninstrumented steps, per image where the batch changed; for the "
                 "profiler case,\nthe heavy profile's active steps (before) against the job's uninstrumented "
                 "steps (after)", fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0)   # beside the dots, not on them
    return ax


def complaint_check(letter: str, device: str = "cpu") -> str:
    """Whether case ``letter``'s complaint shows in its *before* step times, in sentences: its
    uninstrumented steps against its healthy run's (or, for a profiled complaint, its profiled
    steps against its own uninstrumented ones), and whether load and RSS were recorded. Names no
    cause and gives no figure an evidence question asks for."""
    from ..analyses.compare import compare
    folder = clinic_folder(device)
    rec = open_bundle(folder / f"case_{letter}" / "before")
    st = step_times(rec)
    u = st["step_ms_uninstrumented"]
    s = signs(rec)
    if s["python_events_per_step"] > 0:        # the complaint compares the profiled steps with the timing loop
        prof = st["step_ms_profiled"][-s["steps"]:]
        c = compare(u, prof)
        seen = "the complaint shows" if c.verdict == "slower" else "the complaint does not show beyond the noise"
        return (f"this bundle's own two timings: uninstrumented median {c.before_median_ms:,.1f} ms ({c.n_before} "
                f"steps), profiled active steps median {c.after_median_ms:,.1f} ms ({c.n_after} steps), "
                f"{c.after_median_ms / c.before_median_ms:.1f} times as long; interval of the difference "
                f"[{c.ci_low_ms:+,.2f}, {c.ci_high_ms:+,.2f}] ms: {seen}.")
    name = healthy_name(letter, device)
    hst = step_times(open_bundle(folder / name))
    hu = hst["step_ms_uninstrumented"]
    c = compare(hu, u)
    hload = process_signs(hst.get("process"))["load_per_core"]
    beside = ""
    if s["load_per_core"] is not None or hload is not None:     # where, not what: the load is evidence to read
        said = lambda v: "not recorded" if v is None else "recorded"  # noqa: E731
        beside = (f" The machine's load around the timed steps is {said(s['load_per_core'])} for this run and "
                  f"{said(hload)} for the healthy run (step_times.json's process entry; the two were not "
                  "timed interleaved).")
    rss = (st.get("process") or {}).get("rss_bytes_after_step") or []
    if len(rss) > 1:
        beside += (" The process's resident memory (RSS) after each of its timed steps is recorded beside them "
                   "(step_times.json's process entry).")
    who = "rank 0's steps" if s["ranks"] > 1 else "this job's steps"
    out = (f"uninstrumented step times: {who} median {c.after_median_ms:,.1f} ms ({c.n_after} steps), the healthy "
           f"run {name}/ {c.before_median_ms:,.1f} ms ({c.n_before} steps, timed at another moment); interval of "
           f"the difference [{c.ci_low_ms:+,.2f}, {c.ci_high_ms:+,.2f}] ms: ")
    if c.verdict == "slower":
        return out + "slower beyond the noise: the complaint shows in the step times." + beside
    if c.verdict == "faster":
        return out + ("faster per step beyond the noise: a complaint about time per step does not show here; "
                      "one about images per second depends on how many images a step carries.") + beside
    return out + ("no difference beyond the noise: on this machine the complaint is not visible in the step "
                  "times; the recording can still show its cause.") + beside


def reader_counts(letters, names, device: str = "cpu"):
    """Each *before* recording's calls of ``names``, as ``"events / kitlib / profiler"`` (raw
    ``cpu_op`` events, kitlib's after the profiler's fold, ``key_averages``), one row per case; and
    one folded event with its enclosing events."""
    from ..model.tree import ancestors
    rows, example = {}, None
    for x in letters:
        cap = open_bundle(clinic_folder(device) / f"case_{x}" / "before")
        prof = {r["key"]: r["count"] for r in cap.key_averages()["by_name"]}
        events = cap.trace.ops[cap.trace.ops["kind"] == "op"]["name"].value_counts()
        tree = cap.trace.host_events
        kept = tree[(tree["kind"] == "op") & ~tree["merged"]]["name"].value_counts()
        rows[f"case_{x}"] = {n: f"{int(events.get(n, 0))} / {int(kept.get(n, 0))} / {int(prof.get(n, 0))}"
                             for n in names}
        folded = tree[tree["merged"] & (tree["kind"] == "op")]
        if example is None and len(folded):
            i = int(folded.index[0])
            example = " inside ".join(tree.loc[[i] + list(ancestors(tree, i))[:3], "name"])
    return pd.DataFrame(rows).T, example
