"""Lesson 02's answers, recomputed from the raw trace JSON without the exercise code or
kitlib's analyses (issue 31): the first ``aten::cudnn_convolution`` of the first recorded
step of ``profiler_5step``, its CUDA calls and GPU events joined by hand on the two ids; and
the transfer question's excerpt of ``fixed_batch``, checked event by event against the file."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import raw_trace_events
from support.events import ns as _ns

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "data" / "reference"
GPU = ("kernel", "gpu_memcpy", "gpu_memset")


@pytest.fixture(scope="module")
def chain():
    """The operator, its CUDA calls (all, and the launches: those whose correlation id is on a
    GPU event), and the GPU events in launch order, all from the raw JSON."""
    ev = raw_trace_events(REF / "profiler_5step" / "trace.json.gz")
    step = min((e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")), key=lambda e: e["ts"])
    op = min((e for e in ev if e.get("cat") == "cpu_op" and e["name"] == "aten::cudnn_convolution"
              and e["ts"] >= step["ts"]), key=lambda e: e["ts"])
    x = op["args"]["External id"]
    calls = sorted((e for e in ev if e.get("cat") == "cuda_runtime" and e["args"].get("External id") == x),
                   key=lambda e: e["ts"])
    gpu = {e["args"]["correlation"]: e for e in ev if e.get("cat") in GPU}
    launches = [c for c in calls if c["args"]["correlation"] in gpu]
    kernels = [gpu[c["args"]["correlation"]] for c in launches]
    return op, calls, launches, kernels


def test_launch_count_and_the_one_operator_one_kernel_trap(ex, chain):
    op, calls, launches, kernels = chain
    assert (step_name := op["name"]) == "aten::cudnn_convolution" and op["dur"] == 184.909, step_name
    assert [(c["name"], c["dur"]) for c in launches] == [
        ("cudaLaunchKernel", 27.598), ("cudaLaunchKernel", 6.971), ("cudaLaunchKernelExC", 12.929)]
    q = ex["launch_count"]
    assert q.kind == "predict" and q.answer == len(launches) == 3 and len(calls) == 7
    assert q.judge_silently(3) and not any(q.judge_silently(x) for x in (1, 2, 4, 7))
    assert "one operator = one kernel" in q.judge(1).message
    assert "error checks" in ex["launch_count"].judge(len(calls)).message       # every API call counted


def test_the_longest_kernel_starts_after_the_operator_returned(ex, chain):
    op, _, launches, kernels = chain
    longest = max(kernels, key=lambda k: k["dur"])
    assert longest["dur"] == 732.513 and [k["dur"] for k in kernels].index(732.513) + 1 == 3
    after = _ns(longest["ts"]) > _ns(op["ts"]) + _ns(op["dur"])
    q = ex["kernel_after_op"]
    assert q.kind == "predict" and q.answer is after is True and not q.judge_silently("no")
    lq = ex["longest_kernel_launch"]
    assert lq.answer == 3 and not lq.judge_silently(1) and not lq.judge_silently(2)


def test_device_time_and_the_launch_time_trap(ex, chain):
    op, _, launches, kernels = chain
    device_us = sum(_ns(k["dur"]) for k in kernels) / 1000
    launch_us = sum(_ns(c["dur"]) for c in launches) / 1000
    assert (device_us, launch_us) == (787.618, 47.498)
    q = ex["device_time_us"]
    assert q.unit == "µs" and q.answer == device_us and q.judge_silently(device_us) and q.judge_silently(788)
    near = [device_us * 1.05, device_us * 0.95, device_us / 1000, device_us * 1000, launch_us, 732.513, op["dur"],
            device_us + op["dur"]]
    assert not any(q.judge_silently(x) for x in near)
    assert "launch time = kernel time" in q.judge(launch_us).message
    assert "one operator = one kernel" in q.judge(732.513).message
    assert "host interval" in q.judge(op["dur"]).message
    assert "factor of 1000" in q.judge(device_us * 1000).message


def test_queue_delay_from_the_raw_timestamps(ex, chain):
    _, _, launches, kernels = chain
    delays = [(_ns(k["ts"]) - _ns(c["ts"])) / 1000 for c, k in zip(launches, kernels)]
    from_end = (_ns(kernels[-1]["ts"]) - _ns(launches[-1]["ts"]) - _ns(launches[-1]["dur"])) / 1000
    assert (delays[-1], from_end) == (844.61, 831.681)
    q = ex["queue_delay_us"]
    assert q.answer == delays[-1] and q.judge_silently(845) and q.judge_silently(844.61)
    near = [delays[-1] * 1.05, delays[-1] * 0.95, delays[-1] * 1000, from_end, delays[-2]]   # the launch before
    assert not any(q.judge_silently(x) for x in near), near
    assert "launch's end" in q.judge(from_end).message


def test_the_ids_and_the_sum_of_host_and_device(ex, chain):
    op, _, launches, kernels = chain
    # a launch and its kernel share the correlation id; the external id is on all of them
    assert all(c["args"]["correlation"] == k["args"]["correlation"] for c, k in zip(launches, kernels))
    assert {k["args"]["External id"] for k in kernels} == {op["args"]["External id"]}
    q = ex["launch_to_kernel_id"]
    assert q.judge_silently("correlation") and q.judge_silently("correlation id") and not q.judge_silently("external")
    a = ex["add_host_and_device"]
    assert a.answer is False and not a.judge_silently("yes")
    gap_us = (_ns(kernels[0]["ts"]) - _ns(op["ts"]) - _ns(op["dur"])) / 1000
    assert f"{gap_us:,.1f} µs after the operator's host interval has ended" in a.explain


def test_transfer_excerpt_is_the_files_own_events_and_its_answer_follows_the_ids(ex):
    from kitlib.course.exercises import l02
    ev = raw_trace_events(REF / "fixed_batch" / "trace.json.gz")
    events, corr = l02.transfer_excerpt()
    # every excerpt event is in the file as written (equal dicts), in order of ts
    assert len(events) == 6 and all(any(e == f for f in ev if f.get("ts") == e["ts"]) for e in events)
    assert [e["ts"] for e in events] == sorted(e["ts"] for e in events)
    # the answer, by the ids: GPU event -> its launch (correlation) -> the operator (External id)
    kernel = next(e for e in ev if e.get("cat") in GPU and e["args"].get("correlation") == corr)
    launch = next(e for e in ev if e.get("cat") == "cuda_runtime" and e["args"].get("correlation") == corr)
    owner = next(e for e in ev if e.get("cat") == "cpu_op" and e["args"].get("External id") == launch["args"]["External id"])
    # and what the host was running when the kernel started (the trap: a match by time)
    by_time = [e for e in events if e.get("cat") == "cpu_op" and e["ts"] <= kernel["ts"] <= e["ts"] + e["dur"]]
    assert (owner["name"], [e["name"] for e in by_time]) == ("aten::add_", ["aten::cudnn_convolution"])
    q = ex["kernel_operator_transfer"]
    assert q.kind == "transfer" and q.answer == owner["name"]
    assert q.judge_silently("aten::add_") and q.judge_silently("add_") and q.judge_silently(" 'aten::add_' ")
    assert not q.judge_silently("aten::cudnn_convolution") and not q.judge_silently("aten::add")
    assert "match by time" in q.judge("aten::cudnn_convolution").message
    assert f"correlation {corr}" in q.prompt


def test_lesson02_kinds(ex):
    assert {q.key: q.kind for q in ex.questions} == {
        "launch_count": "predict", "kernel_after_op": "predict", "longest_kernel_launch": "compute",
        "launch_to_kernel_id": "recall", "device_time_us": "compute", "add_host_and_device": "recall",
        "queue_delay_us": "compute", "kernel_operator_transfer": "transfer"}


# --- what the lesson shows, whole -----------------------------------------------------------

def _json_blocks(text: str) -> list:
    """The JSON lists a cell printed (each starts with "[" on a line of its own)."""
    import json
    out, start = [], None
    lines = text.splitlines()
    for i, ln in enumerate(lines):
        if ln == "[":
            start = i
        elif ln == "]" and start is not None:
            out.append(json.loads("\n".join(lines[start:i + 1])))
            start = None
    return out


def _same_event(shown: dict, e: dict) -> bool:
    """A printed (trimmed) event is the raw event ``e``: every field it prints equal, the two
    ids its args keep equal, a cut name a prefix of the whole name."""
    name = shown["name"]
    ok_name = e["name"] == name or (name.endswith("…") and e["name"].startswith(name[:-1]) and len(name) == 60)
    fields = all(shown[k] == e[k] for k in ("ph", "cat", "pid", "tid", "ts", "dur"))
    ids = shown.get("args", {}) == {k: e["args"][k] for k in ("External id", "correlation") if k in e["args"]}
    return ok_name and fields and ids


def test_the_raw_events_shown_are_the_files_and_the_hand_join_whole(executed_lesson, chain):
    from support.lesson_tables import shown_table, shown_text
    nb = executed_lesson("02").nb
    op, calls, launches, kernels = chain
    printed = _json_blocks(shown_text(nb, "print(raw_views.as_json(mine))"))
    assert len(printed) == 1
    want = sorted([op] + calls + kernels, key=lambda e: e["ts"])
    assert len(printed[0]) == len(want) == 11 and all(_same_event(s, e) for s, e in zip(printed[0], want))
    # the hand join: one row per launch, in order, with its kernel
    rows = shown_table(nb, "joined = calls.merge(")
    assert rows[0][-5:] == ["name_call", "dur_call", "correlation", "name_gpu", "dur_gpu"]
    got = [(r[-5], float(r[-4]), int(r[-3]), r[-2], float(r[-1])) for r in rows[1:]]
    assert got == [(c["name"], c["dur"], c["args"]["correlation"], k["name"][:40], k["dur"])
                   for c, k in zip(launches, kernels)]
    # and kitlib's chain agrees with it (the hidden cell)
    assert "kitlib's chain equals the hand join: True" in shown_text(nb, "kit.equals(hand")


def test_the_chain_table_whole(executed_lesson, chain):
    from support.lesson_tables import shown_table
    op, _, launches, kernels = chain
    rows = shown_table(executed_lesson("02").nb, "readable(chain_table(trace, row)")
    body = [r for r in rows if r and r[0].isdigit()]
    at = lambda e: round((_ns(e["ts"]) - _ns(op["ts"])) / 1000, 3)   # noqa: E731
    got = [(int(r[0]), r[1], float(r[2]), float(r[3]), int(r[4]), int(r[5]), float(r[7]), float(r[8])) for r in body]
    want = [(i, c["name"], at(c), c["dur"], c["args"]["correlation"], op["args"]["External id"], at(k), k["dur"])
            for i, (c, k) in enumerate(zip(launches, kernels), 1)]
    assert got == want


def test_the_transfer_excerpt_printed_is_the_files(executed_lesson):
    from support.lesson_tables import shown_text
    ev = raw_trace_events(REF / "fixed_batch" / "trace.json.gz")
    text = shown_text(executed_lesson("02").nb, "l02.transfer_excerpt()")
    (printed,) = _json_blocks(text)
    assert len(printed) == 6
    for s in printed:
        assert any(_same_event(s, e) for e in ev if e.get("ts") == s["ts"] and e.get("ph") == "X"), s
    corr = int(text.split("asked about: correlation ")[1].split()[0])
    assert sum(s.get("args", {}).get("correlation") == corr for s in printed) == 2     # its launch and its kernel


def test_device_time_per_operator_table_whole(executed_lesson):
    """Lesson 02's one-call join for every GPU event: the eight operators with the most device
    time, their GPU event counts and summed ns, in order, from the raw JSON (each GPU event's
    External id names the operator or label it came from)."""
    from support.lesson_tables import shown_table
    ev = raw_trace_events(REF / "profiler_5step" / "trace.json.gz")
    name = {e["args"]["External id"]: e["name"] for e in ev
            if e.get("cat") in ("cpu_op", "user_annotation") and "External id" in e.get("args", {})}
    per = {}
    for e in ev:
        if e.get("cat") in GPU and e["args"].get("External id") in name:
            n = name[e["args"]["External id"]]
            c, t = per.get(n, (0, 0))
            per[n] = (c + 1, t + _ns(e["dur"]))
    want = sorted(per.items(), key=lambda kv: -kv[1][1])[:8]
    rows = shown_table(executed_lesson("02").nb, 'c.groupby("op_name")')
    body = [r for r in rows if len(r) == 3 and r[1].isdigit()]
    assert [(r[0], int(r[1]), int(r[2])) for r in body] == [(n, c, t) for n, (c, t) in want]
    assert want[0][0] == "aten::convolution_backward"


def test_chain_beside_the_source_texts_whole(executed_lesson, chain):
    """The H200 column from the raw JSON, the B300 column the source texts' figures
    (kitlib.course.sources.B300, quoted from seeds/000: 120.501, 9.329, 549.827 µs, 3 of 3)."""
    from kitlib.course.sources import B300
    from support.lesson_tables import shown_table
    op, _, launches, kernels = chain
    i = max(range(len(kernels)), key=lambda k: kernels[k]["dur"])
    rows = shown_table(executed_lesson("02").nb, "course.chain_beside_source(summary")
    body = [r for r in rows if len(r) == 3 and r[0] and not r[0].startswith("this capture")]
    assert body == [
        ["operator host interval (µs)", f"{op['dur']:g}", f"{B300['conv_op_us']:g}"],
        ["launch of the main kernel, host (µs)", f"{launches[i]['dur']:g}", f"{B300['conv_launch_us']:g}"],
        ["main kernel on the GPU, device (µs)", f"{kernels[i]['dur']:g}", f"{B300['conv_kernel_us']:g}"],
        ["which launch / of how many", f"{i + 1} of {len(launches)}",
         f"{B300['conv_launch_index']} of {B300['conv_launch_count']}"]]
    assert (B300["conv_op_us"], B300["conv_launch_us"], B300["conv_kernel_us"]) == (120.501, 9.329, 549.827)


def test_the_explanations_give_the_raw_figures(ex, chain):
    """What a learner reads after answering, from the raw JSON: kernel_after_op's gap between
    the operator's end and its longest kernel's start (l02 mutant #20: a sum); the others
    launches' numbers and kernel durations in longest_kernel_launch's (#54: the longest one
    listed instead); the transfer's launch call and External id, and its trap's time from the
    launch to the kernel (#32: another event named as the launch; #44: a sum)."""
    op, _, launches, kernels = chain
    longest = max(kernels, key=lambda k: k["dur"])
    gap = (_ns(longest["ts"]) - _ns(op["ts"]) - _ns(op["dur"])) / 1e3
    assert ex["kernel_after_op"].explain.startswith(f"yes: it starts {gap:,.1f} µs after the operator's host "
                                                    "interval ends.")
    n = [k["dur"] for k in kernels].index(longest["dur"]) + 1
    head, others = ex["longest_kernel_launch"].explain.split("; the others: ")
    assert head == f"launch #{n}: its kernel ran {longest['dur']:.3f} µs on the GPU"
    listed = [(int(i), float(d)) for i, d in re.findall(r"#(\d+) .*? ([\d.]+) µs", others)]
    assert listed == [(i + 1, k["dur"]) for i, k in enumerate(kernels) if i + 1 != n]
    from kitlib.course.exercises import l02
    events, corr = l02.transfer_excerpt()
    kernel = next(e for e in events if e.get("cat") in GPU and e["args"].get("correlation") == corr)
    launch = next(e for e in events if e.get("cat") == "cuda_runtime" and e["args"].get("correlation") == corr)
    q = ex["kernel_operator_transfer"]
    assert f"the GPU event's correlation {corr} is also on a {launch['name']} call, whose External id " \
           f"{launch['args']['External id']} is the operator's (aten::add_)" in q.explain
    assert f"when the kernel started ({kernel['ts'] - launch['ts']:,.1f} µs after its launch)" \
        in q.judge("aten::cudnn_convolution").message
