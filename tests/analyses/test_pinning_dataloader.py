"""Lesson 04's pinning analyses and lesson 10's loader positions, every cell derived without kitlib.

The pinning tables are recomputed from the Nsight Systems export (``report.sqlite``) with
sqlite3 and SQL: the first ``data_load`` NVTX range is the window, its thread the main
thread, the thread that ThreadNames calls ``pt_data_pin`` the pin thread. Thread ids are the
low 24 bits of ``globalTid``, process ids the next 24. The loader's positions are worked on
paper from the rule in ``kitlib/analyses/dataloader.py``'s docstring.
"""
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import sql_rows

from kitlib.analyses import dataloader, pinning
from kitlib.errors import KitError
from kitlib.readers.nsys import load_nsys

REF = Path(__file__).resolve().parents[2] / "data" / "reference"
DB = REF / "nsys_8step" / "report.sqlite"
DB_NO_PIN = REF / "nsys_emit_nvtx" / "report.sqlite"
WHOLE = (0, 2**62)                         # lesson 04's exercise: the whole recording
T24 = 0xFFFFFF


def _api_name(raw):
    return re.sub(r"_v\d{4}$", "", raw)    # as nsys stats: a four-digit version suffix only


@pytest.fixture(scope="module")
def window():
    """(start, end, main thread) of the first data_load range, and the pin thread's tid."""
    (s, e, main), = sql_rows(DB, "SELECT e.start, e.end, e.globalTid & 16777215 FROM NVTX_EVENTS e "
                                 "LEFT JOIN StringIds s ON s.id = e.textId "
                                 "WHERE coalesce(e.text, s.value) = 'data_load' ORDER BY e.start LIMIT 1")
    (pin,), = sql_rows(DB, "SELECT t.globalTid & 16777215 FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId "
                           "WHERE s.value = 'pt_data_pin'")
    assert (s, e, main, pin) == (9_342_300_130, 10_811_784_360, 1213, 1258)
    return s, e, main, pin


def _allocs(pin, lo, hi):
    return sql_rows(DB, "SELECT r.globalTid & 16777215, r.start, r.end - r.start, r.end "
                        "FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
                        "WHERE s.value LIKE 'cudaHostAlloc%' AND (r.globalTid & 16777215) = ? "
                        "AND r.start >= ? AND r.start < ? ORDER BY r.start", pin, lo, hi)


def _waits(main, lo, hi):
    return sql_rows(DB, "SELECT s.value, o.start, o.end - o.start, o.end FROM OSRT_API o "
                        "JOIN StringIds s ON s.id = o.nameId WHERE (o.globalTid & 16777215) = ? "
                        "AND s.value IN ('sem_clockwait', 'sem_timedwait', 'sem_wait', 'poll') "
                        "AND o.start < ? AND o.end > ? AND o.end - o.start >= 1000000 ORDER BY o.start", main, hi, lo)


@pytest.mark.parametrize("whole", [False, True], ids=["first data_load", "whole recording"])
def test_pin_thread_allocs_whole_table_from_the_sqlite_export(nsys_8step_report, window, whole):
    s, e, main, pin = window
    lo, hi = WHOLE if whole else (s, e)
    rows = _allocs(pin, lo, hi)
    assert len(rows) == (28 if whole else 17)
    want = pd.DataFrame({"tid": [r[0] for r in rows], "start_ns": [r[1] for r in rows],
                         "dur_ns": [r[2] for r in rows], "end_ns": [r[3] for r in rows],
                         "start_in_window_ns": [r[1] - lo for r in rows],
                         "end_in_window_ns": [r[3] - lo for r in rows],
                         "large": [r[2] >= 10_000_000 for r in rows]}).astype(
        {c: "int64" for c in ["tid", "start_ns", "dur_ns", "end_ns", "start_in_window_ns", "end_in_window_ns"]})
    got = pinning.pin_thread_allocs(nsys_8step_report, lo, hi)
    assert list(got.columns) == list(want.columns)
    assert isinstance(got.index, pd.RangeIndex) and list(got.index) == list(range(len(rows)))
    pd.testing.assert_frame_equal(got, want)
    if not whole:   # the lesson's figures: 9 large (image buffer) calls, the first at 764.3 ms of the range
        assert int(got["large"].sum()) == 9 and got["end_in_window_ns"].iloc[0] == 824_961_536


