"""Collectives matched across ranks by identity and checked by their end times, and the
communication each rank's step leaves exposed (issue 29, part A).

Hand-built two-rank NCCL traces worked out on paper, then the public NCCL pair and the
kit's two Gloo runs, every figure recomputed here from the raw JSON without kitlib.
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import statistics
from pathlib import Path

import pandas as pd
import pytest

from kitlib.analyses import collectives as coll
from kitlib.analyses.stragglers import step_budget
from kitlib.readers.ranks import load_traces

from conftest import merged_length
from support.collectives import paper_ranks

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "data" / "reference"
NCCL = REF / "public-traces"


# --------------------------------------------------------------------------- the pair on paper (support.collectives.PAPER)
@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    return paper_ranks(tmp_path_factory.mktemp("paper"))


def test_the_reader_keeps_record_param_comms_identity(paper):
    ops = paper.traces[1].ops
    got = ops.loc[ops["name"] == "record_param_comms", "comm_args"].tolist()
    assert [a["Seq"] for a in got] == [6, 7, 8]
    assert got[0] == {"Collective name": "allreduce", "Process Group Name": "0", "Seq": 6, "In msg nelems": 4096,
                      "Out msg nelems": 4096, "Group size": 2}
    assert ops.loc[ops["name"] != "record_param_comms", "comm_args"].isna().all()


def test_calls_matched_by_process_group_and_seq_and_checked_by_their_ends(paper):
    calls = coll.collectives(paper)
    assert set(calls["identity"]) == {"process group + seq"} and set(calls["size"]) == {"in 4096 out 4096"}
    assert calls["call"].tolist() == ["nccl:all_reduce (pg 0, seq 7)", "nccl:all_reduce (pg 0, seq 8)",
                                      "nccl:all_reduce (pg 0, seq 6)", "nccl:all_reduce (pg 0, seq 7)",
                                      "nccl:all_reduce (pg 0, seq 8)"]
    m = coll.collective_matches(paper, calls)
    assert m.columns.tolist() == coll.MATCH_COLUMNS
    assert [tuple(x) for x in m[["call", "ranks", "missing", "end_spread_ns", "verified"]].itertuples(index=False)] == [
        ("nccl:all_reduce (pg 0, seq 6)", (1,), (0,), 0, False),
        ("nccl:all_reduce (pg 0, seq 7)", (0, 1), (), 0, True),
        ("nccl:all_reduce (pg 0, seq 8)", (0, 1), (), 14_000_000, False)]
    assert m["reason"].tolist() == [
        "not found on rank 0: that rank's trace lacks it (subsampled or cut) or issued a different call", "",
        "ends 14.0 ms later on rank 1 than on rank 0, more than the 1 ms one call allows: not the same call"]
    s = coll.match_summary(paper, calls)
    assert s == {"calls": 3, "verified": 1, "missing": 1, "ends_apart": 1, "unchecked": 0, "end_offset_ms": {1: 0.0},
                 "max_end_spread_ms": 0.0}
    # waits and lateness from seq 7 alone: rank 0 waited 4000 - 1500 µs, then 1000 µs of transfer
    w = coll.collective_waits(paper, calls)
    assert w.attrs == {"unmatched": 3}
    assert [tuple(x) for x in w[["rank", "call", "wait_ns", "transfer_ns", "last_rank"]].itertuples(index=False)] == [
        (0, "nccl:all_reduce (pg 0, seq 7)", 2_500_000, 1_000_000, 1),
        (1, "nccl:all_reduce (pg 0, seq 7)", 0, 1_000_000, 1)]
    st = coll.straggler_table(paper, calls)
    assert st[["call", "last_rank", "late_by_ns"]].values.tolist() == [["nccl:all_reduce (pg 0, seq 7)", 1, 2_500_000]]


def test_order_alone_pairs_the_wrong_calls_and_the_end_check_refuses_them(paper):
    """The same traces without record_param_comms' identity: the k-th all-reduce of each
    rank is paired, which is seq 7 with seq 6 and seq 8 with seq 7; their ends are 4.4 and
    2.0 ms apart, so neither is used, and no lateness comes from them."""
    bare = dataclasses.replace(paper, traces={r: dataclasses.replace(t, ops=t.ops.assign(comm_args=None))
                                              for r, t in paper.traces.items()}, _cache={})
    calls = coll.collectives(bare)
    assert set(calls["identity"]) == {"name + order"}
    m = coll.collective_matches(bare, calls)
    assert m[["call", "end_spread_ns", "verified"]].values.tolist() == [
        ["nccl:all_reduce#0", 4_400_000, False], ["nccl:all_reduce#1", 2_000_000, False],
        ["nccl:all_reduce#2", 0, False]]
    assert coll.collective_waits(bare, calls).empty and coll.straggler_table(bare, calls).empty


def test_exposed_communication_worked_out_on_paper(paper):
    """Rank 0: C = [1.5, 5) ∪ [6, 7) ms = 4.5 ms; compute P = [1, 3): hidden [1.5, 3) = 1.5,
    exposed 3.0 = waiting [3, 4) + transfer [4, 5) + unmatched seq 8 [6, 7); the hidden part
    is all waiting (the kernel spun beside compute); tail 7 - 3 = 4.0. Rank 1: C = [0.2, 0.6)
    ∪ [4, 5) ∪ [20, 21) = 2.4 ms, none beside its compute [1, 4); transfer 1.0, unmatched
    0.4 + 1.0 = 1.4; tail 21 - 4 = 17.0."""
    e = coll.exposed_communication(paper)
    assert e.columns.tolist() == coll.EXPOSED_COLUMNS
    want = [[0, 1, 2, 4.5, 1.5, 3.0, 1.0, 1.0, 1.0, 1.5, 0.0, 4.0],
            [1, 1, 3, 2.4, 0.0, 2.4, 0.0, 1.0, 1.4, 0.0, 0.0, 17.0]]
    for got, row in zip(e.drop(columns=["compute_from"]).values.tolist(), want):
        assert got == pytest.approx(row, abs=1e-9)
    assert set(e["compute_from"]) == {"GPU kernels"}
    p = coll.communication_pieces(paper)
    assert p.columns.tolist() == coll.PIECE_COLUMNS
    r0 = p[p["rank"] == 0]
    assert [(a / 1e6, b / 1e6, part, bc) for a, b, part, bc in
            r0[["start_ns", "end_ns", "part", "beside_compute"]].itertuples(index=False)] == [
        (1.0, 1.5, "compute", True), (1.5, 3.0, "wait", True),
        (3.0, 4.0, "wait", False), (4.0, 5.0, "transfer", False), (6.0, 7.0, "unmatched", False)]


# --------------------------------------------------------------------------- the public NCCL pair
def _raw_kernels(rank):
    doc = json.loads(gzip.decompress((NCCL / f"hta_2024-03_nccl_sampled_rank{rank}.json.gz").read_bytes()))
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    steps = [(e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1])) for e in ev
             if str(e.get("name", "")).startswith("ProfilerStep#")]
    k = [e for e in ev if e.get("cat") == "kernel"]
    comm = sorted((e["ts"], e["ts"] + e["dur"]) for e in k if e["name"].startswith("ncclKernel_"))
    comp = [(e["ts"], e["ts"] + e["dur"]) for e in k if not e["name"].startswith("ncclKernel_")]
    return steps, comm, comp


def test_public_pair_tolerance_from_the_raw_kernels():
    """END_TOLERANCE_NS["device"] (1 ms) against the raw kernels: the four calls that are
    one call by name, size and order end within 0.332 ms on the two ranks; pairing by the
    order of each name alone (the kit's old rule) gives six pairs ending 63 to 254 ms
    apart."""
    calls = coll.collectives(load_traces(NCCL, partial=True))
    ends = {r: calls[calls["rank"] == r] for r in (0, 1)}
    by_order = []
    for name in sorted(set(calls["name"])):
        a = ends[0][ends[0]["name"] == name].sort_values("start_ns")["end_ns"].tolist()
        b = ends[1][ends[1]["name"] == name].sort_values("start_ns")["end_ns"].tolist()
        by_order += [abs(x - y) / 1e6 for x, y in zip(a, b)]
    wrong = sorted(d for d in by_order if d > 1)
    right = sorted(d for d in by_order if d <= 1)
    assert len(wrong) == 6 and round(wrong[0], 1) == 62.8 and round(wrong[-1], 1) == 253.5
    assert len(right) == 4 and round(right[-1], 3) == 0.332
    assert right[-1] * 3 < coll.END_TOLERANCE_NS["device"] / 1e6 < wrong[0] / 60


def test_public_pair_reports_its_unmatched_calls_and_takes_no_lateness_from_them():
    """Rank 1 is later at every verified call: 3.302, 0.084, 22.328 and 1.292 ms (the raw
    kernels' starts); the 9 other calls are reported (6 on one rank only, 3 whose ends lie
    600-616 ms apart) and appear in no lateness or wait figure. Pairing the raw kernels by
    their ends alone finds one pair more, an all-to-all (rank 1 later by 4.859 ms) whose
    message size differs between the ranks (uneven splits: 419,430,400 and 339,738,624
    elements in nccl:all_to_all's Input Dims), so its identity cannot match it: it is
    reported as missing on each rank, not guessed."""
    rt = load_traces(NCCL, partial=True)
    m = coll.collective_matches(rt)
    bad = m[~m["verified"]]
    assert len(m) == 13 and len(bad) == 9
    assert sorted(bad["reason"].str.split(":").str[0].str.split(" ms").str[0]) == sorted(
        ["not found on rank 0"] * 3 + ["not found on rank 1"] * 3
        + ["ends 600.1", "ends 612.9", "ends 616.0"])
    st = coll.straggler_table(rt)
    assert set(st["call"]) == set(m.loc[m["verified"], "call"]) and not set(st["call"]) & set(bad["call"])
    assert st["last_rank"].tolist() == [1, 1, 1, 1]
    # the same lateness from the raw kernels: the pairs whose ends agree within 1 ms
    _, c0, _ = _raw_kernels(0)
    _, c1, _ = _raw_kernels(1)
    late = sorted(round(b[0] - a[0]) / 1e3 for a in c0 for b in c1 if abs(a[1] - b[1]) <= 1000)
    assert late == [0.084, 1.292, 3.302, 4.859, 22.328]
    assert sorted(st["late_by_ns"] / 1e6) == [0.084, 1.292, 3.302, 22.328]
    a2a = m[m["call"].isin(["nccl:all_to_all [[419430400]]#1", "nccl:all_to_all [[339738624]]#0"])]
    assert a2a["missing"].tolist() == [(0,), (1,)] or a2a["missing"].tolist() == [(1,), (0,)]
    w = coll.collective_waits(rt)
    assert set(w["call"]) <= set(m.loc[m["verified"], "call"]) and w.attrs["unmatched"] == 12


def test_public_pair_exposed_communication_from_the_raw_kernels():
    """Per rank and step: the NCCL kernels starting in the step (C) against every other
    kernel (P): exposed = |C| - |C ∩ P|, in µs from the raw JSON; and the split adds up."""
    e = coll.exposed_communication(load_traces(NCCL, partial=True)).set_index(["rank", "step"])
    for r in (0, 1):
        steps, comm, comp = _raw_kernels(r)
        for a, b, n in steps:
            c = [x for x in comm if a <= x[0] < b]
            if not c:
                continue
            hidden = merged_length(c) + merged_length(comp) - merged_length(c + comp)
            row = e.loc[(r, n)]
            assert row["comm_ms"] == pytest.approx(merged_length(c) / 1e3, abs=1e-6)
            assert row["exposed_ms"] == pytest.approx((merged_length(c) - hidden) / 1e3, abs=1e-6)
            assert row["exposed_ms"] == pytest.approx(row["exposed_wait_ms"] + row["exposed_transfer_ms"]
                                                      + row["exposed_unmatched_ms"], abs=1e-9)
    assert (e["exposed_ms"] / e["comm_ms"]).round(2).tolist() == [0.88, 0.82, 0.8, 0.8]


# --------------------------------------------------------------------------- the kit's Gloo pairs
@pytest.mark.parametrize("run,spread_ms", [("ranks_straggler", 20.557), ("ranks_balanced", 11.322)])
def test_gloo_calls_end_within_the_host_tolerance(run, spread_ms):
    """Complete traces, every gloo:* call on both ranks in the same order: the k-th calls
    end at most 20.6 ms apart (raw ts + dur), under the 25 ms host tolerance, so every
    call is verified and the Gloo figures stand."""
    ends = {}
    for r in (0, 1):
        doc = json.loads(gzip.decompress((REF / run / f"rank{r}" / "trace.json.gz").read_bytes()))
        ev = sorted((e for e in doc["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("gloo:")),
                    key=lambda e: e["ts"])
        seen = {}
        for e in ev:
            k = seen[e["name"]] = seen.get(e["name"], -1) + 1
            ends[(r, e["name"], k)] = e["ts"] + e["dur"]
    diffs = [(ends[(1, n, k)] - v) / 1e3 for (r, n, k), v in ends.items() if r == 0]
    assert round(max(map(abs, diffs)), 3) == spread_ms < coll.END_TOLERANCE_NS["host"] / 1e6
    s = coll.match_summary(load_traces(run))
    assert (s["calls"], s["verified"]) == (21, 21) and round(s["max_end_spread_ms"], 3) == spread_ms
    # the clock check: the median end offset is a fraction of a ms (one host, one clock)
    assert s["end_offset_ms"][1] == pytest.approx(statistics.median(diffs), abs=1e-3) and abs(statistics.median(diffs)) < 1


def test_gloo_exposed_communication_against_host_operators():
    """A CPU run has no kernels: compute is every operator on the step's own thread (the
    one its ProfilerStep ranges are on), collective operators left out. Rank 0 of the
    straggler run, per step, from the raw JSON: exposed = |C| - |C ∩ P|; and the step
    budget's exposed time is the same figure (one definition of compute)."""
    rt = load_traces("ranks_straggler")
    e = coll.exposed_communication(rt)
    assert set(e["compute_from"]) == {coll.HOST_COMPUTE}
    doc = json.loads(gzip.decompress((REF / "ranks_straggler" / "rank0" / "trace.json.gz").read_bytes()))
    ev = [x for x in doc["traceEvents"] if x.get("ph") == "X"]
    gloo = [x for x in ev if x["name"].startswith("gloo:")]
    main = {x["tid"] for x in ev if x["name"].startswith("ProfilerStep#")}
    assert len(main) == 1 and not main & {x["tid"] for x in gloo}
    comm = ("record_param_comms", "c10d::", "nccl:", "gloo:")
    comp = [(x["ts"], x["ts"] + x["dur"]) for x in ev if x.get("cat") == "cpu_op"
            and x["tid"] in main and not x["name"].startswith(comm)]
    for a, b, n in [(x["ts"], x["ts"] + x["dur"], int(x["name"].split("#")[1])) for x in ev
                    if x["name"].startswith("ProfilerStep#")]:
        c = [(x["ts"], x["ts"] + x["dur"]) for x in gloo if a <= x["ts"] < b]
        hidden = merged_length(c) + merged_length(comp) - merged_length(c + comp)
        row = e[(e["rank"] == 0) & (e["step"] == n)].iloc[0]
        assert row["exposed_ms"] == pytest.approx((merged_length(c) - hidden) / 1e3, abs=1e-3)
    b = step_budget(rt)
    both = e.merge(b, on=["rank", "step"])
    assert len(both) == len(e) == 6
    assert (both["exposed_ms"] - both["exposed_ns"] / 1e6).abs().max() < 1e-6


@pytest.mark.parametrize("folder", [REF / "ranks_balanced", REF / "ranks_straggler", NCCL,
                                    ROOT / "data" / "clinic" / "cpu" / "case_b" / "before",
                                    ROOT / "data" / "clinic" / "cpu" / "case_b" / "after"])
def test_one_definition_of_exposed_communication(folder):
    """exposed_communication's comm, hidden and exposed time and step_budget's
    in_collectives_ns and exposed_ns are exposed_by_step's, to the ns, on every multi-rank
    recording the kit ships (step_budget refuses the GPU pair; 0 in a step without a call)."""
    rt = load_traces(folder, partial=folder == NCCL)
    one = coll.exposed_by_step(rt)
    assert one.columns.tolist() == coll.EXPOSED_NS_COLUMNS and (one.dtypes == "int64").all()
    assert (one["exposed_ns"] <= one["comm_ns"]).all() and len(one)
    e = coll.exposed_communication(rt)
    assert e[["rank", "step", "calls"]].equals(one[["rank", "step", "calls"]])
    assert e["comm_ms"].tolist() == (one["comm_ns"] / 1e6).tolist()
    assert e["exposed_ms"].tolist() == (one["exposed_ns"] / 1e6).tolist()
    assert e["hidden_ms"].tolist() == ((one["comm_ns"] - one["exposed_ns"]) / 1e6).tolist()
    p = coll.communication_pieces(rt)               # the bucket picture's black lane is the same time
    p = p[(p["part"] != "compute") & ~p["beside_compute"]]
    drawn = (p["end_ns"] - p["start_ns"]).groupby([p["rank"], p["step"]]).sum()
    assert drawn.reindex(pd.MultiIndex.from_frame(one[["rank", "step"]]), fill_value=0).tolist() \
        == one["exposed_ns"].tolist()
    if folder == NCCL:
        return
    b = step_budget(rt).merge(one, on=["rank", "step"], how="left", suffixes=("", "_one")).fillna(0)
    assert b["exposed_ns"].tolist() == b["exposed_ns_one"].astype("int64").tolist()
    assert b["in_collectives_ns"].tolist() == b["comm_ns"].astype("int64").tolist()


def test_public_pair_enqueue_and_kernel_start_tell_different_stories():
    """From the raw JSON: each nccl:* operator's ts (the enqueue) and the ts of the kernel
    its cudaLaunchKernel started (same correlation). At the four verified calls rank 1
    enqueued first (by 0.041 to 9.617 ms) and still started its kernel later (by 0.084 to
    22.328 ms): host-side times do not say which rank joined a collective late."""
    raw = {}
    for r in (0, 1):
        doc = json.loads(gzip.decompress((NCCL / f"hta_2024-03_nccl_sampled_rank{r}.json.gz").read_bytes()))
        ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
        kern = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "kernel"
                and e["name"].startswith("ncclKernel_")}
        ops = [e for e in ev if e["name"].startswith("nccl:")]
        for la in ev:
            if la.get("cat") == "cuda_runtime" and la["args"].get("correlation") in kern:
                op = next(o for o in ops if o["tid"] == la["tid"] and o["ts"] <= la["ts"] <= o["ts"] + o["dur"])
                k = kern[la["args"]["correlation"]]
                raw.setdefault((op["name"], str(op["args"]["Input Dims"])), {}).setdefault(r, []).append(
                    (op["ts"], k["ts"], k["ts"] + k["dur"]))
    want = []
    for (name, dims), per in raw.items():
        for e0, s0, x0 in per.get(0, []):
            for e1, s1, x1 in per.get(1, []):
                if abs(x1 - x0) <= 1000:                   # same name and size, ends within 1 ms: one call
                    want.append((s0, round((e1 - e0) / 1e3, 3), round((s1 - s0) / 1e3, 3)))
    t = coll.enqueue_and_start(load_traces(NCCL, partial=True))
    assert t[["enqueue_late_ms", "start_late_ms"]].round(3).values.tolist() == [[a, b] for _, a, b in sorted(want)]
    assert (t["enqueue_late_ms"] < 0).all() and (t["start_late_ms"] > 0).all()
    with pytest.raises(Exception, match="no NCCL kernels"):
        coll.enqueue_and_start(load_traces("ranks_balanced"))


