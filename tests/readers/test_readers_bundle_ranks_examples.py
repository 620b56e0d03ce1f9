"""The bundle reader and the multi-rank reader, function by function, on the kit's
recordings and on ``kitlib.model.examples.tiny_rank_folder``: a bundle's manifest, files,
labels and what it was recorded on; one trace per rank as one table. These were the
``Examples`` of ``kitlib/readers/bundle.py`` and ``kitlib/readers/ranks.py`` (issue 39: tests,
not reading; ``open_capture`` and ``load_traces`` keep theirs; what ``RankTraces``' own
doctests in ``kitlib/model/ranks.py`` assert is not repeated here); each assertion is one of their
shown outputs, a table compared as it printed (``flat``: whitespace runs as one space, as
doctest's NORMALIZE_WHITESPACE did)."""
from __future__ import annotations

import re

import pytest

from support.text import flat


def test_software_provenance():
    from kitlib.readers.bundle import software_provenance
    info = software_provenance(import_torch=False)
    assert ({"python", "os", "cpu_count", "date", "torch", "gpu"} <= set(info)) is True


def test_import_torchvision():
    from kitlib.readers.bundle import import_torchvision
    assert import_torchvision().__name__ == 'torchvision'


def test_nvidia_smi_query():
    from kitlib.readers.bundle import nvidia_smi_query
    gpus = nvidia_smi_query("name,memory.total")
    assert (isinstance(gpus, list) and all(len(g) == 2 for g in gpus)) is True


def test_write_bundle(tmp_path):
    import json
    from kitlib.readers.bundle import open_capture, write_bundle
    folder = tmp_path
    (folder / "step_times.json").write_text(json.dumps({"step_ms_uninstrumented": [51.0, 50.0]}))
    manifest = write_bundle(folder, kind="timing", name="my_timing", origin="live",
                            files={"step_times.json": "step wall times, ms"},
                            provenance={"gpu": None})   # default: software_provenance(), which imports torch
    assert (manifest.name, open_capture(folder).step_times()) == ('manifest.json', {'step_ms_uninstrumented': [51.0, 50.0]})


def test_steptimes():
    from kitlib.readers.bundle import open_capture
    times = open_capture("profiler_5step").step_times()
    assert (times.path.name, isinstance(times, dict), len(times["step_ms_uninstrumented"]) > 0) == ('step_times.json', True, True)


def test_capture():
    from kitlib.readers.bundle import open_capture
    c = open_capture("profiler_5step")
    assert (c.path.name, c.manifest["format"], c.found_in) == ('profiler_5step', 'kitlib-bundle/1', 'kit')


def test_capture_name():
    from kitlib.readers.bundle import open_capture
    assert open_capture("profiler_5step").name == 'profiler_5step'


def test_capture_kind():
    from kitlib.readers.bundle import open_capture
    assert (open_capture("profiler_5step").kind, open_capture("nsys_8step").kind) == ('torch_profiler', 'nsys')


def test_capture_origin():
    from kitlib.readers.bundle import open_capture
    assert open_capture("profiler_5step").origin == 'recorded'


def test_capture_provenance():
    from kitlib.readers.bundle import open_capture
    p = open_capture("profiler_5step").provenance
    assert (p["gpu"], p["torch"]) == ('NVIDIA H200', '2.11.0+cu130')


def test_capture_recipe():
    from kitlib.readers.bundle import open_capture
    assert open_capture("profiler_5step").recipe["schedule"] == {'wait': 1, 'warmup': 1, 'active': 5}


def test_capture_workload():
    from kitlib.readers.bundle import open_capture
    w = open_capture("profiler_5step").workload
    assert (w["batch_size"], w["num_workers"], w["labels"]) == (128, 8, ['data_load', 'h2d', 'forward', 'backward', 'optimizer'])


def test_capture_files():
    from kitlib.readers.bundle import open_capture
    assert open_capture("profiler_5step").files == ['trace.json.gz', 'key_averages_tables.txt', 'step_times.json', 'memory_snapshot.pickle']


def test_capture_has():
    from kitlib.readers.bundle import open_capture
    c = open_capture("profiler_5step")
    assert (c.has("trace.json.gz"), c.has("report.sqlite")) == (True, False)


def test_capture_file():
    from kitlib.readers.bundle import open_capture
    assert open_capture("profiler_5step").file("step_times.json").name == 'step_times.json'


