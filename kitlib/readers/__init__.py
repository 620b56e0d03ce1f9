"""Readers: files in, model values out (pandas tables). Just above kitlib.model.

Code that opens a file a tool wrote and turns it into typed tables, with a clear kitlib error
for a damaged or foreign file. ``files`` (bytes, gzip, JSON) is below the others; ``trace``
(Kineto JSON; it also builds the event tree), ``nsys`` (Nsight Systems SQLite), ``snapshot``
(memory snapshot pickles), ``ncu`` (Nsight Compute CSV), ``memory_timeline`` and
``profiler_table`` read one format each; ``trace_cache`` keeps loaded traces as Arrow tables;
``bundle`` opens a capture folder and ``ranks`` one distributed run's traces, through the
format readers. Readers re-export the model's names (``kitlib.readers.trace.Trace``).

May import: the standard library, numpy, pandas, orjson, pyarrow, ``kitlib.model``,
``kitlib.errors``, ``kitlib.units``, ``kitlib.phases``, ``kitlib.paths``, ``kitlib.settings``
and each other (the format readers never import ``bundle`` or ``ranks``). Nothing from
analyses, capture, plots or course."""
