"""kitlib.readers.nsys on the H200 reference exports, a public Nsight 2024.5 export, and bad input.

Ground truth: the CSVs `nsys stats --format csv` (Nsight Systems 2025.3) wrote for the
same report.sqlite files (data/reference/*/nsys_stats/), and the raw SQLite tables.
"""
import shutil
import sqlite3

import pandas as pd
import pytest

from kitlib import open_capture
from kitlib.errors import KitFileError, NsysFormatError
from kitlib.readers.nsys import STATS_REPORTS, decode_global_tid, load_nsys, nsys_stats, nvtx_gpu_projection

from conftest import PUBLIC, REF
from support.errors import refused

NSYS_8STEP = REF / "nsys_8step" / "report.sqlite"
EMIT_NVTX = REF / "nsys_emit_nvtx" / "report.sqlite"
CLOVERLEAF = PUBLIC / "nsys_2024.5_a100_cloverleaf.sqlite"


@pytest.fixture(scope="module")
def emit():
    return load_nsys(EMIT_NVTX)


@pytest.fixture(scope="module")
def clover():
    return load_nsys(CLOVERLEAF)


# --------------------------------------------------------------------------- tables
def test_kernels(nsys_8step_report):
    k = nsys_8step_report.kernels
    assert len(k) == 4340
    assert (k["dur_ns"] == k["end_ns"] - k["start_ns"]).all()
    assert k["start_ns"].is_monotonic_increasing
    # The first convolution kernel of the recording (cf. profiler_5step: 732.513 µs there).
    conv = k[k["short_name"].str.startswith("sm80_xmma_fprop_implicit_gemm_indexed")].iloc[0]
    assert conv["dur_ns"] == 732863
    assert conv["start_ns"] == 11112333311
    assert conv["grid"] == (2, 12544, 1) and conv["block"] == (128, 1, 1)
    assert (conv["correlation"], conv["pid"], conv["tid"], conv["device"], conv["stream"]) == \
        (8909, 1213, 1213, 0, 7)
    assert conv["name"] == conv["short_name"]           # not a template: no demangled extras
    first = k.iloc[0]
    assert first["short_name"] == "elementwise_kernel"
    assert first["name"].startswith("void at::native::elementwise_kernel<(int)128, (int)2, ")


def test_launches_names_and_api(nsys_8step_report):
    a = nsys_8step_report.launches
    assert len(a) == 12084
    assert a["api"].value_counts().to_dict() == {"runtime": 7381, "driver": 4703}
    assert set(a.loc[a["raw_name"] == "cudaLaunchKernel_v7000", "name"]) == {"cudaLaunchKernel"}
    assert set(a.loc[a["raw_name"] == "cudaLaunchKernelExC_v11060", "name"]) == \
        {"cudaLaunchKernelExC"}
    assert set(a.loc[a["raw_name"] == "cuGetProcAddress_v2", "name"]) == {"cuGetProcAddress"}
    assert not a["name"].str.contains(r"_v\d+$").any()
    assert a["correlation"].is_unique


def test_every_gpu_op_joins_its_launch(nsys_8step_report):
    ev = nsys_8step_report.gpu_events()
    assert len(ev) == 4340 + 541 + 1612
    assert ev["launch"].notna().all()
    assert (ev["launch_to_start_ns"] > 0).all()         # GPU work starts after its submission
    launchers = ev[ev["kind"] == "kernel"]["launch"].value_counts().to_dict()
    assert launchers == {"cudaLaunchKernel": 1740, "cudaLaunchKernelExC": 1472,
                         "cudaLaunchCooperativeKernel": 848, "cuLaunchKernel": 280}
    assert set(ev.loc[ev["kind"] == "memcpy", "launch"]) == {"cudaMemcpyAsync"}
    assert set(ev.loc[ev["kind"] == "memset", "launch"]) == {"cudaMemsetAsync"}
    # Backward kernels come from the autograd thread, not from the main thread.
    assert ev[ev["kind"] == "kernel"]["tid"].value_counts().to_dict() == {1283: 2360, 1213: 1980}


