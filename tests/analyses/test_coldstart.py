"""Cold-start analyses on the reference recordings (H200)."""
import pytest

import kitlib
from kitlib.analyses import coldstart
from kitlib.analyses.steps import active_step_times, active_steps
from kitlib.errors import KitError, KitFileError

from support.events import event, gpu_event, launch_event, write_trace


@pytest.fixture(scope="module")
def cold():
    return kitlib.open_capture("cold_start_8step")


def test_first_data_load_nsys(nsys_8step_report):
    dl = coldstart.data_load_ranges(nsys_8step_report)
    assert dl["dur_ns"].iloc[0] == 1469484230                     # 1,469.48 ms
    assert round(dl["dur_ns"].iloc[0] / 1e6, 2) == 1469.48
    assert dl["dur_ns"].iloc[1:].max() < 1_000_000


def test_wallclock_next(cold):
    w = coldstart.read_wallclock(cold.read_json("wallclock.json"))
    assert w["next_ns"].iloc[0] == 1523311936                     # 1,523 ms
    assert round(w["next_ns"].iloc[0] / 1e6) == 1523
    d = coldstart.data_load_ranges(cold.trace)                    # same run, profiler clock
    assert abs(d["dur_ns"].iloc[0] - w["next_ns"].iloc[0]) < 100_000


def test_wallclock_bad_input():
    with pytest.raises(KitFileError, match="not a cold-start wallclock file"):
        coldstart.read_wallclock({"steps": []})


def test_copy_end_vs_range_end_nsys(nsys_8step_report):
    bc = coldstart.batch_copies(nsys_8step_report)
    after = bc["batch_end_after_range_ns"].tolist()
    assert after[0] == -116850                   # step 0: ends before the range closes
    assert after[1] == 1336030                   # later: after
    assert all(a > 0 for a in after[1:])
    assert bc["images_end_after_range_ns"].iloc[0] == -63321465
    assert bc["copy_launched_in_range"].all()
    assert (bc["images_bytes"] == 128 * 3 * 224 * 224 * 4).all()


def test_copy_end_vs_range_profiler(cold):
    bc = coldstart.batch_copies(cold.trace)
    assert not bc["copy_launched_in_range"].any()      # data_load = next() only there
    assert (bc["batch_end_after_range_ns"] > 0).all()


def test_gap_activity(nsys_8step_report):
    d = coldstart.data_load_ranges(nsys_8step_report).iloc[0]
    a = coldstart.gap_activity(nsys_8step_report, int(d["start_ns"]), int(d["end_ns"]))
    main = a[(a["tid"] == 1213) & (a["source"] == "OS runtime")].iloc[0]
    assert (main["call"], main["calls"], main["in_window_ns"]) == ("sem_clockwait", 8, 1211680275)
    pin = a[(a["thread"] == "pt_data_pin") & (a["call"] == "cudaHostAlloc")].iloc[0]
    assert pin["calls"] == 17 and pin["in_window_ns"] == 475925845
    assert (a["in_window_ns"] <= int(d["dur_ns"])).all()
    tp = coldstart.traced_processes(nsys_8step_report).set_index("process")
    assert tp.loc["pt_data_worker", "processes"] == 8 and tp.loc["pt_data_worker", "osrt_rows"] == 0


def _gap_activity_from_sqlite(db, w0, w1):
    """gap_activity's rows rebuilt with sqlite3 alone: every OSRT_API and CUPTI runtime row
    (where the export has the table) that overlaps [w0, w1], cut to it, per (process,
    thread, thread name, source, call) with Nsight's version suffix (``_v7000``) dropped:
    {key: (calls, ns in the window, longest call)}."""
    import re
    import sqlite3
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    text = dict(con.execute("SELECT id, value FROM StringIds"))
    thread_name = {g: text[n] for n, g in con.execute("SELECT nameId, globalTid FROM ThreadNames")}
    want = {}
    for source, table in (("OS runtime", "OSRT_API"), ("CUDA API", "CUPTI_ACTIVITY_KIND_RUNTIME")):
        if table not in tables:
            continue
        for start, end, gtid, name_id in con.execute(f"SELECT start, end, globalTid, nameId FROM {table}"):
            a, b = max(start, w0), min(end, w1)
            if a > b or (a == b and start != end):
                continue
            key = ((gtid >> 24) & 0xFFFFFF, gtid & 0xFFFFFF, thread_name.get(gtid, "?"), source,
                   re.sub(r"_v\d+$", "", text[name_id]))
            calls, inside, longest = want.get(key, (0, 0, 0))
            want[key] = (calls + 1, inside + b - a, max(longest, end - start))
    con.close()
    return want


