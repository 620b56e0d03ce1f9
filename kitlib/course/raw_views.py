"""The tools' own material as they wrote it, fetched and trimmed for the lessons: raw trace
events (:func:`trace_events`, printed by :func:`as_json`, :func:`as_json_lines`,
:func:`json_wrapped`), excerpts of them picked for a question (an operator's events, a rank's
collectives, an operator's ``[memory]`` events) and the profiler's printed tables
(:func:`printed_table`, :func:`cut_table`). Picked and trimmed, never joined: the learner joins.

Fields read by hand: ``ph`` (``X`` complete, ``i`` instant, ``s``/``f`` flow, ``M`` metadata),
``cat``, ``ts``/``dur`` (µs), ``args["External id"]`` (the innermost operator),
``args["correlation"]`` (CUPTI's id shared by an API call and its GPU work); a ``[memory]``
event's ``args``: ``Bytes`` (negative for a free), ``Total Allocated``, ``Total Reserved``,
``Device Type`` (1 CUDA, 0 CPU)."""
from __future__ import annotations

import json
import re

from ..errors import KitError
from ..readers.files import read_trace_events

#: Categories of the events that ran on a GPU (their ``tid`` is the stream).
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
#: The args a lesson prints: the two ids that link the three kinds of event.
LINK_ARGS = ("External id", "correlation")
#: The fields of each event a rank excerpt keeps (the rest are ids and bookkeeping).
KEEP = ("ph", "cat", "name", "pid", "tid", "ts", "dur")
#: The columns of the printed table a lesson shows by default (the profiler's own headers).
TIME_COLUMNS = ("Name", "Self CPU", "CPU total", "Self CUDA", "CUDA total", "# of Calls")
#: The public trace lesson 03's transfer question reads (``data/reference/public-traces``).
NCCL_TRACE = "hta_2024-03_nccl_sampled_rank0.json.gz"


def trace_events(source, cats=None) -> list:
    """The ``traceEvents`` of a trace file, or of a capture's trace, as written and in file order
    (only categories ``cats``; default all); ``ts`` and ``dur`` in µs.

    Raises KitFileError: the file is missing, damaged or not a Chrome trace (naming it)."""
    if hasattr(source, "has"):
        source = source.file("trace.json.gz" if source.has("trace.json.gz") else "trace.json")
    return read_trace_events(source, cats=cats)


# ---- printing events ---------------------------------------------------------------------

def json_wrapped(obj, width: int | None = None, compact: bool = False, indent: str = "  ") -> str:
    """``obj`` as ``json.dumps`` writes it, broken after a field's comma where a line would pass
    ``width`` (default :data:`kitlib.units.PRINT_CHARS`; issue 40), nested containers likewise;
    continuation lines start with ``indent``; a field longer than the room stays whole.
    ``compact``: the separators ``,`` and ``:`` of a trace file."""
    from ..units import PRINT_CHARS
    width = PRINT_CHARS if width is None else width
    comma, colon = (",", ":") if compact else (", ", ": ")

    def dumps(v):
        return json.dumps(v, ensure_ascii=False, separators=(comma, colon))

    whole = dumps(obj)
    if len(whole) <= width or not isinstance(obj, dict) or not obj:
        return whole
    room = width - len(indent) - 1

    def split(prefix, v) -> list:          # a field (or item) whole, or its container's items
        field = prefix + dumps(v)
        if len(field) <= room or not isinstance(v, (dict, list)) or len(v) < 2 - isinstance(v, dict):
            return [field]
        if isinstance(v, dict):
            inner, (opened, closed) = [p for a, b in v.items() for p in split(dumps(a) + colon, b)], "{}"
        else:
            inner, (opened, closed) = [p for b in v for p in split("", b)], "[]"
        inner[0] = prefix + opened + inner[0]
        inner[-1] += closed
        return inner
    pieces = [p for k, v in obj.items() for p in split(dumps(k) + colon, v)]
    pieces[0] = "{" + pieces[0]
    pieces[-1] += "}"
    lines, line = [], pieces[0]
    for piece in pieces[1:]:
        if len(line) + len(comma) + len(piece) < width:       # and room for the comma that ends it
            line += comma + piece
        else:
            lines.append(line + comma.rstrip())
            line = indent + piece
    return "\n".join(lines + [line])