def test_global_tid_decoding_matches_threadnames_and_processes(nsys_8step_report):
    assert decode_global_tid(281495327474877) == (1213, 1213)
    con = sqlite3.connect(f"file:{NSYS_8STEP}?mode=ro", uri=True)
    procs = con.execute("SELECT globalPid, pid FROM PROCESSES").fetchall()
    raw_threads = con.execute("SELECT globalTid FROM ThreadNames").fetchall()
    con.close()
    assert len(procs) == 201
    for gpid, pid in procs:
        assert decode_global_tid(gpid) == (pid, 0)
    th = nsys_8step_report.threads.set_index("tid")
    assert len(nsys_8step_report.threads) == len(raw_threads) == 289
    assert th.loc[1213, ["pid", "name", "process"]].tolist() == [1213, "python3", "python3"]
    assert th.loc[1283, "name"] == "pt_autograd_0"
    assert th.loc[1258, "name"] == "pt_data_pin"
    # Every CUDA API call comes from a thread the export names.
    named = set(zip(nsys_8step_report.threads["pid"], nsys_8step_report.threads["tid"]))
    assert set(zip(nsys_8step_report.launches["pid"], nsys_8step_report.launches["tid"])) <= named


def test_copies_and_sets(nsys_8step_report):
    c = nsys_8step_report.copies
    assert c.groupby(["copy_kind", "src_kind", "dst_kind"]).size().to_dict() == {
        ("Device-to-Device", "Device", "Device"): 205,
        ("Host-to-Device", "Pageable", "Device"): 320,     # the model's 320 tensors, .to(device)
        ("Host-to-Device", "Pinned", "Device"): 16}        # 8 batches: images and labels
    assert set(c["name"]) == {"[CUDA memcpy Host-to-Device]", "[CUDA memcpy Device-to-Device]"}
    # 711.644 MB in cuda_gpu_mem_size_sum
    assert c.loc[c["copy_kind"] == "Host-to-Device", "bytes"].sum() == 711_643_708
    assert len(nsys_8step_report.sets) == 1612 and set(nsys_8step_report.sets["name"]) == {"[CUDA memset]"}


def test_nvtx_ranges(nsys_8step_report):
    n = nsys_8step_report.nvtx
    assert len(n) == 40 and nsys_8step_report.marks.empty
    assert set(n["style"]) == {"PushPop"} and set(n["domain"]) == {""}
    assert (n["tid"] == 1213).all()
    assert n.groupby("name")["depth"].unique().map(list).to_dict() == {
        "torch_step": [0], "data_load": [1], "forward": [1], "backward": [1], "optimizer": [1]}
    first = n[n["name"] == "data_load"].iloc[0]
    assert first["dur_ns"] == 1_469_484_230                # the cold DataLoader: 1,469.48 ms
    assert n[n["name"] == "data_load"]["dur_ns"].iloc[1:].max() < 500_000


def test_gpus_meta_and_missing(nsys_8step_report):
    assert nsys_8step_report.missing == []
    g = nsys_8step_report.gpus.iloc[0]
    assert (g["name"], g["compute_capability"], g["sm_count"]) == ("NVIDIA H200", "9.0", 132)
    assert nsys_8step_report.version == "2025.3.2.0"
    assert nsys_8step_report.meta["session_end_ns"] - nsys_8step_report.meta["session_start_ns"] == 13_799_268_278


def test_load_from_bundle():
    assert len(load_nsys(open_capture("nsys_8step")).kernels) == 4340
    assert len(open_capture(REF / "nsys_emit_nvtx").nsys.nvtx) == 5378
    # the reader does not open bundle folders itself (that is the bundle layer's job):
    # a folder gets an error that says how to open it
    with pytest.raises(KitFileError, match=r"capture bundle folder.*open_capture"):
        load_nsys(REF / "nsys_emit_nvtx")


# --------------------------------------------------------------------------- nsys stats
CSV_CASES = [("nsys_8step", n) for n in STATS_REPORTS] + \
            [("nsys_emit_nvtx", n) for n in ("nvtx_sum", "nvtx_gpu_proj_sum", "cuda_gpu_kern_sum")]


