"""Analyses: pure functions from the readers' tables to tables and numbers.

What belongs here: the kit's teaching content in code — the operator -> launch ->
kernel chain, steps and their measures, interval arithmetic, self/total times,
grouping by name, shape and call site, memory and FLOPs, alignment of the two
tools, the lint, and before/after statistics (``compare``). No file writing, no
printing, no plotting and no running of the workload (that is ``kitlib.capture.recipes``).

Which step, parent or label holds an event is decided by ``kitlib.model.window``
(half-open ``[start, end)``), never by a formula of a module's own.

May import: ``kitlib.model`` (the values, the event tree, the window function),
``kitlib.readers`` (their table classes and, for a few functions that
take a bundle, its files), ``kitlib.errors``, ``kitlib.units``, ``kitlib.phases``, ``kitlib.settings``,
and other analyses. Nothing from capture, plots or course.
"""
