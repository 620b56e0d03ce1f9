"""What the command line says when it refuses an output path (issue 27, "small things").

A refused ``--out`` is all a learner reads: the CPU note about the profiler's silenced
messages and the run's plan come only once the folder is accepted, and no message names
an internal parameter (``out_dir``). ``answers --out`` refuses a folder or a missing
parent in words, before the key is worked out, never with a traceback. No capture runs
here: every case is refused before one starts.
"""
from __future__ import annotations

import contextlib
import io

import pytest

from kitlib.capture import cli
from kitlib.course import cli as course_cli

CPU = ["--device", "cpu", "--batch-size", "2", "--image-size", "32", "--workers", "0", "--no-progress"]


def _main(main, argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture
def no_capture(monkeypatch):
    """A capture that would start is a failure here: every case must be refused first."""
    from kitlib.capture import recipes

    def refuse(*a, **k):
        raise AssertionError("the capture started")
    monkeypatch.setattr(recipes, "capture", refuse)


def test_a_refused_out_folder_is_all_profile_says(no_capture, tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    (full / "notes.txt").write_text("mine")
    rc, out, err = _main(cli.main, ["profile", "--out", str(full), *CPU])
    assert rc == 2 and out == ""                        # no CPU note, no plan before the refusal
    assert err.startswith(f"kitlib: error: {full}: is not empty (notes.txt)") and err.count("\n") == 1
    assert "out_dir" not in err and "Traceback" not in err
    assert sorted(p.name for p in full.iterdir()) == ["notes.txt"]


def test_an_unwritable_out_names_the_option_not_the_parameter(no_capture, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    rc, out, err = _main(cli.main, ["profile", "--out", str(blocker / "run"), *CPU])
    assert rc == 2 and out == ""
    assert "choose a writable --out folder, or set KITLIB_RUNS" in err and "out_dir" not in err


def test_an_unwritable_runs_folder_names_the_option_not_the_parameter(no_capture, tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    monkeypatch.setenv("KITLIB_RUNS", str(blocker / "runs"))
    rc, out, err = _main(cli.main, ["profile", *CPU])
    assert rc == 2 and out == ""
    assert "is not writable: set KITLIB_RUNS to a writable folder or pass --out" in err
    assert "out_dir" not in err


def test_the_early_check_leaves_an_accepted_folder_as_it_was(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    cli._check_out(empty, "light")
    assert empty.is_dir() and list(empty.iterdir()) == []        # no lock file left behind
    new = tmp_path / "new" / "run"
    cli._check_out(new, "light")
    assert not new.exists()                                       # made for the check, removed again


def test_the_cpu_note_still_comes_first_once_the_folder_is_accepted(tmp_path, monkeypatch):
    """An accepted folder: the CPU note, then the plan, then the capture (stopped here)."""
    from kitlib.capture import recipes

    def stop(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(recipes, "capture", stop)
    rc, out, err = _main(cli.main, ["profile", "--out", str(tmp_path / "run"), *CPU])
    assert rc == 130
    assert out.index("two messages of the profiler's own") < out.index("kitlib profile: ResNet-50 on cpu")


@pytest.mark.parametrize("argv", [["workspace", "--dest"], ["record-course", "--device", "cpu", "--out"],
                                  ["record-clinic", "--out"]], ids=lambda a: a[0])
@pytest.mark.parametrize("where", ["a file", "below a file"])
def test_a_file_where_a_folder_goes_is_refused_in_one_line(tmp_path, argv, where):
    """Issue 41: ``workspace --dest``, ``record-course --out`` and ``record-clinic --out``
    naming a file (or a folder below one) ended in a FileExistsError or NotADirectoryError
    traceback. Refused in one line naming the option and the path; the file left as it was."""
    blocker = tmp_path / "notes.txt"
    blocker.write_text("mine")
    path = blocker if where == "a file" else blocker / "sub"
    rc, _, err = _main(course_cli.main, [*argv, str(path)])
    print(err)
    want = ("is a file, not a folder; give a folder" if where == "a file"
            else f"cannot create the folder ({blocker} is a file, not a folder)")
    option = f"{argv[0]} {argv[-1]}"
    assert rc == 2 and err == f"kitlib: error: {option} {path}: {want}\n"
    assert blocker.read_text() == "mine"


_DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("text,words", [
    ('{"device": "cpu",', "invalid JSON at line 1, column 18 (byte 17) (the file ends there: it looks cut off)"),
    (_DEEP, "invalid JSON at line 1, column 1026 (byte 1025): the values nest deeper than 1024 levels"),
    ('[{"device": "cpu"}]', "not a clinic index: record-clinic writes a JSON object"),
    ('{"device": "cpu", "cases": ["case_a"]}', "not a clinic index"),
], ids=["cut off", "100,000 deep", "a list", "cases a list"])
def test_retime_refuses_a_bad_clinic_index_in_one_line(tmp_path, text, words):
    """Issue 41: ``record-clinic --retime`` on a malformed or 100,000-deep ``clinic.json``
    ended in a JSONDecodeError, RecursionError or AttributeError traceback."""
    (tmp_path / "clinic.json").write_text(text)
    rc, _, err = _main(course_cli.main, ["record-clinic", "--retime", str(tmp_path)])
    print(err[:300])
    assert rc == 2 and err.startswith(f"kitlib: error: {tmp_path / 'clinic.json'}: {words}")
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("case", ["folder", "missing parent", "file as parent"])
def test_answers_out_is_refused_in_words_before_the_key_is_worked_out(case, tmp_path, monkeypatch):
    worked = []
    monkeypatch.setattr(course_cli, "answer_key", lambda lessons=None: worked.append(1) or "# Answer key")
    (tmp_path / "a_file").write_text("x")
    out = {"folder": tmp_path, "missing parent": tmp_path / "nope" / "key.md",
           "file as parent": tmp_path / "a_file" / "key.md"}[case]
    rc, _, err = _main(course_cli.main, ["answers", "--lesson", "11", "--out", str(out)])
    assert rc == 2 and worked == []
    assert err.startswith(f"kitlib: error: --out {out}: ") and "Traceback" not in err
    want = {"folder": "is a folder; give the answer key's file name",
            "missing parent": "does not exist", "file as parent": "is not a folder"}[case]
    assert want in err


def test_answers_out_writes_the_key(tmp_path, monkeypatch):
    monkeypatch.setattr(course_cli, "answer_key", lambda lessons=None: "# Answer key")
    rc, out, _ = _main(course_cli.main, ["answers", "--out", str(tmp_path / "key.md")])
    assert rc == 0 and (tmp_path / "key.md").read_text() == "# Answer key\n" and "written to" in out


@pytest.mark.parametrize("existing", ["notebook", "link to a notebook"])
def test_answers_out_never_replaces_an_existing_file(existing, tmp_path, monkeypatch):
    """Issue 41: ``answers --out`` replaced a learner's lesson 13 notebook with the key."""
    worked = []
    monkeypatch.setattr(course_cli, "answer_key", lambda lessons=None: worked.append(1) or "# Answer key")
    nb = tmp_path / "13_clinic.ipynb"
    mine = '{"cells": [{"source": "my work"}]}'
    nb.write_text(mine)
    out = nb
    if existing == "link to a notebook":
        out = tmp_path / "key.md"
        out.symlink_to(nb)
    rc, printed, err = _main(course_cli.main, ["answers", "--lesson", "11", "--out", str(out)])
    assert rc == 2 and worked == [] and printed == ""
    assert err.startswith(f"kitlib: error: {out}: already exists; answers --out never replaces a file")
    assert "Traceback" not in err
    assert nb.read_text() == mine                                   # the learner's work is kept
