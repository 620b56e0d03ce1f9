"""kitlib.readers.nsys on damaged copies of the H200 export nsys_8step (issue 17).

Every kind of damage ends as a refusal (NsysFormatError naming the file, table, column
and first row) or as a report that loads with the defect counted in
``NsysReport.defects`` and announced by a KitDataWarning: never a bare exception, a
negative duration, an overflowing total or a silently empty table. Expected values
come from the untouched export (its raw tables and the nsys stats CSVs).
"""
import sqlite3
import warnings

import pytest

from kitlib.analyses import align, coldstart, steps
from kitlib.errors import KitDataWarning, KitError, NsysFormatError
from kitlib.readers.nsys import DEFECT_COLUMNS, STATS_REPORTS, load_nsys, nsys_stats

from conftest import REF
from support.damage import NSYS_8STEP, damaged_export
from support.errors import refused

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
CSV = REF / "nsys_8step" / "nsys_stats"


def _query(sql):
    con = sqlite3.connect(NSYS_8STEP)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module")
def sound():
    with warnings.catch_warnings():
        warnings.simplefilter("error", KitDataWarning)
        return load_nsys(NSYS_8STEP)


def _nsys_refused(path, *words):
    return refused(load_nsys, path, NsysFormatError, *words)


def _loaded(path, *problems):
    """Load with the KitDataWarning each defect must raise; return the report."""
    with pytest.warns(KitDataWarning) as got:
        rep = load_nsys(path)
    text = " ".join(str(w.message) for w in got)
    assert str(path) in text
    for p in problems:
        assert p in text, text
    assert list(rep.defects.columns) == DEFECT_COLUMNS
    return rep


def _every_report_and_analysis(rep):
    """Every nsys stats report and the analyses that take a report give a result or
    a kitlib error; return the stats tables."""
    out = {name: nsys_stats(rep, name) for name in STATS_REPORTS}
    for table in out.values():
        for c in ("Total Time (ns)", "Min (ns)", "Total Proj Time (ns)", "Proj Min (ns)"):
            if c in table and len(table):
                assert (table[c] >= 0).all(), table
    calls = [steps.steps_of, steps.device_work, steps.labelled_ranges, align.gpu_work,
             lambda r: coldstart.gap_activity(r, 9_000_000_000, 9_400_000_000),
             coldstart.traced_processes]
    for fn in calls:
        try:
            fn(rep)
        except KitError:
            pass
    return out


def test_sound_export_has_no_defects(sound):
    assert sound.defects.empty
    assert list(sound.defects.columns) == DEFECT_COLUMNS
    assert "defects read around: none" in sound.describe()


# --------------------------------------------------------------------------- refused
@pytest.mark.parametrize("table,column", [(RUNTIME, "globalTid"), (KERNEL, "globalPid"),
                                          ("OSRT_API", "globalTid"), ("NVTX_EVENTS", "globalTid")])
def test_text_in_global_tid_is_refused(tmp_path, table, column):
    p = damaged_export(tmp_path, f"UPDATE {table} SET {column} = 'main thread' WHERE rowid = 7")
    _nsys_refused(p, f"table {table}, column '{column}'", "1 row(s) hold text",
             "first at rowid 7: 'main thread'")


@pytest.mark.parametrize("value,what", [("'soon'", "text"), ("x'00ff'", "binary data"),
                                        ("1.5", "a fraction")])
@pytest.mark.parametrize("column", ["start", "end"])
def test_text_binary_or_fraction_kernel_time_is_refused(tmp_path, column, value, what):
    p = damaged_export(tmp_path, f"UPDATE {KERNEL} SET {column} = {value} WHERE rowid = 5")
    _nsys_refused(p, f"table {KERNEL}, column '{column}'", f"hold {what}", "first at rowid 5")


def test_text_correlation_id_is_refused(tmp_path):
    # It used to become a missing value, silently unlinking the kernel from its launch.
    p = damaged_export(tmp_path, f"UPDATE {KERNEL} SET correlationId = 'c' || correlationId "
                                 "WHERE rowid <= 3")
    _nsys_refused(p, f"table {KERNEL}, column 'correlationId'", "3 row(s) hold text",
             "first at rowid 1")


def test_empty_stringids_is_refused(tmp_path):
    p = damaged_export(tmp_path, "DELETE FROM StringIds")
    _nsys_refused(p, "table StringIds", "is empty", f"4340 row(s) of {KERNEL}", "demangledName")


