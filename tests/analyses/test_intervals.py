"""kitlib.analyses.intervals on hand-made intervals whose answers can be worked out on paper."""
import numpy as np
import pandas as pd
import pytest

from kitlib.errors import KitError
from kitlib.analyses.intervals import IntervalError, busy_ns, clip, idle_gaps, per_window, union


def iv(*spans, stream=None):
    """Intervals from (start_ns, dur_ns) pairs."""
    df = pd.DataFrame(spans, columns=["start_ns", "dur_ns"]).astype("int64")
    if stream is not None:
        df["stream"] = stream
    return df


def rows(df):
    return [tuple(int(x) for x in r) for r in df[["start_ns", "end_ns", "dur_ns"]].to_numpy()]


# Two streams: stream 7 runs [100, 300) and [500, 600); stream 13 runs [250, 400).
TWO_STREAMS = pd.concat([iv((100, 200), (500, 100), stream=7), iv((250, 150), stream=13)],
                        ignore_index=True)


def test_two_streams_overlapping_are_counted_once():
    assert rows(union(TWO_STREAMS)) == [(100, 400, 300), (500, 600, 100)]
    assert busy_ns(TWO_STREAMS) == 400                 # not 200 + 100 + 150 = 450
    assert rows(idle_gaps(TWO_STREAMS)) == [(400, 500, 100)]
    # one stream on its own
    assert busy_ns(TWO_STREAMS[TWO_STREAMS.stream == 13]) == 150
    assert {k: busy_ns(g) for k, g in TWO_STREAMS.groupby("stream")} == {7: 300, 13: 150}


def test_nested_interval_adds_nothing():
    df = iv((0, 1000), (200, 100), (300, 50))
    assert rows(union(df)) == [(0, 1000, 1000)]
    assert busy_ns(df) == 1000
    assert idle_gaps(df).empty


def test_touching_intervals_merge_and_leave_no_gap():
    df = iv((10, 10), (20, 5), (25, 75))
    assert rows(union(df)) == [(10, 100, 90)]
    assert idle_gaps(df, window=(10, 100)).empty


def test_disjoint_unsorted_input():
    df = iv((700, 100), (0, 100), (300, 100))
    assert rows(union(df)) == [(0, 100, 100), (300, 400, 100), (700, 800, 100)]
    assert busy_ns(df) == 300
    assert rows(idle_gaps(df)) == [(100, 300, 200), (400, 700, 300)]


def test_end_ns_alone_is_enough():
    df = pd.DataFrame({"start_ns": [0, 50], "end_ns": [100, 150]})
    assert rows(union(df)) == [(0, 150, 150)]


def test_zero_length_intervals_cover_nothing():
    df = iv((100, 0), (200, 10))
    assert rows(union(df)) == [(200, 210, 10)]
    assert busy_ns(df) == 10


def test_empty_input_gives_empty_results_not_errors():
    empty = iv()
    for df in (empty, pd.DataFrame()):
        assert union(df).empty and list(union(df).columns) == ["start_ns", "end_ns", "dur_ns"]
        assert busy_ns(df) == 0
        assert busy_ns(df, window=(0, 10)) == 0
        assert idle_gaps(df).empty
        assert rows(idle_gaps(df, window=(5, 25))) == [(5, 25, 20)]
        assert clip(df, 0, 10).empty


def test_window_clipping():
    # [100,400) and [500,600) seen through [350, 550)
    assert busy_ns(TWO_STREAMS, window=(350, 550)) == 50 + 50
    assert busy_ns(TWO_STREAMS, window=(0, 50)) == 0
    assert busy_ns(TWO_STREAMS, window=(120, 130)) == 10
    c = clip(TWO_STREAMS, 350, 550)
    assert c.index.tolist() == [1, 2]               # original rows, original index
    assert c[["start_ns", "dur_ns", "stream"]].values.tolist() == [[500, 50, 7], [350, 50, 13]]
    assert TWO_STREAMS.start_ns.tolist() == [100, 500, 250]   # input untouched


