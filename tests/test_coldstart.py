"""Cold-start analyses on the reference recordings (H200)."""
import pytest

import kitlib
from kitlib.analyses import coldstart
from kitlib.analyses.steps import active_step_times, active_steps
from kitlib.errors import KitError, KitFileError
from kitlib.readers.nsys import load_nsys


@pytest.fixture(scope="module")
def report():
    return load_nsys(kitlib.open_capture("nsys_8step").file("report.sqlite"))


@pytest.fixture(scope="module")
def cold():
    return kitlib.open_capture("cold_start_8step")


def test_first_data_load_nsys(report):
    dl = coldstart.data_load_ranges(report)
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


def test_copy_end_vs_range_end_nsys(report):
    bc = coldstart.batch_copies(report)
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


def test_gap_activity(report):
    d = coldstart.data_load_ranges(report).iloc[0]
    a = coldstart.gap_activity(report, int(d["start_ns"]), int(d["end_ns"]))
    main = a[(a["tid"] == 1213) & (a["source"] == "OS runtime")].iloc[0]
    assert (main["call"], main["calls"], main["in_window_ns"]) == ("sem_clockwait", 8, 1211680275)
    pin = a[(a["thread"] == "pt_data_pin") & (a["call"] == "cudaHostAlloc")].iloc[0]
    assert pin["calls"] == 17 and pin["in_window_ns"] == 475925845
    assert (a["in_window_ns"] <= int(d["dur_ns"])).all()
    tp = coldstart.traced_processes(report).set_index("process")
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
    report = cap.nsys
    if window == "first data_load":
        d = coldstart.data_load_ranges(report).iloc[0]
        w0, w1 = int(d["start_ns"]), int(d["end_ns"])
    else:
        w0, w1 = int(report.steps["start_ns"].min()), int(report.steps["end_ns"].max())
    want = _gap_activity_from_sqlite(cap.file("report.sqlite"), w0, w1)
    got = coldstart.gap_activity(report, w0, w1)
    assert got.columns.tolist() == ["pid", "tid", "thread", "source", "call", "calls", "in_window_ns", "longest_ns"]
    assert str(got["in_window_ns"].dtype) == "int64" and got.index.tolist() == list(range(len(got)))
    assert len(got) == len(want) == rows
    assert {tuple(r[:5]): tuple(r[5:]) for r in got.itertuples(index=False)} == want
    order = sorted(((p, t, -i) for (p, t, *_), (_, i, _) in want.items()))
    assert list(zip(got["pid"], got["tid"], -got["in_window_ns"])) == order
    assert "CUDA API" in set(got["source"])


def test_gap_activity_refuses_what_it_cannot_read(report, cold):
    with pytest.raises(KitError, match="gap_activity needs an NsysReport .load_nsys., got Trace"):
        coldstart.gap_activity(cold.trace, 0, 1)
    with pytest.raises(KitError, match="window ends before it starts: 5 > 4"):
        coldstart.gap_activity(report, 5, 4)
    empty = coldstart.gap_activity(report, 5, 5)       # a zero-length window before anything ran
    assert empty.columns.tolist() == ["pid", "tid", "thread", "source", "call", "calls", "in_window_ns", "longest_ns"]
    assert empty.empty


def test_cold_start_figures_beside_b300(report, cold):
    from kitlib.course.sources import B300
    f = coldstart.cold_start_figures(report=report, b300=B300).set_index("measure")
    assert f.loc["first data_load range (Nsight NVTX)", "b300_ns"] == 535258000
    assert f.loc["batch copy end minus range end, step 0", "b300_ns"] == 949000
    # the analysis holds no quoted figures of its own: without them the column is empty
    bare = coldstart.cold_start_figures(report=report)
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


def test_data_load_ranges_table_is_relative_to_its_step(cold, report):
    """Each row's times relative to its own step (as the source texts quote them): the
    columns in order, ``start_in_step_ns = start_ns - step_start_ns`` and likewise the
    end, with ``step_start_ns`` the step's own start; on the profiler trace and the report."""
    from kitlib.analyses.steps import steps_of
    for source in (cold.trace, report):
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
