"""Capture: running the workload and recording it.

What belongs here: the ResNet-50 workload (``workload``), the torch.profiler recipes
that write capture bundles (``recipes``), the Nsight Systems command lines and runs
(``nsys_recipes``), live measurements that run the workload several times
(``experiments``: DataLoader settings, the cost of profiling, FlopCounterMode), and
the command line (``cli``, with the text ``summary`` of a bundle).

May import: ``kitlib.readers`` (to write and reopen bundles), ``kitlib.analyses``
(the summary), the base modules. Nothing from plots or course.
"""
