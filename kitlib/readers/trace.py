"""Read a torch.profiler (Kineto) Chrome trace into pandas tables.

The profiler writes one JSON object per event (``ph`` = phase, ``cat`` = category,
``ts``/``dur`` in µs, ``args``); :func:`load_trace` normalises the names of every
PyTorch release once, so no analysis looks at raw JSON. Every time is an integer ns on
the profiler's clock (``start_ns``, ``dur_ns``, ``end_ns``): ``"dur": 732.513`` gives
``dur_ns == 732513``, and ``"ts": 1712181098123456.789`` is read from the JSON text
itself, ``start_ns == 1712181098123456789``.
Sources: docs/SOURCES.md#kineto-names
"""
from __future__ import annotations

import gc
import re
from collections import Counter, deque
from contextvars import ContextVar
from decimal import ROUND_HALF_EVEN, Context, Decimal
from itertools import chain, repeat
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
from orjson import dumps as _json_key

from .files import gunzip_if_gz, parse_json, read_file_bytes
from ..errors import TraceFormatError
from ..progress import progress_bar

# Category (lower-cased) -> (table, kind); Python frames ("python") end up in ops too.
_CATEGORIES = {
    "cpu_op": ("ops", "op"), "operator": ("ops", "op"),
    "user_annotation": ("ops", "annotation"),
    "python_function": ("python", "python"),
    "cuda_runtime": ("launches", "runtime"), "runtime": ("launches", "runtime"),
    "cuda_driver": ("launches", "driver"),
    "kernel": ("gpu", "kernel"),
    "gpu_memcpy": ("gpu", "memcpy"), "memcpy": ("gpu", "memcpy"),
    "gpu_memset": ("gpu", "memset"), "memset": ("gpu", "memset"),
    "gpu_user_annotation": ("gpu", "gpu_annotation"),
}
_STEP_RE = re.compile(r"^ProfilerStep#\d+$")

# The data contract lives in the model layer; its names stay importable from here.
from ..model.schema import (FILTERED_NAMES, HOST_EVENT_COLUMNS, OPS_COLUMNS, LAUNCH_COLUMNS,  # noqa: E402,F401
                            GPU_COLUMNS, MEMORY_COLUMNS, OTHER_COLUMNS, STEP_COLUMNS, STEP_PATTERNS, COMM_ARGS)
from ..model.trace import Trace  # noqa: E402,F401
from ..model.tree import build_host_tree, depths  # noqa: E402


def _ns(values) -> np.ndarray:
    """Microsecond timestamps (floats, up to 3 decimals) to exact integer ns: the integer
    part split off first, so ``ts`` near 5e12 µs keeps its printed digits.
    """
    a = np.asarray(values, dtype=np.float64)
    whole = np.floor(a)
    return whole.astype(np.int64) * 1000 + np.rint((a - whole) * 1000).astype(np.int64)


#: µs beyond which a float64 no longer holds every ns (2**43 µs, ~102 days): longer float
#: times (since the epoch) are read from the JSON text (:class:`_ExactUs`).
_EXACT_US = float(2 ** 43)

_DEC = Context(prec=60, rounding=ROUND_HALF_EVEN)
_THOUSANDTH = Decimal("0.001")


class _ExactUs(float):
    """A µs time beyond :data:`_EXACT_US` read from the JSON text: the nearest float, and
    ``ns``, the exact ns of its digits (rounded half to even).
    """

    __slots__ = ("ns",)


def _exact_float(text: str):
    """msgspec's ``float_hook`` for :func:`_decode_exact`: a plain float where a float64
    holds every ns (or out of range), else an :class:`_ExactUs`.
    """
    f = float(text)
    if -_EXACT_US < f < _EXACT_US or not abs(f) < _MAX_US:
        return f
    x = _ExactUs(f)
    x.ns = int(_DEC.quantize(Decimal(text), _THOUSANDTH).scaleb(3, _DEC))
    return x


def _ns_exact(evs, key: str, values) -> np.ndarray:
    """:func:`_ns` of ``values``, with the exact ns of each :class:`_ExactUs`; in
    :func:`load_trace`'s first parse a plain float beyond :data:`_EXACT_US` raises :class:`_InexactTimes`.
    """
    a = np.asarray(values, dtype=np.float64)
    ns = _ns(a)
    if len(a) and not (-_EXACT_US < a.min() and a.max() < _EXACT_US):
        vals = _col(evs, key, 0)
        at = [i for i, v in enumerate(vals) if type(v) is _ExactUs]
        if at:
            ns[at] = [vals[i].ns for i in at]
        elif _FIRST_PARSE.get() and float in set(map(type, vals)):
            raise _InexactTimes                 # load_trace reads the times again from the text
    return ns


def _one_ns(v) -> int:
    """One µs time (int or float) as exact integer ns."""
    return v.ns if type(v) is _ExactUs else int(_ns([v])[0])


def _as_int(x):
    """Thread/process ids: ints stay ints, '25738' becomes 25738, 'stream 7' becomes 7."""
    if isinstance(x, int):
        return x
    if isinstance(x, float) and x.is_integer():
        return int(x)
    if isinstance(x, str):
        m = re.search(r"(-?\d+)$", x.strip())
        if m:
            return int(m.group(1))
    return x


def _hashable_id(x) -> bool:
    """A pid/tid that can be used at all: a number or text (Kineto writes both)."""
    return x is None or isinstance(x, (int, float, str)) and not isinstance(x, bool)


def _is_memory_record(e) -> bool:
    """An allocator instant, known by its fields when its name was lost."""
    a = e.get("args")
    return isinstance(a, dict) and "Bytes" in a and "Total Allocated" in a


_RAW_NULL = msgspec.Raw(b"null")

#: ``args`` keys holding one list entry per argument: kept raw, each distinct text decoded once.
_LIST_ARGS_ORDER = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")
_LIST_ARGS = frozenset(_LIST_ARGS_ORDER)

#: The ``args`` keys each table reads (the first spelling wins; older ones follow it).
_TABLE_ARGS = {
    "ops": ("External id", "external id", "Input Dims", "Input type", "Input Strides", "Concrete Inputs",
            "Sequence number", "Fwd thread id", "Call stack", *COMM_ARGS),
    "python": ("Python id", "Python parent id"),                 # the ops table's Python frames
    "launches": ("correlation", "External id", "external id", "cbid"),
    "gpu": ("device", "stream", "correlation", "External id", "external id", "grid", "block", "bytes",
            "memory bandwidth (GB/s)"),
    "memory": ("Bytes", "Addr", "Total Allocated", "Total Reserved", "Device Type", "Device Id"),
}


def _attr(key: str) -> str:
    """The attribute of an args struct that holds ``args[key]``."""
    return "a_" + re.sub(r"\W", "_", key)