@pytest.mark.parametrize("whole", [False, True], ids=["first data_load", "whole recording"])
def test_main_thread_waits_whole_table_from_the_sqlite_export(nsys_8step_report, window, whole):
    s, e, main, _ = window
    lo, hi = WHOLE if whole else (s, e)
    rows = _waits(main, lo, hi)
    assert len(rows) == 9
    got = pinning.main_thread_waits(nsys_8step_report, lo, hi, main)
    assert list(got.columns) == ["name", "start_in_window_ns", "dur_ns", "woke_in_window_ns"]
    assert got["name"].tolist() == [r[0] for r in rows]
    assert got["start_in_window_ns"].tolist() == [r[1] - lo for r in rows]
    assert got["dur_ns"].tolist() == [r[2] for r in rows]
    assert got["woke_in_window_ns"].tolist() == [r[3] - lo for r in rows]
    if not whole:   # the main thread's 665 ms wait for its first batch, from 190.7 ms
        assert (got["start_in_window_ns"].iloc[1], got["dur_ns"].iloc[1]) == (190_706_109, 665_147_426)


def _locks_by_sql(main, lo, hi, min_ns):
    """lock_contention's documented rule, in SQL: each long pthread_mutex_lock of ``main``, the
    CUDA API call of ``main`` around it, and the other thread's (same process) call that had
    started by the lock's start and ended no later than 1 ms after the lock's end, closest in end."""
    rows = []
    for ls, le in sql_rows(DB, "SELECT o.start, o.end FROM OSRT_API o JOIN StringIds s ON s.id = o.nameId "
                               "WHERE (o.globalTid & 16777215) = ? AND s.value = 'pthread_mutex_lock' AND o.start >= ? "
                               "AND o.start < ? AND o.end - o.start >= ? ORDER BY o.start", main, lo, hi, min_ns):
        own = sql_rows(DB, "SELECT s.value FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON s.id = r.nameId "
                           "WHERE (r.globalTid & 16777215) = ? AND r.start <= ? AND r.end >= ? ORDER BY r.start",
                       main, ls, le)
        other = sql_rows(DB, "SELECT tn.value, s.value, r.start, r.end FROM CUPTI_ACTIVITY_KIND_RUNTIME r "
                             "JOIN StringIds s ON s.id = r.nameId "
                             "JOIN ThreadNames t ON t.globalTid = r.globalTid JOIN StringIds tn ON tn.id = t.nameId "
                             "WHERE (r.globalTid & 16777215) != ? AND ((r.globalTid >> 24) & 16777215) = ? "
                             "AND r.start <= ? AND r.end <= ? ORDER BY abs(? - r.end), r.start LIMIT 1",
                         main, main, ls, le + 1_000_000, le)
        rows.append((ls - lo, le - ls, _api_name(own[0][0]) if own else None)
                    + ((other[0][0], _api_name(other[0][1]), other[0][2] - lo, other[0][3] - other[0][2],
                        le - other[0][3]) if other else (None,) * 5))
    return rows


@pytest.mark.parametrize("whole", [False, True], ids=["first data_load", "whole recording"])
def test_lock_contention_whole_table_from_the_sqlite_export(nsys_8step_report, window, whole):
    s, e, main, _ = window
    lo, hi = WHOLE if whole else (s, e)
    want = _locks_by_sql(main, lo, hi, 1_000_000)
    assert want == [(10_747_566_229 - lo, 64_028_555, "cudaMemcpyAsync", "pt_data_pin", "cudaHostAlloc",
                     10_747_444_796 - lo, 64_132_986, 17_002)]
    got = pinning.lock_contention(nsys_8step_report, lo, hi, main)
    assert list(got.columns) == ["lock_start_in_window_ns", "lock_dur_ns", "inside_call", "other_thread",
                                 "other_call", "other_start_in_window_ns", "other_dur_ns",
                                 "granted_after_other_returned_ns"]
    assert [tuple(r) for r in got.astype(object).itertuples(index=False)] == want


def test_wakes_after_pinning_from_the_sqlite_export(nsys_8step_report, window):
    """Each wake-up after the first large cudaHostAlloc began, with how many large ones had begun
    by then (a wake-up at the very start of one counts it) and the time since the last of them."""
    s, e, main, pin = window
    big = [r[1] - s for r in _allocs(pin, s, e) if r[2] >= 10_000_000]
    woke = [r[3] - s for r in _waits(main, s, e) if r[3] - s > big[0]]
    cycle = [sum(b <= w for b in big) for w in woke]
    assert cycle == list(range(1, 9))
    got = pinning.wakes_after_pinning(pinning.main_thread_waits(nsys_8step_report, s, e, main), pinning.pin_thread_allocs(nsys_8step_report, s, e))
    assert list(got.columns) == ["woke_in_window_ns", "pinning_cycle", "since_cycle_start_ns"]
    assert got["woke_in_window_ns"].tolist() == woke
    assert got["pinning_cycle"].tolist() == cycle
    assert got["since_cycle_start_ns"].tolist() == [w - big[c - 1] for w, c in zip(woke, cycle)]
    assert got["since_cycle_start_ns"].tolist()[:2] == [91_578_071, 80_885_555]


