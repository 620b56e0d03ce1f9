"""CUDA memory snapshots (``torch.cuda.memory._dump_snapshot``) as tables.

A snapshot pickles the caching allocator's ``segments`` (reserved memory, cut into
``blocks``: ``active_allocated``, ``active_pending_free``, ``inactive``), its
``device_traces`` (the history, with ``_record_memory_history()``: ``alloc``,
``free_requested``, ``free_completed``, ``segment_alloc``/``_free``/``_map``/``_unmap``,
``oom``, each with its stack), ``external_annotations`` and ``allocator_settings``. It
is read by :func:`load_plain_pickle`, which builds plain data only and refuses any
pickle that asks for another object before anything is built. Sizes: a block's ``size``
is what the allocator handed out (rounded up), a history event's ``size`` and a block's
``requested_size`` what the caller asked for.
Sources: docs/SOURCES.md#memory-snapshot
"""
from __future__ import annotations

import functools
import io
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .files import read_bytes_maybe_gz
from ..errors import KitFileError, UnsafePickleError

__all__ = ["load_plain_pickle", "load_memory_snapshot", "MemorySnapshot", "top_frame",
           "python_stack"]


# -- the restricted unpickler ----------------------------------------------------

class _PlainUnpickler(pickle.Unpickler):
    """An unpickler that builds plain containers and scalars, and nothing else.

    Every opcode that can create another object (GLOBAL, STACK_GLOBAL, INST and
    the EXT opcodes) goes through :meth:`find_class`, and REDUCE, OBJ, NEWOBJ and
    BUILD need such an object first; refusing :meth:`find_class` therefore
    refuses them all, before any of them runs.
    """

    def __init__(self, data: bytes, path):
        self._stream = io.BytesIO(data)
        super().__init__(self._stream)
        self._path = path

    def offset(self) -> int:
        """How far into the data the unpickler has read (bytes)."""
        return self._stream.tell()

    def find_class(self, module, name):
        raise UnsafePickleError(
            self._path, f"the pickle asks for the global {module}.{name}; kitlib reads pickles "
                        "that hold only plain containers, strings and numbers, so it refused "
                        "the file before building or running anything from it")

    def persistent_load(self, pid):
        raise UnsafePickleError(
            self._path, f"the pickle asks for a persistent object ({str(pid)[:80]!r}); kitlib "
                        "reads only plain containers, strings and numbers")


def load_plain_pickle(path):
    """Read a pickle (optionally gzipped) that holds only plain data (dicts, lists, tuples,
    sets, str, bytes, numbers, bools, None), refusing anything else.

    Raises
    ------
    UnsafePickleError
        The pickle asks for a global or a persistent object; nothing is built or run.
    KitFileError
        Missing, empty or truncated file, truncated gzip, or not a pickle.
    """
    path = Path(path)
    data = read_bytes_maybe_gz(path)
    unpickler = _PlainUnpickler(data, path)
    try:
        return unpickler.load()
    except KitFileError:
        raise
    except Exception as e:          # EOFError, UnpicklingError, the ValueError/KeyError of garbage
        raise KitFileError(path, _pickle_problem(e, unpickler, len(data))) from None


def _pickle_problem(e: BaseException, unpickler, size: int) -> str:
    """Say in words why the plain unpickler stopped (never only Python's own message)."""
    at = f"near byte {unpickler.offset()} of {size}"
    if isinstance(e, EOFError) or "truncated" in str(e) or "ran out of input" in str(e).lower():
        return ("truncated pickle: the data ends before the pickle does (the file was cut off "
                "while being written or copied)")
    if isinstance(e, TypeError) and "unhashable" in str(e):
        kind = str(e).split("'")[1] if "'" in str(e) else "mutable value"
        return (f"damaged pickle: {at} it builds a dictionary or set keyed by a {kind}, which "
                "no pickle of plain data can hold (the bytes were changed)")
    if isinstance(e, RecursionError):
        return f"damaged pickle: {at} its containers nest deeper than Python can build"
    if isinstance(e, MemoryError):
        return f"damaged pickle: {at} it asks for more memory than this machine has"
    if isinstance(e, (pickle.UnpicklingError, KeyError, ValueError, IndexError)):
        return (f"not a readable pickle: {at} the data is not a pickle instruction kitlib can "
                f"follow ({str(e)[:80] or type(e).__name__}); is this really a .pickle file?")
    return f"not a readable pickle: {at} it stops with {type(e).__name__}: {str(e)[:80]}"