@pytest.mark.parametrize("name,window,rows", [("nsys_8step", "first data_load", 73),
                                              ("nsys_emit_nvtx", "all steps", 15)])
def test_gap_activity_whole_table_from_the_sqlite_export(name, window, rows):
    """Lesson 04's table of what each thread did in a window (the first data_load range of
    nsys_8step; every step of nsys_emit_nvtx, an export without OS-runtime rows), against
    the rows rebuilt from the export with sqlite3 alone; sorted by process, thread, then
    time in the window, longest first."""
    cap = kitlib.open_capture(name)
    nsys_8step_report = cap.nsys
    if window == "first data_load":
        d = coldstart.data_load_ranges(nsys_8step_report).iloc[0]
        w0, w1 = int(d["start_ns"]), int(d["end_ns"])
    else:
        w0, w1 = int(nsys_8step_report.steps["start_ns"].min()), int(nsys_8step_report.steps["end_ns"].max())
    want = _gap_activity_from_sqlite(cap.file("report.sqlite"), w0, w1)
    got = coldstart.gap_activity(nsys_8step_report, w0, w1)
    assert got.columns.tolist() == ["pid", "tid", "thread", "source", "call", "calls", "in_window_ns", "longest_ns"]
    assert str(got["in_window_ns"].dtype) == "int64" and got.index.tolist() == list(range(len(got)))
    assert len(got) == len(want) == rows
    assert {tuple(r[:5]): tuple(r[5:]) for r in got.itertuples(index=False)} == want
    order = sorted(((p, t, -i) for (p, t, *_), (_, i, _) in want.items()))
    assert list(zip(got["pid"], got["tid"], -got["in_window_ns"])) == order
    assert "CUDA API" in set(got["source"])


def test_gap_activity_refuses_what_it_cannot_read(nsys_8step_report, cold):
    with pytest.raises(KitError, match="gap_activity needs an NsysReport .load_nsys., got Trace"):
        coldstart.gap_activity(cold.trace, 0, 1)
    with pytest.raises(KitError, match="window ends before it starts: 5 > 4"):
        coldstart.gap_activity(nsys_8step_report, 5, 4)
    empty = coldstart.gap_activity(nsys_8step_report, 5, 5)       # a zero-length window before anything ran
    assert empty.columns.tolist() == ["pid", "tid", "thread", "source", "call", "calls", "in_window_ns", "longest_ns"]
    assert empty.empty


def test_cold_start_figures_beside_b300(nsys_8step_report, cold):
    from kitlib.course.sources import B300
    f = coldstart.cold_start_figures(report=nsys_8step_report, b300=B300).set_index("measure")
    assert f.loc["first data_load range (Nsight NVTX)", "b300_ns"] == 535258000
    assert f.loc["batch copy end minus range end, step 0", "b300_ns"] == 949000
    # the analysis holds no quoted figures of its own: without them the column is empty
    bare = coldstart.cold_start_figures(report=nsys_8step_report)
    assert bare["b300_ns"].isna().all() and bare["value_ns"].tolist() == f["value_ns"].tolist()


def test_step_time_stats_reference():
    st = coldstart.step_time_stats(kitlib.open_capture("profiler_5step").step_times())
    u = st.loc["step_ms_uninstrumented"]
    assert u["n"] == 10 and u["outliers"] == 1
    assert u["median_ms"] == pytest.approx(48.1115955)
    assert u["max_ms"] == pytest.approx(261.407154)
    assert st.loc["step_ms_fixed_batch", "iqr_ms"] < 0.1 < u["iqr_ms"]
    with pytest.raises(KitError):
        coldstart.step_time_stats({"x": []})


def test_epoch_positions():
    p = coldstart.epoch_positions(14, 3, 14)
    assert p["epoch_start"].tolist() == [True, False, False]
    assert not coldstart.epoch_positions(0, 14, 14)["epoch_start"].any()


