"""The trace diff (issue 28): two hand-written traces worked out on paper, the H200 pair
``profiler_5step`` → ``fixed_batch`` (the loader's batch against one batch kept on the GPU)
and the Nsight pair ``nsys_8step`` → ``nsys_emit_nvtx``, each checked against figures
computed here from the raw JSON or SQLite without kitlib, and the bad input.

The hand-written pair, thread (1, 1), times in µs (×1000 for ns); a kernel belongs to the
step that holds its *launch*::

    before                                   after
    step 1 [0, 1000)     mm [[2,3],[3,4]] → mm_kernel 50       (no step 1)
    step 2 [1000, 2000)  mm [[2,3],[3,4]] → mm_kernel 50       mm [[2,3],[3,4]] → mm_kernel 30
                         relu [[2,4]]     → relu_kernel 10     gelu [[2,4]]     → gelu_kernel 10
                         copy_ [1995, 1999), launch at 1998    (no copy in step 2)
                           → memcpy 20 at 2005 (launched in
                           step 2, run in step 3's time)
    step 3 [2000, 3000)                                        copy_ [2000, 2006), launch at 2000
                                                                 → memcpy 20 (step 3's: [start, end))
                         mm [[4,3],[3,4]] → mm_kernel 40       mm [[4,3],[3,4]] → mm_kernel 40
                         launch at 3000 (no op) → late_kernel 5
                           (3000 is step 3's end, and there is no step 4: in no step)
    step 4                                                     mm [[2,3],[3,4]] → mm_kernel 50

Common steps 2 and 3. Worked out by hand:

- kernels, step 2: mm_kernel 50 → 30 µs (faster, −20 µs), relu_kernel removed (−10),
  gelu_kernel added (+10), memcpy removed (its launch at 2000 is step 3's in ``after``);
  step 3: mm_kernel 40 → 40 (unchanged), memcpy added (+20).
- kernels, overall: mm_kernel 2 → 2 calls, 90 → 70 µs (faster), relu removed, gelu added,
  memcpy 1 → 1, 20 → 20 (unchanged: it moved from step 2 to step 3).
- left out: before, late_kernel in no step and step 1's mm_kernel (a step ``after`` lacks);
  after, step 4's mm_kernel.
- operators by name and shape: mm [[2,3],[3,4]] 50 → 30 (faster), mm [[4,3],[3,4]] 40 → 40
  (unchanged), relu removed, gelu added, copy_ 20 → 20 (unchanged); per step, copy_ is removed
  from step 2 and added to step 3 (an operator is placed by its own start); by name alone,
  mm 90 → 70 (faster).
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from conftest import raw_trace_events, sql_rows
from support.events import event, gpu_event
from kitlib.errors import KitError
from kitlib.readers.trace import load_trace

US = 1000
REF = Path(__file__).resolve().parents[2] / "data" / "reference"


class _Ids:
    def __init__(self):
        self.n = 0

    def __call__(self):
        self.n += 1
        return self.n


def _op_with_kernel(ev, ids, op, dims, op_ts, op_dur, launch_ts, kernel, k_ts, k_dur, cat="kernel",
                    launch="cudaLaunchKernel", shapes=True):
    i = ids()
    a = {"External id": 100 + i}             # the profiler's external ids and correlations differ
    if shapes:
        a["Input Dims"] = dims
    ev.append(event("cpu_op", op, op_ts, op_dur, **a))
    ev.append(event("cuda_runtime", launch, launch_ts, 1, correlation=i, **{"External id": 100 + i}))
    ev.append(gpu_event(cat, kernel, k_ts, k_dur, i))


MM, MM2 = [[2, 3], [3, 4]], [[4, 3], [3, 4]]


def _before_json():
    ev, ids = [], _Ids()
    for n in (1, 2, 3):
        ev.append(event("user_annotation", f"ProfilerStep#{n}", (n - 1) * 1000, 1000))
    _op_with_kernel(ev, ids, "aten::mm", MM, 10, 40, 20, "mm_kernel", 60, 50)
    _op_with_kernel(ev, ids, "aten::mm", MM, 1010, 40, 1020, "mm_kernel", 1060, 50)
    _op_with_kernel(ev, ids, "aten::relu", [[2, 4]], 1100, 20, 1110, "relu_kernel", 1120, 10)
    _op_with_kernel(ev, ids, "aten::copy_", [[8], [8]], 1995, 4, 1998, "Memcpy HtoD (Pinned -> Device)",
                    2005, 20, cat="gpu_memcpy", launch="cudaMemcpyAsync")
    _op_with_kernel(ev, ids, "aten::mm", MM2, 2010, 40, 2020, "mm_kernel", 2060, 40)
    ev.append(event("cuda_runtime", "cudaLaunchKernel", 3000, 1, correlation=99))     # at step 3's end, no op
    ev.append(gpu_event("kernel", "late_kernel", 3005, 5, 99))
    return {"traceEvents": ev, "schemaVersion": 1}


def _after_json(shapes=True, steps=(2, 3, 4)):
    ev, ids = [], _Ids()
    for n in steps:
        ev.append(event("user_annotation", f"ProfilerStep#{n}", (n - 1) * 1000, 1000))
    _op_with_kernel(ev, ids, "aten::mm", MM, 1010, 40, 1020, "mm_kernel", 1060, 30, shapes=shapes)
    _op_with_kernel(ev, ids, "aten::gelu", [[2, 4]], 1100, 20, 1110, "gelu_kernel", 1120, 10, shapes=shapes)
    _op_with_kernel(ev, ids, "aten::copy_", [[8], [8]], 2000, 6, 2000, "Memcpy HtoD (Pinned -> Device)",
                    2005, 20, cat="gpu_memcpy", launch="cudaMemcpyAsync", shapes=shapes)
    _op_with_kernel(ev, ids, "aten::mm", MM2, 2010, 40, 2020, "mm_kernel", 2060, 40, shapes=shapes)
    _op_with_kernel(ev, ids, "aten::mm", MM, 3010, 40, 3020, "mm_kernel", 3060, 50, shapes=shapes)
    return {"traceEvents": ev, "schemaVersion": 1}


def _load(tmp_path, name, doc):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return load_trace(p)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("diff")
    return _load(d, "before.json", _before_json()), _load(d, "after.json", _after_json())


def _rows_by(t, *cols):
    return {tuple(r[c] for c in cols[:-1]): r[cols[-1]] for _, r in t.iterrows()} if len(cols) > 1 else None


MEMCPY = "Memcpy HtoD (Pinned -> Device)"


def test_kernels_per_step_as_worked_on_paper(pair):
    from kitlib.analyses.trace_diff import trace_diff
    d = trace_diff(*pair, per_step=True)
    got = {(r.step, r.name): (r.before_count, r.after_count, r.before_device_ns, r.after_device_ns,
                              r.device_change_ns, r.change) for r in d.itertuples()}
    assert got == {
        (2, "mm_kernel"): (1, 1, 50 * US, 30 * US, -20 * US, "faster"),
        (2, "relu_kernel"): (1, 0, 10 * US, 0, -10 * US, "removed"),
        (2, "gelu_kernel"): (0, 1, 0, 10 * US, 10 * US, "added"),
        (2, MEMCPY): (1, 0, 20 * US, 0, -20 * US, "removed"),
        (3, "mm_kernel"): (1, 1, 40 * US, 40 * US, 0, "unchanged"),
        (3, MEMCPY): (0, 1, 0, 20 * US, 20 * US, "added")}
    assert dict(zip(d["name"], d["kind"]))[MEMCPY] == "memcpy"
    # sorted by step, then by the size of the change
    assert d["step"].tolist() == [2, 2, 2, 2, 3, 3] and d["name"].tolist()[0] in ("mm_kernel", MEMCPY)
    assert all(str(d[c].dtype) == "int64" for c in d.columns if c.endswith("_ns") or c.endswith("_count"))


def test_kernels_overall_and_what_was_left_out(pair):
    from kitlib.analyses.trace_diff import diff_summary, trace_diff
    d = trace_diff(*pair)
    got = {r.name: (r.before_count, r.after_count, r.before_device_ns, r.after_device_ns, r.change)
           for r in d.itertuples()}
    assert got == {"mm_kernel": (2, 2, 90 * US, 70 * US, "faster"), "relu_kernel": (1, 0, 10 * US, 0, "removed"),
                   "gelu_kernel": (0, 1, 0, 10 * US, "added"), MEMCPY: (1, 1, 20 * US, 20 * US, "unchanged")}
    assert d["name"].tolist()[0] == "mm_kernel"            # the largest change first
    assert d.attrs["steps"] == [2, 3] and d.attrs["matched_by"] == "kind and name"
    assert d.attrs["left_out"] == {"before": {"in no step": 1, "in a step the other side lacks": 1},
                                   "after": {"in no step": 0, "in a step the other side lacks": 1}}
    s = diff_summary(d)
    assert s.index.tolist() == ["added", "removed", "slower", "faster", "unchanged"]
    assert s.loc["faster", ["keys", "device_change_ns"]].tolist() == [1, -20 * US]
    assert s.loc["slower"].sum() == 0
    assert int(s["device_change_ns"].sum()) == -20 * US == int(d["device_change_ns"].sum())
    ps = diff_summary(trace_diff(*pair, per_step=True))
    assert ps.loc[(3, "added"), "device_change_ns"] == 20 * US and ps.loc[(2, "removed"), "keys"] == 2


def test_tolerance_at_its_boundary(pair):
    """Step 2's mm_kernel: 50 → 30 µs is a 40 % change: at tolerance 0.4 (a change of at most
    0.4 × 50 µs = 20 µs) it is unchanged; just under, faster."""
    from kitlib.analyses.trace_diff import trace_diff
    d = trace_diff(*pair, per_step=True, tolerance=0.4).set_index(["step", "name"])
    assert d.loc[(2, "mm_kernel"), "change"] == "unchanged"
    assert d.loc[(2, "relu_kernel"), "change"] == "removed"       # added/removed whatever the tolerance
    d = trace_diff(*pair, per_step=True, tolerance=0.39).set_index(["step", "name"])
    assert d.loc[(2, "mm_kernel"), "change"] == "faster"
    with pytest.raises(KitError, match="tolerance"):
        trace_diff(*pair, tolerance=-0.1)


def test_operators_by_name_and_shape(pair):
    from kitlib.analyses.trace_diff import trace_diff
    d = trace_diff(*pair, "operators")
    got = {(r.name, r.input_shapes): (r.before_count, r.after_count, r.before_device_ns, r.after_device_ns,
                                      r.change) for r in d.itertuples()}
    assert got == {("aten::mm", str(MM)): (1, 1, 50 * US, 30 * US, "faster"),
                   ("aten::mm", str(MM2)): (1, 1, 40 * US, 40 * US, "unchanged"),
                   ("aten::relu", "[[2, 4]]"): (1, 0, 10 * US, 0, "removed"),
                   ("aten::gelu", "[[2, 4]]"): (0, 1, 0, 10 * US, "added"),
                   ("aten::copy_", "[[8], [8]]"): (1, 1, 20 * US, 20 * US, "unchanged")}
    assert d.attrs["matched_by"] == "name and input shapes" and d.attrs["note"] == ""
    ps = trace_diff(*pair, "operators", per_step=True).set_index(["step", "name", "input_shapes"])
    assert ps.loc[(2, "aten::copy_", "[[8], [8]]"), "change"] == "removed"
    assert ps.loc[(3, "aten::copy_", "[[8], [8]]"), ["after_device_ns", "change"]].tolist() == [20 * US, "added"]


def test_one_side_without_shapes_is_matched_by_name_and_says_so(tmp_path, pair):
    from kitlib.analyses.trace_diff import shapes_recorded, trace_diff
    after = _load(tmp_path, "after_noshapes.json", _after_json(shapes=False))
    assert not shapes_recorded(after) and shapes_recorded(pair[0])
    d = trace_diff(pair[0], after, "operators")
    assert d.attrs["matched_by"] == "name"
    assert "after_noshapes.json" in d.attrs["note"] and "no input shapes" in d.attrs["note"]
    got = {r.name: (r.before_count, r.after_count, r.before_device_ns, r.after_device_ns, r.change)
           for r in d.itertuples()}
    assert got["aten::mm"] == (2, 2, 90 * US, 70 * US, "faster") and set(d["input_shapes"]) == {""}


def test_no_common_step(tmp_path, pair):
    from kitlib.analyses.trace_diff import trace_diff
    later = _load(tmp_path, "later.json", _after_json(steps=(5, 6)))
    with pytest.raises(KitError, match=r"share no step.*steps 1, 2, 3.*steps 5, 6|steps 1, 2, 3.*steps 5, 6.*share no step"):
        trace_diff(pair[0], later)


def test_a_cpu_only_trace_is_told_what_the_diff_cannot_tell(pair):
    from kitlib.analyses.trace_diff import diff_events, trace_diff
    cpu = load_trace(REF / "ranks_balanced" / "rank0" / "trace.json.gz")
    assert not cpu.has_gpu
    for what in ("kernels", "operators"):
        with pytest.raises(KitError, match="CPU-only") as e:
            trace_diff(cpu, pair[1], what)
        msg = str(e.value)
        assert "ranks_balanced" in msg and "cannot tell" in msg and "device time" in msg
    with pytest.raises(KitError, match="CPU-only"):
        diff_events(cpu)


def test_different_kinds_and_bad_arguments(pair):
    from kitlib.analyses.trace_diff import diff_events, diff_summary, trace_diff
    from kitlib.readers.bundle import open_capture
    nsys = open_capture("nsys_8step").nsys
    with pytest.raises(KitError, match="torch.profiler trace.*Nsight Systems export.*same kind"):
        trace_diff(pair[0], nsys)
    with pytest.raises(KitError, match="no operators"):
        trace_diff(nsys, nsys, "operators")
    with pytest.raises(KitError, match="what must be one of"):
        diff_events(pair[0], "kernel")
    with pytest.raises(KitError, match="expected a kitlib Trace"):
        trace_diff("before.json", pair[1])
    with pytest.raises(KitError, match="missing"):
        diff_summary(pair[0].ops)


def test_names_too_large_to_diff_are_refused_with_the_figures(tmp_path, pair, monkeypatch):
    """Issue 41: an operator diff of a trace whose names total 200 MB ran out of memory (the
    grouping, join and sort took about six times the names again). Now a recording whose
    distinct names and shape keys total more than MAX_NAME_CHARS is refused, the trace and
    the figures named. Here the cap is lowered to 1,000,000 characters and the before trace
    gets 2,000 operators with distinct names of 1,011 characters each."""
    from kitlib.analyses import trace_diff as td
    doc = _before_json()
    for i in range(2000):
        doc["traceEvents"].append(event("cpu_op", f"aten::op_{i:05d}_" + "x" * 1000, 1200 + 0.3 * i, 0.1))
    before = _load(tmp_path, "long_names.json", doc)
    names = {e["name"] for e in doc["traceEvents"] if e["cat"] == "cpu_op"}
    chars = sum(len(n) for n in names)
    assert td.trace_diff(before, pair[1], "operators").attrs["steps"] == [2, 3]   # below the kit's cap
    monkeypatch.setattr(td, "MAX_NAME_CHARS", 1_000_000)
    with pytest.raises(KitError) as info:
        td.trace_diff(before, pair[1], "operators")
    msg = str(info.value)
    print(msg, f"\nindependent: {len(names):,} distinct cpu_op names, {chars:,} characters (the JSON)")
    assert msg.startswith(f"{before.path}: its operators' {len(names):,} distinct names ({chars:,} characters)")
    assert "more than trace_diff compares (MAX_NAME_CHARS = 1,000,000" in msg
    assert len(td.trace_diff(*pair, "operators")) == 5            # small traces pass the lowered cap


# ---- the H200 pair, from the raw JSON --------------------------------------------------

GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}


def _raw_by_step(path):
    """``{(step, kind, name): [count, device_ns]}`` from the trace's raw events: each GPU event
    placed by its launch's start in ``[step start, step end)``, all in ns."""
    ev = raw_trace_events(path)
    steps = [(int(e["name"].split("#")[1]), round(e["ts"] * US), round((e["ts"] + e["dur"]) * US))
             for e in ev if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    launch = {e["args"]["correlation"]: round(e["ts"] * US) for e in ev
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    out = defaultdict(lambda: [0, 0])
    outside = 0
    for e in ev:
        kind = GPU_CATS.get(e.get("cat"))
        if kind is None:
            continue
        t = launch.get(e["args"].get("correlation"))
        step = next((n for n, a, b in steps if t is not None and a <= t < b), None)
        if step is None:
            outside += 1
            continue
        r = out[(step, kind, e["name"])]
        r[0] += 1
        r[1] += round(e["dur"] * US)
    return dict(out), outside, sorted(n for n, _, _ in steps)


@pytest.fixture(scope="module")
def h200():
    from kitlib.readers.bundle import open_capture
    return open_capture("profiler_5step").trace, open_capture("fixed_batch").trace


def test_h200_kernels_per_step_from_the_raw_json(h200):
    from kitlib.analyses.trace_diff import trace_diff
    before, nb_out, sb = _raw_by_step(REF / "profiler_5step" / "trace.json.gz")
    after, na_out, sa = _raw_by_step(REF / "fixed_batch" / "trace.json.gz")
    assert sb == sa == [2, 3, 4, 5, 6]
    # PROVENANCE.md: 78 GPU events of fixed_batch were launched before recording began
    assert (nb_out, na_out) == (0, 78)
    d = trace_diff(*h200, per_step=True)
    assert d.attrs["left_out"]["after"]["in no step"] == 78
    got = {(r.step, r.kind, r.name): (r.before_count, r.after_count, r.before_device_ns, r.after_device_ns)
           for r in d.itertuples()}
    want = {k: (*before.get(k, (0, 0))[:1], *after.get(k, (0, 0))[:1],
                before.get(k, (0, 0))[1], after.get(k, (0, 0))[1]) for k in set(before) | set(after)}
    assert got == want


def test_h200_the_loaders_copies_are_what_the_fixed_batch_removed(h200):
    """Overall, from the raw JSON: what is in profiler_5step's steps and not in fixed_batch's
    are the host-to-device copies (two a step: images and labels) and one kernel a step;
    nothing is added, and every other key keeps its count."""
    from kitlib.analyses.trace_diff import diff_summary, trace_diff
    before, _, _ = _raw_by_step(REF / "profiler_5step" / "trace.json.gz")
    after, _, _ = _raw_by_step(REF / "fixed_batch" / "trace.json.gz")

    def total(d):
        c = defaultdict(lambda: [0, 0])
        for (_, kind, name), (n, ns) in d.items():
            c[(kind, name)][0] += n
            c[(kind, name)][1] += ns
        return c
    tb, ta = total(before), total(after)
    removed = {k: v for k, v in tb.items() if k not in ta}
    assert not [k for k in ta if k not in tb]
    assert Counter(k[0] for k in removed) == {"memcpy": 1, "kernel": 1}
    assert {k[1][:11]: v[0] for k, v in removed.items()} == {"Memcpy HtoD": 10, "void at::na": 5}
    assert all(tb[k][0] == ta[k][0] for k in tb if k in ta)
    d = trace_diff(*h200)
    s = diff_summary(d)
    assert s.loc["removed", "keys"] == 2 and s.loc["added", "keys"] == 0
    assert s.loc["removed", "device_change_ns"] == -sum(v[1] for v in removed.values())
    assert int(d["count_change"].abs().sum()) == 15
    top = d.iloc[0]
    assert top["name"].startswith("Memcpy HtoD") and top["device_change_ns"] == -removed[("memcpy", top["name"])][1]


def test_h200_operators_match_by_shape(h200):
    """The operators that went with the copies: every aten::copy_ of the image batch
    [128, 3, 224, 224] is gone (the trace's own Input Dims, counted here)."""
    from kitlib.analyses.trace_diff import trace_diff
    d = trace_diff(*h200, "operators")
    assert d.attrs["matched_by"] == "name and input shapes"
    ev = raw_trace_events(REF / "profiler_5step" / "trace.json.gz")
    steps = [(round(e["ts"] * US), round((e["ts"] + e["dur"]) * US)) for e in ev
             if str(e.get("name", "")).startswith("ProfilerStep#")]
    img = [e for e in ev if e.get("cat") == "cpu_op" and e["name"] == "aten::copy_"
           and e["args"].get("Input Dims", [None])[0] == [128, 3, 224, 224]
           and any(a <= round(e["ts"] * US) < b for a, b in steps)]
    row = d[(d["name"] == "aten::copy_") & (d["input_shapes"] == "[[128, 3, 224, 224], [128, 3, 224, 224], []]")]
    assert len(row) == 1 and row["before_count"].item() == len(img) == 10
    assert row["after_count"].item() == 0 and row["change"].item() == "removed"


# ---- the Nsight pair, from the SQLite ----------------------------------------------------

def _sqlite_kernels_by_step(db):
    steps = sql_rows(db, "SELECT text, start, end FROM NVTX_EVENTS WHERE text LIKE 'torch_step%' "
                         "AND end IS NOT NULL ORDER BY start")
    numbered = [(int(t.split("#")[1]) if "#" in t else i, a, b) for i, (t, a, b) in enumerate(steps)]
    rows = sql_rows(db, "SELECT s.value, k.start, k.end, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                        "JOIN StringIds s ON s.id = k.demangledName "
                        "LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId")
    out = defaultdict(lambda: [0, 0])
    for name, a, b, launch in rows:
        step = next((n for n, s, e in numbered if launch is not None and s <= launch < e), None)
        if step is not None:
            out[(step, name)][0] += 1
            out[(step, name)][1] += b - a
    return dict(out), [n for n, _, _ in numbered]


def test_nsight_pair_kernels_from_the_sqlite():
    from kitlib.analyses.trace_diff import trace_diff
    from kitlib.readers.bundle import open_capture
    before, sb = _sqlite_kernels_by_step(REF / "nsys_8step" / "report.sqlite")
    after, sa = _sqlite_kernels_by_step(REF / "nsys_emit_nvtx" / "report.sqlite")
    assert sb == list(range(8)) and sa == [3, 4]
    d = trace_diff(open_capture("nsys_8step").nsys, open_capture("nsys_emit_nvtx").nsys, per_step=True)
    assert d.attrs["steps"] == [3, 4]
    k = d[d["kind"] == "kernel"]
    got = {(r.step, r.name): (r.before_count, r.after_count, r.before_device_ns, r.after_device_ns)
           for r in k.itertuples()}
    keys = {x for x in set(before) | set(after) if x[0] in (3, 4)}
    want = {x: (before.get(x, (0, 0))[0], after.get(x, (0, 0))[0], before.get(x, (0, 0))[1],
                after.get(x, (0, 0))[1]) for x in keys}
    assert got == want
    # the same change as the torch.profiler pair: the host-to-device copies are gone
    m = d[d["name"].str.contains("Host-to-Device")]
    assert len(m) == 2 and set(m["change"]) == {"removed"} and set(m["step"]) == {3, 4}


# ---- the operators' rows against op_events ------------------------------------------------

@pytest.mark.parametrize("source, rows, lifted", [
    ("profiler_5step", 13_475, 5),                          # H200, torch 2.x: 5 aten::div folded
    ("hta_2022-08_a100_rank3.json.gz", 39_030, 630),       # HTA's A100 sample: 1,476 folded, 630 with kernels
    ("kineto_2021-06_resnet50_v100.json.gz", 23_634, 6),   # Kineto 2021, V100
])
def test_operator_rows_are_op_events_rows(source, rows, lifted, ref_trace, public_trace):
    """diff_events' operators are read from the event tree without the whole op_events table
    (for speed at 10x, issue 28): every column equals what op_events gives, the step found
    here by plain comparison with the steps' [start, end), with and without shapes. Each
    recording has operators whose device time is lifted from a folded same-named child
    (the profiler's _remove_dup_nodes; no GPU event launched by the operator itself)."""
    import bisect

    import numpy as np
    import pandas as pd

    from kitlib.analyses.events import op_events
    from kitlib.analyses.trace_diff import diff_events
    tr = public_trace(source) if source.endswith(".gz") else ref_trace(source)
    ev = op_events(tr)
    ev = ev[ev["kind"] == "op"]
    assert int(((ev["device_self_ns"] > 0) & (ev["n_gpu_events"] == 0)).sum()) == lifted
    steps = tr.steps
    starts, ends, numbers = steps["start_ns"].tolist(), steps["end_ns"].tolist(), steps["step"].tolist()

    def step_of(t):
        i = bisect.bisect_right(starts, t) - 1
        return numbers[i] if i >= 0 and t < ends[i] else pd.NA
    for shapes in (True, False):
        want = pd.DataFrame({
            "step": pd.array([step_of(t) for t in ev["start_ns"].tolist()], dtype="Int64"),
            "kind": "op", "name": ev["name"].to_numpy(dtype=object),
            "input_shapes": ev["input_shapes"].to_numpy(dtype=object) if shapes else "",
            "device_ns": ev["device_self_ns"].to_numpy(dtype=np.int64),
            "start_ns": ev["start_ns"].to_numpy(dtype=np.int64)})
        want = want.sort_values("start_ns", kind="stable").reset_index(drop=True)
        got = diff_events(tr, "operators", shapes)
        assert len(got) == rows and int(got["device_ns"].sum()) > 0
        pd.testing.assert_frame_equal(got, want, check_exact=True)
