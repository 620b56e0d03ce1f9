"""Lesson 07's answers (issue 31), each worked out here from the tools' own files, without the
exercise code or kitlib's analyses: the raw trace JSON of ``profiler_5step`` and ``fixed_batch``
(orjson), the profiler's printed table (``key_averages_tables.txt``), its ``key_averages()`` rows
(``fixed_batch/key_averages.json.gz``) and the memory snapshot (a plain pickle of dicts). Each
question must accept that figure and reject the near misses a learner makes: 5 % off, the other
unit (GB for GiB, MB for MiB), the total for the self, the neighbouring recording, the sign."""
from __future__ import annotations

import gzip
import json
import pickle
import re

import pytest

from conftest import REF, per_raw, raw_trace_events

MIB, GIB = 2 ** 20, 2 ** 30


def _cuda_mem(raw):
    return [e for e in raw if e.get("name") == "[memory]" and e.get("ph") == "i" and e["args"]["Device Type"] == 1]


def _inside(mem, a, b):
    return [m for m in mem if a <= m["ts"] <= b]


def _op_and_memory_index(raw):
    """The CUDA memory records by start time, with their starts; each thread's operators by
    start time, with their starts (built once per raw trace through ``per_raw``)."""
    mem = sorted(_cuda_mem(raw), key=lambda m: m["ts"])
    by_tid = {}
    for e in raw:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            by_tid.setdefault(e["tid"], []).append(e)
    for ops in by_tid.values():
        ops.sort(key=lambda e: e["ts"])
    return mem, [m["ts"] for m in mem], by_tid, {tid: [e["ts"] for e in ops] for tid, ops in by_tid.items()}


def _self_by_hand(raw, name):
    """Self CUDA Mem of operator ``name`` over all its calls: memory events inside each call
    (any thread) minus those inside its direct children on its thread (the profiler's rule).
    Candidates are found by binary search on start times (:func:`_op_and_memory_index`);
    which of them count is decided by the rule above."""
    from bisect import bisect_left, bisect_right
    mem, mem_ts, by_tid, starts = per_raw(raw, "l07 ops and memory", _op_and_memory_index)

    def inside(a, b):
        return mem[bisect_left(mem_ts, a):bisect_right(mem_ts, b)]
    total = 0
    for op in (e for ops in by_tid.values() for e in ops if e["name"] == name):
        a, b = op["ts"], op["ts"] + op["dur"]
        ops, ts = by_tid[op["tid"]], starts[op["tid"]]
        kids = [k for k in ops[bisect_left(ts, a):bisect_right(ts, b)] if k is not op and k["ts"] + k["dur"] <= b]
        direct = [k for k in kids if not any(p is not k and p["ts"] <= k["ts"] and k["ts"] + k["dur"] <= p["ts"] + p["dur"]
                                             for p in kids)]
        total += sum(m["args"]["Bytes"] for m in inside(a, b))
        total -= sum(m["args"]["Bytes"] for k in direct for m in inside(k["ts"], k["ts"] + k["dur"]))
    return total


def _printed_row(name):
    """The profiler's printed table sorted by Self CUDA Mem (the 4th in the file): CUDA Mem,
    Self CUDA Mem (as printed) and # of Calls of row ``name``."""
    text = (REF / "profiler_5step" / "key_averages_tables.txt").read_text()
    table = [t for t in text.split("\n\n") if "Self CUDA Mem" in t][3]
    for line in table.splitlines():
        if line[:55].strip() == name:
            cells = re.split(r"\s{2,}", line[55:].strip())
            return cells[11], cells[12], int(cells[13])
    raise KeyError(name)


def test_every_question_is_pinned(ex):
    assert [q.key for q in ex.questions] == ["excerpt_self_mib", "fixed_batch_conv_gib", "self_mem_vs_peak",
                                             "peak_phase", "batch_doubled_peak_gb", "new_segments"]
    assert [q.kind for q in ex.questions] == ["transfer", "compute", "predict", "predict", "transfer", "compute"]


