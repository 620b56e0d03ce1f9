"""The readers' functions on small inputs and on the kit's recordings: memory snapshots and
their plain-pickle gate, Nsight Compute CSVs, Nsight Systems exports one or several, the
profiler's printed table, memory timelines, and the trace reader's progress bars and version
rules. These were the ``Examples`` of ``kitlib/readers`` (issue 39: tests, not reading; the
readers keep an example only where it teaches, in ``load_trace`` and
``load_nsys``); each assertion is one of their shown outputs, a table compared as it printed
(``flat``: whitespace runs as one space, as doctest's NORMALIZE_WHITESPACE did)."""
from __future__ import annotations

import pytest

from support.text import flat


def test_python_stack():
    from kitlib.readers.snapshot import python_stack
    frames = [{"name": "malloc", "filename": "CUDACachingAllocator.cpp", "line": 0},
              {"name": "conv2d", "filename": "/usr/lib/python3/site-packages/torch/nn/functional.py", "line": 10},
              {"name": "forward", "filename": "/home/me/model.py", "line": 5}]
    assert python_stack(frames) == ('torch/nn/functional.py:10:conv2d', '/home/me/model.py:5:forward')


def test_top_frame():
    from kitlib.readers.snapshot import top_frame
    assert (top_frame([{"name": "forward", "filename": "/home/me/model.py", "line": 5}]), top_frame([])) == ('/home/me/model.py:5:forward', None)


def test_memorysnapshot():
    from kitlib.readers.bundle import open_capture
    snap = open_capture("profiler_5step").memory_snapshot
    assert (len(snap.segments), len(snap.blocks), len(snap.events)) == (144, 763, 8649)


def test_memorysnapshot_reserved_bytes():
    from kitlib.readers.bundle import open_capture
    assert open_capture("profiler_5step").memory_snapshot.reserved_bytes() == 13352566784


def test_memorysnapshot_allocated_bytes():
    from kitlib.readers.bundle import open_capture
    assert open_capture("profiler_5step").memory_snapshot.allocated_bytes(device=0) == 437928448


def test_memorysnapshot_requested_bytes():
    from kitlib.readers.bundle import open_capture
    assert open_capture("profiler_5step").memory_snapshot.requested_bytes() == 430021480


def test_memorysnapshot_peak():
    from kitlib.readers.bundle import open_capture
    assert flat(repr(open_capture("profiler_5step").memory_snapshot.peak()[["action", "top_frame", "annotations", "allocated_bytes"]])) == flat('''
action                              alloc
top_frame          autograd:ReluBackward0
annotations                      backward
allocated_bytes               11434331248
Name: 884, dtype: object''')


def test_memorysnapshot_largest_live_at_peak():
    from kitlib.readers.bundle import open_capture
    assert flat(repr(open_capture("profiler_5step").memory_snapshot.largest_live_at_peak(3)[["size_bytes", "top_frame", "share_of_peak"]])) == flat('''
   size_bytes                                   top_frame  share_of_peak
0   411041792  torch/nn/modules/conv.py:548:_conv_forward       0.035948
1   411041792      torch/nn/functional.py:2846:batch_norm       0.035948
2   411041792  torch/nn/modules/conv.py:548:_conv_forward       0.035948''')


def test_memorysnapshot_summary():
    from kitlib.readers.bundle import open_capture
    s = open_capture("profiler_5step").memory_snapshot.summary()
    assert (s["segments"], s["peak_allocated_bytes"], s["peak_top_frame"]) == (144, 11434331248, 'autograd:ReluBackward0')


def test_load_memory_snapshot():
    from kitlib.readers.bundle import open_capture
    from kitlib.readers.snapshot import load_memory_snapshot
    snap = load_memory_snapshot(open_capture("profiler_5step").file("memory_snapshot.pickle"))
    s = snap.summary()
    assert (s["segments"], s["peak_allocated_bytes"], s["peak_top_frame"], s["peak_annotations"]) == (144, 11434331248, 'autograd:ReluBackward0', 'backward')


def test_load_plain_pickle(tmp_path):
    import pickle
    from pathlib import Path
    from kitlib.readers.snapshot import UnsafePickleError, load_plain_pickle
    p = tmp_path / "plain.pickle"
    p.write_bytes(pickle.dumps({"segments": [], "sizes": (1, 2)}))
    assert load_plain_pickle(p) == {'segments': [], 'sizes': (1, 2)}
    p.write_bytes(pickle.dumps(Path("x")))                 # a pickle that asks for code
    with pytest.raises(UnsafePickleError) as e:
        load_plain_pickle(p)
    assert type(e.value).__name__ == "UnsafePickleError"


def test_ncuformaterror(tmp_path):
    from kitlib.readers.ncu import NcuFormatError, load_ncu_csv
    p = tmp_path / "not_ncu.csv"
    p.write_text("a,b")
    with pytest.raises(NcuFormatError) as e:
        load_ncu_csv(p)
    assert type(e.value).__name__ == "NcuFormatError"

