"""The labels of a training step's phases, shared by the workload and the analyses.

:func:`kitlib.capture.workload.train_step` wraps each phase in a
``torch.profiler.record_function`` range and an NVTX range carrying the same label,
so that both tools' recordings can be cut the same way; the analyses look for these
labels (:mod:`kitlib.analyses.steps`). Both import them from here, the bottom of the
package, so neither layer has to import the other.
"""
from __future__ import annotations

#: The phase labels of one training step, in order: the one spelling of them. Every
#: module that names a phase takes it from here (``LABELS`` or the names below);
#: ``kitlib.analyses.steps.PHASES`` is the same tuple.
LABELS = ("data_load", "h2d", "forward", "backward", "optimizer")

#: Each phase's label, by name.
DATA_LOAD, H2D, FORWARD, BACKWARD, OPTIMIZER = LABELS

#: Name of the NVTX range (and ``record_function`` label prefix without a schedule)
#: that wraps one whole step in the kit's recordings (``torch_step``, ``torch_step#N``).
STEP_RANGE = "torch_step"