def test_clip_keeps_end_ns_consistent():
    df = pd.DataFrame({"start_ns": [0], "dur_ns": [100], "end_ns": [100]})
    assert clip(df, 30, 60)[["start_ns", "dur_ns", "end_ns"]].values.tolist() == [[30, 30, 60]]


def test_idle_gaps_in_window_include_edges():
    # union [100,400), [500,600) in window [0, 1000): gaps [0,100), [400,500), [600,1000)
    assert rows(idle_gaps(TWO_STREAMS, window=(0, 1000))) == [
        (0, 100, 100), (400, 500, 100), (600, 1000, 400)]
    # window cutting through busy time: no leading gap, trailing one only
    assert rows(idle_gaps(TWO_STREAMS, window=(150, 700))) == [(400, 500, 100), (600, 700, 100)]


def test_gap_threshold_is_strict():
    df = iv((0, 10), (20, 10), (50, 10), (100, 10))      # gaps of 10, 20, 40
    assert [g[2] for g in rows(idle_gaps(df))] == [10, 20, 40]
    assert rows(idle_gaps(df, min_gap_ns=10)) == [(30, 50, 20), (60, 100, 40)]
    assert rows(idle_gaps(df, min_gap_ns=20)) == [(60, 100, 40)]
    assert idle_gaps(df, min_gap_ns=40).empty


def test_per_window():
    steps = pd.DataFrame({"name": ["step#1", "step#2", "empty", "zero"],
                          "start_ns": [0, 350, 2000, 120],
                          "end_ns": [350, 1000, 3000, 120]})
    out = per_window(TWO_STREAMS, steps)
    assert out.name.tolist() == ["step#1", "step#2", "empty", "zero"]
    assert out.window_ns.tolist() == [350, 650, 1000, 0]
    # step#1 [0,350): busy [100,350) = 250; durations cut: 200 (s7) + 100 (s13) = 300
    # step#2 [350,1000): busy [350,400)+[500,600) = 150; durations cut 100 + 50 = 150
    assert out.busy_ns.tolist() == [250, 150, 0, 0]
    assert out.sum_dur_ns.tolist() == [300, 150, 0, 0]
    assert out.idle_ns.tolist() == [100, 500, 1000, 0]
    assert out.n_intervals.tolist() == [2, 2, 0, 0]


def test_per_window_matches_the_single_window_functions_on_random_data():
    rng = np.random.default_rng(0)
    start = rng.integers(0, 10**6, 2000)
    df = pd.DataFrame({"start_ns": start + 1_795_996_073_160_670_000,   # epoch-sized clock
                       "dur_ns": rng.integers(0, 5000, 2000)})
    t0 = 1_795_996_073_160_670_000
    edges = np.arange(0, 10**6 + 1, 100_000) + t0
    windows = pd.DataFrame({"start_ns": edges[:-1], "end_ns": edges[1:]})
    out = per_window(df, windows)
    for w, r in zip(windows.itertuples(), out.itertuples()):
        assert r.busy_ns == busy_ns(df, window=(w.start_ns, w.end_ns))
        c = clip(df, w.start_ns, w.end_ns)
        assert r.sum_dur_ns == int(c.dur_ns.sum())
        assert r.n_intervals == len(c)
    assert int(out.busy_ns.sum()) == busy_ns(df, window=(edges[0], edges[-1]))


def test_per_window_empty():
    out = per_window(iv(), pd.DataFrame({"name": ["a"], "start_ns": [0], "end_ns": [10]}))
    assert out[["busy_ns", "sum_dur_ns", "idle_ns", "n_intervals"]].values.tolist() == [[0, 0, 10, 0]]
    assert per_window(TWO_STREAMS, pd.DataFrame({"start_ns": [], "end_ns": []})).empty


