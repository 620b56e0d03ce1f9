"""Bad input gets a kitlib error that names the file and the problem."""
import copy
import gzip
import json
import shutil

import pytest

from kitlib import open_capture
from kitlib.errors import BundleError, KitFileError, TraceFormatError
from kitlib.readers.trace import load_trace

from conftest import REF


def _raises(path, exc, *words):
    with pytest.raises(exc) as info:
        load_trace(path)
    msg = str(info.value)
    assert str(path) in msg
    for w in words:
        assert w in msg, msg
    return msg


def test_missing_file(tmp_path):
    _raises(tmp_path / "nope.json", KitFileError, "no such file")


def test_empty_file(tmp_path):
    p = tmp_path / "empty.json"
    p.write_bytes(b"")
    _raises(p, KitFileError, "empty")


def test_truncated_gzip(tmp_path):
    data = (REF / "profiler_5step" / "trace.json.gz").read_bytes()
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[: len(data) // 2])
    _raises(p, KitFileError, "truncated gzip")


def test_invalid_json_says_where(tmp_path):
    p = tmp_path / "bad.json"
    text = '{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 2,}]}'
    p.write_text(text)
    msg = _raises(p, KitFileError, "invalid JSON", "byte")
    where = text.index(",}") + 1  # the parser stops at the "}" after the trailing comma
    assert f"byte {where}" in msg and "cut off" not in msg


def test_cut_off_json(tmp_path):
    raw = gzip.decompress((REF / "profiler_5step" / "trace.json.gz").read_bytes())
    p = tmp_path / "cut.json"
    p.write_bytes(raw[:5000])
    _raises(p, KitFileError, "invalid JSON", "cut off", "line 1")


@pytest.mark.parametrize("doc,words", [
    ({"hello": 1}, ["traceEvents", "hello"]),
    (42, ["not an object"]),
    ({"traceEvents": [1, 2]}, ["event #0"]),
    ({"traceEvents": [{"ph": "X", "cat": "gfx", "name": "draw", "ts": 1, "dur": 1}]}, ["no torch.profiler events", "gfx"]),
    ({"traceEvents": "x"}, ["not a list"]),
])
def test_json_that_is_not_a_trace(tmp_path, doc, words):
    p = tmp_path / "other.json"
    p.write_text(json.dumps(doc))
    msg = _raises(p, TraceFormatError, *words)
    assert msg


def test_folder_instead_of_file(tmp_path):
    _raises(tmp_path, KitFileError, "folder")


def test_bundle_errors(tmp_path):
    with pytest.raises(BundleError, match="no such capture folder"):
        open_capture(tmp_path / "missing")
    with pytest.raises(BundleError, match="no manifest.json"):
        open_capture(tmp_path)
    # a bundle whose trace was changed after recording is refused on read
    copy = tmp_path / "copy"
    shutil.copytree(REF / "cold_start_8step", copy)
    (copy / "wallclock.json").write_text("{}")
    cap = open_capture(copy)
    with pytest.raises(BundleError, match="sha256 differs"):
        cap.read_json("wallclock.json")
    with pytest.raises(BundleError, match="has no file 'key_averages.json'"):
        cap.file("key_averages.json")


@pytest.fixture(scope="module")
def reference_json():
    """The reference trace read once: its first kernel event, and the whole document as
    ``json.dumps`` writes it with that event replaced by a marker string."""
    doc = json.loads(gzip.decompress((REF / "profiler_5step" / "trace.json.gz").read_bytes()))
    events = doc["traceEvents"]
    i = next(i for i, e in enumerate(events) if e.get("cat") == "kernel")
    kernel, events[i] = events[i], _MARK
    text = json.dumps(doc)
    assert text.count(json.dumps(_MARK)) == 1
    return kernel, text


_MARK = "kitlib-test: the damaged kernel event goes here"


def _damaged(tmp_path, reference_json, change):
    """The reference trace with one kernel event changed by ``change(event)``: the text
    ``json.dumps`` gives for the changed document (spliced, not re-encoded: 0.3 s a case)."""
    kernel, text = reference_json
    ev = copy.deepcopy(kernel)
    change(ev)
    p = tmp_path / "damaged.json"
    p.write_text(text.replace(json.dumps(_MARK), json.dumps(ev), 1))
    return p


@pytest.mark.parametrize("change,words", [
    (lambda e: e.update(dur="abc"), ["'dur' is 'abc'", "not a number"]),
    (lambda e: e.update(ts="abc"), ["'ts' is 'abc'"]),
    (lambda e: e.update(ts=[1]), ["'ts' is [1]"]),
    (lambda e: e.pop("ts"), ["has no 'ts'"]),
    (lambda e: e.update(dur=-5), ["negative duration"]),
    (lambda e: e.update(dur=10**30), ["outside what a trace can hold"]),
    (lambda e: e.update(ts=1e300), ["outside what a trace can hold"]),
    (lambda e: e.update(args=[1, 2]), ["'args' is a list"]),
])
def test_damaged_events_are_named(tmp_path, reference_json, change, words):
    p = _damaged(tmp_path, reference_json, change)
    msg = _raises(p, TraceFormatError, *words)
    assert "cat 'kernel'" in msg


def test_other_formats_point_to_their_reader(tmp_path):
    _raises(REF / "nsys_8step" / "report.sqlite", TraceFormatError, "kitlib.load_nsys")
    _raises(REF / "profiler_5step" / "memory_snapshot.pickle", TraceFormatError, "load_memory_snapshot")


@pytest.mark.parametrize("files,words", [
    ("trace.json.gz", "'files' must map"),
    ({"../../etc/hostname": {"sha256": "0"}}, "outside the bundle"),
])
def test_manifest_files_are_checked(tmp_path, files, words):
    m = json.loads((REF / "cold_start_8step" / "manifest.json").read_text())
    m["files"] = files
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(BundleError, match=words):
        open_capture(tmp_path)


def test_yes_no_answers_are_not_guessed():
    from kitlib.course import exercises
    ex = exercises.lesson02(open_capture("profiler_5step"))
    assert ex.check("add_host_and_device", "No.").correct is True
    assert ex.check("add_host_and_device", False).correct is True
    assert ex.check("add_host_and_device", "yes").correct is False
    v = ex.check("add_host_and_device", "maybe")
    assert v.correct is False and "yes or no" in v.message


def test_wrong_answers_get_a_hint_before_the_answer():
    from kitlib.course import exercises
    # 844.610 µs: the first convolution's third launch to its kernel, recomputed from the raw
    # JSON in test_golden_derived.py::test_queue_delay_of_the_first_convolution_from_raw_json
    ex = exercises.lesson02(open_capture("profiler_5step"))
    first = ex.check("queue_delay_us", 500)
    assert first.correct is False and "844" not in first.message
    second = ex.check("queue_delay_us", 500)
    assert "844.610" in second.message
    unit = exercises.lesson02(open_capture("profiler_5step")).check("queue_delay_us", 0.84461)
    assert "factor of 0.001" in unit.message
    assert "844.61" in ex.reveal("queue_delay_us").message


# -- issue 41: lesson 13 read a clinic case's step_times.json past the manifest ------------
@pytest.mark.parametrize("damage", ["times x3", "truncated", "missing"])
@pytest.mark.parametrize("case,rel", [("case_g/before", "step_times.json"),           # one process
                                      ("case_b/before", "rank0/step_times.json")])   # two ranks
def test_clinic_step_times_are_checked_against_the_manifest(tmp_path, case, rel, damage):
    import statistics

    from kitlib.course import clinic_signs as cs
    src = cs.clinic_folder() / case
    sound = json.loads((src / rel).read_text())
    if case == "case_g/before":      # the graded figure: the raw file's median over 2 images a step
        raw = statistics.median(sound["step_ms_uninstrumented"]) / 2
        kit = cs.signs(cs.open_bundle(src))["ms_per_image"]
        print(f"case g ms per image: kitlib {kit:.4f}, from the raw step_times.json {raw:.4f}")
        assert kit == pytest.approx(raw) and round(raw, 4) == 1.9958
    bundle = tmp_path / "b"
    shutil.copytree(src, bundle)
    f = bundle / rel
    if damage == "times x3":         # gave 5.9875 ms per image with no word before
        f.write_text(json.dumps({k: [3 * v for v in vals] for k, vals in sound.items()}))
    elif damage == "truncated":      # a bare JSONDecodeError before
        f.write_bytes(f.read_bytes()[:40])
    else:                            # a bare FileNotFoundError before
        f.unlink()
    with pytest.raises(BundleError) as info:
        cs.signs(cs.open_bundle(bundle))
    msg = str(info.value)
    print(msg)
    assert str(f) in msg
    assert ("missing from the folder" if damage == "missing" else "sha256 differs from manifest.json") in msg


# -- issue 41: an incomplete rank set loaded without a word -----------------------------------
def _world(path):
    return json.loads(gzip.decompress(path.read_bytes()))["distributedInfo"]["world_size"]


def test_one_rank_of_two_is_refused_naming_the_missing_rank(tmp_path):
    from kitlib.readers.ranks import load_traces
    src = REF / "ranks_balanced"
    assert _world(src / "rank0" / "trace.json.gz") == 2               # the raw trace's own world size
    (tmp_path / "rank0").mkdir()
    shutil.copy(src / "rank0" / "trace.json.gz", tmp_path / "rank0" / "trace.json.gz")
    for given in (tmp_path, [tmp_path / "rank0" / "trace.json.gz"]):   # a folder, or the file alone
        with pytest.raises(KitFileError) as info:
            load_traces(given)
        msg = str(info.value)
        print(msg)
        assert msg.startswith(str(tmp_path)) and "holds rank(s) 0 of a run of world size 2" in msg
        assert "rank(s) 1 missing" in msg and "partial=True" in msg


def test_a_rank_behind_a_symlinked_folder_is_named_not_left_out(tmp_path):
    """rglob does not go into a symlinked folder: rank1 reached through one was left out, and
    straggler_summary then named rank 0 "last in 2 of 2 steps"."""
    from kitlib.readers.ranks import load_traces
    src = REF / "ranks_balanced"
    run = tmp_path / "run"
    (run / "rank0").mkdir(parents=True)
    shutil.copy(src / "rank0" / "trace.json.gz", run / "rank0" / "trace.json.gz")
    (run / "rank1").symlink_to(src / "rank1", target_is_directory=True)
    with pytest.raises(KitFileError) as info:
        load_traces(run)
    msg = str(info.value)
    print(msg)
    assert msg.startswith(f"{run}: holds rank(s) 0 of a run of world size 2")
    assert "rank(s) 1 missing; the symlinked folder(s) rank1 were not searched" in msg


def test_a_partial_rank_set_loads_when_asked_and_has_no_straggler(tmp_path):
    from kitlib.analyses.collectives import straggler_summary
    from kitlib.errors import KitError
    from kitlib.readers.ranks import load_traces
    one = load_traces([REF / "ranks_straggler" / "rank0" / "trace.json.gz"], partial=True)
    assert one.ranks == [0] and one.world_size == 2
    with pytest.raises(KitError, match=r"only rank\(s\) \[0\] of world size 2: a straggler is the rank the others"):
        straggler_summary(one)
    both = straggler_summary(load_traces(REF / "ranks_straggler"))    # the whole run: rank 1 (test_distributed)
    assert both["rank"] == 1


# -- issue 41: answers computed with numpy/pandas, True for a number, NaN ---------------------
def test_every_yes_no_and_number_question_judges_numpy_bools_true_and_nan(built_lessons):
    """Every lesson's questions (the answer key's builders): a right yes/no computed with
    numpy or pandas (``np.True_``) is right; ``True`` is not a number (it was judged right
    where the answer is 1); NaN or infinity is refused, not "too low" and not kept as a
    prediction, and neither counts as a try."""
    import copy
    import math

    import numpy as np
    import pandas as pd

    from kitlib.course.exercises import _is_number
    yes_no = numbers = 0
    for n, (ex, _) in built_lessons.items():
        for q0 in ex.questions:
            if isinstance(q0.answer, bool):
                yes_no += 1
                for given in (np.bool_(q0.answer), pd.Series([q0.answer]).iloc[0], pd.Series([q0.answer]).any()
                              if q0.answer else pd.Series([q0.answer]).all()):
                    q = copy.deepcopy(q0)
                    assert q.judge(given).correct is True, (n, q.key, type(given))
                q = copy.deepcopy(q0)
                assert q.judge(np.bool_(not q0.answer)).correct is False, (n, q.key)
            elif _is_number(q0.answer):
                numbers += 1
                for given, words in ((True, "that is a yes/no, not a number"),
                                     (np.True_, "that is a yes/no, not a number"),
                                     (False, "that is a yes/no, not a number"),
                                     (float("nan"), "not a finite number"), (np.nan, "not a finite number"),
                                     ("nan", "not a finite number"), (np.float64("inf"), "not a finite number"),
                                     (pd.Series([np.nan]).mean(), "not a finite number")):
                    q = copy.deepcopy(q0)
                    v = q.judge(given)
                    assert v.correct is False and v.message.startswith("expected a number") and words in v.message, \
                        (n, q.key, given, v.message)
                    assert q.wrong_tries == 0 and q.prediction is ... and q.solved_after is None, (n, q.key, given)
                q = copy.deepcopy(q0)
                assert q.judge(np.float64(q0.answer)).correct is True, (n, q.key)
                assert not math.isnan(float(q0.answer))
    print(f"{yes_no} yes/no questions, {numbers} number questions in {len(built_lessons)} lessons")
    assert yes_no >= 9 and numbers > 0


def test_true_is_not_the_number_one():
    from kitlib.course.exercises import Question
    q = Question("n", "How many?", 1, "one", kind="compute")
    v = q.judge(True)
    print(v.message)
    assert v.correct is False and "expected a number, got True: that is a yes/no, not a number" in v.message
    assert q.judge(1).correct is True