def as_json_lines(events, keys=None, args=None, name_chars=None) -> str:
    """``events`` as compact JSON, one per line (:func:`json_wrapped`): only ``keys`` and ``args``
    entries when given, a ``name`` over ``name_chars`` cut to end with ``…``."""
    out = []
    for e in events:
        e = {k: e[k] for k in (keys or e) if k in e}
        if args is not None and isinstance(e.get("args"), dict):
            e["args"] = {k: e["args"][k] for k in args if k in e["args"]}
        if name_chars and isinstance(e.get("name"), str) and len(e["name"]) > name_chars:
            e["name"] = e["name"][:name_chars - 1] + "…"
        out.append(json_wrapped(e, compact=True))
    return "\n".join(out)


def trimmed(event: dict, args=LINK_ARGS, name_width: int | None = None) -> dict:
    """``event`` with only ``ph cat name id pid tid ts dur`` and the ``args`` named; a name over
    ``name_width`` cut with ``…``."""
    out = {k: event[k] for k in ("ph", "cat", "name", "id", "pid", "tid", "ts", "dur") if k in event}
    if name_width and len(str(out.get("name", ""))) > name_width:
        out["name"] = str(out["name"])[: name_width - 1] + "…"
    kept = {k: v for k, v in event.get("args", {}).items() if k in args}
    if kept:
        out["args"] = kept
    return out


def as_json(events, args=LINK_ARGS, name_width: int = 60) -> str:
    """``events`` as a JSON list, one :func:`trimmed` event a line (wrapped between fields)."""
    from ..units import PRINT_CHARS
    lines = [json_wrapped(trimmed(e, args, name_width), PRINT_CHARS - 2).replace("\n", "\n  ")
             for e in events]
    return "[\n  " + ",\n  ".join(lines) + "\n]"


def events_frame(events):
    """One row per event: ``ph cat name pid tid ts dur``, ``external_id``, ``correlation`` (Int64)."""
    import pandas as pd
    df = pd.DataFrame([[e.get(k) for k in KEEP] + [e.get("args", {}).get(k) for k in LINK_ARGS] for e in events],
                      columns=[*KEEP, "external_id", "correlation"])
    for c in ("external_id", "correlation"):
        df[c] = df[c].astype("Int64")
    return df


# ---- an operator's events (lesson 02) ----------------------------------------------------

def first_op(events, name: str, after_ts: float | None = None) -> dict:
    """The earliest ``cpu_op`` called ``name`` (at or after ``after_ts``).

    Raises LookupError: no such operator."""
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("name") == name
           and (after_ts is None or e["ts"] >= after_ts)]
    if not ops:
        raise LookupError(f"no cpu_op {name!r} in these events")
    return min(ops, key=lambda e: e["ts"])


def op_excerpt(events, op: dict, flows: bool = False) -> list:
    """``op`` and every event with its ``External id``, by time; with ``flows``, their ``ac2g`` flows."""
    x = op["args"]["External id"]
    out = [e for e in events if e.get("ph") == "X" and e.get("args", {}).get("External id") == x and e is not op]
    if flows:
        corr = {e["args"].get("correlation") for e in out}
        out += [e for e in events if e.get("cat") == "ac2g" and e.get("id") in corr]
    return sorted([op] + out, key=lambda e: (e["ts"], e.get("ph") != "X"))