def test_the_hand_rebuild_equals_the_printed_table():
    """The lesson's rebuild of aten::cudnn_convolution (no child allocates: self = total) from the
    raw JSON, against the profiler's printed row (PROVENANCE.md: 28,514,713,600 bytes = 26.56 GiB)."""
    raw = raw_trace_events(REF / "profiler_5step" / "trace.json.gz")
    mem = _cuda_mem(raw)
    calls = [e for e in raw if e.get("cat") == "cpu_op" and e["name"] == "aten::cudnn_convolution"]
    by_hand = sum(m["args"]["Bytes"] for c in calls for m in _inside(mem, c["ts"], c["ts"] + c["dur"]))
    assert (len(calls), by_hand) == (265, 28_514_713_600) == (265, _self_by_hand(raw, "aten::cudnn_convolution"))
    assert _printed_row("aten::cudnn_convolution") == ("26.56 GB", "26.56 GB", 265)
    assert f"{by_hand / GIB:.2f}" == "26.56"


def _excerpt_call():
    """The excerpt's call (the second aten::cudnn_batch_norm of profiler_5step's raw JSON),
    the CUDA memory events in its interval, its children on its thread, and the memory
    events that lie inside those children."""
    raw = raw_trace_events(REF / "profiler_5step" / "trace.json.gz")
    op = [e for e in raw if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e["name"] == "aten::cudnn_batch_norm"][1]
    a, b = op["ts"], op["ts"] + op["dur"]
    mem = _inside(_cuda_mem(raw), a, b)
    kids = [k for k in raw if k is not op and k.get("ph") == "X" and k.get("cat") == "cpu_op" and k["tid"] == op["tid"]
            and a <= k["ts"] and k["ts"] + k["dur"] <= b]
    in_kids = [m for m in mem if any(k["ts"] <= m["ts"] <= k["ts"] + k["dur"] for k in kids)]
    return op, mem, kids, in_kids


def test_excerpt_self_mib(ex):
    op, mem, kids, in_kids = _excerpt_call()
    own = [m for m in mem if m not in in_kids]
    assert [m["args"]["Bytes"] for m in mem] == [102760448, 512, 512, 3237888, -3237888]
    assert [m["args"]["Bytes"] for m in own] == [-3237888]          # a free of what a child allocated
    total, self_b = sum(m["args"]["Bytes"] for m in mem), sum(m["args"]["Bytes"] for m in own)
    q = ex["excerpt_self_mib"]
    assert q.answer == self_b / MIB and q.unit == "MiB"
    assert q.judge_silently(-3.09) and q.judge_silently(self_b / MIB)
    for wrong in (total / MIB, -self_b / MIB, 0, self_b / MIB * 1.05, self_b / MIB * 0.95, self_b / 1e6, self_b / 1e3):
        assert not q.judge_silently(wrong), wrong                    # total, sign, nothing, 5 %, MB, KB
    assert "total" in q.judge(total / MIB).message
    # the excerpt the lesson prints is these events, in time order, with the call first
    from kitlib.course.exercises import l07
    from kitlib.readers.bundle import open_capture
    shown = l07.excerpt(open_capture("profiler_5step"))
    assert shown[0]["ts"] == op["ts"] and shown[0]["dur"] == op["dur"]
    assert [e["args"]["Bytes"] for e in shown if e["ph"] == "i"] == [m["args"]["Bytes"] for m in mem]
    assert [e["name"] for e in shown[1:] if e["ph"] == "X"] == ["aten::empty_like", "aten::empty", "aten::empty",
                                                               "aten::empty", "aten::empty"]


def test_fixed_batch_conv_gib(ex):
    raw = raw_trace_events(REF / "fixed_batch" / "trace.json.gz")
    by_hand = _self_by_hand(raw, "aten::cudnn_convolution")
    rows = json.loads(gzip.decompress((REF / "fixed_batch" / "key_averages.json.gz").read_bytes()))["by_name"]
    tool = next(r for r in rows if r["key"] == "aten::cudnn_convolution")
    assert by_hand == tool["self_device_memory_usage_bytes"] == 28_493_742_080      # PROVENANCE.md
    q = ex["fixed_batch_conv_gib"]
    assert q.answer == round(by_hand / GIB, 2) == 26.54 and q.unit == "GiB" and q.tolerance_why
    assert q.judge_silently(26.54) and q.judge_silently(by_hand / GIB)
    other = 28_514_713_600 / GIB                                                     # profiler_5step's
    for wrong in (round(other, 2), by_hand / 1e9, 26.5 * 1.05, 26.54 * 0.95, 26.5, 26.6, by_hand / GIB * 1e3):
        assert not q.judge_silently(wrong), wrong                # neighbouring recording, GB, 5 %, rounding, ×1000
    assert "profiler_5step" in q.judge(26.56).message and "GiB" in q.judge(28.49).message