# -- stacks ------------------------------------------------------------------------

_SITE_PACKAGES = re.compile(r"^.*[/\\](?:site|dist)-packages[/\\]")
_AUTOGRAD_NODE = re.compile(r"autograd::generated::([A-Za-z0-9]+Backward[0-9]*)")


def _fmt(frame: dict) -> str:
    return f"{_short_file(frame['filename'])}:{frame['line']}:{frame['name']}"


@functools.lru_cache(maxsize=65536)
def _short_file(filename: str) -> str:
    """A frame's file from its package down (a snapshot names a few hundred files,
    hundreds of thousands of times)."""
    return _SITE_PACKAGES.sub('', filename)


def python_stack(frames, memo: dict | None = None) -> tuple[str, ...]:
    """The Python frames of an allocator stack (``{"filename", "line", "name"}`` dicts,
    innermost first) as ``"file:line:name"``, ``site-packages`` files from the package
    down; without a Python frame, the autograd node (``"autograd:ConvolutionBackward0"``);
    ``()`` when neither. ``memo``: shared over one snapshot's frames (formatted once each).
    """
    frames = frames or []
    if memo is None:
        memo = {}
    py = []
    for f in frames:
        text = memo.get(id(f), _UNSEEN)
        if text is _UNSEEN:
            text = memo[id(f)] = _fmt(f) if str(f.get("filename", "")).endswith(".py") else None
        if text is not None:
            py.append(text)
    if py:
        return tuple(py)
    for f in frames:
        m = _AUTOGRAD_NODE.search(str(f.get("name", "")))
        if m:
            return (f"autograd:{m.group(1)}",)
    return ()


_UNSEEN = object()


def top_frame(frames, memo: dict | None = None) -> str | None:
    """The innermost entry of :func:`python_stack`, or ``None`` when it is empty."""
    stack = python_stack(frames, memo)
    return stack[0] if stack else None


# -- the snapshot ------------------------------------------------------------------

# How each history action moves the running totals (sizes are requested bytes).
_ALLOCATED = {"alloc": 1, "free_requested": -1}       # like torch.cuda.memory_allocated()
_ACTIVE = {"alloc": 1, "free_completed": -1}          # until the block can be reused
_RESERVED = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}


