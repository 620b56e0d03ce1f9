"""Property-based fuzzing of kitlib's readers with Hypothesis (issue 17).

Each *target* is a real recording, a way to damage a copy of it, and the property
every damaged copy must keep: reading it gives a loaded result or a kitlib error
(:class:`kitlib.errors.KitError`), never a bare exception; what loads survives the
analyses downstream of it the same way; and the tables the damage did not touch keep
every row of the undamaged recording.

Targets: a 25 ms slice of the torch.profiler trace ``data/reference/profiler_5step`` and
the first 4,000 events of two public traces (torch 2.6 and PyTorch 1.9 formats)
(events of each category with fields dropped or given wrong values, events deleted,
top-level keys damaged), the Nsight Systems export ``data/reference/nsys_8step/report.sqlite``
(dropped tables and columns, NULLs, wrong types, huge values, deleted rows) and the
memory snapshot ``data/reference/profiler_5step/memory_snapshot.pickle`` (dropped
keys, wrong types, removed elements; flipped and cut bytes); gzip streams of random
bytes and runs of zeros against a random inflation limit (issue 41: a gzip bomb must be
refused as too large, with the figures; the other hostile files of issue 41, links out of
a bundle, named pipes, /dev/zero, are in ``test_bad_input.py``); and, beside the readers,
the answers a learner's cell may hand an exercise (Python and numpy booleans, numbers,
NaN, infinities, texts; issue 41). Runs are seeded
(``derandomize=True``) and bounded (``max_examples``); the module takes about 15 s.

Adding a target (the torch.profiler trace, say): write a ``Target`` with ``load_sound``
(the untouched recording, loaded once), ``mutations`` (a Hypothesis strategy of
plain, printable descriptions of damage), ``damage(sound_source, mutation, folder)``
(writes the damaged copy, returns its path), ``load`` (the reader),
``untouched(mutation)`` (names of the result's tables the damage cannot have
changed), ``rows(result, name)`` and optionally ``downstream(result)`` (analyses
that must give a result or a KitError); then add it to ``TARGETS``.
"""
from __future__ import annotations

import gzip
import math
import pickle
import re
import shutil
import sqlite3
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kitlib.errors import KitDataWarning, KitError, KitFileError
from kitlib.readers.files import gunzip_if_gz
from kitlib.readers.nsys import SOURCE_TABLES, STATS_REPORTS, load_nsys, nsys_stats
from kitlib.readers.snapshot import load_memory_snapshot, load_plain_pickle

from support.damage import NSYS_8STEP, SNAPSHOT, loosen

