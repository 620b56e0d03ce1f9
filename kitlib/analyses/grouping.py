"""The profiler's ``key_averages`` table, rebuilt from the trace's own events.

``prof.key_averages()`` groups every recorded event by a key and sums its
times. The trace file holds the same events, so the same table can be rebuilt
in pandas — and once it is, nothing about it is a black box:

* **the key**: the event's name (``ProfilerStep#N`` is written ``ProfilerStep*``),
  whether it is a host (CPU) or device (CUDA) event, and optionally the input
  shapes (``group_by_input_shape=True``: ``str()`` of the ``Input Dims`` list, e.g.
  ``"[[128, 3, 224, 224], [64, 3, 7, 7], [], …]"``) or the top N frames of the
  Python call stack (``group_by_stack_n=N``);
* **host (CPU) time**: an event's *total* is its interval; its *self* time is the
  interval minus its direct children's intervals. Children are found by time
  nesting on the same thread — and CUDA launches (``cudaLaunchKernel``…) are
  children too, so launch time is not an operator's self time;
* **device time**: a kernel, copy or set belongs to the operator (or
  ``record_function`` range) whose external id its launch carries — the chain of
  :mod:`kitlib.chain`. *Self* device time = the GPU events launched by this event
  itself; *total* = those of it and every event nested inside it;
* **GPU events are rows too**: each kernel name is a row of its own (device type
  CUDA) with its own count and device time; so is each GPU-side annotation
  (``gpu_user_annotation``, the projection of a ``record_function`` range onto a
  stream). That is why a ``forward`` row can show "Self CUDA" time: it is the
  annotation's span on the GPU, not work.

Three rules of the profiler's are copied because they change counts: an event
whose parent has the same name and no other child is merged into its parent
(``EventList._remove_dup_nodes``); a few bookkeeping names are never shown
(``_filter_name``: ``aten::is_leaf``, ``aten::output_nr``, ``aten::_version``,
``profiler::_record_function_enter/exit``, and the trace's own ``[memory]`` instants);
and an allocator record that falls inside no event becomes an event of its own,
``[memory]``, so the table has a ``[memory]`` row with its count and bytes and no
time (``_parse_kineto_results``: ``_create_function_event_for_memory_events``), as
:func:`kitlib.analyses.memory.memory_by_operator` has.

Sources: PyTorch ``torch/autograd/profiler_util.py`` (``EventList.key_averages``,
``_populate_cpu_children``, ``_remove_dup_nodes``, ``_set_backward_stacktraces``,
``FunctionEvent.self_device_time_total``) and ``torch/autograd/profiler.py``
(``_parse_kineto_results``: kernels are attached to the operator whose id equals
their linked correlation id); checked against the profiler's own rows in
``data/reference/fixed_batch/key_averages.json.gz`` (tests/analyses/test_grouping.py).
"""
from __future__ import annotations


import numpy as np
import pandas as pd

from .chain import chain, impossible_gpu_events
from .events import gpu_events, op_events, op_stacks
from .steps import active_steps
from ..errors import KitError
from ..model import Trace
from ..progress import analysis_progress

GROUP_COLUMNS = ["count", "host_total_ns", "host_self_ns", "device_total_ns", "device_self_ns",
                 "host_per_call_ns", "device_per_call_ns"]

#: ``key_averages()`` columns that :func:`group_ops` adds when the trace holds what
#: they need (memory instants for the four memory columns, input shapes for FLOPs).
_EXTRA_COLUMNS = ["cpu_memory_bytes", "self_cpu_memory_bytes", "device_memory_bytes",
                  "self_device_memory_bytes", "flops"]


