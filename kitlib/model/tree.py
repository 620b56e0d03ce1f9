"""The one event tree: the profiler's parent/child rule (:func:`build_host_tree`), built
once, and its walkers. At a boundary the kit's rule, half-open ``[start, end)``
(:mod:`kitlib.model.window`): an event starting where another ends is its sibling.
"""
from __future__ import annotations

import heapq

import numpy as np
import pandas as pd

from .schema import FILTERED_NAMES, HOST_EVENT_COLUMNS
from .window import innermost



def build_host_tree(ops: pd.DataFrame, launches: pd.DataFrame, python_children: bool = False,
                    resolution_ns: int = 1) -> pd.DataFrame:
    """The profiler's tree of host events: the one place where kitlib decides parent and child.

    Sources: docs/SOURCES.md#host-tree

    Per thread, in start order, longest first, an event's parent is the innermost open event it
    starts inside and does not outlast (:func:`nesting`; at ``resolution_ns`` 1000 it may outlast
    it by 1 µs); a child with its parent's name and no sibling is folded into it (``merged``).
    Events: ``ops`` and ``launches`` rows, Python frames only if ``python_children``, never
    :data:`FILTERED_NAMES`. Columns :data:`HOST_EVENT_COLUMNS` (see :class:`Trace`), index 0..n-1.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> build_host_tree(tr.ops, tr.launches)[["name", "parent", "depth", "children_ns"]]
                   name  parent  depth  children_ns
    0    ProfilerStep#1      -1      0          300
    1        aten::relu       0      1          100
    2  cudaLaunchKernel       1      2            0
    3         aten::add       0      1            0
    """
    sel = ops if python_children else ops[ops["kind"] != "python"]
    parts = [pd.DataFrame({"source": src, "row": t.index.to_numpy(), "name": t["name"].to_numpy(),
                           "kind": t[kind].to_numpy(), "pid": t["pid"].to_numpy(), "tid": t["tid"].to_numpy(),
                           "start_ns": t["start_ns"].to_numpy(), "end_ns": t["end_ns"].to_numpy()})
             for src, t, kind in (("ops", sel, "kind"), ("launches", launches, "api")) if src == "ops" or len(t)]
    ev = pd.concat(parts, ignore_index=True)
    ev = ev[~ev["name"].isin(FILTERED_NAMES)]
    ev = ev.astype({"start_ns": "int64", "end_ns": "int64"})
    ev = ev.sort_values(["start_ns", "end_ns"], ascending=[True, False], kind="stable").reset_index(drop=True)
    ev["dur_ns"] = ev["end_ns"] - ev["start_ns"]
    n = len(ev)
    start, end = ev["start_ns"].to_numpy(), ev["end_ns"].to_numpy()
    # a whole-µs trace's truncation overrun (ts and dur truncated separately): 1 µs
    tol = int(resolution_ns) if resolution_ns >= 1000 else 0
    parent = nesting(ev["pid"].tolist(), ev["tid"].tolist(), start.tolist(), end.tolist(), tolerance=tol)
    depth = depths(parent)
    merged, prof_parent = _fold_same_name_children(ev["name"].to_numpy(), parent)
    # direct children's host time (inside the parent by the rule; cut to it all the same)
    live = ~merged & (prof_parent >= 0)
    kids = np.flatnonzero(live)
    pp = prof_parent[kids]
    cut = np.minimum(end[kids], end[pp]) - np.maximum(start[kids], start[pp])
    children = np.zeros(n, dtype=np.int64)
    np.add.at(children, pp, np.maximum(cut, 0))
    ev["parent"], ev["depth"], ev["merged"] = parent, depth, merged
    ev["profiler_parent"], ev["children_ns"] = prof_parent, children
    return ev[HOST_EVENT_COLUMNS]


def nesting(pids, tids, starts, ends, tolerance=0) -> np.ndarray:
    """Position of each event's parent among the events of its own thread (-1 at the top).

    The events must be sorted by start, longest first. An event's parent is the innermost
    open event it starts inside (``start < parent's end``) and does not outlast by more than
    ``tolerance`` ns. ``starts``/``ends`` in ns (an end may be ``inf``). The rule of
    :func:`build_host_tree` and of the NVTX ranges of :mod:`kitlib.readers.nsys`.

    Examples
    --------
    >>> nesting([1] * 4, [1] * 4, [0, 10, 50, 50], [100, 50, 50, 60]).tolist()
    [-1, 0, 0, 0]
    """
    # the sweep reads Python lists: indexing them is several times cheaper than numpy's
    start_l, end_l = list(starts), list(ends)
    parent_l = [-1] * len(start_l)
    stacks: dict = {}
    for i, key in enumerate(zip(pids, tids)):
        st = stacks.setdefault(key, [])
        s_i, e_i = start_l[i], end_l[i]
        while st:
            p = st[-1]
            if s_i >= end_l[p] or e_i > end_l[p] + tolerance:
                st.pop()
            else:
                parent_l[i] = p
                break
        st.append(i)
    return np.asarray(parent_l, dtype=np.int64)


