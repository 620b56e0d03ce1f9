"""Ready for a classroom (issue 14): whose recordings a lesson reads, and says it reads;
unique run folders; the memory check before a live capture; the non-editable install;
the command that records every bundle; the answer key; the students' workspace."""
import json
import re
import warnings
from pathlib import Path

import nbformat
import pytest

import kitlib
from kitlib import course
from kitlib.errors import BundleError
from kitlib.readers import bundle

from conftest import REF, ROOT

LESSONS = sorted((ROOT / "lessons").glob("[0-9][0-9]_*.ipynb"))


@pytest.fixture
def own_dir(tmp_path, monkeypatch):
    """A KITLIB_REPLAY_DIR holding every recording (links to the kit's)."""
    own = tmp_path / "own"
    own.mkdir()
    for name in bundle.list_references():
        (own / name).symlink_to(REF / name)
    monkeypatch.setenv("KITLIB_REPLAY_DIR", str(own))
    return own


def test_a_folder_named_like_a_recording_in_the_working_directory_is_ignored(tmp_path, monkeypatch):
    """A learner's ``ncu/`` folder (here a bundle of another kind) does not replace the
    kit's ``ncu`` recording, whichever function opens it; ``./ncu`` still opens it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KITLIB_REPLAY_DIR", raising=False)
    shadow = tmp_path / "ncu"
    shadow.mkdir()
    (shadow / "notes.txt").write_text("my notes")
    bundle.write_bundle(shadow, kind="notes", name="ncu", files={"notes.txt": "a learner's notes"})
    for cap in (kitlib.open_capture("ncu"), course.replay_capture("ncu"),
                course.ncu_capture(course.replay_capture("fixed_batch"))):
        assert cap.path == REF / "ncu" and cap.kind == "ncu" and cap.found_in == "kit"
    assert kitlib.open_capture("./ncu").kind == "notes"
    assert kitlib.open_capture(shadow).found_in == "path"
    # a bare name that is no recording may still be a folder of the working directory
    shadow.rename(tmp_path / "my_notes")
    assert kitlib.open_capture("my_notes").kind == "notes"
    with pytest.raises(BundleError, match="no recording of that name.*profiler_5step"):
        kitlib.open_capture("profiler_5stepp")


def test_own_recordings_win_everywhere_and_are_labelled(own_dir, monkeypatch):
    monkeypatch.setenv("KITLIB_MODE", "replay")
    caps = [kitlib.open_capture("profiler_5step"), course.replay_capture("fixed_batch"),
            course.lesson_capture("profiler_5step"), course.lesson_nsys_capture("nsys_emit_nvtx"),
            course.ncu_capture(course.replay_capture("fixed_batch"))]
    for cap in caps:
        assert cap.path.parent == own_dir and cap.found_in == "own"
        assert cap.whose == "your own recording (H200)"
    assert caps[0].label == "profiler_5step: your own recording (H200), 2026-11-29"
    # the lesson-08 fallback for a capture without FLOP counts reads the learner's fixed_batch
    (own_dir / "fixed_batch").unlink()
    with pytest.raises(BundleError):
        bundle.find_recording("fixed_batch") if False else bundle.find_recording("no_such")
    assert bundle.find_recording("fixed_batch") == (REF / "fixed_batch", "kit")
    assert "kit's H200 reference" in course.replay_capture("fixed_batch").label
    assert any("your own recording" in x for x in bundle.opened_labels())


def test_lessons_open_recordings_only_through_the_lookup():
    """Every recording a lesson names is opened by a function that goes through
    ``find_recording``; no lesson builds a path into the kit's data folder."""
    names = set(bundle.list_references())
    opener = re.compile(r"(open_capture|lesson_capture|replay_capture|lesson_nsys_capture)\(\s*\"(\w+)\"")
    seen = set()
    for path in LESSONS:
        nb = nbformat.read(path, as_version=4)
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert "data/reference" not in code and "reference_dir" not in code, path.name
        for _, name in opener.findall(code):
            assert name in names, f"{path.name} opens {name!r}, which is no recording"
            seen.add(name)
        if "ranks as lesson" in code and "lesson.recordings(" in code:   # lesson 12, through replay_capture
            from kitlib.course import ranks
            seen |= set(ranks.REFERENCES.values())
    assert seen == names - {"how_captured"}, "every recording is used by some lesson"