def _step_memory(raw, n):
    step = next(e for e in raw if e.get("ph") == "X" and e.get("name") == f"ProfilerStep#{n}")
    return _inside(_cuda_mem(raw), step["ts"], step["ts"] + step["dur"])


def test_self_mem_vs_peak_and_the_misconception(ex):
    raw = raw_trace_events(REF / "profiler_5step" / "trace.json.gz")
    peak = max(m["args"]["Total Allocated"] for n in range(2, 7) for m in _step_memory(raw, n))
    assert peak == 11_462_948_352                                     # 11.46 GB, lesson 07's curve
    assert peak / 28_514_713_600 < 0.8                                # far below the Self CUDA Mem figure
    q = ex["self_mem_vs_peak"]
    assert q.answer == "lower" and q.judge_silently("lower") and not q.judge_silently("higher")
    fresh = type(q)(q.key, q.prompt, q.answer, q.explain, kind=q.kind, choices=q.choices, traps=q.traps)
    assert "Self CUDA Mem = peak" in fresh.judge("about the same").message


def test_peak_phase(ex):
    raw = raw_trace_events(REF / "profiler_5step" / "trace.json.gz")
    mem = _step_memory(raw, 2)
    top = max(mem, key=lambda m: m["args"]["Total Allocated"])
    labels = [e for e in raw if e.get("cat") == "user_annotation" and e["name"] in
              ("data_load", "h2d", "forward", "backward", "optimizer") and e["ts"] <= top["ts"] <= e["ts"] + e["dur"]]
    assert [e["name"] for e in labels] == ["backward"]
    q = ex["peak_phase"]
    assert q.answer == "backward" and q.judge_silently("backward")
    assert not any(q.judge_silently(p) for p in ("forward", "optimizer", "data_load", "h2d"))


def test_batch_doubled_peak_gb(ex):
    raw = raw_trace_events(REF / "profiler_5step" / "trace.json.gz")
    mem = _step_memory(raw, 2)
    start = mem[0]["args"]["Total Allocated"] - mem[0]["args"]["Bytes"]     # before the step's first event
    peak = max(m["args"]["Total Allocated"] for m in mem)
    assert (start, peak) == (437_928_448, 11_462_948_352)
    doubled = start + 2 * (peak - start)
    q = ex["batch_doubled_peak_gb"]
    assert q.answer == doubled / 1e9 and q.unit == "GB"
    assert q.judge_silently(22.5) and q.judge_silently(round(doubled / 1e9, 2))
    for wrong in (2 * peak / 1e9, peak / 1e9, doubled / GIB, doubled / 1e9 * 1.05, doubled / 1e9 * 0.95, doubled / 1e6):
        assert not q.judge_silently(wrong), wrong                 # start doubled too, unchanged, GiB, 5 %, MB
    assert "starting level" in q.judge(2 * peak / 1e9).message


def test_new_segments(ex):
    snap = pickle.loads((REF / "profiler_5step" / "memory_snapshot.pickle").read_bytes())
    actions = [t["action"] for trace in snap["device_traces"] for t in trace]
    assert actions.count("segment_alloc") == 0 and actions.count("alloc") == 2883
    assert len(snap["segments"]) == 144
    q = ex["new_segments"]
    assert q.answer == 0 and q.judge_silently(0) and not q.judge_silently(1) and not q.judge_silently(144)