def test_capture_read_json():
    from kitlib.readers.bundle import open_capture
    assert sorted(open_capture("profiler_5step").read_json("step_times.json")) == ['step_ms_fixed_batch', 'step_ms_profiled_all_attribution', 'step_ms_uninstrumented']


def test_capture_trace():
    from kitlib.readers.bundle import open_capture
    a, b = open_capture("profiler_5step").trace, open_capture("profiler_5step").trace
    assert (a is b, len(a.ops) == len(b.ops)) == (False, True)
    assert flat(repr(a.steps[["step", "name"]].head(2))) == flat('''
   step            name
0     2  ProfilerStep#2
1     3  ProfilerStep#3''')


def test_capture_nsys():
    from kitlib.readers.bundle import open_capture
    report = open_capture("nsys_8step").nsys
    assert (report.version, len(report.kernels)) == ('2025.3.2.0', 4340)


def test_capture_memory_snapshot():
    from kitlib.readers.bundle import open_capture
    snap = open_capture("profiler_5step").memory_snapshot
    assert type(snap).__name__ == 'MemorySnapshot'


def test_capture_step_times():
    from kitlib.readers.bundle import open_capture
    assert {k: len(v) for k, v in open_capture("profiler_5step").step_times().items()} == {'step_ms_uninstrumented': 10, 'step_ms_fixed_batch': 10, 'step_ms_profiled_all_attribution': 7}


def test_capture_key_averages():
    from kitlib.readers.bundle import open_capture
    ka = open_capture("fixed_batch").key_averages()
    assert sorted(ka) == ['batch_size', 'by_input_shape', 'by_name', 'by_stack_5', 'steps', 'torch']
    row = ka["by_name"][0]
    assert (row["count"], row["self_device_time_total_us"] > 0) == (17, True)


def test_capture_first_of():
    from kitlib.readers.bundle import open_capture
    from kitlib.errors import BundleError
    c = open_capture("profiler_5step")
    assert c.first_of("trace.json", "trace.json.gz") == 'trace.json.gz'
    with pytest.raises(BundleError) as e:
        c.first_of("report.sqlite")
    assert e.value.problem.split(" (")[0] == "this torch_profiler bundle has none of report.sqlite"


def test_capture_whose():
    from kitlib.readers.bundle import open_capture
    assert open_capture("profiler_5step").whose == "kit's H200 reference"


def test_capture_label():
    from kitlib.readers.bundle import open_capture
    assert open_capture("profiler_5step").label == "profiler_5step: kit's H200 reference, 2026-11-29"


def test_capture_describe():
    from kitlib.readers.bundle import open_capture
    assert flat(str(open_capture("profiler_5step").describe())) == flat("profiler_5step (torch_profiler, recorded): kit's H200 reference\n  device:   NVIDIA H200, driver 580.159.04\n  software: torch 2.11.0+cu130, torchvision 0.26.0+cu130, CUDA 13.0, cuDNN 91900, Python 3.12.3\n  recorded: 2026-11-29 on Linux 6.18 (Firecracker VM), 16 CPUs\n  files:    trace.json.gz, key_averages_tables.txt, step_times.json, memory_snapshot.pickle")


def test_is_recording_name():
    from kitlib.readers.bundle import is_recording_name
    assert (is_recording_name("profiler_5step"), is_recording_name("runs/profiler_5step")) == (True, False)


def test_find_recording():
    from kitlib.readers.bundle import find_recording
    folder, where = find_recording("profiler_5step")
    assert (folder.name, where) == ('profiler_5step', 'kit')


def test_opened_labels():
    from kitlib.readers.bundle import open_capture, opened_labels
    c = open_capture("profiler_5step")
    assert (c.label in opened_labels()) is True


def test_relabel_opened():
    from kitlib.readers.bundle import OPEN_LOG, label_for, open_capture, relabel_opened
    c = open_capture("profiler_5step")
    c.found_in = "own"
    try:
        assert relabel_opened(c) == 'profiler_5step: your own recording (H200), 2026-11-29'
        assert (label_for(c.path) == OPEN_LOG[-1] == c.label) is True
    finally:
        c.found_in = "kit"
        relabel_opened(c)


def test_note_source(tmp_path):
    from kitlib.readers.bundle import label_for, note_source
    folder = str(tmp_path)
    assert note_source(folder, "my CPU run") == 'my CPU run'
    assert label_for(folder + "/trace.json") == 'my CPU run'


