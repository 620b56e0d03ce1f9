"""kitlib.analyses.stragglers: the step budget on two hand-built ranks worked out on paper,
and the straggler estimate and drift on the kit's own two-rank Gloo recordings.

Hand-built run (times in µs, ×1000 for ns), two steps of 1000 µs, main thread tid 1,
Gloo's worker thread tid 2 on each rank; rank 1 sleeps 300 µs at the start of each step::

    rank 0, step 1 [0, 1000)                    rank 1, step 1 [0, 1000)
      aten::mm          [0, 100)                  straggler_delay   [0, 300)   (annotation)
      c10d::broadcast_  [100, 110) (collective op: not compute)
      gloo:broadcast    [100, 450)  tid 2         aten::mm          [300, 400)
      aten::mm          [450, 750)                gloo:broadcast    [400, 450)  tid 2
      gloo:all_reduce   [600, 800)  tid 2         aten::mm          [450, 750)
      aten::add         [800, 900)                gloo:all_reduce   [700, 800)  tid 2
                                                  aten::add         [800, 900)
    step 2: the same +1000 µs, except rank 0's aten::add lasts 150 µs [1800, 1950).

Rank 0, step 1: operators 100+300+100 = 500; collectives 350+200 = 550; operators ∪
collectives = [0, 900) = 900, so exposed = 900-500 = 400, compute = 1000-400 = 600,
outside operators = 100. Step 2: operators 550, ∪ = [1000, 1950) = 950, exposed 400,
compute 600, outside 50.
Rank 1, both steps: operators 500; collectives 50+100 = 150; ∪ = [300, 900) = 600,
exposed 100, compute 900, outside 400 (the 300 µs sleep and the 100 µs tail).
Rank 1's excess compute: 900-600 = 300 µs in each step = the delay; its excess operator
time 0 and -50 µs (noise ±25 µs); outside operators 300 and 350 µs (median 325: rank 0's
longer aten::add in step 2 took 50 µs of its own time outside operators).
"""
from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path

import pandas as pd
import pytest

from kitlib.errors import KitError
from kitlib.readers.bundle import reference_dir
from kitlib.readers.ranks import load_traces, wall_step_times
from kitlib.analyses import stragglers as S
from kitlib.analyses.collectives import collectives

from conftest import merged_length
from support.events import event

US = 1000
BASE = 1_700_000_000_000_000_000


def _host_event(name, ts, dur, tid=1, cat="cpu_op"):
    return event(cat, name, ts, dur, tid=tid)


def _rank_json(rank: int) -> dict:
    ev = []
    for k, off in ((1, 0), (2, 1000)):
        ev.append(_host_event(f"ProfilerStep#{k}", off, 1000, cat="user_annotation"))
        if rank == 0:
            ev += [_host_event("aten::mm", off, 100), _host_event("c10d::broadcast_", off + 100, 10),
                   _host_event("gloo:broadcast", off + 100, 350, tid=2), _host_event("aten::mm", off + 450, 300),
                   _host_event("gloo:all_reduce", off + 600, 200, tid=2), _host_event("aten::add", off + 800, 100 if k == 1 else 150)]
        else:
            ev += [_host_event("straggler_delay", off, 300, cat="user_annotation"), _host_event("aten::mm", off + 300, 100),
                   _host_event("gloo:broadcast", off + 400, 50, tid=2), _host_event("aten::mm", off + 450, 300),
                   _host_event("gloo:all_reduce", off + 700, 100, tid=2), _host_event("aten::add", off + 800, 100)]
    return {"schemaVersion": 1, "baseTimeNanoseconds": BASE, "traceEvents": ev,
            "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": 2}}


@pytest.fixture(scope="module")
def straggler_ranks(tmp_path_factory):
    d = tmp_path_factory.mktemp("paper_ranks")
    for r in (0, 1):
        (d / f"rank{r}.json").write_text(json.dumps(_rank_json(r)))
    return load_traces(d)