def test_the_note_under_tables_and_figures(own_dir, tmp_path):
    """In a Jupyter kernel, each table and figure carries the note naming the recordings its
    cell draws on: the ones the cell names (a dict entry read as ``runs["nccl"]`` names only
    that entry), those of a table made in an earlier cell, the public NCCL pair as itself;
    a cell that names none falls back to every recording opened. The inline backend draws
    the figure after the note is written, and the figure's text output repeats the note;
    ``print_table`` prints it under a printed table."""
    from nbclient import NotebookClient
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in [
        "from kitlib import course, plots\ncap = course.replay_capture('profiler_5step')\n"
        "kit = course.replay_capture('fixed_batch')",
        "import pandas as pd\nsteps = pd.DataFrame({'step_ms': cap.step_times()['step_ms_uninstrumented']})\nsteps",
        "fig = plots.plot_step_times(cap.step_times())",
        "print([t.get_text() for t in fig.texts])",
        "pd.Series(kit.files).head(2)",
        "steps.describe()",
        "pd.DataFrame({'facts': [1, 2]})",
        "from kitlib.course import ranks\nfrom kitlib.analyses import collectives as coll\n"
        "runs = {'nccl': kitlib.load_traces(ranks.public_nccl_dir(), partial=True), 'cap': cap}",
        "coll.comm_overlap(runs['nccl'])",
        "from kitlib.course.labels import print_table\nprint_table(steps.head(3))",
    ]])
    nb.cells[0].source = "import kitlib\n" + nb.cells[0].source
    (own_dir / "fixed_batch").unlink()
    import os
    env_mpl = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    try:
        NotebookClient(nb, timeout=120, kernel_name="python3", shutdown_kernel="immediate",
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    finally:
        if env_mpl is None:
            os.environ.pop("MPLBACKEND")
        else:
            os.environ["MPLBACKEND"] = env_mpl
    own = "profiler_5step: your own recording (H200), 2026-11-29"
    kit = "fixed_batch: kit's H200 reference, 2026-11-29"
    public = "public NCCL pair (HTA's sampled A100 run)"

    def printed(i):
        # the kernel sends what is printed every 0.2 s, so one print can arrive in pieces
        return "".join(o["text"] for o in nb.cells[i].outputs if o.get("name") == "stdout")

    def note(i):
        data = nb.cells[i].outputs[-1]["data"]
        assert data["text/plain"].count("\n[data: ") == 1
        # a note longer than a notebook's line goes on, after a space, on the next (issue 40)
        return data["text/plain"].rsplit("\n[data: ", 1)[1].rstrip("]").replace("\n ", " ")
    table = nb.cells[1].outputs[0]["data"]
    assert "<table" in table["text/html"] and f"data: {own}</div>" in table["text/html"]
    assert note(1) == own
    assert "image/png" in nb.cells[2].outputs[0]["data"] and note(2) == own
    assert printed(3) == str([f"data: {own}"]) + "\n"      # drawn under the figure
    assert note(4) == kit
    assert note(5) == own                      # a table made in an earlier cell keeps its recording
    assert note(6) == f"{own}; {kit}"          # names none: every recording opened
    assert note(8) == public                   # runs['nccl'] only, not runs['cap']
    assert printed(9).endswith(f"\n[data: {own}]\n")


def test_run_folders_are_unique_within_a_second(tmp_path):
    names = {course.unique_run_dir(tmp_path, "lesson_profiler_5step").name for _ in range(50)}
    assert len(names) == 50 and all(re.fullmatch(r"lesson_profiler_5step_\d{8}-\d{6}_[0-9a-f]{6}", n) for n in names)
    planned = course.unique_run_dir(tmp_path / "runs", "x", create=False)
    assert not planned.exists() and planned.parent.is_dir()


def test_reference_peaks_are_the_recordings(ref_trace):
    """The memory check's reference figures are profiler_5step's allocator peaks."""
    m = ref_trace("profiler_5step").memory
    m = m[m["device_type"] == 1]
    assert int(m["total_reserved"].max()) == course.REFERENCE_PEAK_RESERVED_BYTES
    assert int(m["total_allocated"].max()) == course.REFERENCE_PEAK_ALLOCATED_BYTES


def test_memory_check_before_going_live(monkeypatch):
    gib = 2 ** 30
    big = course.live_memory_plan(free_bytes=80 * gib)
    assert big["batch_size"] == 128 and "fits" in big["message"]
    # the reference needs its 13.35 GB reserved and more: 12 GiB free is not enough
    assert course.live_memory_plan(free_bytes=12 * gib)["need_bytes"] > course.REFERENCE_PEAK_RESERVED_BYTES
    small = course.live_memory_plan(free_bytes=8 * gib)
    assert small["batch_size"] == 64 and "batch 64 instead" in small["message"]
    assert course.live_memory_plan(free_bytes=4 * gib)["batch_size"] == 32
    tiny = course.live_memory_plan(free_bytes=1 * gib)
    assert tiny["batch_size"] is None and "too little" in tiny["message"]
    # a 1 GiB GPU: the lesson falls back to the recording, and says so
    monkeypatch.delenv("KITLIB_REPLAY_DIR", raising=False)
    with pytest.warns(UserWarning, match="too little.*Using the recording profiler_5step"):
        cap = course.lesson_capture("profiler_5step", live=True, free_bytes=1 * gib, batch_size=128, image_size=224)
    assert cap.origin == "recorded" and cap.found_in == "kit"


def test_measured_results_are_reused(tmp_path, monkeypatch):
    """A live measurement is kept as a timing bundle and read back on the next run."""
    from kitlib.capture import experiments
    monkeypatch.setenv("KITLIB_RUNS", str(tmp_path))
    calls = []

    def fake(**kw):
        calls.append(kw)
        return {"step_ms_uninstrumented": [1.5, 1.25]}
    monkeypatch.setattr(experiments, "overhead_series", fake)
    a = course.measured("overhead_series", steps=2, warmup=1)
    b = course.measured("overhead_series", steps=2, warmup=1)
    c = course.measured("overhead_series", steps=3, warmup=1)
    assert a == b == c == {"step_ms_uninstrumented": [1.5, 1.25]} and len(calls) == 2
    (saved,) = [d for d in tmp_path.iterdir() if json.loads((d / "manifest.json").read_text())
                ["recipe"]["arguments"] == {"steps": 2, "warmup": 1}]
    assert kitlib.open_capture(saved).kind == "timing"


def test_a_non_editable_install_ships_the_recordings(tmp_path):
    """``pip install .`` (here: the wheel it would install, unpacked) holds every kitlib
    module and every reference file, and replays a recording away from the checkout."""
    import importlib.util
    import os
    import shutil
    import subprocess
    import sys
    import zipfile
    # built from a copy of what the wheel is made of: setuptools writes build/ and
    # *.egg-info beside pyproject.toml, and a build/lib left in the checkout would ship
    # modules deleted since (or hide a missing one)
    src = tmp_path / "src"
    junk = shutil.ignore_patterns("__pycache__", "*.egg-info", "*.pyc")
    shutil.copytree(ROOT / "kitlib", src / "kitlib", ignore=junk)
    shutil.copytree(REF, src / "data" / "reference", ignore=junk)
    shutil.copytree(ROOT / "data" / "clinic", src / "data" / "clinic", ignore=junk)
    for f in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / f, src / f)
    had_build = (ROOT / "build").exists()
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(src)]
    if importlib.util.find_spec("setuptools"):
        cmd.insert(5, "--no-build-isolation")        # no download when setuptools is here
    subprocess.run(cmd, check=True, capture_output=True, timeout=120, cwd=tmp_path)
    assert (ROOT / "build").exists() == had_build    # the checkout is left as it was
    (wheel,) = (tmp_path / "dist").glob("kitlib-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    want = {p.relative_to(ROOT).as_posix() for p in (ROOT / "kitlib").rglob("*.py")}
    want |= {"kitlib/reference_data/" + p.relative_to(REF).as_posix() for p in REF.rglob("*") if p.is_file()}
    clinic = ROOT / "data" / "clinic"
    want |= {"kitlib/clinic_data/" + p.relative_to(clinic).as_posix() for p in clinic.rglob("*") if p.is_file()}
    assert want <= names, sorted(want - names)[:5]
    shipped, want_py = ({n for n in x if n.endswith(".py")} for x in (names, want))
    assert shipped == want_py, sorted(shipped ^ want_py)[:5]      # and no module deleted since
    zipfile.ZipFile(wheel).extractall(tmp_path / "site")
    env = {k: v for k, v in os.environ.items() if k not in ("KITLIB_REFERENCE", "KITLIB_REPLAY_DIR")}
    env["PYTHONPATH"] = str(tmp_path / "site")
    probe = ("import kitlib; c = kitlib.open_capture('profiler_5step'); c.file('trace.json.gz'); "
             "print(kitlib.__file__); print(c.path); print(c.label); "
             "from kitlib.course import ranks; print(sorted(p.name for p in ranks.public_nccl_dir().glob('*.gz'))); "
             "from kitlib.course import clinic_signs as cs; print(cs.clinic_folder()); "
             "print(cs.open_bundle(cs.clinic_folder() / 'case_b' / 'before').traces[1].path)")
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=60, check=True).stdout.splitlines()
    assert out[0] == str(tmp_path / "site" / "kitlib" / "__init__.py")
    assert out[1] == str(tmp_path / "site" / "kitlib" / "reference_data" / "profiler_5step")
    assert out[2] == "profiler_5step: kit's H200 reference, 2026-11-29"
    # lesson 12's public NCCL pair ships beside the recordings
    assert out[3] == str(["hta_2024-03_nccl_sampled_rank0.json.gz", "hta_2024-03_nccl_sampled_rank1.json.gz"])
    # lesson 13's clinic too, the two-rank case's rank folders included
    assert out[4] == str(tmp_path / "site" / "kitlib" / "clinic_data" / "cpu")
    assert out[5].startswith(str(tmp_path / "site" / "kitlib" / "clinic_data" / "cpu" / "case_b" / "before"))