def steps_in(events) -> list:
    """The ``ProfilerStep#N`` annotations, in time order."""
    return sorted((e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")),
                  key=lambda e: e["ts"])


def time_trap_excerpt(events) -> tuple:
    """``(excerpt, correlation)`` for "which operator launched this kernel?": in the first step, the
    earliest two differently named main-thread operators of one launch each, the first one's
    kernel running while the host is inside the second; the correlation of that kernel.

    Raises LookupError: no such pair."""
    step = steps_in(events)[0]
    s0, s1 = step["ts"], step["ts"] + step["dur"]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("tid") == step["tid"] and s0 <= e["ts"] < s1]
    launches: dict = {}
    for e in events:
        if e.get("cat") == "cuda_runtime" and "Launch" in e.get("name", ""):
            launches.setdefault(e["args"].get("External id"), []).append(e)
    gpu = {e["args"]["correlation"]: e for e in events if e.get("cat") in GPU_CATS and "correlation" in e.get("args", {})}
    single = [o for o in sorted(ops, key=lambda e: e["ts"]) if len(launches.get(o["args"]["External id"], ())) == 1
              and launches[o["args"]["External id"]][0]["args"]["correlation"] in gpu]
    for a in single:
        la = launches[a["args"]["External id"]][0]
        ka = gpu[la["args"]["correlation"]]
        for b in single:
            if b["name"] != a["name"] and b["ts"] <= ka["ts"] <= b["ts"] + b["dur"]:
                lb = launches[b["args"]["External id"]][0]
                kb = gpu[lb["args"]["correlation"]]
                picked = sorted([a, la, ka, b, lb, kb], key=lambda e: e["ts"])
                return picked, la["args"]["correlation"]
    raise LookupError("no operator in the first step whose kernel ran inside another operator's host interval")


#: What Perfetto shows on a PyTorch trace's tracks, less the Python frames of ``with_stack``
#: (``gpu_user_annotation``: a label's span of GPU work, which Kineto draws on the stream's track).
WINDOW_CATS = ("cpu_op", "user_annotation", "cuda_runtime", "cuda_driver", "gpu_user_annotation") + GPU_CATS


def window(events, start_us: float, end_us: float, cats=WINDOW_CATS, pids=None) -> list:
    """The events a timeline shows between ``start_us`` and ``end_us``: ``X`` events of ``cats``
    overlapping it (of ``pids``), ``ac2g`` flows inside it, and the metadata events."""
    out = []
    for e in events:
        ph = e.get("ph")
        if ph == "M":
            out.append(e)
        elif ph == "X" and e.get("cat") in cats and (pids is None or e.get("pid") in pids):
            if e["ts"] < end_us and e["ts"] + e.get("dur", 0) > start_us:
                out.append(e)
        elif ph in ("s", "f") and e.get("cat") == "ac2g" and start_us <= e["ts"] <= end_us:
            out.append(e)
    return out


# ---- the profiler's printed tables (lessons 01, 03, 05, 07, 08) --------------------------

def printed_table(capture, which: int = 0, rows: int | None = 10, columns=TIME_COLUMNS, names=None,
                  name_width: int | str | None = "fit", shapes_width: int | None = None, sort_by=None) -> str:
    """The ``which``-th table the profiler printed for ``capture`` (``key_averages_tables.txt``:
    0 by name, 1 by input shape), or with ``sort_by`` the first ordered by that column (footer
    left out), cut by :func:`cut_table`. Without that file, ``key_averages.json``'s rows laid out
    the profiler's way (ordered by Self CUDA or ``sort_by``), and a line saying so.

    Raises KitError: neither file, no such table, or not the column."""
    if not capture.has("key_averages_tables.txt"):
        text = _table_from_rows(capture, which, columns, sort_by)
        return cut_table(text, columns, rows, names, name_width, shapes_width, footer=False,
                         where=f"capture {capture.name}") + ("\n(laid out from key_averages.json: this capture "
                                                             "keeps the profiler's rows, not its printed text)")
    path = capture.file("key_averages_tables.txt")
    tables = [t for t in path.read_text().split("\n\n") if t.strip()]
    if sort_by is not None:
        from ..readers.profiler_table import read_profiler_table
        col = sort_by.lower().replace(" ", "_") + ("_bytes" if "Mem" in sort_by else "_ns")
        for which in range(len(tables)):
            parsed = read_profiler_table(path, which=which)[0]
            if col in parsed and parsed[col].is_monotonic_decreasing:
                break
        else:
            raise KitError(f"{path}: no printed table is ordered by {sort_by!r}")
    if which >= len(tables):
        raise KitError(f"capture {capture.name}: key_averages_tables.txt holds {len(tables)} tables, not {which + 1}")
    return cut_table(tables[which], columns, rows, names, name_width, shapes_width, footer=sort_by is None,
                     where=f"capture {capture.name}: table {which}")