def test_load_ncu_csv():
    from kitlib.readers.bundle import reference_dir
    from kitlib.readers.ncu import load_ncu_csv
    tidy = load_ncu_csv(reference_dir() / "ncu" / "conv_kernels_speed_of_light.csv")
    assert flat(repr(tidy[["kernel_id", "metric", "unit", "value"]].head(3))) == flat('''
   kernel_id          metric   unit         value
0          0  DRAM Frequency     hz  3.198738e+09
1          0    SM Frequency     hz  1.969713e+09
2          0  Elapsed Cycles  cycle  1.008920e+05''')


def test_load_ncu_rules():
    from kitlib.readers.bundle import reference_dir
    from kitlib.readers.ncu import load_ncu_rules
    rules = load_ncu_rules(reference_dir() / "ncu" / "conv_kernels_speed_of_light.csv")
    assert flat(repr(rules[["kernel_id", "section", "rule", "rule_type", "estimated_speedup"]].head(3))) == flat('''
   kernel_id       section               rule rule_type  estimated_speedup
0          0  SpeedOfLight      SOLBottleneck       OPT                NaN
1          0     Occupancy  AchievedOccupancy       OPT              14.33
2          1  SpeedOfLight      SOLBottleneck       OPT                NaN''')


def test_ncu_wide():
    from kitlib.readers.bundle import reference_dir
    from kitlib.readers.ncu import load_ncu_csv, ncu_wide
    tidy = load_ncu_csv(reference_dir() / "ncu" / "conv_kernels_speed_of_light.csv")
    assert flat(repr(ncu_wide(tidy, metrics=["Duration", "Memory Throughput"]).iloc[:, :2])) == flat('''
                                                      kernel 0  kernel 1
section                       metric            unit
GPU Speed Of Light Throughput Duration          ns    51136.00   4192.00
                              Memory Throughput %        54.83      6.09''')


def test_decode_global_tid():
    from kitlib.readers.nsys import decode_global_tid
    assert decode_global_tid(281475161620536) == (11, 360504)   # (pid, tid)


def test_nvtx_gpu_projection():
    from kitlib.readers.bundle import open_capture
    from kitlib.model.nsys import nvtx_gpu_projection
    proj = nvtx_gpu_projection(open_capture("nsys_8step").nsys)
    assert flat(repr(proj[["range", "proj_dur_ns", "gpu_ops", "level"]].head(3))) == flat('''
         range  proj_dur_ns  gpu_ops  level
0  :torch_step   1250895505      505      0
1   :data_load     64596519        3      1
2     :forward    776532333      333      1''')


def test_nsys_stats():
    from kitlib.readers.bundle import open_capture
    from kitlib.readers.nsys import nsys_stats
    nvtx = nsys_stats(open_capture("nsys_8step").nsys, "nvtx_sum")
    assert flat(repr(nvtx[["Range", "Instances", "Total Time (ns)"]].head(2))) == flat('''
         Range  Instances  Total Time (ns)
0  :torch_step          8       2936885659
1   :data_load          8       1472239145''')


def test_nsysranks():
    from kitlib.readers.nsys_ranks import load_nsys_ranks
    from kitlib.readers.bundle import reference_dir
    nr = load_nsys_ranks([reference_dir() / "nsys_8step" / "report.sqlite"])
    assert flat(repr(nr)) == flat('NsysRanks(ranks [0], 1 host(s))')


def test_nsysranks_ranks():
    from kitlib.readers.nsys_ranks import load_nsys_ranks
    from kitlib.readers.bundle import reference_dir
    nr = load_nsys_ranks([reference_dir() / "nsys_8step" / "report.sqlite"])
    assert nr.ranks == [0]


def test_nsysranks_table():
    from kitlib.readers.nsys_ranks import load_nsys_ranks
    from kitlib.readers.bundle import reference_dir
    nr = load_nsys_ranks([reference_dir() / "nsys_8step" / "report.sqlite"])
    assert nr.table("kernels")[["rank", "short_name", "start_ns"]].shape == (4340, 3)


def test_nsysranks_stats():
    from kitlib.readers.nsys_ranks import load_nsys_ranks
    from kitlib.readers.bundle import reference_dir
    nr = load_nsys_ranks([reference_dir() / "nsys_8step" / "report.sqlite"])
    assert flat(repr(nr.stats("nvtx_sum")[["rank", "Range"]].head(2))) == flat('''
   rank        Range
0     0  :torch_step
1     0   :data_load''')


def test_load_nsys_ranks():
    from kitlib.readers.nsys_ranks import load_nsys_ranks
    from kitlib.readers.bundle import reference_dir
    one = load_nsys_ranks([reference_dir() / "nsys_8step" / "report.sqlite"])
    assert flat(repr(one.info[["rank", "rank_from", "offset_ns", "host"]])) == flat('''
   rank                 rank_from  offset_ns host
0     0  only export: taken as 0          0   vm''')


