"""Analyses: pure functions from the readers' tables to tables and numbers.

What belongs here: the kit's teaching content in code — the operator -> launch ->
kernel chain, steps and their measures, interval arithmetic, self/total times,
grouping by name, shape and call site, memory and FLOPs, alignment of the two
tools, the lint, and before/after statistics (``compare``). No file writing, no
printing, no plotting and no running of the workload (that is ``kitlib.capture.recipes``).

May import: ``kitlib.readers`` (their table classes and, for a few functions that
take a bundle, its files), ``kitlib.errors``, ``kitlib.units``, ``kitlib.phases``,
and other analyses. Nothing from capture, plots or course.
"""