@pytest.mark.parametrize("recording,report", CSV_CASES)
def test_nsys_stats_equals_csv(recording, report, nsys_8step_report, emit):
    ours = nsys_stats(nsys_8step_report if recording == "nsys_8step" else emit, report)
    theirs = pd.read_csv(REF / recording / "nsys_stats" / f"{report}.csv")
    pd.testing.assert_frame_equal(ours, theirs, check_exact=True, check_dtype=False)


def test_nsys_stats_details(nsys_8step_report):
    api = nsys_stats(nsys_8step_report, "cuda_api_sum")
    # nsys strips only four-digit version suffixes.
    assert {"cudaLaunchKernel", "cudaLaunchKernelExC_v11060", "cuGetProcAddress_v2"} <= \
        set(api["Name"])
    raw = nsys_stats(nsys_8step_report, "nvtx_sum", rounded=False)
    assert raw.loc[raw["Range"] == ":data_load", "Med (ns)"].item() == 407465.5   # even count
    assert raw["Time (%)"].sum() == pytest.approx(100.0)
    with pytest.raises(ValueError, match="unknown nsys stats report"):
        nsys_stats(nsys_8step_report, "cuda_gpu_sum")


def test_nvtx_projection(nsys_8step_report):
    p = nvtx_gpu_projection(nsys_8step_report)
    assert len(p) == 40                                   # every range launched some GPU work
    step0 = p.iloc[:5].set_index("name")
    assert step0.loc["torch_step", ["proj_dur_ns", "gpu_ops", "level", "children"]].tolist() == \
        [1_250_895_505, 505, 0, 4]
    assert step0.loc["data_load", ["proj_dur_ns", "gpu_ops"]].tolist() == [64_596_519, 3]
    # backward: its one main-thread launch; autograd launches the rest from pt_autograd_0.
    assert step0.loc["backward", ["proj_dur_ns", "gpu_ops"]].tolist() == [736, 1]
    assert (p["proj_start_ns"] >= p["start_ns"]).all()


# --------------------------------------------------------------------------- a public export
def test_cloverleaf_public_export(clover):
    assert clover.version == "2024.5.1.113"
    assert clover.missing == ["CUPTI_ACTIVITY_KIND_MEMSET", "NVTX_EVENTS"]
    assert clover.nvtx.empty and list(clover.nvtx.columns)[:3] == ["name", "domain", "style"]
    assert clover.sets.empty and "bytes" in clover.sets.columns
    assert len(clover.gpus) == 4 and set(clover.gpus["name"]) == {"NVIDIA A100-SXM4-80GB"}
    assert len(clover.kernels) == 1312
    ev = clover.gpu_events()
    assert ev["launch"].notna().all()
    assert set(ev.loc[ev["kind"] == "kernel", "launch"]) == {"cudaLaunchKernel"}
    assert set(ev["pid"]) == {1701896} and set(ev["tid"]) == {1701896}
    ks = nsys_stats(clover, "cuda_gpu_kern_sum")
    assert ks["Instances"].sum() == 1312
    assert ks["Total Time (ns)"].sum() == clover.kernels["dur_ns"].sum()
    assert ks["Total Time (ns)"].is_monotonic_decreasing
    top = ks.iloc[0]
    assert (top["Total Time (ns)"], top["Instances"], top["Avg (ns)"]) == (19404589, 10, 1940458.9)
    assert nsys_stats(clover, "nvtx_sum").empty
    assert nsys_stats(clover, "nvtx_gpu_proj_sum").empty