def test_the_step_budget_on_paper(straggler_ranks):
    b = S.step_budget(straggler_ranks)
    assert list(b.columns) == S.BUDGET_COLUMNS
    got = b.set_index(["rank", "step"]) // US
    assert got.loc[(0, 1)].tolist() == [1000, 550, 400, 600, 500, 100]
    assert got.loc[(0, 2)].tolist() == [1000, 550, 400, 600, 550, 50]
    assert got.loc[(1, 1)].tolist() == got.loc[(1, 2)].tolist() == [1000, 150, 100, 900, 500, 400]


def test_the_estimate_on_paper(straggler_ranks):
    # rank 1's excess operator time 0 and -50 µs: median -25, swing 25, not clear of it (|-25| < 50),
    # so the delay is its excess outside operators, 300 and 350 µs: median 325, swing 25
    e = S.straggler_estimate(straggler_ranks)
    assert e["rank"] == 1 and e["steps"] == 2 and e["delay_from"] == "outside operators"
    assert e["delay_ms"] == pytest.approx(0.325) and e["delay_ms_by_step"] == pytest.approx([0.300, 0.350])
    assert e["swing_ms"] == pytest.approx(0.025) and e["clear"] is True
    assert e["compute_ms"] == pytest.approx(0.300) and e["ops_ms"] == pytest.approx(-0.025)
    assert e["outside_ops_ms"] == pytest.approx(0.325) and e["noise_ms"] == pytest.approx(0.025)


def _budget(rank1_ops, rank1_outside):
    """Two ranks, steps of 2000 µs: rank 0 runs operators 500 µs and waits 1500 µs in collectives;
    rank 1 runs operators and outside operators as given, and never waits (its compute is 2000)."""
    rows = []
    for step, (ops, out) in enumerate(zip(rank1_ops, rank1_outside), 1):
        rows.append({"rank": 0, "step": step, "step_ns": 2000, "in_collectives_ns": 1500, "exposed_ns": 1500,
                     "compute_ns": 500, "ops_ns": 500, "outside_ops_ns": 0})
        rows.append({"rank": 1, "step": step, "step_ns": 2000, "in_collectives_ns": 0, "exposed_ns": 0,
                     "compute_ns": ops + out, "ops_ns": ops, "outside_ops_ns": out})
    b = pd.DataFrame(rows)
    b[S.BUDGET_COLUMNS[2:]] *= US
    return b


def test_a_rank_that_computes_slower_every_step_is_delayed_by_its_compute():
    # rank 1's operators: 1600 and 1400 µs against 500: excess 1100 and 900, median 1000 > 2 x 100 (clear),
    # so its delay is the whole compute excess, 1500 µs in both steps
    e = S.straggler_estimate(budget=_budget([1600, 1400], [400, 600]))
    assert e["rank"] == 1 and e["delay_from"] == "compute"
    assert e["delay_ms"] == pytest.approx(1.5) and e["swing_ms"] == pytest.approx(0) and e["clear"] is True
    assert e["ops_ms"] == pytest.approx(1.0) and e["noise_ms"] == pytest.approx(0.1)


def test_a_delay_within_its_swing_is_not_clear():
    # operators 1600 and 0 µs: excess 1100 and -500, median 300 < 2 x 800: noise; outside operators
    # 400 and 2000: excess 400 and 2000, median 1200 < 2 x 800 (its swing): not clear
    e = S.straggler_estimate(budget=_budget([1600, 0], [400, 2000]))
    assert e["rank"] == 1 and e["delay_from"] == "outside operators"
    assert e["delay_ms"] == pytest.approx(1.2) and e["swing_ms"] == pytest.approx(0.8) and e["clear"] is False
    assert e["compute_ms"] == pytest.approx(1.5)


def test_refusals(straggler_ranks):
    one = pd.DataFrame([{c: 0 for c in S.BUDGET_COLUMNS}])
    with pytest.raises(KitError, match="two ranks or more"):
        S.straggler_estimate(budget=one)
    calls = collectives(straggler_ranks).assign(measured_on="device")
    with pytest.raises(KitError, match="measured on the GPU"):
        S.step_budget(straggler_ranks, calls)
    with pytest.raises(KitError, match="no uninstrumented step times"):
        S.machine_drift(pd.DataFrame(columns=["rank", "series", "i", "step_ms"]), S.step_budget(straggler_ranks))
    assert wall_step_times(straggler_ranks).empty                      # loose files: no step_times.json