def cut_table(text: str, columns, rows: int | None = None, names=None, name_width: int | str | None = None,
              shapes_width: int | None = None, footer: bool = True, where: str = "the printed table") -> str:
    """One printed table (``key_averages().table()``'s text) cut to Name and ``columns``, the first
    ``rows`` rows (those in ``names``), Name and Input Shapes as torch's ``max_name_column_width``
    and ``max_shapes_column_width`` print them (issue 40; ``name_width="fit"``: as wide as the
    longest name kept), the footer with ``footer``; other cells kept character for character.

    Raises KitError: ``text`` is not such a table, or lacks a column (``where`` names it)."""
    lines = text.strip("\n").split("\n")
    spans = [m.span() for m in re.finditer("-+", lines[0])]
    # the header line is not aligned with the ruler (a header longer than its column,
    # "CUDA time avg", pushes the rest right): its names are split on runs of spaces
    headers = re.split(r"\s{2,}", lines[1].strip()) if len(lines) > 1 else []
    rulers = [i for i, ln in enumerate(lines) if ln.startswith("---")]
    if not lines[0].startswith("-") or len(headers) != len(spans) or len(rulers) < 3:
        raise KitError(f"{where}: the header does not match the ruler (not a table the profiler printed?)")
    columns = ["Name", *(c for c in columns if c != "Name")]
    missing = [c for c in columns if c not in headers]
    if missing:
        raise KitError(f"{where} has no column {missing} (it has {headers})")
    keep = sorted((*spans[headers.index(c)], c) for c in columns)        # (start, end, header), as printed
    a, b = spans[headers.index("Name")]
    body = [ln for ln in lines[rulers[1] + 1:rulers[2]] if names is None or ln[a:b].strip() in set(names)][:rows]
    width = {"Name": name_width, "Input Shapes": shapes_width}
    if name_width == "fit":            # names are right-aligned: keep as many characters as the longest
        longest = max([4] + [len(ln[a:b].strip()) for ln in body])
        keep = [(max(s, e - longest), e, c) if c == "Name" else (s, e, c) for s, e, c in keep]
        width["Name"] = None

    def cell(line, a, b, c):
        w = width.get(c)
        if w is None or w >= b - a:
            return line[a:b]
        if line[a:b].startswith("---"):
            return "-" * w
        text = line[a:b].strip()
        return (_torch_cut(text, w) if c == "Name" else text[:w]).rjust(w)

    def cut(line):
        return "  ".join(cell(line, *k) for k in keep).rstrip()
    head = "  ".join(c.rjust(min(b - a, width.get(c) or b - a)) for a, b, c in keep).rstrip()
    ruler = cut(lines[0])
    return "\n".join([ruler, head, ruler] + [cut(ln) for ln in body] + [ruler]
                     + (lines[rulers[2] + 1:] if footer else []))


def _torch_cut(name: str, width: int | None) -> str:
    """A Name cell as the profiler's table cuts it at ``max_name_column_width=width``."""
    return name if width is None or len(name) < width - 3 else name[:width - 3] + "..."