@dataclass
class MemorySnapshot:
    """A CUDA caching-allocator snapshot as tables (see :func:`load_memory_snapshot`). Sizes in bytes.

    Attributes
    ----------
    path : pathlib.Path
    segments : DataFrame
        One row per segment reserved from CUDA: ``device, address, total_size_bytes,
        allocated_size_bytes, active_size_bytes, requested_size_bytes, stream,
        segment_type`` (``large``/``small`` pool), ``is_expandable, n_blocks``.
    blocks : DataFrame
        One row per block: ``device, segment_address, address, size_bytes`` (handed out),
        ``requested_size_bytes``, ``state``, ``top_frame`` (:func:`top_frame`).
    events : DataFrame
        The allocator history, in order per device: ``device, index, action, addr,
        size_bytes`` (requested), ``stream, time_us`` (host clock; <NA> if unrecorded),
        ``top_frame, n_frames, annotations`` (open ``record_function`` ranges, ``" > "``),
        and totals after the event: ``allocated_bytes`` (``alloc`` − ``free_requested``, as
        ``torch.cuda.memory_allocated()`` but in requested sizes), ``active_bytes``
        (``alloc`` − ``free_completed``, as memory_viz's Active Memory Timeline) and
        ``reserved_bytes`` (segments). Each starts from the snapshot's end state minus what
        the history added (the history must run up to the snapshot).
    allocations : DataFrame
        One row per allocation seen in the history or live: ``device, addr, size_bytes,
        alloc_index, alloc_time_us`` (<NA> before history), ``free_index, free_time_us``
        (<NA> while live), ``top_frame, call_stack, annotations``.
    allocator_settings : dict
    raw : dict
        The unpickled snapshot.

    Sources: docs/SOURCES.md#memory-snapshot
    """

    path: Path
    segments: pd.DataFrame = field(repr=False)
    blocks: pd.DataFrame = field(repr=False)
    events: pd.DataFrame = field(repr=False)
    allocations: pd.DataFrame = field(repr=False)
    allocator_settings: dict = field(repr=False)
    raw: dict = field(repr=False)

    def reserved_bytes(self, device: int | None = None) -> int:
        """Memory the allocator holds from CUDA at the snapshot (sum of segment
        ``total_size``), in bytes; ``torch.cuda.memory_reserved()`` at that moment.
        """
        return int(self._of(self.segments, device).total_size_bytes.sum())

    def allocated_bytes(self, device: int | None = None) -> int:
        """Memory in use by tensors at the snapshot (sum of segment ``allocated_size``,
        rounded block sizes), in bytes; ``torch.cuda.memory_allocated()`` at that moment.
        """
        return int(self._of(self.segments, device).allocated_size_bytes.sum())

    def requested_bytes(self, device: int | None = None) -> int:
        """What the live tensors asked for at the snapshot (sum of the requested
        sizes of ``active_allocated`` blocks), in bytes: the unit of the history's
        ``allocated_bytes``, whose last value equals this.
        """
        b = self._of(self.blocks, device)
        return int(b.loc[b.state == "active_allocated", "requested_size_bytes"].sum())

    def peak(self, device: int | None = None) -> pd.Series:
        """The :attr:`events` row after which ``allocated_bytes`` was highest (the first, on a tie).

        Raises
        ------
        KitFileError
            The snapshot has no history (no ``_record_memory_history()``).
        """
        ev = self._of(self.events, device)
        if ev.empty:
            raise KitFileError(self.path, "this snapshot has no allocator history (device_traces "
                                          "is empty): call torch.cuda.memory."
                                          "_record_memory_history() before the code you want "
                                          "to see, then _dump_snapshot()")
        return ev.loc[ev.allocated_bytes.idxmax()]

    def largest_live_at_peak(self, n: int = 10, device: int | None = None) -> pd.DataFrame:
        """The ``n`` largest rows of :attr:`allocations` live just after the peak of
        ``allocated_bytes`` (of ``device``, else the highest over all devices; ``n=None``: all),
        largest first, plus ``share_of_peak`` (0–1); all live rows add up to the peak.

        Raises
        ------
        KitFileError
            The snapshot has no history.
        """
        p = self.peak(device)
        a = self.allocations[self.allocations.device == p.device]
        k = int(p["index"])
        born = a.alloc_index.isna() | (a.alloc_index <= k)
        alive = a.free_index.isna() | (a.free_index > k)
        live = a[born & alive]
        live = live.sort_values("size_bytes", ascending=False, kind="stable")
        live = live.assign(share_of_peak=live.size_bytes / int(p.allocated_bytes))
        return (live if n is None else live.head(n)).reset_index(drop=True)

    def summary(self) -> dict:
        """Headline numbers as a dict: reserved, allocated and requested bytes, segment, block
        and event counts; for the device with the highest peak, the history's span (µs), the
        bytes allocated when it began, and its peak (bytes, index, µs, top frame, annotations).
        """
        s = {"file": str(self.path),
             "devices": sorted(set(self.segments.device) | set(self.events.device)),
             "segments": len(self.segments), "blocks": len(self.blocks),
             "reserved_bytes": self.reserved_bytes(), "allocated_bytes": self.allocated_bytes(),
             "requested_bytes": self.requested_bytes(),
             "largest_segment_bytes": int(self.segments.total_size_bytes.max())
             if len(self.segments) else 0,
             "history_events": len(self.events)}
        if len(self.events):
            p = self.peak()
            ev = self.events[self.events.device == p.device]
            first = ev.iloc[0]
            s.update(peak_device=int(p.device),
                     history_span_us=int(ev.time_us.max() - ev.time_us.min()),
                     history_start_allocated_bytes=int(first.allocated_bytes - _ALLOCATED.get(
                         first.action, 0) * first.size_bytes),
                     peak_allocated_bytes=int(p.allocated_bytes), peak_index=int(p["index"]),
                     peak_after_us=int(p.time_us - ev.time_us.min()),
                     peak_top_frame=p.top_frame, peak_annotations=p.annotations)
        return s

    @staticmethod
    def _of(df, device):
        return df if device is None else df[df.device == device]


