"""Live or replay: the mode switch and the capture a lesson gets."""
import pytest

from kitlib import course
from kitlib.errors import KitError


def test_replay_opens_the_reference(monkeypatch):
    monkeypatch.setenv("KITLIB_MODE", "replay")
    assert course.mode() == "replay"
    cap = course.lesson_capture("profiler_5step")
    assert cap.origin == "recorded" and cap.provenance["gpu"] == "NVIDIA H200"


def test_bad_mode_and_live_without_gpu(monkeypatch):
    monkeypatch.setenv("KITLIB_MODE", "sometimes")
    with pytest.raises(KitError, match="KITLIB_MODE"):
        course.mode()
    if not course.cuda_available():
        monkeypatch.setenv("KITLIB_MODE", "live")
        with pytest.raises(KitError, match="no CUDA GPU"):
            course.mode()


def test_live_lesson_capture_on_cpu_is_reused(tmp_path, monkeypatch):
    """The live path end to end on the CPU (tiny): the second lesson reuses the first's capture."""
    monkeypatch.setenv("KITLIB_RUNS", str(tmp_path))
    opts = dict(device="cpu", batch_size=2, image_size=64, steps=1, synthetic_images=101, num_workers=0)
    a = course.lesson_capture("profiler_5step", live=True, progress=False, **opts)
    assert a.origin == "live" and a.path.parent == tmp_path
    assert {"data_load", "forward", "backward", "optimizer"} <= set(a.trace.ops["name"])
    b = course.lesson_capture("profiler_5step", live=True, progress=False, **opts)
    assert b.path == a.path
    c = course.lesson_capture("profiler_5step", live=True, progress=False, reuse_minutes=0, **opts)
    assert c.path != a.path


def test_replay_dir_serves_both_profilers(tmp_path, monkeypatch):
    from pathlib import Path
    from kitlib.course import lesson_nsys_capture
    live = Path(__file__).resolve().parents[2] / "tests" / "data" / "live-h200-2026-11-30"
    (tmp_path / "profiler_5step").symlink_to(live / "profiler_full")
    (tmp_path / "nsys_8step").symlink_to(live / "nsys_8step")
    monkeypatch.setenv("KITLIB_MODE", "replay")
    monkeypatch.setenv("KITLIB_REPLAY_DIR", str(tmp_path))
    assert course.lesson_capture("profiler_5step").origin == "live"
    assert lesson_nsys_capture("nsys_8step").origin == "live"
    assert course.lesson_capture("fixed_batch").origin == "recorded"  # not in the folder: the shipped one


def test_compare_machines_shows_the_manifests_provenance(monkeypatch):
    """Lesson 00's machine table: the capture column is the bundle manifest's provenance
    (read here as plain JSON), this machine's torch is the one running, the B300 is named."""
    import json
    import torch
    from conftest import REF
    monkeypatch.setenv("KITLIB_MODE", "replay")
    cap = course.lesson_capture("profiler_5step")
    prov = json.loads((REF / "profiler_5step" / "manifest.json").read_text())["provenance"]
    t = course.compare_machines(cap)
    col = f"capture ({cap.origin})"
    assert t[col].to_dict() == {k: str(prov[k]) for k in t.index}
    assert (t.loc["gpu", col], t.loc["torch", col], t.loc["cudnn", col]) == ("NVIDIA H200", "2.11.0+cu130", "91900")
    assert t.loc["torch", "this machine"] == torch.__version__
    assert t.loc["gpu", "source texts (B300)"] == "NVIDIA B300"
    assert (t["source texts (B300)"].drop("gpu") == "not recorded").all()


def test_this_machine_without_importing_torch_says_what_torch_says():
    """Lesson 00's "this machine" column is read without importing torch (seconds in a
    replay lesson), and gives the very facts torch gives."""
    import subprocess
    import sys
    from kitlib.readers.bundle import _installed_software, software_provenance
    code = ("import sys; from kitlib.course import this_machine; m = this_machine(); "
            "assert 'torch' not in sys.modules, 'torch was imported'; print(m['probe'])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip().startswith("installed packages")
    full = software_provenance()                   # through torch itself
    light = _installed_software()
    assert light and full["torch"]
    assert {k: full[k] for k in light} == light
    assert (light.get("cudnn"), light.get("gpu")) == (full["cudnn"], full["gpu"])    # not just left out


def test_auto_mode_and_lesson12_plan_without_a_driver_do_not_import_torch(monkeypatch):
    """On a machine with no NVIDIA driver (this one, and most learners' laptops) ``auto``
    mode decides on replay, and lesson 12 prints its torchrun command, without importing
    torch; torch, asked, agrees that there is no CUDA GPU."""
    import subprocess
    import sys
    if not course._no_nvidia_driver():
        pytest.skip("an NVIDIA driver is present: only torch can tell")
    code = ("import sys; from kitlib import course; from kitlib.course import ranks; "
            "m = course.mode(); c = ranks.torchrun_command('out', True); "
            "assert 'torch' not in sys.modules, 'torch was imported'; "
            "print(m, c[c.index('--device') + 1], [a for a in c if a.startswith('--nproc')][0])")
    env = {k: v for k, v in __import__("os").environ.items() if k != "KITLIB_MODE"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["replay", "cpu", "--nproc_per_node=2"]
    import torch
    assert not torch.cuda.is_available()
