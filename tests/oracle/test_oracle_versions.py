"""The Python-frame rule across torch releases (issue 27), against each release's own tables.

``tests/data/oracle_versions/torch-X.Y/<variant>/`` holds one tiny CPU workload recorded with
torch 2.9.1, 2.12.0, 2.13.0 and 2.14.1 (``tools/record_oracle_version.py``; PROVENANCE.md there),
each with ``with_stack=True`` and ``_ExperimentalConfig(verbose=True)`` (``stack_verbose``),
``with_stack=True`` alone (``stack``) and ``with_stack=False`` (``nostack``), beside that run's
``key_averages()`` rows and what its ``prof.events()`` held. The releases treat Python frames
three ways (``kitlib.readers.trace.PYTHON_FRAME_RULES``): ≤ 2.11 keeps them out of its events,
2.12–2.13 counts them as children and lists them as rows, 2.14 counts them as children and
leaves them out of the rows unless ``include_python_functions=True``. The traces are read
bare (no torch version given), so the rule is the one read from the trace itself.

Issue 41 added ``torch-2.13/lstm_loader`` (an LSTM fed by a DataLoader) and
``torch-2.5/convnet`` (a small ResNet-like net, torch 2.5.1), each with the profiler's rows by
name, by input shape and by stack (``group_by_stack_n=5``): the Python frames' by-stack rows of
2.13 and the float-µs memory edges of torch ≤ 2.10 (``kitlib.readers.trace.memory_edges_rule``).

Every figure compared is printed, the profiler's beside kitlib's (``pytest -s`` shows them).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import kitlib
from kitlib.analyses import grouping as G
from kitlib.readers.trace import PYTHON_FRAME_RULES, python_frames_release

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
VERSIONS = DATA / "oracle_versions"
RECORDINGS = [(v, s) for v in ("2.9", "2.12", "2.13", "2.14") for s in ("stack_verbose", "stack", "nostack")]
RELEASE = {"2.9": "≤ 2.11", "2.12": "2.12–2.13", "2.13": "2.12–2.13", "2.14": "≥ 2.14"}
TIMES = ["count_diff", "host_total_ns_diff", "host_self_ns_diff"]
MEMORY = ["cpu_memory_bytes_diff", "self_cpu_memory_bytes_diff", "flops_diff"]


def _dir(version, variant):
    return VERSIONS / f"torch-{version}" / variant


def _expected_rows(version, variant, name="expected_by_name.json"):
    doc = json.loads((_dir(version, variant) / name).read_text())
    assert doc["torch"].startswith(version + ".")
    return doc["rows"]


_LOADED = {}


def _trace(version, variant):
    if (version, variant) not in _LOADED:
        _LOADED[version, variant] = kitlib.load_trace(_dir(version, variant) / "trace.json.gz")
    return _LOADED[version, variant]


def _show(m, names, title):
    cols = ["name", "count_profiler", "count_kitlib", "host_self_ns_profiler", "host_self_ns_kitlib",
            "host_total_ns_profiler", "host_total_ns_kitlib"]
    print(f"\n{title}\n" + m[m["name"].isin(names)][cols].to_string(index=False))


@pytest.mark.parametrize("version,variant", RECORDINGS)
def test_the_release_is_read_from_the_trace(version, variant):
    """CallFrom → ≥ 2.14; host_name without CallFrom → 2.12–2.13; neither → ≤ 2.11, whatever
    ``verbose`` added ('Python thread', 'Call stack'); and the profiler's own events() agree:
    the frames are in them exactly where the rule says they are children."""
    tr = _trace(version, variant)
    events = json.loads((_dir(version, variant) / "events.json").read_text())
    if variant == "nostack":
        assert tr.meta["python_frames_release"] == "" and events["n_python_function_events_in_trace"] == 0
        return
    rel = tr.meta["python_frames_release"]
    assert rel == RELEASE[version], tr.meta["python_frames_rule"]
    assert tr.meta["python_frames_rule"].startswith("inferred from the trace")
    children = PYTHON_FRAME_RULES[rel]["children"]
    assert tr.meta["python_frames_are_children"] is children
    n = events["n_python_function_events_in_trace"]
    assert n == int((tr.ops["kind"] == "python").sum()) > 0
    assert events["n_python_frames_in_events"] == (n if children else 0)
    # the rows the profiler listed: frames only where the rule says so
    assert bool(events["python_rows_in_key_averages"]) is PYTHON_FRAME_RULES[rel]["rows"]
    assert tr.meta["python_frames_are_rows"] is PYTHON_FRAME_RULES[rel]["rows"]


def test_python_thread_is_written_by_verbose_in_every_release():
    """What misled the old rule: 'Python thread' is on the frames of every verbose recording
    (2.9 included) and of no other; 'CallFrom' only on 2.14's, verbose or not."""
    import gzip
    for version in ("2.9", "2.12", "2.13", "2.14"):
        for variant in ("stack_verbose", "stack"):
            doc = json.loads(gzip.decompress((_dir(version, variant) / "trace.json.gz").read_bytes()))
            frames = [e for e in doc["traceEvents"] if e.get("cat") == "python_function"]
            thread = sum("Python thread" in e["args"] for e in frames)
            call_from = sum("CallFrom" in e["args"] for e in frames)
            print(f"torch {version} {variant}: {len(frames)} frames, {thread} with 'Python thread', "
                  f"{call_from} with 'CallFrom', host_name {'host_name' in doc}")
            assert thread == (len(frames) if variant == "stack_verbose" else 0)
            assert call_from == (len(frames) if version == "2.14" else 0)
            assert ("host_name" in doc) is (version != "2.9")


