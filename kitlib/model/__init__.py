"""Model: the data contract between the readers and the analyses.

Readers decode files into these values; analyses use only these. May import: the
standard library, numpy, pandas, ``kitlib.errors``, ``units``, ``phases``, ``settings``,
``paths``, and each other; nothing from readers, analyses, capture, plots or course.
"""
from .schema import (STEP_COLUMNS, STEP_PATTERNS, OPS_COLUMNS, LAUNCH_COLUMNS, GPU_COLUMNS,  # noqa: F401
                     MEMORY_COLUMNS, OTHER_COLUMNS, HOST_EVENT_COLUMNS, FILTERED_NAMES,
                     NSYS_COLUMNS, DEFECT_COLUMNS)
from .trace import Trace  # noqa: F401
from .nsys import NsysReport  # noqa: F401
from .ranks import RankTraces  # noqa: F401
from .window import containing, innermost  # noqa: F401
from ._values import handed_out, kept  # noqa: F401