@pytest.mark.parametrize("df, message", [
    (pd.DataFrame({"start_ns": [1]}), "need columns"),
    (pd.DataFrame({"begin": [1], "dur_ns": [2]}), "need columns"),
    (iv((100, 5), (200, -3)), "negative duration"),
    (pd.DataFrame({"start_ns": [1.5], "dur_ns": [2]}), "fractional"),
    (pd.DataFrame({"start_ns": [None, 1], "dur_ns": [2, 2]}), "missing value"),
    ([(0, 1)], "expected a pandas DataFrame"),
])
def test_bad_input_is_refused_clearly(df, message):
    with pytest.raises(IntervalError, match=message) as info:
        busy_ns(df)
    assert isinstance(info.value, KitError) and isinstance(info.value, ValueError)


def test_bad_window_and_threshold():
    with pytest.raises(IntervalError, match="ends before it starts"):
        busy_ns(TWO_STREAMS, window=(10, 5))
    with pytest.raises(IntervalError, match="min_gap_ns"):
        idle_gaps(TWO_STREAMS, min_gap_ns=-1)
    with pytest.raises(IntervalError, match="windows: .*negative duration"):
        per_window(TWO_STREAMS, pd.DataFrame({"start_ns": [10], "end_ns": [5]}))


def test_per_window_counting_rules_dtypes_and_windows_given_by_duration():
    """Worked on paper (mutmut's survivors on per_window, 1 December 2026):
    window [10, 20), given by start and duration (so ``end_ns`` is added: 20);
    intervals: [0, 10) ends at the window's start (not counted), [15, 15) zero-length
    inside (counted, covers nothing), [10, 10) zero-length at the start (counted: the rule
    is [start_ns, end_ns)), [20, 20) zero-length at the end (not counted), [12, 14) inside.
    A second window [0, 10) holds the first interval only; a third, [16, 30), only the
    zero-length [20, 20). Every figure column is int64."""
    df = pd.DataFrame({"start_ns": [0, 15, 10, 20, 12], "dur_ns": [10, 0, 0, 0, 2]})
    windows = pd.DataFrame({"name": ["w", "v", "u"], "start_ns": [10, 0, 16], "dur_ns": [10, 10, 14]})
    out = per_window(df, windows)
    assert out.columns.tolist() == ["name", "start_ns", "dur_ns", "end_ns", "window_ns", "busy_ns",
                                    "sum_dur_ns", "idle_ns", "n_intervals"]
    assert out["end_ns"].tolist() == [20, 10, 30]
    assert out[["window_ns", "busy_ns", "sum_dur_ns", "idle_ns", "n_intervals"]].to_numpy().tolist() == \
        [[10, 2, 2, 8, 3], [10, 10, 10, 0, 1], [14, 0, 0, 14, 1]]   # v: [10, 10) lies outside [0, 10)
    assert {c: str(out[c].dtype) for c in ("window_ns", "busy_ns", "sum_dur_ns", "idle_ns", "n_intervals")} == \
        dict.fromkeys(("window_ns", "busy_ns", "sum_dur_ns", "idle_ns", "n_intervals"), "int64")


def test_per_window_with_nothing_at_all():
    """No intervals and no windows: an empty table, not an error."""
    out = per_window(pd.DataFrame({"start_ns": [], "dur_ns": []}), pd.DataFrame({"start_ns": [], "end_ns": []}))
    assert out.empty and "busy_ns" in out.columns


# ================================================================================================
# The interval helpers pinned on inputs worked on paper.
#
# ``kitlib.analyses.intervals`` (``clip``, ``idle_gaps`` and the window check) is checked
# on tiny tables whose answers are worked out by hand from the rules in its docstrings: an
# interval covers ``[start_ns, start_ns + dur_ns)``, a zero-length row counts in a window
# when ``start <= start_ns < end``, a gap is kept when strictly longer than ``min_gap_ns``.
# ================================================================================================

# -- intervals: clip and idle_gaps on tables worked on paper ----------------------------