@pytest.mark.parametrize("version,variant", RECORDINGS)
def test_every_row_matches_the_profilers_key_averages(version, variant):
    """Counts, self and total CPU time of every row of ``key_averages()`` (2.12's 129 and
    2.13's 133 Python frame rows included), and CPU memory and FLOPs."""
    tr = _trace(version, variant)
    rows = _expected_rows(version, variant)
    m = G.compare_with_profiler(G.group_ops(tr), rows)
    _show(m, ["forward", "backward", "optimizer"], f"torch {version} {variant}: profiler beside kitlib (ns)")
    assert (m["only_in"] == "both").all(), m.loc[m["only_in"] != "both", ["name", "only_in"]]
    assert len(m) == len(rows)
    # the profiler's µs are floats: rebuilt ns may differ by one in the last digit
    assert (m[TIMES].abs() <= 1).all().all(), m.loc[(m[TIMES].abs() > 1).any(axis=1), ["name"] + TIMES]
    # torch 2.9 held memory records to float-µs edges (issue 41): the trace says so, kitlib follows
    assert tr.meta["memory_edges_float_us"] is (version == "2.9")
    assert (m[MEMORY] == 0).all().all(), m.loc[(m[MEMORY] != 0).any(axis=1), ["name"] + MEMORY]


# the profiler's forward row (µs floats, expected_by_name.json), beside what kitlib gave
# before issue 27's fix (the old rule: 'Python thread' or 'CallFrom' meant "children")
FORWARD = {  # (version, variant): (profiler self µs, kitlib self ns before the fix)
    ("2.9", "stack_verbose"): (1340.773, 322_252),       # 'Python thread' misread as ≥ 2.12
    ("2.9", "stack"): (15660.8, 15_660_800),             # right before, by luck of verbose=False
    ("2.12", "stack_verbose"): (404.575, 404_575),       # right by luck of verbose=True
    ("2.12", "stack"): (501.8, 3_393_191),               # no 'Python thread': misread as ≤ 2.11
    ("2.13", "stack_verbose"): (209.974, 209_974),       # right by luck of verbose=True
    ("2.13", "stack"): (257.746, 1_565_194),             # no 'Python thread': misread as ≤ 2.11
    ("2.14", "stack_verbose"): (393.059, 393_059),
    ("2.14", "stack"): (377.864, 377_864),
}


