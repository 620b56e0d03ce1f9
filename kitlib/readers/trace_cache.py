"""A columnar cache of loaded traces: parse the JSON once, read Arrow tables after.

:func:`kitlib.readers.trace.load_trace` writes the tables of every trace it loads
(``ops``, ``launches``, ``gpu``, ``memory``, ``other``, ``host_events``, ``meta``) as
Arrow IPC files under ``<cache>/traces/`` (:func:`kitlib.paths.cache_dir`), keyed by the
file's sha256, the torch version given and a fingerprint of the reader's source; the
next load of the same file, in any process, reads them back. Entries are never trusted
(CRC-32s, row counts, their own key and source size are checked; a bad entry is deleted
and the trace parsed again), written off the critical path (:func:`store`), and a
read-only class cache (``KITLIB_SHARED_CACHE``, ``python -m kitlib cache --build DIR``)
is read first. ``KITLIB_TRACE_CACHE=0`` turns it off; :func:`clear` empties it.
Sources: docs/SOURCES.md#trace-cache
"""
from __future__ import annotations

import collections
import functools
import hashlib
import os
import shutil
import tempfile
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from ..settings import is_off, value as setting
from ..paths import cache_dir

FORMAT = 3
TABLES = ("ops", "launches", "gpu", "memory", "other", "host_events")
_TUPLE_COLUMNS = {"grid", "block"}
_MANIFEST = "entry.json"

#: How this process's ``load_trace`` calls were answered: ``"shared"`` (an entry of
#: ``KITLIB_SHARED_CACHE``), ``"own"`` (an entry of the learner's own cache) or
#: ``"parsed"`` (the file parsed); counts since the process started.
hits: collections.Counter = collections.Counter()


def enabled() -> bool:
    """Whether ``load_trace`` uses the cache (``KITLIB_TRACE_CACHE`` not 0/off/false/no)."""
    return not is_off("KITLIB_TRACE_CACHE")


def folder() -> Path:
    """The cache's folder (not created here)."""
    return cache_dir() / "traces"


def shared_dir() -> Path | None:
    """The shared, read-only cache folder (``KITLIB_SHARED_CACHE``: it holds
    ``traces/`` and ``trace-hashes/`` as :func:`kitlib.paths.cache_dir` does), or None
    when the setting is unset.
    """
    v = setting("KITLIB_SHARED_CACHE")
    return Path(v).expanduser() if v else None


def roots() -> list:
    """The cache folders ``load_trace`` reads, in order: :func:`shared_dir` when it is set
    and exists, then ``None`` (the learner's own, :func:`kitlib.paths.cache_dir`).
    """
    shared = shared_dir()
    return ([shared] if shared is not None and shared.is_dir() else []) + [None]


@functools.lru_cache(maxsize=1)
def _reader_fingerprint() -> str:
    """A hash of the reader's own source and of the model it builds (the schemas, the
    event tree: ``kitlib/model``), read once per process."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in ("trace.py", "trace_cache.py", "files.py"):
        h.update((here / name).read_bytes())
    for name in ("schema.py", "tree.py", "trace.py", "window.py"):
        h.update((here.parent / "model" / name).read_bytes())
    return h.hexdigest()[:16]


def content_hash(data: bytes) -> str:
    """The sha256 of a trace file's bytes as they are on disk (hex)."""
    return hashlib.sha256(data).hexdigest()


def key_for(data: bytes | None, torch_version: str | None = None, content: str | None = None) -> str:
    """The cache key of a trace file, from its bytes as they are on disk (or their
    :func:`content_hash`, ``content``).
    """
    h = hashlib.sha256((content or content_hash(data)).encode())
    h.update(f"|{torch_version}|{FORMAT}|{_reader_fingerprint()}".encode())
    return h.hexdigest()


def _hashes(root: Path | None = None) -> Path:
    return (cache_dir() if root is None else root) / "trace-hashes"


