"""The trace reader and the operator -> launch -> GPU event chain, on real recordings."""
import gzip
import json

import pytest

from kitlib.analyses.chain import LINKS
from kitlib.analyses.chain import chain, first_op, launches_of, external_ids_trustworthy
from kitlib.readers.trace import load_trace

from conftest import PUBLIC, REF, ROOT
from support.events import event

ROOT_TESTS = ROOT / "tests"


def test_first_convolution_of_step2_to_the_nanosecond(ref_trace):
    tr = ref_trace("profiler_5step")
    row = first_op(tr, "aten::cudnn_convolution", step=2)
    op = tr.ops.loc[row]
    assert op["dur_ns"] == 184_909
    assert op["input_dims"][:2] == [[128, 3, 224, 224], [64, 3, 7, 7]]
    rows = launches_of(tr, row)
    assert rows["launch_name"].tolist() == ["cudaLaunchKernel", "cudaLaunchKernel", "cudaLaunchKernelExC"]
    assert rows["launch_dur_ns"].tolist() == [27_598, 6_971, 12_929]
    third = rows.iloc[2]
    assert third["gpu_dur_ns"] == 732_513
    assert third["gpu_name"].startswith("sm80_xmma_fprop_implicit_gemm")
    assert set(rows["link"]) == {"external_id"}
    # every launch lies inside the operator's host interval; each kernel starts after its launch
    assert (rows["launch_start_ns"] >= op["start_ns"]).all()
    assert (rows["launch_start_ns"] + rows["launch_dur_ns"] <= op["end_ns"]).all()
    assert (rows["gpu_start_ns"] > rows["launch_start_ns"]).all()


def test_durations_reproduce_the_tools_digits():
    raw = json.loads(gzip.decompress((REF / "profiler_5step" / "trace.json.gz").read_bytes()))
    tr = load_trace(REF / "profiler_5step" / "trace.json.gz")
    kern = [e for e in raw["traceEvents"] if e.get("cat") == "kernel"]
    # the printed digits, read as text, equal the integer ns
    want = sorted(int(round(float(repr(e["dur"])) * 1000)) for e in kern)
    assert sorted(tr.gpu[tr.gpu["kind"] == "kernel"]["dur_ns"].tolist()) == want
    first = min(kern, key=lambda e: e["ts"])
    ts_text = repr(first["ts"])
    whole, _, frac = ts_text.partition(".")
    assert tr.gpu[tr.gpu["kind"] == "kernel"]["start_ns"].min() == int(whole) * 1000 + int((frac + "000")[:3])


def test_table_counts_match_the_raw_events(ref_trace):
    tr = ref_trace("profiler_5step")
    raw = json.loads(gzip.decompress((REF / "profiler_5step" / "trace.json.gz").read_bytes()))
    cats = {}
    for e in raw["traceEvents"]:
        cats[e.get("cat")] = cats.get(e.get("cat"), 0) + 1
    assert len(tr.ops) == cats["cpu_op"] + cats["user_annotation"] + cats["python_function"]
    assert len(tr.launches) == cats["cuda_runtime"] + cats["cuda_driver"]
    assert len(tr.gpu) == cats["kernel"] + cats["gpu_memcpy"] + cats["gpu_memset"] + cats["gpu_user_annotation"]
    assert len(tr.memory) == 10_150
    assert len(tr.ops) + len(tr.launches) + len(tr.gpu) + len(tr.memory) + len(tr.other) \
        + sum(1 for e in raw["traceEvents"] if e.get("ph") == "M") == len(raw["traceEvents"])
    assert tr.steps["step"].tolist() == [2, 3, 4, 5, 6]
    assert tr.meta["devices"][0]["name"] == "NVIDIA H200"
    assert tr.meta["profiler_options"]["with_stack"] == 1


@pytest.mark.parametrize("name", ["profiler_5step", "cold_start_8step"])
def test_every_gpu_event_has_exactly_one_launch(ref_trace, name):
    tr = ref_trace(name)
    c = chain(tr)
    assert len(c) == len(tr.kernels) > 1000
    assert (c["launch_row"] >= 0).all()
    assert not c["correlation"].duplicated().any()
    assert not tr.launches["correlation"].dropna().duplicated().any()
    assert (c["link"] == "external_id").all()