def _with_memory_and_flops(trace: Trace, ev: pd.DataFrame) -> pd.DataFrame:
    """``ev`` (op_events rows) with the profiler's memory and FLOP columns per event:
    CPU and device memory (total and self, bytes; :func:`kitlib.analyses.memory.memory_by_event`)
    where the trace has memory instants, and FLOPs (:func:`kitlib.analyses.flops.flops_by_event`)."""
    from . import flops as F
    from . import memory as M
    if any(c in ev.columns for c in _EXTRA_COLUMNS):
        return ev
    out = ev.copy()
    key = pd.MultiIndex.from_arrays([out["source"].to_numpy(), out["row"].to_numpy()])
    if len(trace.memory):
        base = M.profiler_events(trace)
        for dev, name in (("cpu", "cpu"), ("cuda", "device")):
            if not (trace.memory["device_type"] == M.DEVICE_TYPES[dev]).any():
                out[f"{name}_memory_bytes"] = 0
                out[f"self_{name}_memory_bytes"] = 0
                continue
            m = M.memory_by_event(trace, dev, events=base)
            mi = pd.MultiIndex.from_arrays([m["source"].to_numpy(), m["row"].to_numpy()])
            tot = pd.Series(m["total_bytes"].to_numpy(), index=mi)
            slf = pd.Series(m["self_bytes"].to_numpy(), index=mi)
            out[f"{name}_memory_bytes"] = tot.reindex(key).fillna(0).astype(np.int64).to_numpy()
            out[f"self_{name}_memory_bytes"] = slf.reindex(key).fillna(0).astype(np.int64).to_numpy()
    try:
        fl = F.flops_by_event(trace)
    except KitError:          # no (readable) shapes: the profiler shows no FLOPs either
        fl = None
    if fl is not None and len(fl):
        per_row = pd.Series(fl["flops"].to_numpy(), index=fl["row"].to_numpy())
        out["flops"] = np.where(out["source"].to_numpy() == "ops",
                                per_row.reindex(out["row"].to_numpy()).fillna(0).to_numpy(), 0).astype(np.int64)
    return out


def _memory_rows(trace: Trace) -> pd.DataFrame:
    """One event per allocator record that falls inside no event, as the profiler makes
    them (:func:`kitlib.analyses.memory.records_inside_no_event`): named ``[memory]``,
    device type CPU, no duration, no shapes or stack, its bytes in the CPU or the
    device memory columns (total and self alike: it has no children)."""
    from . import memory as M
    m = M.records_inside_no_event(trace)
    n = len(m)
    b = m["bytes"].to_numpy(dtype=np.int64)
    dev = m["device_type"].to_numpy()
    cpu = np.where(dev == M.DEVICE_TYPES["cpu"], b, 0)
    cuda = np.where(dev == M.DEVICE_TYPES["cuda"], b, 0)
    zeros = np.zeros(n, dtype=np.int64)
    return pd.DataFrame({"key": ["[memory]"] * n, "device_type": ["CPU"] * n, "input_shapes": ["[]"] * n,
                         "stack": [()] * n, "dur_ns": zeros, "host_total_ns": zeros, "host_self_ns": zeros,
                         "device_total_ns": zeros, "device_self_ns": zeros,
                         "cpu_memory_bytes": cpu, "self_cpu_memory_bytes": cpu,
                         "device_memory_bytes": cuda, "self_device_memory_bytes": cuda, "flops": zeros})


def average_by_key(events: pd.DataFrame, keys: list[str], extra: list[str] = ()) -> pd.DataFrame:
    """What ``key_averages`` does with the events: one row per key, with the number of
    events and the sums of their times.

    Parameters
    ----------
    events : DataFrame
        One row per event: the ``keys`` columns and ``host_total_ns`` (the event's
        interval; 0 for a GPU event), ``host_self_ns``, ``device_total_ns``,
        ``device_self_ns`` (int ns), and the ``extra`` columns to sum (bytes, FLOPs).
    keys : list of str
        ``["name", "device_type"]``, plus ``"input_shapes"`` or ``"stack"``.

    Returns
    -------
    DataFrame
        The keys, ``count``, the four sums (int64 ns), the ``extra`` sums (int64) and
        ``host_per_call_ns``, ``device_per_call_ns`` (total ÷ count, float ns), sorted by
        ``device_self_ns`` then ``host_self_ns``, largest first (ties keep the order the
        keys first appear in). Sources: torch/autograd/profiler_util.py, ``EventList.key_averages``.

    Examples
    --------
    >>> import pandas as pd
    >>> from kitlib.analyses.grouping import average_by_key
    >>> ev = pd.DataFrame({"name": ["aten::relu", "aten::relu", "aten::add"], "device_type": "CPU",
    ...                    "host_total_ns": [300, 100, 50], "host_self_ns": [200, 100, 50],
    ...                    "device_total_ns": [40, 40, 0], "device_self_ns": [40, 40, 0]})
    >>> average_by_key(ev, ["name", "device_type"])[["name", "count", "host_self_ns", "host_per_call_ns"]]
             name  count  host_self_ns  host_per_call_ns
    0  aten::relu      2           300             200.0
    1   aten::add      1            50              50.0
    """
    sums = ["host_total_ns", "host_self_ns", "device_total_ns", "device_self_ns", *extra]
    out = events.groupby(keys, sort=False, dropna=False).agg(
        count=(keys[0], "size"), **{c: (c, "sum") for c in sums}).reset_index()
    out[sums] = out[sums].astype(np.int64)
    out["host_per_call_ns"] = out["host_total_ns"] / out["count"]
    out["device_per_call_ns"] = out["device_total_ns"] / out["count"]
    return out.sort_values(["device_self_ns", "host_self_ns"], ascending=False, kind="stable").reset_index(drop=True)


