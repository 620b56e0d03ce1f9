"""kitlib.lint's findings pinned on the shipped recordings: each finding's code, severity
and evidence recomputed from the raw trace JSON by the test itself, and the checks'
boundaries worked on paper.
"""
import gzip
import json
import math
import re
from collections import Counter, defaultdict
from pathlib import Path

import pytest

import kitlib
from kitlib.analyses.lint import Finding, lint

from conftest import raw_trace_events

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "data" / "reference"
PUBLIC = ROOT / "tests" / "data" / "public-traces"

# Kineto's categories (torch/csrc/profiler/kineto_shim.cpp, libkineto ActivityType names)
GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy", "gpu_memset": "memset",
            "memset": "memset", "gpu_user_annotation": "gpu_annotation"}
LAUNCH_CATS = ("cuda_runtime", "runtime", "cuda_driver")
STEP = re.compile(r"^(ProfilerStep|torch_step)#(\d+)$")     # the profiler's and the kit's step labels

# The severity each check is documented with (kitlib/analyses/lint.py, Finding.severity):
# "error" when the trace cannot answer its question, "warning" when naive figures are
# wrong, "info" for a limit to keep in mind.
SEVERITY = {"no_gpu_events": "error", "cpu_only": "info", "launches_without_gpu": "warning",
            "impossible_gpu_events": "error", "gpu_without_launches": "warning",
            "gpu_annotations": "warning", "step_without_kernels": "warning",
            "over_100_percent": "warning", "missing_stacks": "warning", "external_ids_fell_back": "info",
            "flops_unreadable": "warning", "backward_flops_absent": "info", "pageable_copies": "warning",
            "too_large_for_viewer": "warning"}


def _ns(us):
    """µs with three decimals (the JSON's text) to exact ns."""
    whole = math.floor(us)
    return int(whole) * 1000 + int(round((us - whole) * 1000))


def raw(path):
    """The trace's own JSON, read without kitlib: GPU rows, launches, host events, steps."""
    evs = raw_trace_events(path)
    gpu, launches, host, steps = [], [], [], []
    for e in evs:
        if e.get("ph") != "X":
            continue
        cat, args = str(e.get("cat", "")).lower(), e.get("args") or {}
        s = _ns(e["ts"])
        d = int(round(e.get("dur", 0) * 1000))
        if cat in GPU_CATS:
            gpu.append(dict(kind=GPU_CATS[cat], name=e["name"], s=s, e=s + d, d=d, corr=args.get("correlation"),
                            bytes=args.get("bytes")))
        elif cat in LAUNCH_CATS:
            launches.append(dict(name=e["name"], s=s, corr=args.get("correlation")))
        elif cat in ("cpu_op", "user_annotation", "python_function"):
            host.append(dict(cat=cat, name=e["name"], tid=e.get("tid"), s=s, e=s + d, dims=args.get("Input Dims")))
            m = STEP.match(e["name"])
            if cat == "user_annotation" and m:
                steps.append((int(m.group(2)), s, s + d))
    return dict(gpu=gpu, launches=launches, host=host, steps=sorted(steps))


def _cut(rows, s0, s1):
    return sum(max(0, min(r["e"], s1) - max(r["s"], s0)) for r in rows)


