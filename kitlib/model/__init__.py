"""Model: the data contract between the readers and the analyses.

What belongs here, and nothing else:

- the table schemas (:mod:`kitlib.model.schema`): the columns of every table of a
  :class:`Trace` and an :class:`NsysReport`, and of a step table;
- :class:`Trace` (a torch.profiler trace) and :class:`NsysReport` (an Nsight Systems
  export) as read-only values: their tables are handed out as copies, so an edit to
  one never reaches the value, and no memo kept inside one can go stale; an analysis
  (or a learner) that needs a changed trace makes a new one (``dataclasses.replace``);
- the one event tree (:mod:`kitlib.model.tree`: the profiler's parent/child rule,
  with walkers);
- the one window function (:mod:`kitlib.model.window`): which step, which parent,
  which label contains time ``t``, under one boundary rule, half-open
  ``[start, end)``, named in its signature;
- :mod:`kitlib.model.examples`: a five-event trace for docstring examples and tests,
  a small profiler trace document, and two ranks of an NCCL run as trace documents
  (written to a folder of the kit's cache for the multi-rank reader).

Readers decode files (JSON, SQLite) into these values; analyses use only these.

May import: the standard library, numpy, pandas, ``kitlib.errors``, ``kitlib.units``,
``kitlib.phases``, ``kitlib.settings`` and ``kitlib.paths`` (the cache folder the
examples write to), and each other. Nothing from readers,
analyses, capture, plots or course.
"""
from .schema import (STEP_COLUMNS, STEP_PATTERNS, OPS_COLUMNS, LAUNCH_COLUMNS, GPU_COLUMNS,  # noqa: F401
                     MEMORY_COLUMNS, OTHER_COLUMNS, HOST_EVENT_COLUMNS, FILTERED_NAMES,
                     NSYS_COLUMNS, DEFECT_COLUMNS)
from .trace import Trace  # noqa: F401
from .nsys import NsysReport  # noqa: F401
from .ranks import RankTraces  # noqa: F401
from .window import containing, innermost  # noqa: F401
from ._values import handed_out, kept  # noqa: F401