@pytest.mark.parametrize("table,column,why", [
    ("StringIds", "value", "holds every name"),
    (RUNTIME, "nameId", "name each call"),
    ("OSRT_API", "nameId", "name each call"),
    (KERNEL, "end", "place its events in time"),
    ("ThreadNames", "globalTid", "tell the threads apart"),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", "bytes", "bytes each operation moved"),
])
def test_missing_column_names_table_and_column(tmp_path, table, column, why):
    # A schema problem, not "corrupt or truncated"; nameId used to load with every
    # name missing and cuda_api_sum / osrt_sum silently empty.
    p = damaged_export(tmp_path, f"ALTER TABLE {table} DROP COLUMN {column}")
    msg = _nsys_refused(p, f"table {table} has no column '{column}'", why)
    assert "corrupt" not in msg


# --------------------------------------------------------------------------- loaded, counted
def test_null_kernel_start_or_end_is_left_out_and_counted(tmp_path, sound):
    p = damaged_export(tmp_path, f"UPDATE {KERNEL} SET start = NULL WHERE rowid = 5",
                       f"UPDATE {KERNEL} SET end = NULL WHERE rowid IN (8, 9)")
    rep = _loaded(p, f"{KERNEL}.start: 1 NULL", f"{KERNEL}.end: 2 NULL")
    d = rep.defects.set_index("column")
    assert (d.loc["start", "rows"], d.loc["start", "first_rowid"]) == (1, 5)
    assert (d.loc["end", "rows"], d.loc["end", "first_rowid"]) == (2, 8)
    assert len(rep.kernels) == len(sound.kernels) - 3 == 4337
    assert rep.kernels["start_ns"].dtype == "int64" and rep.kernels["end_ns"].dtype == "int64"
    # untouched tables keep every row
    assert len(rep.launches) == len(sound.launches) and len(rep.nvtx) == len(sound.nvtx)
    ks = _every_report_and_analysis(rep)["cuda_gpu_kern_sum"]
    assert ks["Instances"].sum() == 4337
    assert len(steps.steps_of(rep)) == 8


def test_end_before_start_is_left_out_not_negative(tmp_path):
    (dur,), = _query(f"SELECT end - start FROM {KERNEL} WHERE rowid = 5")
    p = damaged_export(tmp_path, f"UPDATE {KERNEL} SET end = start - 100 WHERE rowid = 5",
                       "UPDATE NVTX_EVENTS SET end = start - 5 WHERE rowid = 3")
    rep = _loaded(p, f"{KERNEL}.end: 1 end before start", "NVTX_EVENTS.end: 1 end before start")
    assert (rep.kernels["dur_ns"] >= 0).all() and (rep.nvtx["dur_ns"].dropna() >= 0).all()
    ks = _every_report_and_analysis(rep)["cuda_gpu_kern_sum"]
    total = _query(f"SELECT SUM(end - start) FROM {KERNEL}")[0][0]
    assert ks["Total Time (ns)"].sum() == total - dur
    assert 3 not in set(rep.nvtx["range_id"])       # the first step's forward range
    # the other ranges still project (it used to empty nvtx_gpu_proj_sum)
    proj = nsys_stats(rep, "nvtx_gpu_proj_sum").set_index("Range")["Range Instances"].to_dict()
    assert proj == {":torch_step": 8, ":forward": 7, ":data_load": 8, ":optimizer": 8,
                    ":backward": 8}
    assert (nsys_stats(rep, "nvtx_gpu_proj_sum")["Proj Min (ns)"] >= 0).all()


def test_end_at_int64_max_does_not_overflow_total_time(tmp_path):
    (dur,), = _query(f"SELECT end - start FROM {KERNEL} WHERE rowid = 5")
    p = damaged_export(tmp_path, f"UPDATE {KERNEL} SET end = 9223372036854775807 WHERE rowid = 5",
                       f"UPDATE {RUNTIME} SET end = start + (1 << 51) WHERE rowid = 2")
    rep = _loaded(p, "a time beyond +/-2**62 ns", "a duration over 2**50 ns")
    ks = nsys_stats(rep, "cuda_gpu_kern_sum")
    total = _query(f"SELECT SUM(end - start) FROM {KERNEL}")[0][0]
    assert ks["Total Time (ns)"].sum() == total - dur
    assert (ks["Total Time (ns)"] > 0).all()
    assert len(rep.launches) == 12083