def test_new_segments_explained_from_the_snapshot(ex):
    """The explanation's figures from the raw snapshot: the 2,883 tensor allocations (its
    'alloc' rows) all served from the segments' total_size, 13.35 GB (l07 exercise mutant #41:
    the allocations counted as every row that is not an 'alloc', telling the learner a wrong
    number of allocations the cache served)."""
    snap = pickle.loads((REF / "profiler_5step" / "memory_snapshot.pickle").read_bytes())
    actions = [t["action"] for trace in snap["device_traces"] for t in trace]
    reserved = sum(s["total_size"] for s in snap["segments"])
    assert ex["new_segments"].explain.startswith(
        f"0: {actions.count('alloc'):,} tensor allocations were all served from the {reserved / 1e9:.2f} GB ")


def test_the_two_h200_recordings_differ_by_20_mib():
    """Lesson 07: 'The recording with the data loader differs by 20 MiB over 265 calls', from
    the raw JSON of both recordings."""
    a = _self_by_hand(raw_trace_events(REF / "profiler_5step" / "trace.json.gz"), "aten::cudnn_convolution")
    b = _self_by_hand(raw_trace_events(REF / "fixed_batch" / "trace.json.gz"), "aten::cudnn_convolution")
    assert a - b == 20 * MIB
    from kitlib.course.sources import B300
    assert f"{b / GIB:.2f}" == f"{B300['cudnn_conv_self_cuda_mem_gb']:.2f}" == "26.54"   # prints as the B300 figure


def test_what_the_nsys_recording_holds_for_cuda_allocations():
    """Lesson 07's table of four memory questions: nsys_8step has cudaMalloc calls on its CUDA
    API rows but no memory-usage rows (it was recorded without --cuda-memory-usage)."""
    from conftest import sql_rows
    db = REF / "nsys_8step" / "report.sqlite"
    tables = [t for (t,) in sql_rows(db, "SELECT name FROM sqlite_master WHERE type = 'table'")]
    assert not [t for t in tables if "MEMORY_USAGE" in t]
    (n,), = sql_rows(db, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s ON r.nameId = s.id "
                         "WHERE s.value LIKE 'cudaMalloc%'")
    assert n == 154
    assert "--cuda-memory-usage" not in (REF / "PROVENANCE.md").read_text().split("`nsys_8step/`")[1].split("\n")[0]