def stat_signature(st: os.stat_result) -> list:
    """What says a file is unchanged without reading it: device, inode, size, and
    modification and change times (ns), as git's index keeps them.
    """
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _memo(path, root: Path | None = None) -> Path:
    return _hashes(root) / (hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:32] + ".json")


#: A file changed less than this long before its hash was remembered may change
#: again within the same tick of the file system's clock without its change time
#: moving ("racy git"): such a hash is not trusted.
RACY_NS = 2_000_000_000


def _now_ns() -> int:
    return time.time_ns()


def remembered_hash(path, st: os.stat_result, root: Path | None = None) -> str | None:
    """The content hash remembered for ``path`` if the file is unchanged since (same
    device, inode, size, modification and change times as ``st``) and it had last
    changed at least :data:`RACY_NS` before it was remembered; else None. ``root``: the
    cache folder whose memos are read (default :func:`kitlib.paths.cache_dir`; the
    shared one, :func:`shared_dir`, is only read).
    """
    try:
        import orjson
        m = orjson.loads(_memo(path, root).read_bytes())
        if m.get("stat") != stat_signature(st) or m["remembered_ns"] - st.st_ctime_ns < RACY_NS:
            return None
        return m["sha256"]
    except Exception:
        return None


def remember_hash(path, st: os.stat_result, content: str) -> None:
    """Remember ``content`` (the file's hash) with ``st``, taken before the file was read
    (a change while it was read then shows as a newer change time). Failures are silent.
    """
    try:
        import orjson
        _hashes().mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=_hashes(), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(orjson.dumps({"path": str(path), "stat": stat_signature(st), "sha256": content,
                                  "remembered_ns": _now_ns()}))
        os.replace(tmp, _memo(path))
    except Exception:
        pass


def clear() -> int:
    """Delete every cached trace. Returns how many entries were removed."""
    wait()                             # a write under way would otherwise land after
    shutil.rmtree(_hashes(), ignore_errors=True)
    d = folder()
    if not d.is_dir():
        return 0
    n = sum(1 for x in d.iterdir() if x.is_dir())
    shutil.rmtree(d, ignore_errors=True)
    return n


def _encode_meta(meta: dict) -> dict:
    m = dict(meta)
    m["process_names"] = [[k, v] for k, v in (meta.get("process_names") or {}).items()]
    m["thread_names"] = [[k[0], k[1], v] for k, v in (meta.get("thread_names") or {}).items()]
    return m


def _decode_meta(m: dict) -> dict:
    m = dict(m)
    m["process_names"] = {k: v for k, v in m.get("process_names", [])}
    m["thread_names"] = {(p, t): v for p, t, v in m.get("thread_names", [])}
    return m


def _crc(data: bytes) -> int:
    """A CRC-32 of a cache file: finds damage (a flipped byte, a cut), quickly."""
    return zlib.crc32(data)


_NAN = b"NaN"       # pandas' fill for a missing object cell (JSON has no NaN); None is null


def _dictionary(values: list):
    """An Arrow dictionary column of arbitrary JSON values: the distinct values' JSON
    text as the dictionary, one int32 index per row (None and pd.NA are ``null``, a
    float NaN ``NaN``)."""
    import orjson
    import pyarrow as pa

    # the reader shares one object between equal values: encode each object once
    first: dict = {}
    by_object = np.fromiter((first.setdefault(id(v), len(first)) for v in values), dtype=np.int64,
                            count=len(values))
    objects = list({id(v): v for v in values}.values())        # in the order of first appearance
    text = [b"null" if v is None or v is pd.NA else _NAN if isinstance(v, float) and v != v else orjson.dumps(v)
            for v in objects]
    text_codes, uniques = pd.factorize(np.asarray(text, dtype=object), sort=False)
    codes = text_codes[by_object] if len(values) else np.zeros(0, dtype=np.int64)
    return pa.DictionaryArray.from_arrays(pa.array(codes.astype(np.int32)),
                                          pa.array([u.decode() for u in uniques], type=pa.string()))