def group_ops(trace: Trace, by: str = "name", stack_n: int = 5, chain_df: pd.DataFrame | None = None,
              events: pd.DataFrame | None = None, include_gpu: bool = True,
              include_python_functions: bool | None = None) -> pd.DataFrame:
    """``key_averages()`` rebuilt from the trace: one row per key with counts and times.

    Parameters
    ----------
    trace : Trace
    by : {"name", "input_shape", "stack"}
        ``"name"`` = ``key_averages()``; ``"input_shape"`` = ``key_averages(group_by_input_shape=True)``;
        ``"stack"`` = ``key_averages(group_by_stack_n=stack_n)`` with the stack rebuilt
        from the trace's Python frames (:func:`kitlib.analyses.events.op_stacks`; needs
        ``with_stack``).
    stack_n : int
        How many innermost frames form the key when ``by="stack"``.
    chain_df : DataFrame, optional
        A :func:`kitlib.analyses.chain.chain` result to reuse.
    events : DataFrame, optional
        An :func:`op_events` result to reuse (with a ``stack`` column when ``by="stack"``).
    include_gpu : bool
        Also list the device rows (one per GPU event name), as the profiler does.
    include_python_functions : bool, optional
        List the Python frames' own rows. By default as the recording's torch did
        (``trace.meta["python_frames_are_rows"]``): yes for torch 2.12–2.13, no for
        2.14 (whose ``key_averages(include_python_functions=True)`` is ``True`` here)
        and for ≤ 2.11, which kept the frames out of its events altogether (``True``
        is then refused).

    Notes
    -----
    Whether Python frames count as children (lowering self times) is not a choice of
    the caller: it is the trace's own rule, ``trace.meta["python_frames_rule"]``
    (:func:`kitlib.readers.trace.python_frames_rule`), repeated in the result's
    ``.attrs["python_frames_rule"]``. On a trace of
    :data:`~kitlib.progress.PROGRESS_MIN_EVENTS` events or more (seconds of work)
    a progress bar shows the stages, unless ``KITLIB_PROGRESS=0``.

    Returns
    -------
    DataFrame
        One row per key, sorted by ``device_self_ns`` then ``host_self_ns`` (descending):
        ``name`` (the profiler's key name), ``device_type`` (``CPU``/``CUDA``),
        ``input_shapes`` (``by="input_shape"``) or ``stack`` (tuple of frame names,
        innermost first; ``by="stack"``), ``count``, ``host_total_ns`` ("CPU total"),
        ``host_self_ns`` ("Self CPU"), ``device_total_ns`` ("CUDA total"),
        ``device_self_ns`` ("Self CUDA"), ``host_per_call_ns`` and
        ``device_per_call_ns`` (total ÷ count, float ns). Host and device times are
        different clocks' work: never add them. Where the trace holds memory
        instants (``profile_memory=True``) also ``cpu_memory_bytes``,
        ``self_cpu_memory_bytes`` ("CPU Mem", "Self CPU Mem"),
        ``device_memory_bytes``, ``self_device_memory_bytes`` ("CUDA Mem", "Self
        CUDA Mem"); where it holds input shapes, ``flops`` ("Total FLOPs", the
        profiler's ``with_flops`` formulas, :mod:`kitlib.analyses.flops`).

    Raises
    ------
    ValueError
        Unknown ``by``, or ``by="stack"`` on a trace without Python frames (record it
        with ``with_stack=True``), or ``include_python_functions=True`` on a trace whose
        profiler kept its Python frames out of its events (torch ≤ 2.11).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> tr = tiny_trace()
    >>> from kitlib.analyses.grouping import group_ops
    >>> group_ops(tr)[["name", "device_type", "count", "host_total_ns", "host_self_ns"]]
                   name device_type  count  host_total_ns  host_self_ns
    0        aten::relu         CPU      1            300           200
    1       relu_kernel        CUDA      1              0             0
    2     ProfilerStep*         CPU      1           1000           700
    3  cudaLaunchKernel         CPU      1            100           100
    4         aten::add         CPU      1              0             0
    """
    if by not in ("name", "input_shape", "stack"):
        raise ValueError(f"by must be 'name', 'input_shape' or 'stack', not {by!r}")
    py_rows = bool(trace.meta.get("python_frames_are_rows")) if include_python_functions is None \
        else bool(include_python_functions)
    if py_rows and not trace.meta.get("python_frames_are_children") and (trace.ops["kind"] == "python").any():
        raise ValueError("include_python_functions=True: the profiler that wrote this trace kept its Python "
                         f"frames out of its events, so it never listed them ({trace.meta.get('python_frames_rule')})")
    bar = analysis_progress(trace, "group_ops", 4)      # shown for large traces only
    bar.set_postfix_str("kernels to launches to operators")
    if chain_df is None and (events is None or (include_gpu and len(trace.gpu))):
        chain_df = chain(trace)              # once, for the events and the GPU rows alike
    bar.update(1)
    bar.set_postfix_str("host events and their self times")
    ev = op_events(trace, chain_df, python_frames=py_rows) if events is None else events
    bar.update(1)
    bar.set_postfix_str("memory and FLOPs")
    ev = _with_memory_and_flops(trace, ev)
    if by == "stack" and "stack" not in ev.columns:
        ev = ev.assign(stack=op_stacks(trace, ev, n=None))
    bar.update(1)
    bar.set_postfix_str("grouping")
    frames = [ev.assign(host_total_ns=ev["dur_ns"])]
    if include_gpu and len(trace.gpu):
        g = gpu_events(trace).assign(host_total_ns=0)
        bad = impossible_gpu_events(trace, chain_df)
        if len(bad):                         # damaged rows are not work: out of counts and averages
            g = g[~g["row"].isin(bad["gpu_row"])]
        if by == "stack":
            g["stack"] = [()] * len(g)
        frames.append(g)
    if "cpu_memory_bytes" in ev.columns:     # the profiler's [memory] row: records inside no event
        loose = _memory_rows(trace)
        if len(loose):
            frames.append(loose)
    allev = pd.concat(frames, ignore_index=True)
    keys = ["name", "device_type"]
    if by == "input_shape":
        keys.append("input_shapes")
    elif by == "stack":
        allev["stack"] = [tuple(s[:stack_n]) for s in allev["stack"]]
        keys.append("stack")
    allev = allev.assign(name=allev["key"])
    extra = [c for c in _EXTRA_COLUMNS if c in allev.columns]
    for c in extra:
        allev[c] = allev[c].fillna(0).astype(np.int64)
    out = average_by_key(allev, keys, extra)
    out.attrs["python_frames_rule"] = trace.meta.get("python_frames_rule", "")
    bar.update(1)
    bar.close()
    return out


