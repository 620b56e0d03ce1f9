"""Lesson 13's questions (the clinic: what is slowing this job down?).

Per case of the shipped clinic set, in this order: the **route** (a tool of lesson 11 and a
view), the **cause** (:data:`kitlib.course.clinic_signs.CAUSES`), the **evidence** (a figure from
the *before* recording's raw rows, after the cause since it names the figure) and the **fix**.
A wrong cause's feedback is computed from the case's recording (:mod:`kitlib.course.clinic_signs`);
the causes come from :data:`kitlib.capture.clinic.CASES`. Two cases are read beside the trace
(route :data:`R_PROCESS`: RSS per step, load per core). Then the fixes (a prediction and two
comparisons, held until every cause is tried: :class:`Clinic`) and a transfer on the H200 reference.
"""
from __future__ import annotations

import statistics

import numpy as np

from ...analyses.intervals import union_arrays
from ...capture.clinic import CASES
from .. import clinic_signs as cs
from . import Exercises, Question, Verdict
from .l10 import VERDICTS, verdict_norm
from .l11 import TOOLS

#: The routes a learner picks from: a tool of lesson 11 (:data:`~kitlib.course.exercises.l11.TOOLS`) and a view.
R_NAME = "torch.profiler: key_averages by operator name"
R_SHAPE = "torch.profiler: key_averages by input shape (Input Dims)"
R_RANGES = "torch.profiler: the trace's labelled ranges and what runs inside them"
R_EVENTS = "torch.profiler: the kinds of events the trace holds (stacks, memory records)"
R_RANKS = "torch.profiler: one trace per rank on one time axis"
R_TIMER = "timer: repeated uninstrumented step times"
R_PROCESS = "timer: the process's memory (RSS) and the machine's load, recorded beside the step times"
R_NSYS = "nsight systems: threads, OS calls and GPU streams on one timeline"
R_NCU = "nsight compute: one kernel's sections"
ROUTE_CHOICES = [R_NAME, R_SHAPE, R_RANGES, R_EVENTS, R_RANKS, R_TIMER, R_PROCESS, R_NSYS, R_NCU]
assert all(r.split(":")[0] in TOOLS for r in ROUTE_CHOICES)

#: Per cause: the routes that show its evidence in the clinic's recordings, and what each
#: wrong route misses (besides :func:`_route_traps`' general ones).
ROUTES = {
    "channels_first_blocks": ((R_RANGES, R_NAME), {}),
    "straggler_rank": ((R_RANKS,), {R_RANGES: "one rank's own trace shows its steps, not that the other rank waits "
                                              "for it: put both ranks on one time axis (lesson 12)."}),
    "loader_in_main_process": ((R_RANGES,), {R_NAME: "the table by name lists operators, not where they ran; the "
                                                     "trace's ranges say which of them ran inside which label."}),
    "profiler_overhead": ((R_EVENTS, R_TIMER), {}),
    "optimizer_per_tensor": ((R_RANGES, R_NAME), {}),
    "anomaly_detection": ((R_NAME, R_RANGES), {}),
    "tiny_batches": ((R_SHAPE, R_TIMER), {}),
    "slow_transform": ((R_RANGES,), {R_NAME: "the table by name sums operators; the time the training process spent "
                                             "waiting holds none. The trace's ranges show it."}),
    "loss_kept_as_tensor": ((R_PROCESS,), {R_EVENTS: "the trace's memory records are the tensors the profiler sees: "
                                                     "here they net to zero in every step after the first. What "
                                                     "grows is outside them: ask the OS (the process's RSS)."}),
    "busy_machine": ((R_PROCESS,), {R_TIMER: "step times say this run is slower, not why: what did the machine do "
                                             "beside it?",
                                    R_NAME: "the table by name has the healthy run's operators and counts: that rules "
                                            "the code out; the slowness comes from outside the job."}),
}


def _route_traps(cause_id: str, ok) -> list:
    own = ROUTES[cause_id][1]
    general = {R_NCU: "the job ran on a CPU: there is no kernel to replay.",
               R_NSYS: "these recordings are torch.profiler's only (a CPU job); no Nsight Systems report was made.",
               R_TIMER: "step times say how slow, not why: they cannot tell one cause from another.",
               R_SHAPE: "every case ran the same shapes as its healthy counterpart except where the batch changed; "
                        "look for what differs.",
               R_RANKS: "this job ran as one process: there is one trace.",
               R_EVENTS: "this trace holds operators and labels only; look at what they show.",
               R_NAME: "the names alone do not show it here; look at where and when they ran.",
               R_PROCESS: "the cause of this job's slowness is in what its trace shows, not in the process's memory "
                          "or the machine's load.",
               R_RANGES: "that view does show where work ran; here it is not where the difference lies."}
    return [(r, own.get(r, general[r])) for r in ROUTE_CHOICES if r not in ok]


def _route_norm(s) -> str:
    return str(s).strip().lower()