def _undictionary(column, tuples: bool) -> np.ndarray:
    """The object array of a :func:`_dictionary` column: each distinct value decoded once."""
    import orjson
    import pyarrow as pa

    arr = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if not pa.types.is_dictionary(arr.type) or arr.null_count:
        raise ValueError("not a dictionary column")
    values = [float("nan") if t == "NaN" else orjson.loads(t) for t in arr.dictionary.to_pylist()]
    if tuples:
        values = [tuple(v) if isinstance(v, list) else v for v in values]
    table = np.empty(len(values), dtype=object)
    table[:] = values
    return table[arr.indices.to_numpy(zero_copy_only=False)]


def lookup(path: Path, torch_version: str | None, read) -> tuple:
    """A trace built before from the same file's content: ``(trace, key, disk)``.

    The shared, read-only cache (``KITLIB_SHARED_CACHE``) is asked first, then the
    learner's own. A file whose stat is remembered unchanged is not even read; otherwise
    its bytes are read (``read(path)``) and hashed. ``trace`` is None on a miss; ``key`` is where
    :func:`store_after_return` writes the tables (None with the cache off); ``disk`` is the
    file's bytes where they were read (None where not: the caller reads them). A miss
    counts in ``hits["parsed"]``.
    """
    from ..model.trace import Trace
    if not enabled():
        hits["parsed"] += 1
        return None, None, None
    tops = roots()                      # the shared cache first, then the learner's own (None)
    try:
        st = path.stat()
    except OSError:
        st = None                       # read_file_bytes names the problem
    for root in tops:
        known = remembered_hash(path, st, root) if st is not None else None
        if known is not None:           # an unchanged file: not even read again
            key = key_for(None, torch_version, content=known)
            hit = load(key, path, source_bytes=st.st_size, root=root)
            if hit is not None:
                hits["own" if root is None else "shared"] += 1
                tables, meta = hit
                return Trace(path=path, meta=meta, **tables), key, None
    disk = read(path)                   # read once: hashed for the cache, then parsed
    content = content_hash(disk)
    key = key_for(None, torch_version, content=content)
    for root in tops:
        if root is None and st is not None:   # only the learner's own cache is written
            remember_hash(path, st, content)
        hit = load(key, path, source_bytes=len(disk), root=root)
        if hit is not None:
            hits["own" if root is None else "shared"] += 1
            tables, meta = hit
            return Trace(path=path, meta=meta, **tables), key, disk
    hits["parsed"] += 1
    return None, key, disk


def store_after_return(key: str | None, trace, source_bytes: int) -> None:
    """:func:`store` ``trace`` under ``key`` (nothing when None), the write starting once
    the caller has gone on (see ``after`` in :func:`store`)."""
    if key is None:
        return
    returned = threading.Event()
    try:
        store(key, trace, after=returned, source_bytes=source_bytes)
    finally:
        returned.set()


def store(key: str, trace, after: threading.Event | None = None, source_bytes: int | None = None) -> None:
    """Write a loaded trace's tables under ``key`` from a background thread, into a temporary
    folder renamed into place (whole or not at all). The tables are taken as they are now;
    ``source_bytes`` is the file's size on disk, checked by :func:`load`; the thread starts
    when ``after`` is set (or after 5 s). Failures are silent: the cache is an optimisation.
    Sources: docs/SOURCES.md#trace-cache
    """
    try:
        import orjson
        deep = not _copy_on_write()
        frames = {name: getattr(trace, name).copy(deep=deep) for name in TABLES}
        meta = orjson.dumps(_encode_meta(trace.meta), option=orjson.OPT_NON_STR_KEYS)
    except Exception:
        return
    with _pending_lock:
        if key in _pending and _pending[key].is_alive():
            return
        t = threading.Thread(target=_write_after, args=(after, folder(), key, frames, meta, source_bytes),  # the folder of now
                             name=f"kitlib-trace-cache-{key[:12]}")
        _pending[key] = t
    t.start()