def load_memory_snapshot(path) -> MemorySnapshot:
    """Read a ``torch.cuda.memory._dump_snapshot()`` pickle (gzipped is fine) into a
    :class:`MemorySnapshot`.

    Raises
    ------
    UnsafePickleError
        The pickle asks for anything but plain data (nothing is run).
    KitFileError
        Missing, empty, truncated or corrupt file, or not a memory snapshot (no ``segments``).
    """
    path = Path(path)
    raw = load_plain_pickle(path)
    if isinstance(raw, list):                 # PyTorch < 2.0: the segments alone
        raw = {"segments": raw, "device_traces": []}
    if not isinstance(raw, dict) or not isinstance(raw.get("segments"), list):
        raise KitFileError(path, "not a CUDA memory snapshot: expected a dict with a 'segments' "
                                 "list (as written by torch.cuda.memory._dump_snapshot)")
    problem = _check_snapshot(raw)
    if problem:
        raise KitFileError(path, f"not a CUDA memory snapshot kitlib understands: {problem}")
    try:
        segments, blocks = _segment_tables(raw["segments"])
        events = _event_table(raw, segments, blocks)
        allocations = _allocation_table(events, blocks, raw)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError,
            OverflowError) as e:          # pragma: no cover - _check_snapshot comes first
        raise KitFileError(path, "not a CUDA memory snapshot kitlib understands: a value of an "
                                 f"unexpected kind ({type(e).__name__}: {e})") from None
    return MemorySnapshot(path=path, segments=segments, blocks=blocks, events=events,
                          allocations=allocations,
                          allocator_settings=raw.get("allocator_settings") or {}, raw=raw)


# -- checking the snapshot's structure before any table is built ------------------

_INT = (int,)          # bool is an int too; the allocator never writes one where a size goes
_INT64_MAX = (1 << 63) - 1


def _kind(v) -> str:
    return {dict: "a dictionary", list: "a list", tuple: "a tuple", str: "text",
            bytes: "bytes", float: "a fraction", bool: "a boolean", type(None): "nothing (None)",
            set: "a set", frozenset: "a set"}.get(type(v), type(v).__name__)


def _need(d: dict, key, where: str, kinds, optional=False, nonneg=False):
    """A problem sentence if ``d[key]`` is absent (unless optional) or of another kind."""
    if key not in d:
        return None if optional else f"{where} has no {key!r}"
    v = d[key]
    if optional and v is None:
        return None
    if not isinstance(v, kinds) or (kinds == _INT and isinstance(v, bool)):
        want = {_INT: "an integer", (str,): "text", (list,): "a list"}.get(kinds, "a value")
        return f"{where}[{key!r}] is {_kind(v)}, where the allocator writes {want}"
    if kinds == _INT and (abs(v) > _INT64_MAX or (nonneg and v < 0)):
        return f"{where}[{key!r}] is {v}, not a byte count or address the allocator can write"
    return None


