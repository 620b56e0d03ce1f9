"""Raw trace events drawn the way Perfetto lays a torch.profiler trace out: a group of
tracks per process, one track per thread (named from the ``ph: "M"`` metadata events),
a ``GPU 0`` group with one track per stream, nested slices one row per depth, and ``ac2g``
flow arrows from a CUDA call to the GPU work it started. Every rectangle is one ``X``
event at its own ``ts`` and ``dur``."""
from __future__ import annotations

from matplotlib.patches import Rectangle

from . import new_axes, font, short_name

#: Categories of events that ran on a GPU: drawn on their stream's track (``tid`` = stream).
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")
_COLOURS = {"cpu_op": "#4C72B0", "user_annotation": "#937860", "cuda_runtime": "#DD8452",
            "cuda_driver": "#DD8452", "kernel": "#55A868", "gpu_memcpy": "#C44E52", "gpu_memset": "#8172B3"}
#: Height of one slice row, in y units (one row per nesting depth).
ROW = 1.0


def track_names(events) -> dict:
    """``{(pid, tid): (process title, thread title)}`` from the metadata events."""
    pname, plabel, tname = {}, {}, {}
    for e in events:
        if e.get("ph") != "M":
            continue
        a = e.get("args", {})
        if e.get("name") == "process_name":
            pname[e["pid"]] = a.get("name", "")
        elif e.get("name") == "process_labels":
            plabel[e["pid"]] = a.get("labels", "")
        elif e.get("name") == "thread_name":
            tname[(e["pid"], e["tid"])] = str(a.get("name", "")).strip()
    keys = {(e["pid"], e["tid"]) for e in events if e.get("ph") == "X"}
    out = {}
    for pid, tid in keys:
        title = " · ".join(x for x in (f"{pname.get(pid, 'process')} {pid}", plabel.get(pid, "")) if x)
        out[(pid, tid)] = (title, tname.get((pid, tid), f"thread {tid}"))
    return out


def layout(events) -> tuple[dict, list]:
    """``({id(event): y}, tracks)``: CPU threads first, then GPU streams, each as deep as its
    nesting; ``tracks`` lists ``(pid, tid, y_top, depth)``."""
    xs = [e for e in events if e.get("ph") == "X"]
    gpu = lambda e: e.get("cat") in GPU_CATS   # noqa: E731
    keys = sorted({(gpu(e), e["pid"], e["tid"]) for e in xs}, key=lambda k: (k[0], str(k[1]), str(k[2])))
    ys, tracks, top = {}, [], 0.0
    for is_gpu, pid, tid in keys:
        mine = sorted((e for e in xs if e["pid"] == pid and e["tid"] == tid and gpu(e) == is_gpu),
                      key=lambda e: (e["ts"], -e.get("dur", 0)))
        stack, depth_of = [], {}
        for e in mine:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1].get("dur", 0):
                stack.pop()
            depth_of[id(e)] = len(stack)
            stack.append(e)
        depth = max(depth_of.values()) + 1
        for e in mine:
            ys[id(e)] = top + depth_of[id(e)] * ROW
        tracks.append((pid, tid, top, depth))
        top += depth * ROW + 0.6            # a gap between tracks, as Perfetto leaves
    return ys, tracks


