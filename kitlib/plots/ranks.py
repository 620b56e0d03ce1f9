"""Ranks as rows on one time axis: steps, collectives (waiting and transfer) and an injected
delay. Every number comes from :mod:`kitlib.analyses.collectives`; times are ms on the
traces' own clocks (one host: one clock)."""
from __future__ import annotations

import matplotlib.pyplot as plt

from ..analyses.collectives import (collective_matches, collective_waits, collectives, communication_pieces,
                                    exposed_communication, rank_step_times)
from ..readers.ranks import RankTraces
from . import legend_within, new_axes

#: Colours of the picture's parts.
COLOURS = {"step": "#d9d9d9", "wait": "#d62728", "transfer": "#1f77b4", "delay": "#ff7f0e",
           "unmatched": "#9467bd", "compute": "#2ca02c", "exposed": "#000000"}


def plot_rank_timeline(traces: RankTraces, steps=None, ax=None, title: str | None = None,
                       delay_label: str = "straggler_delay"):
    """One row per rank: its steps (grey), each collective split into waiting for the last rank
    (red) and transfer (blue), collectives without a verified match whole (purple,
    :func:`kitlib.analyses.collectives.collective_matches`), and ``delay_label`` ranges
    (orange). ``steps``: the ``ProfilerStep`` numbers to draw (default all).

    Returns the Axes; x: ms since the earliest drawn step start. Raises :class:`KitError` as
    :func:`~kitlib.analyses.collectives.collectives` and
    :func:`~kitlib.analyses.collectives.rank_step_times`."""
    st = rank_step_times(traces)
    if steps is not None:
        st = st[st["step"].isin(list(steps))]
    calls = collectives(traces)
    w = collective_waits(traces, calls)
    w = w[w["step"].isin(set(st["step"]))]
    ok = set(collective_matches(traces, calls).query("verified")["call"])
    lone = calls[~calls["call"].isin(ok) & calls["step"].isin(set(st["step"]))]
    origin = int(st["start_ns"].min())
    end = int((st["start_ns"] + st["dur_ns"]).max())
    ranks = traces.ranks
    ax = new_axes(ax, (12, 0.7 * len(ranks) + 1.6))
    y = {r: len(ranks) - 1 - i for i, r in enumerate(ranks)}
    ms = lambda ns: (ns - origin) / 1e6   # noqa: E731
    for s in st.itertuples():
        ax.broken_barh([(ms(s.start_ns), s.dur_ns / 1e6)], (y[s.rank] - 0.42, 0.84), facecolors=COLOURS["step"],
                       edgecolors="white")
        ax.text(ms(s.start_ns) + s.dur_ns / 2e6, y[s.rank] + 0.3, f"step {s.step}", ha="center", va="center",
                fontsize="small", color="#555555")
    for r, t in traces.traces.items():
        d = t.ops[t.ops["name"] == delay_label]
        base = int(t.meta.get("base_time_ns") or 0)
        d = d[(d["start_ns"] + base >= origin) & (d["start_ns"] + base <= end)]
        if len(d):
            ax.broken_barh([(ms(a + base), b / 1e6) for a, b in zip(d["start_ns"], d["dur_ns"])],
                           (y[r] - 0.3, 0.35), facecolors=COLOURS["delay"])
    for c in w.itertuples():
        ax.broken_barh([(ms(c.start_ns), c.wait_ns / 1e6)], (y[c.rank] - 0.3, 0.35), facecolors=COLOURS["wait"])
        ax.broken_barh([(ms(c.start_ns + c.wait_ns), c.transfer_ns / 1e6)], (y[c.rank] - 0.3, 0.35),
                       facecolors=COLOURS["transfer"])
    for r, g in lone.groupby("rank"):
        ax.broken_barh([(ms(a), d / 1e6) for a, d in zip(g["start_ns"], g["dur_ns"])], (y[r] - 0.3, 0.35),
                       facecolors=COLOURS["unmatched"])
    ax.set_yticks([y[r] for r in ranks], [f"rank {r}" for r in ranks])
    ax.set_ylim(-0.6, len(ranks) - 0.4)
    ax.set_xlim(0, (end - origin) / 1e6)
    hosts = traces.info["host"]
    clock = ("hosts unknown: clocks compared as written" if hosts.isna().any() else
             "one host, one clock" if hosts.nunique() == 1 else "several hosts: clocks not aligned")
    ax.set_xlabel(f"time since the first step's start (ms; {clock})")
    keys = ["step", "wait", "transfer", "delay"] + (["unmatched"] if len(lone) else [])
    labels = {"step": "step (host)", "wait": "collective: waiting for the last rank (estimate)",
              "transfer": "collective: transfer (estimate)", "delay": "injected delay",
              "unmatched": "collective without a verified match (not split)"}
    legend_within(ax, [plt.Rectangle((0, 0), 1, 1, color=COLOURS[k]) for k in keys], [labels[k] for k in keys],
                  ncol=2, below=True, fontsize="small", frameon=False)    # two columns: the figure's width
    on = set(w["measured_on"]) | set(lone["measured_on"]) or {"?"}
    ax.set_title(title or f"{len(ranks)} ranks, {traces.backend}: collectives measured on {', '.join(sorted(on))}")
    ax.figure.tight_layout()
    return ax