def _check_frames(frames, where: str, seen: set | None = None):
    """A problem sentence for a stack's ``frames``, or None. ``seen`` holds the ids of
    frame dicts already found sound in this snapshot (its pickle shares a few hundred
    frame dicts between hundreds of thousands of stack entries): each is checked once."""
    if frames is None:
        return None
    if not isinstance(frames, list):
        return f"{where}['frames'] is {_kind(frames)}, where the allocator writes a list of frames"
    if seen is None:
        seen = set()
    for f in frames:                      # the usual case, checked without building a message
        if id(f) in seen:
            continue
        if type(f) is not dict:
            break
        fn, nm, ln = f.get("filename"), f.get("name"), f.get("line")
        if not ((fn is None or type(fn) is str) and (nm is None or type(nm) is str)
                and (ln is None or type(ln) is int and -_INT64_MAX <= ln <= _INT64_MAX)):
            break
        seen.add(id(f))
    else:
        return None
    for j, f in enumerate(frames):
        if not isinstance(f, dict):
            return f"{where}['frames'][{j}] is {_kind(f)}, where the allocator writes a frame dictionary"
        for key, kinds in (("filename", (str,)), ("name", (str,)), ("line", _INT)):
            bad = _need(f, key, f"{where}['frames'][{j}]", kinds, optional=True)
            if bad:
                return bad
    return None


def _check_snapshot(raw: dict):
    """The first thing in a snapshot kitlib cannot read, as a sentence naming where
    (``segments[3]['blocks'][0]['size'] is text, ...``), or None; only the keys the tables use are checked.
    """
    return next(filter(None, _snapshot_problems(raw)), None)


def _snapshot_problems(raw: dict):
    """:func:`_check_snapshot`'s checks in order, each yielding its problem or None (read up to the first)."""
    seen: set = set()           # frame dicts found sound (raw, alive here, keeps their ids apart)
    for i, seg in enumerate(raw["segments"]):
        where = f"segments[{i}]"
        if not isinstance(seg, dict):
            yield f"{where} is {_kind(seg)}, where the allocator writes a segment dictionary"
        for key in ("device", "address", "total_size", "allocated_size", "active_size", "requested_size"):
            yield _need(seg, key, where, _INT, optional=key not in ("device", "address", "total_size"), nonneg=True)
        if not isinstance(seg.get("stream", 0), (int, type(None))):
            yield f"{where}['stream'] is {_kind(seg['stream'])}, where the allocator writes an integer"
        blocks = seg.get("blocks", [])
        if not isinstance(blocks, list):
            yield f"{where}['blocks'] is {_kind(blocks)}, where the allocator writes a list"
        for j, b in enumerate(blocks):
            bw = f"{where}['blocks'][{j}]"
            if not isinstance(b, dict):
                yield f"{bw} is {_kind(b)}, where the allocator writes a block dictionary"
            yield (_need(b, "size", bw, _INT, nonneg=True) or _need(b, "state", bw, (str,))
                   or _need(b, "address", bw, _INT, optional=True, nonneg=True)
                   or _need(b, "requested_size", bw, _INT, optional=True, nonneg=True)
                   or _check_frames(b.get("frames"), bw, seen))
    traces = raw.get("device_traces") or []
    if not isinstance(traces, list):
        yield f"'device_traces' is {_kind(traces)}, where the allocator writes a list per device"
    for d, trace in enumerate(traces):
        if trace and not isinstance(trace, list):
            yield f"device_traces[{d}] is {_kind(trace)}, where the allocator writes a list of events"
        for k, e in enumerate(trace or []):
            ew = f"device_traces[{d}][{k}]"
            if not isinstance(e, dict):
                yield f"{ew} is {_kind(e)}, where the allocator writes an event dictionary"
            yield (_need(e, "action", ew, (str,)) or _need(e, "addr", ew, _INT, optional=True)
                   or _need(e, "size", ew, _INT, optional=True, nonneg=True)
                   or _need(e, "time_us", ew, _INT, optional=True)
                   or _check_frames(e.get("frames"), ew, seen))
            if not isinstance(e.get("stream"), (int, type(None))):
                yield f"{ew}['stream'] is {_kind(e['stream'])}, where the allocator writes an integer"
    notes = raw.get("external_annotations") or []
    if not isinstance(notes, list):
        yield f"'external_annotations' is {_kind(notes)}, where PyTorch writes a list"
    for k, a in enumerate(notes):
        aw = f"external_annotations[{k}]"
        if not isinstance(a, dict):
            yield f"{aw} is {_kind(a)}, where PyTorch writes a dictionary"
        yield (_need(a, "stage", aw, (str,)) or _need(a, "name", aw, (str,))
               or _need(a, "time_us", aw, _INT) or _need(a, "device", aw, _INT, optional=True))
    if not isinstance(raw.get("allocator_settings") or {}, dict):
        yield f"'allocator_settings' is {_kind(raw['allocator_settings'])}, where PyTorch writes a dictionary"