def _raw_steps_ms(name, rank):
    doc = json.loads(gzip.decompress((reference_dir() / name / f"rank{rank}" / "trace.json.gz").read_bytes()))
    return [e["dur"] / 1e3 for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]


def test_the_injected_delay_is_recovered_on_the_kits_recording():
    rt = load_traces("ranks_straggler")
    manifest = json.loads((reference_dir() / "ranks_straggler" / "manifest.json").read_text())
    injected = manifest["workload"]["straggler"]
    e = S.straggler_estimate(rt)
    assert e["rank"] == injected["rank"] == 1
    assert e["delay_from"] == "outside operators"                 # the sleep; the operators' difference is noise
    assert abs(e["delay_ms"] - injected["ms"]) <= 0.2 * injected["ms"], e
    assert e["clear"] and abs(e["ops_ms"]) < 2 * e["noise_ms"]
    assert abs(e["compute_ms"] - injected["ms"]) <= 0.2 * injected["ms"], e   # here; not on every recording
    # the step times themselves come from the profiler's own ProfilerStep intervals
    b = S.step_budget(rt)
    for r in (0, 1):
        assert (b[b["rank"] == r]["step_ns"] / 1e6).tolist() == pytest.approx(_raw_steps_ms("ranks_straggler", r),
                                                                           abs=1e-3)
    # the old measure, step minus all time inside collectives, counts Gloo's hidden all-reduces
    naive = (b["step_ns"] - b["in_collectives_ns"]).groupby([b["step"], b["rank"]]).sum().unstack()
    assert ((naive[1] - naive[0]).median() / 1e6) > 1.5 * injected["ms"]


def test_the_balanced_run_has_no_clear_straggler():
    e = S.straggler_estimate(load_traces("ranks_balanced"))
    assert not e["clear"] and abs(e["delay_ms"]) < 0.1 * 500


@pytest.mark.parametrize("name, drifted", [("ranks_balanced", False), ("ranks_straggler", True)])
def test_drift_from_the_runs_own_uninstrumented_steps(name, drifted):
    rt = load_traces(name)
    d = S.machine_drift(wall_step_times(rt), S.step_budget(rt))
    for r in (0, 1):
        raw = json.loads((reference_dir() / name / f"rank{r}" / "step_times.json").read_text())
        un = statistics.median(raw["step_ms_uninstrumented"])
        pr = statistics.median(_raw_steps_ms(name, r))
        assert d.loc[r, "uninstrumented_ms"] == pytest.approx(un)
        assert d.loc[r, "profiled_ms"] == pytest.approx(pr, abs=1e-3)
        assert bool(d.loc[r, "drifted"]) == (abs(pr / un - 1) > S.DRIFT_TOLERANCE) == drifted
    note = S.drift_note(d)
    assert note.startswith("the machine drifted" if drifted else "no drift seen")


def test_the_picture_draws_the_budget(straggler_ranks):
    import matplotlib
    matplotlib.use("Agg")
    from kitlib.plots.stragglers import plot_step_budget
    ax = plot_step_budget(straggler_ranks)
    b = S.step_budget(straggler_ranks)
    bars = ax.patches
    assert len(bars) == 3 * len(b)
    # first the operators' bars (one per step and rank), then outside operators, then exposed
    order = b.sort_values(["step", "rank"], ascending=[False, False]).reset_index(drop=True)
    for k, col in enumerate(("ops_ns", "outside_ops_ns", "exposed_ns")):
        widths = [p.get_width() for p in bars[k * len(b):(k + 1) * len(b)]]
        assert widths == pytest.approx((order[col] / 1e6).tolist())
    # each bar's parts add up to its step
    ends = [p.get_x() + p.get_width() for p in bars[2 * len(b):]]
    assert ends == pytest.approx((order["step_ns"] / 1e6).tolist())
    assert ax.get_title() == ("rank 1: 0.33 ms more per step outside operators than the others (median, ±0.025);\n"
                              "operators alone ±0.025 ms")
    assert ax.get_xlabel() == "time in the step (ms)"