def test_fixed_batch_reports_78_events_launched_before_recording(ref_trace):
    tr = ref_trace("fixed_batch")
    c = chain(tr)
    before = c[c["link"] == "launched_before_recording"]
    assert len(before) == 78
    # not dropped, not mislinked: they have no launch and no operator, and they are the
    # first GPU events of the window
    assert (before["launch_row"] == -1).all() and (before["op_row"] == -1).all()
    assert before["op_name"].isna().all()
    assert set(c.index[c["link"] == "launched_before_recording"]) == set(range(78))
    assert (c.loc[78:, "link"] == "external_id").all()


def test_2022_trace_links_kernels_to_operators_by_time_nesting(public_trace):
    tr = public_trace("hta_2022-08_a100_rank3.json.gz")
    ok, frac = external_ids_trustworthy(tr)
    assert not ok  # its launches' "External id" is a copy of their correlation id
    assert (tr.launches["external_id"] == tr.launches["correlation"]).all()
    c = chain(tr)
    assert (c["link"] == "time_nesting").all()
    assert c["op_name"].notna().all()
    # each linked operator really contains its launch, on the launching thread
    ops = tr.ops.loc[c["op_row"]]
    assert (ops["start_ns"].to_numpy() <= c["launch_start_ns"].to_numpy()).all()
    assert (ops["end_ns"].to_numpy() >= c["launch_start_ns"].to_numpy()).all()
    assert (ops["tid"].to_numpy() == c["launch_tid"].to_numpy()).all()
    gemm = c[c["gpu_name"].str.contains("gemm")]
    assert gemm["op_name"].str.startswith("aten::").mean() > 0.9


def test_time_nesting_agrees_with_external_ids_on_the_reference(ref_trace):
    tr = ref_trace("profiler_5step")
    a, b = chain(tr, method="external_id"), chain(tr, method="time_nesting")
    assert (a["op_row"].to_numpy() == b["op_row"].to_numpy()).all()


@pytest.mark.parametrize("name", sorted(p.name for p in PUBLIC.glob("*.json.gz")))
def test_every_public_trace_loads(public_trace, name):
    tr = public_trace(name)
    assert len(tr.ops) > 0
    c = chain(tr)
    assert len(c) == len(tr.kernels)
    if tr.has_gpu:
        assert c["op_name"].notna().mean() > 0.95


def test_legacy_2021_trace_normalised(public_trace):
    tr = public_trace("kineto_2021-06_resnet50_v100.json.gz")
    assert tr.meta["format"] == "kineto-legacy"
    assert tr.gpu["stream"].dropna().unique().tolist() == [7]  # from tid "stream 7"
    assert tr.ops["tid"].map(type).eq(int).all()  # tid "25738" -> 25738
    assert tr.ops["external_id"].notna().all()  # lower-case "external id"
    assert len(tr.memory) == 12_838
    assert tr.meta["base_time_ns"] == 0


def test_relative_time_base_and_triton_driver_launch(public_trace):
    tr = public_trace("tracelens_torch2.6_h100_bert_small.json.gz")
    assert tr.meta["base_time_ns"] > 1_600_000_000 * 10**9  # ns since the epoch
    tri = public_trace("hta_2024-10_triton_driver_launch.json.gz")
    c = chain(tri)
    assert c.loc[0, "launch_name"] == "cuLaunchKernel"
    assert c.loc[0, "gpu_name"] == "triton_poi_fused_add_cos_sin_0"
    cpu_only = public_trace("hta_2024-07_cpu_only.json.gz")
    assert not cpu_only.has_gpu and chain(cpu_only).empty


def test_links_are_documented():
    tr = load_trace(REF / "fixed_batch" / "trace.json.gz")
    assert set(chain(tr)["link"]) <= set(LINKS)


