"""Lesson 09's questions (what does the system view add?), from the Nsight Systems capture in
hand; two transfer questions read a public export with plain ``sqlite3`` (:data:`PUBLIC_EXPORT`)."""
from __future__ import annotations

from . import Exercises, Question
from ...units import ns_to_ms

#: A public Nsight Systems export for the transfer questions (CloverLeaf, 4×A100; hpcgroup/pipit, MIT).
PUBLIC_EXPORT = "public-other/nsys_2024.5_a100_cloverleaf.sqlite"
#: A public torch.profiler trace (ResNet-50, V100) whose step verdict the queue's transfer question reads.
PUBLIC_TRACE = "public-other/kineto_2021-06_resnet50_v100.json.gz"
#: The step of :data:`PUBLIC_TRACE` that question asks about.
PUBLIC_TRACE_STEP = 7

#: CUDA calls that make the host thread wait for the GPU (``cudaMemcpy`` waits for all queued before it).
SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy")


#: GPU operations Nsight's thread-based projection credits to one backward range (upper bounds, choices).
BACKWARD_CHOICES = [(0.5, "none"), (20, "one or a few"), (float("inf"), "hundreds")]


def _bucket(x: float, choices) -> str:
    return next(label for bound, label in choices if x < bound)


def _ops_launched_in(rep, ranges) -> int:
    """GPU operations (kernels, copies, memsets) whose launch, on any thread, starts inside one of ``ranges``."""
    from ...analyses.align import gpu_work
    w = gpu_work(rep)
    n = 0
    for s, e in zip(ranges["start_ns"], ranges["start_ns"] + ranges["dur_ns"]):
        n += int(((w["launch_start_ns"] >= s) & (w["launch_start_ns"] < e)).sum())
    return n


def _main_thread_kernels(rep, ranges) -> list:
    """Short names of the kernels launched inside ``ranges`` by each range's own thread (an
    elementwise kernel with its functor)."""
    import re
    out = []
    for s, e, tid in zip(ranges["start_ns"], ranges["start_ns"] + ranges["dur_ns"], ranges["tid"]):
        la = rep.launches
        corr = la.loc[(la["tid"] == tid) & (la["start_ns"] >= s) & (la["start_ns"] < e), "correlation"]
        for _, k in rep.kernels[rep.kernels["correlation"].isin(corr)].iterrows():
            f = re.search(r"(\w+Functor)", str(k["name"]))
            out.append(f"{k['short_name']} ({f.group(1)})" if f else str(k["short_name"]))
    return out


def public_export_path():
    """The public export's path among the kit's recordings (``data/reference/public-other``, shipped
    with the package as the lesson 12 pair is)."""
    from ...readers.bundle import reference_dir
    return reference_dir() / PUBLIC_EXPORT


def _public_figures(path) -> dict:
    """The public export's transfer answers by SQL: HtoD and DtoH bytes and ns, the mean per-copy
    rate, host time in cudaDeviceSynchronize and cudaMemcpy."""
    import sqlite3
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        h2d = con.execute("SELECT SUM(bytes), SUM(end - start), AVG(1.0 * bytes / (end - start)) "
                          "FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1").fetchone()
        every = con.execute("SELECT SUM(bytes), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_MEMCPY").fetchone()
        api = dict(con.execute("SELECT s.value, SUM(r.end - r.start) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                               "JOIN StringIds s ON s.id = r.nameId GROUP BY s.value").fetchall())
        calls = dict(con.execute("SELECT s.value, COUNT(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                                 "JOIN StringIds s ON s.id = r.nameId GROUP BY s.value").fetchall())
    finally:
        con.close()
    base = lambda n: next(v for k, v in api.items() if k.split("_v")[0] == n)  # noqa: E731
    ncalls = lambda n: next(v for k, v in calls.items() if k.split("_v")[0] == n)  # noqa: E731
    return {"h2d_gbps": h2d[0] / h2d[1], "h2d_mean_of_rates": h2d[2], "all_gbps": every[0] / every[1],
            "sync_ns": base("cudaDeviceSynchronize"), "sync_calls": ncalls("cudaDeviceSynchronize"),
            "memcpy_ns": base("cudaMemcpy")}


def public_trace_path():
    """The public V100 trace among the kit's recordings (``data/reference/public-other``)."""
    from ...readers.bundle import reference_dir
    return reference_dir() / PUBLIC_TRACE


def _queue_questions(rep, public_trace=None) -> list:
    """"Is the GPU waiting for the CPU?": predict the verdict of the capture's last step from
    its timeline; read the empty-queue share of a step of the public V100 trace."""
    from ...analyses.gpu_idle import step_verdicts
    from ...readers.trace import load_trace
    v = step_verdicts(rep)
    last = v.iloc[-1]
    other = {"CPU-bound": "the GPU would have waited for launches: look for gaps in the kernel row while the "
                          "CUDA API rows are busy",
             "GPU-bound": "work would have been queued all the time, the kernel row without gaps",
             "mixed": "the queue would have emptied now and then, but for less than a fifth of the step"}
    qs = [Question(
        "queue_verdict", f"Predict from the timeline of step {int(last['step'])} above: was the step CPU-bound "
                         "(the GPU waited for the host's launches), GPU-bound (work was always queued), or mixed?",
        last["verdict"],
        f"{last['verdict']}: {last['evidence']}. Work was queued the whole time, so the GPU never waited for a "
        "launch: a faster host would not make this step shorter; shorter or fewer kernels would."
        if last["verdict"] == "GPU-bound" else
        f"{last['verdict']}: {last['evidence']}.",
        kind="predict", choices=["CPU-bound", "GPU-bound", "mixed"],
        where="the step's timeline: the kernel row (gaps?) against the CUDA API rows (ahead or behind?)",
        traps=[(x, f"not in this step: {why}.") for x, why in other.items() if x != last["verdict"]])]
    path = public_trace if public_trace is not None else public_trace_path()
    if path is None or not __import__("pathlib").Path(path).exists():
        return qs
    pv = step_verdicts(load_trace(path))
    row = pv[pv["step"] == PUBLIC_TRACE_STEP].iloc[0]
    qs.append(Question(
        "public_queue_empty_share", f"Transfer, on a public torch.profiler trace the lesson has not shown "
                                    f"(ResNet-50 on a V100, PyTorch 1.9: {PUBLIC_TRACE}): run step_verdicts on it. "
                                    f"For what share of ProfilerStep#{PUBLIC_TRACE_STEP} did the GPU's launch queue "
                                    "stand empty? (0–1)", float(row["queue_empty_share"]),
        f"{row['queue_empty_share']:.3f} of the step: {row['verdict']}; {row['evidence']}. Over its "
        f"{len(pv)} steps the queue stood empty {pv['queue_empty_share'].min():.0%} to "
        f"{pv['queue_empty_share'].max():.0%} of the time: that loop kept its GPU waiting for the host.",
        kind="transfer", where="step_verdicts(load_trace(...)): the queue_empty_share column, "
                               f"step {PUBLIC_TRACE_STEP}",
        traps=[(float(row["host_wait_share"]), "that is host_wait_share, the neighbouring column (idle inside "
                                               "host-wait gaps); the question asks how long the queue was empty."),
               (float(row["device_busy_share"]), "that is the share of the step the GPU was busy."),
               (float(1 - row["queue_empty_share"]), "that is the share with something queued: 1 minus the answer.")]))
    return qs


def questions(capture, emit=None, public=None, public_trace=None) -> Exercises:
    """Questions of lesson 09 from an ``nsys`` bundle with ``torch_step``/phase NVTX ranges. ``emit``
    is accepted for the key's call; ``public`` (default :func:`public_export_path`) and
    ``public_trace`` (default :func:`public_trace_path`): their questions are left out when absent."""
    import numpy as np

    from ...analyses.coldstart import data_load_ranges
    from ...analyses.pinning import main_thread_waits, pin_thread_allocs, wakes_after_pinning
    from ...readers.nsys import load_nsys, nvtx_gpu_projection
    rep = load_nsys(capture)
    proj = nvtx_gpu_projection(rep)
    bwd = proj[proj["name"] == "backward"]
    col = capture.recipe.get("collectors", {})
    streams = sorted(int(s) for s in rep.kernels["stream"].unique())
    all_streams = sorted({int(s) for t in (rep.kernels, rep.copies, rep.sets) for s in t["stream"].unique()})
    from ...analyses.steps import steps_of
    steps = steps_of(rep).sort_values("start_ns")
    sync = rep.launches[rep.launches["name"].isin(SYNC_CALLS)]
    inside = np.zeros(len(sync), dtype=bool)
    for s, e in zip(steps["start_ns"], steps["end_ns"]):
        inside |= (sync["start_ns"] >= s).to_numpy() & (sync["start_ns"] < e).to_numpy()
    before = sync[sync["start_ns"] < steps["start_ns"].min()]
    n_stream = int((before["name"] == "cudaStreamSynchronize").sum())
    after = int((sync["start_ns"] >= steps["end_ns"].max()).sum())
    bw_per = float(bwd["gpu_ops"].sum()) / max(len(bwd), 1)
    bw_bucket = _bucket(bw_per, BACKWARD_CHOICES)
    bw_all_per = _ops_launched_in(rep, bwd) / max(len(bwd), 1)
    seeds = _main_thread_kernels(rep, bwd)
    seed_text_short = (f"one kernel a step ({seeds[0]})" if len(set(seeds)) == 1 and len(seeds) == len(bwd)
                       else f"{len(seeds)} kernel(s) in all")
    seed_text = (f"What it does credit is {seed_text_short}: the gradient seed of loss.backward(), a tensor of "
                 "ones the main thread fills before handing the graph to autograd."
                 if seeds and all("Fill" in k for k in seeds) else
                 f"What it does credit: {seed_text_short}, launched by the main thread inside the range.")
    qs = [
        Question("streams_one_for_all", "Predict, before the picture: lesson 03 found every kernel of this loop on "
                                        "one stream. Nsight also records the copies and the memory sets. Do all of "
                                        "this report's GPU operations (kernels, copies, memory sets) run on that one "
                                        "stream? (yes/no)", len(all_streams) == len(streams) == 1,
                 f"{'yes' if len(all_streams) == 1 else 'no'}: the kernels run on {len(streams)} stream(s) "
                 f"({', '.join(map(str, streams))}), the default one, on which PyTorch queues every kernel of this "
                 f"loop; the report names {len(all_streams)} streams in all ({', '.join(map(str, all_streams))}) "
                 "because a few memory sets ran on others. On one stream the kernels run in the order they were "
                 "queued: apart from short hand-overs between some kernels, none runs beside another, so a faster "
                 "step needs shorter kernels or fewer gaps, not more overlap.", kind="predict",
                 where="the streams table (streamId per GPU table)",
                 traps=[(True, f"the kernels do share one stream, but the memory sets do not all: "
                               f"{len(all_streams) - len(streams)} other stream(s) carry a few of them.")]
                 if len(all_streams) > len(streams) else []),
        Question("backward_gpu_ops", "Predict: Nsight's NVTX GPU projection matches launches to ranges by "
                                     f"thread. How many GPU operations does it credit to each of the {len(bwd)} "
                                     f"backward ranges? ('{BACKWARD_CHOICES[0][1]}', '{BACKWARD_CHOICES[1][1]}' or "
                                     f"'{BACKWARD_CHOICES[2][1]}')", bw_bucket,
                 f"{bw_bucket}: {int(bwd['gpu_ops'].sum())} operations for the {len(bwd)} ranges together "
                 f"({bw_per:g} a range), projecting to {ns_to_ms(bwd['proj_dur_ns'].sum()):,.3f} ms in total, "
                 f"although {bw_all_per:,.0f} GPU operations a range, on average, are launched inside its interval "
                 f"(on any thread). The range's own thread only calls loss.backward() and waits; "
                 f"autograd launches from its own thread, pt_autograd_0. {seed_text}",
                 kind="predict", choices=[c for _, c in BACKWARD_CHOICES],
                 where="nvtx_gpu_proj_sum: the :backward row's Total GPU Ops, divided by its Range Instances",
                 traps=[(c, t) for c, t in [
                     (BACKWARD_CHOICES[0][1], f"not none: the main thread itself launches {seed_text_short} inside "
                                              "each backward range, and that one is credited."),
                     (BACKWARD_CHOICES[2][1], f"hundreds are launched during each range ({bw_all_per:,.0f} on "
                                              "average), but from the autograd thread (pt_autograd_0), which has no "
                                              "range: the projection follows the range's own thread.")]
                     if c != bw_bucket]),
    ]
    dl = data_load_ranges(rep)
    first = dl.iloc[0]
    s0, e0 = int(first["start_ns"]), int(first["end_ns"])
    try:
        allocs = pin_thread_allocs(rep, s0, e0)
    except Exception:   # no pin-memory thread in this report (pin_memory=False)
        allocs = None
    if allocs is not None and len(allocs):
        share = float(allocs["dur_ns"].sum() / first["dur_ns"])
        qs.append(Question(
            "pin_alloc_share", "What fraction of the first data_load range did the pin-memory thread spend "
                               "inside cudaHostAlloc? (0–1)", share,
            f"{len(allocs)} calls, {ns_to_ms(allocs['dur_ns'].sum()):,.1f} ms of {ns_to_ms(first['dur_ns']):,.1f} ms "
            f"= {share:.1%}, one after the other on one thread, while the main thread waited.",
            kind="compute", where="the cudaHostAlloc line (ms in all) and the range's length printed with it",
            traps=[(1 - share, "that is the part of the range *outside* cudaHostAlloc."),
                   (float(allocs["dur_ns"].sum() / (e0 - s0 + allocs["dur_ns"].sum())),
                    "divide by the range's length alone.")]))
        main_tid = int(rep.nvtx.loc[rep.nvtx["name"] == "data_load", "tid"].iloc[0])
        wakes = wakes_after_pinning(main_thread_waits(rep, s0, e0, main_tid), allocs)
        if len(wakes):
            qs.append(Question(
                "batches_before_batch0", "How many pinned batches did the main thread receive and put aside "
                                         "before batch 0 arrived?", len(wakes) - 1,
                f"it woke {len(wakes)} times after the pin thread began, once per pinning cycle, and went on only "
                f"after the last: {len(wakes) - 1} batches were pinned before batch 0. Whether batch 0 reached the "
                "pin thread late or waited in its queue, the report cannot say.",
                kind="compute", where="the wake-ups table (one column per wake-up)",
                traps=[(len(wakes), "that counts batch 0 itself; the question asks how many came before it.")]))
    pinned = rep.copies[(rep.copies["copy_kind"] == "Host-to-Device") & (rep.copies["src_kind"] == "Pinned")]
    pageable = rep.copies[(rep.copies["copy_kind"] == "Host-to-Device") & (rep.copies["src_kind"] == "Pageable")]
    if len(pinned):
        gbps = float(pinned["bytes"].sum() / pinned["dur_ns"].sum())
        traps = [(float(gbps / 64 * 100), "that is a share of the link's peak; the question asks for the rate "
                                          "in GB/s.")]
        if len(pageable):
            traps.append((float(pageable["bytes"].sum() / pageable["dur_ns"].sum()),
                          "that is the pageable row (srcKind 0: the model's weights copied before step 0); "
                          "the question asks for the pinned one."))
        qs.append(Question(
            "h2d_pinned_gbps", "From the copies table: the host-to-device copies from pinned memory moved how "
                               "many GB (10⁹ bytes) per second, all bytes over all their durations?", gbps,
            f"{int(pinned['bytes'].sum()):,} bytes in {int(pinned['dur_ns'].sum()):,} ns = {gbps:.1f} GB/s (bytes "
            "per ns are GB/s): close to what a PCIe Gen5 x16 link carries one way.",
            kind="compute", unit="GB/s", where="the copies table: the Host-to-Device, Pinned row's bytes and ns",
            traps=traps))
    sync_names = ", ".join(SYNC_CALLS[:-1]) + " or a plain cudaMemcpy"
    qs.append(Question(
        "syncs_in_steps", f"Predict: how many calls that make the host wait for the GPU ({sync_names}) did "
                          f"the process make inside the {len(steps)} torch_step ranges?", int(inside.sum()),
        f"{int(inside.sum())}: this loop reads nothing back from the GPU (no loss.item(), no .cpu(), no "
        f"print(loss)), so the host never waits inside a step and runs ahead. The {len(sync)} waiting calls are "
        f"outside the steps: {len(before)} before step 0 ({n_stream} stream synchronisations, one after each "
        "copy of the model's tensors from pageable memory, and the script's torch.cuda.synchronize()) and "
        f"{after} after the last step (the final torch.cuda.synchronize()).",
        kind="predict", where="the synchronising-calls table (inside a step or not)",
        traps=[(len(sync), "those are all the waiting calls of the recording; most come before the first step.")]))
    path = public if public is not None else public_export_path()
    if path is not None and __import__("pathlib").Path(path).exists():
        pub = _public_figures(path)
        qs.append(Question(
            "public_h2d_gbps", "Transfer, on a public Nsight export the lesson has not shown (CloverLeaf on an "
                               f"A100: {PUBLIC_EXPORT}): write the same SQL. Its host-to-device copies moved how "
                               "many GB (10⁹ bytes) per second, all bytes over all their durations?", pub["h2d_gbps"],
            f"{pub['h2d_gbps']:.1f} GB/s on the A100's PCIe Gen4 x16 link (32 GB/s one way, nominal): about "
            "three quarters of it, from pageable memory (srcKind 0), which the driver stages through pinned "
            "buffers of its own.",
            kind="transfer", unit="GB/s", where="CUPTI_ACTIVITY_KIND_MEMCPY of that file, copyKind = 1",
            traps=[(pub["all_gbps"], "that includes the device-to-host copies (copyKind 2); keep copyKind = 1."),
                   (pub["h2d_mean_of_rates"], "that is the mean of each copy's rate; divide all bytes by all "
                                              "durations, so that large copies weigh as much as they move.")]))
        qs.append(Question(
            "public_sync_ms", "Transfer, same public export: how many ms of host time did the program spend "
                              "inside cudaDeviceSynchronize, all calls together?", ns_to_ms(pub["sync_ns"]),
            f"{ns_to_ms(pub['sync_ns']):,.1f} ms in {pub['sync_calls']:,} calls: this program synchronises after "
            "every kernel, so the host waits for each kernel to finish before it can queue the next one.",
            kind="transfer", unit="ms", where="CUPTI_ACTIVITY_KIND_RUNTIME of that file, joined with StringIds",
            traps=[(ns_to_ms(pub["memcpy_ns"]), "that is cudaMemcpy, the neighbouring row; the question asks "
                                                "about cudaDeviceSynchronize."),
                   (ns_to_ms(pub["sync_ns"]) / pub["sync_calls"], "that is the mean per call; the question asks "
                                                                  "for all calls together.")]))
    qs += _queue_questions(rep, public_trace)
    qs.append(Question("cpu_sampling", "Was CPU sampling on in this capture? (yes/no)", bool(col.get("cpu_sampling")),
                       "the manifest's collectors: " + ", ".join(f"{k}={v}" for k, v in col.items())
                       + ". With sampling and context switches off, the report cannot say what a thread computed "
                         "between its calls, nor when it was descheduled.", kind="recall"))
    return Exercises("Lesson 09 — your turn", qs)