def depths(parent: np.ndarray) -> np.ndarray:
    """Each event's depth (int64; 0 at the top) from its parent's position (-1 at the top):
    ``depth[i] = depth[parent[i]] + 1`` (pointer jumping where parents come first, else
    one pass in list order).

    Examples
    --------
    >>> import numpy as np
    >>> depths(np.array([-1, 0, 1, 0])).tolist()
    [0, 1, 2, 1]
    """
    parent = np.asarray(parent, dtype=np.int64)
    if not (parent < np.arange(len(parent))).all():
        depth_l = [0] * len(parent)
        for i, p in enumerate(parent.tolist()):
            if p >= 0:
                depth_l[i] = depth_l[p] + 1
        return np.asarray(depth_l, dtype=np.int64)
    depth = (parent >= 0).astype(np.int64)       # the distance from each event to up[event]
    up = parent.copy()
    live = np.flatnonzero(up >= 0)
    while live.size:
        # both right-hand sides are read before either is written: one round for all at once
        depth[live] += depth[up[live]]
        up[live] = up[up[live]]
        live = live[up[live] >= 0]
    return depth


def _fold_same_name_children(names: np.ndarray, parent: np.ndarray):
    """``_remove_dup_nodes``: an event whose parent has its name and no other child is folded
    into it, repeatedly. Returns ``merged`` and each event's parent once they are gone (only
    the candidates and moved children are visited, in list order: the profiler's folds)."""
    n = len(names)
    par_a = np.asarray(parent, dtype=np.int64)
    has = par_a >= 0
    n_children_a = np.bincount(par_a[has], minlength=n) if n else np.zeros(0, dtype=np.int64)
    up = np.maximum(par_a, 0)
    cand = np.flatnonzero(has & (n_children_a[up] == 1) & (np.asarray(names)[up] == np.asarray(names))) \
        if n else np.zeros(0, dtype=np.int64)
    if not cand.size:
        return np.zeros(n, dtype=bool), par_a.copy()
    by_parent = np.argsort(par_a, kind="stable")           # each event's children, in list order
    sp = par_a[by_parent]
    taken = {}                                              # the children an event took over by a fold

    def kids_of(i):
        if i in taken:
            return taken.pop(i)
        return by_parent[np.searchsorted(sp, i, "left"):np.searchsorted(sp, i, "right")].tolist()

    par = par_a.tolist()
    names = list(names)
    merged = [False] * n
    n_children = n_children_a.tolist()
    heap = cand.tolist()                                    # ascending: already a heap
    while heap:
        i = heapq.heappop(heap)
        p = par[i]
        if merged[i] or p < 0 or names[p] != names[i] or n_children[p] != 1:
            continue
        kids = kids_of(i)
        for k in kids:
            par[k] = p
            heapq.heappush(heap, k)                         # now a child of p: a candidate
        taken[p] = kids
        n_children[p] = len(kids)
        merged[i] = True
    return np.asarray(merged, dtype=bool), np.asarray(par, dtype=np.int64)



# --------------------------------------------------------------------------- walkers
def ancestors(tree, i: int) -> list:
    """Positions of the events enclosing event ``i`` of ``tree`` (``Trace.host_events``, or
    its ``parent`` column as an array), innermost first.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> ancestors(tiny_trace().host_events, 2)           # cudaLaunchKernel: in relu, in the step
    [1, 0]
    """
    par = tree["parent"].to_numpy() if isinstance(tree, pd.DataFrame) else tree
    out, p = [], int(par[i])
    while p >= 0:
        out.append(p)
        p = int(par[p])
    return out


def descendants(tree: pd.DataFrame, i: int) -> list:
    """Positions of the events inside event ``i`` of ``tree`` (all depths), by start.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> descendants(tiny_trace().host_events, 0)
    [1, 2, 3]
    """
    par = tree["parent"].to_numpy()
    inside = {int(i)}
    out = []
    for k in range(int(i) + 1, len(par)):       # parents come before their children
        if int(par[k]) in inside:
            inside.add(k)
            out.append(k)
    return out


def nearest_ancestor(parent, where, include_self: bool = False) -> np.ndarray:
    """For every event, its nearest ancestor that ``where`` (bool array) marks, -1 where none:
    ``parent`` is each event's parent position (-1 at the top); with ``include_self`` a
    marked event is its own answer. Returns an int64 array.

    Examples
    --------
    The nearest enclosing operator of each event (step, relu, its launch, add):

    >>> from kitlib.model.examples import tiny_trace
    >>> t = tiny_trace().host_events
    >>> nearest_ancestor(t["parent"], (t["kind"] == "op").to_numpy()).tolist()
    [-1, -1, 1, -1]
    """
    parent = np.asarray(parent, dtype=np.int64)
    where = np.asarray(where, dtype=bool)
    up = np.arange(len(parent), dtype=np.int64) if include_self else parent.copy()
    todo = np.flatnonzero(up >= 0)
    todo = todo[~where[up[todo]]]
    while len(todo):
        up[todo] = parent[up[todo]]
        todo = todo[up[todo] >= 0]
        todo = todo[~where[up[todo]]]
    return up


def innermost_at(tree: pd.DataFrame, pid, tid, t_ns, closed: str = "left") -> np.ndarray:
    """Positions (in ``tree``) of the innermost event of thread ``(pid, tid)`` containing
    each time, -1 where none (:func:`kitlib.model.window.innermost`).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> innermost_at(tiny_trace().host_events, 1, 1, [0, 150, 399, 400, 1000])
    array([ 0,  2,  1,  0, -1])
    """
    mine = np.flatnonzero((tree["pid"].to_numpy() == pid) & (tree["tid"].to_numpy() == tid))
    pos = innermost(tree["start_ns"].to_numpy()[mine], tree["end_ns"].to_numpy()[mine], t_ns, closed=closed)
    return np.where(pos >= 0, mine[np.maximum(pos, 0)], -1).astype(np.int64)