#: The kit's labelled ranges of a step, in the order a step runs them.
LABELS = ("data_load", "h2d", "forward", "backward", "optimizer")


def per_label(tr, name: str) -> dict:
    """How many ``name`` operators of trace ``tr`` start and end inside each labelled range
    (:data:`LABELS`), and outside them all (``"outside the labels"``); zero counts left out."""
    ops = tr.ops
    cpu = ops[(ops["kind"] == "op") & (ops["name"] == name)]
    ann = ops[ops["kind"] == "annotation"]
    left = np.ones(len(cpu), dtype=bool)
    out = {}
    for lab in LABELS:
        m = cs.ops_inside(cpu, ann[ann["name"] == lab]) & left
        if m.sum():
            out[lab] = int(m.sum())
        left &= ~m
    if left.sum():
        out["outside the labels"] = int(left.sum())
    return out


def _said(counts: dict) -> str:
    return ", ".join(f"{v} in {k}" if k != "outside the labels" else f"{v} {k}" for k, v in counts.items())


def collective_ms(tr) -> dict:
    """Per ``gloo:`` collective of one rank's trace: the time (ms) covered by its ranges in
    each profiled step (their union: the Gloo threads overlap), and the labelled range
    (:data:`LABELS`) that holds most of them."""
    ops = tr.ops
    steps = ops[ops["kind"] == "step"].sort_values("start_ns")
    ann = ops[ops["kind"] == "annotation"]
    out = {}
    for name, g in ops[ops["name"].str.startswith("gloo:")].groupby("name"):
        per = []
        for a, b in zip(steps["start_ns"], steps["end_ns"]):
            u0, u1 = union_arrays(np.maximum(g["start_ns"].to_numpy(), a), np.minimum(g["end_ns"].to_numpy(), b))
            per.append(int((u1 - u0).sum()) / 1e6)
        where = {lab: int(cs.ops_inside(g, ann[ann["name"] == lab]).sum()) for lab in LABELS}
        out[name] = {"ms": per, "in": max(where, key=where.get) if any(where.values()) else "no labelled range"}
    return out


def _waits(w: dict, where: bool = False) -> str:
    """``collective_ms`` as words, the longest first: ``gloo:broadcast (in forward) 41.0–51.0 ms``."""
    order = sorted(w.items(), key=lambda kv: -max(kv[1]["ms"]))
    return ", ".join(f"{k}{' (in ' + v['in'] + ')' if where else ''} {min(v['ms']):,.1f}–{max(v['ms']):,.1f} ms"
                     for k, v in order)