#: ``FunctionEventAvg`` attribute names (as some exporters write them) -> the kit's
#: unit-suffixed names of the same ``key_averages()`` fields.
_KA_SYNONYMS = {"cpu_time_total": "cpu_time_total_us", "self_cpu_time_total": "self_cpu_time_total_us",
                "device_time_total": "device_time_total_us", "self_device_time_total": "self_device_time_total_us",
                "cpu_memory_usage": "cpu_memory_usage_bytes", "self_cpu_memory_usage": "self_cpu_memory_usage_bytes",
                "device_memory_usage": "device_memory_usage_bytes",
                "self_device_memory_usage": "self_device_memory_usage_bytes"}


def key_averages_table(rows: list) -> pd.DataFrame:
    """The profiler's own rows (``Capture.key_averages()["by_name"]`` etc.) as a DataFrame
    in this module's column names, times converted from µs to ns (rounded).

    Rows may name their fields as the kit's bundles do (``cpu_time_total_us`` …) or as
    ``FunctionEventAvg`` does (``cpu_time_total`` …, :data:`_KA_SYNONYMS`).

    The JSON rows do not say whether a row is a host or device event; a row is taken
    to be a device (``CUDA``) row when it has no host time and its device time is all
    self time — true of kernels and GPU-side annotations, and of no operator that ran.

    Returns
    -------
    DataFrame
        ``name, device_type, input_shapes, stack`` (tuple), ``count``, ``host_total_ns``,
        ``host_self_ns``, ``device_total_ns``, ``device_self_ns`` (int ns), and where
        the rows have them ``cpu_memory_bytes``, ``self_cpu_memory_bytes``,
        ``device_memory_bytes``, ``self_device_memory_bytes`` (bytes) and ``flops``.

    Examples
    --------
    >>> from kitlib.analyses.grouping import key_averages_table
    >>> rows = [{"key": "aten::relu", "count": 1, "cpu_time_total_us": 0.3, "self_cpu_time_total_us": 0.3,
    ...          "device_time_total_us": 0.4, "self_device_time_total_us": 0.0},
    ...         {"key": "relu_kernel", "count": 1, "cpu_time_total_us": 0, "self_cpu_time_total_us": 0,
    ...          "device_time_total_us": 0.4, "self_device_time_total_us": 0.4}]
    >>> key_averages_table(rows)[["name", "device_type", "count", "host_total_ns", "device_total_ns"]]
              name device_type  count  host_total_ns  device_total_ns
    0   aten::relu         CPU      1            300              400
    1  relu_kernel        CUDA      1              0              400
    """
    df = pd.DataFrame(rows).rename(columns=_KA_SYNONYMS)
    out = pd.DataFrame({"name": df["key"], "input_shapes": df.get("input_shapes", "[]"),
                        "stack": [tuple(s) for s in df.get("stack", [[]] * len(df))], "count": df["count"]})
    conv = {"host_total_ns": "cpu_time_total_us", "host_self_ns": "self_cpu_time_total_us",
            "device_total_ns": "device_time_total_us", "device_self_ns": "self_device_time_total_us"}
    for new, old in conv.items():
        out[new] = np.rint(df[old].astype(float) * 1e3).astype(np.int64)
    for new, old in {"cpu_memory_bytes": "cpu_memory_usage_bytes",
                     "self_cpu_memory_bytes": "self_cpu_memory_usage_bytes",
                     "device_memory_bytes": "device_memory_usage_bytes",
                     "self_device_memory_bytes": "self_device_memory_usage_bytes", "flops": "flops"}.items():
        if old in df.columns:
            out[new] = df[old].fillna(0).astype(np.int64)
    if "device_type" in df.columns:      # written by the exporter: trust it
        kind = df["device_type"].astype(str).str.replace("DeviceType.", "", regex=False).str.upper()
    else:
        cuda = (out["host_total_ns"] == 0) & (out["host_self_ns"] == 0) \
            & (out["device_total_ns"] == out["device_self_ns"]) & (out["device_total_ns"] > 0)
        kind = np.where(cuda, "CUDA", "CPU")
    out.insert(1, "device_type", kind)
    return out


