"""Helpers that damage copies of the kit's recordings, for the bad-input and fuzz tests.

Each helper works on a copy under a temporary folder, never on ``data/reference``.
"""
import shutil
import sqlite3
from pathlib import Path

from conftest import REF

NSYS_8STEP = REF / "nsys_8step" / "report.sqlite"
SNAPSHOT = REF / "profiler_5step" / "memory_snapshot.pickle"


def loosen(con, table: str) -> None:
    """Recreate ``table`` without its NOT NULL / key constraints (same columns,
    same declared types), so that a test can write NULLs and wrong types into it."""
    con.execute(f'CREATE TABLE "_loose" AS SELECT rowid AS "_rid", * FROM "{table}"')
    con.execute(f'DROP TABLE "{table}"')
    cols = [r[1] for r in con.execute('PRAGMA table_info("_loose")') if r[1] != "_rid"]
    decl = {r[1]: r[2] for r in con.execute('PRAGMA table_info("_loose")')}
    body = ", ".join(f'"{c}" {decl[c]}' for c in cols)
    con.execute(f'CREATE TABLE "{table}" ({body})')
    # keep the rowids, so a message's "first at rowid N" points at the same row
    names = ", ".join(f'"{c}"' for c in cols)
    con.execute(f'INSERT INTO "{table}" (rowid, {names}) SELECT "_rid", {names} FROM "_loose"')
    con.execute('DROP TABLE "_loose"')


def damaged_export(folder: Path, *statements, source: Path = NSYS_8STEP, name="damaged") -> Path:
    """A copy of an Nsight export with SQL ``statements`` applied. A table named
    in an ``UPDATE`` is loosened first (:func:`loosen`)."""
    p = Path(folder) / f"{name}.sqlite"
    shutil.copy(source, p)
    p.chmod(0o644)
    con = sqlite3.connect(p)
    loosened = set()
    for sql in statements:
        words = sql.split()
        if words[0].upper() == "UPDATE" and words[1] not in loosened:
            loosen(con, words[1].strip('"'))
            loosened.add(words[1])
        con.execute(sql)
    con.commit()
    con.close()
    return p


def row_counts(path: Path) -> dict:
    """``{table: rows}`` of every table of an SQLite file."""
    con = sqlite3.connect(path)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: con.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in names}
    finally:
        con.close()