def test_no_pin_thread_is_refused_with_the_threads_it_has():
    """nsys_emit_nvtx ran without pin_memory: the error names the report and its first 12 thread
    names in sorted order (from ThreadNames)."""
    names = sorted({v for (v,) in sql_rows(DB_NO_PIN, "SELECT s.value FROM ThreadNames t JOIN StringIds s "
                                                      "ON s.id = t.nameId")})
    assert len(names) > 13
    report = load_nsys(DB_NO_PIN)
    msg = f"{report.path}: no thread named 'pt_data_pin' (threads: {', '.join(names[:12])}, …)"
    with pytest.raises(KitError, match="^" + re.escape(msg) + "$"):
        pinning.pin_thread_allocs(report, *WHOLE)


# --- the documented rules at their edges, on a hand-built report (times in ns) -----------------

def _report(threads, launches=(), osrt=()):
    """A stand-in for NsysReport with the four fields the pinning analyses read."""
    api = pd.DataFrame(list(launches), columns=["tid", "pid", "name", "start_ns", "end_ns"])
    os_ = pd.DataFrame(list(osrt), columns=["tid", "name", "start_ns", "end_ns"])
    for t in (api, os_):
        t["dur_ns"] = t["end_ns"] - t["start_ns"]
    return SimpleNamespace(path="hand.sqlite", threads=pd.DataFrame(threads, columns=["tid", "pid", "name"]),
                           launches=api, osrt=os_)


THREADS = [(10, 10, "python3"), (11, 10, "pt_data_pin"), (20, 20, "other_proc")]


def _plain_rows(df):
    return [tuple(None if pd.isna(v) else v for v in r) for r in df.astype(object).itertuples(index=False)]


def test_pin_thread_allocs_window_is_half_open_and_large_means_10_ms_or_more():
    nsys_8step_report = _report(THREADS, [(11, 10, "cudaHostAlloc", 999, 1_000),                  # starts before the window
                            (11, 10, "cudaHostAlloc", 1_000, 10_001_000),           # at its start, exactly 10 ms
                            (11, 10, "cudaMemcpyAsync", 10_001_500, 10_001_600),    # not an allocation
                            (10, 10, "cudaHostAlloc", 10_001_700, 10_001_800),      # not the pin thread
                            (11, 10, "cudaHostAlloc", 10_002_000, 20_001_999),      # 1 ns short of 10 ms
                            (11, 10, "cudaHostAlloc", 30_000_000, 40_000_000)])     # at the window's end
    got = pinning.pin_thread_allocs(nsys_8step_report, 1_000, 30_000_000)
    assert _plain_rows(got) == [(11, 1_000, 10_000_000, 10_001_000, 0, 10_000_000, True),
                          (11, 10_002_000, 9_999_999, 20_001_999, 10_001_000, 20_000_999, False)]


def test_main_thread_waits_overlapping_the_window_of_1_ms_or_more():
    nsys_8step_report = _report(THREADS, osrt=[(10, "sem_wait", 1_000_000, 2_000_000),          # ends as the window starts
                                 (10, "sem_wait", 1_500_000, 2_500_000),          # overlaps its start
                                 (10, "sem_clockwait", 3_000_000, 4_000_000),     # exactly 1 ms
                                 (10, "poll", 5_000_000, 5_999_999),              # 1 ns short
                                 (10, "pthread_mutex_lock", 6_000_000, 8_000_000),  # not a wait call
                                 (11, "sem_wait", 6_000_000, 8_000_000),          # another thread
                                 (10, "sem_timedwait", 10_000_000, 12_000_000)])  # starts as it ends
    got = pinning.main_thread_waits(nsys_8step_report, 2_000_000, 10_000_000, 10)
    assert _plain_rows(got) == [("sem_wait", -500_000, 1_000_000, 500_000),
                          ("sem_clockwait", 1_000_000, 1_000_000, 2_000_000)]