def _self_table(raw):
    """{name: (calls, self_alloc, self_free, self)} of every operator and label (cpu_op and
    user_annotation events), by the profiler's rule, computed with prefix sums over the CUDA
    memory events sorted by time: total = events in [ts, ts + dur]; self = total minus the
    totals of the direct children (nested on the same thread)."""
    import bisect
    from collections import defaultdict
    mem = sorted(_cuda_mem(raw), key=lambda m: m["ts"])
    ts = [m["ts"] for m in mem]
    pre_a, pre_f = [0], [0]
    for m in mem:
        b = m["args"]["Bytes"]
        pre_a.append(pre_a[-1] + max(b, 0))
        pre_f.append(pre_f[-1] + max(-b, 0))

    def inside(a, b):
        i, j = bisect.bisect_left(ts, a), bisect.bisect_right(ts, b)
        return pre_a[j] - pre_a[i], pre_f[j] - pre_f[i]
    ops = [e for e in raw if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")]
    by_tid = defaultdict(list)
    for e in ops:
        by_tid[e["tid"]].append(e)
    out = {}
    for tid, evs in by_tid.items():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []                                   # the profiler's nesting: a stack of open events
        kids = defaultdict(list)
        for e in evs:
            while stack and not (e["ts"] + e["dur"] <= stack[-1]["ts"] + stack[-1]["dur"]):
                stack.pop()
            if stack:
                kids[id(stack[-1])].append(e)
            stack.append(e)
        for e in evs:
            a, f = inside(e["ts"], e["ts"] + e["dur"])
            for k in kids[id(e)]:
                ka, kf = inside(k["ts"], k["ts"] + k["dur"])
                a, f = a - ka, f - kf
            c, sa, sf, s = out.get(e["name"], (0, 0, 0, 0))
            out[e["name"]] = (c + 1, sa + a, sf + f, s + a - f)
    return out


def test_the_most_negative_table_whole(executed_lesson):
    """Lesson 07's table of the six most negative Self CUDA Mem rows (profiler_5step), in
    order, every value, from the raw JSON. (A row whose name is a label copied onto the GPU
    timeline is not a cpu_op or a CPU user_annotation, so it is not counted here.)"""
    table = _self_table(raw_trace_events(REF / "profiler_5step" / "trace.json.gz"))
    assert table["aten::cudnn_convolution"][3] == 28_514_713_600
    neg = sorted(table.items(), key=lambda kv: kv[1][3])[:6]
    assert [n for n, _ in neg][:2] == ["backward", "autograd::engine::evaluate_function: ReluBackward0"]
    text = executed_lesson("07").text
    shown = re.search(r"calls\s+self_alloc_bytes\s+self_free_bytes\s+self_bytes\s*\nkey\s*\n((?:.+\n){6})", text)
    assert shown, "the table of negative rows is not shown"
    got = [ln.rstrip().rsplit(None, 4) for ln in shown.group(1).splitlines()]
    want = [[n if len(n) <= 50 else n[:47] + "...", *map(str, v)] for n, v in neg]   # pandas cuts names at 50
    assert got == want


def test_the_lessons_raw_view_helpers():
    """kitlib.course.raw_views on what it reads: the raw events' own fields,
    the profiler's rule on a hand-made excerpt (a child's allocation, an event at the end, a
    free), and the printed table cut to columns from either form a bundle keeps."""
    from kitlib.course import raw_views
    from kitlib.readers.bundle import open_capture
    raw = raw_trace_events(REF / "profiler_5step" / "trace.json.gz")
    mem = raw_views.memory_events(raw, device_type=1)
    assert len(mem) == len(_cuda_mem(raw)) == 9610 and int((mem["Bytes"] > 0).sum()) == 4805
    assert list(mem.columns[:2]) == ["ts", "tid"] and {"Bytes", "Total Allocated", "Total Reserved"} <= set(mem)
    assert len(raw_views.memory_events(raw, device_type=None)) == 10150
    hand = [{"ph": "X", "name": "op", "ts": 0.0, "dur": 10.0},
            {"ph": "X", "name": "child", "ts": 1.0, "dur": 2.0},
            {"ph": "X", "name": "grandchild", "ts": 1.5, "dur": 1.0},
            {"ph": "i", "name": "[memory]", "ts": 2.0, "args": {"Bytes": 100}},
            {"ph": "i", "name": "[memory]", "ts": 3.0, "args": {"Bytes": 7}},       # at the child's end: the child's
            {"ph": "i", "name": "[memory]", "ts": 10.0, "args": {"Bytes": -40}}]    # at the op's end: counted
    assert raw_views.self_and_total(hand) == (-40, 67)
    with pytest.raises(Exception, match="calls of"):
        raw_views.call_excerpt(raw, "aten::no_such_operator")
    text = raw_views.printed_table(open_capture("fixed_batch"), rows=3, sort_by="Self CUDA Mem",   # from
                                   columns=["CUDA Mem", "Self CUDA Mem", "# of Calls"])       # JSON rows
    lines = text.splitlines()
    assert re.split(r"\s{2,}", lines[1].strip()) == ["Name", "CUDA Mem", "Self CUDA Mem", "# of Calls"]
    assert re.split(r"\s{2,}", lines[4].strip()) == ["aten::cudnn_convolution", "26.54 GB", "26.54 GB", "265"]
    assert len(lines) == 3 + 3 + 1 + 1 and lines[-1].startswith("(laid out from key_averages.json")


def test_roofline_helpers():
    from kitlib.course import roofline
    assert roofline.conv_out_size(56, 1, stride=2) == 28 and roofline.conv_out_size(56, 3, 2, 1) == 28
    assert roofline.conv_flops([128, 256, 56, 56], [512, 256, 1, 1], (2, 2)) == 2 * 128 * 28 * 28 * 256 * 512
    assert roofline.conv_min_bytes([1, 1, 2, 2], [1, 1, 1, 1], bytes_per_element=2) == (4 + 1 + 4) * 2
    assert roofline.intensity(10, 4) == 2.5
    with pytest.raises(Exception, match="positive"):
        roofline.intensity(1, 0)
    with pytest.raises(Exception, match="known"):
        roofline.ridge_point("A100")
    ridge, parts = roofline.ridge_point("H100", "TF32")
    assert ridge == 494.5 / 3.35 and len(parts["sources"]) == 2


def _notes(cell) -> list[set]:
    """The recordings named by each "data: ..." note under a cell's outputs (printed tables,
    displayed tables as text and as HTML, figures), each as the set of recording names."""
    found = []
    for o in cell.get("outputs", []):
        texts = [o.get("text", ""), o.get("data", {}).get("text/plain", ""), o.get("data", {}).get("text/html", "")]
        for t in texts:
            for note in re.findall(r"data: ([^\]\n<]*)", t):
                found.append({part.split(":")[0].strip() for part in note.split("; ")})
    return found


def test_each_table_note_names_only_its_own_recording(executed_lesson):
    """Every table and picture of lesson 07 comes from profiler_5step but two: the one that sets
    the convolution's figure of both H200 recordings side by side, and fixed_batch's label rows
    of key_averages() (issue 40); their notes say so. (The learner saw fixed_batch named under
    the raw [memory] events table, before loading it, and under the snapshot's largest tensors.)"""
    nb = executed_lesson("07").nb
    code = [c for c in nb.cells if c.cell_type == "code"]
    noted = [(c.source, _notes(c)) for c in code if _notes(c)]
    both = [src for src, notes in noted if any(n == {"profiler_5step", "fixed_batch"} for n in notes)]
    assert len(both) == 1 and 'rows = {"B300 (source)"' in both[0]
    fixed = [src for src, notes in noted if notes == [{"fixed_batch"}]]
    assert len(fixed) == 1 and 'fixed.key_averages()["by_name"]' in fixed[0]
    for src, notes in noted:
        if src is not both[0] and src is not fixed[0]:
            assert all(n == {"profiler_5step"} for n in notes), (src[:80], notes)
    for marker in ("raw_views.memory_events(raw, device_type=1)", "snap.largest_live_at_peak(6)"):
        cell = next(c for c in code if marker in c.source)
        assert _notes(cell) and all(n == {"profiler_5step"} for n in _notes(cell)), marker
    # the first of them comes before fixed_batch is loaded
    first = next(i for i, c in enumerate(code) if "raw_views.memory_events(raw, device_type=1)" in c.source)
    assert first < next(i for i, c in enumerate(code) if 'replay_capture("fixed_batch")' in c.source)


def test_the_hand_rebuild_runs_on_fixed_batch_and_the_check_survives_it():
    """The lesson's hand rebuild is a function of a list of raw events: run on fixed_batch's
    events it gives the profiler's own figure for that recording (its key_averages row), and
    the final check calls it on profiler_5step's events, so a learner who runs it on
    ``fixed_raw`` in a cell of their own keeps the check. No cell tells them to overwrite a
    variable the check reads."""
    import ast
    import nbformat
    import pandas as pd
    from kitlib.course import raw_views
    nb = nbformat.read(next((REF.parent.parent / "lessons").glob("07_*.ipynb")), as_version=4)
    src = next(c.source for c in nb.cells if "def conv_self_by_hand(events)" in c.source)
    fn = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef))
    ns = {"pd": pd, "raw_views": raw_views}
    exec(compile(ast.Module([fn], []), "lesson07", "exec"), ns)
    rows = json.loads(gzip.decompress((REF / "fixed_batch" / "key_averages.json.gz").read_bytes()))["by_name"]
    tool = next(r for r in rows if r["key"] == "aten::cudnn_convolution")
    fixed = [dict(e) for e in raw_trace_events(REF / "fixed_batch" / "trace.json.gz")]
    assert int(sum(ns["conv_self_by_hand"](fixed))) == tool["self_device_memory_usage_bytes"] == 28_493_742_080
    p5 = [dict(e) for e in raw_trace_events(REF / "profiler_5step" / "trace.json.gz")]
    assert int(sum(ns["conv_self_by_hand"](p5))) == 28_514_713_600
    trust = next(c.source for c in nb.cells if "trust-the-reader" in c.metadata.get("tags", []))
    assert 'int(sum(conv_self_by_hand(raw))) == int(conv["self_bytes"])' in trust
    assert "by_hand" not in trust.replace("conv_self_by_hand", "") and "rec_raw" not in trust
    assert not any("rec_raw" in c.source for c in nb.cells)
    prose = next(c.source for c in nb.cells if c.cell_type == "markdown" and "fixed_raw" in c.source)
    assert "conv_self_by_hand(fixed_raw)" in prose and "new name" in prose