@pytest.mark.parametrize("version,variant", sorted(FORWARD))
def test_forward_self_time_beside_the_profilers(version, variant):
    """The issue's figure: ``forward``'s Self CPU, the profiler's beside kitlib's now and
    beside what the old rule gave."""
    profiler_us, before_ns = FORWARD[version, variant]
    row = [r for r in _expected_rows(version, variant) if r["key"] == "forward"][0]
    assert row["self_cpu_time_total"] == pytest.approx(profiler_us, abs=5e-4)
    got = int(G.group_ops(_trace(version, variant)).set_index("name").loc["forward", "host_self_ns"])
    print(f"\ntorch {version} {variant}: forward Self CPU  profiler {row['self_cpu_time_total']:,.3f} µs  "
          f"kitlib {got / 1000:,.3f} µs  (kitlib before the fix {before_ns / 1000:,.3f} µs)")
    assert abs(got - round(row["self_cpu_time_total"] * 1000)) <= 1
    # the other rule on the same file gives the old, wrong figure where the old rule erred
    other = "2.14.1" if not _trace(version, variant).meta["python_frames_are_children"] else "2.11.0"
    wrong = kitlib.load_trace(_dir(version, variant) / "trace.json.gz", torch_version=other)
    wrong_ns = int(G.group_ops(wrong).set_index("name").loc["forward", "host_self_ns"])
    assert abs(wrong_ns - got) > 1000 and (before_ns == got or before_ns == wrong_ns)


@pytest.mark.parametrize("version,variant", [(v, s) for v in ("2.12", "2.13") for s in ("stack_verbose", "stack")])
def test_torch_2_12_and_2_13_list_the_python_frames_rows(version, variant):
    """2.12's and 2.13's key_averages() have a row for every Python frame name: kitlib lists
    them too, each with the profiler's count, self and total time."""
    tr = _trace(version, variant)
    rows = _expected_rows(version, variant)
    py_names = set(json.loads((_dir(version, variant) / "events.json").read_text())["python_rows_in_key_averages"])
    assert len(py_names) == {"2.12": 129, "2.13": 133}[version]
    got = G.group_ops(tr)
    assert py_names <= set(got["name"])
    m = G.compare_with_profiler(got, rows)
    shown = ["nn.Module: Sequential_0", "nn.Module: Conv2d_0", "nn.Module: Linear_0"]
    shown += [n for n in py_names if n.startswith("torch/nn/functional.py(") and n.endswith("): cross_entropy")]
    assert len(shown) == 4 and set(shown) <= py_names
    _show(m, shown, f"torch {version} {variant}: Python frame rows, profiler beside kitlib (ns)")
    py = m[m["name"].isin(py_names)]
    assert len(py) == len(py_names) and (py["only_in"] == "both").all()
    assert (py[TIMES].abs() <= 1).all().all()
    # asked not to, kitlib leaves them out, as 2.14 does by default
    assert not py_names & set(G.group_ops(tr, include_python_functions=False)["name"])


@pytest.mark.parametrize("variant", ["stack_verbose", "stack"])
def test_torch_2_14_include_python_functions(variant):
    """2.14 leaves the frames' rows out by default; ``include_python_functions=True`` lists
    them, as ``key_averages(include_python_functions=True)`` does."""
    tr = _trace("2.14", variant)
    default = G.group_ops(tr)
    rows = _expected_rows("2.14", variant, "expected_by_name_with_python.json")
    m = G.compare_with_profiler(G.group_ops(tr, include_python_functions=True), rows)
    _show(m, ["forward", "nn.Module: Sequential_0", "nn.Module: Linear_0"],
          f"torch 2.14 {variant}, include_python_functions=True: profiler beside kitlib (ns)")
    assert len(m) == len(rows) == len(default) + 131 and (m["only_in"] == "both").all()
    assert (m[TIMES].abs() <= 1).all().all() and (m[MEMORY] == 0).all().all()


def test_frames_kept_out_of_the_events_are_never_rows():
    with pytest.raises(ValueError, match="never listed them"):
        G.group_ops(_trace("2.9", "stack"), include_python_functions=True)
    G.group_ops(_trace("2.9", "nostack"), include_python_functions=True)     # no frames: nothing to refuse


