"""kitlib.course.raw_views: the tools' own material, trimmed for display but never changed."""
from __future__ import annotations

import gzip
import json

import pytest

from conftest import REF
from kitlib.course import raw_views
from kitlib.errors import KitError


@pytest.fixture(scope="module")
def five():
    from kitlib.readers.bundle import open_capture
    return open_capture("profiler_5step")


def test_printed_table_keeps_the_profilers_cells_character_for_character(five):
    text = raw_views.printed_table(five, rows=3)
    lines = text.splitlines()
    assert lines[1].split() == ["Name", "Self", "CPU", "CPU", "total", "Self", "CUDA", "CUDA", "total", "#", "of", "Calls"]
    # the first body row: the file's own cells for forward, in the kept columns
    assert lines[3].split() == ["forward", "0.000us", "0.000us", "130.924ms", "130.924ms", "5"]
    assert lines[4].split() == ["aten::convolution_backward", "17.830ms", "29.462ms", "63.804ms", "63.804ms", "265"]
    assert lines[-2:] == ["Self CPU time total: 397.327ms", "Self CUDA time total: 216.559ms"]
    assert len([ln for ln in lines if not ln.startswith("-")]) == 1 + 3 + 2


def test_printed_table_by_shape_filters_names_and_keeps_shapes(five):
    text = raw_views.printed_table(five, which=1, rows=10, columns=("Name", "# of Calls", "Input Shapes"),
                                   names=["aten::add_"])
    body = [ln for ln in text.splitlines()[3:] if ln.strip().startswith("aten::add_")]
    assert [ln.split()[1] for ln in body] == ["30", "40", "60"]       # the file's order (Self CUDA)
    assert body[0].endswith("[[128, 256, 56, 56], [128, 256, 56, 56], []]")


def test_printed_table_from_a_captures_json_rows_says_so():
    from kitlib.readers.bundle import open_capture
    text = raw_views.printed_table(open_capture("fixed_batch"), which=1, rows=2, columns=("Name", "# of Calls"),
                                   names=["aten::add_"])
    assert "laid out from key_averages.json" in text and text.count("aten::add_") == 2


def test_printed_table_errors(five):
    with pytest.raises(KitError, match="no column"):
        raw_views.printed_table(five, columns=("Name", "Nope"))
    with pytest.raises(KitError, match="tables"):
        raw_views.printed_table(five, which=9)


def test_trace_events_are_the_files_events(five):
    ev = raw_views.trace_events(five)
    assert ev == json.loads(gzip.decompress((REF / "profiler_5step" / "trace.json.gz").read_bytes()))["traceEvents"]


def test_as_json_lines_keeps_and_cuts_only_what_it_is_asked_to():
    e = {"ph": "X", "cat": "kernel", "name": "k" * 100, "ts": 1.0, "dur": 2.0, "args": {"stream": 7, "grid": [1]}}
    line = raw_views.as_json_lines([e], keys=["name", "args"], args=["stream"], name_chars=10)
    assert json.loads(line) == {"name": "k" * 9 + "…", "args": {"stream": 7}}
    assert json.loads(raw_views.as_json_lines([e])) == e


def test_nccl_excerpt_is_ten_events_of_the_public_trace_in_time_order():
    ex = raw_views.nccl_excerpt()
    doc = json.loads(gzip.decompress((REF / "public-traces" / raw_views.NCCL_TRACE).read_bytes()))
    kernels = {(e["ts"], e["dur"], e["args"]["correlation"]) for e in doc["traceEvents"] if e.get("cat") == "kernel"}
    assert len(ex) == 10 and all((e["ts"], e["dur"], e["args"]["correlation"]) in kernels for e in ex)
    assert [e["ts"] for e in ex] == sorted(e["ts"] for e in ex)
    assert ex[0]["name"].startswith("ncclKernel") and {e["args"]["stream"] for e in ex} == {84, 7}
    assert all(len(e["name"]) <= 48 for e in ex)


def test_printed_table_by_order_drops_the_footer_and_fits_the_names(five):
    text = raw_views.printed_table(five, sort_by="Self CUDA Mem", rows=2, columns=("Self CUDA Mem",))
    assert text.splitlines()[3].split() == ["aten::empty", "55.34", "GB"] and "time total" not in text
    assert text.splitlines()[0].startswith("-" * len("aten::cudnn_convolution") + "  ")
    with pytest.raises(KitError, match="ordered by 'Nope'"):
        raw_views.printed_table(five, sort_by="Nope")