def _segment_tables(raw_segments):
    seg_rows, block_rows = [], []
    for s in raw_segments:
        addr = s["address"]
        blocks = s.get("blocks", [])
        offset = addr
        for b in blocks:
            block_rows.append({
                "device": s["device"], "segment_address": addr,
                "address": b.get("address", offset),   # old snapshots: blocks lie end to end
                "size_bytes": b["size"], "requested_size_bytes": b.get("requested_size", b["size"]),
                "state": b["state"], "top_frame": top_frame(b.get("frames"))})
            offset += b["size"]
        live = [b for b in blocks if b["state"] == "active_allocated"]
        seg_rows.append({
            "device": s["device"], "address": addr, "total_size_bytes": s["total_size"],
            "allocated_size_bytes": s.get("allocated_size", sum(b["size"] for b in live)),
            "active_size_bytes": s.get("active_size", sum(b["size"] for b in blocks
                                                          if b["state"].startswith("active"))),
            "requested_size_bytes": s.get("requested_size", sum(b.get("requested_size", b["size"])
                                                                for b in live)),
            "stream": s.get("stream"), "segment_type": s.get("segment_type"),
            "is_expandable": bool(s.get("is_expandable", False)), "n_blocks": len(blocks)})
    seg_cols = ["device", "address", "total_size_bytes", "allocated_size_bytes",
                "active_size_bytes", "requested_size_bytes", "stream", "segment_type",
                "is_expandable", "n_blocks"]
    block_cols = ["device", "segment_address", "address", "size_bytes", "requested_size_bytes",
                  "state", "top_frame"]
    return pd.DataFrame(seg_rows, columns=seg_cols), pd.DataFrame(block_rows, columns=block_cols)


def _annotation_labels(annotations, device):
    """Change points (times, labels) of the open record_function ranges on one device."""
    marks = sorted((a for a in annotations if a.get("device", device) == device),
                   key=lambda a: a["time_us"])
    times, labels, stack = [], [], []
    for a in marks:
        if a["stage"] == "START":
            stack.append(a["name"])
        elif a["name"] in stack:
            del stack[len(stack) - 1 - stack[::-1].index(a["name"])]
        times.append(a["time_us"])
        labels.append(" > ".join(stack) or None)
    return np.asarray(times, dtype=np.int64), labels


