"""The profiler's ``key_averages`` table, rebuilt from the trace's own events.

Events grouped by key (name, host or device, maybe input shapes or Python frames), times
summed; device time belongs to the operator whose external id the launch carries.
Times are int ns; host and device times are different clocks' work: never add them.
``chain_df`` (:func:`kitlib.analyses.chain.chain`) and ``events`` (:func:`kitlib.analyses.events.op_events`)
may be reused.

Sources: docs/SOURCES.md#grouping-key-averages
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
    """``ev`` (op_events rows) with the profiler's memory columns and ``flops`` where it can."""
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
    """One ``[memory]`` event per allocator record inside no event, as the profiler makes them."""
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

    ``events`` has the ``keys`` columns, ``host_total_ns, host_self_ns, device_total_ns,
    device_self_ns`` and the ``extra`` columns to sum. Returns the keys, ``count``, the sums
    (int64) and ``host_per_call_ns``, ``device_per_call_ns`` (float ns), sorted by
    ``device_self_ns`` then ``host_self_ns``, largest first (ties in order of appearance).

    Examples
    --------
    >>> import pandas as pd
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

    ``by``: ``"name"`` (``key_averages()``), ``"input_shape"`` (``group_by_input_shape=True``)
    or ``"stack"`` (``group_by_stack_n=stack_n``, from the trace's Python frames; needs
    ``with_stack``). ``include_gpu`` lists the device rows too. ``include_python_functions``
    lists the Python frames' rows; by default as the recording's torch did
    (``trace.meta["python_frames_are_rows"]``). Whether frames are children is the trace's
    rule, repeated in ``.attrs["python_frames_rule"]``. Large traces show a progress bar
    unless ``KITLIB_PROGRESS=0``.

    Returns, by ``device_self_ns`` then ``host_self_ns`` (descending): ``name``, ``device_type``,
    ``input_shapes`` or ``stack`` (innermost first), ``count``, ``host_total_ns``,
    ``host_self_ns``, ``device_total_ns``, ``device_self_ns`` ("CPU total", "Self CPU", "CUDA
    total", "Self CUDA"), ``host_per_call_ns``,
    ``device_per_call_ns`` (ns); with memory instants ``*_memory_bytes``; with shapes ``flops``.

    Raises ValueError for an unknown ``by``, ``by="stack"`` without Python frames, or
    ``include_python_functions=True`` where the profiler kept frames out of its events.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> group_ops(tiny_trace())[["name", "device_type", "count", "host_total_ns", "host_self_ns"]]
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


#: ``FunctionEventAvg`` attribute names -> the kit's unit-suffixed names of the same fields.
_KA_SYNONYMS = {"cpu_time_total": "cpu_time_total_us", "self_cpu_time_total": "self_cpu_time_total_us",
                "device_time_total": "device_time_total_us", "self_device_time_total": "self_device_time_total_us",
                "cpu_memory_usage": "cpu_memory_usage_bytes", "self_cpu_memory_usage": "self_cpu_memory_usage_bytes",
                "device_memory_usage": "device_memory_usage_bytes",
                "self_device_memory_usage": "self_device_memory_usage_bytes"}


def key_averages_table(rows: list) -> pd.DataFrame:
    """The profiler's own rows (``Capture.key_averages()["by_name"]`` etc., fields named as
    the bundles or as ``FunctionEventAvg`` name them) in :func:`group_ops`' columns, µs
    converted to ns (rounded). A row without host time whose device time is all self is
    a ``CUDA`` row unless the rows say ``device_type``.

    Examples
    --------
    >>> rows = [{"key": "relu_kernel", "count": 1, "cpu_time_total_us": 0, "self_cpu_time_total_us": 0,
    ...          "device_time_total_us": 0.4, "self_device_time_total_us": 0.4}]
    >>> key_averages_table(rows)[["name", "device_type", "count", "device_total_ns"]]
              name device_type  count  device_total_ns
    0  relu_kernel        CUDA      1              400
    """
    df = pd.DataFrame(rows).rename(columns=_KA_SYNONYMS)
    out = pd.DataFrame({"name": df["key"], "input_shapes": df.get("input_shapes", "[]"),
                        "stack": [tuple(s) for s in df.get("stack", [[]] * len(df))], "count": df["count"]})
    conv = {"host_total_ns": "cpu_time_total_us", "host_self_ns": "self_cpu_time_total_us",
            "device_total_ns": "device_time_total_us", "device_self_ns": "self_device_time_total_us"}
    for new, old in conv.items():
        out[new] = np.rint(df[old].astype(float) * 1e3).astype(np.int64)
    for new in _EXTRA_COLUMNS:          # cpu_memory_bytes <- cpu_memory_usage_bytes, ..., flops
        old = new.replace("_bytes", "_usage_bytes")
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
    """The :func:`group_ops` table (same ``by``) beside the profiler's ``profiler_rows``, key by key.

    Returns one row per key on either side: the keys; ``…_kitlib``, ``…_profiler``, ``…_diff``
    (kitlib − profiler) of ``count``, the times (ns) and shared memory/FLOP columns; ``only_in``.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
    >>> rows = [{"key": "aten::relu", "count": 1, "cpu_time_total_us": 0.3, "self_cpu_time_total_us": 0.3,
    ...          "device_time_total_us": 0.4, "self_device_time_total_us": 0.0}]
    >>> compare_with_profiler(group_ops(tiny_trace()), rows)[["name", "count_profiler", "only_in"]].head(3)
                name  count_profiler only_in
    0  ProfilerStep*             NaN  kitlib
    1      aten::add             NaN  kitlib
    2     aten::relu             1.0    both
    """
    ka = key_averages_table(profiler_rows)
    keys = ["name", "device_type"] + (["input_shapes"] if by == "input_shape" else [])
    r = rebuilt.copy()
    if by == "stack":
        keys.append("stack")
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
    """An ``input_shapes`` string's first two non-empty shapes joined by " × "."""
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
    """One operator ``name`` split by input shapes: the lesson-04 table.

    Returns, by ``device_total_ns`` descending: ``input_shapes``, ``first_input``,
    ``tensors`` (first two non-empty shapes), ``count``, ``device_total_ns``,
    ``device_per_call_ns``, ``device_share`` (of the name's device time),
    ``host_total_ns``. Empty when the name never ran.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_trace
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
    """What shapes, stacks and memory events weigh in one parsed trace ``doc``: the same
    events written again with each option's share taken out (an estimate of a run without
    the option).

    Returns, index ``as recorded``, ``without Python frames (with_stack)``, ``without input
    shapes (record_shapes)``, ``without allocator events (profile_memory)``, ``without all
    three``: ``events``, ``json_bytes``, ``gzip_bytes`` (zlib level 6), ``share_of_gzip``.

    Raises TraceFormatError when ``doc`` has no event list.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
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
    """Step time and trace size of ``{label: Capture}`` side by side (reads their files).

    Returns one row per label: ``options`` switched on, ``steps``, ``median_step_ms``
    (active profiled steps; NaN without step times), ``trace_gzip_bytes``,
    ``bytes_per_step``, ``events_per_step``.

    Examples
    --------
    >>> from kitlib.readers.bundle import open_capture
    >>> capture_cost({"full": open_capture("profiler_5step")})[["trace_gzip_bytes", "events_per_step"]]
         trace_gzip_bytes events_per_step
    full          1342993         14701.4
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
    """Name the layout a 4-d tensor's strides show: ``contiguous`` (NCHW), ``channels_last``
    (C's stride 1), ``other``, or ``n/a`` when not 4-d. Shapes alone do not say.

    Examples
    --------
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
    """The tensors a convolution operator (row label ``op_row`` of ``trace.ops``; first two
    inputs NCHW activation and OIHW weight) received, read as a learner would.

    Returns rows ``input`` and ``weight``: ``shape``, ``strides`` (None when not recorded),
    ``layout`` (:func:`memory_layout`), ``dtype``, ``reading``.

    Raises KeyError when the operator has no recorded shapes.

    Examples
    --------
    >>> from kitlib.model.examples import tiny_profile_doc
    >>> from kitlib.readers.trace import trace_from_json
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