def _args_decoder(table: str):
    """A msgspec decoder of one table's ``args``: a struct with only the keys the
    table reads (None where absent, as ``dict.get`` gives), or None for ``null``;
    and the struct's type."""
    fields = [(_attr(k), msgspec.Raw if k in _LIST_ARGS else Any,
               msgspec.field(default=_RAW_NULL if k in _LIST_ARGS else None, name=k)) for k in _TABLE_ARGS[table]]
    struct = msgspec.defstruct(f"_{table}_args", fields, gc=False)
    return msgspec.json.Decoder(struct | None), struct


_ARGS_DECODERS = {t: _args_decoder(t) for t in _TABLE_ARGS}


class _Event(msgspec.Struct, gc=False):
    """The fields of a trace event the tables read, decoded by msgspec (other fields skipped;
    ``args`` kept raw until its table decodes it, :func:`_args`). Defaults are those of the
    dict path's ``event.get``; ``get`` reads a field as from a dict.
    """
    ph: Any = None
    cat: Any = None
    name: Any = ""
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = 0
    args: msgspec.Raw = _RAW_NULL     # decoded per table, with only the keys it reads

    def get(self, key, default=None):
        if key == "args":
            return msgspec.json.decode(self.args)
        return getattr(self, key) if key in _EVENT_FIELDS else default


_EVENT_FIELDS = frozenset(_Event.__struct_fields__)

#: Top-level keys of a trace that :func:`trace_from_json` reads.
_TOP_KEYS = ("baseTimeNanoseconds", "deviceProperties", "trace_id", "distributedInfo", "record_shapes",
             "profile_memory", "with_stack", "with_flops", "with_modules", "schemaVersion",
             "cuda_runtime_version", "cuda_driver_version", "cupti_version", "host_name")


#: The document: its event list, and the top-level keys read (absent ones stay UNSET).
_TraceDoc = msgspec.defstruct("_TraceDoc", [("traceEvents", list[_Event])]
                              + [(k, Any, msgspec.UNSET) for k in _TOP_KEYS], gc=False)


_TRACE_DECODER = msgspec.json.Decoder(_TraceDoc)


def _decode_trace(raw: bytes):
    """The usual trace decoded by msgspec into :class:`_TraceDoc`; None for anything else
    (a bare list, a non-object event, invalid JSON, a number out of range …), which then goes
    through :func:`~kitlib.readers.files.parse_json` and its exact error messages. Both parsers
    are strict JSON; an integer beyond 64 bits stays an integer here (orjson: a float).
    """
    if not raw.isascii():          # what msgspec skips is not checked for UTF-8: check it all here
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    try:
        return _TRACE_DECODER.decode(raw)
    except (msgspec.MsgspecError, RecursionError, ValueError):
        return None


#: The exact second parse (:func:`_decode_exact`).
_EXACT_TRACE_DECODER = msgspec.json.Decoder(_TraceDoc, float_hook=_exact_float)
_EXACT_ANY_DECODER = msgspec.json.Decoder(float_hook=_exact_float)


def _decode_exact(raw: bytes):
    """``raw`` parsed again with every float time beyond :data:`_EXACT_US` exact (a float64
    puts ``1712181098123456.789`` up to ±125 ns off); only when the first parse met one.
    """
    try:
        return _EXACT_TRACE_DECODER.decode(raw)
    except (msgspec.MsgspecError, RecursionError, ValueError):
        return _EXACT_ANY_DECODER.decode(raw)


class _InexactTimes(Exception):
    """Raised in :func:`load_trace`'s first build at a float time beyond :data:`_EXACT_US`."""


#: Set by :func:`load_trace` around its first build: a float time beyond :data:`_EXACT_US`
#: then raises :class:`_InexactTimes` (elsewhere it is taken as the float it is).
_FIRST_PARSE = ContextVar("kitlib_trace_first_parse", default=False)


def _build(doc, path, torch_version, first_parse: bool):
    token = _FIRST_PARSE.set(first_parse)
    try:
        return trace_from_json(doc, path, torch_version)
    finally:
        _FIRST_PARSE.reset(token)


def load_trace(path, torch_version: str | None = None, progress: bool | None = None) -> Trace:
    """Load a torch.profiler Chrome trace (``.json`` or ``.json.gz``) into tables.

    Parameters
    ----------
    path : str or os.PathLike
        ``prof.export_chrome_trace`` or ``tensorboard_trace_handler`` output: an object
        with ``traceEvents`` or a bare list of events, plain or gzipped.
    torch_version : str, optional
        The recording's torch, when known: decides the Python-frame rule
        (:func:`python_frames_rule`); else the trace is read for it.
    progress : bool, optional
        Show a progress bar; by default for JSON of :data:`PROGRESS_MIN_BYTES` or more
        (``KITLIB_PROGRESS=0``: never).

    Returns
    -------
    Trace
        Tables ``ops``, ``launches``, ``gpu``, ``memory``, ``other``, dict ``meta``; times
        integer ns on the profiler's clock (see :class:`Trace`). Kept in a columnar cache
        (:mod:`kitlib.readers.trace_cache`; ``KITLIB_TRACE_CACHE=0`` turns it off).

    Raises
    ------
    KitFileError
        Missing or empty file, truncated gzip, invalid JSON (line, column, byte and why:
        :func:`kitlib.readers.files.json_error`).
    TraceFormatError
        Valid JSON that is not a torch.profiler trace (no ``traceEvents``, events that are
        not objects, no event of any torch.profiler category).

    Examples
    --------
    >>> import json, os, tempfile
    >>> from kitlib.readers.trace import load_trace
    >>> path = os.path.join(tempfile.mkdtemp(), "trace.json")
    >>> with open(path, "w") as f:
    ...     json.dump({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::relu",
    ...                                 "pid": 1, "tid": 1, "ts": 1.5, "dur": 0.3}]}, f)
    >>> load_trace(path).ops[["name", "start_ns", "dur_ns"]]      # µs in the file, ns here
             name  start_ns  dur_ns
    0  aten::relu      1500     300
    """
    path = Path(path)
    from . import trace_cache
    # The plain path: trace_from_json(parse_json(read_file_bytes(path), path), path).
    # The rest is speed, for large traces: a cache of built tables and a faster parser.
    hit, key, disk = trace_cache.lookup(path, torch_version, read_file_bytes)  # speed: loaded before
    if hit is not None:
        return hit
    if disk is None:
        disk = read_file_bytes(path)
    raw = json_bytes(disk, path)
    source_bytes = len(disk)
    del disk
    bar = _progress(path, len(raw), progress)
    tr = _parse_and_build(raw, path, torch_version, bar)     # speed: msgspec, times exact to the ns
    bar.set_postfix_str("writing the cache")
    trace_cache.store_after_return(key, tr, source_bytes)     # speed: for the next load
    bar.update(1)
    bar.close()
    return tr