#: What each lane of :func:`plot_exposed_communication` draws, by colour key.
EXPOSED_LABELS = {"compute": "compute (GPU kernels, or the step thread's operators on a CPU run)",
                  "wait": "communication: waiting for the last rank (estimate)",
                  "transfer": "communication: transfer (estimate)",
                  "unmatched": "communication without a verified match (not split)",
                  "exposed": "exposed: communication with no compute beside it"}


def plot_exposed_communication(traces: RankTraces, step: int | None = None, ax=None, title: str | None = None):
    """One step's bucket picture: per rank a compute lane, a communication lane (each call
    outlined, filled by waiting, transfer or no verified match) and an *exposed* lane (black:
    communication with no compute beside it), from
    :func:`kitlib.analyses.collectives.communication_pieces`; the title gives each rank's
    exposed and communication ms (:func:`~kitlib.analyses.collectives.exposed_communication`).

    Returns the Axes; x: ms since the earliest drawn piece; three lanes per rank, rank 0 on
    top. Raises :class:`KitError` as :func:`~kitlib.analyses.collectives.collectives`, or when
    no step (or not ``step``, default the first) has a collective on every rank."""
    from ..errors import KitError
    calls = collectives(traces)
    pieces = communication_pieces(traces, calls)
    table = exposed_communication(traces, calls)
    every = table.groupby("step")["rank"].nunique()
    every = sorted(int(s) for s in every[every == len(traces.ranks)].index)
    if step is None:
        if not every:
            raise KitError(f"no step with a collective on every rank {traces.ranks}")
        step = every[0]
    if step not in every:
        raise KitError(f"step {step} has no collective on every rank; steps that have: {every}")
    p = pieces[pieces["step"] == step]
    c = calls[calls["step"] == step]
    t = table[table["step"] == step].set_index("rank")
    ranks = traces.ranks
    origin = int(min(p["start_ns"].min(), c["start_ns"].min()))
    end = int(max(p["end_ns"].max(), c["end_ns"].max()))
    ax = new_axes(ax, (12, 1.1 * len(ranks) + 1.8))
    ms = lambda ns: (ns - origin) / 1e6   # noqa: E731
    ticks, labels = [], []
    for i, r in enumerate(ranks):
        base = 3 * (len(ranks) - 1 - i)
        lanes = {"compute": base + 2, "comm": base + 1, "exposed": base + 0.25}
        mine = p[p["rank"] == r]
        comp = mine[(mine["part"] == "compute") | mine["beside_compute"]]
        ax.broken_barh([(ms(a), (b - a) / 1e6) for a, b in zip(comp["start_ns"], comp["end_ns"])],
                       (lanes["compute"] - 0.35, 0.7), facecolors=COLOURS["compute"])
        for part in ("wait", "transfer", "unmatched"):
            q = mine[mine["part"] == part]
            if len(q):
                ax.broken_barh([(ms(a), (b - a) / 1e6) for a, b in zip(q["start_ns"], q["end_ns"])],
                               (lanes["comm"] - 0.35, 0.7), facecolors=COLOURS[part])
        q = mine[(mine["part"] != "compute") & ~mine["beside_compute"]]
        ax.broken_barh([(ms(a), (b - a) / 1e6) for a, b in zip(q["start_ns"], q["end_ns"])],
                       (lanes["exposed"] - 0.2, 0.4), facecolors=COLOURS["exposed"])
        mc = c[c["rank"] == r]
        ax.broken_barh([(ms(a), d / 1e6) for a, d in zip(mc["start_ns"], mc["dur_ns"])],
                       (lanes["comm"] - 0.42, 0.84), facecolors="none", edgecolors="#333333", linewidth=0.8)
        ticks += [lanes["compute"], lanes["comm"], lanes["exposed"]]
        labels += [f"rank {r} compute", f"rank {r} communication", f"rank {r} exposed"]
    ax.set_yticks(ticks, labels)
    ax.set_ylim(-0.4, 3 * len(ranks) - 0.4)
    ax.set_xlim(0, (end - origin) / 1e6)
    ax.set_xlabel(f"time in step {step} (ms since its first piece drawn, each rank's own clock)")
    legend_within(ax, [plt.Rectangle((0, 0), 1, 1, color=COLOURS[k]) for k in EXPOSED_LABELS],
                  list(EXPOSED_LABELS.values()), ncol=2, below=True, fontsize="small", frameon=False)
    ax.set_title(title or f"step {step}: " + ";\n".join(       # a line per rank: the figure's width
        f"rank {r} exposed {t.loc[r, 'exposed_ms']:,.1f} of {t.loc[r, 'comm_ms']:,.1f} ms of communication"
        for r in ranks))
    ax.figure.tight_layout()
    return ax


__all__ = ["plot_rank_timeline", "plot_exposed_communication", "COLOURS", "EXPOSED_LABELS"]
