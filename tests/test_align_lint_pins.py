"""Lesson 09's align() tables, every cell derived without kitlib.

``align(profiler, nsys, attribution)`` lines a torch.profiler recording up with an Nsight
Systems export: per matched step and label, each tool's host duration and the GPU work
credited to the range(s) (launches, kernels, their summed durations, the GPU projection),
then ``comparable``/``note`` per row and ``attrs`` (rule, same run?, what ``data_load``
covers, the notes lesson 09 prints). Here every figure is recomputed from the raw files:

- torch.profiler: the ``trace.json.gz`` events read with ``json`` (times as exact decimals,
  µs with three decimals, so ``µs × 1000`` is the ns value): ``user_annotation`` ranges
  (``torch_step#N`` / ``ProfilerStep#N`` steps and the phase labels), ``cuda_runtime`` /
  ``cuda_driver`` launches and the ``kernel`` / ``gpu_memcpy`` / ``gpu_memset`` events they
  queued, joined on ``args.correlation``.
- Nsight Systems: ``report.sqlite`` read with sqlite3: ``NVTX_EVENTS`` ranges,
  ``CUPTI_ACTIVITY_KIND_RUNTIME`` launches and the KERNEL / MEMCPY / MEMSET rows joined on
  (process, ``correlationId``); thread ids are the low 24 bits of ``globalTid``, process
  ids the next 24.
- The two crediting rules as the module docstring of ``kitlib/analyses/align.py`` states
  them: ``"time"``, a launch by any thread of the range's process starting inside
  ``[start, end]``; ``"thread"``, a launch on the range's own thread starting and ending
  inside it (Nsight's NVTX GPU projection). A phase of step k is a range of that label on
  the step's thread inside the step's interval; steps are matched in time order.
- ``comparable``, ``note`` and ``attrs`` from each bundle's ``manifest.json``
  (``workload.data_load_covers``; no manifest names a ``run_id``) and the rules written in
  ``align``'s docstring.

Each test calls ``align`` itself (no shared fixture holding its output), so that mutmut,
which runs only the tests during which a function ran, runs every one of them against
align's mutants; the raw files are parsed once per module.
"""
import gzip
import json
import re
import sqlite3
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest

from kitlib import open_capture
from kitlib.analyses.align import ATTRIBUTIONS, _same_run, align
from kitlib.errors import KitError

from conftest import REF

STEP = re.compile(r"^(?:ProfilerStep|torch_step)(?:#(\d+))?$")
GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
PHASES = ["data_load", "h2d", "forward", "backward", "optimizer"]   # align's docstring: PHASES order
COLUMNS = ["step", "prof_step", "nsys_step", "label",
           "prof_host_ns", "prof_gpu_proj_ns", "prof_gpu_ops", "prof_kernels", "prof_kernel_sum_ns",
           "nsys_host_ns", "nsys_gpu_proj_ns", "nsys_gpu_ops", "nsys_kernels", "nsys_kernel_sum_ns",
           "attribution", "comparable", "note"]
FIGURES = ["host_ns", "gpu_ops", "kernels", "kernel_sum_ns", "gpu_proj_ns"]


# --------------------------------------------------------------------------- the raw files
def _ns(us):
    return int(us * 1000)                  # an exact Decimal of µs with three decimals


def _work(launch, ops):
    """Arrays of the GPU operations whose launch is in the recording, with that launch."""
    rows = [(key, kind == "kernel", *launch[key], s, e) for key, kind, s, e in ops]
    names = ["key", "kern", "pid", "tid", "ls", "le", "gs", "ge"]
    return {n: np.array(v) for n, v in zip(names, zip(*rows))}


def _prof_raw(name):
    """(ranges, work) of a torch.profiler trace; a range is (name, pid, tid, start_ns, end_ns)."""
    raw = json.loads(gzip.open(REF / name / "trace.json.gz").read(), parse_float=Decimal)
    ev = [e for e in raw["traceEvents"] if e.get("ph") == "X"]
    ranges = [(e["name"], e["pid"], e["tid"], _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
              for e in ev if e.get("cat") == "user_annotation"]
    launch = {e["args"]["correlation"]: (e["pid"], e["tid"], _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
              for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e["args"]}
    ops = [(e["args"]["correlation"], GPU_CATS[e["cat"]], _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]))
           for e in ev if e.get("cat") in GPU_CATS and e["args"].get("correlation") in launch]
    return ranges, _work(launch, ops)