def json_bytes(disk: bytes, path) -> bytes:
    """A trace file's bytes, gunzipped where gzip.

    Raises
    ------
    KitFileError
        A truncated or damaged gzip.
    TraceFormatError
        An SQLite database (use ``load_nsys``) or a pickle (``load_memory_snapshot``).
    """
    raw = gunzip_if_gz(disk, path)
    if raw.startswith(b"SQLite format 3\x00"):
        raise TraceFormatError(path, "an SQLite database, not a JSON trace: for an Nsight Systems export "
                                     "use kitlib.load_nsys")
    if raw[:1] == b"\x80" and raw[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        raise TraceFormatError(path, "a Python pickle, not a JSON trace: for a memory snapshot use "
                                     "kitlib.load_memory_snapshot")
    return raw


def _parse_and_build(raw: bytes, path: Path, torch_version, bar) -> Trace:
    """Fast :func:`trace_from_json` of ``raw``: msgspec (else ``parse_json``), exact
    re-read of long float times, garbage collector paused.
    """
    # millions of small objects, none in a cycle: the cyclic GC would walk them again and again
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        bar.set_postfix_str("parsing JSON")
        doc = _decode_trace(raw)
        if doc is None:
            doc = parse_json(raw, path)
        n_bytes = len(raw)
        del raw                      # the decoded events' raw args still point into it, if they need it
        bar.update(1)
        bar.set_postfix_str("building tables and the event tree")
        try:
            try:
                tr = _build(doc, path, torch_version, first_parse=True)
            except _InexactTimes:
                # float times too long for a float64: read them again from the text
                del doc
                doc = _decode_exact(gunzip_if_gz(read_file_bytes(path), path))
                tr = _build(doc, path, torch_version, first_parse=False)
        except msgspec.MsgspecError:
            # skipped raw args hold what strict JSON refuses: parse again, for the exact error
            del doc
            doc = parse_json(gunzip_if_gz(read_file_bytes(path), path), path)
            tr = trace_from_json(doc, path, torch_version)
        bar.update(1)
        del doc
    finally:
        if gc_was_on:
            gc.enable()
    tr.meta["json_bytes"] = n_bytes
    return tr

#: JSON larger than this takes a few seconds to load here: show a progress bar.
PROGRESS_MIN_BYTES = 100_000_000

def _progress(path: Path, n_bytes: int, progress: bool | None):
    """A bar over the three stages of a load (parse, tables, cache), shown for large
    files (or when ``progress=True``)."""
    show = n_bytes >= PROGRESS_MIN_BYTES if progress is None else bool(progress)
    return progress_bar(f"loading {path.name} ({n_bytes / 1e6:,.0f} MB of JSON)", 3, show)


def trace_from_json(doc, path="<memory>", torch_version: str | None = None) -> Trace:
    """Build a :class:`Trace` from an already-parsed trace document (dict or list);
    ``torch_version`` as for :func:`load_trace`.

    Raises
    ------
    TraceFormatError
        As :func:`load_trace`.
    """
    path = Path(path)
    if isinstance(doc, _TraceDoc):                     # load_trace's fast path (:func:`_decode_trace`)
        events = doc.traceEvents
        top = {k: v for k in _TOP_KEYS if (v := getattr(doc, k)) is not msgspec.UNSET}
    elif isinstance(doc, dict):
        if "traceEvents" not in doc:
            keys = ", ".join(list(doc)[:8]) or "none"
            raise TraceFormatError(path, f"not a Chrome/Kineto trace: the JSON object has no "
                                         f"'traceEvents' list (its keys: {keys})")
        events, top = doc["traceEvents"], doc
    elif isinstance(doc, list):
        events, top = doc, {}
    else:
        raise TraceFormatError(path, f"not a Chrome/Kineto trace: the JSON is a {type(doc).__name__}, "
                                     "not an object with 'traceEvents' or a list of events")
    if not isinstance(events, list):
        raise TraceFormatError(path, "'traceEvents' is not a list")

    buckets = {"ops": [], "python": [], "launches": [], "gpu": [], "memory": [], "other": []}
    begin_end: list = []
    bad_meta = uncategorised = 0
    kinds = {"ops": [], "python": [], "launches": [], "gpu": []}
    process_names, thread_names = {}, {}
    # one pass sorting events into lists (the hot loop); tables are built column by column after
    if events and type(events[0]) is _Event:           # decoded by msgspec: every event an object
        ph_cat = map(attrgetter("ph", "cat"), events)
    else:
        for i, e in enumerate(events):
            if not isinstance(e, dict):
                raise TraceFormatError(path, f"event #{i} is a {type(e).__name__}, not a JSON object")
        ph_cat = ((e.get("ph"), e.get("cat")) for e in events)
    for e, (ph, cat) in zip(events, ph_cat):
        if ph == "X":
            hit = (_CATEGORIES.get(cat) or _CATEGORIES.get(cat.lower())) if isinstance(cat, str) else None
            if hit is not None:
                table, kind = hit
                buckets[table].append(e)
                kinds[table].append(kind)
                continue
            uncategorised += 1
        elif ph == "M":
            args = e.get("args")
            if not isinstance(args, dict) or not _hashable_id(e.get("pid")) or not _hashable_id(e.get("tid")):
                bad_meta += 1                    # a process/thread name we cannot use: counted, not fatal
                continue
            if e.get("name") == "process_name":
                process_names[_as_int(e.get("pid"))] = args.get("name")
            elif e.get("name") == "thread_name":
                thread_names[(_as_int(e.get("pid")), _as_int(e.get("tid")))] = args.get("name")
            continue
        elif ph == "i" and (e.get("name") == "[memory]" or _is_memory_record(e)):
            buckets["memory"].append(e)
            continue
        elif ph == "B" or ph == "E":
            begin_end.append(e)
            continue
        buckets["other"].append(e)
    # B/E pairs: read as the complete events they stand for
    be_pairs = be_unpaired = 0
    if begin_end:
        pairs, unpaired = _pair_begin_end(begin_end)
        be_pairs, be_unpaired = len(pairs), len(unpaired)
        for x, (b_ev, e_ev) in pairs:
            cat = x.get("cat")
            hit = (_CATEGORIES.get(cat) or _CATEGORIES.get(cat.lower())) if isinstance(cat, str) else None
            if hit is None:
                uncategorised += 1
                buckets["other"].extend((b_ev, e_ev))
                continue
            buckets[hit[0]].append(x)
            kinds[hit[0]].append(hit[1])
        buckets["other"].extend(unpaired)
    cats = map(attrgetter("cat"), events) if events and type(events[0]) is _Event else (e.get("cat") for e in events)
    try:
        counted = Counter(cats).items()                # at C speed
    except TypeError:                                  # a category that is a list or an object
        counted = ((e.get("cat"), 1) for e in events)
    cat_counts: dict = {}
    for c, n in counted:
        c = c if isinstance(c, str) or c is None else f"{type(c).__name__} {str(c)[:30]}"
        cat_counts[c] = cat_counts.get(c, 0) + n
    cat_counts = {str(k): v for k, v in cat_counts.items()}
    legacy = any(c in cat_counts for c in ("Operator", "Runtime", "Kernel", "Memcpy", "Memset"))

    n_known = sum(len(buckets[t]) for t in ("ops", "python", "launches", "gpu", "memory"))
    if n_known == 0:
        found = ", ".join(f"{k} ({v})" for k, v in sorted(cat_counts.items(), key=lambda kv: -kv[1])[:6])
        raise TraceFormatError(path, "no torch.profiler events (operators, CUDA launches, kernels or "
                                     f"memory instants) in {len(events)} events; categories found: "
                                     f"{found or 'none'}. Is this a torch.profiler trace?")

    if uncategorised and not (buckets["ops"] or buckets["python"] or buckets["launches"] or buckets["gpu"]):
        raise TraceFormatError(path, f"none of its {uncategorised} complete events (ph 'X') has a torch.profiler "
                                     "category ('cat': cpu_op, cuda_runtime, kernel, …): nothing to analyse. "
                                     "Was the 'cat' field stripped?")
    # the Python-frame rule reads the frames' raw args: before they are dropped below
    release = python_frames_release(buckets["python"], torch_version, top)
    rule = python_frames_rule(buckets["python"], torch_version, top)
    try:
        pre = {t: _args(buckets[t], t) for t in _TABLE_ARGS}
        if events and type(events[0]) is _Event:
            # raw args decoded: drop the texts, freeing the JSON they point into
            deque(map(setattr, events, repeat("args"), repeat(_RAW_NULL)), maxlen=0)
        ops = _ops_table(buckets["ops"], kinds["ops"], pre.pop("ops"), buckets["python"], pre.pop("python"))
        launches = _launch_table(buckets["launches"], kinds["launches"], pre.pop("launches"))
        gpu = _gpu_table(buckets["gpu"], kinds["gpu"], pre.pop("gpu"))
        memory = _memory_table(buckets["memory"], pre.pop("memory"))
        other = _other_table(buckets["other"])
    except _BadEvent as bad:
        e = bad.event
        raise TraceFormatError(path, f"event {e.get('name')!r} (ph {e.get('ph')!r}, cat {e.get('cat')!r}, "
                                     f"ts {e.get('ts')!r}) {bad.problem}") from None

    base = top.get("baseTimeNanoseconds")
    if base is not None and not (isinstance(base, int) and not isinstance(base, bool)
                                 or isinstance(base, float) and base.is_integer()):
        raise TraceFormatError(path, f"'baseTimeNanoseconds' is {str(base)[:40]!r}, not an integer number of ns")
    meta = {
        "format": "kineto-legacy" if legacy else "kineto",
        "devices": top.get("deviceProperties", []),
        "profiler_options": {k: top[k] for k in ("record_shapes", "profile_memory", "with_stack",
                                                 "with_flops", "with_modules") if k in top},
        "versions": {k: top[k] for k in ("schemaVersion", "cuda_runtime_version", "cuda_driver_version",
                                         "cupti_version") if k in top},
        "base_time_ns": int(base) if base is not None else 0,
        "trace_id": top.get("trace_id"),
        "distributed": top.get("distributedInfo"),
        "process_names": process_names,
        "thread_names": thread_names,
        "category_counts": cat_counts,
        "n_events": len(events),
        "unusable_metadata_events": bad_meta,
        "unread_complete_events": uncategorised,
        "memory_records_unusable": len(buckets["memory"]) - len(memory),
        "begin_end_pairs": be_pairs,
        "begin_end_unpaired": be_unpaired,
    }
    meta["python_frames_are_children"], meta["python_frames_rule"] = rule
    meta["python_frames_release"] = release[0]
    meta["memory_edges_float_us"], meta["memory_edges_rule"] = memory_edges_rule(torch_version, top)
    meta["python_frames_are_rows"] = bool(release[0]) and PYTHON_FRAME_RULES[release[0]]["rows"]
    timed = (ops["kind"] != "python").to_numpy(dtype=bool)
    t_start, t_dur = ops["start_ns"].to_numpy()[timed], ops["dur_ns"].to_numpy()[timed]
    meta["time_resolution_ns"] = 1000 if len(t_start) and bool(((t_start % 1000) == 0).all()
                                                             and ((t_dur % 1000) == 0).all()) else 1
    if isinstance(doc, _TraceDoc):
        # free the decoded events before the event tree is built (memory)
        doc.traceEvents = events = ph_cat = cats = []
        buckets.clear()
    tree = build_host_tree(ops, launches, meta["python_frames_are_children"], meta["time_resolution_ns"])
    ops["parent"], ops["depth"] = _ops_nesting(ops, tree, meta["python_frames_are_children"])
    return Trace(path=path, ops=ops, launches=launches, gpu=gpu, memory=memory, other=other, meta=meta,
                 host_events=tree)


def _pair_begin_end(events: list):
    """Pair ``B``/``E`` events per thread, in time order (an end closes the latest open
    begin), into the complete events they stand for (the begin with an exact ``dur``).
    Returns ``[(complete, (begin, end)), ...]`` and the unpaired events.
    """
    by_thread: dict = {}
    unpaired = []
    for i, e in enumerate(events):
        ts = e.get("ts")
        if not isinstance(ts, (int, float)) or isinstance(ts, bool) or not abs(ts) < _MAX_US:
            unpaired.append(e)
            continue
        if type(ts) is float and not -_EXACT_US < ts < _EXACT_US and _FIRST_PARSE.get():
            raise _InexactTimes                 # load_trace reads the times again from the text
        key = (e.get("pid"), e.get("tid"))
        if not (_hashable_id(key[0]) and _hashable_id(key[1])):
            unpaired.append(e)
            continue
        by_thread.setdefault(key, []).append((_one_ns(ts), i, e))
    pairs = []
    for evs in by_thread.values():
        evs.sort(key=itemgetter(0, 1))
        stack: list = []
        for ts, _, e in evs:
            if e.get("ph") == "B":
                stack.append((ts, e))
            elif stack:
                b_ts, b = stack.pop()
                dur_ns = ts - b_ts                      # exact ns, both
                dur = dur_ns / 1000
                x = msgspec.structs.replace(b, ph="X", dur=dur) if type(b) is _Event else dict(b, ph="X", dur=dur)
                pairs.append((x, (b, e)))
            else:
                unpaired.append(e)
        unpaired.extend(b for _, b in stack)
    return pairs, unpaired


def _col(evs, key, default=None):
    """``event[key]`` of every event (``default`` where absent; for msgspec-decoded
    events, the :class:`_Event` default, which is the one every caller passes)."""
    if evs and type(evs[0]) is _Event:
        return list(map(attrgetter(key), evs))
    try:
        return list(map(itemgetter(key), evs))     # every event has it: at C speed
    except KeyError:
        return [e.get(key, default) for e in evs]


_NO_ARGS: dict = {}


def _args(evs, table: str) -> list:
    """Every event's ``args`` (an empty one where absent): structs of the keys ``table``
    reads (:data:`_TABLE_ARGS`) for msgspec events, dicts otherwise.
    """
    if evs and type(evs[0]) is _Event:
        decoder, struct = _ARGS_DECODERS[table]
        empty = struct()                                 # one per call: its list fields are set below
        try:
            out = list(map(decoder.decode, map(attrgetter("args"), evs)))
        except msgspec.ValidationError:                 # an 'args' that is not a JSON object
            for e in evs:
                a = e.get("args")
                if a is not None and not isinstance(a, dict):
                    raise _BadEvent(e, f"'args' is a {type(a).__name__}, not an object") from None
            raise
        out = [empty if a is None else a for a in out]
        for key in _TABLE_ARGS[table]:
            if key in _LIST_ARGS:                        # raw JSON text: each distinct text decoded once
                f = _attr(key)
                # joined and split at C speed (no NUL byte in JSON text)
                texts = b"\0".join(map(attrgetter(f), out)).split(b"\0")
                decoded = {t: msgspec.json.decode(t) for t in set(texts)}
                decoded[b"null"] = None
                # every struct's raw text replaced by its decoded value, at C speed
                deque(map(setattr, out, repeat(f), map(decoded.__getitem__, texts)), maxlen=0)
        return out
    return [e.get("args") or _NO_ARGS for e in evs]


def _arg(evs, *keys, args):
    """``args[key]`` of every event (the first of ``keys`` present), None where absent;
    ``args`` from :func:`_args`."""
    if args and isinstance(args[0], msgspec.Struct):    # structs from _args: an attribute each
        out = list(map(attrgetter(_attr(keys[0])), args))
        get = lambda a, k: getattr(a, _attr(k))          # noqa: E731
    else:
        get = dict.get
        try:
            out = [a.get(keys[0]) for a in args]
        except AttributeError:  # an 'args' that is not a JSON object
            e = next(e for e, a in zip(evs, args) if not isinstance(a, dict))
            raise _BadEvent(e, f"'args' is a {type(e.get('args')).__name__}, not an object") from None
    for k in keys[1:]:  # older spellings, only where the first is missing
        missing = [i for i, v in enumerate(out) if v is None]
        if not missing:
            break
        for i in missing:
            out[i] = get(args[i], k)
    return out


_PLAIN_ID_TYPES = {int, type(None)}
_LIST_TYPES = {list, type(None)}


def _int64_ids(values: list):
    """``pd.array(values, dtype="Int64")`` of ints and Nones, built at C speed; raises
    OverflowError outside int64, as pandas does.
    """
    n = len(values)
    missing = values.count(None)
    if missing == n:
        return pd.arrays.IntegerArray(np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool))
    if missing == 0:
        return pd.arrays.IntegerArray(np.fromiter(values, dtype=np.int64, count=n), np.zeros(n, dtype=bool))
    a = np.array(values, dtype=object)
    mask = a == None                                    # noqa: E711 (elementwise)
    a[mask] = 0
    return pd.arrays.IntegerArray(a.astype(np.int64), mask)