def test_loader_epoch_length(cold):
    # reference workload: synthetic 1,792 JPEGs, batch 128, drop_last -> 14 batches per epoch
    assert coldstart.loader_epoch_length(cold) == 14
    assert coldstart.loader_epoch_length(kitlib.open_capture("profiler_5step")) == 14

    class Fake:
        name = "fake"
        workload = {"dataset": "Food-101 train split (75,750 images, 101 classes)", "batch_size": 64,
                    "drop_last": False}
    assert coldstart.loader_epoch_length(Fake()) == 1184   # 75,750 / 64 rounded up
    with pytest.raises(KitError, match="image count"):
        coldstart.loader_epoch_length(kitlib.open_capture("fixed_batch"))


def test_active_steps_and_slowest_position():
    full = kitlib.open_capture("profiler_5step")
    st, act = full.step_times(), active_step_times(full)
    assert len(st["step_ms_profiled_all_attribution"]) == 7 and act["step_ms_profiled_all_attribution"] == \
        st["step_ms_profiled_all_attribution"][2:]
    assert act["step_ms_uninstrumented"] == st["step_ms_uninstrumented"]
    slow = coldstart.slowest_step_position(st["step_ms_uninstrumented"], 3, coldstart.loader_epoch_length(full))
    assert slow["step_ms"] == max(st["step_ms_uninstrumented"]) and slow["step_ms"] > 2 * slow["median_ms"]
    assert slow["batch_in_epoch"] == (3 + slow["step_index"]) % 14 and not slow["epoch_start"]
    # the one rule behind it: a whole schedule cycle (wait + warmup + active values) loses
    # its first wait + warmup; anything else is left as it is
    sched = {"wait": 1, "warmup": 1, "active": 5}
    assert active_steps(list(range(7)), sched) == [2, 3, 4, 5, 6]
    assert active_steps(list(range(5)), sched) == list(range(5))
    assert active_steps(list(range(7)), None) == list(range(7))


def test_loader_epoch_length_from_config(monkeypatch):
    from kitlib.capture.workload import WorkloadConfig
    monkeypatch.delenv("KITLIB_FOOD101", raising=False)
    cfg = WorkloadConfig(batch_size=100, synthetic_images=1000, drop_last=False, device="cpu")
    assert coldstart.loader_epoch_length(cfg) == 10
    assert coldstart.loader_epoch_length(WorkloadConfig(batch_size=128, device="cpu")) == 14


def test_data_load_ranges_table_is_relative_to_its_step(cold, nsys_8step_report):
    """Each row's times relative to its own step (as the source texts quote them): the
    columns in order, ``start_in_step_ns = start_ns - step_start_ns`` and likewise the
    end, with ``step_start_ns`` the step's own start; on the profiler trace and the report."""
    from kitlib.analyses.steps import steps_of
    for source in (cold.trace, nsys_8step_report):
        d = coldstart.data_load_ranges(source)
        assert d.columns.tolist() == ["step", "step_start_ns", "start_ns", "end_ns", "dur_ns",
                                      "start_in_step_ns", "end_in_step_ns"]
        starts = steps_of(source).set_index("step")["start_ns"]
        assert d["step_start_ns"].tolist() == starts.loc[d["step"]].tolist()
        assert (d["start_in_step_ns"] == d["start_ns"] - d["step_start_ns"]).all()
        assert (d["end_in_step_ns"] == d["end_ns"] - d["step_start_ns"]).all()
        assert (d["start_in_step_ns"] >= 0).all() and (d["dur_ns"] == d["end_ns"] - d["start_ns"]).all()


def test_data_load_ranges_and_step_gaps_say_what_is_missing(cold):
    """The errors name the file and what is absent (a label in no step; a CPU-only
    recording, which has no device and so no device gaps)."""
    from conftest import REF
    from kitlib.analyses.steps import step_gaps
    with pytest.raises(KitError, match=r"trace\.json\.gz: no 'no_such_label' range inside any step"):
        coldstart.data_load_ranges(cold.trace, label="no_such_label")
    cpu = kitlib.load_trace(REF / "ranks_balanced" / "rank0" / "trace.json.gz")
    with pytest.raises(KitError, match=r"trace\.json\.gz: no GPU activity in this recording \(no kernel, copy "
                                       r"or set\): there is no device whose idle gaps could be found"):
        step_gaps(cpu)