def test_a_verbose_2_11_recording_read_bare():
    """The class of the issue's figure on a real 2.11 GPU recording with verbose=True
    ('Python thread' on its 22,659 frames), read without its manifest: forward's Self CPU is
    the profiler's 47,305.258 µs (the old rule gave a fraction of it)."""
    d = DATA / "live-h200-2026-11-30" / "profiler_full"
    tr = kitlib.load_trace(d / "trace.json.gz")
    assert tr.meta["python_frames_release"] == "≤ 2.11"
    ka = json.loads((d / "key_averages.json").read_text())
    assert ka["torch"].startswith("2.11.")
    row = [r for r in ka["by_name"] if r["key"] == "forward" and r["cpu_time_total_us"] > 0][0]
    got = G.group_ops(tr, include_gpu=False).set_index("name").loc["forward"]
    print(f"\ntorch 2.11 live-h200 forward Self CPU: profiler {row['self_cpu_time_total_us']:,.3f} µs, "
          f"kitlib {got['host_self_ns'] / 1000:,.3f} µs")
    assert abs(int(got["host_self_ns"]) - round(row["self_cpu_time_total_us"] * 1000)) <= 1


def test_the_release_rule_on_hand_made_frames():
    frame = {"args": {"Python id": 2, "Python parent id": 1, "Python thread": 0}}
    assert python_frames_release([frame])[0] == "≤ 2.11"
    assert python_frames_release([frame], top={"host_name": "vm"})[0] == "2.12–2.13"
    assert python_frames_release([{"args": {"CallFrom": "a.py:1"}}])[0] == "≥ 2.14"
    assert python_frames_release([frame], torch_version="2.12.0")[0] == "2.12–2.13"
    assert python_frames_release([frame], torch_version="2.11.0+cu130")[0] == "≤ 2.11"
    assert python_frames_release([], top={"host_name": "vm"})[0] == ""


# --------------------------------------------------------------------------- issue 41
# Two recordings made for issue 41 (tools/record_oracle_version.py ROOT lstm_loader | convnet;
# PROVENANCE.md), each beside the same run's key_averages() by name, by input shape and by
# stack (group_by_stack_n=5), recorded with stack_verbose's settings:
# - torch 2.13.0, a small LSTM fed by a DataLoader: the by-stack rows of the Python frames;
# - torch 2.5.1, a small ResNet-like conv net (batch norms, a residual add, channels-last):
#   the memory columns.
ISSUE41 = [("2.13", "lstm_loader"), ("2.5", "convnet")]
GROUPINGS = [("name", "name"), ("input_shape", "input_shape"), ("stack", "stack_5")]
MEM_COLS = ["name", "count_profiler", "count_kitlib", "cpu_memory_bytes_profiler", "cpu_memory_bytes_kitlib",
            "self_cpu_memory_bytes_profiler", "self_cpu_memory_bytes_kitlib"]


@pytest.mark.parametrize("version,workload", ISSUE41)
@pytest.mark.parametrize("by,grouping", GROUPINGS)
def test_issue_41_every_row_of_every_grouping(version, workload, by, grouping):
    """Every row of each grouping: the same keys (name, shapes or 5 innermost frames),
    counts, self and total CPU time (to the ns, the profiler's µs being floats), CPU
    memory and self CPU memory to the byte, FLOPs."""
    tr = _trace(version, workload)
    rows = _expected_rows(version, workload, f"expected_by_{grouping}.json")
    m = G.compare_with_profiler(G.group_ops(tr, by=by, stack_n=5), rows, by=by)
    top = m.reindex(m["self_cpu_memory_bytes_profiler"].abs().sort_values(ascending=False).index).head(4)
    print(f"\ntorch {version} {workload} by {by}: {len(rows)} profiler rows, {int((m['only_in'] == 'both').sum())} "
          f"matched\n" + top[MEM_COLS].to_string(index=False))
    assert (m["only_in"] == "both").all(), m.loc[m["only_in"] != "both", ["name", "only_in"]]
    assert len(m) == len(rows) > 90
    assert (m[TIMES].abs() <= 1).all().all(), m.loc[(m[TIMES].abs() > 1).any(axis=1), ["name"] + TIMES]
    assert (m[MEMORY] == 0).all().all(), m.loc[(m[MEMORY] != 0).any(axis=1), ["name"] + MEMORY]
    assert (m["cpu_memory_bytes_profiler"] != 0).sum() > 10          # memory was recorded: not 0 == 0


