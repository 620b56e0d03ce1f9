"""What the ``Examples`` of ``kitlib.capture`` showed, as tests (issue 39: those examples were
never collected as doctests, so nothing ran them; each assertion is the example's own output)."""
import pytest

from kitlib.errors import KitError
from kitlib.capture.clinic import _blocks, answer_key, plan, public_manifest, retime_clinic, torchrun_command
from kitlib.capture.nsys_recipes import torchrun_export_commands, torchrun_profile_command


def test_clinic_plan_folders_and_settings():
    assert [r.folder for r in plan("cpu", ["c"])] == ["baseline", "case_c/before", "case_c/after"]
    assert plan("cuda", ["i"])[1].settings["sync_every_step"] is True


def test_clinic_torchrun_command():
    cmd = torchrun_command({"model": "small_cnn"}, "shapes", "/tmp/x", "cpu")
    assert cmd[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    assert cmd[6:9] == ["kitlib.capture.clinic", "--ranks",
                        '{"settings": {"model": "small_cnn", "device": "cpu"}, "recipe": "shapes", '
                        '"smallest": false}']


def test_clinic_public_manifest_keeps_only_the_public_keys():
    m = {"name": "x", "workload": {"model": "m", "num_workers": 0},
         "recipe": {"with_stack": True, "kind": "torch_profiler"}, "notes": "n", "files": {}}
    p = public_manifest(m, "case_c_before")
    assert (p["workload"], p["recipe"], p["name"]) == (
        {"model": "m"}, {"kind": "torch_profiler"}, "case_c_before")


def test_clinic_blocks_in_the_order_they_are_timed():
    # (side, steps)
    assert _blocks(12, 5) == [("before", 5), ("after", 5), ("after", 5), ("before", 5),
                              ("before", 2), ("after", 2)]


def test_retime_clinic_of_a_missing_folder():
    with pytest.raises(KitError) as e:
        retime_clinic("/no/such/folder")
    assert str(e.value) == "/no/such/folder/clinic.json: not found; retime a folder written by record-clinic"


def test_clinic_answer_key_names_case_c():
    assert "case_c: loader_in_main_process" in answer_key()


def test_torchrun_profile_command():
    cmd = torchrun_profile_command("nsys_8step", 2, "out/report", python="python", device="cpu")
    assert " ".join(cmd[:8]) == ("python -m torch.distributed.run --standalone --nproc_per_node=2 "
                                 "--no-python nsys profile")
    assert cmd[cmd.index("-o") + 1] == "out/report_%q{RANK}"


def test_torchrun_export_commands():
    assert [c[-2:] for c in torchrun_export_commands(2, "r")] == [
        ["r_0.sqlite", "r_0.nsys-rep"], ["r_1.sqlite", "r_1.nsys-rep"]]