FUZZ = settings(max_examples=15, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@dataclass
class Target:
    name: str
    load_sound: Callable
    mutations: st.SearchStrategy
    damage: Callable          # (mutation, folder) -> path of the damaged copy
    load: Callable            # path -> result (or KitError)
    untouched: Callable       # mutation -> names of tables the damage cannot change
    rows: Callable            # (result, table name) -> number of rows
    downstream: Callable = lambda result: None


def _kit_or_result(fn, *args):
    """Call ``fn``; a KitError is an accepted outcome, anything else propagates."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", KitDataWarning)
            return fn(*args)
    except KitError:
        return None


def check(target: Target, sound, mutation) -> None:
    folder = Path(tempfile.mkdtemp(prefix=f"fuzz-{target.name}-"))
    try:
        path = target.damage(mutation, folder)
        result = _kit_or_result(target.load, path)
        if result is None:
            return
        for table in target.untouched(mutation):
            assert target.rows(result, table) == target.rows(sound, table), (mutation, table)
        target.downstream(result)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --------------------------------------------------------------------------- Nsight export
def _schema(path):
    con = sqlite3.connect(path)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: [r[1] for r in con.execute(f'PRAGMA table_info("{t}")')] for t in tables}
    finally:
        con.close()


NSYS_SCHEMA = _schema(NSYS_8STEP)
# The tables kitlib reads (event tables first: most damage should land there).
NSYS_TABLES = [t for t in [*dict.fromkeys(SOURCE_TABLES.values()), "StringIds", "PROCESSES",
                           "ENUM_CUDA_MEMCPY_OPER", "META_DATA_EXPORT", "ANALYSIS_DETAILS"]
               if t in NSYS_SCHEMA]
_ROWS = {"all": "1", "first": "rowid = (SELECT MIN(rowid) FROM {t})",
         "every 7th": "rowid % 7 = 3", "last": "rowid = (SELECT MAX(rowid) FROM {t})"}
_VALUES = {"text": "'x'", "digits as text": "'12'", "blob": "x'00ff'", "fraction": "1.5",
           "int64 max": "9223372036854775807", "int64 min": "(-9223372036854775807 - 1)",
           "-1": "-1", "0": "0", "2**62 + 1": "4611686018427387905"}


@st.composite
def nsys_mutation(draw):
    table = draw(st.sampled_from(NSYS_TABLES))
    kind = draw(st.sampled_from(["null", "value", "value", "drop column", "delete rows",
                                 "drop table"]))
    column = draw(st.sampled_from(NSYS_SCHEMA[table]))
    rows = draw(st.sampled_from(list(_ROWS)))
    value = draw(st.sampled_from(list(_VALUES)))
    if kind == "drop table":
        return (kind, table)
    if kind == "drop column":
        return (kind, table, column)
    if kind == "delete rows":
        return (kind, table, rows)
    if kind == "null":
        return (kind, table, column, rows)
    return (kind, table, column, rows, value)


def nsys_damage(mutation, folder: Path) -> Path:
    p = folder / "report.sqlite"
    shutil.copy(NSYS_8STEP, p)
    p.chmod(0o644)
    con = sqlite3.connect(p)
    kind, table = mutation[:2]
    where = _ROWS[mutation[3 if kind in ("null", "value") else 2]].format(t=f'"{table}"') \
        if kind in ("null", "value", "delete rows") else ""
    if kind == "drop table":
        con.execute(f'DROP TABLE "{table}"')
    else:
        loosen(con, table)
        if kind == "drop column":
            con.execute(f'ALTER TABLE "{table}" DROP COLUMN "{mutation[2]}"')
        elif kind == "delete rows":
            con.execute(f'DELETE FROM "{table}" WHERE {where}')
        elif kind == "null":
            con.execute(f'UPDATE "{table}" SET "{mutation[2]}" = NULL WHERE {where}')
        else:
            con.execute(f'UPDATE "{table}" SET "{mutation[2]}" = {_VALUES[mutation[4]]} '
                        f'WHERE {where}')
    con.commit()
    con.close()
    return p


def nsys_untouched(mutation):
    return [attr for attr, source in SOURCE_TABLES.items() if source != mutation[1]]


def nsys_downstream(rep) -> None:
    from kitlib.analyses import align, coldstart, steps
    for attr in ("kernels", "launches", "copies", "sets", "osrt"):
        df = getattr(rep, attr)
        for c in ("start_ns", "end_ns", "dur_ns"):
            assert str(df[c].dtype) == "int64", (attr, c, df[c].dtype)
        assert (df["dur_ns"] >= 0).all(), attr
    assert (rep.nvtx["dur_ns"].dropna() >= 0).all()
    for name in STATS_REPORTS:
        out = _kit_or_result(nsys_stats, rep, name)
        for c in ("Total Time (ns)", "Min (ns)", "Total Proj Time (ns)"):
            if out is not None and c in out and len(out):
                assert (out[c] >= 0).all(), (name, c)
    for fn in (steps.steps_of, steps.device_work, steps.labelled_ranges, align.gpu_work,
               lambda r: r.gpu_events(), lambda r: r.describe(), lambda r: r.steps):
        _kit_or_result(fn, rep)
    _kit_or_result(coldstart.traced_processes, rep)        # an empty ThreadNames too
    _kit_or_result(coldstart.gap_activity, rep, 9_000_000_000, 9_400_000_000)


NSYS = Target(name="nsys", load_sound=lambda: load_nsys(NSYS_8STEP), mutations=nsys_mutation(),
              damage=nsys_damage, load=load_nsys, untouched=nsys_untouched,
              rows=lambda rep, t: len(getattr(rep, t)), downstream=nsys_downstream)


# --------------------------------------------------------------------------- memory snapshot
def _small_snapshot():
    """The reference snapshot with its first 300 history events (all its segments),
    so that each fuzzed copy loads in a few ms instead of a second."""
    raw = load_plain_pickle(SNAPSHOT)
    raw["device_traces"] = [t[:300] for t in raw["device_traces"]]
    last = max(e["time_us"] for t in raw["device_traces"] for e in t)
    raw["external_annotations"] = [a for a in raw.get("external_annotations", [])
                                   if a["time_us"] <= last]
    return raw


SNAP_RAW = _small_snapshot()
_JUNK = st.one_of(st.none(), st.booleans(), st.text(max_size=5), st.binary(max_size=4),
                  st.floats(allow_nan=True, allow_infinity=True),
                  st.integers(min_value=-(1 << 70), max_value=1 << 70),
                  st.lists(st.integers(), max_size=3),
                  st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@st.composite
def snapshot_mutation(draw):
    """(path into the snapshot, operation, junk): path like ('segments', 3, 'blocks', 0)."""
    where = draw(st.sampled_from(["top", "segment", "block", "event", "frame", "annotation"]))
    segs, events = SNAP_RAW["segments"], SNAP_RAW["device_traces"][0]
    notes = SNAP_RAW.get("external_annotations") or []
    i = draw(st.integers(0, len(segs) - 1))
    k = draw(st.integers(0, len(events) - 1))
    path = {"top": (), "segment": ("segments", i),
            "block": ("segments", i, "blocks", draw(st.integers(0, len(segs[i]["blocks"]) - 1))),
            "event": ("device_traces", 0, k),
            "frame": ("device_traces", 0, k, "frames",
                      draw(st.integers(0, max(len(events[k]["frames"]) - 1, 0)))),
            "annotation": ("external_annotations", draw(st.integers(0, max(len(notes) - 1, 0))))}[where]
    op = draw(st.sampled_from(["set key", "drop key", "replace", "remove"]))
    return path, op, draw(st.integers(0, 50)), draw(_JUNK)


def _snapshot_apply(raw, mutation):
    path, op, key_pick, junk = mutation
    parent, node = None, raw
    try:
        for step in path:
            parent, node = node, node[step]
    except (IndexError, KeyError):
        return raw
    if op in ("set key", "drop key") and isinstance(node, dict) and node:
        key = sorted(node, key=str)[key_pick % len(node)]
        if op == "set key":
            node[key] = junk
        else:
            del node[key]
    elif op == "replace" and parent is not None:
        parent[path[-1]] = junk
    elif op == "remove" and isinstance(parent, list):
        del parent[path[-1]]
    return raw


def snapshot_damage(mutation, folder: Path) -> Path:
    raw = _snapshot_apply(pickle.loads(pickle.dumps(SNAP_RAW, protocol=4)), mutation)   # a deep copy, at C speed
    p = folder / "memory_snapshot.pickle"
    p.write_bytes(pickle.dumps(raw, protocol=4))
    return p


def snapshot_untouched(mutation):
    first = mutation[0][0] if mutation[0] else None
    if first == "segments":
        return ["events"]
    if first in ("device_traces", "external_annotations"):
        return ["segments", "blocks"]
    return []


SNAPSHOT_TARGET = Target(
    name="snapshot", load_sound=lambda: None, mutations=snapshot_mutation(),
    damage=snapshot_damage, load=load_memory_snapshot, untouched=snapshot_untouched,
    rows=lambda snap, t: len(getattr(snap, t)),
    downstream=lambda snap: (snap.summary(), _kit_or_result(snap.peak),
                             _kit_or_result(snap.largest_live_at_peak)))

# --------------------------------------------------------------------------- torch.profiler traces
def _trace_slice() -> dict:
    """The first ~25 ms of the reference profiler_5step trace (operators, launches,
    kernels, Python frames, memory records, metadata): a real trace, small enough."""
    import gzip
    import orjson
    from conftest import REF
    doc = orjson.loads(gzip.decompress((REF / "profiler_5step" / "trace.json.gz").read_bytes()))
    ev = doc["traceEvents"]
    step = min(e["ts"] for e in ev if str(e.get("name", "")).startswith("ProfilerStep#"))
    doc["traceEvents"] = [e for e in ev if e.get("ph") == "M" or
                          isinstance(e.get("ts"), (int, float)) and step <= e["ts"] < step + 25_000]
    return doc


def _public_slice(name: str, n: int = 4000) -> dict:
    """The first ``n`` events of a public trace (tests/data/public-traces, SOURCES.md)."""
    import gzip
    import orjson
    from conftest import PUBLIC
    doc = orjson.loads(gzip.decompress((PUBLIC / name).read_bytes()))
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    doc["traceEvents"] = doc["traceEvents"][:n]
    return doc


class _Sliced(dict):
    """Source name -> trace document, each read from its file when first asked for (not at
    import: every pytest process imports this module to collect it, and the three reads
    take about 1.5 s)."""

    def __init__(self, makers: dict):
        super().__init__()
        self.makers = makers

    def __iter__(self):
        return iter(self.makers)

    def __missing__(self, name):
        self[name] = self.makers[name]()
        return self[name]


TRACE_SOURCES = _Sliced({"reference": _trace_slice,
                         "torch-2.6": lambda: _public_slice("tracelens_torch2.6_h100_bert_small.json.gz"),
                         "pytorch-1.9": lambda: _public_slice("kineto_2021-06_resnet50_v100.json.gz")})
_TRACE_CATS = {"cpu_op": "ops", "user_annotation": "ops", "python_function": "ops", "cuda_runtime": "launches",
               "cuda_driver": "launches", "kernel": "gpu", "gpu_memcpy": "gpu", "gpu_user_annotation": "gpu",
               "cpu_instant_event": "memory", None: None}
_TRACE_FIELDS = ["ts", "dur", "pid", "tid", "name", "cat", "ph", "args", "args.External id", "args.correlation",
                 "args.Input Dims", "args.Bytes", "args.Python id", "args.Python parent id", "args.stream",
                 "args.Concrete Inputs", "args.Total Allocated"]
_TRACE_VALUES = {"null": None, "text": "x", "digits": "12", "list": [1], "object": {"a": 1}, "fraction": 1.5,
                 "-1": -1, "2**63": 2 ** 63, "1e300": 1e300, "true": True, "nested": [[[1, [2]]]], "empty": ""}


@st.composite
def trace_mutation(draw):
    cat = draw(st.sampled_from([c for c in _TRACE_CATS if c] + ["metadata", "top"]))
    kind = draw(st.sampled_from(["value", "value", "drop key", "delete events"]))
    field = draw(st.sampled_from(["baseTimeNanoseconds", "traceEvents", "deviceProperties"]
                                 if cat == "top" else _TRACE_FIELDS))
    rows = draw(st.sampled_from(["first", "every 7th", "all", "last"]))
    value = draw(st.sampled_from(list(_TRACE_VALUES)))
    return (cat, kind, field, rows, value)


def _pick(events, rows):
    if not events:
        return []
    return {"first": events[:1], "last": events[-1:], "all": events, "every 7th": events[3::7]}[rows]


def trace_damage(mutation, folder: Path, source: str = "reference") -> Path:
    import orjson
    cat, kind, field, rows, value = mutation
    doc = orjson.loads(orjson.dumps(TRACE_SOURCES[source]))   # a deep copy (JSON in, JSON out), 20x deepcopy's speed
    if cat == "top":
        if kind == "drop key":
            doc.pop(field, None)
        elif kind == "value":
            doc[field] = _TRACE_VALUES[value]
    else:
        ev = doc["traceEvents"]
        mine = [e for e in ev if (e.get("ph") == "M" if cat == "metadata" else e.get("cat") == cat)]
        chosen = _pick(mine, rows)
        if kind == "delete events":
            ids = {id(e) for e in chosen}
            doc["traceEvents"] = [e for e in ev if id(e) not in ids]
        for e in chosen if kind != "delete events" else []:
            where, key = (e.get("args"), field[5:]) if field.startswith("args.") else (e, field)
            if not isinstance(where, dict):
                continue
            if kind == "drop key":
                where.pop(key, None)
            else:
                where[key] = _TRACE_VALUES[value]
    p = folder / "trace.json"
    p.write_bytes(orjson.dumps(doc))
    return p


def trace_untouched(mutation):
    cat, kind, field, rows, value = mutation
    if cat == "top" or field in ("cat", "ph", "name"):   # may move events between tables
        return []
    if field.startswith("args.Bytes") or field.startswith("args.Total"):
        return [t for t in ("ops", "launches", "gpu") if t != _TRACE_CATS.get(cat)]
    source = "memory" if cat == "metadata" else _TRACE_CATS.get(cat)
    return [t for t in ("ops", "launches", "gpu", "memory") if t != source and cat != "metadata"] + \
        (["ops", "launches", "gpu", "memory"] if cat == "metadata" else [])


def trace_downstream(tr) -> None:
    import kitlib
    from kitlib.analyses import flops, grouping, memory, steps
    for fn in (kitlib.chain, kitlib.lint, grouping.group_ops, steps.step_measures, flops.flops_by_event,
               lambda t: memory.memory_by_operator(t, device="cuda"), lambda t: t.steps):
        _kit_or_result(fn, tr)


def _load_trace_uncached(path):
    from kitlib.readers.trace import load_trace
    import os
    old = os.environ.get("KITLIB_TRACE_CACHE")
    os.environ["KITLIB_TRACE_CACHE"] = "0"
    try:
        return load_trace(path)
    finally:
        if old is None:
            os.environ.pop("KITLIB_TRACE_CACHE", None)
        else:
            os.environ["KITLIB_TRACE_CACHE"] = old


def _trace_target(source: str) -> Target:
    def sound():
        folder = Path(tempfile.mkdtemp(prefix="fuzz-trace-"))
        return _load_trace_uncached(trace_damage(("top", "none", "traceEvents", "first", "null"), folder, source))
    return Target(name=f"trace {source}", load_sound=sound, mutations=trace_mutation(),
                  damage=lambda m, folder: trace_damage(m, folder, source), load=_load_trace_uncached,
                  untouched=trace_untouched, rows=lambda tr, t: len(getattr(tr, t)), downstream=trace_downstream)


TRACE_TARGETS = [_trace_target(s) for s in TRACE_SOURCES]
TRACE = TRACE_TARGETS[0]

TARGETS = {t.name: t for t in (NSYS, SNAPSHOT_TARGET, *TRACE_TARGETS)}


# --------------------------------------------------------------------------- the tests
@pytest.fixture(scope="module")
def sound():
    cache = {}

    def get(name):
        if name not in cache:
            if name == "snapshot":
                folder = Path(tempfile.mkdtemp(prefix="fuzz-sound-"))
                p = folder / "memory_snapshot.pickle"
                p.write_bytes(pickle.dumps(SNAP_RAW, protocol=4))
                cache[name] = load_memory_snapshot(p)
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("error", KitDataWarning)
                    cache[name] = TARGETS[name].load_sound()
        return cache[name]
    return get


@FUZZ
@given(mutation=nsys_mutation())
def test_damaged_nsys_export_loads_or_gives_a_kit_error(sound, mutation):
    check(NSYS, sound("nsys"), mutation)


@FUZZ
@given(mutation=snapshot_mutation())
def test_damaged_memory_snapshot_loads_or_gives_a_kit_error(sound, mutation):
    check(SNAPSHOT_TARGET, sound("snapshot"), mutation)


@pytest.mark.parametrize("target", TRACE_TARGETS, ids=[t.name for t in TRACE_TARGETS])
def test_damaged_trace_loads_or_gives_a_kit_error(sound, target):
    @settings(FUZZ, max_examples=12)
    @given(mutation=trace_mutation())
    def run(mutation):
        check(target, sound(target.name), mutation)
    run()


@settings(FUZZ, max_examples=30)
@given(cut=st.integers(1, 40_000), flips=st.lists(st.tuples(st.integers(0, 40_000),
                                                            st.integers(1, 255)), max_size=4))
def test_flipped_or_cut_snapshot_bytes_never_run_anything(cut, flips):
    folder = Path(tempfile.mkdtemp(prefix="fuzz-bytes-"))
    try:
        data = bytearray(pickle.dumps(SNAP_RAW, protocol=4)[:-cut or None])
        for at, x in flips:
            if at < len(data):
                data[at] ^= x
        p = folder / "memory_snapshot.pickle"
        p.write_bytes(bytes(data))
        _kit_or_result(load_memory_snapshot, p)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_fuzz_reaches_both_outcomes(sound):
    # A property test that only ever saw errors (or only loads) would prove little:
    # fixed mutations of each kind give each outcome, with the rows counted.
    loaded = NSYS.load(nsys_damage(("null", "CUPTI_ACTIVITY_KIND_KERNEL", "start", "every 7th"),
                                   Path(tempfile.mkdtemp())))
    assert len(loaded.kernels) == len(sound("nsys").kernels) - 620
    assert len(loaded.launches) == len(sound("nsys").launches) == 12084
    with pytest.raises(KitError):
        NSYS.load(nsys_damage(("value", "CUPTI_ACTIVITY_KIND_RUNTIME", "globalTid", "last", "text"),
                              Path(tempfile.mkdtemp())))
    snap = SNAPSHOT_TARGET.load(snapshot_damage(
        (("device_traces", 0, 5), "drop key", 2, None), Path(tempfile.mkdtemp())))   # compile_context
    assert snap is not None and len(snap.blocks) == len(sound("snapshot").blocks)


# --------------------------------------------------------------------------- answers (issue 41)
ANSWER_VALUES = st.one_of(st.booleans(), st.booleans().map(np.bool_), st.integers(-3, 3),
                          st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(["nan", "inf", "-inf", "1", "yes"]),
                          st.floats(allow_nan=True, allow_infinity=True).map(np.float64))


@settings(FUZZ, max_examples=150)
@given(given_=ANSWER_VALUES)
def test_a_number_question_is_right_only_for_a_finite_number_and_keeps_only_numbers(given_):
    """A number question whose answer is 1 (where ``True`` once counted as right): a verdict
    for any value, right only for a finite number equal to 1 (never a yes/no), and a
    prediction kept only for a finite number."""
    from kitlib.course.exercises import Question, _plain
    q = Question("n", "How many?", 1, "one", kind="predict")
    v = q.judge(given_)
    plain = _plain(given_)
    try:
        number = None if isinstance(plain, bool) else float(plain)
    except (TypeError, ValueError):
        number = None
    finite = number is not None and math.isfinite(number)
    assert v.correct is (finite and number == 1), (given_, v.message)
    assert (q.prediction is not ...) is finite, (given_, q.prediction)


# -- gzip within a limit (issue 41): a "gzip bomb" (5.2 MB of gzip inflating to 5 GiB) was
# refused as "corrupt gzip: " with an empty reason (a MemoryError). Property: a stream of
# one or more members, of random bytes and runs of zeros, inflates to what gzip.decompress
# gives when it fits the limit; above the limit it is refused as too large, with the limit
# and the bytes inflated; cut short, or with a byte flipped, it is a KitFileError.

@st.composite
def gzip_case(draw):
    members = draw(st.lists(st.tuples(st.binary(max_size=200), st.integers(0, 300_000)), min_size=1, max_size=3))
    bodies = [head + bytes(zeros) for head, zeros in members]
    data = b"".join(gzip.compress(b, compresslevel=draw(st.integers(1, 9))) for b in bodies)
    return data, b"".join(bodies), draw(st.integers(1, 400_000)), draw(st.integers(0, 3))


def _gunzip_outcome(data, body, limit, damage) -> str:
    if damage == 1:
        data = data[:max(2, len(data) // 2)]               # cut short
    elif damage == 2 and len(data) > 20:
        data = data[:12] + bytes([data[12] ^ 0xFF]) + data[13:]     # a flipped byte in the deflate data
    try:
        got = gunzip_if_gz(data, "case.json.gz", limit_bytes=limit)
    except KitFileError as e:
        msg = str(e)
        assert msg.startswith("case.json.gz: ") and msg != "case.json.gz: corrupt gzip: "
        if "too large to inflate" not in msg:
            assert damage in (1, 2) or not body, msg        # only damage, or nothing inside, is refused else
            return "damaged"
        assert f"more than {limit:,} bytes, the limit" in msg
        stopped = int(re.search(r"stopped at ([\d,]+) bytes", msg).group(1).replace(",", ""))
        assert stopped > limit
        if damage != 2:                                     # what was inflated is the data's own start
            assert len(body) >= stopped
        return "too large"
    assert got == gzip.decompress(data) and len(got) <= limit
    if damage in (0, 3):
        assert got == body
    return "inflated"


def test_gzip_inflates_within_its_limit_or_says_how_far_it_got():
    seen = []

    @settings(FUZZ, max_examples=40)
    @given(case=gzip_case())
    def run(case):
        seen.append(_gunzip_outcome(*case))
    run()
    print({k: seen.count(k) for k in set(seen)})
    assert set(seen) == {"too large", "damaged", "inflated"}      # the property met each outcome