def compare_with_profiler(rebuilt: pd.DataFrame, profiler_rows: list, by: str = "name") -> pd.DataFrame:
    """The rebuilt table beside the profiler's own rows, key by key.

    Parameters
    ----------
    rebuilt : DataFrame
        From :func:`group_ops` with the same ``by``.
    profiler_rows : list of dict
        ``Capture.key_averages()[...]`` (``by_name``, ``by_input_shape`` or ``by_stack_5``).
    by : {"name", "input_shape", "stack"}

    Returns
    -------
    DataFrame
        One row per key found on either side: the key columns, then for ``count``,
        ``host_total_ns``, ``host_self_ns``, ``device_total_ns``, ``device_self_ns`` (and
        the memory and FLOP columns, where both sides have them) the
        rebuilt value (``…_kitlib``), the profiler's (``…_profiler``) and ``…_diff``
        (kitlib − profiler); ``only_in`` says ``kitlib``/``profiler`` for keys on one
        side only and ``both`` otherwise.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> from kitlib.analyses.grouping import compare_with_profiler, group_ops
    >>> rows = [{"key": "aten::relu", "count": 1, "cpu_time_total_us": 0.3, "self_cpu_time_total_us": 0.3,
    ...          "device_time_total_us": 0.4, "self_device_time_total_us": 0.0}]
    >>> c = compare_with_profiler(group_ops(tiny_trace()), rows)
    >>> c.columns.tolist()[:5]
    ['name', 'device_type', 'count_kitlib', 'host_total_ns_kitlib', 'host_self_ns_kitlib']
    >>> c[["name", "count_kitlib", "count_profiler", "host_total_ns_profiler"]]
                   name  count_kitlib  count_profiler  host_total_ns_profiler
    0     ProfilerStep*             1             NaN                     NaN
    1         aten::add             1             NaN                     NaN
    2        aten::relu             1             1.0                   300.0
    3  cudaLaunchKernel             1             NaN                     NaN
    4       relu_kernel             1             NaN                     NaN
    """
    ka = key_averages_table(profiler_rows)
    keys = ["name", "device_type"] + (["input_shapes"] if by == "input_shape" else [])
    if by == "stack":
        keys.append("stack")
    r = rebuilt.copy()
    if by == "stack":
        r["stack"] = [tuple(s) for s in r["stack"]]
    cols = ["count", "host_total_ns", "host_self_ns", "device_total_ns", "device_self_ns"]
    cols += [c for c in _EXTRA_COLUMNS if c in r.columns and c in ka.columns]
    m = r[keys + cols].merge(ka[keys + cols], on=keys, how="outer", suffixes=("_kitlib", "_profiler"),
                             indicator="only_in")
    m["only_in"] = m["only_in"].map({"left_only": "kitlib", "right_only": "profiler", "both": "both"}).astype(str)
    for c in cols:
        m[f"{c}_diff"] = m[f"{c}_kitlib"].fillna(0) - m[f"{c}_profiler"].fillna(0)
    return m