def plot_gui_timeline(events, t0_us: float | None = None, selected=None, ax=None, title: str | None = None,
                      name_width: int = 28, view_us: tuple | None = None):
    """Raw events (as the file holds them) laid out like Perfetto's timeline. ``t0_us``: the
    origin (default the earliest ``ts``); ``selected``: correlation ids kept coloured, with
    their flows, the rest grey (as a click in Perfetto); ``name_width``: characters of a slice
    name; ``view_us``: the part of the axis shown (µs since the origin).

    Returns the Figure: a Rectangle per ``X`` event (``gid`` ``"cat|name"``, x and width in
    µs), an arrow annotation per flow, the track names as y tick labels. Raises ``ValueError``
    without ``X`` events."""
    xs = [e for e in events if e.get("ph") == "X"]
    if not xs:
        raise ValueError("no complete events (ph 'X') to draw")
    t0 = min(e["ts"] for e in xs) if t0_us is None else t0_us
    ys, tracks = layout(events)
    names = track_names(events)
    rows = sum(d for *_, d in tracks) + 0.6 * len(tracks)
    ax = new_axes(ax, (11, 0.9 + 0.42 * rows))
    fig = ax.figure
    sel = None if selected is None else {int(c) for c in selected}

    def lit(e):
        c = e.get("args", {}).get("correlation")
        return sel is None or (c is not None and int(c) in sel) or e.get("cat") == "cpu_op"

    lo, hi = view_us if view_us is not None else (0.0, max(e["ts"] + e.get("dur", 0) for e in xs) - t0)
    span = hi - lo
    for e in xs:
        x, w, y = e["ts"] - t0, e.get("dur", 0), ys[id(e)]
        colour = _COLOURS.get(e.get("cat"), "#999999") if lit(e) else "#DDDDDD"
        r = Rectangle((x, y + 0.1), w, ROW - 0.2, facecolor=colour, edgecolor="black", linewidth=0.3)
        r.set_gid(f"{e.get('cat')}|{e.get('name')}")
        ax.add_patch(r)
        seen = min(x + w, hi) - max(x, lo)           # the part of the slice inside the view
        if seen > span * 0.06:              # a name inside the slice where it fits, as Perfetto writes it
            t = ax.text(max(x, lo) + span * 0.003, y + ROW / 2, short_name(str(e.get("name")), name_width),
                        fontsize=font(7), va="center", ha="left", color="white" if lit(e) else "black", clip_on=True)
            t.set_clip_path(r)              # cut at the slice's edge, as Perfetto cuts a name
    # flows: s (on the API call) -> f (on the GPU work), paired by id
    starts = {e["id"]: e for e in events if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    for f in (e for e in events if e.get("ph") == "f" and e.get("cat") == "ac2g"):
        s = starts.get(f["id"])
        if s is None or (sel is not None and int(f["id"]) not in sel):
            continue
        src = next((x for x in xs if x["pid"] == s["pid"] and x["tid"] == s["tid"] and x["ts"] == s["ts"]
                    and x.get("cat") in ("cuda_runtime", "cuda_driver")), None)
        dst = next((x for x in xs if x["pid"] == f["pid"] and x["tid"] == f["tid"] and x["ts"] == f["ts"]
                    and x.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")), None)
        if src is None or dst is None:
            continue
        ax.annotate("", xy=(f["ts"] - t0, ys[id(dst)] + 0.1), xytext=(s["ts"] - t0, ys[id(src)] + ROW - 0.1),
                    arrowprops=dict(arrowstyle="-|>", color="black", linewidth=0.8, shrinkA=0, shrinkB=0))
    ax.set_yticks([top + ROW / 2 for _, _, top, _ in tracks])
    ax.set_yticklabels([names.get((p, t), ("", f"{t}"))[1] for p, t, _, _ in tracks], fontsize=font(8))
    for p, t, top, _ in tracks:                     # the process title above its first track
        if (p, t) == next((q, u) for q, u, _, _ in tracks if q == p):
            ax.text(0.0, top - 0.08, names.get((p, t), (f"process {p}", ""))[0], transform=ax.get_yaxis_transform(),
                    fontsize=font(8), fontweight="bold", va="bottom", ha="left")
    ax.set_ylim(rows + 0.2, -0.9)                   # the first track on top, as in Perfetto
    ax.set_xlim(lo - 0.01 * span, hi + 0.01 * span)
    ax.set_xlabel(f"time (µs) since ts = {t0:,.3f} µs on the trace's clock")
    ax.set_title(title or "the same events as Perfetto lays them out: thread tracks, stream tracks, flow arrows")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig
