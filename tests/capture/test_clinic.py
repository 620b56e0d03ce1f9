"""The clinic (issue 30): each case's planted cause is visible in its own recordings and in
no other's, kitlib's analyses find it, and the fix is faster beyond the noise.

The shipped CPU set is ``data/clinic/cpu`` (recorded by ``python -m kitlib record-clinic
--device cpu``, see ``data/clinic/PROVENANCE.md``). Every figure is computed here from the
raw trace JSON (``trace.json.gz``), ``key_averages.json`` and ``step_times.json``, then
again with kitlib's analyses; the thresholds sit between the case's figure and every other
recording's, measured on the shipped set (the values are in the comments).
"""
from __future__ import annotations

import json
import mmap
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from kitlib.capture import clinic

from support.clinic import SHIPPED, raw_figures, raw_job_ops, raw_memory_net, traces_of

ROOT = Path(__file__).resolve().parents[2]
CPU_LETTERS = [c.letter for c in clinic.cases_for("cpu")]
SINGLE = [x for x in CPU_LETTERS if not clinic.CASES[x].ranks]


def bundles():
    """Every shipped bundle folder (relative name -> path), the baseline first."""
    out = {"baseline": SHIPPED / "baseline"}
    for x in CPU_LETTERS:
        for side in ("before", "after"):
            out[f"case_{x}/{side}"] = SHIPPED / f"case_{x}" / side
    return out


def raw_process(bundle: Path) -> dict:
    """From a bundle's raw step_times.json ``process`` entry (rank 0's for two ranks), read
    with json alone: ``rss_growth`` (bytes per step: RSS after the last uninstrumented step
    minus after the first, over the steps between) and ``load_per_core`` (the mean of the
    1-minute load averages over the cores, those of the interleaved blocks where the steps were
    re-timed so); ``None`` each in a bundle recorded without it."""
    path = bundle / "rank0" if (bundle / "rank0").is_dir() else bundle
    st = json.loads((path / "step_times.json").read_text())
    p = st.get("process") or {}
    rss = p.get("rss_bytes_after_step") or []
    p = st.get("process_interleaved") or p          # the load the uninstrumented steps ran beside
    load = p.get("loadavg_1min") or []
    return {"rss_growth": (rss[-1] - rss[0]) / (len(rss) - 1) if len(rss) > 1 else None,
            "load_per_core": sum(load) / len(load) / p["cpu_count"] if load else None}


def figures(bundle: Path) -> dict:
    """:func:`raw_figures` of a bundle; for two ranks, each figure's largest over the ranks;
    with :func:`raw_process`'s figures."""
    per = [raw_figures(t) for t in traces_of(bundle)]
    return {**{k: max(f[k] for f in per) for k in per[0]}, **raw_process(bundle)}


@pytest.fixture(scope="module")
def table():
    return {name: figures(path) for name, path in bundles().items()}


#: Case l's load per core threshold: its before 5.43 (load 10.85 on 2 cores, four busy loops
#: beside the helpers' work); every other recording that has a load at most 3.80 (case_k/before's
#: interleaved blocks).
LTHRESH = 4.5

#: Each case's evidence as a test on a recording's figures: true for the case's *before*
#: and false for every other recording (its own *after*, the baseline, every other case).
#: Shipped values are in the comments: the case's before, then the largest elsewhere.
EVIDENCE = {
    # aten::contiguous inside forward per step: 49 (each of the 25 blocks' x.contiguous() and
    # the next 24 convolutions' conversions back; each with aten::clone and copy_), 0 elsewhere
    "a": lambda f: f["contiguous_in_forward"] >= 10,
    # unlabelled gap from a step's start to its data_load on some rank: 40.4 ms, else <= 0.1 ms
    "b": lambda f: f["step_start_gap_ms"] >= 20,
    # operators inside data_load per step (the transform in the training process): 1,469, else <= 5.3
    "c": lambda f: f["ops_in_data_load"] >= 200,
    # Python-stack events in the trace (with_stack): 13,826, else 0
    "d": lambda f: f["python_events"] > 0,
    # operators inside optimizer per step: 816 (about 8 per tensor x 102), else <= 126
    "e": lambda f: f["ops_in_optimizer"] >= 400,
    # aten::isnan per step (anomaly detection's NaN check per backward node): 22, else 0
    "f": lambda f: f["isnan"] > 0,
    # images per step at the first convolution: 2, else 16
    "g": lambda f: f["batch"] <= 4,
    # data_load share with no operators inside it (the workers cannot keep up): 0.775 with 5.3
    # operators; else at most 0.553 (case_c/before: 0.742, but with 1,469 operators inside)
    "h": lambda f: f["data_load_share"] >= 0.6 and f["ops_in_data_load"] < 50,
    # the process's RSS growth per uninstrumented step (every step's autograd graph kept alive by
    # a running loss kept as a tensor): 97.4 kB over 200 steps; else at most 47.7 kB (case_l/after:
    # 30 steps of the healthy job recorded before the recorder trimmed the heap, its warm-up growth),
    # the fixed job 2.2 kB (older bundles: not recorded)
    "k": lambda f: (f["rss_growth"] or 0) >= 70e3,
    # the 1-minute load average per core around the timed steps (busy loops beside the job; the
    # trace itself is the healthy job's): see LTHRESH
    "l": lambda f: (f["load_per_core"] or 0) >= LTHRESH,
}


def test_every_cpu_case_is_shipped():
    index = json.loads((SHIPPED / "clinic.json").read_text())
    assert index["format"] == clinic.FORMAT and index["device"] == "cpu" and index["settings"] == "full"
    assert sorted(index["cases"]) == [f"case_{x}" for x in CPU_LETTERS]
    assert len(CPU_LETTERS) >= 8
    for name, path in bundles().items():
        assert (path / "manifest.json").is_file(), name
        assert traces_of(path), name


@pytest.mark.parametrize("x", CPU_LETTERS)
def test_evidence_only_in_its_own_before(table, x):
    hit = sorted(name for name, f in table.items() if EVIDENCE[x](f))
    assert hit == [f"case_{x}/before"], (x, {n: table[n] for n in hit})


def test_no_case_has_two_causes(table):
    """Every *before* shows exactly one case's evidence, every *after* and the baseline none."""
    for name, f in table.items():
        shown = [x for x in CPU_LETTERS if EVIDENCE[x](f)]
        assert shown == ([name[5]] if name.endswith("/before") else []), (name, shown)


# --------------------------------------------------------------------------- kitlib finds it
def _open(x, side="before"):
    import kitlib
    return kitlib.open_capture(SHIPPED / f"case_{x}" / side)


def _ka_count(cap, key) -> int:
    return sum(r["count"] for r in cap.key_averages()["by_name"] if r["key"] == key)


def _baseline():
    import kitlib
    return kitlib.open_capture(SHIPPED / "baseline")


def test_kitlib_finds_the_layout_conversion():
    import kitlib
    from kitlib.analyses.steps import labelled_ranges
    cap = _open("a")
    base = kitlib.open_capture(SHIPPED / json.loads((SHIPPED / "clinic.json").read_text())["baselines"]["case_a"])
    assert base.name == "baseline_deep_64px_b16"      # the deep model at case a's size and batch
    for c, want in ((cap, True), (base, False)):
        ops, fwd = c.trace.ops, labelled_ranges(c.trace)
        fwd = fwd[fwd.name == "forward"]
        conv = ops[ops.name == "aten::contiguous"]
        inside = [(s <= conv.start_ns) & (conv.end_ns <= e) for s, e in zip(fwd.start_ns, fwd.end_ns)]
        assert bool(sum(i.sum() for i in inside)) is want
    # key_averages: 73 aten::contiguous more per active step than the healthy run of the same
    # model (shipped: 297 vs 78 in 3 steps): 49 in forward, 24 in backward (the gradients
    # converted back at each of the 24 convolutions), none more in h2d or optimizer
    assert _ka_count(cap, "aten::contiguous") - _ka_count(base, "aten::contiguous") == 3 * (49 + 24)


def test_kitlib_finds_the_straggler():
    from kitlib.analyses.collectives import straggler_summary
    from kitlib.readers.ranks import load_traces
    s = straggler_summary(load_traces(SHIPPED / "case_b" / "before"))
    assert s["rank"] == 1 and s["late_by_ms_median"] > 0.5 * clinic.STRAGGLER_MS
    after = straggler_summary(load_traces(SHIPPED / "case_b" / "after"))
    assert after["late_by_ms_median"] < 0.25 * clinic.STRAGGLER_MS


@pytest.mark.parametrize("x,label", [("c", "data_load"), ("h", "data_load")])
def test_kitlib_data_load_share(x, label):
    from kitlib.analyses.steps import step_measures
    share = lambda c: (lambda m: m[f"{label}_ns"].sum() / m.wall_ns.sum())(step_measures(c.trace))  # noqa: E731
    case, base, fixed = share(_open(x)), share(_baseline()), share(_open(x, "after"))
    # shipped (2 December): c 0.682, h 0.808; baseline 0.407, the fixes 0.186 and 0.249
    assert case >= 0.6 and case >= base + 0.15 and case >= fixed + 0.15, (case, base, fixed)


def test_kitlib_finds_the_profiler_overhead():
    """The heavy recipe's attribution is in the recording: stack rows in key_averages and
    allocator records in the trace, in no other recording."""
    cap = _open("d")
    assert any(r["stack"] for r in cap.key_averages()["by_stack_5"])
    assert len(cap.trace.memory) > 0
    for other in [_open("d", "after"), _baseline(), _open("e")]:
        assert "by_stack_5" not in other.key_averages() and len(other.trace.memory) == 0


def test_kitlib_finds_the_optimizer_loop():
    cap, fixed = _open("e"), _open("e", "after")
    assert _ka_count(cap, "aten::_fused_sgd_") == 0 < _ka_count(fixed, "aten::_fused_sgd_")
    n_params = 2 + 2 + clinic_blocks() * 4 + 2                 # 102 tensors
    # shipped: 687 aten::add_ and 306 aten::mul_ (1 per tensor per step) over 3 steps, against 75
    assert _ka_count(cap, "aten::mul_") == 3 * n_params
    assert _ka_count(cap, "aten::add_") >= 2 * 3 * n_params > 5 * _ka_count(fixed, "aten::add_")


def clinic_blocks():
    from kitlib.capture.workload import DEEP_CNN_BLOCKS
    return DEEP_CNN_BLOCKS


def test_kitlib_finds_anomaly_checks():
    assert _ka_count(_open("f"), "aten::isnan") > 0 == _ka_count(_baseline(), "aten::isnan")


def test_kitlib_finds_tiny_batches():
    from kitlib.analyses.grouping import shape_table
    first = lambda c: set(shape_table(c.trace, "aten::convolution").first_input)  # noqa: E731
    assert "[2, 3, 64, 64]" in first(_open("g")) and "[16, 3, 64, 64]" in first(_baseline())


# --------------------------------------------------------------------------- the fix is faster
def _series(x, side):
    """The uninstrumented step times of a side (rank 0's for two ranks), per image for the
    tiny-batch case (its fix changes the batch); for the profiling-overhead case, the heavy
    profile's active steps before (what the team measured) and the job's uninstrumented steps
    after (its fix is to time the job without the profiler)."""
    path = SHIPPED / f"case_{x}" / side
    st = json.loads(((path / "rank0") if (path / "rank0").is_dir() else path).joinpath("step_times.json").read_text())
    if x == "d" and side == "before":
        return st["step_ms_profiled"][-5:]     # what the team measured: the heavy profile's active steps
    ms = st["step_ms_uninstrumented"]
    if x == "g":
        batch = raw_figures(path / "trace.json.gz")["batch"]      # the first convolution's Input Dims
        return [v / batch for v in ms]
    return ms


#: Cases whose shipped recordings do not show the fix faster beyond the noise: none. Each
#: case's two jobs are timed side by side (record-clinic's interleaved ABBA blocks). At 60
#: steps a side (2 December 00:15) a and e were not: a's first form (channels-first input)
#: only moved its conversion from forward to h2d, so it was re-planted (every block ends
#: with x.contiguous(): 92.1 -> 64.5 ms, interval [-35.0, -15.6], 200 steps a side); e (the
#: fused optimiser on the deep model, about 1.3 ms of a 12-26 ms step) re-timed at 200 steps
#: a side (record-clinic --retime, 03:20, load 1-1.6): -1.52 ms, interval [-2.49, -0.29].
#: Under a load of 5-8 the same re-timing gave no difference (+0.03 ms, [-1.99, +2.29]).
NOT_RESOLVED: set = set()
#: Cases whose fix is not about speed: the memory case (its fix stops the growth) and the
#: busy-machine case (nothing to fix: its two runs differ by the machine's load).
NOT_SPEED = {x for x in CPU_LETTERS if clinic.CASES[x].cause_id in ("loss_kept_as_tensor", "busy_machine")}


@pytest.mark.parametrize("x", [pytest.param(x, marks=pytest.mark.xfail(
    reason="the fix's gain is below this busy machine's step-time noise (see NOT_RESOLVED)", strict=False))
    if x in NOT_RESOLVED else x for x in CPU_LETTERS if x not in NOT_SPEED])
def test_the_fix_is_faster_beyond_the_noise(x):
    from kitlib.analyses.compare import compare
    before, after = _series(x, "before"), _series(x, "after")
    assert len(before) >= 5 and len(after) >= 5
    c = compare(before, after)
    assert c.verdict == "faster" and c.ci_high_ms < 0, c.text


# --------------------------------------------------------------------------- nothing tells the cause
CAUSE_WORDS = ("num_workers", "pin_memory", "non_blocking", "channels_last", "foreach", "fused", "straggler",
               "anomaly", "pre_resize", "sync_every", "with_stack", "profile_memory", "record_shapes",
               "transform", "sgd", "deep_cnn_blocks", "contiguous", "layout")


@pytest.mark.parametrize("name", list(bundles()))
def test_manifests_name_no_cause(name):
    text = (bundles()[name] / "manifest.json").read_text()
    m = json.loads(text)
    assert set(m["workload"]) <= set(clinic.PUBLIC_WORKLOAD)
    assert set(m["recipe"]) <= set(clinic.PUBLIC_RECIPE)
    bad = [w for w in CAUSE_WORDS if w in text.lower()]
    assert not bad, (name, bad)


@pytest.mark.parametrize("name", list(bundles()))
def test_no_file_but_the_trace_gives_the_batch(name):
    """The tiny-batch case's cause would be one field away in a manifest or key_averages.json
    (a learner's trial, 2 December: the lesson printed "batch_size": 2). The batch is read
    from the trace's Input Dims, as that case's evidence is; and the lesson prints no batch."""
    folder = bundles()[name]
    assert "batch_size" not in json.loads((folder / "manifest.json").read_text())["workload"]
    if (folder / "key_averages.json").is_file():
        assert "batch_size" not in json.loads((folder / "key_averages.json").read_text())
    lesson = next((ROOT / "lessons").glob("13_*.ipynb")).read_text()
    assert "batch_size" not in lesson


def test_the_index_names_no_cause():
    text = (SHIPPED / "clinic.json").read_text().lower()
    for c in clinic.CASES.values():
        assert c.cause_id not in text
    assert not [w for w in CAUSE_WORDS if w in text]
    assert not list(SHIPPED.rglob("*answer*")) and not list(SHIPPED.rglob("*ANSWER*"))


