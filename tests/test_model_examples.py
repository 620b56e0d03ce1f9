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
