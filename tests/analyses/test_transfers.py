"""kitlib.analyses.transfers: the examples once in its docstrings (issue 39)."""
from kitlib.analyses.transfers import copy_summary, device_name
from kitlib.model.examples import tiny_trace
from kitlib.readers.trace import trace_from_json


def test_device_name_of_a_trace_without_devices():
    assert device_name(tiny_trace()) is None


def test_copy_summary_of_one_pinned_copy():
    cp = {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0, "tid": 7,
          "ts": 10, "dur": 2, "args": {"stream": 7, "device": 0, "correlation": 1, "bytes": 100000}}
    s = copy_summary(trace_from_json({"traceEvents": [cp]}), device="H200")
    assert s[["copy_kind", "copies", "gb_per_s"]].values.tolist() == [["HtoD", 1, 50.0]]
