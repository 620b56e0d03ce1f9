"""The tools' own material as they wrote it, fetched and trimmed for lessons 03, 05 and 06: raw
trace events (:func:`trace_events`, :func:`as_json_lines`), the profiler's printed table
(:func:`printed_table`) and ten GPU events of a public NCCL trace (:func:`nccl_excerpt`)."""
from __future__ import annotations

import json
import re

#: The columns of the printed table a lesson shows by default (the profiler's own headers).
TIME_COLUMNS = ("Name", "Self CPU", "CPU total", "Self CUDA", "CUDA total", "# of Calls")


def trace_events(capture, cats=None) -> list:
    """The ``traceEvents`` of ``capture``'s trace file as the profiler wrote them (only categories
    ``cats``; default all), in file order; ``ts`` and ``dur`` in µs.

    Raises KitFileError: the trace file is damaged."""
    from ..readers.files import read_trace_events
    name = "trace.json.gz" if capture.has("trace.json.gz") else "trace.json"
    return read_trace_events(capture.file(name), cats=cats)


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


def _fields(dashes: str) -> list:
    """``(start, end)`` of each run of ``-`` in a printed table's ruler line."""
    return [m.span() for m in re.finditer("-+", dashes)]


def _torch_cut(name: str, width: int | None) -> str:
    """A Name cell as the profiler's table cuts it at ``max_name_column_width=width``."""
    return name if width is None or len(name) < width - 3 else name[:width - 3] + "..."


def printed_table(capture, which: int = 0, rows: int = 10, columns=TIME_COLUMNS, names=None,
                  name_width: int | None = None, shapes_width: int | None = None) -> str:
    """The ``which``-th table the profiler printed for ``capture`` (``key_averages_tables.txt``:
    0 by name, 1 by input shape), cut by :func:`cut_table` to ``columns``, the first ``rows`` rows
    (of ``names``), Name and Input Shapes at ``name_width`` and ``shapes_width``. A live capture's
    table is laid out from ``key_averages.json`` (sorted by Self CUDA, times in ms), and says so.

    Raises KitError: the capture holds neither file, fewer tables, or not the column."""
    from ..errors import KitError
    if not capture.has("key_averages_tables.txt"):
        return _table_from_rows(capture, which, rows, columns, names, name_width, shapes_width)
    text = capture.file("key_averages_tables.txt").read_text()
    tables = [t for t in text.split("\n\n") if t.strip()]
    if which >= len(tables):
        raise KitError(f"capture {capture.name}: key_averages_tables.txt holds {len(tables)} tables, not {which + 1}")
    return cut_table(tables[which], columns, rows, names, name_width, shapes_width,
                     where=f"capture {capture.name}: table {which}")


def cut_table(text: str, columns, rows: int | None = None, names=None, name_width: int | None = None,
              shapes_width: int | None = None, where: str = "the printed table") -> str:
    """One printed table (``key_averages().table()``'s text) cut to ``columns`` and the first ``rows``
    rows (those in ``names``), Name and Input Shapes as torch's ``max_name_column_width`` and
    ``max_shapes_column_width`` print them (issue 40); other cells kept character for character.

    Raises KitError: ``text`` is not such a table, or lacks a column (``where`` names it)."""
    from ..errors import KitError
    lines = text.strip("\n").split("\n")
    ruler = lines[0]
    spans = _fields(ruler)
    # the header line is not aligned with the ruler (a header longer than its column,
    # "CUDA time avg", pushes the rest right): its names are split on runs of spaces
    headers = re.split(r"\s{2,}", lines[1].strip()) if len(lines) > 1 else []
    if not ruler.startswith("-") or len(headers) != len(spans):
        raise KitError(f"{where}: the header does not match the ruler (not a table the profiler printed?)")
    missing = [c for c in columns if c not in headers]
    if missing:
        raise KitError(f"{where} has no column {missing} (it has {headers})")
    keep = sorted(spans[headers.index(c)] for c in columns)

    narrow = {spans[headers.index(c)]: (w, c) for c, w in (("Name", name_width), ("Input Shapes", shapes_width))
              if w is not None and c in columns and w < spans[headers.index(c)][1] - spans[headers.index(c)][0]}

    def cell(line, a, b):
        if (a, b) not in narrow:
            return line[a:b]
        w, c = narrow[a, b]
        if line[a:b].startswith("---"):
            return "-" * w
        text = line[a:b].strip()
        return (_torch_cut(text, w) if c == "Name" else text[:w]).rjust(w)

    def cut(line):
        return "  ".join(cell(line, a, b) for a, b in keep).rstrip()

    head = "  ".join(headers[spans.index((a, b))].rjust(narrow.get((a, b), (b - a,))[0]) for a, b in keep).rstrip()

    rulers = [i for i, ln in enumerate(lines) if ln.startswith("---")]
    if len(rulers) < 3:
        raise KitError(f"{where}: fewer than three ruler lines (not a table the profiler printed?)")
    body = lines[rulers[1] + 1:rulers[2]]
    if names is not None:
        name_span = spans[headers.index("Name")]
        body = [ln for ln in body if ln[name_span[0]:name_span[1]].strip() in set(names)]
    footer = lines[rulers[2] + 1:]
    return "\n".join([cut(ruler), head, cut(ruler)] + [cut(ln) for ln in body[:rows]] + [cut(ruler)] + footer)