def _ids(values, evs=None, key: str = "id") -> pd.Series:
    """Integer ids (``Int64``); digit text is read as its integer, anything else is refused
    with the event named (when ``evs`` is given), never turned into a missing value.
    """
    if set(map(type, values)) <= _PLAIN_ID_TYPES:      # the usual case, checked at C speed
        try:
            return pd.Series(_int64_ids(values))
        except (TypeError, ValueError, OverflowError):
            pass
    out = []
    for i, v in enumerate(values):
        if v is None or (isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63):
            out.append(v)
            continue
        if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
            out.append(int(v))
            continue
        if isinstance(v, str) and re.fullmatch(r"\s*-?\d+\s*", v) and -2**63 <= int(v) < 2**63:
            out.append(int(v))
            continue
        why = ("does not fit in a 64-bit integer" if isinstance(v, (int, float, str)) and not isinstance(v, bool)
               and re.fullmatch(r"-?\d+(\.0*)?", str(v).strip()) else f"is a {type(v).__name__}, not an integer id")
        if evs is not None:
            raise _BadEvent(evs[i], f"'{key}' = {str(v)[:40]!r} {why}")
        out.append(None)
    return pd.Series(pd.array(out, dtype="Int64"))


def _floats(evs, values, key: str) -> np.ndarray:
    """A numeric field (float64, NaN where absent); anything else than a number is
    refused with the event named."""
    for e, v in zip(evs, values):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise _BadEvent(e, f"'{key}' = {str(v)[:40]!r} is a {type(v).__name__}, not a number")
    return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)