def expected_evidence(r):
    """code -> evidence, worked from the raw JSON by the rules lint's docstring states."""
    out = {}
    work = [g for g in r["gpu"] if g["kind"] != "gpu_annotation"]
    ann = [g for g in r["gpu"] if g["kind"] == "gpu_annotation"]
    corr = {la["corr"] for la in r["launches"] if la["corr"] is not None}
    orphan = [g for g in work if g["corr"] not in corr]
    if orphan:
        oldest = min(corr)
        out["gpu_without_launches"] = {
            "gpu_events": len(orphan), "launched_before_recording": sum(g["corr"] < oldest for g in orphan),
            "no_launch": sum(g["corr"] >= oldest for g in orphan), "gpu_sum_ns": sum(g["d"] for g in orphan)}
    if ann:
        out["gpu_annotations"] = {"annotations": len(ann), "annotation_sum_ns": sum(g["d"] for g in ann),
                                  "kernel_sum_ns": sum(g["d"] for g in work if g["kind"] == "kernel")}
    over = []
    for step, s0, s1 in r["steps"]:
        total = _cut(r["gpu"], s0, s1)          # every GPU row, annotations included: a sum, not busy time
        if work and s1 > s0 and total > s1 - s0:
            over.append((step, total, s1 - s0, _cut(ann, s0, s1)))
    if over:
        w = max(over, key=lambda o: o[1] / o[2])
        out["over_100_percent"] = {"steps": [o[0] for o in over], "worst_step": w[0], "worst_sum_ns": w[1],
                                   "worst_wall_ns": w[2], "worst_annotation_ns": w[3]}
    pageable = [g for g in work if g["kind"] == "memcpy" and "Pageable" in g["name"]]
    if pageable:
        out["pageable_copies"] = {"copies": len(pageable), "bytes": sum(g["bytes"] or 0 for g in pageable),
                                  "copy_sum_ns": sum(g["d"] for g in pageable)}
    return out


# The operators with_flops counts (torch/csrc/profiler/util.cpp, computeFlops) that a ResNet-50
# step calls; the profiler's own FLOPs per name are in fixed_batch/key_averages.json.gz.
FLOP_NAMES = ("aten::conv2d", "aten::addmm", "aten::mm")


def _backward_flops_evidence(r):
    """``backward_flops_absent``'s evidence from the raw JSON and the profiler's own rows:
    calls and FLOPs the profiler counted (its key_averages rows with FLOPs, of the
    fixed_batch run: the same calls with the same Input Dims as each shipped 5-step run,
    checked here), the counted calls inside an autograd node (a ``…Backward…`` event
    around them on their thread) and the ``convolution_backward`` operators."""
    ka = json.load(gzip.open(REF / "fixed_batch" / "key_averages.json.gz"))["by_name"]
    counted = [row for row in ka if row.get("flops")]
    assert sorted(row["key"] for row in counted) == sorted(FLOP_NAMES)
    calls = Counter((h["name"], json.dumps(h["dims"])) for h in r["host"] if h["cat"] == "cpu_op" and h["name"] in FLOP_NAMES)
    fixed = raw(REF / "fixed_batch" / "trace.json.gz")
    assert calls == Counter((h["name"], json.dumps(h["dims"])) for h in fixed["host"]
                            if h["cat"] == "cpu_op" and h["name"] in FLOP_NAMES)
    assert sum(calls.values()) == sum(row["count"] for row in counted)
    by_tid = defaultdict(list)
    for h in r["host"]:
        if "Backward" in h["name"]:
            by_tid[h["tid"]].append(h)
    in_backward = sum(any(a["s"] <= h["s"] and h["e"] <= a["e"] for a in by_tid[h["tid"]])
                      for h in r["host"] if h["cat"] == "cpu_op" and h["name"] in FLOP_NAMES)
    return {"counted_calls": sum(row["count"] for row in counted),
            "counted_flops": sum(row["flops"] for row in counted),
            "backward_calls_counted": in_backward,
            "convolution_backward_calls": sum(h["cat"] == "cpu_op" and "convolution_backward" in h["name"]
                                              for h in r["host"])}


TRACES = [REF / "fixed_batch" / "trace.json.gz", REF / "profiler_5step" / "trace.json.gz",
          REF / "cold_start_8step" / "trace.json.gz", REF / "public-traces" / "hta_2024-03_nccl_sampled_rank0.json.gz",
          PUBLIC / "tracelens_torch2.6_h100_bert_small.json.gz", PUBLIC / "hta_2024-10_triton_driver_launch.json.gz"]

