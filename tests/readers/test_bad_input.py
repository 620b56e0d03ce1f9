"""Bad input gets a kitlib error that names the file and the problem."""
import copy
import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from kitlib import open_capture
from kitlib.errors import BundleError, KitFileError, TraceFormatError
from kitlib.readers import files
from kitlib.readers.files import sha256_of
from kitlib.readers.ranks import load_traces
from kitlib.readers.snapshot import load_memory_snapshot
from kitlib.readers.trace import load_trace

from conftest import REF
from support.errors import refused


def _raises(path, exc, *words):
    return refused(load_trace, path, exc, *words)


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


# -- hostile files (issue 41): nothing read from outside a bundle, nothing waited on for ever,
# nothing inflated until the memory is full; each refusal a kitlib error naming the file

def _bundle_of(folder, files: dict):
    """A bundle folder whose manifest (cold_start_8step's, with ``files``) lists ``files``."""
    folder.mkdir(exist_ok=True)
    m = json.loads((REF / "cold_start_8step" / "manifest.json").read_text())
    m["files"] = files
    (folder / "manifest.json").write_text(json.dumps(m))
    return folder


def test_a_link_out_of_the_bundle_is_refused_and_one_inside_is_followed(tmp_path):
    """A ``step_times.json`` linked to a file outside the bundle was read as the bundle's,
    even with the manifest's sha256 checked (a hostile manifest lists the target's sha256,
    or none). Now refused by name, the link's target named; a link inside the folder is read."""
    outside = tmp_path / "elsewhere" / "system_file.json"
    outside.parent.mkdir()
    outside.write_text('{"step_ms_uninstrumented": [12.5, 13.0]}')
    b = _bundle_of(tmp_path / "bundle", {"step_times.json": {"sha256": sha256_of(outside)}})
    (b / "step_times.json").symlink_to(outside)
    assert sha256_of(b / "step_times.json") == sha256_of(outside)     # the sha256 alone lets it through
    with pytest.raises(BundleError) as info:
        open_capture(b).step_times()
    msg = str(info.value)
    print(msg)
    assert msg.startswith(f"{b / 'step_times.json'}: is a link to {outside.resolve()}, outside the bundle folder")
    # a system file, with no sha256 in the manifest to catch it: refused before it is read
    b2 = _bundle_of(tmp_path / "bundle2", {"step_times.json": {}})
    (b2 / "step_times.json").symlink_to("/etc/passwd")
    with pytest.raises(BundleError, match="is a link to /etc/passwd, outside the bundle folder"):
        open_capture(b2).read_json("step_times.json")
    # the manifest itself linked out of the folder
    b3 = tmp_path / "bundle3"
    b3.mkdir()
    (b3 / "manifest.json").symlink_to(b / "manifest.json")
    with pytest.raises(BundleError, match="manifest.json: is a link to .*outside the bundle folder"):
        open_capture(b3)
    # a link that stays inside the folder is followed, and the file read as written
    (b / "step_times.json").unlink()
    (b / "data").mkdir()
    shutil.copy(outside, b / "data" / "st.json")
    (b / "step_times.json").symlink_to(Path("data") / "st.json")
    assert open_capture(b).step_times() == {"step_ms_uninstrumented": [12.5, 13.0]}