#: The fields of ``key_averages.json`` rows behind the printed headers.
_ROW_FIELDS = {"Name": "key", "Self CPU": "self_cpu_time_total_us", "CPU total": "cpu_time_total_us",
               "Self CUDA": "self_device_time_total_us", "CUDA total": "device_time_total_us",
               "CPU Mem": "cpu_memory_usage_bytes", "Self CPU Mem": "self_cpu_memory_usage_bytes",
               "CUDA Mem": "device_memory_usage_bytes", "Self CUDA Mem": "self_device_memory_usage_bytes",
               "# of Calls": "count", "Input Shapes": "input_shapes"}


def _table_from_rows(capture, which, columns, sort_by) -> str:
    """``capture``'s ``key_averages.json`` rows (0 by name, 1 by input shape) as torch's ``table()``
    prints them (Name 55 wide, Input Shapes 80, the rest 12), ordered by ``sort_by`` (Self CUDA)."""
    from ..analyses.memory import format_memory
    if not (capture.has("key_averages.json") or capture.has("key_averages.json.gz")):
        raise KitError(f"capture {capture.name}: neither key_averages_tables.txt nor key_averages.json")
    cols = ["Name", *(c for c in columns if c != "Name")]
    if which not in (0, 1) or any(c not in _ROW_FIELDS for c in cols + [sort_by or "Name"]):
        raise KitError(f"capture {capture.name}: key_averages.json gives tables 0 and 1 with columns "
                       f"{list(_ROW_FIELDS)}")
    recs = sorted(capture.key_averages()[("by_name", "by_input_shape")[which]],
                  key=lambda r: -(r.get(_ROW_FIELDS[sort_by or "Self CUDA"]) or 0))

    def cell(c, v):
        if c in ("Name", "Input Shapes"):
            return _torch_cut(str(v), 55) if c == "Name" else str(v)[:80]
        v = v or 0
        if _ROW_FIELDS[c].endswith("_bytes"):
            return format_memory(int(v))
        if _ROW_FIELDS[c].endswith("_us"):           # torch's _format_time
            return f"{v / 1e6:.3f}s" if v >= 1e6 else f"{v / 1e3:.3f}ms" if v >= 1e3 else f"{v:.3f}us"
        return str(int(v))
    wide = [55 if c == "Name" else 80 if c == "Input Shapes" else 12 for c in cols]
    ruler = "  ".join("-" * w for w in wide)
    return "\n".join([ruler, "  ".join(c.rjust(w) for c, w in zip(cols, wide)), ruler]
                     + ["  ".join(cell(c, r.get(_ROW_FIELDS[c])).rjust(w) for c, w in zip(cols, wide)) for r in recs]
                     + [ruler])


# ---- collectives: a public NCCL trace (lesson 03), each rank's calls (lesson 12) ----------

def nccl_excerpt() -> list:
    """Ten GPU events of the public NCCL trace (lesson 03): the first ``ncclKernel`` that another
    stream's kernel outlasts, the last seven GPU events starting inside it and the next two after
    it, sorted by ``ts`` (µs); names cut to 48 characters.

    Raises KitFileError: the public trace is missing or damaged; ValueError: no such kernel."""
    from ..readers.bundle import reference_dir
    events = trace_events(reference_dir() / "public-traces" / NCCL_TRACE, cats=GPU_CATS)
    gpu = sorted((e for e in events if e.get("ph") == "X"), key=lambda e: (e["ts"], e["dur"]))
    for i, n in enumerate(gpu):
        if not n["name"].startswith("ncclKernel"):
            continue
        end = n["ts"] + n["dur"]
        inside = [e for e in gpu[i + 1:] if e["ts"] < end]
        if inside and max(e["ts"] + e["dur"] for e in inside) > end:
            after = [e for e in gpu[i + 1:] if e["ts"] >= end][:2]
            return [{"ph": e["ph"], "cat": e["cat"], "name": e["name"] if len(e["name"]) <= 48 else e["name"][:47] + "…",
                     "tid": e["tid"], "ts": e["ts"], "dur": e["dur"],
                     "args": {"stream": e["args"].get("stream"), "correlation": e["args"].get("correlation")}}
                    for e in sorted([n] + inside[-7:] + after, key=lambda e: e["ts"])]
    raise ValueError(f"{NCCL_TRACE}: no NCCL kernel outlasted by another stream's kernel")