# Which checks fire on each recording, and why (each reason is recomputed below):
CODES = {
    "fixed_batch": ["gpu_without_launches", "gpu_annotations", "over_100_percent", "backward_flops_absent",
                    "python_frames_rule"],
    "profiler_5step": ["gpu_annotations", "over_100_percent", "backward_flops_absent", "python_frames_rule"],
    "cold_start_8step": ["gpu_annotations", "over_100_percent"],
    "hta_2024-03_nccl_sampled_rank0.json.gz": ["pageable_copies"],
    "tracelens_torch2.6_h100_bert_small.json.gz": ["gpu_annotations", "python_frames_rule"],
    "hta_2024-10_triton_driver_launch.json.gz": [],
}


def _trace(path, ref_trace, public_trace):
    """The suite's shared copy of a trace (conftest's session caches)."""
    if path.name == "trace.json.gz":
        return ref_trace(path.parent.name)
    if path.parent == PUBLIC:
        return public_trace(path.name)
    return kitlib.load_trace(path)


def _label(p):
    return p.parent.name if p.name == "trace.json.gz" else p.name


@pytest.mark.parametrize("path", TRACES, ids=_label)
def test_lint_codes_severities_and_evidence_from_raw_json(path, ref_trace, public_trace):
    """Every finding on six recordings: the checks that fire (in the documented order),
    their severity, and each number of their evidence worked from the JSON itself."""
    r = raw(path)
    found = lint(_trace(path, ref_trace, public_trace))
    assert [f.code for f in found] == CODES[_label(path)]
    assert all(isinstance(f, Finding) and f.severity == SEVERITY.get(f.code, f.severity) for f in found)
    exp = expected_evidence(r)
    by_code = {f.code: f for f in found}
    for code, ev in exp.items():
        assert by_code[code].evidence == ev, code
        assert all(type(v) is int or isinstance(v, list) for v in by_code[code].evidence.values())
    for f in found:                                   # every finding says what it means and what to do
        assert isinstance(f.meaning, str) and isinstance(f.action, str) and f.meaning and f.action
    if "backward_flops_absent" in by_code:
        assert by_code["backward_flops_absent"].evidence == _backward_flops_evidence(r)
        n = by_code["backward_flops_absent"].evidence["backward_calls_counted"]
        assert f"while {n} backward call(s) that reach aten::mm" in by_code["backward_flops_absent"].meaning
    if path.name == "trace.json.gz":                  # the bundle: its recipe adds no finding to these,
        cap = kitlib.open_capture(path.parent.name)   # and its manifest names the torch that recorded it
        torch = json.loads((path.parent / "manifest.json").read_text())["provenance"]["torch"]
        children = tuple(int(x) for x in torch.split("+")[0].split(".")[:2]) >= (2, 12)
        want = [(f.code, f.severity, f.evidence) if f.code != "python_frames_rule" else
                (f.code, "info", {**f.evidence, "frames_are_children": children, "inferred": False}) for f in found]
        assert [(f.code, f.severity, f.evidence) for f in lint(cap)] == want
    if "python_frames_rule" in by_code:
        n_py = sum(h["cat"] == "python_function" for h in r["host"])
        ev = by_code["python_frames_rule"].evidence
        assert ev["python_frames"] == n_py
        assert f"the trace holds {n_py:,} Python frames" in by_code["python_frames_rule"].meaning
    if "over_100_percent" in by_code:                 # the worst step's share, as printed
        ev = exp["over_100_percent"]
        pct = f"worst: step {ev['worst_step']}, {ev['worst_sum_ns'] / ev['worst_wall_ns']:.0%}"
        assert pct in by_code["over_100_percent"].meaning
        assert f"in {len(ev['steps'])} step(s)" in by_code["over_100_percent"].meaning
    if "pageable_copies" in by_code:                  # each copy name with its count
        names = Counter(g["name"] for g in r["gpu"] if g["kind"] == "memcpy" and "Pageable" in g["name"])
        listed = "; ".join(f"{n} ×{c}" for n, c in names.most_common())
        assert f"copies use pageable host memory ({listed})" in by_code["pageable_copies"].meaning


