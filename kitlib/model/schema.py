"""The table schemas: the columns of every table of the kit's two trace values.

Every time is an integer number of nanoseconds on the tool's own clock
(``start_ns``, ``dur_ns``, ``end_ns``); meanings and units of each column are in
the docstrings of :class:`kitlib.model.Trace` and :class:`kitlib.model.NsysReport`.

Examples
--------
>>> from kitlib.model import schema
>>> schema.STEP_COLUMNS
['step', 'name', 'pid', 'tid', 'start_ns', 'end_ns', 'dur_ns']
>>> schema.OPS_COLUMNS[:6]
['name', 'pid', 'tid', 'start_ns', 'dur_ns', 'end_ns']
>>> sorted(schema.NSYS_COLUMNS)[:3]
['copies', 'gpus', 'kernels']
"""
from __future__ import annotations

from ..phases import STEP_RANGE

# --------------------------------------------------------------------------- torch.profiler
#: ``Trace.ops``: CPU-side events (operators, annotations, steps, Python frames).
OPS_COLUMNS = ["name", "pid", "tid", "start_ns", "dur_ns", "end_ns", "kind", "external_id",
               "input_dims", "input_types", "input_strides", "concrete_inputs", "sequence_number",
               "fwd_thread_id", "python_id", "python_parent_id", "call_stack", "comm_args", "parent", "depth"]
#: ``record_param_comms`` ``args`` naming a collective call (``Trace.ops["comm_args"]``; PyTorch
#: ``c10d/ParamCommsUtils.hpp``; the process group and ``Seq`` since about PyTorch 2.3).
COMM_ARGS = ("Collective name", "Process Group Name", "Seq", "In msg nelems", "Out msg nelems", "Group size")
#: ``Trace.launches``: CUDA runtime and driver API calls.
LAUNCH_COLUMNS = ["name", "pid", "tid", "start_ns", "dur_ns", "end_ns", "api", "correlation",
                  "external_id", "cbid"]
#: ``Trace.gpu``: kernels, copies, sets and GPU-side annotations. ``bandwidth_gb_per_s``: Kineto's
#: ``args["memory bandwidth (GB/s)"]`` (bytes ÷ the exact CUPTI ns), NaN where absent.
GPU_COLUMNS = ["name", "pid", "tid", "start_ns", "dur_ns", "end_ns", "kind", "device", "stream",
               "correlation", "external_id", "grid", "block", "bytes", "bandwidth_gb_per_s"]
#: ``Trace.memory``: allocator instants.
MEMORY_COLUMNS = ["name", "pid", "tid", "start_ns", "dur_ns", "bytes", "addr", "total_allocated",
                  "total_reserved", "device_type", "device_id"]
#: ``Trace.other``: events of a category kitlib does not interpret.
OTHER_COLUMNS = ["name", "cat", "ph", "pid", "tid", "start_ns", "dur_ns"]
#: ``Trace.host_events``: the profiler's event tree (:func:`kitlib.model.tree.build_host_tree`).
HOST_EVENT_COLUMNS = ["source", "row", "name", "kind", "pid", "tid", "start_ns", "end_ns", "dur_ns",
                      "parent", "depth", "merged", "profiler_parent", "children_ns"]

#: Names the profiler drops before building its event tree (``profiler_util.py``, ``_filter_name``).
FILTERED_NAMES = frozenset({"[memory]", "[OutOfMemory]", "profiler::_record_function_enter",
                            "profiler::_record_function_enter_new", "profiler::_record_function_exit",
                            "aten::is_leaf", "aten::output_nr", "aten::_version"})

# --------------------------------------------------------------------------- steps
#: Columns of a step table (``Trace.steps``, ``NsysReport.steps``).
STEP_COLUMNS = ["step", "name", "pid", "tid", "start_ns", "end_ns", "dur_ns"]

#: How a trace marks a step, preferred first: ``ProfilerStep#N`` (``prof.step()``), the kit's ``torch_step#N``.
STEP_PATTERNS = (r"^ProfilerStep#(\d+)$", rf"^{STEP_RANGE}#(\d+)$")

# --------------------------------------------------------------------------- Nsight Systems
#: Columns of each ``NsysReport`` table (see its docstring for meanings and units).
NSYS_COLUMNS = {
    "kernels": ["name", "short_name", "pid", "tid", "start_ns", "dur_ns", "end_ns", "correlation",
                "device", "context", "stream", "grid", "block", "registers_per_thread",
                "static_smem_bytes", "dynamic_smem_bytes"],
    "launches": ["name", "raw_name", "api", "pid", "tid", "start_ns", "dur_ns", "end_ns",
                 "correlation", "return_value"],
    "copies": ["name", "copy_kind", "bytes", "src_kind", "dst_kind", "pid", "tid", "start_ns",
               "dur_ns", "end_ns", "correlation", "device", "context", "stream"],
    "sets": ["name", "bytes", "value", "pid", "tid", "start_ns", "dur_ns", "end_ns",
             "correlation", "device", "context", "stream"],
    "nvtx": ["name", "domain", "style", "pid", "tid", "end_tid", "start_ns", "dur_ns", "end_ns",
             "depth", "category", "range_id"],
    "marks": ["name", "domain", "pid", "tid", "start_ns"],
    "osrt": ["name", "pid", "tid", "start_ns", "dur_ns", "end_ns", "return_value", "nesting_level"],
    "threads": ["pid", "tid", "name", "priority", "process"],
    "gpus": ["device", "cuda_device", "name", "chip", "bus", "sm_count", "memory_bytes",
             "memory_bandwidth_bytes_per_s", "clock_hz", "l2_cache_bytes", "compute_capability",
             "uuid"],
}

#: Columns of ``NsysReport.defects``: what the reader read around.
DEFECT_COLUMNS = ["table", "source", "column", "problem", "rows", "first_rowid"]
