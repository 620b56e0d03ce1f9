"""The ``Examples`` that were tests more than examples, moved out of the docstrings of
kitlib/analyses (issue 39): each runs here as it ran as a doctest, with its module's names and
the same flags (NORMALIZE_WHITESPACE, ELLIPSIS), so every output it showed is still checked."""
import doctest
import importlib

import pytest

EXAMPLES = {
    'kitlib.analyses.steps.active_steps': (
        'kitlib.analyses.steps', '''\
>>> from kitlib.analyses.steps import active_steps
>>> active_steps([90.0, 60.0, 51.0, 50.0, 52.0], {"wait": 1, "warmup": 1, "active": 3})
[51.0, 50.0, 52.0]
>>> active_steps([51.0, 50.0, 52.0], {"wait": 1, "warmup": 1, "active": 3})
[51.0, 50.0, 52.0]
'''),
    'kitlib.analyses.trace_diff.diff_events': (
        'kitlib.analyses.trace_diff', '''\
>>> from kitlib.model.examples import tiny_trace
>>> from kitlib.analyses.trace_diff import diff_events
>>> diff_events(tiny_trace())
   step    kind         name input_shapes  device_ns  start_ns
0     1  kernel  relu_kernel                     400       300
>>> diff_events(tiny_trace(), "operators")[["step", "name", "device_ns"]]
   step        name  device_ns
0     1  aten::relu        400
1     1   aten::add          0
'''),
    'kitlib.analyses.trace_diff.trace_diff': (
        'kitlib.analyses.trace_diff', '''\
Two one-step traces, built here: ``aten::mm`` launches ``mm_kernel``; after the
change it runs 30 µs instead of 50 µs, and a ``relu_kernel`` of 5 µs is new.

>>> from kitlib.readers.trace import trace_from_json
>>> def run(mm_us, relu):
...     x = lambda cat, name, ts, dur, **a: dict(ph="X", cat=cat, name=name, pid=1, tid=1,
...                                              ts=ts, dur=dur, args=a)
...     ev = [x("user_annotation", "ProfilerStep#1", 0, 100),
...           x("cpu_op", "aten::mm", 10, 20, **{"External id": 11, "Input Dims": [[2, 3], [3, 4]]}),
...           x("cuda_runtime", "cudaLaunchKernel", 12, 5, correlation=1, **{"External id": 11}),
...           dict(x("kernel", "mm_kernel", 20, mm_us, correlation=1, device=0, stream=7), pid=0, tid=7)]
...     if relu:
...         ev += [x("cpu_op", "aten::relu", 40, 10, **{"External id": 12, "Input Dims": [[2, 4]]}),
...                x("cuda_runtime", "cudaLaunchKernel", 42, 5, correlation=2, **{"External id": 12}),
...                dict(x("kernel", "relu_kernel", 60, 5, correlation=2, device=0, stream=7), pid=0, tid=7)]
...     return trace_from_json({"traceEvents": ev})
>>> from kitlib.analyses.trace_diff import trace_diff
>>> d = trace_diff(run(50, False), run(30, True))
>>> d[["name", "before_count", "after_count", "device_change_ns", "change"]]
          name  before_count  after_count  device_change_ns  change
0    mm_kernel             1            1            -20000  faster
1  relu_kernel             0            1              5000   added
>>> d.attrs["steps"]
[1]
>>> trace_diff(run(50, False), run(30, True), "operators")[["name", "input_shapes", "change"]]
         name    input_shapes  change
0    aten::mm  [[2, 3], [3, 4]]  faster
1  aten::relu          [[2, 4]]   added
'''),
    'kitlib.analyses.coldstart.loader_epoch_length': (
        'kitlib.analyses.coldstart', '''\
>>> from kitlib.analyses.coldstart import loader_epoch_length
>>> from types import SimpleNamespace
>>> loader_epoch_length(SimpleNamespace(workload={"batch_size": 128, "dataset": "synthetic: 1,792 JPEGs"}))
14
>>> loader_epoch_length(SimpleNamespace(workload={"batch_size": 100, "drop_last": False,
...                                               "dataset": "synthetic: 1,792 JPEGs"}))
18
'''),
    'kitlib.analyses.gpu_idle.checked_events': (
        'kitlib.analyses.gpu_idle', '''\
>>> import pandas as pd
>>> from kitlib.analyses.gpu_idle import GpuIdleError, checked_events
>>> from kitlib.model.examples import tiny_trace
>>> checked_events(tiny_trace())[["kind", "name", "start_ns", "end_ns"]]
     kind         name  start_ns  end_ns
0  kernel  relu_kernel       300     700
>>> try:
...     checked_events(tiny_trace(), events=pd.DataFrame({"start_ns": []}))
... except GpuIdleError as e:
...     print(e)
tiny.json: the events table lacks ['device', 'stream', 'end_ns']; use device_events()
'''),
    'kitlib.analyses.gpu_idle.step_verdicts': (
        'kitlib.analyses.gpu_idle', '''\
>>> from kitlib.model.examples import tiny_trace
>>> from kitlib.analyses.gpu_idle import step_verdicts
>>> v = step_verdicts(tiny_trace())
>>> v[["step", "queue_empty_share", "device_busy_share", "verdict"]]
   step  queue_empty_share  device_busy_share    verdict
0     1               0.45                0.4  CPU-bound
>>> print(v["evidence"].iloc[0])
queue empty 45.0 % of the step (0.000 of 0.001 ms), GPU busy 40.0 %, host wait 0.0 %, mean queue 0.6, max 1
'''),
    'kitlib.analyses.steps.active_step_times': (
        'kitlib.analyses.steps', '''\
>>> from kitlib.readers.bundle import open_capture
>>> from kitlib.analyses.steps import active_step_times
>>> {k: len(v) for k, v in active_step_times(open_capture("profiler_5step")).items()}
{'step_ms_uninstrumented': 10, 'step_ms_fixed_batch': 10, 'step_ms_profiled_all_attribution': 5}
'''),
    'kitlib.analyses.steps.labelled_ranges': (
        'kitlib.analyses.steps', '''\
>>> from kitlib.model.examples import tiny_trace
>>> tr = tiny_trace()
>>> from kitlib.analyses.steps import labelled_ranges
>>> labelled_ranges(tr)[["name", "start_ns", "end_ns"]]
             name  start_ns  end_ns
0  ProfilerStep#1         0    1000
'''),
    'kitlib.analyses.steps.device_work': (
        'kitlib.analyses.steps', '''\
>>> from kitlib.model.examples import tiny_trace
>>> tr = tiny_trace()
>>> from kitlib.analyses.steps import device_work
>>> device_work(tr)[["kind", "name", "start_ns", "end_ns"]]
     kind         name  start_ns  end_ns
0  kernel  relu_kernel       300     700
'''),
    'kitlib.analyses.steps.host_context': (
        'kitlib.analyses.steps', '''\
>>> from kitlib.model.examples import tiny_trace
>>> tr = tiny_trace()
>>> from kitlib.analyses.steps import host_context
>>> host_context(tr, [150, 400])[["time_ns", "host_event", "host_event_kind"]]
   time_ns      host_event host_event_kind
0      150      aten::relu              op
1      400  ProfilerStep#1            step
'''),
    'kitlib.analyses.trace_diff.shapes_recorded': (
        'kitlib.analyses.trace_diff', '''\
>>> from kitlib.model.examples import tiny_trace
>>> from kitlib.analyses.trace_diff import shapes_recorded
>>> shapes_recorded(tiny_trace())        # its operators have no Input Dims
False
'''),
    'kitlib.analyses.coldstart.slowest_step_position': (
        'kitlib.analyses.coldstart', '''\
>>> from kitlib.analyses.coldstart import slowest_step_position
>>> slowest_step_position([50.0, 51.0, 90.0, 50.5], first_batch=1, batches_per_epoch=3)
{'step_index': 2, 'step_ms': 90.0, 'median_ms': 50.75, 'epoch': 1, 'batch_in_epoch': 0, 'epoch_start': True}
'''),
    'kitlib.analyses.lint.lint': (
        'kitlib.analyses.lint', '''\
>>> from kitlib.model.examples import tiny_trace
>>> tr = tiny_trace()
>>> from kitlib.analyses.lint import lint
>>> [f.code for f in lint(tr)]             # nothing wrong with the five-event trace
[]
'''),
    'kitlib.analyses.chain.external_ids_trustworthy': (
        'kitlib.analyses.chain', '''\
>>> from kitlib.model.examples import tiny_trace
>>> tr = tiny_trace()
>>> from kitlib.analyses.chain import external_ids_trustworthy
>>> external_ids_trustworthy(tr)
(True, 1.0)
'''),
    'kitlib.analyses.chain.innermost_op_at': (
        'kitlib.analyses.chain', '''\
>>> from kitlib.model.examples import tiny_trace
>>> tr = tiny_trace()
>>> from kitlib.analyses.chain import innermost_op_at
>>> innermost_op_at(tr, 1, 1, [150, 400, 1000]).tolist()    # relu, then the step (add is zero-length)
[1, 0, -1]
'''),
    'kitlib.analyses.chain.impossible_gpu_events': (
        'kitlib.analyses.chain', '''\
>>> from kitlib.model.examples import tiny_trace
>>> tr = tiny_trace()
>>> from kitlib.analyses.chain import impossible_gpu_events
>>> len(impossible_gpu_events(tr))          # the kernel starts after its launch: nothing odd
0
'''),
    'kitlib.analyses.gpu_idle.GpuIdleError': (
        'kitlib.analyses.gpu_idle', '''\
>>> from kitlib.readers.trace import trace_from_json
>>> from kitlib.analyses.gpu_idle import GpuIdleError, queue_length
>>> op = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 0, "dur": 1}
>>> try:
...     queue_length(trace_from_json({"traceEvents": [op]}, "cpu_only.json"))
... except GpuIdleError as e:
...     print(e)
cpu_only.json: no GPU events (no kernel, copy or set): a CPU-only recording, or one without CUDA activity, cannot tell when the GPU was idle
'''),
    'kitlib.analyses.gpu_idle.source_name': (
        'kitlib.analyses.gpu_idle', '''\
>>> from kitlib.analyses.gpu_idle import source_name
>>> from kitlib.model.examples import tiny_trace
>>> source_name(tiny_trace()), source_name(None)
('tiny.json', '<table>')
'''),
    'kitlib.analyses.gpu_idle.device_events': (
        'kitlib.analyses.gpu_idle', '''\
>>> from kitlib.model.examples import tiny_trace
>>> from kitlib.analyses.gpu_idle import device_events
>>> device_events(tiny_trace())[["kind", "stream", "start_ns", "end_ns", "launch_start_ns"]]
     kind  stream  start_ns  end_ns  launch_start_ns
0  kernel       7       300     700              150
'''),
    'kitlib.analyses.gpu_idle.require_launches': (
        'kitlib.analyses.gpu_idle', '''\
>>> from kitlib.analyses.gpu_idle import GpuIdleError, device_events, require_launches
>>> from kitlib.model.examples import tiny_trace
>>> tr = tiny_trace()
>>> ev = device_events(tr)
>>> require_launches(ev, tr)
>>> try:
...     require_launches(ev.assign(launch_start_ns=float("nan")), tr)
... except GpuIdleError as e:
...     print(str(e)[:60])
tiny.json: none of its 1 GPU events has its launch (CUDA run
'''),
    'kitlib.analyses.gpu_idle.stream_gaps': (
        'kitlib.analyses.gpu_idle', '''\
Two kernels on one stream, the second launched after the first ended (a host wait):

>>> from kitlib.readers.trace import trace_from_json
>>> from kitlib.analyses.gpu_idle import stream_gaps
>>> k = lambda n, ts, dur, c: {"ph": "X", "cat": "kernel", "name": n, "pid": 0, "tid": 7, "ts": ts,
...                             "dur": dur, "args": {"stream": 7, "device": 0, "correlation": c}}
>>> la = lambda ts, c: {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
...                     "tid": 1, "ts": ts, "dur": 1, "args": {"correlation": c}}
>>> tr = trace_from_json({"traceEvents": [la(0, 1), k("a", 2, 3, 1), la(8, 2), k("b", 10, 1, 2)]})
>>> stream_gaps(tr)[["start_ns", "end_ns", "dur_ns", "category"]]
   start_ns  end_ns  dur_ns   category
0      5000   10000    5000  host_wait
'''),
    'kitlib.analyses.gpu_idle.queue_summary': (
        'kitlib.analyses.gpu_idle', '''\
>>> from kitlib.model.examples import tiny_trace
>>> from kitlib.analyses.gpu_idle import queue_summary
>>> queue_summary(tiny_trace())[["step", "window_ns", "queue_length_mean", "queue_length_max", "queue_empty_ns"]]
   step  window_ns  queue_length_mean  queue_length_max  queue_empty_ns
0     1       1000               0.55                 1             450
'''),
    'kitlib.analyses.gpu_idle.stream_concurrency': (
        'kitlib.analyses.gpu_idle', '''\
>>> from kitlib.model.examples import tiny_trace
>>> from kitlib.analyses.gpu_idle import stream_concurrency
>>> stream_concurrency(tiny_trace())[["step", "streams_0_ns", "streams_1_ns", "streams_2plus_ns"]]
   step  streams_0_ns  streams_1_ns  streams_2plus_ns
0     1           600           400                 0
'''),
    'kitlib.analyses.gpu_idle.temporal_breakdown': (
        'kitlib.analyses.gpu_idle', '''\
>>> from kitlib.model.examples import tiny_trace
>>> from kitlib.analyses.gpu_idle import temporal_breakdown
>>> temporal_breakdown(tiny_trace())
   device  span_ns  idle_ns  compute_ns  non_compute_ns
0       0      400        0         400               0
'''),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_moved_example(name):
    module, text = EXAMPLES[name]
    globs = dict(vars(importlib.import_module(module)))
    test = doctest.DocTestParser().get_doctest(text, globs, name, module, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0 and result.failed == 0, f"{name}: {result.failed} of {result.attempted} failed"