# ---- survivors of the 1 December mutation run
# Every golden value below is read by the test itself from the raw files (wallclock.json, the
# trace's JSON, the Nsight export through sqlite3) or worked on paper in a tiny hand-built input.
import json
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
from conftest import sql_rows, raw_trace_events

REF_DIR = Path(__file__).resolve().parents[2] / "data" / "reference"
T24 = 0xFFFFFF                                   # globalTid: tid = low 24 bits, pid = the next 24


def _us_ns(us):
    """Kineto's µs (3 decimals, as printed in the JSON) to exact integer ns."""
    return int((Decimal(repr(us)) * 1000).to_integral_value())


def test_read_wallclock_whole_table_from_the_json(cold):
    """Lesson 04's wall-clock table, every cell recomputed from wallclock.json itself: the
    columns in order, int64 throughout, one row per step numbered 0…, ``next_ns = next_end -
    next_start``, ``submit_ns = step_submitted - next_start``, ``since_t0_ns = next_start - t0``."""
    with open(REF_DIR / "cold_start_8step" / "wallclock.json") as f:
        raw = json.load(f)
    w = coldstart.read_wallclock(cold.read_json("wallclock.json"))
    assert w.columns.tolist() == ["step", "next_start_ns", "next_end_ns", "step_submitted_ns", "next_ns",
                                  "submit_ns", "since_t0_ns"]
    assert [str(t) for t in w.dtypes] == ["int64"] * 7
    assert w.index.tolist() == list(range(8)) == list(range(len(raw["steps"])))
    want = [[i, s["next_start_ns"], s["next_end_ns"], s["step_submitted_ns"],
             s["next_end_ns"] - s["next_start_ns"], s["step_submitted_ns"] - s["next_start_ns"],
             s["next_start_ns"] - raw["t0_ns"]] for i, s in enumerate(raw["steps"])]
    assert w.to_numpy().tolist() == want
    # step 0 from the file's first record: 63,520,356,272 - 60,213,404,110 and 60,213,404,110 - 60,183,487,638
    assert (w.at[0, "submit_ns"], w.at[0, "since_t0_ns"]) == (3_306_952_162, 29_916_472)


def test_read_wallclock_errors_name_the_file_and_the_cause():
    with pytest.raises(KitFileError, match=r"^wallclock\.json: not a cold-start wallclock file: .*\(KeyError: 't0_ns'\)$"):
        coldstart.read_wallclock({"steps": []})
    bad = {"t0_ns": 0, "steps": [{"next_start_ns": 1, "next_end_ns": "soon", "step_submitted_ns": 3}]}
    with pytest.raises(KitFileError, match=r"^run/w\.json: not a cold-start wallclock file: .*\(ValueError: "):
        coldstart.read_wallclock(bad, path="run/w.json")


def _h2d_from_sqlite(db):
    """Host-to-device copies (copyKind 1) with the runtime call of the same process and
    correlation id: (start, end, dur, bytes, launch start, launch tid), by start."""
    return sorted(sql_rows(db, "SELECT m.start, m.end, m.end - m.start, m.bytes, r.start, r.globalTid & 16777215 "
                               "FROM CUPTI_ACTIVITY_KIND_MEMCPY m LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r "
                               "ON r.correlationId = m.correlationId "
                               "AND ((r.globalTid >> 24) & 16777215) = ((m.globalPid >> 24) & 16777215) "
                               "WHERE m.copyKind = 1"))


def _h2d_from_json(path):
    """The same from a torch.profiler trace: ``gpu_memcpy`` events named ``Memcpy HtoD …``
    with the runtime call of the same correlation id."""
    ev = raw_trace_events(path)
    launch = {e["args"]["correlation"]: e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")
              and e.get("ph") == "X" and "correlation" in e.get("args", {})}
    rows = []
    for e in ev:
        if e.get("cat") == "gpu_memcpy" and "HtoD" in e["name"]:
            s, d = _us_ns(e["ts"]), _us_ns(e["dur"])
            r = launch[e["args"]["correlation"]]
            rows.append((s, s + d, d, e["args"]["bytes"], _us_ns(r["ts"]), r["tid"]))
    return sorted(rows)