def test_shipped_size():
    sizes = {x: sum(f.stat().st_size for f in (SHIPPED / f"case_{x}").rglob("*") if f.is_file())
             for x in CPU_LETTERS}
    assert max(sizes.values()) < 5e6, sizes
    assert sum(f.stat().st_size for f in SHIPPED.rglob("*") if f.is_file()) < 40e6


# --------------------------------------------------------------------------- plans and commands
def test_cpu_plan_skips_gpu_only_cases_and_says_why():
    assert {c.letter for c in clinic.CASES.values() if not c.cpu} == {"i", "j"}
    assert all(r.case not in ("case_i", "case_j") for r in clinic.plan("cpu"))
    with pytest.raises(clinic.KitError, match="only on a GPU"):
        clinic.plan("cpu", ["i"])
    with pytest.raises(clinic.KitError, match="no clinic case 'z'"):
        clinic.plan("cpu", ["z"])


def test_cuda_plan():
    recs = {r.folder: r for r in clinic.plan("cuda", out="/tmp/clinic-gpu")}
    assert len(recs) == 1 + 2 * len(clinic.CASES)
    assert recs["baseline"].settings["model"] == "resnet50" and recs["baseline"].settings["pin_memory"] is True
    j = recs["case_j/before"].settings
    assert j["pin_memory"] is False and j["non_blocking"] is False
    assert recs["case_i/before"].settings["sync_every_step"] is True
    assert recs["case_h/before"].settings["pre_resize_px"] == 1024 and recs["case_g/before"].settings["batch_size"] == 4
    assert recs["case_d/before"].recipe == clinic.HEAVY and recs["case_d/before"].active == 5
    cmd = recs["case_b/before"].command
    job = json.loads(cmd[cmd.index("--ranks") + 1])
    assert job["settings"]["straggler_rank"] == 1 and job["settings"]["straggler_label"] is False
    assert job["settings"]["device"] in ("cpu", "cuda") and cmd[-1] == "/tmp/clinic-gpu/case_b/before"
    assert recs["case_b/after"].command and "straggler_rank" not in json.loads(
        recs["case_b/after"].command[-2])["settings"]


def test_cuda_refused_without_a_gpu(tmp_path):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    with pytest.raises(clinic.KitError, match="no CUDA GPU"):
        clinic.record_clinic(tmp_path / "g", "cuda", ["a"], echo=lambda *a: None)
    assert not (tmp_path / "g").exists()


def test_answer_key_holds_every_cause():
    key = clinic.answer_key()
    for c in clinic.CASES.values():
        assert f"## {c.name}: {c.cause_id}" in key and c.fix in key
    out = subprocess.run([sys.executable, "-m", "kitlib", "answers", "--clinic"], capture_output=True,
                         text=True, cwd=ROOT)
    assert out.returncode == 0 and "case_b: straggler_rank" in out.stdout


