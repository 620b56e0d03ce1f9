"""Read-only tables on a dataclass: how :class:`~kitlib.model.Trace` and
:class:`~kitlib.model.NsysReport` keep their tables out of reach.

A table field is stored privately, copied in when given and handed out as a copy on
every read (cheap under pandas' copy-on-write; a deep copy under pandas 2 without it).
Because the kept tables never change, what is worked out from them is memoised
(:func:`derived`), keyed by the identity of those tables: it cannot go stale.
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
    """The table the value keeps (not a copy; None if none): for kitlib code that only reads."""
    return value.__dict__.get("_t_" + name)


def derived(value, key, tables: tuple, compute):
    """``compute()``, worked out once per identity of ``value``'s kept ``tables`` (memo in
    ``value._cache``); callers hand out a copy of the result.
    """
    deps = tuple(kept(value, t) for t in tables)
    memo = value.__dict__.setdefault("_cache", {})
    hit = memo.get(key)
    if hit is not None and len(hit[0]) == len(deps) and all(a is b for a, b in zip(hit[0], deps)):
        return hit[1]
    out = compute()
    memo[key] = (deps, out)
    return out