def test_issue_41_torch_2_13_python_frame_rows_by_stack():
    """2.13 lists every Python frame as a row; by stack, a frame's key is its callers (not
    itself), and its caller is the frame its 'Python parent id' names. The trace's time
    nesting says otherwise for the frames that begin inside ``record_function.__enter__``
    after the ``ProfilerStep#N`` range it opens (the step starts inside that frame and
    outlasts it): before the fix kitlib keyed them by the step's frames and listed 268
    rows the profiler has not, and missed 275 of its 372."""
    tr = _trace("2.13", "lstm_loader")
    rows = _expected_rows("2.13", "lstm_loader", "expected_by_stack_5.json")
    py_names = set(json.loads((_dir("2.13", "lstm_loader") / "events.json").read_text())["python_rows_in_key_averages"])
    got = G.group_ops(tr, by="stack", stack_n=5)
    m = G.compare_with_profiler(got, rows, by="stack")
    frame_rows = m[m["name"].isin(py_names)]
    print(f"\ntorch 2.13 lstm_loader by stack: {len(frame_rows)} Python frame rows of {len(rows)}, "
          f"all matched: {bool((frame_rows['only_in'] == 'both').all())}")
    assert len(frame_rows) > 250 and (frame_rows["only_in"] == "both").all()
    # a frame's key is its callers: the profiler's row for the LSTM module's frame
    lstm = [r for r in rows if r["key"] == "nn.Module: LSTM_0"]
    assert len(lstm) == 1 and lstm[0]["stack"][0].endswith("): step")
    mine = got[got["name"] == "nn.Module: LSTM_0"]
    print(f"nn.Module: LSTM_0 stack  profiler {lstm[0]['stack'][:2]}  kitlib {list(mine['stack'].iloc[0][:2])}")
    assert len(mine) == 1 and list(mine["stack"].iloc[0]) == lstm[0]["stack"]
    # the frames called inside record_function.__enter__ after the step began: the tree puts
    # them in the step, their Python parent id in __enter__, and so does the profiler
    ops = tr.ops
    py = ops[ops["kind"] == "python"]
    by_id = dict(zip(py["python_id"], py.index))
    enter = py[py["name"].str.endswith("): __enter__")]
    moved = [r for r, pid in zip(py.index, py["python_parent_id"]) if pid in by_id and by_id[pid] in set(enter.index)
             and ops.loc[ops.loc[r, "parent"], "kind"] == "step"]
    assert len(moved) >= 6
    names = sorted(set(ops.loc[moved, "name"]))
    for name in names:
        prof = {tuple(r["stack"]): r["count"] for r in rows if r["key"] == name}
        kit = {tuple(s): c for s, c in zip(got.loc[got["name"] == name, "stack"], got.loc[got["name"] == name, "count"])}
        print(f"{name}: {len(prof)} stacks, profiler counts {sorted(prof.values())}, kitlib {sorted(kit.values())}")
        assert kit == prof and any(s and s[0].endswith("): __enter__") for s in prof)