def _lists(evs, values, key: str) -> list:
    """Per-argument fields (``Input Dims`` …) must be JSON lists (or absent)."""
    if set(map(type, values)) <= _LIST_TYPES:           # the usual case, checked at C speed
        return values
    for e, v in zip(evs, values):
        if v is not None and not isinstance(v, list):
            raise _BadEvent(e, f"'{key}' is a {type(v).__name__} ({str(v)[:30]!r}), not a list "
                               "with one entry per argument")
    return values


def _list_arg(evs, key: str, args) -> list:
    """A per-argument field of every event, checked (:func:`_lists`), equal lists shared."""
    vals = _arg(evs, key, args=args)
    if args and isinstance(args[0], msgspec.Struct):    # already shared by _args
        return _lists(evs, [None if v is _RAW_NULL else v for v in vals], key)
    return _shared(_lists(evs, vals, key))


def _shared(values: list) -> list:
    """Equal per-argument lists as one object (a trace repeats the same shapes every step);
    read the cells, never change them in place.
    """
    seen: dict = {}
    out = []
    for v in values:
        if v is None:
            out.append(None)
        else:
            out.append(seen.setdefault(_json_key(v), v))
    return out


class _BadEvent(Exception):
    """An event whose time field cannot be read (turned into a TraceFormatError naming the file)."""

    def __init__(self, event, problem):
        self.event, self.problem = event, problem


_MAX_US = 9.2e15  # µs: beyond this, ns no longer fit in int64 (year ~2262 since the epoch)