def test_the_explorer_prose_says_where_the_step_menu_works(executed_lesson):
    """The memory explorer's menu works only with widgets; elsewhere its output stays on the step
    it opens on, the step that holds the window's peak (from the raw JSON: the step holding the
    first CUDA [memory] event at the largest Total Allocated), and its heading says which."""
    raw = raw_trace_events(REF / "profiler_5step" / "trace.json.gz")
    mem = _cuda_mem(raw)
    top = max(mem, key=lambda m: m["args"]["Total Allocated"])          # max() keeps the first of equals
    first = next(int(e["name"].split("#")[1]) for e in raw if e.get("ph") == "X"
                 and str(e.get("name", "")).startswith("ProfilerStep#") and e["ts"] <= top["ts"] <= e["ts"] + e["dur"])
    assert first == 2
    nb = executed_lesson("07").nb
    i = next(k for k, c in enumerate(nb.cells) if c.cell_type == "code" and "explorers.memory_explorer" in c.source)
    md = nb.cells[i - 1].source
    assert md.startswith("**Explore.**") and "JupyterLab" in md and "ipywidgets" in md
    assert "opens on the step that holds the window's peak" in md and "stays on that step" in md and "step=4" in md
    shown = [o["data"]["text/plain"] for o in nb.cells[i].outputs if "text/plain" in o.get("data", {})]
    assert shown == [f"memory held at the step's peak, by the operator that allocated it (step: {first})"]