def _tensors_label(shapes: str) -> str:
    """Display key for an ``input_shapes`` string: its first two non-empty shapes joined
    by " × "; ``"[] (0-d scalar)"`` when every shape is empty (a 0-d tensor such as
    batch norm's ``num_batches_tracked``, plus scalar arguments)."""
    import ast
    if not shapes.startswith("["):
        return shapes
    dims = ast.literal_eval(shapes)
    shown = [d for d in dims if d][:2]
    if not shown:
        return "[] (0-d scalar)" if dims else "[]"
    return " × ".join(str(d) for d in shown)


def shape_table(trace: Trace, name: str, events: pd.DataFrame | None = None,
                chain_df: pd.DataFrame | None = None) -> pd.DataFrame:
    """One operator name split by input shapes: the lesson-04 table.

    Parameters
    ----------
    name : str
        An operator name, e.g. ``"aten::cudnn_convolution"``.

    Returns
    -------
    DataFrame
        One row per distinct ``input_shapes`` string of that operator, sorted by
        ``device_total_ns`` (descending): ``input_shapes``, ``first_input`` (the first
        tensor's shape, as a string), ``tensors`` (the first two non-empty shapes, e.g.
        ``"[128, 64, 56, 56] × [64, 64, 1, 1]"``; ``"[] (0-d scalar)"`` when all are empty), ``count``, ``device_total_ns``,
        ``device_per_call_ns`` (float), ``device_share`` (fraction of the name's device
        time), ``host_total_ns``. Empty when the name never ran.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> from kitlib.analyses.grouping import shape_table
    >>> shape_table(tiny_trace(), "aten::relu")[["input_shapes", "count", "device_total_ns"]]
      input_shapes  count  device_total_ns
    0           []      1              400
    """
    ev = op_events(trace, chain_df) if events is None else events
    ev = _with_memory_and_flops(trace, ev)
    t = group_ops(trace, by="input_shape", events=ev, include_gpu=False)
    t = t[(t["name"] == name) & (t["device_type"] == "CPU")].copy()
    # string columns even when the name never ran (an empty list would make a float column)
    t["first_input"] = pd.Series([s.split("]")[0] + "]" if s.startswith("[[") else s for s in t["input_shapes"]],
                                 index=t.index, dtype="str")
    t["first_input"] = t["first_input"].str.replace("[[", "[", regex=False)
    t["tensors"] = pd.Series([_tensors_label(s) for s in t["input_shapes"]], index=t.index, dtype="str")
    tot = t["device_total_ns"].sum()
    t["device_share"] = t["device_total_ns"] / tot if tot else 0.0
    cols = ["input_shapes", "first_input", "tensors", "count", "device_total_ns", "device_per_call_ns", "device_share",
            "host_total_ns"]
    return t.sort_values("device_total_ns", ascending=False, kind="stable")[cols].reset_index(drop=True)