def _nsys_raw(name):
    """(ranges, work) of an Nsight Systems export, in the same shapes."""
    con = sqlite3.connect(f"file:{REF / name / 'report.sqlite'}?mode=ro", uri=True)
    try:
        ranges = con.execute("SELECT coalesce(e.text, s.value), (e.globalTid >> 24) & 16777215, "
                             "e.globalTid & 16777215, e.start, e.end FROM NVTX_EVENTS e "
                             "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.end IS NOT NULL").fetchall()
        launch = {(p, c): (p, t, s, e) for p, t, c, s, e in con.execute(
            "SELECT (globalTid >> 24) & 16777215, globalTid & 16777215, correlationId, start, end "
            "FROM CUPTI_ACTIVITY_KIND_RUNTIME")}
        ops = []
        for table, kind in (("KERNEL", "kernel"), ("MEMCPY", "memcpy"), ("MEMSET", "memset")):
            ops += [((p, c), kind, s, e) for p, c, s, e in con.execute(
                f"SELECT (globalPid >> 24) & 16777215, correlationId, start, end FROM CUPTI_ACTIVITY_KIND_{table}")
                if (p, c) in launch]
    finally:
        con.close()
    w = _work(launch, ops)
    w["key"] = np.array([p * 2**32 + c for (p, c), *_ in ops])
    return ranges, w


def _steps(ranges):
    """[(step number, range)] in time order: the number after '#', else the position."""
    st = sorted((r for r in ranges if STEP.match(r[0])), key=lambda r: r[3])
    return [(int(STEP.match(r[0]).group(1) or i), r) for i, r in enumerate(st)]


def _credit(rs, w, rule):
    """(host_ns, gpu_ops, kernels, kernel_sum_ns, gpu_proj_ns) of the ranges rs, None without any."""
    if not rs:
        return None
    host = ops = kern = ksum = 0
    union = np.zeros(len(w["ls"]), bool)
    for _, pid, tid, s, e in rs:
        m = (w["pid"] == pid) & (w["ls"] >= s)
        m &= (w["ls"] <= e) if rule == "time" else (w["tid"] == tid) & (w["le"] <= e)
        k = m & w["kern"]
        host, ops = host + e - s, ops + len(set(w["key"][m].tolist()))
        kern, ksum = kern + int(k.sum()), ksum + int((w["ge"][k] - w["gs"][k]).sum())
        union |= m
    proj = int(w["ge"][union].max() - w["gs"][union].min()) if union.any() else None
    return host, ops, kern, ksum, proj


def _expected(prof, nsys, rule):
    """align's rows from the raw files: [step, prof_step, nsys_step, label, 5 prof figures, 5 nsys figures]."""
    (pr, pw), (nr, nw) = prof, nsys
    ps, ns = _steps(pr), _steps(nr)
    have = {r[0] for r in pr} | {r[0] for r in nr}
    rows = []
    for k in range(min(len(ps), len(ns))):
        for lab in ["step"] + [p for p in PHASES if p in have]:
            row = [k, ps[k][0], ns[k][0], lab]
            for (_, st), ranges, w in ((ps[k], pr, pw), (ns[k], nr, nw)):
                rs = [st] if lab == "step" else [r for r in ranges if r[0] == lab and r[2] == st[2]
                                                 and r[3] >= st[3] and r[4] <= st[4]]
                row += list(_credit(rs, w, rule) or [None] * 5)
            rows.append(row)
    return rows


def _figures(table):
    """The same columns of align's table, <NA> as None."""
    cols = ["step", "prof_step", "nsys_step", "label"] + [f"{s}_{c}" for s in ("prof", "nsys") for c in FIGURES]
    return [[None if v is pd.NA else v if isinstance(v, str) else int(v) for v in r]
            for r in table[cols].astype(object).itertuples(index=False)]


def _covers(name):
    manifest = json.loads((REF / name / "manifest.json").read_text())
    assert "run_id" not in manifest                  # so align cannot call the two the same run
    return manifest["workload"]["data_load_covers"]


@pytest.fixture(scope="module")
def raw():
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = _nsys_raw(name) if (REF / name / "report.sqlite").exists() else _prof_raw(name)
        return cache[name]
    return get


def _check_dtypes(t):
    assert t.columns.tolist() == COLUMNS
    assert {c: str(t[c].dtype) for c in ["step", "prof_step", "nsys_step", "comparable"]} == \
        {"step": "int64", "prof_step": "int64", "nsys_step": "int64", "comparable": "bool"}
    assert {str(t[c].dtype) for c in COLUMNS if c.endswith(("_ns", "_ops", "_kernels"))} == {"Int64"}