def _copy_on_write() -> bool:
    """Whether pandas copies on write here (pandas 3, or the option switched on)."""
    if int(pd.__version__.split(".")[0]) >= 3:
        return True
    try:
        return pd.get_option("mode.copy_on_write") is True
    except Exception:           # pragma: no cover
        return False


#: Background writes of this process by key (:func:`store`), and the lock guarding the dict.
_pending: dict = {}
_pending_lock = threading.Lock()


def _after_fork() -> None:         # a forked child has none of its parent's threads
    global _pending_lock
    _pending.clear()
    _pending_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def wait(key: str | None = None) -> None:
    """Wait until this process's background write of ``key`` (every key: None) is done."""
    with _pending_lock:
        threads = [t for k, t in _pending.items() if key is None or k == key]
    for t in threads:
        t.join()
    with _pending_lock:
        for k in [k for k, t in _pending.items() if not t.is_alive()]:
            del _pending[k]


#: A temporary folder of an entry untouched for this long was left by a process that
#: stopped while writing (a kernel restarted, killed): :func:`_sweep` removes it.
STALE_S = 3600


def _sweep(where: Path) -> None:
    """Remove the temporary folders (``.<key>-…``) that writers which never finished
    left in ``where``, once they are :data:`STALE_S` old."""
    now = time.time()
    for d in where.glob(".*-*"):
        try:
            if d.is_dir() and now - d.stat().st_mtime > STALE_S:
                shutil.rmtree(d, ignore_errors=True)
        except OSError:
            pass


def _write_after(after, where: Path, key: str, frames: dict, meta: bytes, source_bytes=None) -> None:
    """:func:`_write`, once ``after`` is set (at once without one; at most 5 s later)."""
    if after is not None:
        after.wait(5.0)
    _write(where, key, frames, meta, source_bytes)


def _entry_crc(entry: dict) -> int:
    """A CRC-32 of an entry's listing, every field but this one, keys sorted."""
    import orjson
    return _crc(orjson.dumps({k: v for k, v in entry.items() if k != "entry_crc32"}, option=orjson.OPT_SORT_KEYS))


