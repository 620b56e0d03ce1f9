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
