"""The main job's summary, on a reference recording, against the profiler's own table."""
import re

from kitlib import open_capture
from kitlib.capture.summary import summarize


def test_summary_of_the_reference_matches_the_profilers_table():
    text = summarize(open_capture("profiler_5step"))
    # the profiler's own table (key_averages_tables.txt): Self CPU 17.830ms, CPU total 29.462ms
    row = re.search(r"aten::convolution_backward\s+265\s+([\d.,]+)\s+[\d.]+\s+([\d.,]+)", text)
    assert row and row.groups() == ("17.830", "29.462")
    assert "before you read the numbers (kitlib.lint)" in text and "gpu_annotations" in text
    assert "ui.perfetto.dev" in text and "NVIDIA H200" in text
