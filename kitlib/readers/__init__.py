"""Readers: files in, model values out (pandas tables). Just above kitlib.model.

What belongs here: code that opens a file a tool wrote and turns it into typed
tables, with a clear kitlib error for a damaged or foreign file. ``files`` (bytes,
gzip, JSON, sha256) sits below the others; ``trace`` (torch.profiler / Kineto
Chrome-trace JSON), ``nsys`` (Nsight Systems SQLite export, and the ``nsys stats``
reports rebuilt from it), ``snapshot`` (``torch.cuda.memory._snapshot()`` pickles,
with a restricted unpickler), ``ncu`` (Nsight Compute CSV), ``memory_timeline``
(``export_memory_timeline`` JSON) and ``profiler_table`` (the profiler's printed
``key_averages()`` table) read one format each; ``trace`` also builds the
profiler's event tree, the one place where parent and child are decided, and
``trace_cache`` keeps loaded traces as Arrow tables; ``bundle`` (the capture
folder: ``manifest.json`` and its files) opens a folder and hands its files to the
other readers; ``ranks`` reads the traces of one distributed run, one per rank (a
multi-rank bundle or a folder of traces), on top of ``bundle`` and ``trace``.

Readers decode files into the values of ``kitlib.model`` (``Trace``, ``NsysReport``),
whose names they re-export (``kitlib.readers.trace.Trace`` is ``kitlib.model.Trace``).

May import: the standard library, numpy, pandas, orjson, pyarrow, ``kitlib.model``,
``kitlib.errors``, ``kitlib.units``, ``kitlib.phases``, ``kitlib.paths``, ``kitlib.settings`` and each other (``bundle`` and ``ranks`` use the
format readers; the format readers never import ``bundle`` or ``ranks``). Nothing from analyses,
capture, plots or course.
"""