def test_excerpt_self_mib_explained_and_its_traps(ex):
    """What a learner reads in excerpt_self_mib, from the raw JSON: the self bytes, the memory
    events in the call's interval, how many lie inside its children, the names of the children
    that hold a memory event (the excerpt leaves out the others, aten::view) and their totals, and the own-free sentence (l07 mutants #8-#14, #26); the traps, zero and the total,
    with their feedback (#28, #29: the zero trap moved to 1.0, the total's ×)."""
    op, mem, kids, in_kids = _excerpt_call()
    total = sum(m["args"]["Bytes"] for m in mem)
    self_b = total - sum(m["args"]["Bytes"] for m in in_kids)
    q = ex["excerpt_self_mib"]
    assert q.explain == (
        f"{self_b / MIB:.2f} MiB ({self_b:,} bytes). Its interval holds {len(mem)} memory events adding up to "
        f"{total:,} bytes (its total, 'CUDA Mem'); {len(in_kids)} of them lie inside its children "
        f"({', '.join(sorted({k['name'] for k in kids if any(k['ts'] <= m['ts'] <= k['ts'] + k['dur'] for m in mem)}))}), "
        f"whose totals ({total - self_b:,} bytes) are taken away. "
        "What is left is negative: a free the operator did itself, of memory one of its children allocated. "
        "That is how an operator gets a negative Self CUDA Mem.")
    assert [t for t, _ in q.traps] == [total / MIB, -self_b / MIB, 0.0]
    assert "not zero: one memory event lies inside the operator" in q.judge(0).message.lower()
    assert "that is its total (the profiler's 'cuda mem')" in q.judge(total / MIB).message.lower()


def test_fixed_batch_difference_and_the_higher_trap(ex):
    """fixed_batch_conv_gib's explanation gives the two recordings' difference in bytes, each
    rebuilt by hand from its raw JSON (l07 mutant #31: a sum); "higher", the other wrong
    prediction of self_mem_vs_peak, meets its own feedback (#38: that trap moved to the answer)."""
    fixed = _self_by_hand(raw_trace_events(REF / "fixed_batch" / "trace.json.gz"), "aten::cudnn_convolution")
    five = _self_by_hand(raw_trace_events(REF / "profiler_5step" / "trace.json.gz"), "aten::cudnn_convolution")
    assert f"({five - fixed:+,} bytes in profiler_5step)" in ex["fixed_batch_conv_gib"].explain
    assert "the curve of allocated memory below says otherwise" in ex["self_mem_vs_peak"].judge("higher").message.lower()
