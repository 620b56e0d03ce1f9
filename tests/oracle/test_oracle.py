"""The profiler is the oracle: kitlib's tables rebuilt from a trace against the profiler's own.

Three kinds of evidence:
- two CPU recordings made with torch 2.14.1 (``tests/data/oracle-cpu/``, copied from
  ``shared/oracle-cpu``; README there), each beside the same run's ``key_averages()``
  rows by name, by input shape and by stack: every row must match with default
  arguments (counts, self/total CPU time to the ns, CPU memory to the byte, FLOPs);
- a small CPU workload recorded *inside the test* with the installed torch, compared
  with that run's ``key_averages()``: a torch upgrade that changes the profiler's
  rules fails here first;
- small hand-built traces (``tests/data/bugcases/``, README there) whose right answers
  are known, and a whole-µs trace built here.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import kitlib
from kitlib.analyses import flops as F
from kitlib.analyses import grouping as G
from kitlib.analyses import memory as M
from kitlib.analyses.events import op_events, shapes_key
from kitlib.analyses.steps import step_gaps, step_measures
from kitlib.errors import KitError

from support.events import memory_event

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
ORACLE = DATA / "oracle-cpu"
BUGS = DATA / "bugcases"
GROUPINGS = [("name", "name"), ("input_shape", "input_shape"), ("stack", "stack_5")]
DIFFS = ["count_diff", "host_total_ns_diff", "host_self_ns_diff", "cpu_memory_bytes_diff",
         "self_cpu_memory_bytes_diff", "flops_diff"]


@pytest.fixture(scope="module", params=["resnet18", "transformer"])
def oracle_recording(request):
    name = request.param
    return name, kitlib.load_trace(ORACLE / name / "trace.json.gz")


def _oracle_rows(name, grouping):
    return json.loads((ORACLE / name / f"expected_by_{grouping}.json").read_text())["rows"]


@pytest.mark.parametrize("by,grouping", GROUPINGS)
def test_every_row_of_every_grouping_matches_the_profiler(oracle_recording, by, grouping):
    name, tr = oracle_recording
    rows = _oracle_rows(name, grouping)
    m = G.compare_with_profiler(G.group_ops(tr, by=by, stack_n=5), rows, by=by)
    assert (m["only_in"] == "both").all(), m.loc[m["only_in"] != "both", ["name", "only_in"]]
    assert len(m) == len(rows)
    assert set(DIFFS) <= set(m.columns)          # memory and FLOPs are compared too
    bad = m[(m[DIFFS] != 0).any(axis=1)]
    assert bad.empty, bad[["name"] + DIFFS]


def test_self_total_matches_the_profilers_self_and_total_cpu_time_by_name(oracle_recording):
    """``four_measures.self_total`` (lessons 01 and 03's self/total table) against the same
    run's ``key_averages()`` by name: every operator and record_function row's count,
    CPU total and self CPU time to the ns (only ``ProfilerStep*``, a step, is not an
    operator row here); its columns, children_ns = total - self, and the order a learner
    reads it in (total time, longest first)."""
    from kitlib.analyses.four_measures import self_total
    name, tr = oracle_recording
    st = self_total(tr)
    assert st.columns.tolist() == ["name", "kind", "calls", "total_ns", "self_ns", "children_ns"]
    assert st.index.tolist() == list(range(len(st)))
    assert (st["children_ns"] == st["total_ns"] - st["self_ns"]).all()
    assert st["total_ns"].is_monotonic_decreasing
    rows = {r["key"]: r for r in _oracle_rows(name, "name")}
    assert set(rows) - set(st["name"]) == {"ProfilerStep*"} and set(st["name"]) <= set(rows)
    got = st.set_index("name")
    for key, r in rows.items():
        if key == "ProfilerStep*":
            continue
        assert (got.loc[key, "calls"], got.loc[key, "total_ns"], got.loc[key, "self_ns"]) == \
            (r["count"], round(r["cpu_time_total"] * 1000), round(r["self_cpu_time_total"] * 1000)), key


@pytest.mark.parametrize("rank", [0, 1])
def test_self_total_ties_keep_the_order_names_first_appear(rank):
    """Equal totals are common in small traces (the public NCCL pair has 28 and 31 rows
    that tie): they are listed in the order each name first starts in the trace, so the
    table reads the same every time."""
    from kitlib.analyses.four_measures import self_total
    from conftest import REF
    tr = kitlib.load_trace(REF / "public-traces" / f"hta_2024-03_nccl_sampled_rank{rank}.json.gz")
    st = self_total(tr)
    ops = tr.ops[tr.ops["kind"].isin(["op", "annotation"])].sort_values("start_ns", kind="stable")
    first = {name: i for i, name in enumerate(ops.drop_duplicates("name")["name"])}
    ties = st[st.duplicated("total_ns", keep=False)]
    assert len(ties) >= 28
    for total, group in ties.groupby("total_ns"):
        seen = [first[n] for n in group["name"]]
        assert seen == sorted(seen), (total, group["name"].tolist())


def test_python_frames_are_children_by_the_traces_own_rule(oracle_recording):
    name, tr = oracle_recording
    assert tr.meta["python_frames_are_children"] is True
    assert tr.meta["python_frames_rule"].startswith("inferred from the trace")
    lint = {f.code: f for f in kitlib.lint(tr)}
    assert lint["python_frames_rule"].evidence["inferred"] is True


def test_the_issues_figures_on_the_oracle_recordings():
    # ResNet-18 forward: the profiler's Self CPU is 495.144 µs over 3 calls
    # (expected_by_name.json: self_cpu_time_total 495.14399999636225), not 95.30 ms
    r18 = kitlib.load_trace(ORACLE / "resnet18" / "trace.json.gz")
    by = G.group_ops(r18).set_index("name")
    assert by.loc["forward", "host_self_ns"] == 495_144
    assert by.loc["forward", "self_cpu_memory_bytes"] == -960
    # transformer: AdamW.step holds no memory of its own (0 B, not -6,408,576 B), and the
    # nested aten::mul is folded into its parent: 72 calls, 1,376,256 FLOPs (not 96 / 1,769,472)
    tf = kitlib.load_trace(ORACLE / "transformer" / "trace.json.gz")
    mem = M.memory_by_operator(tf, device="cpu")
    assert mem.loc["Optimizer.step#AdamW.step", "self_bytes"] == 0
    fl = F.flops_by_operator(tf)
    assert (fl.loc["aten::mul", "calls"], fl.loc["aten::mul", "flops"]) == (72, 1_376_256)
    assert int(tf.host_events["merged"].sum()) == 54


def test_reference_bundles_take_the_rule_from_their_manifest():
    fixed = kitlib.open_capture("fixed_batch")
    assert fixed.trace.meta["python_frames_are_children"] is False
    assert fixed.trace.meta["python_frames_rule"].startswith("torch 2.11.0+cu130 (from the bundle's manifest)")
    # the same file without its manifest: the rule read from the trace itself agrees
    bare = kitlib.load_trace(fixed.file("trace.json.gz"))
    assert bare.meta["python_frames_are_children"] is False


def test_one_event_tree_in_the_trace_model():
    tr = kitlib.open_capture("fixed_batch").trace
    t = tr.host_events
    assert list(t.columns) == ["source", "row", "name", "kind", "pid", "tid", "start_ns", "end_ns", "dur_ns",
                               "parent", "depth", "merged", "profiler_parent", "children_ns"]
    assert not t["name"].isin(["aten::is_leaf", "profiler::_record_function_exit"]).any()
    # every child lies inside its parent, on its thread
    k = np.flatnonzero(t["parent"].to_numpy() >= 0)
    p = t["parent"].to_numpy()[k]
    assert (t["start_ns"].to_numpy()[k] >= t["start_ns"].to_numpy()[p]).all()
    assert (t["end_ns"].to_numpy()[k] <= t["end_ns"].to_numpy()[p]).all()
    assert (t["tid"].to_numpy()[k] == t["tid"].to_numpy()[p]).all()
    # analyses read it rather than nesting on their own: op_events' parents are the tree's
    ev = op_events(tr)
    assert len(ev) == int((~t["merged"]).sum())
    assert (ev["host_self_ns"] >= 0).all()


# --------------------------------------------------------------------------- recorded in the test
def _record(tmp_path, workload, steps=4):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, _ExperimentalConfig, profile, schedule
    from kitlib.capture.recipes import key_average_rows
    torch.manual_seed(0)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True, with_stack=True,
                 with_flops=True, schedule=schedule(wait=1, warmup=1, active=steps - 2),
                 experimental_config=_ExperimentalConfig(verbose=True)) as prof:
        for _ in range(steps):
            workload()
            prof.step()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    rows = {"name": key_average_rows(prof.key_averages()),
            "input_shape": key_average_rows(prof.key_averages(group_by_input_shape=True)),
            "stack": key_average_rows(prof.key_averages(group_by_stack_n=5))}
    return kitlib.load_trace(path), rows, torch.__version__


def _small_training_step():
    import torch
    from torch.profiler import record_function
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True)
    lstm = torch.nn.LSTM(8, 8, batch_first=True)
    head = torch.nn.Linear(16 + 8, 3)
    # two convolutions: one whose FLOPs the profiler counts (stride 2, padding 1), and one with
    # padding="same", which its Concrete Inputs leave empty and the profiler counts as 0
    convs = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, stride=2, padding=1), torch.nn.Conv2d(4, 4, 3, padding="same"))
    opt = torch.optim.AdamW([*layer.parameters(), *lstm.parameters(), *head.parameters(), *convs.parameters()])
    x, seq, y = torch.randn(2, 5, 16), torch.randn(2, 5, 8), torch.randint(0, 3, (2,))
    img = torch.randn(2, 2, 8, 8)

    def step():
        with record_function("forward"):
            a = layer(x).mean(dim=1)
            b, _ = lstm(seq)
            z = torch.cat([a, b[:, -1]], dim=1)                  # a tensor-list argument
            z = torch.stack([z, z]).sum(0)                        # another one
            z = z + convs(img).mean(dim=(1, 2, 3))[:, None]
            loss = torch.nn.functional.cross_entropy(head(z), y)
        with record_function("backward"):
            opt.zero_grad()
            loss.backward()
        with record_function("optimizer"):
            opt.step()
    return step


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    return _record(tmp_path_factory.mktemp("oracle"), _small_training_step())


@pytest.mark.torch_run
@pytest.mark.parametrize("by", ["name", "input_shape", "stack"])
def test_live_recording_matches_its_own_key_averages(live, by):
    tr, rows, version = live
    if by == "stack" and not any(r["stack"] for r in rows["stack"]):
        pytest.skip(f"torch {version} keeps no stacks in key_averages")
    m = G.compare_with_profiler(G.group_ops(tr, by=by, stack_n=5), rows[by], by=by)
    assert (m["only_in"] == "both").all(), m.loc[m["only_in"] != "both", ["name", "only_in"]]
    assert (m[["count_diff", "cpu_memory_bytes_diff", "self_cpu_memory_bytes_diff", "flops_diff"]] == 0).all().all()
    # the profiler's µs are floats: rebuilt ns may differ by one in the last digit
    assert (m[["host_total_ns_diff", "host_self_ns_diff"]].abs() <= 1).all().all()


@pytest.mark.torch_run
def test_list_arguments_are_keyed_as_the_profiler_keys_them(live):
    tr, rows, _ = live
    keyed = {(r["key"], r["input_shapes"]) for r in rows["input_shape"]}
    ev = op_events(tr)
    cats = ev[ev["name"] == "aten::cat"]
    mine = cats[cats["input_dims_nested"].str.startswith("[[[2, 16], [2, 8]]")]   # the members, kept beside it
    assert len(mine) == 2                                        # the two active steps
    assert mine["input_shapes"].str.startswith("[[]").all()     # the list argument is written []
    assert all(("aten::cat", k) in keyed for k in cats["input_shapes"])
    assert not any(("aten::cat", k) in keyed for k in mine["input_dims_nested"])
    assert shapes_key([[[4, 8], [4, 8]], [], []]) == "[[], [], []]"
    assert shapes_key([[[4, 8], [4, 8]], []], lists="nested") == "[[[4, 8], [4, 8]], []]"


# --------------------------------------------------------------------------- hand-built cases
def test_external_ids_are_checked_per_launch():
    """bugcases/extid-copy-of-correlation: kernel i belongs to the operator with External
    id 10 + i; the stray launch outside every operator (External id = its correlation, 11)
    belongs to none."""
    tr = kitlib.load_trace(BUGS / "extid-copy-of-correlation" / "trace.json")
    c = kitlib.chain(tr)
    stray = c[c["correlation"] == 11]
    assert stray["link"].tolist() == ["no_operator"] and stray["op_name"].isna().all()
    rest = c[c["correlation"] != 11].sort_values("correlation")
    op_ext = tr.ops.loc[rest["op_row"].to_numpy(), "external_id"].to_numpy()
    assert (op_ext == rest["correlation"].to_numpy() - 2).all() and (rest["link"] == "external_id").all()
    assert len(rest) == 16


def test_steps_are_found_by_name_in_the_pytorch_1_9_format():
    """bugcases/steps-as-operators: ProfilerStep#N in category Operator."""
    tr = kitlib.load_trace(BUGS / "steps-as-operators" / "trace.json")
    assert tr.steps["step"].tolist() == [5, 6]
    m = step_measures(tr).set_index("step")
    assert m.loc[5, "wall_ns"] == 900_000 and m.loc[5, "kernel_sum_ns"] == 300_000
    # the public PyTorch 1.9 trace: its six ProfilerStep#N operators (#5-#10; #10 is a
    # whole step too: 3,937 operators and 1,987 launches like the others)
    v100 = kitlib.load_trace(DATA / "public-traces" / "kineto_2021-06_resnet50_v100.json.gz")
    assert v100.steps["step"].tolist() == [5, 6, 7, 8, 9, 10]
    assert v100.meta["time_resolution_ns"] == 1000


def test_graph_launches_are_linked_and_not_reported_as_missing():
    """bugcases/graph-launch-step: cudaLaunchKernelExC, cuLaunchKernelEx, a copy and a
    CUDA graph replay (one cudaGraphLaunch, three kernels): all linked, lint finds nothing."""
    tr = kitlib.load_trace(BUGS / "graph-launch-step" / "trace.json")
    c = kitlib.chain(tr)
    assert c["launch_row"].ge(0).all()
    graph = c[c["launch_name"] == "cudaGraphLaunch"]
    assert len(graph) == 3 and graph["launch_row"].nunique() == 1 and graph["gpu_dur_ns"].sum() == 450_000
    assert kitlib.lint(tr) == []


def _whole_us_trace(tmp_path):
    """A PyTorch 1.9-style trace (whole µs) in which truncation makes an operator end
    1 µs after the one it was called from: ts/dur were each cut to whole µs."""
    ev = [{"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 100, "dur": 50},
          {"ph": "X", "cat": "Operator", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 110, "dur": 20},
          {"ph": "X", "cat": "Operator", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 111, "dur": 20},
          {"ph": "X", "cat": "Operator", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 140, "dur": 5}]
    p = tmp_path / "whole_us.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    return kitlib.load_trace(p)


def test_whole_microsecond_traces_keep_a_truncated_child_inside(tmp_path):
    """PyTorch up to 2.3 truncated ``ts`` and ``dur`` to whole µs separately, so addmm
    (111-131), called from linear (110-130), is written ending 1 µs after it; the profiler's
    own ``_populate_cpu_children`` then made it the step's child and counted its time twice
    in the step (negative self CPU times, pytorch/pytorch#101861, fixed by PR #129554 with
    exact ends). kitlib lets a child outlast its parent by 1 µs on whole-µs traces: addmm
    stays linear's child, linear's self time is the 1 µs before addmm starts (the 19 µs of
    addmm inside linear are its children's time) and no self time is negative. The strict
    rule, as the installed torch's ``EventList._build_tree`` applies it to the trace's
    numbers, is printed beside kitlib's: it differs exactly there."""
    tr = _whole_us_trace(tmp_path)
    assert tr.meta["time_resolution_ns"] == 1000
    ev = op_events(tr).set_index("name")
    names = list(ev.index)
    kitlib_rows = {n: (names[p] if p >= 0 else None, int(self_ns))
                   for n, p, self_ns in zip(names, ev["parent"], ev["host_self_ns"])}
    # by hand: step 50 - (linear 20 + relu 5) = 25 µs; linear 20 - 19 (addmm's part inside) = 1 µs
    assert kitlib_rows == {"ProfilerStep#1": (None, 25_000), "aten::linear": ("ProfilerStep#1", 1_000),
                           "aten::addmm": ("aten::linear", 20_000), "aten::relu": ("ProfilerStep#1", 5_000)}
    assert (ev["host_self_ns"] >= 0).all()
    torch = pytest.importorskip("torch")
    from torch.autograd.profiler_util import EventList, FunctionEvent
    raw = json.loads((tmp_path / "whole_us.json").read_text())["traceEvents"]
    fes = EventList([FunctionEvent(id=i, name=e["name"], thread=e["tid"], start_us=e["ts"],
                                   end_us=e["ts"] + e["dur"]) for i, e in enumerate(raw)])
    fes._build_tree()
    strict_rows = {fe.name: (fe.cpu_parent.name if fe.cpu_parent else None, int(fe.self_cpu_time_total * 1000))
                   for fe in fes}
    print(f"kitlib {kitlib_rows}\nstrict rule (torch {torch.__version__}) {strict_rows}")
    assert strict_rows["aten::addmm"][0] == "ProfilerStep#1"
    assert {n: r for n, r in strict_rows.items() if n not in ("aten::addmm", "aten::linear", "ProfilerStep#1")} == \
        {n: r for n, r in kitlib_rows.items() if n not in ("aten::addmm", "aten::linear", "ProfilerStep#1")}


def test_memory_outside_every_event_is_a_memory_row(tmp_path):
    """``_parse_kineto_results`` turns allocator records that fall inside no event into
    rows named "[memory]" (torch 2.5 shows them; so would any release)."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0},
          {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 12.0,
           "args": {"Bytes": 4096, "Total Allocated": 4096, "Total Reserved": 0, "Addr": 1,
                    "Device Type": 0, "Device Id": -1}},
          {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 20.0,
           "args": {"Bytes": -4096, "Total Allocated": 0, "Total Reserved": 0, "Addr": 1,
                    "Device Type": 0, "Device Id": -1}}]
    p = tmp_path / "mem.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    m = M.memory_by_operator(kitlib.load_trace(p), device="cpu")
    assert m.loc["aten::empty", ["calls", "total_bytes", "self_bytes"]].tolist() == [1, 4096, 4096]
    assert m.loc["[memory]", ["calls", "total_bytes", "self_bytes"]].tolist() == [1, -4096, -4096]


def test_memory_rows_worked_on_paper(tmp_path):
    """Which records an event holds (start_ns <= t <= end_ns: both ends included), the
    "[memory]" row of the rest with every column, ``self_gib`` in GiB, the columns in
    order and the rows by Self CUDA Mem, largest first. By hand: aten::empty over
    [10, 15] µs holds the records at 10 (+1000 B), 12 (+4096 B) and 15 (-1000 B);
    aten::zeros over [40, 45] the one at 42 (+2048 B); those at 20 (-4096 B), 25 (+100 B),
    30 (+2**30 B), 35 (+1 B) and 50 (+7 B) lie inside no event (five outside, four inside)."""
    def rec(ts, nbytes, addr):
        return memory_event(ts, nbytes, addr, device_type=0, device_id=-1)
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 10.0, "dur": 5.0},
          {"ph": "X", "cat": "cpu_op", "name": "aten::zeros", "pid": 1, "tid": 1, "ts": 40.0, "dur": 5.0},
          rec(10.0, 1000, 2), rec(12.0, 4096, 1), rec(15.0, -1000, 2), rec(20.0, -4096, 1), rec(25.0, 100, 3),
          rec(30.0, 2**30, 4), rec(35.0, 1, 5), rec(42.0, 2048, 6), rec(50.0, 7, 7)]
    p = tmp_path / "mem.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    m = M.memory_by_operator(kitlib.load_trace(p), device="cpu")
    assert m.columns.tolist() == ["calls", "alloc_bytes", "free_bytes", "total_bytes", "self_alloc_bytes",
                                  "self_free_bytes", "self_bytes", "self_gib", ]
    assert m.index.tolist() == ["[memory]", "aten::empty", "aten::zeros"]      # Self CUDA Mem, largest first
    assert m.loc["aten::empty"].tolist()[:7] == [1, 5096, 1000, 4096, 5096, 1000, 4096]
    assert m.loc["aten::zeros"].tolist()[:7] == [1, 2048, 0, 2048, 2048, 0, 2048]
    outside = 100 + 2**30 + 1 + 7
    assert m.loc["[memory]"].tolist()[:7] == [5, outside, 4096, outside - 4096, outside, 4096, outside - 4096]
    assert m["self_gib"].tolist() == [(outside - 4096) / 2**30, 4096 / 2**30, 2048 / 2**30]


# --------------------------------------------------------------------------- smaller ones
def test_cpu_only_recording_has_no_gpu_gaps():
    tr = kitlib.load_trace(ORACLE / "resnet18" / "trace.json.gz")
    m = step_measures(tr)
    assert m["device_busy_ns"].isna().all() and m["gaps"].isna().all()
    assert "no GPU activity" in m.attrs["note"]
    assert m["wall_ns"].tolist() == tr.steps["dur_ns"].tolist()
    with pytest.raises(KitError, match="no GPU activity"):
        step_gaps(tr)


def test_backward_flops_message_says_what_is_counted():
    f = {x.code: x for x in kitlib.lint(kitlib.open_capture("profiler_5step"))}["backward_flops_absent"]
    assert f.evidence["convolution_backward_calls"] == 265
    assert f.evidence["backward_calls_counted"] == 10          # the linear layer's backward mm, 2 per step
    assert "aten::mm" in f.meaning and "are counted" in f.meaning


def test_summary_of_a_plain_trace_file():
    """`python -m kitlib summary FILE` summarises any trace, not only bundles."""
    import subprocess
    import sys
    from kitlib.capture.summary import summarize
    text = summarize(ORACLE / "transformer" / "trace.json.gz", top=3)
    assert "without a bundle" in text and "steps in the trace: 3 (ProfilerStep#2 … ProfilerStep#4)" in text
    assert "aten::mm" in text and "python_frames_rule" in text and "cpu_only" in text
    r = subprocess.run([sys.executable, "-m", "kitlib", "summary", str(BUGS / "graph-launch-step" / "trace.json")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "NVIDIA H200" in r.stdout and "graph_kernel_x" in r.stdout


def test_an_nsys_recipe_traces_the_dataloader_workers():
    """Lesson 04's open question (was batch 0 late from its worker?) needs the forked
    workers traced: Nsight leaves them out unless --trace-fork-before-exec=true."""
    from kitlib.capture.nsys_recipes import NSYS_RECIPES, collectors, profile_command
    cmd = profile_command("workers", "out/report")
    assert "--trace-fork-before-exec=true" in cmd and "--sample=process-tree" in cmd
    assert collectors("workers")["trace_forks"] is True
    assert "--trace-fork-before-exec=true" not in profile_command("nsys_8step", "out/report")
    assert set(NSYS_RECIPES) >= {"nsys_8step", "matched", "emit_nvtx", "system", "workers"}
