"""Fast paths give the same answers as the plain ones they replace (speed itself is
measured in benchmarks/, not here)."""
from __future__ import annotations

import pandas as pd

import kitlib
from kitlib.analyses.intervals import idle_gaps, idle_gaps_in_windows
from kitlib.analyses.steps import device_work, steps_of


def test_gaps_in_many_windows_equal_gaps_window_by_window():
    for source in (kitlib.open_capture("profiler_5step").trace, kitlib.open_capture("nsys_8step").nsys):
        work, steps = device_work(source), steps_of(source)
        # the steps, plus windows that start and end inside busy periods and one past the end
        w = pd.concat([steps[["start_ns", "end_ns"]],
                       pd.DataFrame({"start_ns": [int(work["start_ns"].iloc[10]) + 1, int(work["end_ns"].max())],
                                     "end_ns": [int(work["end_ns"].iloc[200]) - 1, int(work["end_ns"].max()) + 10**6]})],
                      ignore_index=True)
        for min_gap in (0, 1_000_000):
            fast = idle_gaps_in_windows(work, w, min_gap_ns=min_gap)
            for k, row in enumerate(w.itertuples()):
                slow = idle_gaps(work, window=(row.start_ns, row.end_ns), min_gap_ns=min_gap)
                got = fast[fast["window"] == k].drop(columns="window").reset_index(drop=True)
                pd.testing.assert_frame_equal(got, slow)
        assert len(fast) > len(steps)


def test_gaps_in_windows_on_paper_and_what_they_refuse():
    """Worked by hand: busy [10, 20) and [30, 40) ns; windows [0, 50) and [15, 35). Gaps
    [0,10), [20,30), [40,50) in the first and [20,30) in the second; with min_gap_ns=10
    none is longer than 10 ns. No windows gives an empty table with the same int64
    columns; bad windows and a negative min_gap_ns are refused in words."""
    import numpy as np
    import pytest
    from kitlib.analyses.intervals import IntervalError
    work = pd.DataFrame({"start_ns": [10, 30], "dur_ns": [10, 10]})
    w = pd.DataFrame({"start_ns": [0, 15], "end_ns": [50, 35]})
    g = idle_gaps_in_windows(work, w)
    assert g.columns.tolist() == ["window", "start_ns", "end_ns", "dur_ns"]
    assert g.values.tolist() == [[0, 0, 10, 10], [0, 20, 30, 10], [0, 40, 50, 10], [1, 20, 30, 10]]
    assert all(t == np.int64 for t in g.dtypes) and g.index.tolist() == [0, 1, 2, 3]
    assert idle_gaps_in_windows(work, w, min_gap_ns=10).empty
    none = idle_gaps_in_windows(work, w.iloc[:0])
    assert none.columns.tolist() == ["window", "start_ns", "end_ns", "dur_ns"] and len(none) == 0
    assert all(t == np.int64 for t in none.dtypes)
    with pytest.raises(IntervalError, match=r"^min_gap_ns must be >= 0, got -1$"):
        idle_gaps_in_windows(work, w, min_gap_ns=-1)
    with pytest.raises(IntervalError, match=r"^windows: column 'start_ns' has 1 missing value\(s\)$"):
        idle_gaps_in_windows(work, w.assign(start_ns=[0, None]))
    with pytest.raises(IntervalError, match=r"^windows: column 'end_ns' has 1 missing value\(s\)$"):
        idle_gaps_in_windows(work, w.assign(end_ns=[None, 35]))