def test_clip_keeps_what_overlaps_and_zero_length_rows_in_start_inclusive_end_exclusive():
    """Window [10, 20). Worked on paper:
    a [0, 10) ends where the window starts: no overlap, dropped;
    b [10, 20) is the window: kept whole;
    c [20, 30) starts where the window ends: dropped;
    d [15, 25) overlaps: cut to [15, 20);
    z0 at 10 (the window's start), z1 at 15: zero-length rows inside, kept;
    z2 at 20 (the window's end) and z3 at 40: outside, dropped."""
    df = pd.DataFrame({"name": ["a", "b", "c", "d", "z0", "z1", "z2", "z3"],
                       "start_ns": [0, 10, 20, 15, 10, 15, 20, 40],
                       "dur_ns": [10, 10, 10, 10, 0, 0, 0, 0]},
                      index=[100, 101, 102, 103, 104, 105, 106, 107])
    got = clip(df, 10, 20)
    assert got["name"].tolist() == ["b", "d", "z0", "z1"]          # original order
    assert got.index.tolist() == [101, 103, 104, 105]              # and original index
    assert got["start_ns"].tolist() == [10, 15, 10, 15]
    assert got["dur_ns"].tolist() == [10, 5, 0, 0]
    # the same rows given by end_ns: end_ns is cut too (b: 20, d: 20, z0: 10, z1: 15)
    by_end = clip(df.assign(end_ns=df["start_ns"] + df["dur_ns"]).drop(columns="dur_ns"), 10, 20)
    assert by_end["name"].tolist() == ["b", "d", "z0", "z1"]
    assert by_end["end_ns"].tolist() == [20, 20, 10, 15]


def test_idle_gaps_default_keeps_a_one_ns_gap():
    """[0, 10) and [11, 20) leave the gap [10, 11): 1 ns, strictly longer than the default
    ``min_gap_ns=0``, so it is listed; with ``min_gap_ns=1`` it is not (strictly longer)."""
    df = pd.DataFrame({"start_ns": [0, 11], "dur_ns": [10, 9]})
    assert idle_gaps(df).values.tolist() == [[10, 11, 1]]
    assert idle_gaps(df, window=(0, 20)).values.tolist() == [[10, 11, 1]]
    assert idle_gaps(df, min_gap_ns=1).empty



def test_window_that_is_not_a_pair_is_refused_in_words():
    """``_window``'s message, worked from its source text: a window that is not a pair of
    integers is named as given."""
    from kitlib.analyses.intervals import IntervalError, busy_ns
    df = pd.DataFrame({"start_ns": [0], "dur_ns": [10]})
    with pytest.raises(IntervalError, match=r"^window must be a pair \(start_ns, end_ns\) of integers, got 5$"):
        busy_ns(df, window=5)




# --- moved from the docstrings of kitlib/analyses/intervals.py (issue 39) -------------------

def _doc_df():
    df = pd.DataFrame({"start_ns": [0, 50, 200], "end_ns": [100, 150, 300]})
    df["dur_ns"] = df["end_ns"] - df["start_ns"]
    return df


def test_interval_error_is_a_value_error():
    with pytest.raises(IntervalError) as e:
        busy_ns(pd.DataFrame({"start_ns": [10], "end_ns": [5]}))
    assert type(e.value).__name__ == "IntervalError" and isinstance(e.value, ValueError)


def test_union_arrays_clip_windows_and_covered_before_docstring_examples():
    from kitlib.analyses.intervals import covered_before, idle_gaps_in_windows, union_arrays
    s, e = union_arrays(np.array([10, 0, 5, 30]), np.array([20, 5, 8, 30]))
    assert (s.tolist(), e.tolist()) == ([0, 10], [8, 20])
    c = clip(_doc_df(), 50, 250)
    assert c.columns.tolist() == ["start_ns", "end_ns", "dur_ns"] and c.index.tolist() == [0, 1, 2]
    assert c.values.tolist() == [[50, 100, 50], [50, 150, 100], [200, 250, 50]]
    g = idle_gaps_in_windows(_doc_df(), pd.DataFrame({"start_ns": [0, 200], "end_ns": [200, 400]}))
    assert g.columns.tolist() == ["window", "start_ns", "end_ns", "dur_ns"]
    assert g.values.tolist() == [[0, 150, 200, 50], [1, 300, 400, 100]]
    assert covered_before(np.array([0, 10]), np.array([5, 20]), np.array([3, 12, 100])).tolist() == [3, 7, 15]