#: The trace fields each attribution option adds (Kineto's Chrome trace writer).
SHAPE_ARGS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")


def attribution_bytes(doc) -> pd.DataFrame:
    """What shapes, stacks and memory events weigh in one trace: the same events
    written again with each option's share taken out.

    This is a matched comparison (same steps, same events) but an estimate of the
    file a run without the option would write: it removes the option's records and
    fields, not the run's other differences.

    Parameters
    ----------
    doc : dict or list
        The parsed trace JSON (e.g. ``kitlib.readers.files.read_json_file(capture.file("trace.json.gz"))``).

    Returns
    -------
    DataFrame
        Index: ``as recorded``, ``without Python frames (with_stack)``, ``without input
        shapes (record_shapes)``, ``without allocator events (profile_memory)``, ``without
        all three``; columns ``events``, ``json_bytes`` (compact JSON), ``gzip_bytes``
        (zlib level 6, as a .json.gz would be) and ``share_of_gzip`` (fraction of the
        recorded size).

    Raises
    ------
    TraceFormatError
        ``doc`` has no event list.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.analyses.grouping import attribution_bytes
    >>> attribution_bytes(tiny_profile_doc())[["events", "share_of_gzip"]].round(2)
                                               events  share_of_gzip
    as recorded                                    15           1.00
    without Python frames (with_stack)             12           0.86
    without input shapes (record_shapes)           15           0.83
    without allocator events (profile_memory)      12           0.84
    without all three                               9           0.53
    """
    import zlib
    try:
        import orjson
        dumps = orjson.dumps
    except ImportError:  # pragma: no cover
        import json
        dumps = lambda o: json.dumps(o, separators=(",", ":")).encode()  # noqa: E731
    from ..errors import TraceFormatError
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TraceFormatError("<trace JSON>", "no 'traceEvents' list to measure")

    def no_py(evs):
        return [e for e in evs if e.get("cat") != "python_function"]

    def no_shapes(evs):
        out = []
        for e in evs:
            a = e.get("args")
            if a and any(k in a for k in SHAPE_ARGS):
                e = dict(e, args={k: v for k, v in a.items() if k not in SHAPE_ARGS})
            out.append(e)
        return out

    def no_mem(evs):
        return [e for e in evs if not (e.get("ph") == "i" and e.get("name") == "[memory]")]

    variants = {"as recorded": events, "without Python frames (with_stack)": no_py(events),
                "without input shapes (record_shapes)": no_shapes(events),
                "without allocator events (profile_memory)": no_mem(events),
                "without all three": no_mem(no_shapes(no_py(events)))}
    rows = {}
    for k, evs in variants.items():     # one text at a time: five at once held ~80 MiB more
        text = dumps(dict(doc, traceEvents=evs) if isinstance(doc, dict) else evs)
        rows[k] = {"events": len(evs), "json_bytes": len(text), "gzip_bytes": len(zlib.compress(text, 6))}
    out = pd.DataFrame(rows).T
    out["share_of_gzip"] = out["gzip_bytes"] / out.loc["as recorded", "gzip_bytes"]
    return out


def capture_cost(captures: dict) -> pd.DataFrame:
    """Step time and trace size of several captures side by side (reads their files).

    Parameters
    ----------
    captures : dict
        ``{label: Capture}``, e.g. live captures made with the recipes ``light``,
        ``shapes``, ``stack``, ``full`` of :mod:`kitlib.capture.recipes`.

    Returns
    -------
    DataFrame
        One row per label: ``recipe`` options switched on, ``steps`` (active steps in the
        trace), ``median_step_ms`` (median wall time of the profiled active steps; NaN
        when the bundle has no step times), ``trace_gzip_bytes``, ``bytes_per_step``,
        ``events_per_step``.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> from kitlib.analyses.grouping import capture_cost
    >>> capture_cost({"full": open_capture("profiler_5step")})[["steps", "trace_gzip_bytes", "events_per_step"]]
         steps trace_gzip_bytes events_per_step
    full     5          1342993         14701.4
    """
    rows = {}
    for label, cap in captures.items():
        rec = cap.recipe
        opts = [o for o in ("record_shapes", "with_stack", "profile_memory", "with_flops") if rec.get(o)]
        tr = cap.trace
        n_steps = len(tr.steps)
        n = max(n_steps, 1)
        med = np.nan
        if cap.has("step_times.json"):
            st = cap.step_times()
            series = st.get("step_ms_profiled") or st.get("step_ms_profiled_all_attribution") or []
            active = active_steps(series, rec.get("schedule"))
            med = float(np.median(active)) if len(active) else np.nan
        size = cap.manifest["files"][cap.first_of("trace.json.gz", "trace.json")]["bytes"]
        rows[label] = {"options": ", ".join(opts) or "none", "steps": n_steps, "median_step_ms": med,
                       "trace_gzip_bytes": size, "bytes_per_step": size / n,
                       "events_per_step": tr.meta.get("n_events", 0) / n}
    return pd.DataFrame(rows).T