CASE_B = Path(__file__).resolve().parents[2] / "data" / "clinic" / "cpu" / "case_b"


def test_a_call_that_outlasts_its_step_counts_whole_in_the_step_it_starts_in():
    """The clinic's case_b (before), rank 0: a gloo:all_reduce starts in ProfilerStep#2 and
    ends 0.527 ms after it. From the raw JSON (exact ns: ``ts`` read as decimals): per step,
    C = the gloo:* calls that start in it, whole; P = the step thread's cpu_ops but the
    collectives'; exposed = |C| - |C ∩ P|, as collectives.exposed_by_step defines it for
    exposed_communication and step_budget alike. Until 6 December 2026 (issue 39)
    step_budget clipped every call to the step's window instead: 45,687,895 ns in step 2
    and 57,333,071 in step 3, against exposed_communication's 46,215,172 and 56,878,502."""
    import decimal
    folder = CASE_B / "before"
    doc = json.loads(gzip.decompress((folder / "rank0" / "trace.json.gz").read_bytes()),
                     parse_float=decimal.Decimal)
    ev = [(e["name"], e.get("cat"), e["tid"], int(e["ts"] * 1000), int((e["ts"] + e["dur"]) * 1000))
          for e in doc["traceEvents"] if e.get("ph") == "X"]
    steps = [(int(n.split("#")[1]), a, b, tid) for n, _, tid, a, b in ev if n.startswith("ProfilerStep#")]
    main = {tid for *_, tid in steps}
    gloo = [(a, b) for n, _, _, a, b in ev if n.startswith("gloo:")]
    comp = [(a, b) for n, cat, tid, a, b in ev if cat == "cpu_op" and tid in main
            and not n.startswith(("record_param_comms", "c10d::", "nccl:", "gloo:"))]
    over = [(a, b, e) for a, b in gloo for _, s, e, _ in steps if s <= a < e < b]
    assert len(main) == 1 and [(round((b - e) / 1e6, 3)) for a, b, e in over] == [0.527]
    budget = S.step_budget(load_traces(folder)).set_index(["rank", "step"])
    want = {}
    for n, s, e, _ in steps:
        c = [(a, b) for a, b in gloo if s <= a < e]
        want[n] = merged_length(c + comp) - merged_length(comp)          # |C| - |C ∩ P|
        assert budget.loc[(0, n), "exposed_ns"] == want[n]
        assert budget.loc[(0, n), "in_collectives_ns"] == merged_length(c)
    assert (want[2], want[3]) == (46_215_172, 56_878_502)


# --- moved from the docstrings of kitlib/analyses/stragglers.py (issue 39) ------------------

def test_straggler_estimate_medians_and_drift_note_docstring_examples():
    e = S.straggler_estimate(load_traces("ranks_straggler"))
    assert (round(e["compute_ms"]), round(e["ops_ms"]), round(e["noise_ms"])) == (502, 37, 196)
    d = pd.DataFrame({"uninstrumented_ms": [1000.0], "profiled_ms": [1300.0], "change": [0.3],
                      "drifted": [True]}, index=pd.Index([0], name="rank"))
    assert S.drift_note(d) == (
        "the machine drifted: rank 0 stepped in 1,000 ms without the profiler and 1,300 ms with it (+30 %), "
        "far more than the profiler costs: compare ranks within a step, not this run with another")


def test_machine_drift_docstring_example():
    rt = load_traces("ranks_straggler")
    d = S.machine_drift(wall_step_times(rt), S.step_budget(rt)).round(2)
    assert d.index.name == "rank" and d.index.tolist() == [0, 1]
    assert d.columns.tolist() == ["uninstrumented_ms", "profiled_ms", "change", "drifted"]
    assert d.values.tolist() == [[1884.25, 2449.62, 0.30, True], [1917.63, 2417.52, 0.26, True]]