#: Each reader given a path that is no regular file, in a child process (a reader that
#: opened a named pipe would wait for a writer for ever; one that read /dev/zero would fill
#: the memory): its address space capped at 2 GiB, the whole run at 60 s.
_NOT_A_FILE = r"""
import json, os, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from pathlib import Path
from kitlib.errors import KitError
from kitlib.readers.bundle import open_capture
from kitlib.readers.files import read_json_file
from kitlib.readers.nsys import load_nsys
from kitlib.readers.profiler_table import read_profiler_table
from kitlib.readers.snapshot import load_memory_snapshot
from kitlib.readers.trace import load_trace
folder, fifo = Path(sys.argv[1]), Path(sys.argv[2])
readers = {"load_trace": load_trace, "load_memory_snapshot": load_memory_snapshot, "load_nsys": load_nsys,
           "read_json_file": read_json_file, "read_profiler_table": read_profiler_table}
out = {}
for name, read in readers.items():
    for what, path in (("fifo", fifo), ("/dev/zero", "/dev/zero")):
        try:
            read(path)
            out[f"{name} {what}"] = "loaded"
        except KitError as e:
            out[f"{name} {what}"] = f"{type(e).__name__}: {e}"
        except BaseException as e:
            out[f"{name} {what}"] = f"bare {type(e).__name__}: {e}"
for what in ("manifest", "step_times"):
    try:
        cap = open_capture(folder / what)
        cap.step_times()
        out[f"bundle {what}"] = "loaded"
    except KitError as e:
        out[f"bundle {what}"] = f"{type(e).__name__}: {e}"
    except BaseException as e:
        out[f"bundle {what}"] = f"bare {type(e).__name__}: {e}"
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def not_a_file(tmp_path_factory):
    """What each reader said of a named pipe and of /dev/zero (one child process for all)."""
    import os
    import subprocess
    import sys
    d = tmp_path_factory.mktemp("not_a_file")
    fifo = d / "trace.json"
    os.mkfifo(fifo)
    _bundle_of(d / "manifest", {})
    os.mkfifo(d / "manifest" / "manifest.json.pipe")
    (d / "manifest" / "manifest.json").unlink()
    os.rename(d / "manifest" / "manifest.json.pipe", d / "manifest" / "manifest.json")
    _bundle_of(d / "step_times", {"step_times.json": {}})
    os.mkfifo(d / "step_times" / "step_times.json")
    try:
        r = subprocess.run([sys.executable, "-c", _NOT_A_FILE, str(d), str(fifo)], capture_output=True,
                           text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("a reader still waited after 60 s: it opened a named pipe or read /dev/zero")
    assert r.returncode == 0, r.stderr[-3000:]
    return d, fifo, json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("reader", ["load_trace", "load_memory_snapshot", "load_nsys", "read_json_file",
                                    "read_profiler_table"])
@pytest.mark.parametrize("what,kind", [("fifo", "a named pipe (FIFO)"), ("/dev/zero", "a character device")])
def test_what_is_not_a_regular_file_is_refused_unopened(not_a_file, reader, what, kind):
    d, fifo, said = not_a_file
    path = fifo if what == "fifo" else "/dev/zero"
    print(said[f"{reader} {what}"])
    assert said[f"{reader} {what}"] == f"KitFileError: {path}: is {kind}, not a regular file: kitlib reads " \
                                       "recordings from files only"


@pytest.mark.parametrize("which", ["manifest", "step_times"])
def test_a_named_pipe_in_a_bundle_is_refused_unopened(not_a_file, which):
    d, _, said = not_a_file
    name = "manifest.json" if which == "manifest" else "step_times.json"
    print(said[f"bundle {which}"])
    assert said[f"bundle {which}"].endswith(f"{d / which / name}: is a named pipe (FIFO), not a regular "
                                            "file: kitlib reads recordings from files only")


@pytest.mark.parametrize("read", [load_trace, load_memory_snapshot])
def test_a_gzip_bomb_is_refused_as_too_large_with_the_figures(tmp_path, monkeypatch, read):
    """Zeros streamed through gzip (about 1000:1): 50 MB in a 49 KB file, against a limit
    lowered to 10 MB (the kit's is MAX_GUNZIPPED_BYTES, 2 GiB). The message says it is too
    large to inflate (not "corrupt gzip: " with an empty reason, the MemoryError it was),
    with the limit and how much was inflated from how many compressed bytes."""
    inflated = 50_000_000
    p = tmp_path / "bomb.json.gz"
    with gzip.open(p, "wb", compresslevel=9) as f:
        for _ in range(inflated // 1_000_000):
            f.write(bytes(1_000_000))
    size = p.stat().st_size
    monkeypatch.setattr(files, "MAX_GUNZIPPED_BYTES", 10_000_000)
    with pytest.raises(KitFileError) as info:
        read(p)
    msg = str(info.value)
    stopped, read_from, of = (int(x.replace(",", "")) for x in re.search(
        r"kitlib stopped at ([\d,]+) bytes, inflated from ([\d,]+) of its ([\d,]+) compressed", msg).groups())
    print(msg, f"\nindependent: {size:,} compressed bytes inflate to {inflated:,} (gzip.open)")
    assert msg.startswith(f"{p}: too large to inflate: it holds more than 10,000,000 bytes, the limit")
    assert of == size and read_from <= size and 10_000_000 < stopped <= inflated
    assert "a gzip bomb" in msg


def test_a_rank_trace_named_by_a_list_is_a_kit_error(tmp_path):
    """A manifest whose rank entry's ``trace`` is a list raised a bare TypeError (unhashable)."""
    m = json.loads((REF / "ranks_straggler" / "manifest.json").read_text())
    m["distributed"]["ranks"][0]["trace"] = ["rank0/trace.json.gz", "x"]
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(KitFileError) as info:
        load_traces(tmp_path)
    print(info.value)
    assert str(info.value) == (f"{tmp_path / 'manifest.json'}: 'distributed.ranks' entry of rank 0 names its "
                               "trace by ['rank0/trace.json.gz', 'x'], a list, not a file name")


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