def test_lock_contention_pairing_rules_on_paper():
    """Locks of at least min_ns (1 ms by default) starting in [start, end); the own call contains
    the lock (shared ends count); the other call is of another thread of the same process, began
    by the lock's start and ended at most 1 ms after its end, closest in end; an unnamed thread
    is shown by its tid; no own call or no other call gives <NA>."""
    launches = [(10, 10, "cudaMemcpyAsync", 0, 1_000_000),           # around L1, same start and end
                (11, 10, "cudaHostAlloc", 0, 2_000_000),             # L1's other: same start, ends 1 ms after
                (10, 10, "cudaLaunchKernel", 4_000_000, 7_000_000),  # around L3
                (11, 10, "cudaHostAlloc", 4_500_000, 7_000_001),     # ends 1 ms + 1 ns after L3
                (13, 10, "cudaMalloc", 9_000_000, 11_500_000),       # L2's other, a thread with no name
                (11, 10, "cudaHostAlloc", 10_500_000, 12_000_100),   # began after L2 began
                (20, 20, "cudaFree", 9_000_000, 12_000_050),         # another process
                (10, 10, "cudaMemcpyAsync", 39_000_000, 41_500_000)]
    osrt = [(10, "pthread_mutex_lock", 0, 1_000_000),                # L1: at the window's start, exactly 1 ms
            (10, "pthread_mutex_lock", 5_000_000, 6_000_000),        # L3
            (10, "pthread_mutex_lock", 10_000_000, 12_000_000),      # L2: inside no call of its thread
            (10, "pthread_mutex_lock", 20_000_000, 20_999_999),      # 1 ns short
            (10, "pthread_mutex_lock", 30_000_000, 32_000_000),      # at the window's end
            (11, "pthread_mutex_lock", 40_000_000, 42_000_000)]      # the pin thread's own lock
    nsys_8step_report = _report(THREADS, launches, osrt)
    assert _plain_rows(pinning.lock_contention(nsys_8step_report, 0, 30_000_000, 10)) == [
        (0, 1_000_000, "cudaMemcpyAsync", "pt_data_pin", "cudaHostAlloc", 0, 2_000_000, -1_000_000),
        (5_000_000, 1_000_000, "cudaLaunchKernel", "pt_data_pin", "cudaHostAlloc", 0, 2_000_000, 4_000_000),
        (10_000_000, 2_000_000, None, "13", "cudaMalloc", 9_000_000, 2_500_000, 500_000)]
    # a thread that is not its process's main thread: the others are found by its pid
    assert _plain_rows(pinning.lock_contention(nsys_8step_report, 35_000_000, 60_000_000, 11)) == [
        (5_000_000, 2_000_000, None, "python3", "cudaMemcpyAsync", 4_000_000, 2_500_000, 500_000)]
    alone = _report(THREADS[:1], osrt=[(10, "pthread_mutex_lock", 100, 2_000_100)])
    assert _plain_rows(pinning.lock_contention(alone, 0, 10_000, 10)) == [(100, 2_000_000) + (None,) * 6]


def test_wakes_after_pinning_counts_allocations_begun_by_each_wake_up():
    def allocs(starts_large):
        return pd.DataFrame({"start_in_window_ns": [s for s, _ in starts_large],
                             "large": [b for _, b in starts_large]})

    def waits(woke):
        return pd.DataFrame({"woke_in_window_ns": woke})

    got = pinning.wakes_after_pinning(waits([50, 100, 150, 200, 250]), allocs([(100, True), (150, False), (200, True)]))
    # a wake-up at the first allocation's start is not after it; one at the second's start counts it
    assert _plain_rows(got) == [(150, 1, 50), (200, 2, 0), (250, 2, 50)]
    assert list(got.columns) == ["woke_in_window_ns", "pinning_cycle", "since_cycle_start_ns"]
    assert _plain_rows(pinning.wakes_after_pinning(waits([50, 150]), allocs([(100, True)]))) == [(150, 1, 50)]
    none = pinning.wakes_after_pinning(waits([50, 150]), allocs([(100, False)]))
    assert list(none.columns) == ["woke_in_window_ns", "pinning_cycle", "since_cycle_start_ns"] and len(none) == 0


# --- lesson 10: which batch each step consumed (dataloader.py's rule, worked on paper) ----------

POSITIONS = ["step_index", "batch", "epoch", "batch_in_epoch", "worker", "round", "loader_warmup"]


def _positions(*args):
    got = dataloader.batch_positions(*args)
    assert list(got.columns) == POSITIONS
    assert [str(t) for t in got.dtypes] == ["int64"] * 6 + ["bool"]
    return {c: got[c].tolist() for c in POSITIONS}