def test_chain_is_worked_out_once_per_trace_and_each_caller_gets_its_own_copy():
    # Lessons ask for the same trace's chain many times; chain() keeps it in the trace's
    # own cache. A caller changing its copy changes no one else's, each method is kept
    # apart, and a trace whose tables were replaced is worked out again.
    tr = load_trace(REF / "profiler_5step" / "trace.json.gz")     # its own object: changed below
    first = chain(tr)
    assert ("chain", "auto") in tr._cache
    first.loc[:, "op_name"] = "changed by a caller"
    again = chain(tr)
    assert (again["op_name"] != "changed by a caller").all() and again.equals(chain(tr))
    assert set(chain(tr, method="time_nesting")["link"]) == {"time_nesting"}
    assert set(chain(tr, method="external_id")["link"]) == {"external_id"}
    tr.launches = tr.launches.iloc[: len(tr.launches) // 2]       # half the launches
    fewer = chain(tr)
    assert (fewer["launch_row"] >= 0).sum() < (again["launch_row"] >= 0).sum()


def test_chain_is_worked_out_once_until_a_table_is_replaced(monkeypatch):
    """Counted: the second call of a method reads the memo; a replaced ops, launches or gpu
    table (a new object, even with equal contents) makes the next call work it out again."""
    from kitlib.analyses import chain as chain_mod
    tr = load_trace(REF / "profiler_5step" / "trace.json.gz")
    worked = []
    real = chain_mod._chain
    monkeypatch.setattr(chain_mod, "_chain", lambda t, m: worked.append(m) or real(t, m))
    a = chain(tr)
    b = chain(tr)
    assert worked == ["auto"] and a.equals(b) and a is not b
    chain(tr, "time_nesting")
    chain(tr, "time_nesting")
    assert worked == ["auto", "time_nesting"]
    for table in ("ops", "launches", "gpu"):
        setattr(tr, table, getattr(tr, table).copy())
        assert chain(tr).equals(a)
        chain(tr)
    assert worked == ["auto", "time_nesting", "auto", "auto", "auto"]
    with pytest.raises(ValueError) as info:
        chain(tr, "correlation")
    assert str(info.value) == "method must be 'auto', 'external_id' or 'time_nesting', not 'correlation'"


def test_first_op_and_launches_of_rules(ref_trace, tmp_path):
    """first_op: the earliest operator of that name, in the whole trace or inside one step
    (start_ns in [step start, step end): half-open, kitlib.model.window), with errors that name what is
    missing; launches_of: the chain's rows of one operator, launch_index first (1, 2, ...)."""
    from kitlib.analyses.chain import CHAIN_COLUMNS
    tr = ref_trace("profiler_5step")
    conv = tr.ops[tr.ops["name"] == "aten::cudnn_convolution"]
    st = tr.steps.set_index("step")
    assert first_op(tr, "aten::cudnn_convolution") == conv["start_ns"].idxmin() == first_op(tr, "aten::cudnn_convolution", step=2)
    in3 = conv[(conv["start_ns"] >= st.loc[3, "start_ns"]) & (conv["start_ns"] < st.loc[3, "end_ns"])]
    assert first_op(tr, "aten::cudnn_convolution", step=3) == in3["start_ns"].idxmin() != first_op(tr, "aten::cudnn_convolution")
    for args, message in [(("aten::cudnn_convolution", 9), "no ProfilerStep#9 in this trace (steps: [2, 3, 4, 5, 6])"),
                          (("aten::nope", 2), "no operator named 'aten::nope' in ProfilerStep#2"),
                          (("aten::nope", None), "no operator named 'aten::nope'")]:
        with pytest.raises(KeyError) as info:
            first_op(tr, *args)
        assert info.value.args == (message,)
    # the bounds, by hand: ProfilerStep#1 is [0, 100] µs; aten::a starts at its start, aten::b at its end
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
              {"ph": "X", "cat": "cpu_op", "name": "aten::a", "pid": 1, "tid": 1, "ts": 0, "dur": 5},
              {"ph": "X", "cat": "cpu_op", "name": "aten::b", "pid": 1, "tid": 1, "ts": 100, "dur": 0}]
    path = tmp_path / "bounds.json"
    path.write_text(json.dumps({"traceEvents": events}))
    hand = load_trace(path)
    assert hand.ops.loc[first_op(hand, "aten::a", step=1), "start_ns"] == 0
    with pytest.raises(KeyError):                     # at the step's end: not in it
        first_op(hand, "aten::b", step=1)
    rows = launches_of(tr, first_op(tr, "aten::cudnn_convolution", step=3))
    assert rows.columns.tolist() == ["launch_index"] + list(CHAIN_COLUMNS)
    assert rows["launch_index"].tolist() == [1, 2, 3] and rows.index.tolist() == [0, 1, 2]
    assert rows["launch_start_ns"].is_monotonic_increasing


