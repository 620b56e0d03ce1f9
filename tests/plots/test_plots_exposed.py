"""Lesson 12's bucket picture (plot_exposed_communication) and the rank timeline's
unmatched calls, read back from what matplotlib drew (issue 29, part A): every bar's
place and length against the hand-built pair worked out on paper and against the raw
JSON of the public NCCL pair and the kit's Gloo straggler run."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from conftest import merged_length  # noqa: E402
from kitlib.analyses import collectives as coll  # noqa: E402
from kitlib.plots.ranks import COLOURS, EXPOSED_LABELS, plot_exposed_communication, plot_rank_timeline  # noqa: E402
from kitlib.readers.ranks import load_traces  # noqa: E402
from support.collectives import paper_ranks  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "data" / "reference"
NCCL = REF / "public-traces"


def _drawn(ax) -> dict:
    """{(lane label, colour key or "outline"): sorted [(x, width)]} of every broken_barh
    collection, each rectangle given to the lane whose tick is nearest its middle."""
    ticks = {y: t.get_text() for y, t in zip(ax.get_yticks(), ax.get_yticklabels())}
    by_face = {tuple(np.round(to_rgba(v), 4)): k for k, v in COLOURS.items()}
    out = {}
    for c in ax.collections:
        fc = np.atleast_2d(c.get_facecolor())
        key = "outline" if fc.size == 0 or fc[0][3] == 0 else by_face[tuple(np.round(fc[0], 4))]
        for p in c.get_paths():
            v = p.vertices
            x0, x1, y0, y1 = v[:, 0].min(), v[:, 0].max(), v[:, 1].min(), v[:, 1].max()
            lane = ticks[min(ticks, key=lambda t: abs(t - (y0 + y1) / 2))]
            assert min(abs(t - (y0 + y1) / 2) for t in ticks) < 1e-9        # centred on its lane
            out.setdefault((lane, key), []).append((round(x0, 9), round(x1 - x0, 9)))
    return {k: sorted(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def paper(tmp_path_factory):
    return paper_ranks(tmp_path_factory.mktemp("paper_plot"))


def test_bucket_picture_of_the_pair_worked_out_on_paper(paper):
    """x = ms since the earliest piece (rank 1's seq 6 at 0.2 ms). Rank 0 computes [1, 3):
    its call seq 7 [1.5, 5) waits to 4 (beside compute to 3), then transfers; seq 8 [6, 7)
    has no verified match. Rank 1: seq 6 [0.2, 0.6) and seq 8 [20, 21) unmatched, seq 7
    [4, 5) transfer, computing [1, 4)."""
    ax = plot_exposed_communication(paper)
    got = _drawn(ax)
    assert got == {
        ("rank 0 compute", "compute"): [(0.8, 0.5), (1.3, 1.5)],
        ("rank 0 communication", "wait"): [(1.3, 1.5), (2.8, 1.0)],
        ("rank 0 communication", "transfer"): [(3.8, 1.0)],
        ("rank 0 communication", "unmatched"): [(5.8, 1.0)],
        ("rank 0 communication", "outline"): [(1.3, 3.5), (5.8, 1.0)],
        ("rank 0 exposed", "exposed"): [(2.8, 1.0), (3.8, 1.0), (5.8, 1.0)],
        ("rank 1 compute", "compute"): [(0.8, 3.0)],
        ("rank 1 communication", "transfer"): [(3.8, 1.0)],
        ("rank 1 communication", "unmatched"): [(0.0, 0.4), (19.8, 1.0)],
        ("rank 1 communication", "outline"): [(0.0, 0.4), (3.8, 1.0), (19.8, 1.0)],
        ("rank 1 exposed", "exposed"): [(0.0, 0.4), (3.8, 1.0), (19.8, 1.0)]}
    assert ax.get_title() == ("step 1: rank 0 exposed 3.0 of 4.5 ms of communication;\n"
                              "rank 1 exposed 2.4 of 2.4 ms of communication")
    assert ax.get_xlim() == pytest.approx((0, 20.8))
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == list(EXPOSED_LABELS.values())
    assert "ms" in ax.get_xlabel() and "step 1" in ax.get_xlabel()
    plt.close(ax.figure)


def _raw_exposed(path: Path, step: int, gpu: bool) -> float:
    """|C \\ P| in ms from one rank's raw JSON: C the collectives starting in
    ProfilerStep#step (NCCL kernels, or gloo:* events), P the other kernels, or every
    operator on the ProfilerStep's thread but the collective ones."""
    doc = json.loads(gzip.decompress(path.read_bytes()))
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    a, b = next((e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"] == f"ProfilerStep#{step}")
    if gpu:
        comm_all = [e for e in ev if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_")]
        comp = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") == "kernel"
                and not e["name"].startswith("ncclKernel_")]
    else:
        comm_all = [e for e in ev if e["name"].startswith("gloo:")]
        main = {e["tid"] for e in ev if e["name"].startswith("ProfilerStep#")}
        comp = [(e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") == "cpu_op" and e["tid"] in main
                and not e["name"].startswith(("record_param_comms", "c10d::", "nccl:", "gloo:"))]
    c = [(e["ts"], e["ts"] + e["dur"]) for e in comm_all if a <= e["ts"] < b]
    return (merged_length(c) - (merged_length(c) + merged_length(comp) - merged_length(c + comp))) / 1e3


@pytest.mark.parametrize("run,step", [("public", 551), ("ranks_straggler", 2)])
def test_bucket_picture_of_the_recordings_draws_the_raw_exposure(run, step):
    """The black bars of each rank add up to its exposed communication worked out from the
    raw JSON; the outlines are its calls in the step; every bar lies inside the view."""
    rt = load_traces(NCCL if run == "public" else run, partial=run == "public")
    ax = plot_exposed_communication(rt)
    got = _drawn(ax)
    calls = coll.collectives(rt)
    for r in (0, 1):
        path = (NCCL / f"hta_2024-03_nccl_sampled_rank{r}.json.gz" if run == "public"
                else REF / run / f"rank{r}" / "trace.json.gz")
        black = sum(w for _, w in got[(f"rank {r} exposed", "exposed")])
        assert black == pytest.approx(_raw_exposed(path, step, run == "public"), abs=2e-3)
        mine = calls[(calls["rank"] == r) & (calls["step"] == step)]
        assert sorted(w for _, w in got[(f"rank {r} communication", "outline")]) == \
            pytest.approx(sorted(mine["dur_ns"] / 1e6), abs=1e-6)
    lo, hi = ax.get_xlim()
    for bars in got.values():
        for x, w in bars:
            assert lo - 1e-9 <= x and x + w <= hi + 1e-6
    plt.close(ax.figure)


def test_rank_timeline_draws_unmatched_calls_whole_and_waits_only_for_verified_ones():
    """The public pair's timeline: its 12 rows of calls without a verified match are drawn
    whole in their own colour; red (waiting) is only rank 0's waits at the four verified
    calls, 3.302 + 0.084 + 22.328 + 1.292 = 27.006 ms, and none on rank 1 (it was later at
    each). Before matching by identity, rank 0's first all-to-all was drawn 100 % waiting
    for a call rank 1 started after it had ended."""
    rt = load_traces(NCCL, partial=True)
    ax = plot_rank_timeline(rt)
    ticks = {y: t.get_text() for y, t in zip(ax.get_yticks(), ax.get_yticklabels())}
    widths = {}
    for c in ax.collections:
        key = tuple(np.round(np.atleast_2d(c.get_facecolor())[0], 4))
        for p in c.get_paths():
            v = p.vertices
            lane = ticks[min(ticks, key=lambda t: abs(t - (v[:, 1].min() + v[:, 1].max()) / 2))]
            widths.setdefault((lane, key), []).append(v[:, 0].max() - v[:, 0].min())
    col = {k: tuple(np.round(to_rgba(v), 4)) for k, v in COLOURS.items()}
    assert sum(widths[("rank 0", col["wait"])]) == pytest.approx(27.006, abs=1e-6)
    assert sum(widths.get(("rank 1", col["wait"]), [0.0])) == pytest.approx(0.0, abs=1e-9)
    m = coll.collective_matches(rt)
    calls = coll.collectives(rt)
    lone = calls[~calls["call"].isin(set(m.loc[m["verified"], "call"]))]
    for r in (0, 1):
        assert sorted(widths[(f"rank {r}", col["unmatched"])]) == pytest.approx(
            sorted(lone.loc[lone["rank"] == r, "dur_ns"] / 1e6), abs=1e-6)
    assert len(lone) == 12
    assert "collective without a verified match (not split)" in [t.get_text() for t in ax.get_legend().get_texts()]
    plt.close(ax.figure)


def test_bucket_picture_text_is_at_least_9_px_and_follows_the_scale():
    """As every picture of the kit (issue 27): each text at least 9 px at scale 1, and 1.5
    times that at the projector scale."""
    from kitlib import plots
    rt = load_traces("ranks_straggler")

    def sizes():
        fig = plot_exposed_communication(rt).figure
        fig.canvas.draw()
        out = sorted((t.get_text(), t.get_fontsize() * fig.dpi / 72) for t in fig.findobj(matplotlib.text.Text)
                     if t.get_visible() and t.get_text().strip())
        plt.close(fig)
        return out
    try:
        plots.set_scale(1.0)
        one = sizes()
        plots.set_scale(1.5)
        big = sizes()
    finally:
        plots.set_scale(1.0)
    assert one and min(px for _, px in one) >= 9
    # the time axis' numbers excepted: matplotlib places fewer of them when larger text meets
    # the same width (kitlib.plots.MAX_WIDTH_IN)
    one, big = ([(t, px) for t, px in x if not t.replace(",", "").isdigit()] for x in (one, big))
    assert [t for t, _ in one] == [t for t, _ in big] and len(one) >= 8
    assert [px for _, px in big] == pytest.approx([1.5 * px for _, px in one])