def _write(where: Path, key: str, frames: dict, meta: bytes, source_bytes: int | None = None) -> None:
    """Write one entry into ``where`` (:func:`store`'s thread): tables into a temporary
    folder, renamed into place whole."""
    try:
        import orjson
        import pyarrow as pa
        import pyarrow.feather as feather
    except ImportError:         # pragma: no cover - pyarrow is a dependency
        return
    dest = where / key
    if dest.exists():
        return
    tmp = None
    try:
        where.mkdir(parents=True, exist_ok=True)
        _sweep(where)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=where))
        entry = {"format": FORMAT, "key": key, "source_bytes": source_bytes, "tables": {}}
        for name in TABLES:
            df = frames[name]
            out, dtypes, encoded = {}, {}, []
            for c in df.columns:
                col = df[c]
                dtypes[c] = str(col.dtype)
                if col.dtype == object:     # Python values: a dictionary column of JSON texts
                    out[c] = _dictionary(col.tolist())
                    encoded.append(c)
                elif isinstance(col.dtype, pd.StringDtype):    # names repeat: each distinct text once
                    out[c] = pa.array(col, from_pandas=True).dictionary_encode()
                else:
                    out[c] = pa.array(col, from_pandas=True)
            f = tmp / f"{name}.arrow"
            feather.write_feather(pa.table(out) if out else pa.table({}), str(f), compression="uncompressed")
            entry["tables"][name] = {"rows": int(len(df)), "columns": list(df.columns), "dtypes": dtypes,
                                     "encoded": encoded, "crc32": _crc(f.read_bytes())}
        (tmp / "meta.json").write_bytes(meta)
        entry["meta_crc32"] = _crc(meta)
        entry["entry_crc32"] = _entry_crc(entry)
        (tmp / _MANIFEST).write_bytes(orjson.dumps(entry))
        os.replace(tmp, dest)          # the entry appears whole or not at all
        tmp = None
    except Exception:                  # a full disk, a read-only cache: just do without
        pass
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def load(key: str, path, source_bytes: int | None = None, root: Path | None = None):
    """The cached tables of ``key``: ``(tables, meta)`` — a dict of DataFrames named as
    :data:`TABLES` and the trace's ``meta`` dict, from which ``load_trace`` builds the
    :class:`~kitlib.readers.trace.Trace` (this module never imports the reader) — or
    None (absent, incomplete, damaged or unreadable, written for another key, or, given
    ``source_bytes`` (the size of the file ``path`` now), for a file of another size; a
    bad entry is deleted, a sound one of another file kept).

    ``root``: the cache folder to read (default :func:`kitlib.paths.cache_dir`). Given
    one (the shared cache, :func:`shared_dir`), the entry is only read: a bad one is
    passed over, never deleted, and nothing is written there.
    """
    wait(key)                          # this process's own write of it, if one is under way
    dest = (folder() if root is None else root / "traces") / key
    if not (dest / _MANIFEST).is_file():
        return None
    try:
        import orjson
        import pyarrow as pa

        # nullable integers straight into pandas' Int64, never through float64 (exact above 2**53)
        exact = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}.get
        entry = orjson.loads((dest / _MANIFEST).read_bytes())
        meta_bytes = (dest / "meta.json").read_bytes()
        if entry.get("format") != FORMAT or _crc(meta_bytes) != entry["meta_crc32"]:
            raise ValueError("stale or damaged entry")
        if entry.get("key") != key or _entry_crc(entry) != entry["entry_crc32"]:
            raise ValueError("an entry of another trace, or an edited one")
        if source_bytes is not None and entry.get("source_bytes") not in (None, source_bytes):
            return None                # a sound entry, of another file (an edited hash memo led here): kept
        tables = {}
        for name in TABLES:
            spec = entry["tables"][name]
            data = (dest / f"{name}.arrow").read_bytes()       # read once: hashed, then read zero-copy
            if _crc(data) != spec["crc32"]:
                raise ValueError(f"{name}: damaged")
            t = pa.ipc.open_file(pa.py_buffer(data)).read_all()
            if t.num_rows != spec["rows"] and spec["columns"]:
                raise ValueError(f"{name}: row count")
            cols = {}
            for c in spec["columns"]:
                want = spec["dtypes"][c]
                if c in spec["encoded"]:
                    cols[c] = pd.Series(_undictionary(t.column(c), c in _TUPLE_COLUMNS), dtype=object, copy=False)
                else:
                    col = t.column(c)
                    if pa.types.is_dictionary(col.type):        # a str column stored as a dictionary
                        col = col.cast(col.type.value_type)
                    col = col.to_pandas(types_mapper=exact if want in ("Int64", "boolean") else None)
                    cols[c] = col if str(col.dtype) == want else col.astype(want)
            df = pd.DataFrame(cols, index=pd.RangeIndex(spec["rows"]))
            tables[name] = df[spec["columns"]]
        meta = _decode_meta(orjson.loads(meta_bytes))
        if isinstance(meta.get("base_time_ns"), float):
            meta["base_time_ns"] = int(meta["base_time_ns"])
        return tables, meta
    except Exception:
        if root is None:               # the shared cache is read-only: passed over, never deleted
            shutil.rmtree(dest, ignore_errors=True)
        return None


__all__ = ["enabled", "folder", "key_for", "content_hash", "remembered_hash", "remember_hash", "store", "wait",
           "load", "clear", "shared_dir", "hits", "FORMAT"]