def _numbers(evs, key, default=None):
    """``event[key]`` of every event as float µs, checked: present, numeric, finite, in range."""
    vals = _col(evs, key, default)
    try:
        a = np.asarray(vals, dtype=np.float64)
        if a.ndim != 1:
            raise ValueError
    except (TypeError, ValueError):
        for e, v in zip(evs, vals):
            if v is None:
                raise _BadEvent(e, f"has no '{key}'") from None
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise _BadEvent(e, f"'{key}' is {v!r}, not a number of microseconds") from None
        raise
    bad = ~np.isfinite(a) | (np.abs(a) > _MAX_US)
    if key == "dur":
        bad |= a < 0
    if bad.any():
        i = int(np.argmax(bad))
        if vals[i] is None:
            raise _BadEvent(evs[i], f"has no '{key}'")
        raise _BadEvent(evs[i], f"'{key}' is {vals[i]!r} µs, outside what a trace can hold"
                                + (" (a negative duration)" if key == "dur" and a[i] < 0 else ""))
    return a


def _base_frame(evs, with_dur=True):
    """The columns every table has, of a non-empty list of events, checked."""
    start = _ns_exact(evs, "ts", _numbers(evs, "ts"))
    dur = np.rint(_numbers(evs, "dur", 0) * 1000).astype(np.int64) if with_dur else np.zeros(len(evs), np.int64)
    names = _col(evs, "name", "")
    name_col = _text(names)                             # the usual case: every name is text
    if name_col is None:
        for e, n in zip(evs, names):
            if not isinstance(n, str):
                raise _BadEvent(e, f"has a 'name' that is a {type(n).__name__}, not text")
        name_col = pd.array(names, dtype=object)
    ids = {}
    for col, key in ((_col(evs, "pid"), "pid"), (_col(evs, "tid"), "tid")):
        if set(map(type, col)) == {int}:                # the usual case, checked at C speed
            try:
                ids[key] = np.fromiter(col, dtype=np.int64, count=len(col))
                continue
            except OverflowError:                       # one beyond int64: named below
                pass
        for e, v in zip(evs, col):
            if type(v) is int:
                if not -2**63 <= v < 2**63:
                    raise _BadEvent(e, f"has a '{key}' ({v}) that does not fit in a 64-bit integer")
            elif v is None or not _hashable_id(v):
                raise _BadEvent(e, f"has no '{key}'" if v is None else
                                f"has a '{key}' that is a {type(v).__name__}, not a number or text")
        ids[key] = [v if type(v) is int else _as_int(v) for v in col]    # checked in range above
    return {
        "name": name_col,
        "pid": ids["pid"], "tid": ids["tid"],
        "start_ns": start, "dur_ns": dur, "end_ns": start + dur,
    }


def _text(values: list):
    """A ``str`` column built by pyarrow at C speed; None unless every value is a ``str``."""
    import pyarrow as pa
    if not values:                                      # empty: pandas' own dtype for it
        return None
    try:
        arr = pa.array(values, type=pa.large_string())
    except (pa.ArrowException, TypeError, ValueError, UnicodeError):
        return None
    if arr.null_count:
        return None
    return pd.array(arr, dtype="str")


def _ops_table(revs, kinds, rest_args, py, py_args) -> pd.DataFrame:
    """The ops table from the operators, annotations and steps (``revs``, their
    ``kinds`` and :func:`_args`), and the Python frames (``py``, ``py_args``)."""
    if not revs and not py:
        return _empty(OPS_COLUMNS)
    # Python events carry only the tracer's ids: two groups, each column built once, then ordered
    parts = []
    if revs:
        d = _base_frame(revs)
        names = _col(revs, "name", "")                  # text, checked by _base_frame
        is_step = {n: _STEP_RE.match(n) is not None for n in set(names)}
        d["kind"] = ["step" if k in ("annotation", "op") and is_step[n] else k for k, n in zip(kinds, names)]
        del names
        A = rest_args
        d["external_id"] = _ids(_arg(revs, "External id", "external id", args=A), revs, "External id")
        for col, key in zip(("input_dims", "input_types", "input_strides", "concrete_inputs"), _LIST_ARGS_ORDER):
            d[col] = _list_arg(revs, key, A)
        d["sequence_number"] = _ids(_arg(revs, "Sequence number", args=A), revs, "Sequence number")
        d["fwd_thread_id"] = _ids(_arg(revs, "Fwd thread id", args=A), revs, "Fwd thread id")
        d["call_stack"] = _arg(revs, "Call stack", args=A)
        d["comm_args"] = _comm_args(revs, A)
        parts.append(d)
    if py:
        d = _base_frame(py)
        d["kind"] = ["python"] * len(py)
        A = py_args
        d["python_id"] = _ids(_arg(py, "Python id", args=A), py, "Python id")
        d["python_parent_id"] = _ids(_arg(py, "Python parent id", args=A), py, "Python parent id")
        parts.append(d)
    for d in parts:                                   # what the other group has, empty here
        n = len(d["start_ns"])
        for c in OPS_COLUMNS:
            if c not in d and c not in ("parent", "depth"):
                d[c] = _int64_ids([None] * n) if c in _INT_ID_COLS else [None] * n
    cols = {c: _concat([d[c] for d in parts]) for c in parts[0]}
    del parts, d, A, revs, py, rest_args, py_args   # memory: each column is now held once, in cols
    n = len(cols["start_ns"])
    cols["parent"] = np.full(n, -1, dtype=np.int64)   # set from the one event tree (build_host_tree)
    cols["depth"] = np.zeros(n, dtype=np.int64)
    # time order; at equal start the longer (enclosing) event first; ties keep input order
    return _frame(cols, OPS_COLUMNS, np.lexsort((-cols["dur_ns"], cols["start_ns"])),
                  objects=("input_dims", "input_types", "input_strides", "concrete_inputs", "call_stack",
                           "comm_args"))


def _comm_args(evs, args) -> list:
    """Per event, the dict of the :data:`COMM_ARGS` keys it has (``record_param_comms``), else None."""
    n = len(evs)
    cols = [(k, c) for k in COMM_ARGS if (c := _arg(evs, k, args=args)).count(None) != n]
    out = [None] * n
    if cols:                                         # only the events with a key of them, in key order
        for i in sorted({i for _, c in cols for i, v in enumerate(c) if v is not None}):
            out[i] = {k: c[i] for k, c in cols if c[i] is not None}
    return out