def test_without_the_recordings_the_error_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setenv("KITLIB_REFERENCE", str(tmp_path / "nowhere"))
    monkeypatch.delenv("KITLIB_REPLAY_DIR", raising=False)
    with pytest.raises(BundleError, match="not installed here.*python -m pip install .*KITLIB_REFERENCE"):
        course.replay_capture("profiler_5step")


def course_set_cmd(straggler):
    from kitlib.capture.distributed import torchrun_command
    return torchrun_command("out", straggler)


def test_record_course_plans_every_bundle_the_lessons_replay(tmp_path, capsys):
    """The plan names one bundle per recording the lessons read, under ``--out``; on a
    machine without Nsight tools those steps are skipped and say why; without a GPU the
    command refuses to record (the CPU try-out is ``--device cpu``)."""
    from kitlib.capture import course_set
    from kitlib.course.cli import main
    out = tmp_path / "course_gpu"
    steps = course_set.plan(out, nsys=str(tmp_path / "no-nsys"), ncu=None)
    assert {s.name for s in steps} == set(bundle.list_references()) - {"how_captured"}
    assert [s.name for s in steps][:3] == ["profiler_5step", "fixed_batch", "cold_start_8step"]
    # the torch.profiler and torchrun bundles run here; the Nsight ones need their tools
    assert [s.name for s in steps if s.runs] == ["profiler_5step", "fixed_batch", "cold_start_8step",
                                                 "ranks_balanced", "ranks_straggler"]
    assert "--straggler-rank" not in course_set_cmd(False) and "--straggler-rank" in course_set_cmd(True)
    assert "memory snapshot" in steps[0].how and "FlopCounterMode" in steps[1].how
    assert " ".join(course_set.NCU_OPTIONS) == json.loads((REF / "ncu" / "manifest.json").read_text())[
        "recipe"]["command"].removeprefix("ncu ")
    assert main(["record-course", "--out", str(out), "--dry-run", "--nsys", str(tmp_path / "no-nsys")]) == 0
    text = capsys.readouterr().out
    assert f"record-course into {out}" in text and "nsys_8step        skip (" in text
    assert not out.exists()
    import torch
    if not torch.cuda.is_available():
        assert main(["record-course", "--out", str(out)]) == 2
        assert "torch sees no CUDA GPU" in capsys.readouterr().err and not out.exists()


