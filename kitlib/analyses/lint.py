"""The known ways a torch.profiler recording misleads, found before anyone reads it.

Sources: docs/SOURCES.md#lint-module
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import KitError
from .intervals import per_window
from ..model import Trace
from ..model.sources import check_source
from ..model.tree import ancestors
from ..model.window import count_in

__all__ = ["Finding", "lint", "KERNEL_LAUNCH_PATTERN", "VIEWER_MAX_BYTES",
           "VIEWER_MAX_EVENTS"]

#: CUDA API calls that launch a kernel (runtime and driver).
KERNEL_LAUNCH_PATTERN = r"^(cudaLaunchKernel|cuLaunchKernel|cudaLaunchCooperativeKernel|cuLaunchCooperativeKernel)"

#: A trace above this many bytes is hard for a browser viewer (Perfetto, chrome://tracing).
VIEWER_MAX_BYTES = 300_000_000

#: ... or above this many events.
VIEWER_MAX_EVENTS = 2_000_000

_BACKWARD = r"(?i)backward"


@dataclass
class Finding:
    """One way a recording can mislead: a stable ``code``; a ``severity``, ``"error"`` (the trace
    cannot answer its question), ``"warning"`` (naive figures will be wrong) or ``"info"``;
    its ``meaning`` for the figures; the ``action`` to take; the ``evidence`` (counts, ns, bytes).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> f = lint(trace_from_json(tiny_profile_doc()))[0]
    >>> f.code, f.severity, sorted(f.evidence)
    ('gpu_annotations', 'warning', ['annotation_sum_ns', 'annotations', 'kernel_sum_ns'])
    """

    code: str
    severity: str
    meaning: str
    action: str
    evidence: dict = field(default_factory=dict)

    def __str__(self):
        ev = ", ".join(f"{k}={v:,}" if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else f"{k}={v}"
                       for k, v in self.evidence.items())
        return f"[{self.severity}] {self.code}: {self.meaning} → {self.action} ({ev})"


def _options(trace: Trace, recipe) -> dict:
    opts = {k: bool(v) for k, v in (trace.meta.get("profiler_options") or {}).items()}
    for k in ("record_shapes", "profile_memory", "with_stack", "with_flops"):
        if recipe and k in recipe and recipe[k] is not None:
            opts[k] = bool(recipe[k]) or opts.get(k, False)
    return opts


def _cuda_requested(trace: Trace, recipe) -> tuple[bool, str]:
    acts = [str(a).upper() for a in (recipe or {}).get("activities", []) or []]
    if any("CUDA" in a for a in acts):
        return True, "the recipe lists the CUDA activity"
    if trace.meta.get("devices"):
        return True, f"the trace lists {len(trace.meta['devices'])} GPU(s) in deviceProperties"
    if len(trace.launches):
        return True, f"the trace holds {len(trace.launches)} CUDA API calls"
    return False, "no CUDA activity requested, no GPU listed, no CUDA API call"


def lint(trace, recipe: dict | None = None, *, file_bytes: int | None = None,
         max_bytes: int = VIEWER_MAX_BYTES, max_events: int = VIEWER_MAX_EVENTS) -> list:
    """Check a torch.profiler trace (or Capture, which gives its recipe) for the known ways it can mislead.

    ``recipe`` is a manifest's ``recipe`` (options it lacks are read from the trace's
    ``profiler_options``); ``file_bytes`` the JSON a viewer parses (default the trace's
    uncompressed size); ``max_bytes``, ``max_events`` the thresholds of ``too_large_for_viewer``.
    Returns the :class:`Finding` list, in the module docstring's order; KitError for another type.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> lint(tiny_trace())
    []
    """
    if hasattr(trace, "manifest") and hasattr(trace, "file"):
        recipe = recipe if recipe is not None else trace.recipe
        trace = trace.trace
    check_source(trace, kinds=Trace, message="lint: expected a kitlib Trace or Capture, got {got}")
    out: list = []
    gpu = trace.gpu
    work = gpu[gpu["kind"] != "gpu_annotation"]
    wanted, why = _cuda_requested(trace, recipe)
    if work.empty:
        if wanted:
            out.append(Finding("no_gpu_events", "error",
                               f"the trace has no kernel, copy or set although CUDA was requested ({why}): "
                               "every device-time figure from it would be zero",
                               "check that the profiler's activities include ProfilerActivity.CUDA, that the "
                               "recorded steps ran on the GPU, and that CUPTI is usable (no other profiler "
                               "attached); then record again",
                               {"launches": int(len(trace.launches)), "gpus_listed": len(trace.meta.get("devices") or [])}))
        else:
            out.append(Finding("cpu_only", "info",
                               "a CPU-only recording: no GPU is listed and nothing ran on one, so it can "
                               "answer host-side questions only",
                               "for device time, record on a CUDA GPU with ProfilerActivity.CUDA",
                               {"cpu_events": int(len(trace.ops)), "gpu_events": 0}))
    out += _link_findings(trace, work)
    ann = gpu[gpu["kind"] == "gpu_annotation"]
    if len(ann):
        out.append(Finding("gpu_annotations", "warning",
                           "the trace holds gpu_user_annotation spans: record_function labels drawn on a GPU "
                           "stream. They are not work; summed with kernels they count the same device time twice",
                           "sum kernels, copies and sets only (kitlib's trace.kernels leaves the annotations out)",
                           {"annotations": int(len(ann)), "annotation_sum_ns": int(ann["dur_ns"].sum()),
                            "kernel_sum_ns": int(work.loc[work["kind"] == "kernel", "dur_ns"].sum())}))
    out += _step_findings(trace, gpu, work)
    out += _option_findings(trace, _options(trace, recipe))
    out += _tree_findings(trace)
    pageable = work[(work["kind"] == "memcpy") & work["name"].str.contains("Pageable", na=False)]
    if len(pageable):
        names = pageable["name"].value_counts()
        out.append(Finding("pageable_copies", "warning",
                           "copies use pageable host memory (" + "; ".join(f"{n} ×{c}" for n, c in names.items())
                           + "): such a copy cannot overlap with host work and moves slower than from "
                             "page-locked memory",
                           "use DataLoader(pin_memory=True) and .to(device, non_blocking=True) for inputs; keep "
                           "device-to-host reads (.item(), .cpu()) out of the step",
                           {"copies": int(len(pageable)), "bytes": int(pd.to_numeric(pageable["bytes"]).fillna(0).sum()),
                            "copy_sum_ns": int(pageable["dur_ns"].sum())}))
    size = file_bytes
    if size is None:        # what a viewer parses: the JSON text, not the gzip on disk
        size = trace.meta.get("json_bytes")
    if size is None:
        try:
            size = trace.path.stat().st_size
        except (OSError, AttributeError):
            size = 0
    n_events = int(trace.meta.get("n_events") or (len(trace.ops) + len(trace.launches) + len(gpu)
                                                 + len(trace.memory) + len(trace.other)))
    if size > max_bytes or n_events > max_events:
        out.append(Finding("too_large_for_viewer", "warning",
                           "the trace is too large for a browser viewer to open comfortably (Perfetto, "
                           "chrome://tracing): it may load slowly or not at all",
                           "record fewer active steps, drop with_stack/record_shapes/profile_memory for the "
                           "timeline view, or analyse the file with kitlib/pandas instead",
                           {"file_bytes": int(size), "events": n_events, "max_bytes": int(max_bytes),
                            "max_events": int(max_events)}))
    return out


def _launchers(trace: Trace, work: pd.DataFrame) -> pd.DataFrame:
    """The launches that start GPU work: calls matching :data:`KERNEL_LAUNCH_PATTERN`, and every call
    of an API that in this trace shares a correlation id with a GPU event (``cudaGraphLaunch`` …)."""
    la = trace.launches
    if la.empty:
        return la
    corr = set(work["correlation"].dropna())
    with_work = la["correlation"].isin(corr)
    names = set(la.loc[with_work, "name"])
    return la[la["name"].str.match(KERNEL_LAUNCH_PATTERN, na=False) | la["name"].isin(names)]


def _link_findings(trace: Trace, work: pd.DataFrame) -> list:
    out = []
    kl = _launchers(trace, work)
    if len(kl) and len(work):
        # GPU rows carry the device as pid: join on the correlation id alone (one process per trace)
        miss = kl[~kl["correlation"].isin(set(work["correlation"].dropna()))]
        if len(miss):
            end = int(work["end_ns"].max())
            late = int((miss["start_ns"] >= work["start_ns"].max() - 1).sum())
            out.append(Finding("launches_without_gpu", "warning",
                               "some kernel launches have no GPU event: their kernels ran after the recording "
                               "window closed or were not delivered by CUPTI, so device time is under-counted "
                               "for the operators that made them",
                               "synchronise (torch.cuda.synchronize) before the profiler's window ends, and keep "
                               "the last step out of comparisons",
                               {"kernel_launches": int(len(kl)), "without_gpu_event": int(len(miss)),
                                "after_last_gpu_start": late, "last_gpu_end_ns": end}))
    if len(work):
        from .chain import chain
        c = chain(trace)
        fell = c[c["link"] == "time_nesting"]
        if len(fell) and (c["link"] == "external_id").any():
            out.append(Finding("external_ids_fell_back", "info",
                               "some launches carry an external id that names an operator they do not lie "
                               "inside (on the same thread): the id was not evidence, so those GPU events were "
                               "linked to the operator around their launch instead",
                               "nothing to do: kitlib.chain checks every link; treat these operators' device "
                               "time with the usual care, and prefer a current torch, whose Kineto writes "
                               "sound external ids",
                               {"gpu_events": int(len(fell)), "linked_by_external_id": int((c["link"] == "external_id").sum())}))
        from .chain import impossible_gpu_events
        imp = impossible_gpu_events(trace, c)
        if len(imp):
            why = imp["reason"].value_counts()
            out.append(Finding("impossible_gpu_events", "error",
                               f"{len(imp)} GPU event(s) have times that cannot be real ("
                               + ", ".join(f"{r} ×{n}" for r, n in why.items())
                               + "): the trace is damaged or its clocks disagree, and these rows are not work",
                               "leave them out of counts and averages (kitlib.analyses.grouping does); if many, "
                               "record again",
                               {"gpu_events": int(len(imp)), **{str(r): int(n) for r, n in why.items()},
                                "gpu_sum_ns": int(imp["dur_ns"].sum())}))
        orphan = c[c["link"].isin(["launched_before_recording", "no_launch"])]
        if len(orphan):
            out.append(Finding("gpu_without_launches", "warning",
                               "some GPU events have no launch in the trace: they were launched before the "
                               "recording began (or the launch was lost), so no operator can be named for "
                               "them and they belong to an earlier step",
                               "leave them out of per-operator and per-step figures (kitlib marks them in "
                               "chain()['link']); synchronise before the profiler's window opens",
                               {"gpu_events": int(len(orphan)),
                                "launched_before_recording": int((orphan["link"] == "launched_before_recording").sum()),
                                "no_launch": int((orphan["link"] == "no_launch").sum()),
                                "gpu_sum_ns": int(orphan["gpu_dur_ns"].sum())}))
    return out


def _step_findings(trace: Trace, gpu: pd.DataFrame, work: pd.DataFrame) -> list:
    out = []
    steps = trace.steps
    if steps.empty or work.empty:
        return out
    ops = trace.ops[trace.ops["kind"] == "op"]
    la = trace.launches
    # a launch of GPU work is any call sharing a correlation id with a GPU event (cudaGraphLaunch too)
    kl = la[la["correlation"].isin(set(work["correlation"].dropna()))]
    s0, s1 = steps["start_ns"].to_numpy(), steps["end_ns"].to_numpy()
    op_t = np.sort(ops["start_ns"].to_numpy())
    k_t = np.sort(kl["start_ns"].to_numpy())
    n_ops = count_in(s0, s1, op_t, closed="left")          # [start, end): kitlib.model.window
    n_k = count_in(s0, s1, k_t, closed="left")
    win = steps[["start_ns", "end_ns"]].reset_index(drop=True)
    total = per_window(gpu[["start_ns", "end_ns", "dur_ns"]], win)["sum_dur_ns"].to_numpy()
    ann = per_window(gpu.loc[gpu["kind"] == "gpu_annotation", ["start_ns", "end_ns", "dur_ns"]], win)["sum_dur_ns"].to_numpy()
    empty, over = [], []
    for i, s in enumerate(steps.itertuples()):
        if n_ops[i] and not n_k[i]:
            empty.append((int(s.step), int(n_ops[i])))
        if s.dur_ns > 0 and total[i] > s.dur_ns:
            over.append((int(s.step), int(total[i]), int(s.dur_ns), int(ann[i])))
    if empty:
        out.append(Finding("step_without_kernels", "warning",
                           f"{len(empty)} step(s) ran operators but launched no GPU work (no CUDA call of the "
                           "step shares its correlation id with a GPU event): their work ran on the CPU, or the "
                           "GPU activity was not recorded",
                           "check the device of the model and the inputs, and that CUDA activity was recorded",
                           {"steps": [s for s, _ in empty], "operators": sum(n for _, n in empty)}))
    if over:
        worst = max(over, key=lambda o: o[1] / o[2])
        out.append(Finding("over_100_percent", "warning",
                           f"in {len(over)} step(s) the summed durations of the GPU rows exceed the step's wall "
                           "time (worst: step {0}, {1:.0%}): summed time is not busy time — overlapping streams "
                           "or gpu_user_annotation spans are counted twice".format(worst[0], worst[1] / worst[2]),
                           "measure device busy time as the union of kernel/copy/set intervals "
                           "(kitlib.analyses.intervals.busy_ns), never as a sum, and leave annotations out",
                           {"steps": [o[0] for o in over], "worst_step": worst[0], "worst_sum_ns": worst[1],
                            "worst_wall_ns": worst[2], "worst_annotation_ns": worst[3]}))
    return out


def _tree_findings(trace: Trace) -> list:
    """What the trace's own event tree had to assume (the Python-frame rule)."""
    n_py = int((trace.ops["kind"] == "python").sum())
    rule = trace.meta.get("python_frames_rule", "")
    if not n_py or not rule:
        return []
    children = bool(trace.meta.get("python_frames_are_children"))
    inferred = rule.startswith("inferred")
    return [Finding("python_frames_rule", "warning" if inferred else "info",
                    f"the trace holds {n_py:,} Python frames, and self times and self memory depend on whether "
                    f"the profiler counted them as children: kitlib applied "
                    f"{'the torch ≥ 2.12 rule (they are children)' if children else 'the torch ≤ 2.11 rule (they are not)'}"
                    f", {rule}. torch 2.12–2.13 also list the frames as rows of key_averages() (2.14 leaves them "
                    "out by default), and so does group_ops, by the same rule (include_python_functions)",
                    "open the trace through its bundle (kitlib.open_capture) so the manifest's torch version "
                    "decides, and compare with the profiler's own table of the same run" if inferred else
                    "nothing to do: the rule comes from the recording's own torch version",
                    {"python_frames": n_py, "frames_are_children": children, "inferred": inferred})]


