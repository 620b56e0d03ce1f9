"""The small example values of kitlib.model.examples, which the docstring Examples use."""
from kitlib.model.examples import tiny_profile_doc, tiny_trace
from kitlib.readers.trace import trace_from_json


def test_tiny_trace_is_five_events():
    tr = tiny_trace()
    assert len(tr.ops) + len(tr.launches) + len(tr.gpu) == 5
    # aten::add (zero-length, at relu's end) is relu's sibling under [start, end)
    assert tr.ops.set_index("name").loc["aten::add", "parent"] == 0


def test_tiny_profile_doc_tree_and_tables():
    tr = trace_from_json(tiny_profile_doc())
    ops = tr.ops.set_index("name")
    assert ops.loc["aten::conv2d", "parent"] == ops.index.get_loc("forward")
    assert ops.loc["model.py(5): forward", "parent"] == ops.index.get_loc("nn.Module: Net_0")
    assert sorted(tr.gpu["kind"]) == ["gpu_annotation", "kernel", "kernel"]
    assert tr.memory["bytes"].tolist() == [4096, 1024, -4096]
    assert tr.launches["correlation"].tolist() == [10, 11]
    # each kernel joins its launch and its operator
    assert set(tr.gpu.loc[tr.gpu["kind"] == "kernel", "correlation"]) == {10, 11}


def test_tiny_profile_doc_is_a_fresh_dict_each_call():
    a = tiny_profile_doc()
    a["traceEvents"].clear()
    assert tiny_profile_doc()["traceEvents"]


def test_tiny_rank_docs_are_two_ranks_of_one_nccl_run():
    from kitlib.model.examples import TINY_RANKS, tiny_rank_docs
    docs = tiny_rank_docs()
    assert sorted(docs) == [0, 1]
    for r, d in docs.items():
        assert d["distributedInfo"] == {"backend": "nccl", "rank": r, "world_size": 2}
        tr = trace_from_json(d)
        assert tr.steps["step"].tolist() == [1, 2]
        k = tr.kernels
        nccl = k[k["name"].str.startswith("ncclDevKernel_")]
        assert [(a // 1000, b // 1000) for a, b in zip(nccl["start_ns"], nccl["end_ns"])] == \
            [(a, b) for _, a, b in TINY_RANKS[r]["calls"]]
        assert len(k) - len(nccl) == len(TINY_RANKS[r]["compute"])
        rpc = tr.ops.loc[tr.ops["name"] == "record_param_comms", "comm_args"].tolist()
        assert [a["Seq"] for a in rpc] == [0, 1] and {a["Process Group Name"] for a in rpc} == {"0"}
    # every call ends together on both ranks (the end check verifies it), rank 1 starts it later
    for (s0, a0, b0), (s1, a1, b1) in zip(TINY_RANKS[0]["calls"], TINY_RANKS[1]["calls"]):
        assert s0 == s1 and b0 == b1 and a1 > a0


def test_tiny_rank_folder_is_stable_and_loads(tmp_path, monkeypatch):
    from kitlib.model.examples import tiny_rank_folder
    from kitlib.readers.ranks import load_traces
    monkeypatch.setenv("KITLIB_CACHE", str(tmp_path))
    a = tiny_rank_folder()
    assert a.parent == tmp_path / "examples" and sorted(p.name for p in a.iterdir()) == ["rank0.json", "rank1.json"]
    before = {p.name: p.stat().st_mtime_ns for p in a.iterdir()}
    (a / "rank1.json").write_text("{}")                     # damaged: written again
    assert tiny_rank_folder() == a
    assert {p.name for p in a.iterdir()} == {"rank0.json", "rank1.json"}     # no temporary file left
    assert (a / "rank0.json").stat().st_mtime_ns == before["rank0.json"]     # unchanged: left alone
    t = load_traces(a)
    assert t.ranks == [0, 1] and t.backend == "nccl" and t.world_size == 2


def test_rank_traces_carry_the_label_of_their_recording(tmp_path, monkeypatch):
    """RankTraces lives in the model; load_traces gives it the label lessons print under a
    figure: a folder without a manifest is named as trace files, a list of files is no
    recording of its own (None), and a kit bundle keeps the label it was opened with."""
    from kitlib.model import RankTraces
    from kitlib.model.examples import tiny_rank_folder
    from kitlib.readers.bundle import label_for
    from kitlib.readers.ranks import load_traces
    monkeypatch.setenv("KITLIB_CACHE", str(tmp_path))
    folder = tiny_rank_folder()
    t = load_traces(folder)
    assert isinstance(t, RankTraces)
    assert t.label == f"{folder.name}: trace files (no kit manifest)" == label_for(folder)
    assert load_traces(sorted(folder.glob("*.json"))).label is None
    assert "label" not in repr(t)                      # the repr names ranks, world size, backend