# --- moved from the docstrings of kitlib/analyses/collectives.py (issue 39) -----------------

def test_docstring_examples_on_the_tiny_ranks():
    from kitlib.model.examples import tiny_rank_docs, tiny_rank_folder
    from kitlib.readers.trace import trace_from_json
    rt = load_traces(tiny_rank_folder())
    tr = trace_from_json(tiny_rank_docs()[0])
    k = coll.comm_kernels(tr)
    assert k["stream"].tolist() == [20, 20] and k.index.tolist() == [1, 4]
    assert k["start_ns"].tolist() == [3100000, 13100000] and k["end_ns"].tolist() == [6000000, 15000000]
    assert len(tr.kernels) - len(k) == 3                  # the compute kernels (stream 7) are left out
    ops = coll.collective_ops(rt)
    assert ops.loc[ops["rank"] == 1, "rank"].tolist() == [1, 1, 1, 1]
    calls = coll.collectives(rt)
    assert calls.loc[0, ["size", "identity"]].tolist() == ["in 4096 out 4096", "process group + seq"]
    t = coll.straggler_table(rt)
    assert t["call"].tolist() == ["nccl:all_reduce (pg 0, seq 0)", "nccl:all_reduce (pg 0, seq 1)"]
    st = coll.rank_step_times(rt)
    assert st.values.tolist() == [[0, 1, 0, 10000000], [0, 2, 10000000, 10000000],
                                  [1, 1, 0, 10000000], [1, 2, 10000000, 10000000]]
    assert st.columns.tolist() == ["rank", "step", "start_ns", "dur_ns"]
    sb = coll.straggler_by_step(rt)[["step", "last_rank", "late_by_ns", "calls"]]
    assert sb.values.tolist() == [[1, 1, 2000000, 1], [2, 1, 1000000, 1]]
    assert tr.steps["tid"].tolist() == [1, 1] and coll.step_thread(tr) == 1


