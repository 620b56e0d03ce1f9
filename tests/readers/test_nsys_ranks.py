"""Nsight Systems on several ranks: the torchrun recipe's command lines, and the reader of
several exports as ranks on one clock, on a two-rank input derived here from the shipped
export (data/reference/nsys_8step/report.sqlite):

- rank 0: a copy, with ``RANK="0"`` added to the launched process's environment
  (``META_DATA_CAPTURE``), as a torchrun launch records it;
- rank 1: a copy whose session started D = 20 ms later (``utcEpochNs`` + D) while every
  event happened at the same UTC time (every start/end on the session's clock - D),
  ``RANK="1"``, in a file named ``report_7.sqlite`` (the environment wins over the name).

Aligned, rank 1's events must fall exactly on rank 0's; durations, and so every
``nsys stats`` table, are the same on both and equal to the original's.
"""
from __future__ import annotations

import shutil
import sqlite3

import pandas as pd
import pytest

from kitlib.capture import nsys_recipes as N
from kitlib.errors import KitError, KitFileError
from kitlib.readers.bundle import reference_dir
from kitlib.readers.nsys import load_nsys, nsys_stats
from kitlib.readers.nsys_ranks import load_nsys_ranks

SRC = reference_dir() / "nsys_8step" / "report.sqlite"
D = 20_000_000
#: Event tables and their time columns shifted for rank 1 (DIAGNOSTIC_EVENT's times stay).
SHIFT = {"ANALYSIS_DETAILS": ("startTime", "stopTime"), "PROFILER_OVERHEAD": ("start", "end"),
         "CUPTI_ACTIVITY_KIND_RUNTIME": ("start", "end"), "CUPTI_ACTIVITY_KIND_MEMCPY": ("start", "end"),
         "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": ("start", "end"), "CUPTI_ACTIVITY_KIND_KERNEL": ("start", "end"),
         "NVTX_EVENTS": ("start", "end"), "CUPTI_ACTIVITY_KIND_MEMSET": ("start", "end"),
         "OSRT_API": ("start", "end")}


def _derive(dest, rank=None, shift_ns=0, utc_plus_ns=0, drop_start_time=False, world=None):
    shutil.copy(SRC, dest)
    con = sqlite3.connect(dest)
    with con:
        if rank is not None:
            con.execute("INSERT INTO META_DATA_CAPTURE (name, value) VALUES ('PROCESS_0:ENVIRONMENT_VARIABLE', ?)",
                        (f'RANK="{rank}"',))
        if world is not None:
            con.execute("INSERT INTO META_DATA_CAPTURE (name, value) VALUES ('PROCESS_0:ENVIRONMENT_VARIABLE', ?)",
                        (f'WORLD_SIZE="{world}"',))
        for table, cols in SHIFT.items():
            if shift_ns:
                con.execute(f'UPDATE "{table}" SET ' + ", ".join(f'"{c}" = "{c}" - {shift_ns}' for c in cols))
        if utc_plus_ns:
            con.execute(f"UPDATE TARGET_INFO_SESSION_START_TIME SET utcEpochNs = utcEpochNs + {utc_plus_ns}")
        if drop_start_time:
            con.execute("DROP TABLE TARGET_INFO_SESSION_START_TIME")
    con.close()
    return dest


@pytest.fixture(scope="module")
def nsys_pair_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("nsys_pair")
    _derive(d / "report_0.sqlite", rank=0)
    _derive(d / "report_7.sqlite", rank=1, shift_ns=D, utc_plus_ns=D)
    return d


def test_the_ranks_come_from_the_recorded_environment_and_sit_on_one_clock(nsys_pair_dir):
    nr = load_nsys_ranks(nsys_pair_dir)
    assert nr.ranks == [0, 1]
    info = nr.info.set_index("rank")
    assert info.loc[1, "path"].endswith("report_7.sqlite")
    assert info["rank_from"].tolist() == ["RANK in the process environment"] * 2
    assert info["offset_ns"].tolist() == [0, D]
    assert info.loc[1, "session_start_utc_ns"] - info.loc[0, "session_start_utc_ns"] == D
    # on each session's own clock rank 1's events are D earlier; aligned they coincide
    own0, own1 = nr.reports[0].kernels, nr.reports[1].kernels
    assert (own0["start_ns"] - own1["start_ns"] == D).all()
    k = nr.table("kernels")
    a, b = k[k["rank"] == 0].reset_index(drop=True), k[k["rank"] == 1].reset_index(drop=True)
    assert len(a) == len(b) == len(load_nsys(SRC).kernels)
    assert a["start_ns"].equals(b["start_ns"]) and a["end_ns"].equals(b["end_ns"])
    assert a["dur_ns"].equals(own1["dur_ns"].reset_index(drop=True))
    nv = nr.table("nvtx")
    assert nv.groupby("rank")["start_ns"].min().tolist() == [int(load_nsys(SRC).nvtx["start_ns"].min())] * 2