def test_label_for():
    from kitlib.readers.bundle import label_for, open_capture
    c = open_capture("profiler_5step")
    assert label_for(c.path / "trace.json.gz") == "profiler_5step: kit's H200 reference, 2026-11-29"
    assert (label_for("/nowhere/trace.json") is None) is True


def test_folder_label():
    from kitlib.readers.bundle import folder_label, reference_dir
    assert folder_label(reference_dir() / "public-traces") == "public NCCL pair (HTA's sampled A100 run)"
    assert folder_label("/tmp/my_traces") == 'my_traces: trace files (no kit manifest)'


def test_reference_dir():
    from kitlib.readers.bundle import reference_dir
    assert ((reference_dir() / "profiler_5step" / "manifest.json").is_file()) is True


def test_clinic_dir():
    from kitlib.readers.bundle import clinic_dir
    assert ((clinic_dir() / "cpu" / "clinic.json").is_file()) is True


def test_list_references():
    from kitlib.readers.bundle import list_references
    assert ("profiler_5step" in list_references()) is True


def test_ranktraces():
    """What RankTraces' doctest (kitlib/model/ranks.py) does not show: rank 1's kernels, the manifest."""
    from kitlib.model.examples import tiny_rank_folder
    from kitlib.readers.ranks import load_traces
    traces = load_traces(tiny_rank_folder())
    assert (len(traces.traces[1].kernels), traces.manifest) == (4, {})


def test_ranktraces_label():
    from kitlib.model.examples import tiny_rank_folder
    from kitlib.readers.ranks import load_traces
    traces = load_traces(tiny_rank_folder())
    assert re.fullmatch(r"tiny-ranks-.*: trace files \(no kit manifest\)", traces.label)
    assert (load_traces(sorted(tiny_rank_folder().glob("*.json"))).label is None) is True


def test_ranktraces_table():
    from kitlib.model.examples import tiny_rank_folder
    from kitlib.readers.ranks import load_traces
    traces = load_traces(tiny_rank_folder())
    assert flat(repr(traces.table("kernels")[["rank", "row", "stream", "start_ns", "dur_ns"]])) == flat('''
   rank  row  stream  start_ns   dur_ns
0     0    0       7   1000000  2000000
1     0    1      20   3100000  2900000
2     0    2       7   4000000  1000000
3     0    3       7  11000000  2000000
4     0    4      20  13100000  1900000
5     1    0       7   1000000  4000000
6     1    1      20   5100000   900000
7     1    2       7  11000000  3000000
8     1    3      20  14100000   900000''')
    with pytest.raises(KeyError) as e:
        traces.table("stacks")
    assert e.value.args == ("no table 'stacks'; the tables are: ops, launches, gpu, kernels, memory, "
                            "other, steps",)


def test_ranktraces_ops():
    from kitlib.model.examples import tiny_rank_folder
    from kitlib.readers.ranks import load_traces
    traces = load_traces(tiny_rank_folder())
    ops = traces.ops
    assert flat(repr(ops.loc[ops["rank"] == 1, ["rank", "row", "name", "start_ns", "parent"]].head(4))) == flat('''
    rank  row                name  start_ns  parent
9      1    0      ProfilerStep#1         0      -1
10     1    1            aten::mm    920000       0
11     1    2  record_param_comms   4980000       0
12     1    3     nccl:all_reduce   4990000       2''')


def test_ranktraces_gpu():
    from kitlib.model.examples import tiny_rank_folder
    from kitlib.readers.ranks import load_traces
    traces = load_traces(tiny_rank_folder())
    assert flat(repr(traces.gpu.groupby(["rank", "stream"]).size())) == flat('''
rank  stream
0     7         3
      20        2
1     7         2
      20        2
dtype: int64''')


def test_wall_step_times():
    from kitlib.readers.ranks import load_traces, wall_step_times
    w = wall_step_times(load_traces("ranks_straggler"))
    assert flat(str(w[w["series"] == "step_ms_uninstrumented"].round(1).to_string(index=False))) == flat(' rank                 series  i  step_ms\n    0 step_ms_uninstrumented  0   1925.1\n    0 step_ms_uninstrumented  1   1843.4\n    1 step_ms_uninstrumented  0   1954.4\n    1 step_ms_uninstrumented  1   1880.8')


def test_default_workers():
    from kitlib.readers.ranks import default_workers
    assert (default_workers(1), default_workers(2), default_workers(0)) == (1, 1, 1)