def _ext_trace(tmp_path, name, ops, launches):
    """A hand-built trace: ops as (name, ts, dur, ext), launches as (ts, ext, corr, pid, tid)."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": ts, "dur": dur,
           "args": {"External id": ext}} for n, ts, dur, ext in ops]
    for ts, ext, corr, pid, tid in launches:
        args = {"External id": ext}
        if corr is not None:
            args["correlation"] = corr
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid,
                   "ts": ts, "dur": 1, "args": args})
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    return load_trace(path)


def test_external_ids_trustworthy_on_paper(tmp_path):
    """The verdict and the fraction, by hand. Operators a [0, 10], b [20, 30], c [40, 50],
    d [60, 70] µs on thread (1, 1), external ids 1-4. Launches naming them: at a's start
    and at b's last µs (inside: half-open [start, end), kitlib.model.window; one at b's end,
    30, would be outside), inside c on another thread, inside d in another process, after
    a's end (outside): 2 of 5 inside."""
    from kitlib.analyses.chain import external_ids_trustworthy
    ops = [("aten::a", 0, 10, 1), ("aten::b", 20, 10, 2), ("aten::c", 40, 10, 3), ("aten::d", 60, 10, 4)]
    five = _ext_trace(tmp_path, "five", ops, [(0, 1, 101, 1, 1), (29, 2, 102, 1, 1), (45, 3, 103, 1, 2),
                                              (65, 4, 104, 2, 1), (12, 1, 105, 1, 1)])
    assert external_ids_trustworthy(five) == (False, 0.4)
    assert external_ids_trustworthy(five, min_fraction=0.4) == (True, 0.4)        # at the threshold
    # exactly half the launches carry their correlation id as external id (one has no
    # correlation: not a copy): not yet "a copy of the correlation"
    half = _ext_trace(tmp_path, "half", ops[:2], [(5, 1, 1, 1, 1), (25, 2, 7, 1, 1), (26, 2, None, 1, 1),
                                                  (27, 2, 2, 1, 1)])
    assert external_ids_trustworthy(half) == (True, 1.0)
    # ids that name no operator; no launches at all: nothing to trust
    none = _ext_trace(tmp_path, "none", ops[:1], [(5, 9, 101, 1, 1)])
    assert external_ids_trustworthy(none) == (False, 0.0)
    assert external_ids_trustworthy(load_trace(ROOT_TESTS / "data" / "oracle-cpu" / "resnet18" / "trace.json.gz")) \
        == (False, 0.0)


@pytest.mark.parametrize("path,verdict", [
    (REF / "profiler_5step" / "trace.json.gz", (True, 1.0)),
    (REF / "public-traces" / "hta_2024-03_nccl_sampled_rank0.json.gz", (False, 0.0)),
    (PUBLIC / "hta_2022-08_a100_rank3.json.gz", (False, 0.0)),
    (PUBLIC / "kineto_2021-06_resnet50_v100.json.gz", (True, 1.0))])
def test_external_ids_trustworthy_on_recordings(path, verdict):
    """Kit recordings link by external id; the 2022 and NCCL public traces copy the
    correlation id into it (Kineto before 2024), so their verdict is no with fraction 0."""
    from kitlib.analyses.chain import external_ids_trustworthy
    assert external_ids_trustworthy(load_trace(path)) == verdict


