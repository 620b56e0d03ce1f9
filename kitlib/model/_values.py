"""Read-only tables on a dataclass: how :class:`~kitlib.model.Trace` and
:class:`~kitlib.model.NsysReport` keep their tables out of reach.

A table field is stored privately and handed out as a copy on every read, and a table
given to the value (at construction, by ``dataclasses.replace`` or by assignment) is
copied in: no caller ever holds the object the value keeps. Under pandas'
copy-on-write (the default from pandas 3) a copy costs tens of µs whatever the table's
size — columns are shared until one side writes, and then only that side copies — so
every read may copy. Under pandas 2 without copy-on-write the copy is a deep one (about
1.5 ms for the 36,502 CPU events of ``profiler_5step``).

Because the kept tables never change, anything worked out from them can be kept too
(:func:`derived`), keyed by the identity of the tables it was worked out from: a value
given a new table (``trace.ops = ...``) simply misses the memo, which cannot go stale.
"""
from __future__ import annotations

import pandas as pd

_PANDAS_3 = int(pd.__version__.split(".")[0]) >= 3


def copy_on_write() -> bool:
    """Whether pandas copies on write here (pandas ≥ 3, or the option switched on)."""
    if _PANDAS_3:
        return True
    try:
        return pd.get_option("mode.copy_on_write") is True
    except (KeyError, ValueError, pd.errors.OptionError):      # pragma: no cover
        return False


def handed_out(table):
    """A copy of ``table`` that shares nothing writable with it (None stays None)."""
    if isinstance(table, (pd.DataFrame, pd.Series)):
        return table.copy(deep=not copy_on_write())
    return table


def table_property(name: str, doc: str = "") -> property:
    key = "_t_" + name

    def get(self):
        return handed_out(self.__dict__.get(key))

    def put(self, value):
        self.__dict__[key] = handed_out(value)

    return property(get, put, doc=doc or f"The ``{name}`` table (a copy: edit it freely).")


def read_only_tables(*names: str):
    """Class decorator (after ``@dataclass``): the named fields become read-only tables."""
    def deco(cls):
        for n in names:
            setattr(cls, n, table_property(n))
        cls._TABLES = tuple(names)
        return cls
    return deco


def kept(value, name: str):
    """The table the value keeps (not a copy; None when it keeps none of that name): for
    kitlib code that only reads (the model's values; :class:`kitlib.model.ranks.RankTraces`
    keys its memo by the tables' identity). Exported as ``kitlib.model.kept``."""
    return value.__dict__.get("_t_" + name)


def derived(value, key, tables: tuple, compute):
    """``compute()``, worked out once per identity of ``value``'s kept ``tables``.

    The memo lives in ``value._cache``; an entry is used only while every table it was
    worked out from is still the one the value keeps. Callers get the kept result:
    hand out a copy of it.
    """
    deps = tuple(kept(value, t) for t in tables)
    memo = value.__dict__.setdefault("_cache", {})
    hit = memo.get(key)
    if hit is not None and len(hit[0]) == len(deps) and all(a is b for a, b in zip(hit[0], deps)):
        return hit[1]
    out = compute()
    memo[key] = (deps, out)
    return out
