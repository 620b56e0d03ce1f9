"""What an analysis may be given: a recording of either format, checked in one place."""
from __future__ import annotations

from ..errors import KitError
from .nsys import NsysReport
from .ranks import RankTraces
from .trace import Trace

#: Both recording formats: what :func:`check_source` accepts by default.
RECORDINGS = (Trace, NsysReport)


def check_source(source, what: str | None = "source", *, kinds=RECORDINGS, message: str | None = None,
                 error=KitError) -> None:
    """Refuse anything but a recording of ``kinds`` (default: a Trace or an NsysReport): raise
    ``error`` (KitError) with ``message``'s ``{got}`` filled in (the type's name), by default
    ``"<what>: expected a kitlib Trace (load_trace) or NsysReport (load_nsys), got <type>"``.

    Examples
    --------
    >>> check_source({"traceEvents": []}, what="before")
    Traceback (most recent call last):
    ...
    kitlib.errors.KitError: before: expected a kitlib Trace (load_trace) or NsysReport (load_nsys), got dict
    """
    if not isinstance(source, kinds):
        got = type(source).__name__
        if message is None:
            message = ("" if what is None else f"{what}: ") + \
                "expected a kitlib Trace (load_trace) or NsysReport (load_nsys), got {got}"
        raise error(message.format(got=got))


def as_source(given, kinds, load):
    """``given`` when it is a recording of ``kinds`` already, else ``load(given)`` (a path, a
    Capture: what the loader reads).

    Examples
    --------
    >>> as_source("3", (int,), int), as_source(4, (int,), int)
    (3, 4)
    """
    return given if isinstance(given, kinds) else load(given)


def check_same_format(before, after, what: str) -> None:
    """Refuse (KitError) two recordings of different formats, each checked with :func:`check_source`.

    Examples
    --------
    >>> check_same_format("a.json", "b.json", "diff")
    Traceback (most recent call last):
    ...
    kitlib.errors.KitError: diff: expected a kitlib Trace (load_trace) or NsysReport (load_nsys), got str
    """
    check_source(before, what)
    check_source(after, what)
    if before.FORMAT != after.FORMAT:
        raise KitError(f"{what}: {before.path} is a {before.FORMAT} and {after.path} a {after.FORMAT}: "
                       "diff two recordings of the same kind (two torch.profiler traces, or two Nsight "
                       "Systems exports)")


def recording_labels(obj, label_for):
    """The course labels of a multi-rank recording (its own ``label``) or a Trace
    (``label_for(trace.path)``), as a list (empty when unlabelled); None for anything else
    (an NsysReport included: its Capture carries its label).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> recording_labels(tiny_trace(), lambda path: "baseline"), recording_labels("x.json", str)
    (['baseline'], None)
    """
    if isinstance(obj, RankTraces):
        return [obj.label] if obj.label else []
    if isinstance(obj, Trace):
        lab = label_for(obj.path)
        return [lab] if lab else []
    return None
