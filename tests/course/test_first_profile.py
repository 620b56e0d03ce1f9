"""Lesson 01's recording: a profile the learner makes on the CPU, read back with kitlib."""
import json

import pytest

from kitlib.errors import KitFileError
from kitlib.readers.memory_timeline import CATEGORIES, load_memory_timeline


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    from kitlib.course import first_profile
    return first_profile.record_small_profile(tmp_path_factory.mktemp("first"))


def test_the_schedule_keeps_the_active_steps_only(recording):
    from kitlib.readers.trace import load_trace
    tr = load_trace(recording["trace"])
    assert tr.steps["name"].tolist() == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    conv = tr.ops[tr.ops["name"] == "aten::conv2d"]
    assert len(conv) == 3 and conv["input_dims"].map(str).nunique() == 1
    # the profiler's own table counts the same calls
    ka = {e.key: e.count for e in recording["key_averages"]}
    assert ka["aten::conv2d"] == 3 and ka["forward"] == 3


def test_exercises_are_computed_from_the_recording(recording):
    from kitlib.course.exercises import l01
    ex = l01.questions(recording["trace"], recording["memory_timeline"])
    assert ex["steps_in_trace"].answer == 3 and "wait and warm-up" in ex.check("steps_in_trace", 5).message
    # the "what changes if" questions: 2 active steps of the other schedule; a second convolution, a second shape
    assert ex["conv_calls_if"].answer == 2 and ex["conv_shape_groups"].answer == 2
    # activations: the conv, batch-norm and ReLU outputs of 32 x 16 x 64 x 64 float32 (8 MiB each) are kept
    assert ex["peak_activation_mib"].answer >= 24


def test_memory_timeline_categories_and_bad_files(recording, tmp_path):
    tl = load_memory_timeline(recording["memory_timeline"])
    assert list(tl.columns) == ["time_ns"] + [f"{c}_bytes" for c in CATEGORIES] + ["total_bytes"]
    assert tl["parameter_bytes"].max() > 0 and tl["activation_bytes"].max() > tl["parameter_bytes"].max()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"times": []}))
    with pytest.raises(KitFileError, match="not a memory timeline"):
        load_memory_timeline(bad)
    bad.write_text(json.dumps([[1, 2], [[0, 1], [0, 2]]]))
    with pytest.raises(KitFileError, match="9 numbers"):
        load_memory_timeline(bad)