@pytest.mark.parametrize("name", ["nsys_8step", "cold_start_8step"])
def test_h2d_copies_whole_table_from_the_raw_files(name, nsys_8step_report, cold):
    """The host-to-device copies batch_copies reads, each with its launch, against the
    export (sqlite3) and the trace's JSON read here: every row, the columns, dtypes and a
    plain 0… index. The trace has DtoD copies too (169 of them), which are not HtoD."""
    if name == "nsys_8step":
        want, got = _h2d_from_sqlite(REF_DIR / name / "report.sqlite"), coldstart._h2d_copies(nsys_8step_report)
    else:
        want, got = _h2d_from_json(REF_DIR / name / "trace.json.gz"), coldstart._h2d_copies(cold.trace)
    assert got.columns.tolist() == ["start_ns", "end_ns", "dur_ns", "bytes", "launch_start_ns", "launch_tid"]
    assert [str(t) for t in got.dtypes] == ["int64", "int64", "int64", "Int64", "Int64", "Int64"]
    assert got.index.tolist() == list(range(len(want)))
    assert len(want) == {"nsys_8step": 336, "cold_start_8step": 16}[name]       # counted in the raw files
    assert sorted(tuple(int(v) for v in r) for r in got.itertuples(index=False)) == want
    assert got["start_ns"].is_monotonic_increasing


