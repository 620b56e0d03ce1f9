"""Bundles the kit itself recorded live on an H200 (tests/data/live-h200-2026-11-30):
the live code paths (key_averages.json written by the kit, the kit's own Nsight capture)
read back with the same analyses as the reference recordings."""
from pathlib import Path

import pytest

from kitlib.course import exercises
from kitlib import open_capture
from kitlib.analyses.chain import chain, first_op, launches_of
from kitlib.readers.profiler_table import profiler_table
from kitlib.readers.nsys import load_nsys, nsys_stats

LIVE = Path(__file__).resolve().parent / "data" / "live-h200-2026-11-30"


@pytest.fixture(scope="module")
def live():
    return open_capture(LIVE / "profiler_full")


def test_live_bundle_provenance(live):
    assert live.origin == "live" and live.kind == "torch_profiler"
    assert live.provenance["gpu"] == "NVIDIA H200" and live.provenance["torch"].startswith("2.11")
    assert live.workload["batch_size"] == 128 and live.recipe["with_stack"] is True
    for f in live.files:
        live.file(f)  # every sha256 checks out


def test_live_chain_has_the_same_shape_as_the_reference(live):
    tr = live.trace
    c = chain(tr)
    assert (c["link"] == "external_id").all() and len(c) == len(tr.kernels)
    rows = launches_of(tr, first_op(tr, "aten::cudnn_convolution", step=int(tr.steps["step"].iloc[0])))
    assert len(rows) == 3 and rows["gpu_dur_ns"].idxmax() == 2
    assert rows.loc[2, "gpu_dur_ns"] == 725_818  # the live H200's main kernel (reference: 732,513 ns)
    assert rows.loc[2, "launch_name"] == "cudaLaunchKernelExC"


def test_key_averages_written_by_the_kit(live):
    ka = live.key_averages()
    assert {"by_name", "by_input_shape", "by_stack_5"} <= set(ka)
    assert sum(1 for r in ka["by_stack_5"] if r["stack"]) > 1000  # stacks kept (verbose config)
    table, totals = profiler_table(live)
    conv = table.set_index("name").loc["aten::cudnn_convolution"]
    assert conv["calls"] == 265
    assert totals["self_cuda_total_ns"] == live.trace.kernels["dur_ns"].sum()
    assert table["self_cuda_pct"].notna().all()
    assert table.loc[table["name"] == "forward", "self_cuda_pct"].iloc[0] > 50  # the annotation row


@pytest.mark.parametrize("n", ["00", "01", "02", "04", "05", "06", "07"])
def test_exercises_build_on_a_live_capture(live, n):
    ex = getattr(exercises, f"lesson{n}")(live)
    for q in ex.questions:
        assert q.judge(q.answer).correct is True


def test_live_nsys_bundle():
    rep = load_nsys(open_capture(LIVE / "nsys_8step"))
    assert len(rep.kernels) == 4340 and rep.gpus["name"].iloc[0] == "NVIDIA H200"
    steps = rep.nvtx[rep.nvtx["name"].str.startswith("torch_step")]
    assert len(steps) == 8
    first = rep.nvtx[rep.nvtx["name"] == "data_load"].sort_values("start_ns").iloc[0]
    assert first["dur_ns"] == 1_086_324_449  # the cold first batch, 1.086 s on this run
    k = nsys_stats(rep, "cuda_gpu_kern_sum")
    assert k["Instances"].sum() == 4340