def test_record_clinic_command_smallest(tmp_path):
    """CI-sized: one case at the smallest settings through the command; its evidence shows."""
    out = tmp_path / "clinic"
    env = {**os.environ, "KITLIB_CACHE": os.environ.get("KITLIB_CACHE", str(ROOT / ".cache"))}
    res = subprocess.run([sys.executable, "-m", "kitlib", "record-clinic", "--out", str(out), "--cases", "c",
                          "--smallest"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    index = json.loads((out / "clinic.json").read_text())
    assert list(index["cases"]) == ["case_c"] and index["settings"] == "smallest"
    before, after = figures(out / "case_c" / "before"), figures(out / "case_c" / "after")
    assert before["steps"] == clinic.SMALLEST["active"]
    assert EVIDENCE["c"](before) and not EVIDENCE["c"](after)
    st = json.loads((out / "case_c" / "before" / "step_times.json").read_text())
    assert len(st["step_ms_uninstrumented"]) == clinic.SMALLEST["timing_steps"]
    assert "num_workers" not in (out / "case_c" / "before" / "manifest.json").read_text()
    # each file says how its uninstrumented steps were timed, read through the manifest's sha256
    from kitlib.readers.bundle import open_capture
    assert open_capture(out / "baseline").step_times()["uninstrumented_order"].startswith("one run: 5 steps in a row")
    assert open_capture(out / "case_c" / "after").step_times()["uninstrumented_order"].startswith("interleaved")
    assert len(open_capture(out / "baseline").step_times()["process"]["rss_bytes_after_step"]) == 5


# --------------------------------------------------------------------------- the memory and busy-machine cases
def test_the_memory_case_grows_outside_the_profilers_records():
    """Case k's process grows its RSS every timed step while the trace's memory records (the
    tensors the profiler sees) net to about zero per step; the fixed job's RSS stays."""
    (k,) = [x for x in CPU_LETTERS if clinic.CASES[x].cause_id == "loss_kept_as_tensor"]
    before, after = (raw_process(SHIPPED / f"case_{k}" / s)["rss_growth"] for s in ("before", "after"))
    nets, records = raw_memory_net(SHIPPED / f"case_{k}" / "before" / "trace.json.gz")
    nets_after, _ = raw_memory_net(SHIPPED / f"case_{k}" / "after" / "trace.json.gz")
    print(f"RSS growth per step: before {before:,.0f} B, after {after:,.0f} B; [memory] records per step "
          f"{records:,.0f}, net per step {nets} B (after: {nets_after})")
    # shipped: 97,398 B against 2,182 B; the records net +234,584 B in the first active step (the
    # tensors it leaves to the next, counted from the profiler's zero), then 0 and 0, on both sides
    assert before >= 50e3 and before >= 10 * max(after, 1)
    assert records > 100 and nets[1:] == [0] * (len(nets) - 1) and nets_after[1:] == [0] * (len(nets) - 1)
    from kitlib.course import clinic_signs as cs
    s = cs.signs(cs.open_bundle(SHIPPED / f"case_{k}" / "before"))
    print("kitlib:", s["rss_growth_bytes_per_step"], s["memory_net_bytes_each_step"])
    assert s["rss_growth_bytes_per_step"] == pytest.approx(before) and s["memory_net_bytes_each_step"] == nets


def test_the_busy_machine_case_is_the_same_job_on_a_busier_machine():
    """Case l's two runs: the healthy run's operator names and input shapes in both
    key_averages, and its operators and counts outside data_load in both traces (the same job),
    not interleaved (no uninstrumented_order), the before run timed at a higher load and
    slower beyond the noise; the fix table says that verdict cannot be trusted."""
    from kitlib.analyses.compare import compare
    from kitlib.course import clinic_signs as cs
    (l_,) = [x for x in CPU_LETTERS if clinic.CASES[x].cause_id == "busy_machine"]
    names = lambda p: {r["key"] for r in json.loads((p / "key_averages.json").read_text())["by_name"]}  # noqa: E731
    shapes = lambda p: {(r["key"], str(r["input_shapes"])) for r in  # noqa: E731
                        json.loads((p / "key_averages.json").read_text())["by_input_shape"]}
    b, a, h = (SHIPPED / f"case_{l_}" / "before", SHIPPED / f"case_{l_}" / "after", SHIPPED / "baseline")
    assert names(b) == names(a) == names(h) and shapes(b) == shapes(a) == shapes(h)
    job = {n: raw_job_ops(p / "trace.json.gz") for n, p in (("before", b), ("after", a), ("baseline", h))}
    print({n: sum(v.values()) for n, v in job.items()}, "operators outside data_load in 3 steps")
    assert job["before"] == job["after"] == job["baseline"]
    st = {s: json.loads((p / "step_times.json").read_text()) for s, p in (("before", b), ("after", a))}
    assert not any("uninstrumented_order" in v for v in st.values())
    lb, la = (raw_process(p)["load_per_core"] for p in (b, a))
    c = compare(st["before"]["step_ms_uninstrumented"], st["after"]["step_ms_uninstrumented"])
    print(f"load per core {lb:.2f} before, {la:.2f} after; {c.text}")
    assert lb > cs.LOAD_RATIO * la and c.verdict == "faster"
    row = cs.fix_table([l_]).loc[f"case_{l_}"]
    print("kitlib:", row.load_per_core_before, row.load_per_core_after, row.trust)
    assert not row.interleaved and row.trust.startswith("no:") and "busier during the before run" in row.trust
    assert (row.load_per_core_before, row.load_per_core_after) == (pytest.approx(lb), pytest.approx(la))
    k = [x for x in CPU_LETTERS if clinic.CASES[x].cause_id == "loss_kept_as_tensor"]
    assert cs.fix_table(k).iloc[0].trust.startswith("yes: interleaved")


def test_the_plan_of_the_memory_and_busy_cases():
    """The busy loops are the recorder's, not the job's: popped from the settings, so both sides
    of the busy case are the same job and are not timed interleaved; the memory case times 200
    steps and records memory on both sides (all but the timed steps at the smallest settings)."""
    recs = {r.folder: r for r in clinic.plan("cpu", ["k", "l"])}
    lb, la = recs["case_l/before"], recs["case_l/after"]
    assert lb.busy == 4 and la.busy == 0 and lb.settings == la.settings and "busy_procs" not in lb.settings
    kb = recs["case_k/before"]
    assert kb.timing == 200 and kb.recipe == clinic.MEMORY == recs["case_k/after"].recipe
    assert kb.settings["keep_loss_tensor"] is True and "keep_loss_tensor" not in recs["case_k/after"].settings
    assert clinic.plan("cpu", ["k"], smallest=True)[-1].timing is None


def test_time_steps_records_the_process_beside_the_steps():
    """time_steps' ``process`` record: the RSS after each step follows memory the steps keep (a
    job that keeps 2 MB a step, written so that its pages are resident), the load average
    before and after, CPU and wall time summed over two calls; /proc/self/statm read by hand."""
    from kitlib.capture.workload import rss_bytes, time_steps

    class Keeper:
        kept: list = []

        def step(self, annotate=True):
            # fresh pages of its own (an anonymous map), written: the C heap could hand a 2 MB
            # bytes object pages an earlier test freed, and RSS would grow less (1.86 MB once)
            m = mmap.mmap(-1, 2_000_000)
            for page in range(0, 2_000_000, mmap.PAGESIZE):     # one byte a page: each resident
                m[page] = 120
            self.kept.append(m)

        def sync(self):
            pass
    p = {}
    time_steps(Keeper(), 5, process=p)
    time_steps(Keeper(), 5, process=p)
    rss = p["rss_bytes_after_step"]
    by_hand = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    # the median step's growth: memory the process frees meanwhile (the collector, another
    # allocation returned to the OS) made one step grow by 0.17 MB in CI's newest environment
    growth = statistics.median(b - a for a, b in zip(rss, rss[1:]))
    print(f"RSS growth {growth:,.0f} B per step; now {by_hand:,} B by hand, {rss_bytes():,} B kitlib")
    assert len(rss) == 10 and 1.9e6 <= growth <= 2.3e6 and abs(rss_bytes() - by_hand) < 1e6
    assert len(p["loadavg_1min"]) == 4 and p["cpu_count"] == os.cpu_count()
    assert 0 < p["process_cpu_s"] <= p["wall_s"] * 2 + 0.1
    assert p["loadavg_1min"][0] == pytest.approx(os.getloadavg()[0], abs=5)
    for m in Keeper.kept:
        m.close()
    del Keeper.kept[:]