def parse_key(text: str) -> dict:
    """``{lesson: {question key: (answer as the key prints it, why)}}`` from the Markdown of
    ``python -m kitlib answers``; a lesson without questions (01) maps to ``{}``."""
    out, lesson = {}, None
    for m in re.finditer(r"^## Lesson (\d\d)|^- \*\*(\w+)\*\* \(\w+\): .*\n  - answer: `(.*?)`(?: \(accepted within .*\))?\n  - why: (.*)$", text, re.M):
        if m.group(1):
            lesson = out.setdefault(m.group(1), {})
        else:
            lesson[m.group(2)] = (m.group(3), m.group(4))
    return out


def given_away(nb, key: dict) -> list:
    """Where a lesson notebook's source gives away an answer of the key: an answer cell
    filled in (``answer = <anything but None>``, or ``ex.check(<key>, <a value>)``), a
    ``.reveal(`` call (it prints the answer when the cell runs), or any answer of ``key`` in
    the form the key prints it (```answer: `<value>` ```) or its explanation, word for word."""
    found = []
    for c in nb.cells:
        if c.cell_type == "code":
            found += [f"answer = {v}" for v in re.findall(r"^\s*answer\s*=\s*([^#\n]*?)\s*(?:#.*)?$", c.source, re.M)
                      if v != "None"]
            found += [f"check({k}, {v})" for k, v in re.findall(r"\.check\(\s*([^,()]+?)\s*,\s*([^)]*?)\s*\)", c.source)
                      if v not in ("answer", "None")]
            found += [".reveal(" for _ in re.findall(r"\.reveal\(", c.source)]
    source = "\n".join(c.source for c in nb.cells)
    for lesson, questions in key.items():
        for q, (answer, why) in questions.items():
            found += [f"{lesson}/{q}: {form[:50]}" for form in (f"answer: `{answer}`", why) if form in source]
    return found


