"""What an analysis may be given: a recording of either format."""
from __future__ import annotations

from ..errors import KitError
from .nsys import NsysReport
from .trace import Trace


def check_source(source, what: str = "source") -> None:
    """Refuse anything but a recording: None when ``source`` is a kitlib
    :class:`~kitlib.model.Trace` or :class:`~kitlib.model.NsysReport`.

    Raises
    ------
    KitError
        ``"<what>: expected a kitlib Trace (load_trace) or NsysReport (load_nsys), got <type>"``.
    """
    if not isinstance(source, (Trace, NsysReport)):
        raise KitError(f"{what}: expected a kitlib Trace (load_trace) or NsysReport (load_nsys), "
                       f"got {type(source).__name__}")