# --------------------------------------------------------------------------- lesson 09's pair
@pytest.mark.parametrize("rule", ["time", "thread"])
def test_lesson_pair_every_cell_from_the_raw_files_and_manifests(raw, rule):
    """align(cold_start_8step, nsys_8step) as lesson 09 calls it: every figure of the 48 rows
    (8 steps x step + 5 phases) recomputed from trace.json.gz and report.sqlite, and the
    comparable/note columns and attrs from the two manifests."""
    t = align(open_capture("cold_start_8step"), open_capture("nsys_8step"), attribution=rule)
    _check_dtypes(t)
    exp = _expected(raw("cold_start_8step"), raw("nsys_8step"), rule)
    assert len(exp) == 48 and [r[3] for r in exp[:6]] == ["step"] + PHASES
    assert _figures(t) == exp
    # sanity of the recomputation itself: Nsight's own first data_load range (PROVENANCE.md, 1,469.48 ms)
    assert exp[1][3] == "data_load" and round(exp[1][9] / 1e4) == 146948
    cov_p, cov_n = _covers("cold_start_8step"), _covers("nsys_8step")
    assert cov_p != cov_n
    notes = {"step": "", "h2d": "no 'h2d' range in Nsight (its work is inside data_load there)",
             "data_load": f"data_load differs: torch.profiler = {cov_p}; Nsight = {cov_n}"}
    for row in t.itertuples():
        note = notes.get(row.label, "")
        if row.label == "step" and row.step == 0:
            note = "first step: cold start (loader workers starting, first-use costs)"
        assert (row.note, row.comparable, row.attribution) == (note, row.label not in ("h2d", "data_load"), rule)
    assert t.attrs == {
        "attribution": ATTRIBUTIONS[rule], "same_run": False,
        "data_load_covers": {"torch.profiler": cov_p, "nsight": cov_n},
        "notes": [f"attribution '{rule}': {ATTRIBUTIONS[rule]}.",
                  "cold_start_8step and nsys_8step are different runs: step-for-step figures also differ by "
                  "run-to-run variation, not only by tool.",
                  f"data_load covers different work: torch.profiler {cov_p}; Nsight {cov_n}."]}


def test_lesson_pair_read_as_files_has_no_manifests(raw):
    """The same recordings given as a Trace and an NsysReport (no bundle, so no manifest):
    the same figures; whether they are one run, and what data_load covers, is unknown, so
    data_load is not flagged (unknown on both sides) while h2d still is."""
    caps = open_capture("cold_start_8step"), open_capture("nsys_8step")
    t = align(caps[0].trace, caps[1].nsys, attribution="time")
    _check_dtypes(t)
    assert _figures(t) == _expected(raw("cold_start_8step"), raw("nsys_8step"), "time")
    h2d = t["label"] == "h2d"
    assert (t["comparable"] == ~h2d).all()
    assert set(t.loc[h2d, "note"]) == {"no 'h2d' range in Nsight (its work is inside data_load there)"}
    assert set(t.loc[t["label"] == "data_load", "note"]) == {""}
    assert t.attrs == {"attribution": ATTRIBUTIONS["time"], "same_run": None,
                       "data_load_covers": {"torch.profiler": None, "nsight": None},
                       "notes": [f"attribution 'time': {ATTRIBUTIONS['time']}.",
                                 "whether the two recordings are the same run is not known (no manifests given)."]}


# --------------------------------------------------------------------------- the other shipped pair
def test_fixed_batch_beside_emit_nvtx(raw):
    """fixed_batch (ProfilerStep#2-#6) beside nsys_emit_nvtx (torch_step#3, #4), the fixed-batch
    pair: two steps matched, no data_load or h2d in either, both manifests saying data_load is
    next(batches) only, so every row is comparable and no data_load note is added."""
    t = align(open_capture("fixed_batch"), open_capture("nsys_emit_nvtx"), attribution="time")
    _check_dtypes(t)
    exp = _expected(raw("fixed_batch"), raw("nsys_emit_nvtx"), "time")
    assert [r[:4] for r in exp] == [[k, 2 + k, 3 + k, lab] for k in range(2)
                                    for lab in ["step", "forward", "backward", "optimizer"]]
    assert _figures(t) == exp
    assert t["comparable"].all() and t["note"].tolist() == \
        ["first step: cold start (loader workers starting, first-use costs)"] + [""] * 7
    cov = _covers("fixed_batch")
    assert cov == _covers("nsys_emit_nvtx") == "next(batches) only"
    assert t.attrs == {"attribution": ATTRIBUTIONS["time"], "same_run": False,
                       "data_load_covers": {"torch.profiler": cov, "nsight": cov},
                       "notes": [f"attribution 'time': {ATTRIBUTIONS['time']}.",
                                 "fixed_batch and nsys_emit_nvtx are different runs: step-for-step figures "
                                 "also differ by run-to-run variation, not only by tool."]}