def test_issue_41_torch_2_5_memory_edges_in_float_microseconds():
    """torch ≤ 2.10 put a memory record in an event when ``start_ns / 1000 * 1000 <= t <=
    end_ns / 1000 * 1000`` with the ns since the epoch, where a float64 steps by 256 ns:
    kitlib reads that rule off the trace (no ``host_name``) and reproduces it; the same file
    read as torch 2.11 (exact ns) gives what kitlib gave before (8 name rows off, up to 448 B
    a row on this recording; the issue's ResNet-18 recording had 3,840 B, another run of this
    workload 16,384 B)."""
    tr = _trace("2.5", "convnet")
    assert tr.meta["memory_edges_float_us"] is True and "host_name" in tr.meta["memory_edges_rule"]
    rows = _expected_rows("2.5", "convnet")
    right = G.compare_with_profiler(G.group_ops(tr), rows)
    exact = kitlib.load_trace(_dir("2.5", "convnet") / "trace.json.gz", torch_version="2.11.0")
    assert exact.meta["memory_edges_float_us"] is False
    wrong = G.compare_with_profiler(G.group_ops(exact), rows)
    off = wrong[(wrong[MEMORY] != 0).any(axis=1)]
    print("\ntorch 2.5.1 convnet, rows the exact-ns rule gets wrong, profiler beside kitlib (float edges) "
          "and kitlib (exact ns):")
    show = off[["name", "self_cpu_memory_bytes_profiler", "self_cpu_memory_bytes_kitlib"]].merge(
        right[["name", "self_cpu_memory_bytes_kitlib"]], on="name", suffixes=("_exact_ns", "_float_us"))
    print(show.to_string(index=False))
    assert len(off) >= 3
    assert (right[MEMORY] == 0).all().all()
    assert (right[TIMES].abs() <= 1).all().all() and (wrong[TIMES].abs() <= 1).all().all()   # times are not touched


def test_memory_edges_rule_by_release():
    """The rule is read from the torch version where known (the reference bundles' manifest
    says 2.11.0: exact ns) and from the trace otherwise."""
    from kitlib.readers.trace import memory_edges_rule
    assert [memory_edges_rule(v)[0] for v in ("2.5.1+cu124", "2.10.0", "2.11.0+cu130", "2.13.0+cpu")] == \
        [True, True, False, False]
    assert memory_edges_rule(top={"host_name": "vm"})[0] is False and memory_edges_rule(top={})[0] is True
    for version in ("2.12", "2.13", "2.14"):
        assert _trace(version, "nostack").meta["memory_edges_float_us"] is False
    assert _trace("2.9", "nostack").meta["memory_edges_float_us"] is True
    assert kitlib.open_capture("fixed_batch").trace.meta["memory_edges_float_us"] is False


def test_float_microsecond_edges_on_a_hand_made_trace():
    """One operator from 5,670,962,797,000,000 to …001,626 ns and a 64-byte record 50 ns after
    its end, base time 1,790,857,026,000,000,000 ns. Worked by hand as torch ≤ 2.10 does:
    (…001,626 + base) / 1000 * 1000 in float64 is …001,728 + base (steps of 256 ns), so the
    record lies inside the operator; torch ≥ 2.11 (exact ns) leaves it to the ``[memory]`` row.
    The same events with a top-level ``host_name`` (≥ 2.12) are read by the exact rule."""
    from kitlib.analyses import memory as M
    from kitlib.readers.trace import trace_from_json
    base = 1_790_857_026_000_000_000
    end = 5_670_962_797_001_626
    assert int((end + base) / 1000 * 1000) - base == end + 102
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 5670962797000.000,
          "dur": 1.626, "args": {"External id": 1}}
    mem = {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 5670962797001.676,
           "s": "t", "args": {"Bytes": 64, "Total Allocated": 64, "Device Type": 0, "Device Id": -1}}
    got = {}
    for top in ({}, {"host_name": "vm"}):
        tr = trace_from_json({"traceEvents": [op, mem], "baseTimeNanoseconds": base, **top})
        assert tr.memory["start_ns"].tolist() == [end + 50]
        rows = G.group_ops(tr).set_index("name")
        got[bool(top)] = (int(rows.loc["aten::empty", "cpu_memory_bytes"]),
                          int(rows.loc["[memory]", "cpu_memory_bytes"]) if "[memory]" in rows.index else 0,
                          len(M.records_inside_no_event(tr)))
        print(f"host_name {bool(top)}: float µs edges {tr.meta['memory_edges_float_us']}, "
              f"aten::empty {got[bool(top)][0]} B, [memory] {got[bool(top)][1]} B")
    assert got == {False: (64, 0, 0), True: (0, 64, 1)}