def _frame(d: dict, columns: list, order: np.ndarray, objects=()) -> pd.DataFrame:
    """A table of the columns in ``d`` (emptied as it goes), rows in ``order``, each column
    copied once; ``objects``: columns kept as Python objects.
    """
    out = {}
    for c in columns:
        v = _concat([d.pop(c)])
        if isinstance(v, list) and c in objects:         # one object array, then in order: C speed
            v = pd.arrays.NumpyExtensionArray(np.fromiter(v, dtype=object, count=len(v)).take(order))
        elif isinstance(v, list) and len(order) and (t := _text(v)) is not None:   # text (kind, api)
            v = t.take(order)
        else:
            v = _take(v, order)
            if c in objects:
                v = pd.array(v, dtype=object)
        if not len(order) and isinstance(v, pd.arrays.ArrowStringArray):
            v = pd.array(np.zeros(0, dtype=object), dtype=object)   # no row left: as pandas gives it
        out[c] = v
    return pd.DataFrame(out, copy=False)


def _concat(parts: list):
    """One column from the parts of a table: numpy arrays, pandas arrays or lists."""
    parts = [p.array if isinstance(p, pd.Series) else p for p in parts]
    if len(parts) == 1:
        return parts[0]
    if all(isinstance(p, np.ndarray) for p in parts):
        return np.concatenate(parts)
    if all(isinstance(p, pd.api.extensions.ExtensionArray) for p in parts):
        return type(parts[0])._concat_same_type(parts)
    return list(chain.from_iterable(p.tolist() if isinstance(p, np.ndarray) else p for p in parts))


def _take(values, order: np.ndarray):
    """``values`` (numpy array, pandas array or list) in the order ``order``."""
    if isinstance(values, (np.ndarray, pd.api.extensions.ExtensionArray)):
        return values.take(order)
    return list(map(values.__getitem__, order.tolist()))


_INT_ID_COLS = {"external_id", "sequence_number", "fwd_thread_id", "python_id", "python_parent_id"}


# --------------------------------------------------------------------------- the event tree
#: Per torch release, what the profiler does with ``with_stack`` Python frames: ``children``
#: (events of ``key_averages()``'s tree) and ``rows`` (rows of ``key_averages()``).
PYTHON_FRAME_RULES = {
    "≤ 2.11": {"children": False, "rows": False},
    "2.12–2.13": {"children": True, "rows": True},
    "≥ 2.14": {"children": True, "rows": False},
}


def python_frames_release(python_events: list, torch_version: str | None = None,
                          top: dict | None = None) -> tuple[str, str]:
    """Which of :data:`PYTHON_FRAME_RULES` the profiler that wrote a trace followed.

    Frames with ``CallFrom`` → ≥ 2.14; no ``CallFrom`` but a top-level ``host_name`` →
    2.12–2.13; neither → ≤ 2.11; a known ``torch_version`` (a bundle's manifest) decides
    instead. ``python_events``: the trace's ``python_function`` events; ``top``: its
    top-level keys.

    Returns
    -------
    (str, str)
        A key of :data:`PYTHON_FRAME_RULES` (``""`` without Python frames), and how it was decided.

    Sources: docs/SOURCES.md#python-frames-release
    """
    if not python_events:
        return "", "no Python frames in the trace: the rule does not apply"
    major, minor = _release(torch_version)
    if major is not None:
        rel = "≤ 2.11" if (major, minor) < (2, 12) else "2.12–2.13" if (major, minor) < (2, 14) else "≥ 2.14"
        return rel, f"torch {torch_version} (from the bundle's manifest)"
    head_args = [e.get("args") for e in python_events[: min(len(python_events), 200)]]
    if any(isinstance(a, dict) and "CallFrom" in a for a in head_args):
        return "≥ 2.14", "inferred from the trace: its Python frames carry 'CallFrom' (written from torch 2.14)"
    if top and "host_name" in top:
        return "2.12–2.13", ("inferred from the trace: its Python frames carry no 'CallFrom' (torch ≤ 2.13) "
                             "and it has a top-level 'host_name' (torch ≥ 2.12)")
    return "≤ 2.11", ("inferred from the trace: its Python frames carry no 'CallFrom' and it has no top-level "
                      "'host_name' (torch ≤ 2.11; 'Python thread' only says verbose=True)")


def _release(torch_version) -> tuple:
    """``(major, minor)`` of a torch version such as ``"2.13.0+cpu"``; ``(None, None)`` when
    none is given or it does not parse."""
    try:
        major, minor = (int(x) for x in str(torch_version).split("+")[0].split(".")[:2])
        return (major, minor) if torch_version else (None, None)
    except ValueError:
        return None, None


def memory_edges_rule(torch_version: str | None = None, top: dict | None = None) -> tuple[bool, str]:
    """Whether the profiler held memory records to its events' edges after a round trip
    through float µs (``True``, torch ≤ 2.10) or in exact ns (``False``, from 2.11).

    Decided from ``torch_version`` where known, else by a top-level ``host_name`` (≥ 2.12:
    exact ns); a bare 2.11 trace is read as float edges.

    Returns
    -------
    (bool, str)
        The rule, and how it was decided.

    Sources: docs/SOURCES.md#memory-edges-rule
    """
    major, minor = _release(torch_version)
    if major is not None:
        old = (major, minor) < (2, 11)
        return old, f"torch {torch_version} (from the bundle's manifest): " + (
            "memory records held to float-µs event edges (torch ≤ 2.10)" if old else
            "memory records held to the events' exact ns (torch ≥ 2.11)")
    if top and "host_name" in top:
        return False, ("inferred from the trace: a top-level 'host_name' (torch ≥ 2.12), whose profiler "
                       "holds memory records to the events' exact ns")
    return True, ("inferred from the trace: no top-level 'host_name' (torch ≤ 2.11): memory records held "
                  "to float-µs event edges, as torch ≤ 2.10 does (2.11 uses exact ns, and its traces "
                  "cannot be told from 2.10's)")


def python_frames_rule(python_events: list, torch_version: str | None = None,
                       top: dict | None = None) -> tuple[bool, str]:
    """Whether the profiler that wrote a trace counted Python frames as children of its
    event tree (``key_averages()``): not up to torch 2.11, yes from 2.12 (rows too in
    2.12–2.13). Arguments as :func:`python_frames_release`.

    Returns
    -------
    (bool, str)
        The rule, and how it was decided.

    Sources: docs/SOURCES.md#python-frames-release
    """
    rel, how = python_frames_release(python_events, torch_version, top)
    if not rel:
        return False, how
    children = PYTHON_FRAME_RULES[rel]["children"]
    rows = PYTHON_FRAME_RULES[rel]["rows"]
    return children, (f"{how}: with torch {rel} the Python frames are "
                      + ("children in the profiler's tree" if children else "not children in the profiler's tree")
                      + ("" if not children else
                         ", and rows of key_averages()" if rows
                         else ", and not rows of key_averages() by default"))


