"""The profiler's own printed table (``key_averages().table()``), cut to the rows and columns a
lesson talks about (lessons 07 and 08), as printed (its "GB" being GiB); a live capture's
``key_averages.json`` rows are printed the way the profiler would."""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import KitError, KitFileError

__all__ = ["printed_tables", "printed_table"]

_RULE = re.compile(r"-+(  -+)+\s*")
#: The profiler's header text → the field of a ``key_averages.json`` row it prints.
_JSON_FIELDS = {"CUDA Mem": "device_memory_usage_bytes", "Self CUDA Mem": "self_device_memory_usage_bytes",
                "CPU Mem": "cpu_memory_usage_bytes", "Self CPU Mem": "self_cpu_memory_usage_bytes",
                "# of Calls": "count"}


def printed_tables(path) -> list[list[str]]:
    """Every table of a ``key_averages().table()`` text file, as its lines (rule, header, rule,
    rows, rule), footers left out.

    Raises KitFileError: the file is missing or holds no such table."""
    p = Path(path)
    if not p.is_file():
        raise KitFileError(p, "no such file (expected a key_averages().table() text file)")
    lines = p.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines) - 2:
        if _RULE.fullmatch(lines[i]) and "Name" in lines[i + 1] and _RULE.fullmatch(lines[i + 2]):
            j = i + 3
            while j < len(lines) and not _RULE.fullmatch(lines[j]):
                j += 1
            out.append(lines[i:j + 1])
            i = j + 1
        else:
            i += 1
    if not out:
        raise KitFileError(p, "holds no table printed by key_averages().table()")
    return out


def _cut(table: list[str], columns: list[str], rows: int | None, names=None) -> str:
    """``table`` with only Name and ``columns``, the first ``rows`` rows (or those in ``names``), the
    Name column as wide as its longest name kept."""
    rule = table[0]
    spans = [m.span() for m in re.finditer(r"-+", rule)]
    heads = re.split(r"\s{2,}", table[1].strip())   # a header can be wider than its rule: split on gaps
    missing = [c for c in columns if c not in heads]
    if missing:
        raise KitError(f"the printed table has no column {missing} (it has: {heads})")
    keep = [0] + [heads.index(c) for c in columns]
    body = table[3:-1]
    if names is not None:
        body = [ln for ln in body if ln[spans[0][0]:spans[0][1]].strip() in names]
    body = body[:rows] if rows is not None else body
    # names are right-aligned in their column: keep as many characters as the longest one
    longest = max([len(heads[0])] + [len(ln[spans[0][0]:spans[0][1]].strip()) for ln in body])
    spans[0] = (max(spans[0][0], spans[0][1] - longest), spans[0][1])

    def cut(line):
        return "  ".join(line[spans[k][0]:spans[k][1]] for k in keep).rstrip()
    header = "  ".join(f"{heads[k]:>{spans[k][1] - spans[k][0]}}" for k in keep)
    return "\n".join([cut(rule), header, cut(table[2])] + [cut(ln) for ln in body] + [cut(rule)])


def printed_table(capture, sort_by: str = "Self CUDA Mem", columns=("CUDA Mem", "Self CUDA Mem", "# of Calls"),
                  rows: int | None = 10, names=None) -> str:
    """The profiler's table of ``capture`` ordered by ``sort_by``, Name and ``columns`` only, the first
    ``rows`` (or the ``names``): from ``key_averages_tables.txt`` (the first table in that order)
    or from ``key_averages.json`` rows.

    Raises KitError: neither file, or no table is ordered by ``sort_by``."""
    columns = list(columns)
    if capture.has("key_averages_tables.txt"):
        from ..readers.profiler_table import read_profiler_table
        path = capture.file("key_averages_tables.txt")
        for k, table in enumerate(printed_tables(path)):
            parsed, _ = read_profiler_table(path, which=k)
            col = {"Self CUDA Mem": "self_cuda_mem_bytes", "CUDA Mem": "cuda_mem_bytes",
                   "Self CUDA": "self_cuda_ns", "CUDA total": "cuda_total_ns"}.get(sort_by)
            if col in parsed and parsed[col].is_monotonic_decreasing:
                return _cut(table, columns, rows, names)
        raise KitError(f"{path}: no printed table is ordered by {sort_by!r}")
    if capture.has("key_averages.json") or capture.has("key_averages.json.gz"):
        from ..analyses.memory import format_memory
        recs = capture.key_averages()["by_name"]
        if sort_by not in _JSON_FIELDS:
            raise KitError(f"key_averages.json rows can be sorted here by {list(_JSON_FIELDS)}, not {sort_by!r}")
        recs = sorted(recs, key=lambda r: -(r.get(_JSON_FIELDS[sort_by]) or 0))
        if names is not None:
            recs = [r for r in recs if r["key"] in names]
        recs = recs[:rows] if rows is not None else recs
        width = max([len("Name")] + [min(len(r["key"]), 55) for r in recs])

        def cell(r, c):
            v = r.get(_JSON_FIELDS[c], 0) or 0
            return str(int(v)) if c == "# of Calls" else format_memory(int(v))
        rule = "  ".join(["-" * width] + ["-" * 12] * len(columns))
        head = "  ".join([f"{'Name':>{width}}"] + [f"{c:>12}" for c in columns])
        body = ["  ".join([f"{(r['key'] if len(r['key']) <= 55 else r['key'][:52] + '...'):>{width}}"]
                          + [f"{cell(r, c):>12}" for c in columns]) for r in recs]
        return "\n".join([rule, head, rule] + body + [rule])
    raise KitError(f"{capture.path}: neither key_averages_tables.txt nor key_averages.json to print")
