"""What an analysis may be given: a recording of either format."""
from __future__ import annotations

from ..errors import KitError
from .nsys import NsysReport
from .trace import Trace


def check_source(source, what: str = "source") -> None:
    """Refuse anything but a recording: returns None when ``source`` is a kitlib
    :class:`~kitlib.model.Trace` or :class:`~kitlib.model.NsysReport`.

    Parameters
    ----------
    source : object
        What an analysis was given.
    what : str, default "source"
        How the message names it.

    Raises
    ------
    KitError
        ``"<what>: expected a kitlib Trace (load_trace) or NsysReport (load_nsys), got
        <type>"``.

    Examples
    --------
    >>> from kitlib.model.sources import check_source
    >>> from kitlib.errors import KitError
    >>> from kitlib.model.examples import tiny_trace
    >>> check_source(tiny_trace())
    >>> try:
    ...     check_source({"traceEvents": []}, what="before")
    ... except KitError as e:
    ...     print(e)
    before: expected a kitlib Trace (load_trace) or NsysReport (load_nsys), got dict
    """
    if not isinstance(source, (Trace, NsysReport)):
        raise KitError(f"{what}: expected a kitlib Trace (load_trace) or NsysReport (load_nsys), "
                       f"got {type(source).__name__}")