def _ops_nesting(ops: pd.DataFrame, tree: pd.DataFrame, python_children: bool):
    """``Trace.ops``' ``parent`` (row label of the enclosing ``ops`` row) and ``depth``,
    read off the host tree; Python frames outside that tree keep the tracer's own tree
    (``Python parent id``) or, where the trace has none, nest among themselves by time."""
    n = len(ops)
    parent = np.full(n, -1, dtype=np.int64)
    is_op = (tree["source"] == "ops").to_numpy()
    rows = tree["row"].to_numpy(dtype=np.int64)
    tpar = tree["parent"].to_numpy(dtype=np.int64)
    # nearest ancestor that is an ops row, for all the tree's ops at once
    at = np.flatnonzero(is_op)
    p = tpar[at]
    climb = np.flatnonzero((p >= 0) & ~is_op[np.maximum(p, 0)])
    while climb.size:
        p[climb] = tpar[p[climb]]
        climb = climb[(p[climb] >= 0) & ~is_op[np.maximum(p[climb], 0)]]
    found = p >= 0
    parent[rows[at[found]]] = rows[p[found]]
    is_py = (ops["kind"] == "python").to_numpy()
    if is_py.any() and not python_children:
        py_rows = np.flatnonzero(is_py)
        ids = ops["python_id"].array[py_rows]
        pids = ops["python_parent_id"].array[py_rows]
        if (~pids.isna()).any():
            # each parent id's frame (the last, where an id repeats), by binary search
            known = ~ids.isna()
            kid = ids.to_numpy(dtype=np.int64, na_value=0)[known]
            krow = py_rows[known]
            o = np.argsort(kid, kind="stable")
            kid, krow = kid[o], krow[o]
            last = np.r_[kid[1:] != kid[:-1], True] if len(kid) else np.zeros(0, dtype=bool)
            kid, krow = kid[last], krow[last]
            asked = ~pids.isna()
            q = pids.to_numpy(dtype=np.int64, na_value=0)[asked]
            if len(kid):
                at = np.minimum(np.searchsorted(kid, q), len(kid) - 1)
                hit = kid[at] == q
                parent[py_rows[asked][hit]] = krow[at[hit]]
        else:
            # no tracer tree in the file: the frames nest among themselves by time
            t = build_host_tree(ops.iloc[py_rows].assign(kind="op"), _empty(LAUNCH_COLUMNS))
            tp = t["parent"].to_numpy()
            trows = t["row"].to_numpy()
            for i in range(len(t)):
                if tp[i] >= 0:
                    parent[trows[i]] = trows[tp[i]]
    return parent, depths(parent)


def _launch_table(evs, kinds, A) -> pd.DataFrame:
    if not evs:
        return _empty(LAUNCH_COLUMNS)
    d = _base_frame(evs)
    d["api"] = kinds
    d["correlation"] = _ids(_arg(evs, "correlation", args=A), evs, "correlation")
    d["external_id"] = _ids(_arg(evs, "External id", "external id", args=A), evs, "External id")
    d["cbid"] = _ids(_arg(evs, "cbid", args=A), evs, "cbid")
    return _frame(d, LAUNCH_COLUMNS, np.argsort(d["start_ns"], kind="stable"))


def _gpu_table(evs, kinds, A) -> pd.DataFrame:
    if not evs:
        return _empty(GPU_COLUMNS)
    d = _base_frame(evs)
    d["kind"] = kinds
    d["device"] = _ids(_arg(evs, "device", args=A), evs, "device")
    stream = _arg(evs, "stream", args=A)
    tids = d["tid"].tolist() if isinstance(d["tid"], np.ndarray) else d["tid"]     # Python ints
    d["stream"] = _ids([s if s is not None else _as_int(t) for s, t in zip(stream, tids)])
    d["correlation"] = _ids(_arg(evs, "correlation", args=A), evs, "correlation")
    d["external_id"] = _ids(_arg(evs, "External id", "external id", args=A), evs, "External id")
    d["grid"] = [tuple(g) if isinstance(g, list) else None for g in _arg(evs, "grid", args=A)]
    d["block"] = [tuple(b) if isinstance(b, list) else None for b in _arg(evs, "block", args=A)]
    d["bytes"] = _ids(_arg(evs, "bytes", args=A), evs, "bytes")
    d["bandwidth_gb_per_s"] = _floats(evs, _arg(evs, "memory bandwidth (GB/s)", args=A), "memory bandwidth (GB/s)")
    # GPU-side annotations carry no device id; the process id is the device in Kineto.
    pids = d["pid"].tolist() if isinstance(d["pid"], np.ndarray) else d["pid"]
    d["device"] = d["device"].fillna(pd.Series(pd.array([p if isinstance(p, int) else None for p in pids],
                                                        dtype="Int64")))
    return _frame(d, GPU_COLUMNS, np.argsort(d["start_ns"], kind="stable"))


def _memory_table(evs, A) -> pd.DataFrame:
    if not evs:
        return _empty(MEMORY_COLUMNS)
    d = _base_frame(evs, with_dur=False)
    d.pop("end_ns")
    for col, key in zip(("bytes", "addr", "total_allocated", "total_reserved", "device_type", "device_id"),
                        _TABLE_ARGS["memory"]):                      # "Bytes", "Addr", … in this order
        d[col] = _ids(_arg(evs, key, args=A), evs, key)
    # records without size or device: left out (meta["memory_records_unusable"])
    keep = np.flatnonzero(d["bytes"].notna().to_numpy() & d["device_type"].notna().to_numpy())
    return _frame(d, MEMORY_COLUMNS, keep[np.argsort(d["start_ns"][keep], kind="stable")])


def _other_table(evs) -> pd.DataFrame:
    if not evs:
        return _empty(OTHER_COLUMNS)
    def numbers(key):        # a missing or non-numeric time reads as 0: these events are kept, not used
        vals = _col(evs, key, 0)
        if not set(map(type, vals)) <= {int, float}:
            vals = [v if isinstance(v, (int, float)) else 0 for v in vals]
        return vals
    def column(key, default=None):      # what pandas makes of the list, at C speed where it is plain
        vals = _col(evs, key, default)
        if set(map(type, vals)) == {int}:
            try:
                return np.fromiter(vals, dtype=np.int64, count=len(vals))
            except OverflowError:
                return vals
        text = _text(vals)
        return vals if text is None else text
    start = _ns_exact(evs, "ts", numbers("ts"))
    dur = np.rint(np.asarray(numbers("dur"), dtype=np.float64) * 1000).astype(np.int64)
    return pd.DataFrame({"name": column("name", ""), "cat": column("cat"), "ph": column("ph"),
                         "pid": column("pid"), "tid": column("tid"),
                         "start_ns": start, "dur_ns": dur})[OTHER_COLUMNS]


def _empty(columns) -> pd.DataFrame:
    int_cols = {"start_ns", "dur_ns", "end_ns"}
    return pd.DataFrame({c: pd.Series(dtype="int64" if c in int_cols else object) for c in columns})