def _traced_from_sqlite(db):
    """traced_processes rebuilt with sqlite3: per process name (PROCESSES.name of the
    thread's pid), the pids and ThreadNames rows, and the rows of OSRT_API, of the CUDA API
    (CUPTI_ACTIVITY_KIND_RUNTIME) and NVTX ranges (push/pop 59, start/end 60) of those pids.
    OSRT_API rows of eventClass 31 and 32 (ENUM_NSYS_EVENT_CLASS: "OSRT start", "OSRT finish")
    mark where tracing began and ended and are not calls: left out, as ``nsys stats`` does."""
    tables = {r[0] for r in sql_rows(db, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    proc = dict(sql_rows(db, "SELECT pid, name FROM PROCESSES"))
    per_pid = {}
    for key, table, where in (("osrt_rows", "OSRT_API", " WHERE eventClass NOT IN (31, 32)"), ("cuda_api_rows", "CUPTI_ACTIVITY_KIND_RUNTIME", ""),
                              ("nvtx_ranges", "NVTX_EVENTS", " WHERE eventType IN (59, 60)")):
        if table in tables:
            for pid, n in sql_rows(db, f"SELECT (globalTid >> 24) & 16777215, COUNT(*) FROM {table}{where} GROUP BY 1"):
                per_pid[key, pid] = n
    rows = {}
    for (gtid,) in sql_rows(db, "SELECT globalTid FROM ThreadNames"):
        pid = (gtid >> 24) & T24
        r = rows.setdefault(proc[pid], {"pids": set(), "threads": 0})
        r["pids"].add(pid)
        r["threads"] += 1
    return {name: (len(r["pids"]), r["threads"]) + tuple(
        sum(per_pid.get((k, p), 0) for p in r["pids"]) for k in ("osrt_rows", "cuda_api_rows", "nvtx_ranges"))
        for name, r in rows.items()}


@pytest.mark.parametrize("name", ["nsys_8step", "nsys_emit_nvtx"])
def test_traced_processes_whole_table_from_the_sqlite_export(name):
    """Lesson 04's table of which processes Nsight traced, every row against the export read
    with sqlite3; the columns in order, a 0… index, most OS-runtime rows first, then most
    processes."""
    want = _traced_from_sqlite(REF_DIR / name / "report.sqlite")
    got = coldstart.traced_processes(kitlib.open_capture(name).nsys)
    assert got.columns.tolist() == ["process", "processes", "threads", "osrt_rows", "cuda_api_rows", "nvtx_ranges"]
    assert got.index.tolist() == list(range(len(want)))
    assert {r[0]: tuple(r[1:]) for r in got.itertuples(index=False)} == want
    keys = list(zip(got["osrt_rows"], got["processes"]))
    assert keys == sorted(keys, reverse=True) and keys[0] != keys[-1]
    if name == "nsys_8step":             # 8 loader workers, none traced: no OS-runtime row of theirs
        assert want["pt_data_worker"][0] == 8 and want["pt_data_worker"][2] == 0 and want["python3"][2] > 0


def test_traced_processes_keeps_threads_of_no_known_process():
    """A thread whose pid is not in PROCESSES (process <NA>) still counts, in a row of its
    own; worked on paper: pids 1 (named "a", two threads) and 2 (no name, one thread)."""
    rep = SimpleNamespace(
        threads=pd.DataFrame({"pid": [1, 1, 2], "tid": [1, 5, 2], "name": ["a", "b", "c"],
                              "process": ["a", "a", None]}),
        osrt=pd.DataFrame({"pid": [1, 2, 2]}), launches=pd.DataFrame({"pid": [1]}),
        nvtx=pd.DataFrame({"pid": [2]}))
    got = coldstart.traced_processes(rep)
    assert got["process"].tolist()[0] is None or pd.isna(got["process"].tolist()[0])
    assert got.iloc[:, 1:].to_numpy().tolist() == [[1, 1, 2, 0, 1],     # pid 2: osrt 2 rows first
                                                   [1, 2, 1, 1, 0]]     # pid 1 "a"
    assert got["process"].iloc[1] == "a"


def test_epoch_positions_worked_on_paper():
    """Batches 12… of a 14-batch loader: 12, 13 in epoch 0, then 14 (= batch 0 of epoch 1,
    a new epoch: workers restarted) and 15."""
    p = coldstart.epoch_positions(12, 4, 14)
    assert p.columns.tolist() == ["step_index", "batch", "epoch", "batch_in_epoch", "epoch_start"]
    assert [str(t) for t in p.dtypes] == ["int64", "int64", "int64", "int64", "bool"]
    assert p.to_numpy().tolist() == [[0, 12, 0, 12, False], [1, 13, 0, 13, False],
                                     [2, 14, 1, 0, True], [3, 15, 1, 1, False]]
    # one batch per epoch: every batch after the first begins an epoch (batch 1 included)
    one = coldstart.epoch_positions(0, 3, 1)
    assert one["epoch"].tolist() == [0, 1, 2] and one["epoch_start"].tolist() == [False, True, True]
    empty = coldstart.epoch_positions(0, 0, 14)      # no steps: an empty table, not an error
    assert empty.empty and empty.columns.tolist() == p.columns.tolist()


@pytest.mark.parametrize("args", [(-1, 3, 14), (0, -1, 14), (0, 3, 0)])
def test_epoch_positions_refuses_negative_counts(args):
    with pytest.raises(KitError, match=r"^epoch_positions: need first_batch >= 0, n_steps >= 0, "
                                       r"batches_per_epoch >= 1$"):
        coldstart.epoch_positions(*args)


def test_loader_epoch_length_rounding_worked_on_paper():
    """1,000 images in batches of 128: 7 full batches (drop_last, also when the manifest
    does not say, the DataLoader's default in the workload) or 8 with the last partial one."""
    def cap(**w):
        return SimpleNamespace(name="fake", workload={"dataset": "synthetic: 1,000 JPEGs", "batch_size": 128, **w})
    assert coldstart.loader_epoch_length(cap(drop_last=True)) == 7
    assert coldstart.loader_epoch_length(cap()) == 7
    assert coldstart.loader_epoch_length(cap(drop_last=False)) == 8
    n = coldstart.loader_epoch_length(kitlib.open_capture("cold_start_8step"))   # 1,792 // 128
    assert n == 14 and type(n) is int


def test_loader_epoch_length_errors_name_the_capture_and_its_dataset():
    named = SimpleNamespace(name="fake", workload={"dataset": "Food-101", "batch_size": 64})
    with pytest.raises(KitError, match=r"^fake: manifest workload has no image count in 'dataset' \('Food-101'\) "
                                       r"or no 'batch_size'$"):
        coldstart.loader_epoch_length(named)
    unnamed = SimpleNamespace(workload={"dataset": "synthetic: 1,000 JPEGs"})          # no batch size
    with pytest.raises(KitError, match=r"^capture: manifest workload has no image count in 'dataset' "
                                       r"\('synthetic: 1,000 JPEGs'\)"):
        coldstart.loader_epoch_length(unnamed)
    with pytest.raises(KitError, match=r"^fixed_batch: manifest workload"):
        coldstart.loader_epoch_length(kitlib.open_capture("fixed_batch"))


def test_slowest_step_position_worked_on_paper():
    """Step times 5, 9, 4, 6 ms after 13 batches of a 14-batch loader: the slowest (9 ms,
    step 1) took batch 14, the first of epoch 1; the median is (5 + 6) / 2."""
    got = coldstart.slowest_step_position([5.0, 9.0, 4.0, 6.0], 13, 14)
    assert got == {"step_index": 1, "step_ms": 9.0, "median_ms": 5.5, "epoch": 1, "batch_in_epoch": 0,
                   "epoch_start": True}
    assert [type(v) for v in got.values()] == [int, float, float, int, int, bool]


def _batch_copies_by_hand(steps, ranges, copies):
    """batch_copies' rule from its docstring, on raw rows: per step (number, tid, start, end),
    its first ``data_load`` range on the step's thread inside it; the copies launched on that
    thread from the step's start up to the first ``forward`` range starting after data_load
    ends (else to the step's end); the images are the largest copy, the batch ends with the
    last copy. ``ranges``: (name, tid, start, end); ``copies``: _h2d_from_* rows."""
    rows = []
    for step, tid, s0, s1 in steps:
        dl = sorted(r[2:] for r in ranges if r[0] == "data_load" and r[1] == tid and r[2] >= s0 and r[3] <= s1)
        if not dl:
            continue
        d0, d1 = dl[0]
        fw = [r[2] for r in ranges if r[0] == "forward" and r[1] == tid and d1 <= r[2] <= s1]
        stop = min(fw) if fw else s1
        mine = [c for c in copies if s0 <= c[4] < stop and c[5] == tid]
        img = max(mine, key=lambda c: c[3])
        last = max(c[1] for c in mine)
        rows.append([step, d1 - s0, len(mine), img[3], d0 <= img[4] <= d1, img[1] - s0, last - s0,
                     img[1] - d1, last - d1])
    return rows


def _raw_nsys_ranges(db):
    rows = sql_rows(db, "SELECT COALESCE(e.text, s.value), e.globalTid & 16777215, e.start, e.end FROM NVTX_EVENTS e "
                        "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59 AND e.end IS NOT NULL")
    steps = sorted((r[2], r[1], r[3]) for r in rows if r[0] == "torch_step")
    return [(i, tid, s0, s1) for i, (s0, tid, s1) in enumerate(steps)], rows


def _raw_trace_ranges(path):
    ev = [e for e in raw_trace_events(path) if e.get("cat") == "user_annotation" and e.get("ph") == "X"]
    rows = [(e["name"], e["tid"], _us_ns(e["ts"]), _us_ns(e["ts"]) + _us_ns(e["dur"])) for e in ev]
    steps = sorted((int(n.split("#")[1]), tid, s0, s1) for n, tid, s0, s1 in rows if n.startswith("torch_step#"))
    return steps, rows


@pytest.mark.parametrize("name", ["nsys_8step", "cold_start_8step"])
def test_batch_copies_whole_table_from_the_raw_files(name, nsys_8step_report, cold):
    """Lesson 04's copy-end table, every cell against the raw recording (NVTX ranges and
    copies from the export with sqlite3; annotations and copies from the trace's JSON)."""
    if name == "nsys_8step":
        db = REF_DIR / name / "report.sqlite"
        (steps, ranges), copies, source = _raw_nsys_ranges(db), _h2d_from_sqlite(db), nsys_8step_report
    else:
        path = REF_DIR / name / "trace.json.gz"
        (steps, ranges), copies, source = _raw_trace_ranges(path), _h2d_from_json(path), cold.trace
    want = _batch_copies_by_hand(steps, ranges, copies)
    got = coldstart.batch_copies(source)
    assert got.columns.tolist() == ["step", "range_end_in_step_ns", "copies", "images_bytes", "copy_launched_in_range",
                                    "images_end_in_step_ns", "batch_end_in_step_ns", "images_end_after_range_ns",
                                    "batch_end_after_range_ns"]
    assert got.index.tolist() == list(range(8)) and len(want) == 8
    assert got.to_numpy().tolist() == want
    # images then labels, 128 x 3 x 224 x 224 float32 images, in every step of both recordings
    assert all(r[2] == 2 and r[3] == 128 * 3 * 224 * 224 * 4 for r in want)


def test_batch_copies_says_which_step_has_no_copy():
    """A CPU-only recording (the gloo ranks) has data_load and forward ranges but no copy to
    the device: the error names the file, the step and the range the copies must precede."""
    cpu = kitlib.load_trace(REF_DIR / "ranks_balanced" / "rank0" / "trace.json.gz")
    with pytest.raises(KitError, match=r"rank0/trace\.json\.gz: step \d+ has no host-to-device copy launched "
                                       r"before its 'forward' range$"):
        coldstart.batch_copies(cpu)


def _tiny_copy_trace(path, load="data_load"):
    """A two-step torch.profiler trace written by hand (times in µs, thread 1 the step's):
    step 0 [1000, 2000] with ``load`` [1000, 1100] and ``forward`` from 1100, a ``forward`` on
    thread 2 at 1200; copies launched at 1000 (300 bytes, the images, at the step's and the
    range's first instant), 1050 (30), 1100 (7, at forward's first instant) and 1500 (9,
    inside forward). Step 1 [3000, 4000] with ``load`` [3000, 3100] and no forward; copies
    launched at 3050 (20) and 3100 (300, at the range's last instant)."""
    ev, corr = [], iter(range(1, 100))

    def ann(name, tid, ts, dur):
        ev.append(event("user_annotation", name, ts, dur, tid=tid))

    def copy(launch_ts, nbytes, gpu_ts, gpu_dur):
        c = next(corr)
        ev.append(launch_event("cudaMemcpyAsync", launch_ts, c, 5))
        ev.append(gpu_event("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", gpu_ts, gpu_dur, c, bytes=nbytes))
    ann("torch_step#0", 1, 1000, 1000), ann(load, 1, 1000, 100), ann("forward", 1, 1100, 800)
    ann("forward", 2, 1200, 100)
    copy(1000, 300, 1010, 40), copy(1050, 30, 1060, 10), copy(1100, 7, 1120, 10), copy(1500, 9, 1510, 10)
    ann("torch_step#1", 1, 3000, 1000), ann(load, 1, 3000, 100)
    copy(3050, 20, 3060, 10), copy(3100, 300, 3200, 50)
    return kitlib.load_trace(write_trace(path, ev, schemaVersion=1, deviceProperties=[{"id": 0, "name": "X"}]))


@pytest.mark.parametrize("load", ["data_load", "fetch"])
def test_batch_copies_boundaries_worked_on_paper(tmp_path, load):
    """Which copies are the batch's, at every boundary, worked on paper (ns = µs x 1000).
    Step 0: copies launched on the step's thread from its start (1000, included) up to its
    first forward range on that thread (1100, excluded; the forward on thread 2 does not
    count): 1000 and 1050; images 300 bytes launched at data_load's start, so inside the
    range; ends 1050 and 1070 against the range's end 1100. Step 1 has no forward: every
    copy of the step counts, 3050 and 3100; the images launched at the range's very end,
    so outside it (half-open [start, end), kitlib.model.window); both end by 3250."""
    tr = _tiny_copy_trace(tmp_path / "trace.json", load)
    got = coldstart.batch_copies(tr, label=load) if load != "data_load" else coldstart.batch_copies(tr)
    assert got.to_numpy().tolist() == [
        # step, range end in step, copies, images bytes, launched in range, images end in step,
        # batch end in step, images end - range end, batch end - range end
        [0, 100_000, 2, 300, True, 50_000, 70_000, -50_000, -30_000],
        [1, 100_000, 2, 300, False, 250_000, 250_000, 150_000, 150_000]]


def test_batch_copies_refuses_copies_without_a_byte_count(tmp_path):
    """A trace whose memcpy events carry no ``bytes`` cannot say which copy is the images:
    a KitError naming the file and the step (it used to be a raw TypeError from int(NA))."""
    _tiny_copy_trace(tmp_path / "trace.json")
    raw = json.loads((tmp_path / "trace.json").read_text())
    for e in raw["traceEvents"]:
        e["args"].pop("bytes", None)
    (tmp_path / "bare.json").write_text(json.dumps(raw))
    with pytest.raises(KitError, match=r"bare\.json: step 0's host-to-device copies carry no byte count"):
        coldstart.batch_copies(kitlib.load_trace(tmp_path / "bare.json"))