def _rank_events(runs):
    """``(path, rank, traceEvents, baseTimeNanoseconds)`` per trace of ``runs`` (RankTraces)."""
    for path, rank in zip(runs.info["path"], runs.info["rank"]):
        yield path, int(rank), trace_events(path), int(runs.traces[int(rank)].meta.get("base_time_ns") or 0)


def collective_excerpt(runs, step: int | None = None, calls: int = 3) -> dict:
    """Each rank's ``ProfilerStep#N`` (``step``, default the first all share) and its first ``calls``
    ``gloo:*`` events: ``{ranks: {pid: rank}, base_ns: {rank: baseTimeNanoseconds}, step, events}``,
    events trimmed to :data:`KEEP` (``ts``, ``dur`` in µs on each rank's clock), rank by rank in
    start order; to match the k-th call across ranks by hand (lesson 12).

    Raises KitError: no common step, or no ``gloo:*`` events (NCCL); KitFileError: a bad trace."""
    docs, bases = {}, {}
    for _, rank, ev, base in _rank_events(runs):
        docs[rank], bases[rank] = ev, base
    steps = [{int(e["name"].split("#")[1]): e for e in ev if e.get("ph") == "X"
              and str(e.get("name", "")).startswith("ProfilerStep#")} for ev in docs.values()]
    common = sorted(set.intersection(*(set(s) for s in steps)))
    if not common:
        raise KitError("the ranks' traces share no ProfilerStep#N")
    n = common[0] if step is None else int(step)
    if n not in common:
        raise KitError(f"not every rank recorded ProfilerStep#{n} (common: {common})")
    out, pids = [], {}
    for rank in sorted(docs):
        ev = docs[rank]
        s = next(e for e in ev if e.get("ph") == "X" and e.get("name") == f"ProfilerStep#{n}")
        inside = sorted((e for e in ev if e.get("ph") == "X" and str(e.get("name", "")).startswith("gloo:")
                         and s["ts"] <= e["ts"] < s["ts"] + s["dur"]), key=lambda e: e["ts"])
        if not inside:
            raise KitError(f"rank {rank}: no gloo:* events in ProfilerStep#{n}")
        pids[s["pid"]] = rank
        out += [{k: e[k] for k in KEEP if k in e} for e in [s, *inside[:calls]]]
    return {"ranks": pids, "base_ns": bases, "step": n, "events": out}


def nccl_call_excerpt(runs, calls: int = 3) -> dict:
    """Each rank's first ``calls`` NCCL collectives: the ``nccl:*`` operator (``Input Dims``), its
    ``cudaLaunchKernel`` and that kernel (same ``correlation``): ``{ranks, base_ns, events}``.

    Raises KitError: no NCCL kernel launched in an ``nccl:*`` operator; KitFileError: a bad trace."""
    out, pids, bases = [], {}, {}
    for path, rank, events, base in _rank_events(runs):
        bases[rank] = base
        ev = [e for e in events if e.get("ph") == "X"]
        kernels = {e["args"]["correlation"]: e for e in ev if e.get("cat") == "kernel"
                   and str(e.get("name", "")).startswith(("ncclKernel_", "ncclDevKernel_"))}
        launches = [e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")
                    and (e.get("args") or {}).get("correlation") in kernels]
        ops = [e for e in ev if str(e.get("name", "")).startswith("nccl:")]
        found = []
        for la in launches:
            op = next((o for o in ops if o["tid"] == la["tid"] and o["ts"] <= la["ts"] <= o["ts"] + o["dur"]), None)
            if op is not None:
                found.append((kernels[la["args"]["correlation"]], la, op))
        if not found:
            raise KitError(f"{path}: no NCCL kernel launched inside an nccl:* operator")
        for k, la, op in sorted(found, key=lambda f: f[0]["ts"])[:calls]:
            pids[op["pid"]] = rank
            out += [{**{f: e[f] for f in KEEP if f in e}, "args": {a: e["args"].get(a)}}
                    for e, a in ((op, "Input Dims"), (la, "correlation"), (k, "correlation"))]
    return {"ranks": pids, "base_ns": bases, "events": out}


