"""The main job loses no data and explains itself (issue 17).

Two runs given one output folder, unwritable folders, Ctrl-C and SIGTERM, a Food-101
folder that names a missing image, and the command-line texts on a CPU. Live runs are
tiny CPU captures (batch 2, 32 px) in a private cache; the whole file takes about a
minute on two cores.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from PIL import Image

from kitlib.capture import cli, nsys_recipes
from kitlib.capture.recipes import LOCK_NAME, claim_out
from kitlib.capture.workload import (NUM_CLASSES, Workload, WorkloadConfig, make_dataset,
                                     make_loader, synthetic_dataset)
from kitlib.errors import KitFileError

from conftest import REF

TINY = ["--device", "cpu", "--batch-size", "2", "--image-size", "32", "--synthetic-images",
        str(NUM_CLASSES), "--workers", "1", "--pre-steps", "0", "--timing-steps", "0",
        "--no-progress"]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """A private cache with the synthetic dataset made once, and no Food-101."""
    mp = pytest.MonkeyPatch()
    cache = tmp_path_factory.mktemp("kitlib_cache")
    mp.setenv("KITLIB_CACHE", str(cache))
    mp.delenv("KITLIB_FOOD101", raising=False)
    synthetic_dataset(NUM_CLASSES, progress=False)
    yield cache
    mp.undo()


def _main(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    return rc, out.getvalue(), err.getvalue()


def _digest(folder: Path) -> dict:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(folder.iterdir())}


@pytest.fixture
def no_capture(monkeypatch):
    """Fail the test if a capture starts: refusals must come before any work."""
    import kitlib.capture.recipes as recipes

    def boom(*a, **k):
        raise AssertionError("the capture started although the output folder was refused")
    monkeypatch.setattr(recipes, "build_workload", boom)


# --------------------------------------------------------------------------- one folder, two runs
def test_second_run_into_a_finished_bundle_is_refused_and_the_bundle_kept(env, tmp_path,
                                                                           monkeypatch):
    out = tmp_path / "same"
    rc, text, _ = _main(["profile", "--recipe", "light", "--steps", "1", "--out", str(out), *TINY])
    assert rc == 0 and (out / "manifest.json").is_file()
    before = _digest(out)
    assert LOCK_NAME not in before                   # the lock goes once the bundle is written
    import kitlib.capture.recipes as recipes
    monkeypatch.setattr(recipes, "build_workload", lambda *a, **k: pytest.fail("capture started"))
    rc, _, err = _main(["profile", "--recipe", "light", "--steps", "1", "--out", str(out), *TINY])
    assert rc == 2
    assert f"kitlib: error: {out}: already holds a capture bundle" in err
    assert _digest(out) == before


def test_a_run_in_progress_holds_its_folder(env, tmp_path, no_capture):
    out = tmp_path / "busy"
    first = claim_out(out, "light")                  # run 1, still writing
    rc, _, err = _main(["profile", "--recipe", "light", "--out", str(out), *TINY])
    assert rc == 2 and f"{out}: another kitlib run is writing a bundle here" in err
    # run 1 fails: it removes what it wrote, never a file it did not write
    (out / "trace.json.gz").write_bytes(b"run 1's trace")
    (out / "step_times.json").write_text("{}")
    (out / "notes.txt").write_text("a learner's notes, written during run 1")
    first.abandon()
    assert sorted(x.name for x in out.iterdir()) == ["notes.txt"]


def test_runs_started_together_get_folders_of_their_own(tmp_path, monkeypatch):
    # Default folders are named by the second: two runs in one second must not share one.
    monkeypatch.setenv("KITLIB_RUNS", str(tmp_path / "runs"))
    import kitlib.capture.recipes as recipes
    names = iter(["same_light", "same_light", "same_light-2"])   # the 2nd run computed the
    monkeypatch.setattr(recipes, "default_out_dir",                # name before the 1st made it
                        lambda name: tmp_path / "runs" / next(names))
    a, b = claim_out(None, "light"), claim_out(None, "light")
    assert a.path != b.path and (a.path / LOCK_NAME).is_file() and (b.path / LOCK_NAME).is_file()
    assert [a.path.name, b.path.name] == ["same_light", "same_light-2"]


def test_a_failed_run_removes_its_own_new_folder(tmp_path):
    out = tmp_path / "new"
    claim = claim_out(out, "light")
    (out / "key_averages.json").write_text("{}")
    claim.abandon()
    assert not out.exists()


def test_a_folder_with_other_files_is_refused(tmp_path, no_capture, env):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("do not touch")
    rc, _, err = _main(["profile", "--recipe", "light", "--out", str(out), *TINY])
    assert rc == 2 and "is not empty (thesis.tex)" in err and "new or empty folder" in err
    assert sorted(x.name for x in out.iterdir()) == ["thesis.tex"]


# --------------------------------------------------------------------------- unwritable places
def test_unwritable_out_is_refused_before_the_capture(env, no_capture, tmp_path):
    rc, _, err = _main(["profile", "--out", "/sys/kitlib_run", *TINY])     # sysfs: EPERM, even for root
    assert rc == 2
    assert "kitlib: error: /sys/kitlib_run: cannot create the bundle folder" in err
    assert "choose a writable --out" in err and "Traceback" not in err
    f = tmp_path / "a_file"
    f.write_text("x")
    rc, _, err = _main(["profile", "--out", str(f / "run"), *TINY])
    assert rc == 2 and f"{f} is a file, not a folder" in err


def test_unwritable_runs_folder_is_refused_before_the_capture(env, no_capture, monkeypatch):
    monkeypatch.setenv("KITLIB_RUNS", "/sys/kitlib_runs")
    rc, _, err = _main(["profile", *TINY])
    assert rc == 2 and "the default runs folder /sys/kitlib_runs is not writable" in err
    assert "set KITLIB_RUNS" in err


def test_read_only_empty_out_is_refused(env, no_capture, tmp_path, monkeypatch):
    out = tmp_path / "ro"
    out.mkdir()
    if os.geteuid() != 0:
        out.chmod(0o500)
    else:                                           # root writes anywhere: refuse as the OS would
        real = os.open

        def deny(path, *a, **k):
            if str(path).endswith(LOCK_NAME):
                raise PermissionError(13, "Permission denied")
            return real(path, *a, **k)
        monkeypatch.setattr(os, "open", deny)
    rc, _, err = _main(["profile", "--out", str(out), *TINY])
    assert rc == 2 and "cannot write into the bundle folder (Permission denied)" in err
    assert out.is_dir()                              # it was there before: it stays


# --------------------------------------------------------------------------- signals
def _run_and_signal(out: Path, sig, cache) -> tuple:
    cmd = [sys.executable, "-m", "kitlib", "profile", "--recipe", "light", "--steps", "50",
           "--out", str(out), *TINY]
    env = dict(os.environ, KITLIB_CACHE=str(cache), PYTHONUNBUFFERED="1")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                         start_new_session=True)
    lines, started = [], threading.Event()

    def read():
        for line in p.stdout:
            lines.append((time.monotonic(), line.rstrip()))
            if line.startswith("kitlib profile:"):
                started.set()
    t = threading.Thread(target=read, daemon=True)
    t.start()
    assert started.wait(120), lines
    time.sleep(4)                                   # into the DataLoader and the profiler
    assert p.poll() is None, lines
    sent = time.monotonic()
    if sig == signal.SIGINT:
        os.killpg(p.pid, sig)                       # Ctrl-C reaches the whole process group
    else:
        p.send_signal(sig)
    try:
        rc = p.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)
        t.join(10)
        pytest.fail(f"still running 60 s after {sig!r}; its output:\n"
                    + "\n".join(x for _, x in lines[-40:]))
    t.join(10)
    return rc, time.monotonic() - sent, [(round(ts - sent, 1), x) for ts, x in lines if ts >= sent]


def test_ctrl_c_acts_promptly_says_so_and_keeps_nothing(env, tmp_path):
    out = tmp_path / "interrupted"
    rc, took, after = _run_and_signal(out, signal.SIGINT, env)
    text = "\n".join(x for _, x in after)
    assert rc == 130, text
    assert took < 10, (took, text)
    said = [ts for ts, x in after if "kitlib: interrupted (Ctrl-C)" in x]
    assert said and said[0] <= 1.0, after             # the message comes at once
    assert "nothing unfinished was kept" in text
    assert not out.exists()


def test_sigterm_leaves_no_run_folder(env, tmp_path):
    out = tmp_path / "terminated"
    rc, took, after = _run_and_signal(out, signal.SIGTERM, env)
    text = "\n".join(x for _, x in after)
    assert rc == 143, text
    assert "kitlib: terminated (SIGTERM)" in text and took < 10
    assert not out.exists()


# --------------------------------------------------------------------------- data
def _food101(root: Path, meta: dict, skip=()) -> Path:
    base = root / "food-101"
    for rel in sum(meta.values(), []):
        if rel in skip:
            continue
        (base / "images" / rel).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (40, 30), (200, 120, 40)).save(base / "images" / f"{rel}.jpg")
    (base / "meta").mkdir(parents=True)
    (base / "meta" / "train.json").write_text(json.dumps(meta))
    return root


def test_food101_naming_a_missing_image_is_an_error_naming_it(tmp_path, env):
    meta = {"apple_pie": ["apple_pie/1", "apple_pie/2"], "sushi": ["sushi/3", "sushi/4"]}
    root = _food101(tmp_path, meta, skip={"sushi/3"})
    with pytest.raises(KitFileError) as info:
        make_dataset(WorkloadConfig(data_root=str(root), image_size=32))
    msg = str(info.value)
    assert msg.startswith(str(root / "food-101" / "images" / "sushi" / "3.jpg"))
    assert "missing, although" in msg and "train.json lists it" in msg
    rc, _, err = _main(["profile", "--data-root", str(root), "--out", str(tmp_path / "run"), *TINY])
    assert rc == 2 and "sushi/3.jpg: missing" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()


def test_food101_description_counts_its_own_classes(tmp_path):
    meta = {"apple_pie": ["apple_pie/1"], "sushi": ["sushi/3"], "ramen": ["ramen/5"]}
    _, info = make_dataset(WorkloadConfig(data_root=str(_food101(tmp_path, meta)), image_size=32))
    assert "(3 images, 3 classes)" in info["dataset"] and "101 classes" not in info["dataset"]


def test_pin_memory_is_not_recorded_as_on_where_torch_ignores_it(env):
    cfg = WorkloadConfig(device="cpu", pin_memory=True, batch_size=2, image_size=32,
                         synthetic_images=NUM_CLASSES, num_workers=0)
    ds, data = make_dataset(cfg, progress=False)
    loader = make_loader(ds, cfg)
    assert loader.pin_memory is False
    d = Workload(config=cfg, device=__import__("torch").device("cpu"), model=None, optimizer=None,
                 loader=loader, data=data).describe()
    assert d["pin_memory"] is False and "no accelerator" in d["pin_memory_note"]


# --------------------------------------------------------------------------- texts
def test_nsys_commands_print_the_export_line_too(capsys):
    assert nsys_recipes.main(["commands"]) == 0
    out = capsys.readouterr().out
    blocks = [b for b in out.split("\n\n") if b.startswith("# ") and not b.startswith("# then")]
    assert len(blocks) == len(nsys_recipes.NSYS_RECIPES)
    for b in blocks:
        lines = b.splitlines()
        assert lines[1].startswith("nsys profile ") and " -o report " in lines[1]
        assert lines[2] == "nsys export --type sqlite --force-overwrite true -o report.sqlite report.nsys-rep"
    assert "kitlib.load_nsys('report.sqlite')" in out


def test_cpu_texts_do_not_mislead(capsys):
    with pytest.raises(SystemExit):
        cli.main(["profile", "--help"])
    helptext = capsys.readouterr().out
    assert "active=5" not in helptext and "N = --steps" in helptext and "3 on the CPU" in helptext
    a = nsys_recipes._parser().parse_args(["run-workload", "--workers", "3"])
    b = nsys_recipes._parser().parse_args(["run-workload", "--num-workers", "3"])
    assert a.num_workers == b.num_workers == 3
    p = cli.build_parser()
    assert p.parse_args(["profile", "--num-workers", "3"]).workers == \
        p.parse_args(["profile", "--workers", "3"]).workers == 3
    with pytest.raises(KitFileError, match="--data-root|KITLIB_FOOD101") as info:
        make_dataset(WorkloadConfig(data_root=str(Path(__file__).parent)))
    assert 'python -c "from kitlib.capture.workload import download_food101' in str(info.value)
    with pytest.raises(nsys_recipes.NsysNotFound) as info:
        nsys_recipes.find_nsys("/nonexistent/nsys", locations=())
    assert "on the command line pass --nsys /path/to/nsys" in str(info.value)


# --------------------------------------------------------------------------- issue 41: provenance, not place
def test_a_run_written_into_the_kits_reference_folder_is_not_called_a_kit_reference(env, tmp_path, monkeypatch):
    """``profile --out data/reference/x`` made ``kitlib info`` (and every table's label) call the
    learner's run "kit's CPU reference": the kit's folder now labels by the manifest's origin."""
    from kitlib.readers.bundle import find_recording, open_capture
    ref = tmp_path / "reference"
    ref.mkdir()
    shutil.copytree(REF / "ranks_balanced", ref / "ranks_balanced")    # a shipped one, origin 'recorded'
    monkeypatch.setenv("KITLIB_REFERENCE", str(ref))
    monkeypatch.delenv("KITLIB_REPLAY_DIR", raising=False)
    rc, _, err = _main(["profile", "--recipe", "light", "--steps", "1", "--out", str(ref / "x"), *TINY])
    assert rc == 0, err
    manifest = json.loads((ref / "x" / "manifest.json").read_text())
    assert manifest["origin"] == "live" and manifest["provenance"]["gpu"] is None
    assert find_recording("x") == (ref / "x", "kit")                    # found where the kit looks
    mine, shipped = open_capture("x"), open_capture("ranks_balanced")
    print(mine.label, "|", shipped.label)
    assert mine.whose == "live capture (CPU) in the kit's reference folder, not a kit reference"
    assert "kit's CPU reference" not in mine.label
    assert shipped.whose == "kit's CPU reference"                       # the kit's own: unchanged
    rc, info, _ = _main(["info"])
    line = next(ln for ln in info.splitlines() if ln.strip().startswith("x "))
    print(line)
    assert rc == 0 and "live capture (CPU) in the kit's reference folder, not a kit reference" in line
    assert "kit's CPU reference" in next(ln for ln in info.splitlines() if ln.strip().startswith("ranks_balanced "))