def test_read_profiler_table():
    from kitlib.readers.bundle import open_capture
    from kitlib.readers.profiler_table import read_profiler_table
    table, totals = read_profiler_table(open_capture("profiler_5step").file("key_averages_tables.txt"))
    assert totals == {'self_cpu_total_ns': 397327000, 'self_cuda_total_ns': 216559000}
    assert flat(repr(table[["name", "calls", "self_cuda_ns"]].head(3))) == flat('''
                              name  calls  self_cuda_ns
0                          forward      5     130924000
1       aten::convolution_backward    265      63804000
2  aten::cudnn_batch_norm_backward    265      36122000''')


def test_profiler_table():
    from kitlib.readers.bundle import open_capture
    from kitlib.readers.profiler_table import profiler_table
    table, totals = profiler_table(open_capture("profiler_5step"))
    assert totals == {'self_cpu_total_ns': 397327000, 'self_cuda_total_ns': 216559000}
    assert flat(repr(table[["name", "self_cpu_ns"]].head(2))) == flat('''
                         name  self_cpu_ns
0                     forward            0
1  aten::convolution_backward     17830000''')


def test_load_memory_timeline(tmp_path):
    import json
    from kitlib.readers.memory_timeline import load_memory_timeline
    p = tmp_path / "timeline.json"
    times = [1000, 1002]
    sizes = [[0, 4096, 0, 0, 0, 0, 0, 0, 0], [0, 4096, 0, 1024, 0, 512, 0, 0, 0]]
    p.write_text(json.dumps([times, sizes]))
    assert flat(repr(load_memory_timeline(p)[["time_ns", "parameter_bytes", "input_bytes", "activation_bytes", "total_bytes"]])) == flat('''
   time_ns  parameter_bytes  input_bytes  activation_bytes  total_bytes
0  1000000             4096            0                 0         4096
1  1002000             4096         1024               512         5632''')


def test_progress_bar():
    from kitlib.progress import progress_bar
    bar = progress_bar("reading", total=3, show=False)
    assert bar.update(3) is None
    assert bar.disable is True   # a bar object either way: the caller updates it
    bar.close()


def test_analysis_progress():
    from kitlib.model.examples import tiny_trace
    from kitlib.progress import analysis_progress
    bar = analysis_progress(tiny_trace(), "chain", stages=2)
    assert bar.disable is True   # 4 events: below PROGRESS_MIN_EVENTS, no bar shown
    bar.close()


def test_python_frames_release():
    from kitlib.readers.trace import python_frames_release
    frame = {"args": {"Python id": 2, "Python parent id": 1, "Python thread": 0}}
    assert python_frames_release([frame])[0] == '≤ 2.11'   # verbose=True wrote 'Python thread'
    assert python_frames_release([frame], top={"host_name": "vm"})[0] == '2.12–2.13'
    assert python_frames_release([{"args": {**frame["args"], "CallFrom": "a.py:3"}}])[0] == '≥ 2.14'
    assert python_frames_release([frame], torch_version="2.13.0+cpu")[0] == '2.12–2.13'


def test_memory_edges_rule():
    from kitlib.readers.trace import memory_edges_rule
    assert (memory_edges_rule("2.10.0")[0], memory_edges_rule("2.11.0")[0], memory_edges_rule(top={"host_name": "vm"})[0]) == (True, False, False)


def test_python_frames_rule():
    from kitlib.readers.trace import python_frames_rule
    assert python_frames_rule([]) == (False, 'no Python frames in the trace: the rule does not apply')


def test_load_trace_gzipped(tmp_path):
    """Was the Example of ``load_trace`` (a gzipped file); it now reads a plain one."""
    import gzip
    import json
    from kitlib.readers.trace import load_trace
    doc = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1,
                            "tid": 1, "ts": 1.5, "dur": 0.3, "args": {}}]}
    path = tmp_path / "trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    tr = load_trace(path)
    assert flat(repr(tr)) == flat("Trace(trace.json.gz: 1 CPU events, 0 launches, 0 GPU events, 0 memory events)")
    assert flat(repr(tr.ops[["name", "start_ns", "dur_ns"]])) == flat('''
         name  start_ns  dur_ns
0  aten::relu      1500     300''')


def test_trace_from_json():
    from kitlib.readers.trace import trace_from_json
    doc = {"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1,
                            "tid": 1, "ts": 1.5, "dur": 0.3, "args": {}}]}
    assert flat(repr(trace_from_json(doc).ops[["name", "kind", "start_ns", "end_ns"]])) == flat('''
         name kind  start_ns  end_ns
0  aten::relu   op      1500    1800''')


def test_load_nsys_steps():
    """Was the second half of ``load_nsys``'s Example."""
    from kitlib.readers.bundle import open_capture
    from kitlib.readers.nsys import load_nsys
    report = load_nsys(open_capture("nsys_8step"))
    assert flat(repr(report.steps[["step", "name", "dur_ns"]].head(2))) == flat('''
   step        name      dur_ns
0     0  torch_step  2656480289
1     1  torch_step    52518179''')