def optimizer_ops(tr) -> dict:
    """The operators inside the optimizer ranges of ``tr``: ``all`` (count), ``called``
    (those the optimizer called itself, not nested in another operator) by name, ``tensors``
    (the ``aten::mul_`` calls there per step: one per parameter tensor in the per-tensor loop)
    and ``steps``."""
    ev = tr.host_events
    ops = tr.ops
    opt = ops[(ops["kind"] == "annotation") & (ops["name"] == "optimizer")]
    n = int((ops["kind"] == "step").sum())
    inside = ev[(ev["kind"] == "op") & cs.ops_inside(ev, opt)]
    parent_kind = ev["kind"].to_numpy()[inside["parent"].clip(lower=0).to_numpy()]
    called = inside[(inside["parent"] < 0) | (parent_kind != "op")]
    return {"all": len(inside), "called": called["name"].value_counts().to_dict(), "steps": n,
            "tensors": int((inside["name"] == "aten::mul_").sum()) // n}


def job_ops(tr) -> dict:
    """The job's own operators of trace ``tr``: per name, the ``cpu_op`` events that do not
    start and end inside a ``data_load`` range (where the loader's bookkeeping, a few
    ``aten::empty``/``aten::set_`` per batch received, varies with timing)."""
    ops = tr.ops
    cpu = ops[ops["kind"] == "op"]
    dl = ops[(ops["kind"] == "annotation") & (ops["name"] == "data_load")]
    return cpu[~cs.ops_inside(cpu, dl)]["name"].value_counts().to_dict()


def python_in_steps(tr) -> int:
    """The Python-stack events (``cat`` ``python_function``) that start and end inside a
    ProfilerStep range of ``tr``."""
    ops = tr.ops
    return int(cs.ops_inside(ops[ops["kind"] == "python"], ops[ops["kind"] == "step"]).sum())


def _evidence(letter: str, cause_id: str, s: dict, healthy: dict, others: dict, rec, hrec, hname: str) -> Question:
    key = f"case_{letter}_evidence"
    neighbour = lambda fig: [(v[fig], f"that is {n}'s figure, not this case's.") for n, v in others.items()  # noqa: E731
                             if v.get(fig) is not None and v[fig] != s[fig] and v[fig] != healthy.get(fig)][:1]
    n = s["steps"]
    if cause_id == "channels_first_blocks":
        ka = sum(r["count"] for r in rec.key_averages()["by_name"] if r["key"] == "aten::contiguous")
        ka_h = sum(r["count"] for r in hrec.key_averages()["by_name"] if r["key"] == "aten::contiguous")
        return Question(key, f"case_{letter}: how many aten::contiguous calls per profiled step run inside the "
                             "forward range?", s["contiguous_in_forward_per_step"],
                        f"{s['contiguous_in_forward_per_step'] * n:g} calls in {n} steps, inside forward: tensors "
                        "copied between layouts block after block (each with aten::clone and aten::copy_ under it; "
                        "the stacks or the blocks' order say which call makes them). key_averages counts "
                        f"{ka} in all, over every range: "
                        f"{_said(per_label(rec.trace, 'aten::contiguous'))}. The healthy run ({hname}/) has {ka_h}: "
                        f"{_said(per_label(hrec.trace, 'aten::contiguous'))}, "
                        + (f"{healthy['contiguous_in_forward_per_step'] * n:g} inside forward." if
                           healthy["contiguous_in_forward_per_step"] else "none inside forward."), kind="compute",
                        where="the trace's aten::contiguous events, kept when they start and end inside a forward range",
                        traps=[(ka / n, "that counts every aten::contiguous of a step (key_averages); the question "
                                        "asks for those inside forward."),
                               (s["contiguous_in_forward_per_step"] * n, f"that is all {n} steps together; per step."),
                               (healthy["contiguous_in_forward_per_step"], "that is the healthy run's figure.")])
    if cause_id == "straggler_rank":
        per = {r: cs.trace_signs(t)["step_start_gap_ms"] for r, t in zip(sorted(rec.traces), cs.traces(rec))}
        slow = max(per, key=per.get)
        fast = min(per, key=per.get)
        waits, waits_slow = (collective_ms(rec.traces[r]) for r in (fast, slow))
        return Question(key, f"case_{letter}: on the rank whose steps open latest, the median time (ms) from a "
                             "ProfilerStep's start to its data_load's start?", round(per[slow], 3),
                        f"rank {slow}: {per[slow]:,.2f} ms per step (median of {n}) before data_load even starts, "
                        f"with nothing labelled in it; rank {fast}: {per[fast]:,.3f} ms, the healthy run "
                        f"{healthy['step_start_gap_ms']:,.3f} ms. Rank {fast} waits for it at the collectives, "
                        f"per step: {_waits(waits, True)}; rank {slow}: {_waits(waits_slow)}.",
                        kind="compute", unit="ms", where="each rank's ProfilerStep#N and data_load events (ts, µs)",
                        traps=[(float(f"{per[fast]:.3g}"), f"that is rank {fast}'s: the other rank's steps open later."),
                               (float(f"{healthy['step_start_gap_ms']:.3g}"), "that is the healthy run's figure."),
                               (round(per[slow] * 1e3, 1), "that is in µs (the trace's unit); the question asks ms.")])
    if cause_id == "loader_in_main_process":
        v = s["ops_in_data_load_per_step"]
        return Question(key, f"case_{letter}: how many operators (cpu_op events) per profiled step run inside "
                             "data_load?", v,
                        f"{v * n:,.0f} in {n} steps: the transform's aten:: operators (ToTensor, Normalize) run in the "
                        f"training process, inside data_load. The healthy run has {healthy['ops_in_data_load_per_step']:.3g}"
                        " per step there (the loader's own bookkeeping): its workers do that work in other "
                        "processes, which this trace does not record.", kind="compute", tolerance=0.02,
                        tolerance_why="within 2 %: an operator at a range's very edge counts in or out by the "
                                      "containment rule",
                        where="the trace's cpu_op events that start and end inside a data_load range, per step",
                        traps=[(v * n, f"that is all {n} steps together; per step."),
                               (healthy["ops_in_data_load_per_step"], "that is the healthy run's figure.")])
    if cause_id == "profiler_overhead":
        allpy = sum(1 for k in rec.trace.ops["kind"] if k == "python")
        py = python_in_steps(rec.trace) / n
        return Question(key, f"case_{letter}: how many Python-stack events (cat python_function) start and end "
                             "inside a ProfilerStep range, per profiled step (their count over the ProfilerStep "
                             "count)?", round(py, 1),
                        f"{py * n:,.0f} inside the {n} steps, {py:,.1f} per step ({allpy:,} in the whole trace: "
                        f"{allpy - py * n:,.0f} fall outside the steps), and {len(rec.trace.memory):,} memory "
                        "records besides: the recording ran with Python stacks and memory on. The healthy run's "
                        f"trace ({hname}/) has none of either.", kind="compute",
                        where="the trace's events by cat (python_function) inside the ProfilerStep#N ranges, over "
                              "the ProfilerStep count",
                        traps=[(py * n, f"that is all {n} steps together; per step."),
                               (round(allpy / n, 1), "that counts the whole trace, the events outside the steps too; "
                                                     "the question asks for those inside a ProfilerStep range."),
                               (round(s["attribution_events_per_step"], 1), "that adds the memory records; the "
                                                                            "question asks for the Python events."),
                               (0, "count the events by their cat, not by name.")])
    if cause_id == "optimizer_per_tensor":
        v = s["ops_in_optimizer_per_step"]
        o = optimizer_ops(rec.trace)
        t = o["tensors"]
        called = sum(o["called"].values()) / n
        names = ", ".join(f"{k} × {c // (n * t)}" if c // (n * t) > 1 else k for k, c in o["called"].items())
        return Question(key, f"case_{letter}: how many operators (cpu_op events) per profiled step run inside the "
                             "optimizer range?", v,
                        f"{v * n:,.0f} in {n} steps: {v / t:g} per parameter tensor ({t} tensors: one aten::mul_ "
                        f"each per step), the optimizer's loop over its parameters; {called / t:g} of them the loop "
                        f"calls itself ({names}), the other {(v - called) / t:g} run beneath those. The healthy run "
                        f"({hname}/) has {healthy['ops_in_optimizer_per_step']:g} per step there.", kind="compute",
                        tolerance=0.02,
                        tolerance_why="within 2 %: an operator at a range's very edge counts in or out by the "
                                      "containment rule",
                        where="the trace's cpu_op events that start and end inside an optimizer range, per step",
                        traps=[(v * n, f"that is all {n} steps together; per step."),
                               (healthy["ops_in_optimizer_per_step"], "that is the healthy run's figure.")]
                        + neighbour("ops_in_optimizer_per_step"))
    if cause_id == "anomaly_detection":
        v = s["isnan_per_step"]
        return Question(key, f"case_{letter}: how many aten::isnan calls per profiled step?", v,
                        f"{v * n:g} in {n} steps, each with aten::any and aten::item beside it: one check per "
                        "backward node's output. The healthy run has none.", kind="compute",
                        where="key_averages by name (the aten::isnan row's count) over the ProfilerStep count",
                        traps=[(v * n, f"that is all {n} steps together; per step."),
                               (0, "look again: the operator names differ from the healthy run's.")])
    if cause_id == "tiny_batches":
        v = s["ms_per_image"]
        return Question(key, f"case_{letter}: the median uninstrumented step time per image, in ms (the images per "
                             "step from the convolutions' Input Dims)?", round(v, 4),
                        f"median {s['median_step_ms']:,.2f} ms per step / {s['images_per_step']} images = {v:,.3f} ms "
                        f"per image; the healthy run: {healthy['median_step_ms']:,.2f} ms / "
                        f"{healthy['images_per_step']} = {healthy['ms_per_image']:,.3f} ms.", kind="compute", unit="ms",
                        where="step_times.json (step_ms_uninstrumented, median) and the first aten::convolution's "
                              "Input Dims",
                        traps=[(round(s["median_step_ms"], 2), "that is per step; divide by the images in a step."),
                               (round(healthy["ms_per_image"], 4), "that is the healthy run's figure."),
                               (round(s["median_step_ms"] / healthy["images_per_step"], 4),
                                f"that divides by the healthy batch ({healthy['images_per_step']}); read this job's "
                                "batch from its Input Dims.")])
    if cause_id == "slow_transform":
        v = s["data_load_share"]
        return Question(key, f"case_{letter}: what share of the profiled steps' wall time is inside data_load? (0–1)",
                        round(v, 4),
                        f"{v:.3f} of the step, with only {s['ops_in_data_load_per_step']:.3g} operators per step "
                        "inside it: the training process waits for the workers. The healthy run: "
                        f"{healthy['data_load_share']:.3f}.", kind="compute", unit="share",
                        where="the data_load ranges' durations over the ProfilerStep ranges' durations",
                        traps=[(round(healthy["data_load_share"], 4), "that is the healthy run's figure."),
                               (round(1 - v, 4), "that is the share outside data_load.")]
                        + neighbour("data_load_share"))
    if cause_id == "loss_kept_as_tensor":
        v = s["rss_growth_bytes_per_step"]
        rss = cs.step_times(rec)["process"]["rss_bytes_after_step"]
        mem = rec.trace.memory
        net, per = s["memory_net_bytes_per_step"], s["memory_records_per_step"]
        each = ", ".join(f"{b:+,}" for b in s["memory_net_bytes_each_step"])
        hv = healthy.get("rss_growth_bytes_per_step")
        return Question(key, f"case_{letter}: by how many kB (1,000 bytes) does the training process's resident memory "
                             "(RSS) grow per timed step? (after the last step minus after the first, over the steps "
                             "between)", round(v / 1e3, 1),
                        f"{rss[0] / 1e6:,.1f} MB after the first of {len(rss)} timed steps, "
                        f"{rss[-1] / 1e6:,.1f} MB after the last: {v / 1e3:,.0f} kB per step, every step. The trace's {len(mem):,} [memory] records "
                        f"({per:,.0f} per profiled step) net, step by step, to {each} bytes (median {net:+,.0f}): "
                        "the first active step leaves its live tensors to the next (the profiler counts from zero), "
                        "then every step frees what it allocates; the fixed job's records are the same. What stays "
                        "lies outside the tensors the profiler sees: each step's autograd graph, "
                        "kept alive by the running total's history. The healthy run's RSS "
                        + (f"grows {hv / 1e3:,.0f} kB per step." if hv is not None else
                           f"was not recorded ({hname}/ is an older recording); the fixed job's is in "
                           f"case_{letter}/after."),
                        kind="compute", unit="kB", tolerance=0.02,
                        tolerance_why="within 2 %: RSS moves by whole pages (4 kB)",
                        where="step_times.json: process.rss_bytes_after_step, (last − first) / (steps − 1)",
                        traps=[(round((rss[-1] - rss[0]) / 1e3, 1), f"that is all {len(rss)} steps together; per step."),
                               (round(v, 1), "that is in bytes; the question asks kB (1,000 bytes)."),
                               (round(net / 1e3, 1), "that is what the profiler's memory records net per step: the "
                                                     "tensors it sees; the question asks the process's RSS.")])
    if cause_id == "busy_machine":
        p = cs.step_times(rec)["process"]
        v = s["load_per_core"]
        load = statistics.fmean(p["loadavg_1min"])
        mine, theirs = job_ops(rec.trace), job_ops(hrec.trace)
        differ = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        shapes = [{(x["key"], str(x.get("input_shapes"))) for x in r.key_averages().get("by_input_shape", [])}
                  for r in (rec, hrec)]
        same_shapes = shapes[0] == shapes[1]
        return Question(key, f"case_{letter}: the machine's 1-minute load average per core around this run's timed "
                             "steps? (the mean of the load averages recorded before and after them, over the cores)",
                        round(v, 2),
                        f"load average {load:,.2f} on {p['cpu_count']} cores: {v:,.2f} per core, more processes wanting "
                        "a core than there were cores; the training process ran on a core "
                        f"{p['process_cpu_s'] / p['wall_s']:.0%} of the timed steps' wall time. The code is the healthy run's ({hname}/): "
                        + (f"the same {len(mine)} operator names with the same counts outside data_load (inside "
                           "it, the loader's few aten::empty and aten::set_ calls vary with the batches that arrive "
                           "while the profiler records)" if not differ else
                           f"{len(differ)} operator names whose counts outside data_load differ "
                           f"({', '.join(differ[:4])})")
                        + (" and the same input shapes" if same_shapes else ", other input shapes")
                        + "; only the times differ. Timed at another moment than the healthy run, not interleaved "
                          "with it, the difference is the machine's.",
                        kind="compute", unit="per core", tolerance=0.005,
                        tolerance_why="within 0.5 %: the mean rounded to two decimals; one of the two load "
                                      "averages alone, over the cores, is not the mean",
                        where="step_times.json: process.loadavg_1min (mean) over process.cpu_count",
                        traps=[(round(load, 2), "that is the load average itself; per core: divide by the cores."),
                               *[(round(x / p["cpu_count"], 2), "that is one of the two load averages (before or "
                                                                 "after the timed steps) over the cores: take their "
                                                                 "mean first.")
                                 for x in p["loadavg_1min"] if abs(x - load) / load > 0.005],
                               (round(p["process_cpu_s"] / p["wall_s"], 2),
                                "that is the process's CPU time over the wall time; the question asks the load.")])
    raise KeyError(cause_id)


#: The mechanism a right cause's feedback states, where the answer key's sentence
#: (:data:`kitlib.capture.clinic.CASES`) says more than the recording shows; no figure of
#: the evidence question in it.
MECHANISM = {
    "straggler_rank": "rank 1 does unlabelled extra host work at the start of every step, so rank 0 waits for it "
                      "at the step's collectives",
    "tiny_batches": "the batches hold a handful of images: the step is a few hundred short operators whose fixed "
                    "per-call cost outweighs the arithmetic (on a GPU: launch-bound, idle between short kernels)",
    "optimizer_per_tensor": "SGD runs its per-parameter loop (foreach and fused off): several small operators per "
                            "parameter tensor every step, where the fused optimizer makes one call",
    "loss_kept_as_tensor": "the loop adds each step's loss to a running total kept as a tensor, whose autograd history "
                           "keeps every step's graph alive, outside the tensors the profiler records",
    "busy_machine": "nothing in the job: the code, operators, counts and shapes are the healthy run's; other "
                    "processes shared the machine's cores while this run was timed",
}


def case_questions(letter: str, rec, healthy: dict, others: dict, hrec=None, hname: str = "baseline",
                   signs: dict | None = None) -> list:
    """The four questions of case ``letter`` (its *before* bundle ``rec``, whose signs are
    ``signs`` when already computed; ``healthy`` the signs of its healthy run ``hrec``, the
    folder ``hname``)."""
    cause = cs.CAUSES[CASES[letter].cause_id]
    s = cs.signs(rec) if signs is None else signs
    ok_routes = ROUTES[cause.id][0]
    qs = [ListedChoices(f"case_{letter}_route", f"case_{letter}: which tool and view showed you what is wrong?",
                   ok_routes[0], f"{' or '.join(ok_routes)}. " + cause.look.replace("Look", "There you look", 1),
                   kind="recall", choices=ROUTE_CHOICES, normalise=_route_norm,
                   accept=lambda g, ok=ok_routes: _route_norm(g) in {_route_norm(r) for r in ok},
                   traps=_route_traps(cause.id, ok_routes))]
    wrong = [(c.text, cs.not_this(c, s, healthy, cause.look)) for c in cs.CAUSES.values() if c.id != cause.id]
    mech = MECHANISM.get(cause.id, CASES[letter].cause)
    qs.append(ListedChoices(f"case_{letter}_cause", f"case_{letter}: what is slowing this job down?", cause.text,
                       f"The cause: {mech}. The next question asks for the figure that shows it.",
                       kind="transfer", choices=cs.CAUSE_CHOICES, traps=wrong,
                       normalise=lambda g: (cs.cause_of_text(g).id if cs.cause_of_text(g) else str(g).strip().lower()),
                       offered=lambda g: cs.cause_of_text(g) is not None))
    qs.append(_evidence(letter, cause.id, s, healthy, others, rec, hrec, hname))
    wrong_fix = [(c.fix, f"that fixes '{c.text}', which this recording does not show ({c.unit}: "
                         f"{cs.fmt(s[c.figure])}). Fix what your evidence showed.")
                 for c in cs.CAUSES.values() if c.id != cause.id]
    qs.append(ListedChoices(f"case_{letter}_fix", f"case_{letter}: which change fixes it?", cause.fix,
                       f"{cause.fix}. In the job's own terms: {CASES[letter].fix}.", kind="recall",
                       choices=cs.FIX_CHOICES, traps=wrong_fix,
                       normalise=lambda g: (cs.fix_of_text(g).id if cs.fix_of_text(g) else str(g).strip().lower()),
                       offered=lambda g: cs.fix_of_text(g) is not None))
    return qs


class ListedChoices(Question):
    """A clinic question whose choices are a shared list (:data:`LIST_NAMES`): its lines name
    the list, which :meth:`Clinic.show` gives once; the form offers every choice."""

    def choices_text(self) -> str:
        name = LIST_NAMES.get(tuple(self.choices or ()))
        return f" (one of {name}: the form's drop-down lists them)" if name else super().choices_text()


def group(key: str) -> str:
    """The scorecard's group of a question: ``case_a``…, ``the fixes, measured`` or ``transfer``."""
    if key.startswith("case_") and key[6:7] == "_":
        return key[:6]
    return "transfer" if key.startswith("transfer") else "the fixes, measured"


def questions(capture=None, letters=None, reference=None) -> Exercises:
    """Questions of lesson 13 on cases ``letters`` (default: the shipped CPU set's), the transfer
    on ``reference`` (default ``profiler_5step``); ``capture`` is ignored (the kit's recordings)."""
    from ...analyses.compare import compare
    from ...readers.bundle import open_capture
    folder = cs.clinic_folder()
    idx = cs.index()
    letters = list(letters or [c.removeprefix("case_") for c in idx["cases"]])
    hnames = {x: cs.healthy_name(x) for x in letters}
    hrecs = {n: cs.open_bundle(folder / n) for n in sorted(set(hnames.values()))}
    hsig = {n: cs.signs(r) for n, r in hrecs.items()}
    recs = {x: cs.open_bundle(folder / idx["cases"][f"case_{x}"]["before"]) for x in letters}
    sig = {x: cs.signs(r) for x, r in recs.items()}
    qs = []
    for x in letters:
        others = {f"case_{y}": sig[y] for y in letters if y != x}
        n = hnames[x]
        qs += case_questions(x, recs[x], hsig[n], others, hrecs[n], n, signs=sig[x])

    by_cause = {CASES[x].cause_id: x for x in letters}

    def fix_of(x):      # cs.fix_series; its before side is recs[x] when clinic.json puts it in the usual folder
        same = idx["cases"][f"case_{x}"]["before"] == f"case_{x}/before"
        return cs.fix_series(x, known={"before": sig[x]} if same else None)

    g = by_cause.get("tiny_batches")
    if g:
        st = {side: cs.step_times(cs.open_bundle(folder / f"case_{g}" / side)) for side in ("before", "after")}
        b, a = st["before"]["step_ms_uninstrumented"], st["after"]["step_ms_uninstrumented"]
        c = compare(b, a)
        qs.append(Question(
            "fix_g_verdict", f"Predict: case_{g}'s fix made each batch larger. Compared per step (not per "
                                   "image), are the fixed job's uninstrumented steps 'slower', 'faster' or 'no "
                                   "difference beyond the noise'?", c.verdict,
            c.text + " A step of the fixed job carries more images, so it can take longer and still be the faster "
                     "job: compare per image when the batch changes.",
            kind="predict", normalise=verdict_norm, choices=VERDICTS,
            traps=[("faster", "per image it is; but each step now carries more images.")]))
    h = by_cause.get("slow_transform")
    if h:
        f = fix_of(h)
        d = statistics.median(f["after"]) - statistics.median(f["before"])
        qs.append(Question(
            "fix_difference_ms", f"case_{h}'s fix: median uninstrumented step after minus median before, in ms "
                                 "(negative if faster)?", round(d, 2),
            f"{statistics.median(f['after']):,.2f} − {statistics.median(f['before']):,.2f} = {d:+,.2f} ms, over "
            f"{len(f['before'])} and {len(f['after'])} steps timed at the same place of each run.",
            kind="compute", unit="ms", where="the two step_times.json files, step_ms_uninstrumented",
            traps=[(round(-d, 2), "the sign is reversed: after minus before."),
                   (round(statistics.fmean(f["after"]) - statistics.fmean(f["before"]), 2),
                    "that is the difference of the means; the question asks for medians.")]))
    a_ = by_cause.get("channels_first_blocks")
    if a_:
        f = fix_of(a_)
        c = compare(f["before"], f["after"])
        qs.append(Question(
            "fix_a_verdict", f"case_{a_}'s fix, from its two series of uninstrumented steps and lesson 10's "
                                  "comparison: 'slower', 'faster' or 'no difference beyond the noise'?", c.verdict,
            c.text + (" The cause is in the recording, and the fix removes it (the after trace has no aten::contiguous "
                      "inside forward); what these timings cannot show is by how much it helps: on a machine this "
                      "noisy, measure more steps, or on a quiet machine." if c.verdict != "faster" else ""),
            kind="compute", normalise=verdict_norm, choices=VERDICTS,
            where="compare(before, after): whether the interval of the difference includes 0",
            traps=[("faster", f"the medians moved by {c.difference_ms:+,.2f} ms, but is the interval "
                              f"[{c.ci_low_ms:,.2f}, {c.ci_high_ms:,.2f}] ms clear of 0?")]
            if c.verdict != "faster" else
            [("no difference beyond the noise", f"the interval of the difference is [{c.ci_low_ms:,.2f}, "
                                                f"{c.ci_high_ms:,.2f}] ms: does it hold 0?")]))

    ref = reference if reference is not None else open_capture("profiler_5step")
    copies = ref.trace.gpu
    copies = copies[copies["name"].str.startswith("Memcpy")]["name"].value_counts()
    pageable = bool(any("Pageable" in n for n in copies.index))
    shown = ", ".join(f"{k} × {v}" for k, v in copies.items())
    qs.append(Question(
        "transfer_pageable", f"Transfer: a GPU set would add the pageable-copy case. Apply its sign to the kit's "
                             f"GPU recording {ref.name} (kitlib.open_capture(\"{ref.name}\")): does it copy "
                             "batches from pageable memory? (yes/no)",
        pageable, f"its copies: {shown}. " + ("Pageable copies are there." if pageable else
                                              "Every host-to-device copy comes from pinned memory: the loader pins "
                                              "its batches, so this job does not have that cause."),
        kind="transfer", where="the trace's GPU memcpy events: each name says the memory kinds (Pageable or Pinned)",
        traps=[(not pageable, "read the copies' names: each says which memory it copied from.")]))
    return Clinic("Lesson 13 — your turn", qs)


class Clinic(Exercises):
    """Lesson 13's questions (all in ``questions``), listed as the lesson reaches them.

    A case's route, cause and fix show once :meth:`reach` opens it; its evidence once its cause
    is named right or revealed (:meth:`cause_settled`: the prompt names the figure, which points
    at the cause, so a wrong try does not open it). The fix questions wait for
    ``reach("fixes")`` and every cause tried or revealed (a fix names what it changed); until
    then ``check`` and ``reveal`` give a line (:class:`~kitlib.course.exercises.Verdict`'s
    ``later``) that gives way in place. The transfer waits for ``reach("transfer")``."""

    def __init__(self, title, questions):
        super().__init__(title, questions)
        self.reached: set = set()

    def reach(self, part: str) -> None:
        """Open ``part`` (``"case_a"`` or ``"a"``, ``"fixes"``, ``"transfer"``) to :meth:`show`."""
        self.reached.add(part if part in ("fixes", "transfer") or part.startswith("case_") else f"case_{part}")

    @staticmethod
    def _part(key: str) -> str:
        return "fixes" if group(key) == "the fixes, measured" else group(key)

    def cause_settled(self, part: str) -> bool:
        """Whether case ``part``'s cause (``"case_a"``) is named right or revealed: what its
        evidence question waits on (a wrong try, even a second one that shows the answer, does
        not open it: the learner then names the cause shown)."""
        q = self[f"{part}_cause"]
        return q.solved_after is not None or q.revealed

    def causes_open(self) -> list:
        """The keys of the cause questions neither tried nor revealed: what the fixes wait on."""
        return [q.key for q in self.questions if self._part(q.key) + "_cause" == q.key and not q.attempted()]

    def _fix_held(self, key: str, then, then_said: str = "This question's form then opens here.") -> Verdict | None:
        """For a fix question while a cause is open: a line naming the open causes that gives way
        to ``then()`` once none is; else None."""
        waiting = self.causes_open() if self._part(key) == "fixes" else []
        if not waiting:
            return None

        def show():
            from IPython.display import display
            display(then())
        return Verdict(key, None, "held back until you have tried every case's cause (right or wrong) or revealed "
                                  "it: a fix names what it changed, which would give away the cause of a case still "
                                  f"open. Still open: {', '.join(waiting)} (each in its form above, or with "
                                  f"ex.check(key, answer)). {then_said}", exercises=self,
                       later=(tuple(waiting), lambda: not self.causes_open(), show))

    def listed(self) -> list:
        """The questions reached so far, in the lesson's order."""
        out = []
        for q in self.questions:
            part = self._part(q.key)
            if part not in self.reached or (part == "fixes" and self.causes_open()):
                continue
            if q.key.endswith("_evidence") and not self.cause_settled(part):
                continue
            out.append(q)
        return out

    def check(self, key: str, answer):
        """As :meth:`Exercises.check`; an evidence question waits for its cause named right or
        revealed, a fix question for every cause tried (see the class), in a line that gives way to
        the judged form."""
        part = self._part(key)
        cause = f"{part}_cause"
        if key.endswith("_evidence") and not self.cause_settled(part):
            self[key]                                        # an unknown key still raises

            def show():
                from IPython.display import display
                display(self.check(key, answer))
            return Verdict(key, None, f"name the right cause first ({cause} above), or reveal it: this question "
                                      "is held back until that cause is answered right or revealed, as it names "
                                      "the figure to compute, and the figure points at the cause (a wrong try "
                                      "does not open it). Its form then opens here.", exercises=self,
                           later=((cause,), lambda: self.cause_settled(part), show))
        held = self._fix_held(key, lambda: self.check(key, answer))
        if held is not None:
            self[key]                                        # an unknown key still raises
            return held
        return super().check(key, answer)

    def reveal(self, key: str) -> Verdict:
        """As :meth:`Exercises.reveal`; a revealed cause counts as tried and opens its evidence; a fix
        question waits (see the class)."""
        self[key]                                            # an unknown key still raises
        held = self._fix_held(key, lambda: self.reveal(key), "Its answer then shows here.")
        if held is not None:
            return held
        return super().reveal(key)

    def show(self) -> str:
        """The questions reached so far, as :meth:`Exercises.show`, each shared choice list once."""
        from ...units import wrapped
        qs = self.listed()
        same = [q for q in qs if isinstance(q, ListedChoices)]      # alike in every case but its letter
        lines = [f"{self.title}:"]
        if same:
            lines.append(wrapped("  every case asks these (X its letter), then its evidence once its cause "
                                 "is named right or revealed:"))
            kinds = {}
            for q in same:
                kinds.setdefault(q.key[7:], q)
            lines += [wrapped(f"  - case_X_{part} [{q.kind}]: {q.prompt.split(': ', 1)[-1]}{q.choices_text()}")
                      for part, q in kinds.items()]
            used = dict.fromkeys(tuple(q.choices) for q in same)
            lines += [wrapped(f"  {LIST_NAMES[c]}: {' | '.join(map(str, c))}") for c in used if c in LIST_NAMES]
        for case in dict.fromkeys(q.key[:6] for q in same):      # per case, its keys and what differs
            lines.append(f"  - {case}: " + ", ".join(q.key for q in same if q.key.startswith(case + "_")))
            lines += [self._entry(q) for q in qs if q.key == f"{case}_evidence"]
        lines += [self._entry(q) for q in qs if not isinstance(q, ListedChoices)
                  and not (q.key.startswith("case_") and q.key.endswith("_evidence"))]
        # the fixes reached but waiting for the causes: their keys and kinds, not their prompts
        waiting = [q for q in self.questions if self._part(q.key) == "fixes" and "fixes" in self.reached
                   and q not in qs]
        lines += [f"  - {q.key} [{q.kind}]: opens once every case's cause is tried" for q in waiting]
        hidden = len(self.questions) - len(qs) - len(waiting)
        if hidden:
            lines.append(f"  ({hidden} more as the lesson reaches them)")
        return "\n".join(lines)

    def _repr_markdown_(self):
        return "\n".join([f"**{self.title}**", ""] + [f"- `{q.key}`: {q.prompt}" for q in self.listed()])

    def answered(self, key: str) -> bool:
        """Whether question ``key`` is answered or revealed (:meth:`Question.outcome_ready`)."""
        return self[key].outcome_ready()


#: The shared choice lists by the name a lesson cell gives them (:class:`ListedChoices`).
LIST_NAMES = {tuple(ROUTE_CHOICES): "ROUTE_CHOICES", tuple(cs.CAUSE_CHOICES): "clinic.CAUSE_CHOICES",
              tuple(cs.FIX_CHOICES): "clinic.FIX_CHOICES"}