def test_older_schema_without_some_columns_and_tables(tmp_path):
    p = tmp_path / "old.sqlite"
    shutil.copy(NSYS_8STEP, p)
    p.chmod(0o644)
    con = sqlite3.connect(p)
    for table, col in [("CUPTI_ACTIVITY_KIND_KERNEL", "shortName"),
                       ("CUPTI_ACTIVITY_KIND_KERNEL", "gridZ"),
                       ("CUPTI_ACTIVITY_KIND_RUNTIME", "eventClass"),
                       ("NVTX_EVENTS", "domainId"), ("NVTX_EVENTS", "endGlobalTid")]:
        con.execute(f"ALTER TABLE {table} DROP COLUMN {col}")
    for table in ("ENUM_CUDA_MEMCPY_OPER", "ENUM_CUDA_MEM_KIND", "ANALYSIS_DETAILS", "PROCESSES"):
        con.execute(f"DROP TABLE {table}")
    con.commit()
    con.close()
    old = load_nsys(p)
    assert old.kernels["short_name"].isna().all()
    assert old.kernels["grid"].iloc[0][2] is pd.NA
    assert old.launches["api"].value_counts().to_dict() == {"runtime": 7381, "driver": 4703}
    assert old.copies["src_kind"].isna().all()
    for report in ("cuda_gpu_kern_sum", "cuda_gpu_mem_size_sum", "nvtx_sum", "nvtx_gpu_proj_sum"):
        theirs = pd.read_csv(REF / "nsys_8step" / "nsys_stats" / f"{report}.csv")
        pd.testing.assert_frame_equal(nsys_stats(old, report), theirs, check_dtype=False)


# --------------------------------------------------------------------------- bad input
def _raises(path, exc, *words):
    return refused(load_nsys, path, exc, *words)


def test_missing_file(tmp_path):
    _raises(tmp_path / "nope.sqlite", KitFileError, "no such file")


def test_folder(tmp_path):
    _raises(tmp_path, KitFileError, "folder")


def test_empty_file(tmp_path):
    p = tmp_path / "empty.sqlite"
    p.write_bytes(b"")
    _raises(p, NsysFormatError, "empty")


def test_text_file(tmp_path):
    p = tmp_path / "notes.sqlite"
    p.write_text("Time (%),Total Time (ns)\n")
    _raises(p, NsysFormatError, "not an SQLite database")


def test_unexported_nsys_rep(tmp_path):
    p = tmp_path / "run.nsys-rep"
    p.write_bytes(b"\x00\x01\x02binary report" * 10)
    _raises(p, NsysFormatError, "not an SQLite database", "nsys export --type sqlite")


def test_other_sqlite_database(tmp_path):
    p = tmp_path / "other.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE results (name TEXT, value REAL)")
    con.commit()
    con.close()
    _raises(p, NsysFormatError, "not an Nsight Systems export", "results")


def test_truncated_sqlite(tmp_path):
    data = NSYS_8STEP.read_bytes()
    p = tmp_path / "cut.sqlite"
    p.write_bytes(data[: len(data) // 2])
    _raises(p, NsysFormatError, "truncated", str(len(data)))
    p.write_bytes(data[:60])
    _raises(p, NsysFormatError, "truncated")


def test_truncated_sqlite_without_page_count(tmp_path):
    # With the header's page count marked stale, only SQLite itself notices the cut.
    data = bytearray(NSYS_8STEP.read_bytes()[:600_000])
    data[92:96] = b"\x00\x00\x00\x00"
    p = tmp_path / "cut.sqlite"
    p.write_bytes(bytes(data))
    msg = _raises(p, NsysFormatError, "corrupt or truncated")
    assert "Execution failed" not in msg


def test_nsys_stats_on_a_bad_path(tmp_path):
    with pytest.raises(KitFileError):
        nsys_stats(tmp_path / "nope.sqlite", "nvtx_sum")


def test_renamed_required_column_is_refused(tmp_path):
    import shutil
    import sqlite3
    from kitlib.errors import NsysFormatError
    p = tmp_path / "renamed.sqlite"
    shutil.copy(REF / "nsys_8step" / "report.sqlite", p)
    con = sqlite3.connect(p)
    con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME COLUMN correlationId TO corrId")
    con.commit()
    con.close()
    with pytest.raises(NsysFormatError, match="CUPTI_ACTIVITY_KIND_KERNEL has no column 'correlationId'"):
        load_nsys(p)