def _chain_trace(tmp_path, name, launches, orphans=()):
    """Operators a [0, 10] and b [20, 30] µs on thread (1, 1), external ids 1 and 2, and one
    kernel per launch; launches as (ts, external id, correlation); ``orphans``: correlation
    ids of kernels with no launch in the trace."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": n, "pid": 1, "tid": 1, "ts": ts, "dur": 10,
           "args": {"External id": ext}} for n, ts, ext in (("aten::a", 0, 1), ("aten::b", 20, 2))]
    for i, (ts, ext, corr) in enumerate(launches):
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": ts,
                   "dur": 0, "args": {"External id": ext, "correlation": corr}})
        ev.append({"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 100 + 10 * i, "dur": 5,
                   "args": {"correlation": corr, "device": 0, "stream": 7, "External id": ext}})
    for corr in orphans:
        ev.append({"ph": "X", "cat": "kernel", "name": f"orphan{corr}", "pid": 0, "tid": 7, "ts": 500 + corr,
                   "dur": 5, "args": {"correlation": corr, "device": 0, "stream": 7}})
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    return load_trace(path)


def test_chain_links_on_paper(tmp_path):
    """Which operator each kernel gets, and how (the ``link`` column), worked by hand.
    By external id: a launch at a's first µs (a is row 0) or at b's last µs lies inside the
    operator its id names (b [20, 30) holds 29, not 30: half-open, kitlib.model.window); one naming b from inside a is a stray, linked by time instead;
    one after b's end lies in no operator. With "auto", external ids are used only when
    at least 90 % of the launches lie inside what they name: here half do, so time decides."""
    tr = _chain_trace(tmp_path, "links", [(0, 1, 101), (29, 2, 102), (5, 2, 103), (31, 2, 104)], orphans=(50, 999))
    a, b = (int(tr.ops.index[tr.ops["name"] == n][0]) for n in ("aten::a", "aten::b"))
    assert a == 0
    by_ext = chain(tr, method="external_id").set_index("gpu_name")
    assert by_ext.loc[["k0", "k1", "k2", "k3"], "op_row"].tolist() == [a, b, a, -1]
    assert by_ext.loc[["k0", "k1", "k2"], "op_name"].tolist() == ["aten::a", "aten::b", "aten::a"]
    assert by_ext.loc["k3", "op_name"] is None or by_ext.loc["k3", "op_name"] != by_ext.loc["k3", "op_name"]
    # a kernel whose correlation id is older than every launch was launched before recording
    assert by_ext.loc[["orphan50", "orphan999"], "link"].tolist() == ["launched_before_recording", "no_launch"]
    assert by_ext.loc[["orphan50", "orphan999"], ["op_row", "launch_row"]].values.tolist() == [[-1, -1], [-1, -1]]
    assert by_ext.loc[["k0", "k1", "k2", "k3"], "link"].tolist() == ["external_id", "external_id", "time_nesting",
                                                                    "no_operator"]
    assert external_ids_trustworthy(tr) == (False, 0.5)
    # the stray is the trace's first launch (position 0 of trace.launches): still time nesting
    first = _chain_trace(tmp_path, "stray_first", [(0, 2, 101), (25, 2, 102)])
    assert first.launches["correlation"].tolist()[0] == 101
    got = chain(first, method="external_id").set_index("gpu_name")
    assert got.loc[["k0", "k1"], "op_row"].tolist() == [a, b]
    assert got.loc[["k0", "k1"], "link"].tolist() == ["time_nesting", "external_id"]
    auto = chain(tr).set_index("gpu_name")
    assert auto.loc[["k0", "k1", "k2"], "op_name"].tolist() == ["aten::a", "aten::b", "aten::a"]
    assert auto.loc[["k0", "k1", "k2", "k3"], "op_row"].tolist() == [a, b, a, -1]
    assert auto.loc[["k0", "k1", "k2", "k3"], "link"].tolist() == ["time_nesting"] * 3 + ["no_operator"]


def test_chain_rows_on_paper_where_launches_are_odd(tmp_path):
    """Worked by hand (a [0, 10] µs is operator row 0, b [20, 30] row 1):
    - a launch inside b naming a (row 0) by external id is a stray too: time nesting gives b;
    - launch_row holds trace.launches' row labels, also when they are not 0..n-1;
    - two launches with one correlation id: one row per GPU event, linked to the first;
    - GPU events and no launch at all: no operator (-1, int64) for any of them."""
    import pandas as pd
    tr = _chain_trace(tmp_path, "stray_names_row0", [(25, 1, 101), (5, 1, 102)])
    got = chain(tr, method="external_id").set_index("gpu_name")
    assert got.loc[["k0", "k1"], "op_row"].tolist() == [1, 0]
    assert got.loc[["k0", "k1"], "link"].tolist() == ["time_nesting", "external_id"]

    tr = _chain_trace(tmp_path, "labels", [(0, 1, 101), (25, 2, 102), (5, 1, 103)])
    assert tr.launches["correlation"].tolist() == [101, 103, 102]      # in start order
    tr.launches = tr.launches.set_axis([10, 20, 30])                   # labels, not positions
    for method in ("external_id", "time_nesting"):
        got = chain(tr, method=method).set_index("gpu_name")
        assert got.loc[["k0", "k1", "k2"], "launch_row"].tolist() == [10, 30, 20]
        assert got.loc[["k0", "k1", "k2"], "op_row"].tolist() == [0, 1, 0]
        assert got.loc[["k0", "k1", "k2"], "correlation"].tolist() == [101, 102, 103]

    tr = _chain_trace(tmp_path, "twice", [(0, 1, 101), (25, 2, 101)])   # k0 and k1 share correlation 101
    got = chain(tr, method="external_id")
    assert len(got) == 2 and got["gpu_name"].tolist() == ["k0", "k1"]
    assert got["launch_row"].tolist() == [0, 0] and got["op_row"].tolist() == [0, 0]

    tr = _chain_trace(tmp_path, "no_launches", [(0, 1, 101)])
    tr.launches = tr.launches.iloc[:0]
    for method in ("auto", "external_id", "time_nesting"):
        got = chain(tr, method=method)
        assert got["op_row"].tolist() == [-1] and got["launch_row"].tolist() == [-1]
        assert str(got["op_row"].dtype) == "int64" and got["op_name"].isna().all()
        assert pd.isna(got["launch_name"]).all()


# ---- survivors of the 1 December mutation run

def _impossible_trace(tmp_path, name, whole_us=False):
    """A hand-built trace for impossible_gpu_events (times in µs as Kineto writes them):
    operator aten::mm [0.5, 200.5] µs on thread (1, 1) makes launches L1..L8 (1 µs each), each of
    one GPU event with the same correlation id; two kernels have no launch (ids 98, 99).
    With ``whole_us`` the operator starts at 0 µs, so every time is a whole µs."""
    x = event
    ev = [x("cpu_op", "aten::mm", 0 if whole_us else 0.5, 200, **{"External id": 1})]
    gpu = [  # (name, category, start µs, dur µs, correlation, launch start µs or None)
        ("k_ok", "kernel", 20, 5, 1, 10),              # after its launch: fine
        ("k_at_launch", "kernel", 30, 5, 2, 30),       # starts the very ns its launch starts: fine
        ("k_early", "kernel", 39.999, 5, 3, 40),       # 1 ns before its launch
        ("k_zero", "kernel", 60, 0, 4, 50),            # a kernel of 0 ns
        ("k_one_ns", "kernel", 80, 0.001, 5, 70),      # 1 ns: short, not impossible
        ("copy_zero", "gpu_memcpy", 100, 0, 6, 90),    # a copy of 0 ns: only kernels are checked
        ("k_at_0", "kernel", 0, 5, 7, 110),            # at 0 ns, and before its launch
        ("k_early_zero", "kernel", 119.5, 0, 8, 120),  # before its launch and 0 ns long
        ("k_1ns", "kernel", 0.001, 5, 99, None),       # at 1 ns, no launch
        ("k_neg", "kernel", -1, 5, 98, None)]          # before 0, no launch
    if whole_us:
        gpu = [g for g in gpu if g[0] in ("k_ok", "k_zero", "k_at_0")]
    for n, cat, ts, dur, corr, launch in gpu:
        if launch is not None:
            ev.append(x("cuda_runtime", "cudaLaunchKernel", launch, 1, correlation=corr, **{"External id": 1}))
        ev.append(x(cat, n, ts, dur, pid=0, tid=7, correlation=corr, device=0, stream=7))
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    return load_trace(path)


def test_impossible_gpu_events_on_paper(tmp_path):
    """The three reasons and their bounds, worked by hand from _impossible_trace (µs -> ns):
    start_at_zero at a start <= 0 ns (k_neg at -1000, k_at_0 at 0; not k_1ns at 1 ns), which
    wins over before_launch (k_at_0 starts before its launch at 110000); before_launch when
    the GPU start is strictly before the launch's (k_early 39999 < 40000; not k_at_launch,
    30000 = 30000; not the unlaunched k_1ns); zero_duration for a kernel of 0 ns (k_zero,
    and k_early_zero, which is also early: the later rule wins) but not of 1 ns (k_one_ns),
    nor a 0 ns copy, nor in a trace timed in whole µs. Rows in trace.gpu order (by start)."""
    from kitlib.analyses.chain import impossible_gpu_events
    tr = _impossible_trace(tmp_path, "ns")
    assert tr.meta["time_resolution_ns"] == 1
    bad = impossible_gpu_events(tr)
    assert bad.columns.tolist() == ["gpu_row", "name", "kind", "start_ns", "dur_ns", "reason"]
    assert bad.values.tolist() == [
        [int(tr.gpu.index[tr.gpu["name"] == n][0]), n, "kernel", start, dur, reason]
        for n, start, dur, reason in [("k_neg", -1000, 5000, "start_at_zero"), ("k_at_0", 0, 5000, "start_at_zero"),
                                      ("k_early", 39_999, 5000, "before_launch"), ("k_zero", 60_000, 0, "zero_duration"),
                                      ("k_early_zero", 119_500, 0, "zero_duration")]]
    assert tr.gpu.loc[bad["gpu_row"], "name"].tolist() == bad["name"].tolist()
    # a chain passed in is the one used: there k_ok's launch starts after the kernel
    given = chain(tr)
    given.loc[given["gpu_name"] == "k_ok", "launch_start_ns"] = 20_001
    got = impossible_gpu_events(tr, chain_df=given)
    assert got.set_index("name").loc["k_ok", "reason"] == "before_launch" and len(got) == 6
    # in whole µs (PyTorch 1.9) a short kernel rounds to 0: not flagged; the others still are
    whole = _impossible_trace(tmp_path, "us", whole_us=True)
    assert whole.meta["time_resolution_ns"] == 1000
    assert impossible_gpu_events(whole)[["name", "reason"]].values.tolist() == [["k_at_0", "start_at_zero"]]


def test_innermost_op_at_on_paper(tmp_path):
    """innermost_op_at, worked by hand: on thread (pid 1, tid 1) operators outer [0, 100] µs
    (row 3 in trace.ops, by start, longest first) and inner [10, 20] (row 4), the
    record_function label [60, 70] (row 6) and two Python frames, [0, 200] (row 2) and
    [30, 40] (row 5), which a launch never belongs to; aten::other [0, 300] on (1, 2) (row 0)
    and aten::elsewhere [0, 300] on (2, 1) (row 1): a thread is its pid AND its tid."""
    import numpy as np
    from kitlib.analyses.chain import innermost_op_at

    x = event
    ev = [x("cpu_op", "aten::outer", 0, 100), x("cpu_op", "aten::inner", 10, 10),
          x("python_function", "model.py(12): forward", 0, 200), x("python_function", "nn/module.py(5): _call", 30, 10),
          x("user_annotation", "label", 60, 10),
          x("cpu_op", "aten::other", 0, 300, tid=2), x("cpu_op", "aten::elsewhere", 0, 300, pid=2)]
    path = tmp_path / "threads.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    tr = load_trace(path)
    assert tr.ops["name"].tolist() == ["aten::other", "aten::elsewhere", "model.py(12): forward", "aten::outer",
                                       "aten::inner", "nn/module.py(5): _call", "label"]
    got = innermost_op_at(tr, 1, 1, [150_000, 5_000, 15_000, 35_000, 65_000, 250_000])
    assert got.tolist() == [-1, 3, 4, 3, 6, -1] and got.dtype == np.int64
    assert innermost_op_at(tr, 1, 2, [5_000, 150_000]).tolist() == [0, 0]
    assert innermost_op_at(tr, 2, 1, [5_000]).tolist() == [1]
    assert innermost_op_at(tr, 2, 2, [5_000]).tolist() == [-1]