@pytest.fixture(scope="module")
def kit_key(built_lessons):
    """The whole answer key from the kit's recordings (no KITLIB_REPLAY_DIR), parsed:
    ``answer_key`` as ``python -m kitlib answers`` runs it, on the questions the session
    has built once (``built_lessons``: the same builders, each lesson with the recordings
    it opened)."""
    from unittest import mock
    from kitlib.course import cli
    with mock.patch.object(cli, "_builders", lambda: {n: (lambda n=n: built_lessons[n]) for n in built_lessons}):
        text = cli.answer_key()
    return text, parse_key(text)


def test_answer_key_from_the_recordings_in_use(own_dir, capsys):
    """``python -m kitlib answers`` computes the key from the recordings the lessons would
    read, and says which; lesson 01 (the learner's own CPU run) says so in one line."""
    from kitlib.course.cli import LESSON01_LINE, main
    assert main(["answers", "--lesson", "02", "--lesson", "01", "--lesson", "12"]) == 0
    key = capsys.readouterr().out
    assert "data: profiler_5step: your own recording (H200), 2026-11-29" in key
    assert "data: ranks_straggler: your own recording (CPU), 2026-11-30; public NCCL pair (HTA's sampled A100 run)\n" in key
    assert f"## Lesson 01\n\n{LESSON01_LINE}\n" in key
    assert list(parse_key(key)) == ["02", "01", "12"]
    assert main(["answers", "--lesson", "42"]) == 2