def test_nsys_stats_per_rank(nsys_pair_dir):
    nr = load_nsys_ranks(sorted(nsys_pair_dir.glob("*.sqlite")))
    for report in ("cuda_gpu_kern_sum", "nvtx_sum"):
        st = nr.stats(report)
        assert st.columns[0] == "rank" and sorted(st["rank"].unique()) == [0, 1]
        want = nsys_stats(load_nsys(SRC), report)
        for r in (0, 1):
            got = st[st["rank"] == r].drop(columns="rank").reset_index(drop=True)
            pd.testing.assert_frame_equal(got, want)
    # and the shipped CSV of nsys stats itself, for rank 1's shifted copy
    csv = pd.read_csv(reference_dir() / "nsys_8step" / "nsys_stats" / "cuda_gpu_kern_sum.csv")
    got = nr.stats("cuda_gpu_kern_sum")
    got = got[got["rank"] == 1].drop(columns="rank").reset_index(drop=True)
    assert got["Total Time (ns)"].tolist() == csv["Total Time (ns)"].tolist()


def test_the_file_name_marks_the_rank_when_the_environment_does_not(tmp_path):
    _derive(tmp_path / "report_0.sqlite")
    _derive(tmp_path / "report_1.sqlite", shift_ns=D, utc_plus_ns=D)
    nr = load_nsys_ranks(tmp_path)
    assert nr.ranks == [0, 1] and nr.info["rank_from"].tolist() == ["file name"] * 2


def test_what_the_reader_refuses(tmp_path):
    a = _derive(tmp_path / "a.sqlite", rank=0)
    with pytest.raises(KitFileError, match="so is"):
        load_nsys_ranks([a, _derive(tmp_path / "b.sqlite", rank=0)])
    with pytest.raises(KitFileError, match="says not which rank"):
        load_nsys_ranks([_derive(tmp_path / "c.sqlite"), _derive(tmp_path / "d.sqlite")])
    with pytest.raises(KitFileError, match="TARGET_INFO_SESSION_START_TIME"):
        load_nsys_ranks([a, _derive(tmp_path / "e.sqlite", rank=1, drop_start_time=True)])
    with pytest.raises(KitFileError, match="different runs"):
        load_nsys_ranks([a, _derive(tmp_path / "f.sqlite", rank=1, utc_plus_ns=3600 * 10**9)])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(KitFileError, match="holds no Nsight"):
        load_nsys_ranks(empty)


def test_a_missing_rank_of_the_recorded_world_size_is_named(tmp_path):
    """Issue 41: one export of a two-rank run loaded alone as the whole run."""
    one = tmp_path / "one"
    one.mkdir()
    _derive(one / "report_0.sqlite", rank=0, world=2)
    con = sqlite3.connect(one / "report_0.sqlite")         # the environment as the export holds it
    env = [v for (v,) in con.execute("SELECT value FROM META_DATA_CAPTURE WHERE name LIKE '%ENVIRONMENT_VARIABLE'")]
    con.close()
    assert 'WORLD_SIZE="2"' in env and 'RANK="0"' in env
    with pytest.raises(KitFileError) as info:
        load_nsys_ranks(one)
    print(info.value)
    assert str(info.value).startswith(f"{one}: holds the export(s) of rank(s) 0 of a run of WORLD_SIZE 2: "
                                      "rank(s) 1 missing")
    assert load_nsys_ranks(one, partial=True).ranks == [0]
    _derive(one / "report_1.sqlite", rank=1, world=2, shift_ns=D, utc_plus_ns=D)
    assert load_nsys_ranks(one).ranks == [0, 1]
    with pytest.raises(KitFileError, match="different WORLD_SIZE values"):
        load_nsys_ranks([one / "report_0.sqlite", _derive(tmp_path / "w.sqlite", rank=1, world=4)])


def test_the_torchrun_recipe_command_lines():
    cmd = N.torchrun_profile_command("nsys_8step", 4, "runs/x/report", nsys="/opt/nsys", python="/py",
                                     device="cpu", workload_args=["--straggler-rank", "1", "--straggler-ms", "500"])
    i = cmd.index("/opt/nsys")
    assert cmd[:i] == ["/py", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4", "--no-python"]
    single = N.profile_command("nsys_8step", "runs/x/report_%q{RANK}", nsys="/opt/nsys", python="/py",
                               workload_args=["--device", "cpu", "--straggler-rank", "1", "--straggler-ms", "500"])
    assert cmd[i:] == single                   # each rank: the one-process recipe, its report named by RANK
    assert cmd[cmd.index("-o") + 1] == "runs/x/report_%q{RANK}"
    assert cmd[-6:] == ["--device", "cpu", "--straggler-rank", "1", "--straggler-ms", "500"]
    assert "run-workload" in cmd and cmd.count("profile") == 1
    ex = N.torchrun_export_commands(4, "runs/x/report", nsys="/opt/nsys")
    assert ex[3] == ["/opt/nsys", "export", "--type", "sqlite", "--force-overwrite", "true",
                     "-o", "runs/x/report_3.sqlite", "runs/x/report_3.nsys-rep"]
    assert len(ex) == 4
    for bad in (0, -1, 1.5, True):
        with pytest.raises(KitError, match="nproc"):
            N.torchrun_profile_command("nsys_8step", bad)
    # run-workload takes the straggler options the recipe passes on
    a = N._parser().parse_args(["run-workload", "--straggler-rank", "1", "--straggler-ms", "500"])
    assert (a.straggler_rank, a.straggler_ms) == (1, 500.0)