# --------------------------------------------------------------------------- on paper
# Tiny traces written as Kineto writes them (the fields of tests/data/bugcases'
# traces); times in µs, so 1.0 is 1,000 ns. Every expected figure below is counted by hand.
T0 = 1_000_000.0        # an arbitrary clock origin, µs


def _write(tmp_path, events, devices=1, options=None, name="t.json"):
    doc = {"schemaVersion": 1, "traceEvents": [
        {"name": "process_name", "ph": "M", "ts": T0, "pid": 1, "tid": 0, "args": {"name": "python3"}},
        {"name": "thread_name", "ph": "M", "ts": T0, "pid": 1, "tid": 1, "args": {"name": "thread 1 (python3)"}},
        *events]}
    if devices:
        doc["deviceProperties"] = [{"id": i, "name": "NVIDIA H200"} for i in range(devices)]
    doc.update(options or {})          # Kineto writes record_shapes, with_stack, ... at the top level
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return kitlib.load_trace(p)


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": T0 + ts, "dur": dur, "args": args}


def _launch(name, ts, corr, dur=1.0):
    return _x("cuda_runtime", name, ts, dur, correlation=corr)


def _gpu(cat, name, ts, dur, corr, stream=7, **args):
    return _x(cat, name, ts, dur, pid=0, tid=stream, correlation=corr, stream=stream, device=0, **args)


def _codes(found):
    return {f.code: f for f in found}


