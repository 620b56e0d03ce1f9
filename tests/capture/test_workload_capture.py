"""The live workload, its capture and the command line, on the CPU.

One real profile run (batch 4, 64 px, 2 active steps, 101 synthetic images) is
shared by several tests through session fixtures, so the whole file stays well
under two minutes on two cores.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import time
from pathlib import Path

import pytest
import torch
from PIL import Image

from kitlib.capture import cli
from kitlib import open_capture
from kitlib.capture.recipes import RECIPES, Recipe, capture, get_recipe, key_average_rows, memory_history
from kitlib.errors import KitError, KitFileError
from kitlib.capture.summary import summarize, top_from_key_averages
from kitlib.capture.workload import LABELS, NUM_CLASSES, WorkloadConfig, make_dataset, phase_labels, synthetic_dataset, time_steps, train_step

REFERENCE = Path(__file__).resolve().parents[2] / "data" / "reference"
N_IMAGES = NUM_CLASSES  # one image per class: the smallest synthetic dataset
PROFILE_OPTIONS = ["--batch-size", "--steps", "--workers", "--device", "--recipe", "--out",
                   "--data-root", "--image-size", "--data-load-covers-h2d", "--no-progress"]


@pytest.fixture(scope="session")
def kit_env(tmp_path_factory):
    """A private cache folder and no Food-101 from the environment, for the session."""
    mp = pytest.MonkeyPatch()
    cache = tmp_path_factory.mktemp("kitlib_cache")
    mp.setenv("KITLIB_CACHE", str(cache))
    mp.delenv("KITLIB_FOOD101", raising=False)
    yield cache
    mp.undo()


@pytest.fixture(scope="session")
def synthetic_root(kit_env):
    return synthetic_dataset(N_IMAGES, progress=False)


@pytest.fixture(scope="session")
def cli_run(synthetic_root, tmp_path_factory):
    """``python -m kitlib profile`` on the CPU, tiny: returns (exit status, stdout, bundle folder)."""
    out = tmp_path_factory.mktemp("runs") / "cpu_full"
    argv = ["profile", "--device", "cpu", "--recipe", "full", "--batch-size", "4", "--steps", "2",
            "--image-size", "64", "--synthetic-images", str(N_IMAGES), "--workers", "1",
            "--pre-steps", "0", "--timing-steps", "1", "--out", str(out), "--no-progress"]
    buf = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(buf):
        rc = cli.main(argv)
    print(f"CPU profile run: {time.perf_counter() - t0:.1f} s")
    return rc, buf.getvalue(), out


# --------------------------------------------------------------------------- live run
def test_cli_profile_writes_a_bundle_that_loads_back(cli_run):
    rc, text, out = cli_run
    assert rc == 0, text
    cap = open_capture(out)
    assert cap.kind == "torch_profiler" and cap.origin == "live"
    assert {"trace.json.gz", "key_averages.json", "step_times.json"} <= set(cap.files)
    assert cap.recipe["name"] == "full"
    assert cap.recipe["schedule"] == {"wait": 1, "warmup": 1, "active": 2, "repeat": 1}
    assert cap.recipe["activities"] == ["CPU"]
    w = cap.workload
    assert (w["batch_size"], w["image_size"], w["num_workers"]) == (4, 64, 1)
    assert w["device_resolved"] == "cpu" and w["dataset_kind"] == "synthetic"
    assert w["dataset_images"] == N_IMAGES
    assert w["labels"] == list(LABELS)
    assert cap.provenance["torch"] == torch.__version__
    assert cap.manifest["steps"]["schedule_actions"] == ["wait", "warmup", "active", "active"]

    st = cap.step_times()
    assert len(st["step_ms_profiled"]) == 4 and len(st["step_ms_uninstrumented"]) == 1
    assert all(isinstance(v, float) and v > 0 for v in st["step_ms_profiled"] + st["step_ms_uninstrumented"])


def test_live_trace_has_the_phase_annotations(cli_run):
    _, _, out = cli_run
    tr = open_capture(out).trace
    ann = tr.ops[tr.ops["kind"] == "annotation"]
    counts = ann["name"].value_counts()
    for label in LABELS:                      # one range per label per active step
        assert counts.get(label, 0) == 2, (label, counts.to_dict())
    assert len(tr.steps) == 2
    # the labels enclose the work they name: a convolution runs inside each forward range
    fwd = ann[ann["name"] == "forward"]
    conv = tr.ops[(tr.ops["kind"] == "op") & (tr.ops["name"] == "aten::conv2d")]
    for _, f in fwd.iterrows():
        inside = conv[(conv["tid"] == f["tid"]) & (conv["start_ns"] >= f["start_ns"])
                      & (conv["start_ns"] + conv["dur_ns"] <= f["start_ns"] + f["dur_ns"])]
        assert len(inside) == 53              # ResNet-50 has 53 convolutions
    bwd = ann[ann["name"] == "backward"]
    assert (bwd["start_ns"].to_numpy() > fwd["start_ns"].to_numpy()).all()


def test_key_averages_follow_the_reference_schema(cli_run):
    _, _, out = cli_run
    ka = open_capture(out).key_averages()
    with gzip.open(REFERENCE / "fixed_batch" / "key_averages.json.gz", "rt") as f:
        ref = json.load(f)
    assert set(ka) == set(ref)
    for table in ("by_name", "by_input_shape", "by_stack_5"):
        assert ka[table], table
        assert set(ka[table][0]) == set(ref[table][0]), table
    assert (ka["torch"], ka["steps"], ka["batch_size"]) == (torch.__version__, 2, 4)
    by_name = {r["key"]: r for r in ka["by_name"]}
    assert by_name["forward"]["count"] == 2
    assert by_name["aten::conv2d"]["flops"] > 0                      # with_flops
    assert any(r["stack"] for r in ka["by_stack_5"])                 # with_stack
    assert any("[4, 3, 64, 64]" in r["input_shapes"] for r in ka["by_input_shape"])  # record_shapes
    assert any(r["self_cpu_memory_usage_bytes"] != 0 for r in ka["by_name"])       # profile_memory


def test_profile_prints_the_summary(cli_run):
    _, text, out = cli_run
    machine = "no GPU (CPU)" if not torch.cuda.is_available() else torch.cuda.get_device_name(0)
    for needle in ["ResNet-50 on cpu", machine, f"torch {torch.__version__}",
                   "steps recorded: 2 active of 4", "step_ms_profiled", "step_ms_uninstrumented",
                   "top operators by self host (CPU) time", "aten::", "https://ui.perfetto.dev",
                   "Open trace file", str(out / "trace.json.gz")]:
        assert needle in text, needle


def test_cold_start_recipe_records_from_the_first_step(synthetic_root, tmp_path):
    """No schedule: every step from a fresh DataLoader, each in torch_step#N, with
    wall-clock stamps; here also with data_load covering the transfer (no h2d label)."""
    cfg = WorkloadConfig(device="cpu", batch_size=4, steps=2, image_size=32, num_workers=0,
                         synthetic_images=N_IMAGES, data_load_covers_h2d=True)
    cap = capture(cfg, "cold_start", tmp_path / "cold", progress=False)
    assert cap.recipe["schedule"] is None and cap.recipe["name"] == "cold_start"
    assert "wallclock.json" in cap.files and "step_times.json" not in cap.files
    wc = cap.read_json("wallclock.json")
    assert len(wc["steps"]) == 2 and wc["t0_ns"] < wc["steps"][0]["next_start_ns"] < wc["end_ns"]
    for m in wc["steps"]:
        assert m["next_start_ns"] <= m["next_end_ns"] <= m["step_submitted_ns"]
    tr = cap.trace
    names = tr.ops.loc[tr.ops["kind"] == "annotation", "name"].value_counts()
    assert names.get("torch_step#0") == 1 and names.get("torch_step#1") == 1
    assert names.get("data_load") == 2 and "h2d" not in names
    # no prof.step(), so no ProfilerStep#N: the kit's torch_step#N ranges are the steps
    assert tr.steps["name"].tolist() == ["torch_step#0", "torch_step#1"]
    assert cap.workload["labels"] == ["data_load", "forward", "backward", "optimizer"]


# --------------------------------------------------------------------------- summaries of recordings
def test_summary_of_reference_captures(capsys):
    assert cli.main(["summary", "fixed_batch", "--top", "5"]) == 0
    text = capsys.readouterr().out
    assert "NVIDIA H200" in text and "key_averages() rows" in text
    assert "top kernels by device time" in text
    assert "aten::convolution_backward" in text
    assert "1,046.5 GFLOP per step" in text     # with_flops counts the forward convolutions

    text = summarize("profiler_5step", top=3)   # no key_averages.json: uses the trace tables
    assert "from the trace tables" in text and "ProfilerStep#2 … ProfilerStep#6" in text
    assert "step_ms_uninstrumented: n=10" in text


def test_summary_of_a_memory_snapshot_bundle(tmp_path):
    from kitlib.readers.bundle import write_bundle
    (tmp_path / "memory_snapshot.pickle").write_bytes(b"\x80\x04N.")
    (tmp_path / "step_times.json").write_text(json.dumps({"step_ms_memory_history": [51.7, 44.1, 44.1]}))
    write_bundle(tmp_path, kind="memory_snapshot", name="m",
                 files={"memory_snapshot.pickle": "snapshot", "step_times.json": "times"},
                 recipe={"name": "memory_history", "kind": "memory_snapshot", "steps": 3,
                         "pre_steps": 3, "max_entries": 60000},
                 extra={"max_memory_allocated": 11385876480, "max_memory_reserved": 13352566784})
    text = summarize(tmp_path)
    assert "_record_memory_history(max_entries=60000) over 3 steps" in text
    assert "10.60 GiB allocated, 12.44 GiB reserved" in text
    assert "https://pytorch.org/memory_viz" in text and "step_ms_memory_history: n=3" in text


def test_top_lists_separate_kernels_from_gpu_annotations():
    with gzip.open(REFERENCE / "fixed_batch" / "key_averages.json.gz", "rt") as f:
        t = top_from_key_averages(json.load(f), top=200)
    kernels = {k["key"] for k in t["kernels"]}
    ops = {o["key"] for o in t["operators"]}
    assert t["on_gpu"]
    assert "forward" not in kernels and "Optimizer.step#SGD.step" not in kernels
    assert "Memset (Device)" in kernels
    assert "aten::cudnn_convolution" in ops and "cudaLaunchKernel" not in ops and "forward" not in ops


# --------------------------------------------------------------------------- command line
def test_help_documents_every_option(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["profile", "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for opt in PROFILE_OPTIONS:
        assert opt in text, opt
    for name in RECIPES:
        assert name in text, name
    for opt in ["--synthetic-images", "--pre-steps", "--timing-steps"]:
        assert opt in text


def test_info_lists_machine_and_references(capsys):
    assert cli.main(["info"]) == 0
    text = capsys.readouterr().out
    assert f"torch        {torch.__version__}" in text
    assert "profiler_5step" in text and "nsys_8step" in text


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_device_cuda_without_gpu_is_a_clear_error(tmp_path, capsys):
    out = tmp_path / "run"
    assert cli.main(["profile", "--device", "cuda", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kitlib: error:") and "torch.cuda.is_available() is False" in err
    assert "Traceback" not in err and not out.exists()


def test_bad_command_line_values(capsys):
    for argv in (["profile", "--batch-size", "0"], ["profile", "--recipe", "nope"],
                 ["profile", "--device", "tpu"], ["profile", "--workers", "-1"]):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        assert e.value.code == 2, argv
    capsys.readouterr()
    assert cli.main(["profile", "--device", "cpu", "--workers", "0", "--prefetch-factor", "2"]) == 2
    assert "prefetch_factor needs num_workers > 0" in capsys.readouterr().err
    assert cli.main(["summary", "no_such_capture_here"]) == 2
    assert "no such capture folder" in capsys.readouterr().err


def test_a_mistyped_option_gets_a_did_you_mean(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["profile", "--batchsize", "3"])
    assert e.value.code == 2
    assert "--batchsize: did you mean --batch-size?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["summary", "profiler_5step", "--topp", "3"])
    assert "--topp: did you mean --top?" in capsys.readouterr().err
    with pytest.raises(SystemExit):             # nothing close: no guess
        cli.main(["profile", "--zzzzzz"])
    assert "did you mean" not in capsys.readouterr().err


def test_summary_of_a_file_that_is_neither_bundle_nor_trace(tmp_path, capsys):
    readme = Path(__file__).resolve().parents[2] / "README.md"
    assert cli.main(["summary", str(readme)]) == 2
    err = capsys.readouterr().err
    assert "README.md: not a capture bundle" in err and "invalid JSON" not in err


def test_profile_ends_pointing_to_the_lessons(cli_run):
    _, text, _ = cli_run
    assert text.rstrip().endswith("jupyter lab workspace/ (start with 00)")


# --------------------------------------------------------------------------- data
def test_synthetic_dataset_is_101_folders_of_jpegs(synthetic_root):
    classes = sorted(p.name for p in synthetic_root.iterdir() if p.is_dir())
    assert classes == [f"class_{i:03d}" for i in range(NUM_CLASSES)]
    files = sorted(synthetic_root.glob("class_*/*.jpg"))
    assert len(files) == N_IMAGES
    for f in files[:: max(1, len(files) // 12)]:
        with Image.open(f) as im:
            assert im.format == "JPEG" and im.mode == "RGB"
            assert im.width == 512 and 384 <= im.height <= 512
            im.load()                                  # decodes: not truncated
    info = json.loads((synthetic_root / ".complete.json").read_text())
    assert info["images"] == N_IMAGES and "scikit-image" in info["sources"]
    # generated once: asking again returns the same folder without writing
    stamp = files[0].stat().st_mtime_ns
    assert synthetic_dataset(N_IMAGES, progress=False) == synthetic_root
    assert files[0].stat().st_mtime_ns == stamp
    with pytest.raises(KitError, match="at least 101"):
        synthetic_dataset(50, progress=False)


def test_food101_path_without_food101_is_a_clear_error(tmp_path, monkeypatch):
    with pytest.raises(KitFileError, match=r"no Food-101 here.*food-101/meta/train\.json"):
        make_dataset(WorkloadConfig(data_root=str(tmp_path)))
    monkeypatch.setenv("KITLIB_FOOD101", str(tmp_path / "missing"))
    with pytest.raises(KitFileError, match="KITLIB_FOOD101"):
        make_dataset(WorkloadConfig())


def test_food101_is_used_when_present(tmp_path):
    base = tmp_path / "food-101"
    meta = {"apple_pie": ["apple_pie/1", "apple_pie/2"], "sushi": ["sushi/3", "sushi/4"]}
    for rel in sum(meta.values(), []):
        (base / "images" / rel).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (80, 60), (200, 120, 40)).save(base / "images" / f"{rel}.jpg")
    (base / "meta").mkdir()
    (base / "meta" / "train.json").write_text(json.dumps(meta))
    for root in (tmp_path, base):               # the parent of food-101/, or food-101/ itself
        ds, info = make_dataset(WorkloadConfig(data_root=str(root), image_size=32))
        assert info["dataset_kind"] == "food101" and len(ds) == 4
        x, y = ds[3]
        assert tuple(x.shape) == (3, 32, 32) and y == 1


# --------------------------------------------------------------------------- pieces
def test_recipes_are_known_and_checked():
    assert {"light", "full", "shapes", "stack", "memory", "timing", "cold_start"} <= set(RECIPES)
    full = RECIPES["full"]
    assert (full.wait, full.warmup, full.active, full.repeat) == (1, 1, 5, 1)   # the reference's
    assert full.record_shapes and full.profile_memory and full.with_stack and full.with_flops
    light = RECIPES["light"]
    assert not (light.record_shapes or light.profile_memory or light.with_stack or light.with_flops)
    assert RECIPES["timing"].kind == "timing"
    assert get_recipe("stack").with_stack and get_recipe(full) is full
    with pytest.raises(KitError, match="known recipes: light, full"):
        get_recipe("fastest")
    with pytest.raises(KitError, match="active must be"):
        Recipe("x", active=0)
    with pytest.raises(KitError, match="without a schedule"):
        Recipe("x", use_schedule=False, wait=1)


def test_workload_config_checks_and_describes_itself():
    with pytest.raises(KitError, match="persistent_workers"):
        WorkloadConfig(num_workers=0, persistent_workers=True).validate()
    with pytest.raises(KitError, match="image_size"):
        WorkloadConfig(image_size=16).validate()
    d = WorkloadConfig(data_load_covers_h2d=True, batch_size=16).to_dict()
    json.dumps(d)                                           # plain JSON for the manifest
    assert d["labels"] == ["data_load", "forward", "backward", "optimizer"]
    assert "transfer submission" in d["data_load_covers"] and d["batch_size"] == 16
    cpu = WorkloadConfig.for_device("cpu", image_size=96)
    assert (cpu.batch_size, cpu.image_size, cpu.device) == (8, 96, "cpu")


@pytest.mark.parametrize("covers", [False, True])
def test_train_step_labels_for_both_tools(covers):
    from torch.profiler import ProfilerActivity, profile
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.LazyLinear(5))
    batches = iter([(torch.randn(2, 3, 8, 8), torch.tensor([1, 3]))] * 3)
    model(torch.randn(2, 3, 8, 8))                          # materialise the lazy layer
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        loss = train_step(model, opt, batches, "cpu", data_load_covers_h2d=covers)
    names = [e.name for e in prof.events()]
    for label in phase_labels(covers):
        assert names.count(label) == 1, label
    assert ("h2d" in names) is (not covers)
    assert loss.ndim == 0 and torch.isfinite(loss)


def test_time_steps_returns_milliseconds():
    class Sleepy:
        def step(self, annotate=True):
            time.sleep(0.002)

        def sync(self):
            pass
    times = time_steps(Sleepy(), 3, warmup=1)
    assert len(times) == 3 and all(isinstance(t, float) and 2.0 <= t < 1000 for t in times)


def test_key_average_rows_read_old_and_new_attribute_names():
    class Old:   # torch < 2.4 names device time and memory cuda_*
        key, count, input_shapes, stack, flops = "aten::mm", 3, [[2, 2], [2, 2]], ["a.py(1): f"], 16
        cpu_time_total, self_cpu_time_total = 10.0, 4.0
        cuda_time_total, self_cuda_time_total = 7.5, 7.5
        cpu_memory_usage, self_cpu_memory_usage = 64, 64
        cuda_memory_usage, self_cuda_memory_usage = 128, 32
    (row,) = key_average_rows([Old()])
    assert row["device_time_total_us"] == 7.5 and row["self_device_memory_usage_bytes"] == 32
    assert row["input_shapes"] == "[[2, 2], [2, 2]]" and row["stack"] == ["a.py(1): f"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_memory_history_needs_a_gpu(tmp_path):
    with pytest.raises(KitError, match="needs a CUDA GPU"):
        memory_history(WorkloadConfig(device="cpu"), out_dir=tmp_path / "m")
    assert not (tmp_path / "m").exists()


# --------------------------------------------------------------------------- issue 17: the summary
def test_summary_shows_what_the_recipe_recorded(cli_run):
    # recipe full on the CPU: memory, by-shape and by-stack tables from key_averages.json
    rc, out, folder = cli_run
    ka = json.loads((folder / "key_averages.json").read_text())
    ops = [o for o in ka["by_name"] if o["cpu_time_total_us"] > 0 and o["self_cpu_memory_usage_bytes"]
           and not o["key"].startswith(("ProfilerStep", "enumerate(")) and o["key"] not in LABELS]
    top_mem = max(ops, key=lambda o: abs(o["self_cpu_memory_usage_bytes"]))
    mem = out[out.index("memory (CPU, profile_memory"):]
    first = mem.splitlines()[2]
    assert first.split()[0] == top_mem["key"][:len(first.split()[0])]
    assert f"{top_mem['self_cpu_memory_usage_bytes'] / 2**20:,.2f}" in first
    shaped = [o for o in ka["by_input_shape"] if o["input_shapes"] not in ("", "[]")
              and o["cpu_time_total_us"] > 0 and o["key"].startswith("aten::")]
    top_shape = max(shaped, key=lambda o: o["self_cpu_time_total_us"])
    sec = out[out.index("top operators by input shape (record_shapes"):]
    row = sec.splitlines()[2]
    assert row.split()[0] == top_shape["key"] and f"{top_shape['self_cpu_time_total_us'] / 1e3:,.3f}" in row
    sec = out[out.index("top operators by Python call stack (with_stack"):]
    assert ".py(" in sec.splitlines()[2]
    assert "nothing to synchronize" in out and "+ cuda.synchronize" not in out


def test_memory_recipe_summary_shows_memory_only():
    # A 'memory' capture's key_averages.json holds by_name rows only (no shapes, no stacks).
    from kitlib.capture.summary import _recorded_tables
    ka = {"by_name": open_capture("fixed_batch").key_averages()["by_name"]}
    text = "\n".join(_recorded_tables(ka, {"profile_memory": True}, True, "over 5 steps", 3))
    assert "memory (GPU, profile_memory" in text
    assert "by input shape" not in text and "call stack" not in text
    rows = [o for o in ka["by_name"] if o["cpu_time_total_us"] > 0 and o["self_device_memory_usage_bytes"]
            and o["key"].startswith("aten::")]
    top = max(rows, key=lambda o: abs(o["self_device_memory_usage_bytes"]))
    assert text.splitlines()[3].split()[0] == top["key"]
    assert f"{top['self_device_memory_usage_bytes'] / 2**20:,.2f}" in text.splitlines()[3]
    # a light capture: nothing beyond the names
    assert _recorded_tables(ka, {}, True, "over 5 steps", 3) == []


def test_every_command_the_kit_names_exists():
    """Each ``python -m kitlib NAME`` written in kitlib, the README, docs/ and the lessons is a
    command of the parser (``kitlib info`` once named a ``course-set`` that never existed)."""
    import re
    from kitlib.course.cli import build_parser
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    root = Path(__file__).resolve().parents[2]
    files = [*root.glob("kitlib/**/*.py"), root / "README.md", *root.glob("docs/*.md"), *root.glob("lessons/*.ipynb")]
    named = {m for f in files for m in re.findall(r"python -m kitlib ([a-z][a-z-]*)", f.read_text())}
    assert {"profile", "answers", "record-course"} <= named
    assert named <= set(sub.choices), named - set(sub.choices)


def test_a_torchvision_built_for_another_torch_is_one_line_naming_both(tmp_path):
    """A torchvision that does not belong with the installed torch fails inside its own import
    (``operator torchvision::nms does not exist``); ``info`` and ``profile`` ended in a 30-line
    traceback. Here a stand-in torchvision, first on the path, fails the same way."""
    import subprocess
    import sys
    fake = tmp_path / "site"
    (fake / "torchvision").mkdir(parents=True)
    (fake / "torchvision" / "__init__.py").write_text(
        'raise RuntimeError("operator torchvision::nms does not exist")\n')
    (fake / "torchvision" / "version.py").write_text("__version__ = '0.24.1+cu128'\n")
    (fake / "torchvision-0.24.1.dist-info").mkdir()
    (fake / "torchvision-0.24.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torchvision\nVersion: 0.24.1\nRequires-Dist: numpy\nRequires-Dist: torch==2.9.1\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), str(REFERENCE.parents[1])])}
    for argv in (["info"], ["profile", "--device", "cpu", "--model", "small_cnn", "--steps", "1",
                            "--out", str(tmp_path / "run"), "--no-progress"]):
        r = subprocess.run([sys.executable, "-m", "kitlib", *argv], capture_output=True, text=True, env=env,
                           timeout=300)
        print(argv[0], r.returncode, r.stderr)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        line = r.stderr.strip().splitlines()[-1]
        assert line.startswith("kitlib: error: torchvision 0.24.1+cu128 does not load beside torch "
                               f"{torch.__version__} (it was built for torch 2.9.1): operator torchvision::nms "
                               "does not exist."), line
        major, minor = torch.__version__.split("+")[0].split(".")[:2]
        assert line.endswith(f"python -m pip install torch=={torch.__version__.split('+')[0]} "
                             f"'torchvision==0.{int(minor) + 15}.*'"), line
        assert not (tmp_path / "run").exists()