#: The JSON fields of ``key_averages.json`` rows behind the printed headers.
_ROW_FIELDS = {"Name": "key", "Self CPU": "self_cpu_time_total_us", "CPU total": "cpu_time_total_us",
               "Self CUDA": "self_device_time_total_us", "CUDA total": "device_time_total_us",
               "# of Calls": "count", "Input Shapes": "input_shapes"}


def _table_from_rows(capture, which, rows, columns, names, name_width=None, shapes_width=None) -> str:
    """:func:`printed_table` for a capture that keeps ``key_averages.json`` (a live one)."""
    import pandas as pd

    from ..errors import KitError
    if not (capture.has("key_averages.json") or capture.has("key_averages.json.gz")):
        raise KitError(f"capture {capture.name}: neither key_averages_tables.txt nor key_averages.json")
    group = ["by_name", "by_input_shape"][which] if which < 2 else None
    if group is None or any(c not in _ROW_FIELDS for c in columns):
        raise KitError(f"capture {capture.name}: key_averages.json gives tables 0 and 1 with columns "
                       f"{list(_ROW_FIELDS)}")
    df = pd.DataFrame(capture.key_averages()[group])
    df = df.sort_values("self_device_time_total_us", ascending=False, kind="stable")
    if names is not None:
        df = df[df["key"].isin(set(names))]
    out = pd.DataFrame({c: df[_ROW_FIELDS[c]] for c in columns}).head(rows)
    if "Name" in out:
        out["Name"] = out["Name"].map(lambda s: _torch_cut(str(s), name_width))
    if "Input Shapes" in out and shapes_width is not None:
        out["Input Shapes"] = out["Input Shapes"].map(lambda s: str(s)[:shapes_width])
    for c in columns:
        if _ROW_FIELDS[c].endswith("_us"):
            out[c] = (out[c] / 1e3).map(lambda v: f"{v:.3f}ms")
    return (out.to_string(index=False) + "\n(laid out from key_averages.json: this capture keeps the profiler's "
            "rows, not its printed text)")


#: The public trace lesson 03's transfer question reads (``data/reference/public-traces``).
NCCL_TRACE = "hta_2024-03_nccl_sampled_rank0.json.gz"


def nccl_excerpt() -> list:
    """Ten GPU events of the public NCCL trace (lesson 03): the first ``ncclKernel`` that another
    stream's kernel outlasts, the last seven GPU events starting inside it and the next two after
    it, sorted by ``ts`` (µs); names cut to 48 characters.

    Raises KitFileError: the public trace is missing or damaged."""
    from ..readers.bundle import reference_dir
    from ..readers.files import read_json_file
    events = read_json_file(reference_dir() / "public-traces" / NCCL_TRACE)["traceEvents"]
    gpu = sorted((e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
                 key=lambda e: (e["ts"], e["dur"]))
    for i, n in enumerate(gpu):
        if not n["name"].startswith("ncclKernel"):
            continue
        end = n["ts"] + n["dur"]
        inside = [e for e in gpu[i + 1:] if e["ts"] < end]
        if inside and max(e["ts"] + e["dur"] for e in inside) > end:
            after = [e for e in gpu[i + 1:] if e["ts"] >= end][:2]
            picked = [n] + inside[-7:] + after
            return [{"ph": e["ph"], "cat": e["cat"], "name": e["name"] if len(e["name"]) <= 48 else e["name"][:47] + "…", "tid": e["tid"], "ts": e["ts"],
                     "dur": e["dur"], "args": {"stream": e["args"].get("stream"),
                                               "correlation": e["args"].get("correlation")}}
                    for e in sorted(picked, key=lambda e: e["ts"])]
    raise ValueError(f"{NCCL_TRACE}: no NCCL kernel outlasted by another stream's kernel")