def test_launches_without_gpu_counted_by_hand(tmp_path):
    """Which calls count as launches (the pattern, or an API that shares a correlation id with
    GPU work elsewhere), how many have no GPU event, and how many come at the very end."""
    t = _write(tmp_path, [
        _launch("cudaLaunchKernel", 1.0, 1), _gpu("kernel", "k1", 10.0, 5.0, 1),
        _launch("cudaLaunchKernel", 2.0, 2), _gpu("kernel", "k2", 20.0, 5.0, 2),
        _launch("cudaLaunchKernel", 19.999, 3),           # starts 1 ns before the last GPU start: late
        _launch("cuLaunchKernel", 5.0, 4),                 # the driver's launch, no GPU event: early
        _launch("cudaMemcpyAsync", 3.0, 5), _gpu("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 30.0, 2.0, 5, bytes=64),
        _launch("cudaMemcpyAsync", 40.0, 6),              # shares its name with a call that made GPU work
        _launch("cudaStreamSynchronize", 41.0, 7),        # launches nothing: not counted
    ])
    f = _codes(lint(t))["launches_without_gpu"]
    assert f.severity == "warning"
    # launches: corr 1, 2, 3, 4 (by name) and 5, 6 (cudaMemcpyAsync made GPU work) = 6;
    # without a GPU event: 3, 4, 6; late (at or after 29.999 µs, 1 ns before the last GPU
    # start, the copy's 30.0 µs): only corr 6 at 40.0 µs
    assert f.evidence == {"kernel_launches": 6, "without_gpu_event": 3, "after_last_gpu_start": 1,
                          "last_gpu_end_ns": int((T0 + 32.0) * 1000)}
    # without the copy, the last GPU start is k2's (20.0 µs): corr 3 at 19.999 µs is then late too
    t2 = _write(tmp_path, [
        _launch("cudaLaunchKernel", 1.0, 1), _gpu("kernel", "k1", 10.0, 5.0, 1),
        _launch("cudaLaunchKernel", 2.0, 2), _gpu("kernel", "k2", 20.0, 5.0, 2),
        _launch("cudaLaunchKernel", 19.999, 3), _launch("cudaLaunchKernel", 19.998, 4)], name="t2.json")
    f2 = _codes(lint(t2))["launches_without_gpu"]
    assert f2.evidence == {"kernel_launches": 4, "without_gpu_event": 2, "after_last_gpu_start": 1,
                           "last_gpu_end_ns": int((T0 + 25.0) * 1000)}


def _step(n, ts, dur):
    return _x("user_annotation", f"ProfilerStep#{n}", ts, dur)


def test_step_findings_counted_by_hand(tmp_path):
    """A step with operators and no launch that made GPU work; the summed GPU rows of a step
    against its wall time (a sum above 100 % is flagged, exactly 100 % is not), and the worst
    step picked by ratio, not by size."""
    t = _write(tmp_path, [
        _step(1, 0.0, 10.0),                                         # 10,000 ns
        _x("cpu_op", "aten::mm", 1.0, 2.0), _launch("cudaLaunchKernel", 1.5, 1),
        _gpu("kernel", "k1", 2.0, 6.0, 1), _gpu("kernel", "k1b", 2.0, 6.0, 1, stream=8),   # 12,000 ns: 120 %
        _step(2, 10.0, 100.0),                                       # 100,000 ns
        _x("cpu_op", "aten::mm", 11.0, 2.0), _launch("cudaLaunchKernel", 11.5, 2),
        _gpu("kernel", "k2", 12.0, 60.0, 2), _gpu("kernel", "k2b", 12.0, 50.0, 2, stream=8),   # 110 %
        _gpu("gpu_user_annotation", "phase", 105.0, 10.0, 2, stream=9),   # 5,000 ns inside step 2
        _step(3, 110.0, 20.0),
        _x("cpu_op", "aten::add", 111.0, 1.0), _x("cpu_op", "aten::mul", 112.0, 1.0),
        _launch("cudaLaunchKernel", 111.5, 3),                       # no GPU event for corr 3
        _step(4, 130.0, 10.0),                                       # exactly 100 %: not flagged
        _x("cpu_op", "aten::mm", 130.0, 1.0), _launch("cudaLaunchKernel", 130.5, 4),
        _gpu("kernel", "k4", 130.0, 10.0, 4),
    ])
    f = _codes(lint(t))
    assert f["step_without_kernels"].evidence == {"steps": [3], "operators": 2}
    assert "1 step(s) ran operators but launched no GPU work" in f["step_without_kernels"].meaning
    over = f["over_100_percent"]
    # step 1: 12,000 / 10,000 = 120 %; step 2: (60,000 + 50,000 + 5,000) / 100,000 = 115 %
    assert over.evidence == {"steps": [1, 2], "worst_step": 1, "worst_sum_ns": 12_000, "worst_wall_ns": 10_000,
                             "worst_annotation_ns": 0}
    assert "in 2 step(s)" in over.meaning and "(worst: step 1, 120%)" in over.meaning
    assert over.severity == f["step_without_kernels"].severity == "warning"


def test_step_findings_cut_to_the_step_and_the_annotation_share(tmp_path):
    """GPU rows are cut to the step's window; the worst step's annotation time is reported."""
    t = _write(tmp_path, [
        _step(1, 0.0, 10.0),
        _x("cpu_op", "aten::mm", 1.0, 1.0), _launch("cudaLaunchKernel", 1.5, 1),
        _gpu("kernel", "k1", 5.0, 20.0, 1),                          # 5,000 ns inside step 1
        _gpu("gpu_user_annotation", "forward", -5.0, 12.0, 1, stream=9),   # 7,000 ns inside
        _step(2, 10.0, 10.0),                                        # k1's other 10,000 ns: 100 %, not over
        _x("cpu_op", "aten::mm", 11.0, 1.0),
    ])
    f = _codes(lint(t))
    assert f["over_100_percent"].evidence == {"steps": [1], "worst_step": 1, "worst_sum_ns": 12_000,
                                              "worst_wall_ns": 10_000, "worst_annotation_ns": 7_000}
    assert f["step_without_kernels"].evidence == {"steps": [2], "operators": 1}


def test_what_says_cuda_was_requested(tmp_path):
    """No GPU work at all: an error when CUDA was asked for (the recipe's activities, the
    trace's deviceProperties or its CUDA calls, in that order of evidence), else a CPU-only note."""
    ops = [_x("cpu_op", "aten::mm", 1.0, 2.0), _x("cpu_op", "aten::add", 4.0, 1.0)]
    cpu = _write(tmp_path, ops, devices=0, name="cpu.json")
    assert [(f.code, f.severity, f.evidence) for f in lint(cpu)] == [("cpu_only", "info", {"cpu_events": 2, "gpu_events": 0})]
    only = lint(cpu)[0]
    assert only.meaning.startswith("a CPU-only recording") and only.action.startswith("for device time")
    for recipe in ({"activities": ["ProfilerActivity.CPU", "ProfilerActivity.CUDA"]}, {"activities": ["cuda"]}):
        f = _codes(lint(cpu, recipe=recipe))["no_gpu_events"]
        assert f.severity == "error" and f.evidence == {"launches": 0, "gpus_listed": 0}
        assert "although CUDA was requested (the recipe lists the CUDA activity)" in f.meaning
    assert [f.code for f in lint(cpu, recipe={"activities": ["CPU"]})] == ["cpu_only"]
    assert [f.code for f in lint(cpu, recipe={"activities": None})] == ["cpu_only"]
    two = _write(tmp_path, ops, devices=2, name="two.json")
    f = _codes(lint(two))["no_gpu_events"]
    assert f.evidence == {"launches": 0, "gpus_listed": 2}
    assert "(the trace lists 2 GPU(s) in deviceProperties)" in f.meaning
    calls = _write(tmp_path, ops + [_launch("cudaLaunchKernel", 1.5, 1), _launch("cudaMalloc", 2.0, 2),
                                    _launch("cudaLaunchKernel", 2.5, 3)], devices=0, name="calls.json")
    f = _codes(lint(calls))["no_gpu_events"]
    assert f.evidence == {"launches": 3, "gpus_listed": 0}
    assert "(the trace holds 3 CUDA API calls)" in f.meaning


def test_viewer_size_limits_are_strict(tmp_path):
    """``too_large_for_viewer`` fires above a limit, not at it; by default the size is the
    JSON text's (what a viewer parses), the events every table's rows."""
    ev = [_x("cpu_op", "aten::mm", 1.0, 2.0), _launch("cudaLaunchKernel", 1.5, 1), _gpu("kernel", "k", 3.0, 1.0, 1)]
    t = _write(tmp_path, ev)
    size = (tmp_path / "t.json").stat().st_size          # plain JSON: the file is the text
    n = 3 + 2                                             # three complete events and two metadata events
    assert "too_large_for_viewer" not in _codes(lint(t, max_bytes=size, max_events=n))
    f = _codes(lint(t, max_bytes=size - 1, max_events=n))["too_large_for_viewer"]
    assert f.severity == "warning"
    assert f.evidence == {"file_bytes": size, "events": n, "max_bytes": size - 1, "max_events": n}
    f = _codes(lint(t, max_bytes=size, max_events=n - 1))["too_large_for_viewer"]
    assert f.evidence == {"file_bytes": size, "events": n, "max_bytes": size, "max_events": n - 1}
    f = _codes(lint(t, file_bytes=10, max_bytes=9))["too_large_for_viewer"]
    assert f.evidence["file_bytes"] == 10


def test_options_stacks_and_the_python_frame_rule(tmp_path):
    """with_stack on (in the trace or in the recipe) but no frame: ``missing_stacks``; a recipe
    cannot switch off what the trace says was on. Python frames: which rule, and whether inferred."""
    ev = [_x("cpu_op", "aten::mm", 1.0, 2.0), _launch("cudaLaunchKernel", 1.5, 1), _gpu("kernel", "k", 3.0, 1.0, 1)]
    on = _write(tmp_path, ev, options={"with_stack": True}, name="on.json")
    f = _codes(lint(on))["missing_stacks"]
    assert f.severity == "warning" and f.evidence == {"python_events": 0, "call_stacks": 0}
    assert "missing_stacks" in _codes(lint(on, recipe={"with_stack": False}))
    assert "missing_stacks" in _codes(lint(on, recipe={"with_stack": None}))
    off = _write(tmp_path, ev, name="off.json")
    assert lint(off) == []
    assert [x.code for x in lint(off, recipe={"with_stack": True})] == ["missing_stacks"]
    assert lint(off, recipe={"with_stack": None, "record_shapes": True}) == []
    assert lint(off, recipe={"with_stack": False, "with_flops": False}) == []   # off on both sides
    # two Python frames in the 2.11 format (no CallFrom): not children, inferred, a warning
    py = ev + [_x("python_function", "train.py(3): step", 0.5, 4.0), _x("python_function", "nn.Module: Linear", 0.8, 3.0)]
    old = _write(tmp_path, py, options={"with_stack": True}, name="old.json")
    f = _codes(lint(old))["python_frames_rule"]
    assert f.severity == "warning"
    assert f.evidence == {"python_frames": 2, "frames_are_children": False, "inferred": True}
    assert "the trace holds 2 Python frames" in f.meaning and "the torch ≤ 2.11 rule (they are not)" in f.meaning
    assert old.meta["python_frames_rule"] in f.meaning
    assert f.action.startswith("open the trace through its bundle")
    # the same frames, the recording's torch named: not inferred, an info
    new = kitlib.load_trace(tmp_path / "old.json", torch_version="2.14.1")
    f = _codes(lint(new))["python_frames_rule"]
    assert f.severity == "info" and f.evidence == {"python_frames": 2, "frames_are_children": True, "inferred": False}
    assert "the torch ≥ 2.12 rule (they are children)" in f.meaning
    assert f.action.startswith("nothing to do")


def test_flops_unreadable_and_copies_without_bytes(tmp_path):
    """with_flops on, but the shapes cannot be read into FLOPs; a pageable copy that carries no
    byte count counts 0 bytes."""
    ev = [_x("cpu_op", "aten::mm", 1.0, 2.0, **{"Input Dims": [[2, 3]]}), _launch("cudaLaunchKernel", 1.5, 1),
          _gpu("kernel", "k", 3.0, 1.0, 1),
          _launch("cudaMemcpyAsync", 2.0, 2), _gpu("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 5.0, 2.0, 2),
          _launch("cudaMemcpyAsync", 2.5, 3), _gpu("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 8.0, 1.5, 3, bytes=512)]
    t = _write(tmp_path, ev, options={"with_flops": True, "record_shapes": True})
    f = _codes(lint(t))
    assert f["flops_unreadable"].severity == "warning" and f["flops_unreadable"].evidence == {"operators": 1}
    assert f["pageable_copies"].evidence == {"copies": 2, "bytes": 512, "copy_sum_ns": 3_500}
    assert "(Memcpy HtoD (Pageable -> Device) ×2)" in f["pageable_copies"].meaning


def test_a_finding_prints_its_evidence_with_thousands_separators():
    f = Finding("gpu_annotations", "warning", "labels on a GPU stream", "sum kernels only",
                {"annotations": 15, "annotation_sum_ns": 80_119_630, "steps": [2, 3], "inferred": True})
    assert str(f) == ("[warning] gpu_annotations: labels on a GPU stream → sum kernels only "
                      "(annotations=15, annotation_sum_ns=80,119,630, steps=[2, 3], inferred=True)")