def test_answer_key_holds_every_lesson_and_every_question_the_lessons_ask(kit_key):
    text, key = kit_key
    assert list(key) == [p.name[:2] for p in LESSONS], "every lesson has its section, in order"
    assert key["01"] == {} and "ex.reveal" in text
    for path in LESSONS:
        nb = nbformat.read(path, as_version=4)
        asked = set(re.findall(r"\.check\(\s*\"(\w+)\"", "\n".join(c.source for c in nb.cells)))
        if path.name[:2] != "01":
            assert asked <= set(key[path.name[:2]]), f"{path.name}: questions missing from the key"
    assert "np.float64(" not in text, "answers print as plain numbers"


def test_answer_key_agrees_with_independently_known_figures(kit_key):
    """Lesson 02: data/reference/PROVENANCE.md (the first convolution's three launches, the
    kernel of the third) and the raw-JSON queue delay of test_golden_derived's
    test_queue_delay_of_the_first_convolution_from_raw_json. Lesson 12: PROVENANCE.md
    (rank 1 late by 525.6 ms, 82 % of rank 0's collective time waiting) and the hidden
    fraction of rank 0's NCCL kernels worked out here from the public pair's raw JSON."""
    import gzip
    _, key = kit_key
    answers = {n: {q: a for q, (a, _) in qs.items()} for n, qs in key.items()}
    # device_time_us: the three kernels 51.648 + 3.457 + 732.513 µs (PROVENANCE.md's 732.513 µs kernel and the raw
    # JSON, tests/lessons/test_answers_l02.py); the transfer's aten::add_ from fixed_batch's raw JSON there too
    assert answers["02"] == {"launch_count": "3", "kernel_after_op": "yes", "longest_kernel_launch": "3",
                             "launch_to_kernel_id": "'correlation'", "device_time_us": "787.618",
                             "add_host_and_device": "no", "queue_delay_us": "844.61",
                             "kernel_operator_transfer": "'aten::add_'"}
    ev = json.loads(gzip.decompress((REF / "public-traces" / "hta_2024-03_nccl_sampled_rank0.json.gz").read_bytes()))
    kernels = [(e["ts"], e["ts"] + e["dur"], e["name"].startswith(("ncclKernel_", "ncclDevKernel_")))
               for e in ev["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]

    def union(spans):
        total, end = 0.0, float("-inf")
        for a, b in sorted(spans):
            if b > end:
                total, end = total + b - max(a, end), b
        return total
    comm = [(a, b) for a, b, c in kernels if c]
    comp = [(a, b) for a, b, c in kernels if not c]
    hidden = (union(comm) + union(comp) - union(comm + comp)) / union(comm)
    # excerpt_late_ms: rank 1's first gloo:all_reduce of ProfilerStep#2 in ranks_balanced starts
    # 125.815 ms after rank 0's (raw JSON, tests/lessons/test_answers_l12.py)
    assert answers["12"] == {"both_ranks_slower": "'both ranks'", "straggler_rank": "1", "late_ms": "525.6",
                             "fast_rank_wait_share": "0.82", "what_to_fix": "'fix the straggler'",
                             "excerpt_late_ms": "125.815", "nccl_hidden_fraction": repr(round(hidden, 3)),
                             # issue 29's four, each worked out from the raw JSON in tests/lessons/test_answers_l12.py
                             "end_gap_ms": "62.789", "clock_offset": "'all about 5 ms apart'",
                             "nccl_exposed_share": "0.882", "gloo_exposed_wait_share": "0.979",
                             # the robust estimate (tests/lessons/test_answers_l12.py, from the raw JSON)
                             "straggler_part": "'between operators'", "delay_excess_ms": "470.7"}
    assert "## Lesson 12" in kit_key[0] and "data: ranks_straggler: kit's CPU reference, 2026-11-30" in kit_key[0]


def test_no_lesson_stores_an_answer(kit_key):
    """No lesson notebook fills in an answer cell, reveals an answer, or holds any answer of
    the key as the key prints it; the same check finds each of these in a lesson doctored so."""
    _, key = kit_key
    for path in LESSONS:
        assert given_away(nbformat.read(path, as_version=4), key) == [], path.name
    nb = nbformat.read(next(p for p in LESSONS if p.name.startswith("02_")), as_version=4)
    cell = next(c for c in nb.cells if 'ex.check("launch_count", answer)' in c.source)
    cell.source = cell.source.replace("answer = None", "answer = 3")
    nb.cells.append(nbformat.v4.new_markdown_cell("- answer: `844.61`"))
    nb.cells.append(nbformat.v4.new_code_cell('ex.check("queue_delay_us", 844.61)\nex.reveal("launch_count")'))
    nb.cells.append(nbformat.v4.new_markdown_cell(f"Why: {key['12']['late_ms'][1]}"))
    got = given_away(nb, key)
    assert got[:3] == ["answer = 3", "check(\"queue_delay_us\", 844.61)", ".reveal("]
    assert any(g.startswith("02/queue_delay_us: answer: `844.61`") for g in got)
    assert any(g.startswith("12/late_ms: median of the steps") for g in got)


def test_workspace_copies_lessons_and_keeps_the_students_answers(tmp_path, capsys):
    from kitlib.course.cli import main
    ws = tmp_path / "ws"
    assert main(["workspace", "--dest", str(ws)]) == 0
    assert sorted(p.name for p in ws.iterdir()) == [p.name for p in LESSONS]
    mine = ws / LESSONS[2].name
    mine.write_text("my answers")
    assert main(["workspace", "--dest", str(ws)]) == 0
    assert mine.read_text() == "my answers"
    assert f"0 lessons copied, {len(LESSONS)} kept" in capsys.readouterr().out.splitlines()[-1]
    assert "/workspace/" in (ROOT / ".gitignore").read_text().splitlines()


def test_info_says_which_recording_each_name_resolves_to(own_dir, capsys):
    from kitlib.course.cli import main
    (own_dir / "ncu").unlink()
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    assert f"looked up in KITLIB_REPLAY_DIR={own_dir}, then the kit's {REF}; never the working directory" in text
    assert re.search(rf"\n  profiler_5step\s+torch_profiler\s+your own recording \(H200\), 2026-11-29: "
                     rf"{re.escape(str(own_dir))}/profiler_5step  \[", text)
    assert re.search(rf"\n  ncu\s+ncu\s+kit's H200 reference, 2026-11-29: {re.escape(str(REF))}/ncu  \[", text)


def test_found_in_by_place_compares_whole_folder_names(tmp_path, monkeypatch):
    """A path is the learner's ("own") only inside $KITLIB_REPLAY_DIR itself, the kit's
    only inside the reference folder; a sibling whose name merely starts the same
    (``own2`` beside ``own``) is neither, and links are not followed."""
    own = tmp_path / "own"
    (own / "profiler_5step").mkdir(parents=True)
    (tmp_path / "own2" / "profiler_5step").mkdir(parents=True)
    (own / "linked").symlink_to(REF / "profiler_5step")
    monkeypatch.setenv("KITLIB_REPLAY_DIR", str(own))
    place = bundle._found_in_by_place
    assert place(own / "profiler_5step") == "own"
    assert place(own / "linked") == "own"                        # a link in the learner's folder stays theirs
    assert place(tmp_path / "own2" / "profiler_5step") == "path"
    assert place(REF / "profiler_5step") == "kit"
    assert place(Path(str(REF) + "_copy") / "profiler_5step") == "path"
    assert place(tmp_path) == "path"                              # the folder above is not inside
    monkeypatch.delenv("KITLIB_REPLAY_DIR")
    assert place(own / "profiler_5step") == "path" and place(REF / "ncu") == "kit"