# ---- the allocator's [memory] events and the Self CUDA Mem rule (lesson 07) ---------------
# The rule (torch/autograd/profiler.py, _parse_kineto_results): an operator's *total* is the
# Bytes of every memory event in its interval, ends included, on any thread; its *self* is that
# minus its children's totals; key_averages() sums both over calls.

def memory_events(events, device_type: int | None = 1):
    """The ``[memory]`` instant events as a DataFrame: ``ts`` (µs), ``tid``, then every key of
    ``args`` (``Bytes`` in bytes); only ``Device Type`` ``device_type`` (1 CUDA, 0 CPU; None both)."""
    import pandas as pd
    rows = [{"ts": e["ts"], "tid": e.get("tid"), **e.get("args", {})} for e in events
            if e.get("name") == "[memory]" and e.get("ph") == "i"]
    df = pd.DataFrame(rows)
    if device_type is not None and len(df):
        df = df[df["Device Type"] == device_type].reset_index(drop=True)
    return df


def _end(e) -> float:
    return e["ts"] + e.get("dur", 0)


def call_excerpt(events, name: str, nth: int = 1, device_type: int = 1) -> list:
    """Call ``nth`` (0 the first) of operator ``name``, then by time the operators nested in it
    that hold memory events and its memory events of ``device_type`` (any thread), trimmed.

    Raises KitError: fewer than ``nth + 1`` calls of ``name``."""
    calls = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e.get("name") == name]
    if len(calls) <= nth:
        raise KitError(f"the trace has {len(calls)} calls of {name!r}, not a call number {nth}")
    op = calls[nth]
    a, b = op["ts"], _end(op)
    mem = [e for e in events if e.get("name") == "[memory]" and e.get("ph") == "i" and a <= e["ts"] <= b
           and e.get("args", {}).get("Device Type") == device_type]
    kids = [e for e in events if e is not op and e.get("ph") == "X" and e.get("cat") == "cpu_op"
            and e.get("tid") == op.get("tid") and a <= e["ts"] and _end(e) <= b]
    kids = [k for k in kids if any(k["ts"] <= m["ts"] <= _end(k) for m in mem)]

    def keep(e):
        out = {k: e[k] for k in ("ph", "cat", "name", "tid", "ts", "dur") if k in e}
        if e.get("name") == "[memory]":
            out["args"] = {k: e["args"][k] for k in ("Bytes", "Total Allocated", "Device Type")}
        return out
    return [keep(op)] + [keep(e) for e in sorted(kids + mem, key=lambda e: (e["ts"], e.get("ph") == "i"))]


def self_and_total(excerpt) -> tuple[int, int]:
    """``(self, total)`` bytes of the excerpt's first event, by the profiler's rule."""
    op, rest = excerpt[0], excerpt[1:]
    mem = [e for e in rest if e.get("ph") == "i"]
    ops = [e for e in rest if e.get("ph") == "X"]

    def total(o):
        return sum(m["args"]["Bytes"] for m in mem if o["ts"] <= m["ts"] <= _end(o))
    direct = [k for k in ops if not any(p is not k and p["ts"] <= k["ts"] and _end(k) <= _end(p) for p in ops)]
    t = total(op)
    return int(t - sum(total(k) for k in direct)), int(t)
