"""Every ``KITLIB_*`` setting: its name, default and meaning, read in one place.

A base module (no kitlib imports). Settings are environment variables, read when asked
(functions, never constants fixed at import), so a test or a lesson cell that sets one
sees it take effect. ``python -m kitlib info`` prints :func:`describe`.

Examples
--------
>>> from kitlib import settings
>>> settings.SETTINGS["KITLIB_TRACE_CACHE"].default
'1'
>>> import os
>>> before = os.environ.get("KITLIB_PROGRESS")
>>> os.environ["KITLIB_PROGRESS"] = "off"
>>> settings.is_off("KITLIB_PROGRESS")
True
>>> os.environ["KITLIB_PROGRESS"] = ""        # empty: unset, so the default ("1")
>>> settings.is_off("KITLIB_PROGRESS")
False
>>> if before is None: del os.environ["KITLIB_PROGRESS"]
... else: os.environ["KITLIB_PROGRESS"] = before
"""
from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Setting:
    """One ``KITLIB_*`` environment variable."""

    name: str
    default: str | None      #: None: unset by default (the meaning says what happens then)
    meaning: str
    read_by: str             #: the module(s) that act on it


_OFF = ("0", "off", "false", "no")

#: Every setting the kit reads, by name.
SETTINGS: dict = {s.name: s for s in [
    Setting("KITLIB_MODE", "auto",
            "lessons run live (a CUDA GPU here) or replay recordings: auto, live or replay",
            "kitlib.course"),
    Setting("KITLIB_REPLAY_DIR", None,
            "a folder of your own recordings (python -m kitlib record-course): lessons replay "
            "those before the kit's", "kitlib.readers.bundle, kitlib.capture.cli"),
    Setting("KITLIB_REFERENCE", None,
            "the folder of the kit's reference recordings (default: data/reference of the "
            "checkout, or the copy inside the installed package)", "kitlib.readers.bundle"),
    Setting("KITLIB_CACHE", None,
            "where generated data goes (the trace cache, the synthetic dataset); default: "
            "the checkout's .cache/, else ~/.cache/kitlib", "kitlib.paths"),
    Setting("KITLIB_SHARED_CACHE", None,
            "a read-only trace cache built once for every learner (python -m kitlib cache "
            "--build DIR; the course image sets it): consulted before KITLIB_CACHE, never "
            "written", "kitlib.readers.trace_cache"),
    Setting("KITLIB_RUNS", None,
            "where live captures are written; default: the checkout's runs/, else "
            "~/kitlib-runs", "kitlib.paths"),
    Setting("KITLIB_TRACE_CACHE", "1",
            "0/off/false/no: load_trace parses the JSON every time instead of reading its "
            "Arrow cache", "kitlib.readers.trace_cache"),
    Setting("KITLIB_PROGRESS", "1",
            "0/off/false/no: never show progress bars (the tests set it)",
            "kitlib.readers.trace"),
    Setting("KITLIB_PLOT_SCALE", None,
            "a projector's scale for pictures (and, in a kernel, tables, forms and "
            "explorers): a positive number, default 1", "kitlib.plots, kitlib.course.widgets"),
    Setting("KITLIB_FOOD101", None,
            "a folder holding Food-101 (torchvision's layout); default: a synthetic "
            "101-class dataset generated into the cache", "kitlib.capture.workload"),
    Setting("KITLIB_NSYS", None,
            "the nsys program to run, when it is not on the PATH", "kitlib.capture.nsys_recipes"),
    Setting("KITLIB_LIBDW", None,
            "a folder put on LD_LIBRARY_PATH for nsys (its libdw), when the system's is "
            "missing", "kitlib.capture.nsys_recipes"),
    Setting("KITLIB_CLASS_VIEW_URL", None,
            "the instructor's class view on this hub (set by the hub's config, "
            "deploy/hub/): each judged answer goes there with the learner's hub token",
            "kitlib.course.classview"),
    Setting("KITLIB_CLASS_VIEW", "on",
            "off: this kernel sends nothing to the class view", "kitlib.course.classview"),
    Setting("KITLIB_CLASS_VIEW_TIMEOUT_S", "2",
            "s a send to the class view may take before it is given up", "kitlib.course.classview"),
]}


def value(name: str) -> str | None:
    """The setting's value now: the environment's, stripped, else its default; an empty
    variable counts as unset.

    Raises
    ------
    KeyError
        ``name`` is not a kit setting (see :data:`SETTINGS`).
    """
    s = SETTINGS[name]
    got = os.environ.get(name)
    got = got.strip() if got is not None else ""
    return got if got else s.default


def is_off(name: str) -> bool:
    """Whether an on/off setting is switched off (0, off, false or no, any case)."""
    v = value(name)
    return v is not None and v.lower() in _OFF


def is_set(name: str) -> bool:
    """Whether the environment sets ``name`` (to something not empty)."""
    return bool((os.environ.get(name) or "").strip())


def describe() -> list:
    """One row per setting, for ``python -m kitlib info``: ``name``, ``value`` (in force now),
    ``set`` (by the environment), ``default``, ``meaning`` and ``read_by``."""
    return [{"name": s.name, "value": value(s.name), "set": is_set(s.name), "default": s.default,
             "meaning": s.meaning, "read_by": s.read_by} for s in SETTINGS.values()]
