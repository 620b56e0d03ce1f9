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