def _event_table(raw, segments, blocks):
    cols = ["device", "index", "action", "addr", "size_bytes", "stream", "time_us", "top_frame",
            "n_frames", "annotations", "allocated_bytes", "active_bytes", "reserved_bytes"]
    tops = {}       # the pickle shares frame lists between events (raw keeps them alive)
    memo: dict = {}  # and frame dicts between lists

    def top(frames):
        if id(frames) not in tops:
            tops[id(frames)] = top_frame(frames, memo)
        return tops[id(frames)]

    parts = []
    for device, trace in enumerate(raw.get("device_traces") or []):
        if not trace:
            continue
        ev = pd.DataFrame({
            "device": device, "index": np.arange(len(trace)),
            "action": [e["action"] for e in trace],
            "addr": [e.get("addr") for e in trace],
            "size_bytes": np.array([e.get("size", 0) for e in trace], dtype=np.int64),
            "stream": [e.get("stream") for e in trace],
            "time_us": pd.array([e.get("time_us") for e in trace], dtype="Int64"),
            "top_frame": [top(e.get("frames")) for e in trace],
            "n_frames": [len(e.get("frames") or []) for e in trace]})
        notes = raw.get("external_annotations") or []
        if notes and ev.time_us.notna().all():
            times, labels = _annotation_labels(notes, device)
            at = np.searchsorted(times, ev.time_us.to_numpy(dtype=np.int64), side="right") - 1
            ev["annotations"] = [labels[i] if i >= 0 else None for i in at]
        else:
            ev["annotations"] = None
        seg = segments[segments.device == device]
        blk = blocks[blocks.device == device]
        req = blk.requested_size_bytes
        ends = {"allocated_bytes": req[blk.state == "active_allocated"].sum(),
                "active_bytes": req[blk.state.str.startswith("active")].sum(),
                "reserved_bytes": seg.total_size_bytes.sum()}
        for col, sign in (("allocated_bytes", _ALLOCATED), ("active_bytes", _ACTIVE),
                          ("reserved_bytes", _RESERVED)):
            delta = ev.action.map(sign).fillna(0).astype(np.int64) * ev.size_bytes
            running = delta.cumsum()
            ev[col] = (int(ends[col]) - int(running.iloc[-1]) + running).astype(np.int64)
        parts.append(ev[cols])
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)


def _allocation_table(events, blocks, raw):
    """Pair each ``alloc`` with the next ``free_requested`` of its address."""
    traces = raw.get("device_traces") or []
    rows = []
    memo: dict = {}      # frame dicts shared by the pickle (raw keeps them alive)
    for device, ev in events.groupby("device", sort=True):
        trace = traces[device]
        live = {}
        for i, action, addr, size, t, note in zip(ev["index"], ev.action, ev.addr, ev.size_bytes,
                                                  ev.time_us, ev.annotations):
            if action == "alloc":
                frames = trace[i].get("frames")
                live[addr] = r = {"device": device, "addr": addr, "size_bytes": size,
                                  "alloc_index": i, "alloc_time_us": t,
                                  "free_index": None, "free_time_us": None,
                                  "top_frame": top_frame(frames, memo),
                                  "call_stack": python_stack(frames, memo), "annotations": note}
                rows.append(r)
            elif action == "free_requested":
                r = live.pop(addr, None)
                if r is None:              # allocated before the history began
                    r = {"device": device, "addr": addr, "size_bytes": size, "top_frame": None,
                         "call_stack": ()}
                    rows.append(r)
                r.update(free_index=i, free_time_us=t)
        untouched = blocks[(blocks.device == device) & (blocks.state == "active_allocated")
                           & ~blocks.address.isin(list(live))]
        rows += [{"device": device, "addr": b.address, "size_bytes": b.requested_size_bytes,
                  "top_frame": b.top_frame if isinstance(b.top_frame, str) else None,
                  "call_stack": (b.top_frame,) if isinstance(b.top_frame, str) else ()}
                 for b in untouched.itertuples()]
    cols = ["device", "addr", "size_bytes", "alloc_index", "alloc_time_us", "free_index",
            "free_time_us", "top_frame", "call_stack", "annotations"]
    out = pd.DataFrame(rows, columns=cols)
    for c in ("alloc_index", "alloc_time_us", "free_index", "free_time_us"):
        out[c] = pd.array(out[c].tolist(), dtype="Int64")
    out["size_bytes"] = out["size_bytes"].astype(np.int64)
    return out