def test_a_label_only_nsight_has(raw):
    """fixed_batch has no data_load range, nsys_8step has one per step: the data_load rows
    say so and are not comparable (the default labels are those of either tool)."""
    t = align(open_capture("fixed_batch").trace, open_capture("nsys_8step").nsys, attribution="time")
    assert _figures(t) == _expected(raw("fixed_batch"), raw("nsys_8step"), "time")
    dl = t[t["label"] == "data_load"]
    assert len(dl) == 5 and set(dl["note"]) == {"no 'data_load' range in torch.profiler"}
    assert not dl["comparable"].any() and dl["prof_host_ns"].isna().all()
    assert t.loc[t["label"] != "data_load", "comparable"].all()


def test_a_label_only_torch_profiler_has(raw):
    """The other way round: cold_start_8step has data_load and h2d ranges, nsys_emit_nvtx
    neither (one fixed on-device batch); only the h2d rows add where its work went."""
    t = align(open_capture("cold_start_8step").trace, open_capture("nsys_emit_nvtx").nsys, attribution="time")
    assert _figures(t) == _expected(raw("cold_start_8step"), raw("nsys_emit_nvtx"), "time")
    assert t.loc[t["label"].isin(["data_load", "h2d"]), ["label", "note", "comparable"]].values.tolist() == \
        [["data_load", "no 'data_load' range in Nsight", False],
         ["h2d", "no 'h2d' range in Nsight (its work is inside data_load there)", False]] * 2


@pytest.mark.parametrize("side", ["profiler", "nsight"])
def test_one_manifest_given(side):
    """A bundle on one side, a bare file on the other: what data_load covers is known on
    one side only ("unknown" on the other, so the data_load rows are not comparable), and
    whether the two are one run is not known."""
    cold, nsys = open_capture("cold_start_8step"), open_capture("nsys_8step")
    known = _covers("cold_start_8step" if side == "profiler" else "nsys_8step")
    t = align(cold, nsys.nsys) if side == "profiler" else align(cold.trace, nsys)
    cov_p, cov_n = (known, "unknown") if side == "profiler" else ("unknown", known)
    dl = t[t["label"] == "data_load"]
    assert len(dl) == 8 and not dl["comparable"].any()
    assert set(dl["note"]) == {f"data_load differs: torch.profiler = {cov_p}; Nsight = {cov_n}"}
    assert t.attrs["same_run"] is None
    assert t.attrs["data_load_covers"] == {"torch.profiler": known if side == "profiler" else None,
                                           "nsight": None if side == "profiler" else known}
    assert t.attrs["notes"] == [f"attribution 'time': {ATTRIBUTIONS['time']}.",
                                "whether the two recordings are the same run is not known (no manifests given).",
                                f"data_load covers different work: torch.profiler {cov_p}; Nsight {cov_n}."]


# --------------------------------------------------------------------------- refusals and same run
def test_align_refuses_in_words():
    """The messages of align's own refusals (an nsys bundle given as the profiler side is
    refused earlier, by the bundle itself: it has no trace)."""
    cold, nsys = open_capture("cold_start_8step"), open_capture("nsys_8step")
    for args, kwargs, message in [
            ((cold, nsys), {"attribution": "nope"}, "unknown attribution 'nope'; use one of thread, time"),
            ((cold.trace, cold.trace), {}, "align: expected a NsysReport or nsys Capture, got Trace"),
            ((nsys.nsys, nsys.nsys), {}, "align: expected a Trace or torch_profiler Capture, got NsysReport")]:
        with pytest.raises(KitError) as info:
            align(*args, **kwargs)
        assert str(info.value) == message


def test_same_run_needs_both_manifests_and_one_run_id():
    """Worked on paper from _same_run's docstring (live nsys captures write ``run_id``)."""
    assert _same_run({"run_id": "r1"}, {"run_id": "r1"}) is True
    assert _same_run({"run_id": "r1"}, {"run_id": "r2"}) is False
    assert _same_run({}, {}) is False                     # both known, neither names a run
    assert _same_run({"run_id": "r1"}, {}) is False
    assert _same_run(None, {"run_id": "r1"}) is None and _same_run({"run_id": "r1"}, None) is None