def test_compute_intervals_of_a_cpu_run_leave_the_collective_out():
    from kitlib.readers.trace import trace_from_json

    def op(name, ts, dur, tid, cat="cpu_op"):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}
    cpu = trace_from_json({"traceEvents": [
        op("ProfilerStep#1", 0, 100, 1, "user_annotation"), op("aten::mm", 10, 20, 1),
        op("c10d::allreduce_", 40, 5, 1), op("gloo:all_reduce", 42, 30, 2), op("aten::add", 80, 10, 1)]})
    src, s, e = coll.compute_intervals(cpu)
    assert src == "host operators, step's thread" == coll.HOST_COMPUTE
    assert s.tolist() == [10000, 80000] and e.tolist() == [30000, 90000]


def test_docstring_examples_on_the_public_pair():
    rt = load_traces(NCCL, partial=True)
    m = coll.collective_matches(rt)
    assert m.loc[m["call"] == "nccl:all_reduce [[26258430]]#0", "reason"].item() == (
        "ends 612.9 ms later on rank 0 than on rank 1, more than the 1 ms one call allows: not the same call")
    s = coll.match_summary(rt)
    assert (s["calls"], s["verified"], s["missing"], s["ends_apart"], round(s["max_end_spread_ms"], 3)) == \
        (13, 4, 6, 3, 0.332)
    w = coll.collective_waits(rt)
    assert (len(w), w.attrs["unmatched"]) == (8, 12)
    t = coll.enqueue_and_start(rt)
    assert t[["enqueue_late_ms", "start_late_ms"]].round(3).values.tolist() == \
        [[-0.041, 3.302], [-9.617, 0.084], [-9.187, 22.328], [-7.896, 1.292]]
    p = coll.communication_pieces(rt)
    assert sorted(set(p["part"])) == ["compute", "transfer", "unmatched", "wait"]