def test_null_names_and_dangling_string_ids_get_placeholders(tmp_path):
    # A NULL nameId, or an id missing from StringIds, must not vanish from the
    # per-name reports (a group-by drops missing keys).
    (sid,), = _query(f"SELECT nameId FROM {RUNTIME} WHERE rowid = 4")
    p = damaged_export(tmp_path, f"UPDATE {RUNTIME} SET nameId = NULL WHERE rowid = 3",
                       f"DELETE FROM StringIds WHERE id = {sid}")
    rep = _loaded(p, f"{RUNTIME}.nameId: 1 NULL string id", "string id not in StringIds")
    api = nsys_stats(rep, "cuda_api_sum")
    assert api["Num Calls"].sum() == 12084
    assert "[unnamed]" in set(api["Name"]) and f"[string id {sid}]" in set(api["Name"])


def test_null_nvtx_start_is_left_out_and_counted(tmp_path, sound):
    p = damaged_export(tmp_path, "UPDATE NVTX_EVENTS SET start = NULL WHERE rowid = 3")
    rep = _loaded(p, "NVTX_EVENTS.start: 1 NULL")
    assert len(rep.nvtx) == 39 and 3 not in set(rep.nvtx["range_id"])
    assert len(steps.steps_of(rep)) == 8
    _every_report_and_analysis(rep)


@pytest.mark.parametrize("damage,problem", [
    ("UPDATE NVTX_EVENTS SET end = NULL", "NULL in every range: none was closed"),
    ("ALTER TABLE NVTX_EVENTS DROP COLUMN end", "column absent: every range reads as never closed"),
])
def test_all_nvtx_ranges_open_is_reported(tmp_path, damage, problem):
    # nvtx_sum empties, as nsys stats does for open ranges, but not without a word.
    rep = _loaded(damaged_export(tmp_path, damage), problem)
    assert len(rep.nvtx) == 40 and rep.nvtx["end_ns"].isna().all()
    assert rep.defects["rows"].sum() == 40
    out = _every_report_and_analysis(rep)
    assert out["nvtx_sum"].empty
    # an open range projects to the last GPU operation it encloses
    assert len(out["nvtx_gpu_proj_sum"]) > 0
    with pytest.raises(KitError, match="no steps found"):
        steps.steps_of(rep)


def test_nvtx_events_with_zero_rows_loads_empty_tables(tmp_path):
    # Real exports can have the table with no rows; no defect, typed empty tables.
    with warnings.catch_warnings():
        warnings.simplefilter("error", KitDataWarning)
        rep = load_nsys(damaged_export(tmp_path, "DELETE FROM NVTX_EVENTS"))
    assert rep.nvtx.empty and rep.marks.empty and rep.defects.empty
    assert rep.nvtx["start_ns"].dtype == "int64"
    out = _every_report_and_analysis(rep)
    assert out["nvtx_sum"].empty and out["nvtx_gpu_proj_sum"].empty
    assert len(out["cuda_gpu_kern_sum"]) == 63


def test_null_bytes_keep_the_row_out_of_the_size_report_only(tmp_path, sound):
    p = damaged_export(tmp_path, "UPDATE CUPTI_ACTIVITY_KIND_MEMSET SET bytes = NULL WHERE rowid = 1")
    rep = _loaded(p, "CUPTI_ACTIVITY_KIND_MEMSET.bytes: 1 NULL")
    assert len(rep.sets) == len(sound.sets) == 1612
    out = _every_report_and_analysis(rep)
    time_sum = out["cuda_gpu_mem_time_sum"].set_index("Operation")
    size_sum = out["cuda_gpu_mem_size_sum"].set_index("Operation")
    assert time_sum.loc["[CUDA memset]", "Count"] == 1612
    assert size_sum.loc["[CUDA memset]", "Count"] == 1611


def test_empty_thread_names_table_loads_empty(tmp_path):
    # Real exports can have no thread names; the threads table is empty and typed.
    with warnings.catch_warnings():
        warnings.simplefilter("error", KitDataWarning)
        rep = load_nsys(damaged_export(tmp_path, "DELETE FROM ThreadNames"))
    assert rep.threads.empty and rep.threads["pid"].dtype == "int64"
    assert len(rep.kernels) == 4340