def test_batch_positions_of_lesson_10_on_paper():
    # profiler_5step: 10 uninstrumented steps after 3 warm-up batches, 14 batches an epoch, 8 workers
    assert _positions(3, 10, 14, 8) == {
        "step_index": list(range(10)), "batch": list(range(3, 13)), "epoch": [0] * 10,
        "batch_in_epoch": list(range(3, 13)), "worker": [3, 4, 5, 6, 7, 0, 1, 2, 3, 4],
        "round": [0, 0, 0, 0, 0, 1, 1, 1, 1, 1], "loader_warmup": [True] * 6 + [False] * 4}
    # live mode's default loader: 25 batches an epoch, 2 workers
    assert _positions(3, 10, 25, 2) == {
        "step_index": list(range(10)), "batch": list(range(3, 13)), "epoch": [0] * 10,
        "batch_in_epoch": list(range(3, 13)), "worker": [1, 0] * 5,
        "round": [1, 2, 2, 3, 3, 4, 4, 5, 5, 6], "loader_warmup": [False] * 10}


def test_batch_positions_across_epochs_and_at_one_batch_or_one_worker():
    p = _positions(12, 6, 14, 8)        # batches 12..17: the epoch turns after batch 13
    assert (p["epoch"], p["batch_in_epoch"], p["worker"], p["round"], p["loader_warmup"]) == (
        [0, 0, 1, 1, 1, 1], [12, 13, 0, 1, 2, 3], [4, 5, 0, 1, 2, 3], [1, 1, 0, 0, 0, 0],
        [False, False, True, True, True, True])
    p = _positions(0, 3, 1, 1)          # one batch an epoch, one worker: both allowed
    assert (p["epoch"], p["batch_in_epoch"], p["worker"], p["round"], p["loader_warmup"]) == (
        [0, 1, 2], [0, 0, 0], [0, 0, 0], [0, 0, 0], [True] * 3)
    p = _positions(0, 4, 14, 1)
    assert (p["round"], p["loader_warmup"]) == ([0, 1, 2, 3], [True, True, False, False])


@pytest.mark.parametrize("per, workers", [(14, 0), (0, 8)])
def test_batch_positions_refuses_in_words(per, workers):
    msg = (f"batches_per_epoch and num_workers must be >= 1, not {per}, {workers} "
           "(with num_workers=0 the main process loads every batch: there are no rounds)")
    with pytest.raises(KitError, match="^" + re.escape(msg) + "$"):
        dataloader.batch_positions(0, 3, per, workers)


def test_split_warmup_of_lesson_10_from_step_times_json():
    import json
    raw = json.loads((REF / "profiler_5step" / "step_times.json").read_text())["step_ms_uninstrumented"]
    assert len(raw) == 10
    parts = dataloader.split_warmup(raw, 3, 14, 8)      # batches 3..8 warm-up, 9..12 steady
    assert parts == {"warm-up": raw[:6], "steady": raw[6:]}
    assert dataloader.split_warmup(raw, 3, 25, 2) == {"warm-up": [], "steady": raw}
    # whole numbers come back as floats, ms as documented
    ints = dataloader.split_warmup([40, 41, 42], 8, 14, 8)
    assert ints == {"warm-up": [40.0], "steady": [41.0, 42.0]}
    assert all(type(v) is float for v in ints["warm-up"] + ints["steady"])


# --- moved from the docstrings of kitlib/analyses/pinning.py (issue 39) ---------------------

def test_pinning_docstring_examples_on_the_reference_report():
    from kitlib.readers.bundle import open_capture
    report = open_capture("nsys_8step").nsys
    first = report.nvtx[report.nvtx["name"] == "data_load"].iloc[0]
    window = first["start_ns"], first["end_ns"]
    w = pinning.main_thread_waits(report, *window, first["tid"])
    assert w.columns.tolist() == ["name", "start_in_window_ns", "dur_ns", "woke_in_window_ns"]
    assert w.head(3).values.tolist() == [["sem_wait", 185527264, 1401690, 186928954],
                                         ["sem_clockwait", 190706109, 665147426, 855853535],
                                         ["sem_clockwait", 856185521, 83348343, 939533864]]
    lk = pinning.lock_contention(report, *window, first["tid"])
    assert len(lk) == 1 and lk.iloc[0].tolist() == [1405266099, 64028555, "cudaMemcpyAsync", "pt_data_pin",
                                                    "cudaHostAlloc", 1405144666, 64132986, 17002]
    wk = pinning.wakes_after_pinning(w, pinning.pin_thread_allocs(report, *window))
    assert wk.columns.tolist() == ["woke_in_window_ns", "pinning_cycle", "since_cycle_start_ns"]
    assert wk.head(3).values.tolist() == [[855853535, 1, 91578071], [939533864, 2, 80885555],
                                          [1017116429, 3, 75116026]]