def memory_layout(shape, strides) -> str:
    """Name the layout a 4-d tensor's strides show.

    ``contiguous`` (NCHW: strides fall from N to W, W's stride 1), ``channels_last``
    (NHWC in memory: C's stride is 1, e.g. shape [128, 3, 224, 224] with strides
    [150528, 1, 672, 3]), ``other`` for anything else, ``n/a`` when not 4-d. Two
    tensors with the same shape can have different layouts: shapes alone do not say.

    Source: PyTorch tutorial "Channels Last Memory Format in PyTorch".

    Examples
    --------
    >>> from kitlib.analyses.grouping import memory_layout
    >>> memory_layout((2, 3, 4, 5), (60, 20, 5, 1)), memory_layout((2, 3, 4, 5), (60, 1, 15, 3))
    ('contiguous', 'channels_last')
    """
    if not shape or not strides or len(shape) != 4 or len(strides) != 4:
        return "n/a"
    n, c, h, w = shape
    if list(strides) == [c * h * w, h * w, w, 1]:
        return "contiguous"
    if list(strides) == [h * w * c, 1, w * c, c]:
        return "channels_last"
    return "other"


def conv_inputs(trace: Trace, op_row: int) -> pd.DataFrame:
    """The tensors a convolution operator received, read as a learner would.

    Parameters
    ----------
    op_row : int
        Row label in ``trace.ops`` of an ``aten::cudnn_convolution`` (or any operator
        whose first two inputs are an NCHW activation and an OIHW weight).

    Returns
    -------
    DataFrame
        Rows ``input`` and ``weight``: ``shape``, ``strides`` (from ``Input Strides``;
        None when not recorded), ``layout`` (:func:`memory_layout`), ``dtype`` and
        ``reading`` (e.g. "128 images × 3 channels × 224×224 pixels").

    Raises
    ------
    KeyError
        The operator has no recorded shapes (``record_shapes`` was off).

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
    >>> from kitlib.analyses.grouping import conv_inputs
    >>> tr = trace_from_json(tiny_profile_doc())
    >>> conv = int(tr.ops.index[tr.ops["name"] == "aten::conv2d"][0])
    >>> conv_inputs(tr, conv)[["shape", "layout", "reading"]]
                   shape      layout                             reading
    input   [1, 3, 8, 8]  contiguous  1 images × 3 channels × 8×8 pixels
    weight  [4, 3, 3, 3]  contiguous    4 filters, each 3 channels × 3×3
    """
    op = trace.ops.loc[op_row]
    dims = op["input_dims"]
    if not isinstance(dims, list) or len(dims) < 2:
        raise KeyError(f"operator {op['name']!r} (row {op_row}) has no recorded input shapes; "
                       "record the trace with record_shapes=True")
    strides = op["input_strides"] if isinstance(op["input_strides"], list) else [None, None]
    types = op["input_types"] if isinstance(op["input_types"], list) else [None, None]
    x, w = dims[0], dims[1]
    read_x = (f"{x[0]} images × {x[1]} channels × {x[2]}×{x[3]} pixels" if len(x) == 4 else str(x))
    read_w = (f"{w[0]} filters, each {w[1]} channels × {w[2]}×{w[3]}" if len(w) == 4 else str(w))
    return pd.DataFrame({
        "shape": [x, w], "strides": [strides[0], strides[1]],
        "layout": [memory_layout(x, strides[0]), memory_layout(w, strides[1])],
        "dtype": [types[0], types[1]], "reading": [read_x, read_w]}, index=["input", "weight"])