def _option_findings(trace: Trace, opts: dict) -> list:
    out = []
    ops = trace.ops
    if opts.get("with_stack"):
        n_py = int((ops["kind"] == "python").sum())
        n_cs = int(ops["call_stack"].notna().sum()) if "call_stack" in ops else 0
        if n_py == 0 and n_cs == 0:
            out.append(Finding("missing_stacks", "warning",
                               "with_stack was on but the trace holds no Python frames or call stacks: no "
                               "operator can be traced back to a line of code",
                               "record again with with_stack=True on a torch whose Python tracer works "
                               "(and with experimental_config=_ExperimentalConfig(verbose=True) for stacks in "
                               "key_averages)", {"python_events": n_py, "call_stacks": n_cs}))
    if opts.get("with_flops"):
        from .flops import flops_by_event
        try:
            fl = flops_by_event(trace)
        except KitError as e:
            out.append(Finding("flops_unreadable", "warning",
                               f"with_flops was on but the FLOPs cannot be rebuilt from the recorded shapes ({e})",
                               "record again with record_shapes=True and with_flops=True, or count a step with "
                               "FlopCounterMode", {"operators": int((ops["kind"] == "op").sum())}))
            return out
        bwd = ops[(ops["kind"] == "op") & ops["name"].str.contains(_BACKWARD, na=False)]
        conv_b = int(bwd["name"].str.contains("convolution_backward", na=False).sum())
        # counted operators inside an autograd node (the linear layers' backward calls aten::mm)
        tree = trace.host_events
        bw_counted = 0
        if len(fl) and len(tree):
            is_op = (tree["source"] == "ops").to_numpy()
            pos_of = dict(zip(tree["row"].to_numpy()[is_op].tolist(), np.flatnonzero(is_op).tolist()))
            par, names = tree["parent"].to_numpy(), tree["name"].to_numpy()
            for r in fl.loc[fl["flops"] > 0, "row"].to_numpy():
                bw_counted += r in pos_of and any(isinstance(names[a], str) and "Backward" in names[a]
                                                  for a in ancestors(par, pos_of[r]))
        if conv_b:
            out.append(Finding("backward_flops_absent", "info",
                               "with_flops has formulas for a few operators only (conv2d, mm, addmm, bmm, "
                               "baddbmm, mul, add): a convolution's backward (aten::convolution_backward) "
                               f"counts 0 FLOPs, while {bw_counted} backward call(s) that reach aten::mm (the "
                               "linear layers' gradients) are counted; so the profiler's FLOP total is not the "
                               "training step's arithmetic (for convolutions, roughly a third of it)",
                               "count a whole step with torch.utils.flop_counter.FlopCounterMode "
                               "(kitlib.capture.experiments.flop_counter_step) before dividing by device time",
                               {"counted_calls": int(len(fl)), "counted_flops": int(fl["flops"].sum()),
                                "backward_calls_counted": int(bw_counted),
                                "convolution_backward_calls": conv_b}))
    return out

