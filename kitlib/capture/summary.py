"""A plain-text summary of a capture bundle (``python -m kitlib profile`` and ``summary PATH``):
what ran where, the steps and their times, the top operators and kernels, how to open the
trace."""
from __future__ import annotations

import re
import statistics
from pathlib import Path

from ..readers.bundle import Capture, open_capture
from ..errors import BundleError, KitError
from .workload import LABELS
from ..units import bytes_to_gib, bytes_to_mib, ns_to_ms, ns_to_us, us_to_ms

PERFETTO_URL = "https://ui.perfetto.dev"
LARGE_TRACES_DOC = "https://perfetto.dev/docs/visualization/large-traces"

_RUNTIME_RE = re.compile(r"^(cuda[A-Z]|cu[A-Z]|hip[A-Z])")


def _is_annotation(key: str) -> bool:
    """A ``record_function`` label, not an operator: the phase labels, ``ProfilerStep*``, and
    torch's ``Name#Detail`` labels."""
    return key in LABELS or key.startswith("ProfilerStep") or "#" in key


def _operators(rows) -> list:
    """The key_averages rows with host time that are neither labels nor CUDA runtime calls."""
    return [r for r in rows or [] if (r.get("cpu_time_total_us") or 0) > 0
            and not _is_annotation(r["key"]) and not _RUNTIME_RE.match(r["key"])]


def _ms(us) -> str:
    return f"{us_to_ms(us):,.3f}"


def _short(name: str, width: int) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _table(header: list, rows: list, first_width: int) -> list:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(header)]
    widths[0] = min(max(widths[0], 10), first_width)

    def fmt(cells):
        out = [f"{_short(str(cells[0]), widths[0]):<{widths[0]}}"]
        out += [f"{str(c):>{w}}" for c, w in zip(cells[1:], widths[1:])]
        return "    " + "  ".join(out)
    return [fmt(header)] + [fmt(r) for r in rows]


def top_from_key_averages(ka: dict, top: int = 10) -> dict:
    """Top operators and kernels from a bundle's ``key_averages.json`` (``by_name`` rows, µs).

    Returns ``on_gpu``; ``operators`` (rows with host time, neither annotations nor CUDA
    runtime calls, by self device time on a GPU, else self host time); ``kernels``
    (device-only rows whose name has no host row: a label's GPU-side projection has one; by
    device time); ``operator_total_us``, ``kernel_total_us`` (sums over all such rows) and
    ``flops``."""
    rows = ka.get("by_name") or []
    on_gpu = any((r.get("self_device_time_total_us") or 0) > 0 for r in rows)
    host_keys = {r["key"] for r in rows if (r.get("cpu_time_total_us") or 0) > 0}
    ops = _operators(rows)
    sort_key = "self_device_time_total_us" if on_gpu else "self_cpu_time_total_us"
    ops.sort(key=lambda r: r.get(sort_key) or 0, reverse=True)
    kernels = [r for r in rows if on_gpu and (r.get("cpu_time_total_us") or 0) == 0
               and (r.get("device_time_total_us") or 0) > 0 and r["key"] not in host_keys]
    kernels.sort(key=lambda r: r.get("device_time_total_us") or 0, reverse=True)
    return {"on_gpu": on_gpu, "operators": ops[:top], "kernels": kernels[:top],
            "operator_total_us": sum(r.get(sort_key) or 0 for r in ops),
            "kernel_total_us": sum(r.get("device_time_total_us") or 0 for r in kernels),
            "flops": sum(int(r.get("flops") or 0) for r in rows)}


def top_from_trace(trace, top: int = 10) -> dict:
    """Top operators (self host time, as the profiler's ``self_cpu_time_total`` defines it:
    :func:`kitlib.analyses.four_measures.self_total`) and kernels (device time) of a
    :class:`~kitlib.readers.trace.Trace`: ``operators`` as ``(name, calls, self µs, total
    µs)``, ``kernels`` as ``(name, calls, device µs)``, ``operator_total_us``,
    ``kernel_total_us``."""
    from ..analyses.four_measures import self_total
    g = self_total(trace, kinds=("op",)).set_index("name").sort_values("self_ns", ascending=False)
    operators = [(n, int(r.calls), ns_to_us(r.self_ns), ns_to_us(r.total_ns)) for n, r in g.head(top).iterrows()]
    k = trace.kernels
    kernels, ktotal = [], 0.0
    if len(k):
        kg = k.groupby("name").agg(calls=("dur_ns", "size"), dev_ns=("dur_ns", "sum")) \
              .sort_values("dev_ns", ascending=False)
        kernels = [(n, int(r.calls), ns_to_us(r.dev_ns)) for n, r in kg.head(top).iterrows()]
        ktotal = ns_to_us(float(kg["dev_ns"].sum()))
    return {"operators": operators, "kernels": kernels,
            "operator_total_us": ns_to_us(float(g["self_ns"].sum())), "kernel_total_us": ktotal}


def _series_line(name: str, values: list, actions: list | None) -> list:
    vals = [float(v) for v in values]
    if not vals:
        return [f"    {name}: (none)"]
    out = [f"    {name}: n={len(vals)}, median {statistics.median(vals):,.2f}, "
           f"min {min(vals):,.2f}, max {max(vals):,.2f}"]
    if actions and len(actions) == len(vals):
        act = [v for v, a in zip(vals, actions) if a == "active"]
        if act and len(act) < len(vals):
            out[0] += (f"; active steps only: median {statistics.median(act):,.2f}")
        if len(vals) <= 12:
            out.append("      " + ", ".join(f"{v:,.1f} ({a})" for v, a in zip(vals, actions)))
    elif len(vals) <= 12:
        out.append("      " + ", ".join(f"{v:,.1f}" for v in vals))
    return out


def summarize(capture, top: int = 10) -> str:
    """A plain-text summary of a capture: an opened bundle, a bundle folder, a reference name, or
    a trace file on its own (:func:`summarize_trace`).

    Lines: the capture, device and software; workload and recipe; the steps and their times
    (ms); top operators by self device time (self host time without GPU events) and kernels by
    device time, from ``key_averages.json`` when present, else the trace tables; FLOPs when
    recorded; what :func:`kitlib.lint` finds; how to open the trace in Perfetto
    (perfetto.dev, "Visualising large traces").

    Raises :class:`BundleError` (not a bundle, or a file that does not match its sha256) or
    :class:`KitError` (``top`` < 1)."""
    _check_top(top)
    if not isinstance(capture, Capture):
        p = Path(capture)
        if p.is_file() and p.name != "manifest.json":     # a trace file on its own, not a bundle
            with open(p, "rb") as f:
                head = f.read(64).lstrip()
            if not head.startswith((b"\x1f\x8b", b"{", b"[")):     # neither gzip nor JSON
                raise BundleError(p, "not a capture bundle (a folder with manifest.json) nor a "
                                     "torch.profiler trace (a .json or .json.gz file)")
            return summarize_trace(p, top)
    cap = capture if isinstance(capture, Capture) else open_capture(capture)
    m = cap.manifest
    L = [cap.describe()]
    w = cap.workload
    if w:
        size = w.get("image_size")
        if size is None:
            mt = re.search(r"RandomResizedCrop\((\d+)\)", str(w.get("transform", "")))
            size = mt.group(1) if mt else "?"
        L.append("  workload: " + ", ".join(str(x) for x in [
            "ResNet-50" if "resnet50" in str(w.get("model", "resnet50")) else w.get("model"),
            f"batch {w.get('batch_size', '?')}", f"{size} px",
            f"{w.get('num_workers', '?')} loader worker{'' if w.get('num_workers') == 1 else 's'}",
            f"on {w['device_resolved']}" if w.get("device_resolved") else None] if x))
        if w.get("dataset"):
            L.append(f"  data:     {w['dataset']}")
        if w.get("data_load_covers"):
            L.append(f"  labels:   {', '.join(w.get('labels', LABELS))}; data_load covers "
                     f"{w['data_load_covers']}")
    r = cap.recipe
    if r:
        flags = [f for f in ("record_shapes", "profile_memory", "with_stack", "with_flops") if r.get(f)]
        sched = r.get("schedule")
        txt = f"  recipe:   {r['name']} — " if r.get("name") else "  recipe:   "
        if sched:
            txt += "schedule " + ", ".join(f"{k}={v}" for k, v in sched.items())
        elif r.get("kind") == "timing":
            txt += f"no profiler; {r.get('pre_steps', 0)} warm-up steps, then timed steps"
        elif cap.kind == "memory_snapshot":
            txt += (f"torch.cuda.memory._record_memory_history(max_entries={r.get('max_entries', '?')}) "
                    f"over {r.get('steps', '?')} steps after {r.get('pre_steps', '?')} warm-up steps")
            if m.get("max_memory_allocated") is not None:
                txt += (f"\n  peak:     {bytes_to_gib(m['max_memory_allocated']):,.2f} GiB allocated, "
                        f"{bytes_to_gib(m.get('max_memory_reserved', 0)):,.2f} GiB reserved "
                        f"(torch.cuda.max_memory_allocated / max_memory_reserved)")
        elif r.get("command"):
            txt += f"`{r['command']}`"
        elif cap.kind == "torch_profiler":
            txt += "no schedule (every step recorded)"
        if r.get("kind", cap.kind) == "torch_profiler" or sched:
            txt += "; " + (", ".join(flags) if flags else "no attribution options")
        L.append(txt)

    steps = m.get("steps") or {}
    ka = None
    if cap.has("key_averages.json") or cap.has("key_averages.json.gz"):
        ka = cap.key_averages()
    n_active = steps.get("active") or (ka or {}).get("steps") or (r.get("schedule") or {}).get("active")
    if cap.kind == "torch_profiler" and "schedule" in r and r["schedule"] is None:
        label = r.get("step_label", "torch_step#")
        label = label if label.endswith("N") else label + "N"
        if not steps.get("active") and cap.has("wallclock.json"):
            n_active = len(cap.read_json("wallclock.json").get("steps") or []) or None
        L += ["", f"steps recorded: {n_active or '?'} (no schedule: every step from the start "
                  f"of the recording, each in {label})"]
    elif cap.kind == "torch_profiler":
        line = f"steps recorded: {n_active if n_active is not None else '?'} active"
        if steps.get("profiled"):
            line += (f" of {steps['profiled']} under the profiler (schedule: "
                     f"{', '.join(steps.get('schedule_actions', []))})")
        if steps.get("pre_steps"):
            n = steps["pre_steps"]
            line += f"; {n} warm-up step{'s' if n != 1 else ''} before"
        L += ["", line]
    if cap.has("step_times.json"):
        st = cap.step_times()
        on_cpu = str((w or {}).get("device_resolved", "")).startswith("cpu")
        L += ["", "step times (ms, wall clock: perf_counter_ns around the step"
                  + ("; on the CPU each step has finished when it returns, nothing to synchronize):"
                     if on_cpu else " + cuda.synchronize):")]
        for name, vals in st.items():
            if isinstance(vals, list):
                acts = steps.get("schedule_actions") if name == "step_ms_profiled" else None
                L += _series_line(name, vals, acts)

    if cap.has("wallclock.json"):
        wc = cap.read_json("wallclock.json")
        marks = wc.get("steps") or []
        nxt = [ns_to_ms(m["next_end_ns"] - m["next_start_ns"]) for m in marks
               if "next_end_ns" in m and "next_start_ns" in m]
        if nxt:
            L += ["", "wall clock (perf_counter_ns, independent of the profiler): next(batches) per step, ms:",
                  "    " + ", ".join(f"{v:,.1f}" for v in nxt[:12]) + (" …" if len(nxt) > 12 else "")]

    per = f"over {n_active} recorded steps" if n_active else "over the recorded steps"
    if ka is not None:
        t = top_from_key_averages(ka, top)
        src = "the profiler's own key_averages() rows"
        if t["on_gpu"]:
            L += ["", f"top operators by self device time ({per}; from {src}):"]
            rows = [(o["key"], o["count"], _ms(o["self_device_time_total_us"]),
                     f"{100 * o['self_device_time_total_us'] / (t['operator_total_us'] or 1):.1f}",
                     _ms(o["device_time_total_us"]), _ms(o["self_cpu_time_total_us"]))
                    for o in t["operators"]]
            L += _table(["operator", "calls", "self device ms", "%", "device total ms", "self host ms"],
                        rows, 48)
            L += ["", f"top kernels by device time ({per}):"]
            rows = [(k["key"], k["count"], _ms(k["device_time_total_us"]),
                     f"{100 * k['device_time_total_us'] / (t['kernel_total_us'] or 1):.1f}",
                     f"{k['device_time_total_us'] / max(k['count'], 1):,.1f}")
                    for k in t["kernels"]]
            L += _table(["kernel", "calls", "device ms", "%", "avg us"], rows, 72)
        else:
            L += ["", f"top operators by self host (CPU) time ({per}; from {src}; "
                      f"no GPU events in this capture, so no kernels):"]
            rows = [(o["key"], o["count"], _ms(o["self_cpu_time_total_us"]),
                     f"{100 * o['self_cpu_time_total_us'] / (t['operator_total_us'] or 1):.1f}",
                     _ms(o["cpu_time_total_us"]))
                    for o in t["operators"]]
            L += _table(["operator", "calls", "self host ms", "%", "host total ms"], rows, 48)
        L += _recorded_tables(ka, r or {}, t["on_gpu"], per, top)
        if t["flops"]:
            per_step = f" = {t['flops'] / n_active / 1e9:,.1f} GFLOP per step" if n_active else ""
            L += ["", f"FLOPs, the profiler's with_flops estimate: {t['flops'] / 1e9:,.1f} GFLOP {per}"
                      f"{per_step}",
                  "  (it counts only the operators it has a formula for — aten::conv2d, mm, addmm, bmm, "
                  "baddbmm, mul, add — so the backward pass is missing; torch/csrc/profiler/util.cpp)"]
    elif cap.has("trace.json.gz") or cap.has("trace.json"):
        trace = cap.trace
        t = top_from_trace(trace, top)
        src = "the trace tables (kitlib.readers.trace)"
        names = trace.steps["name"].tolist() if len(trace.steps) else []
        if names:
            L += ["", f"profiler steps in the trace: {len(names)} ({names[0]} … {names[-1]})"]
        L += _trace_top_lines(t, per, src)

    # what could mislead a reader of this recording (kitlib.lint)
    if cap.has("trace.json.gz") or cap.has("trace.json"):
        from ..analyses.lint import lint
        L += _lint_lines(lint(cap))

    traces = [f for f in cap.files if f.startswith("trace") and (f.endswith(".json.gz") or f.endswith(".json"))]
    if traces:
        L += [""]
        for f in traces:
            p = cap.path / f
            size = p.stat().st_size if p.exists() else 0
            L.append(f"trace: {p} ({size / 1e6:,.1f} MB on disk)")
        L += [f"  open it in Perfetto: {PERFETTO_URL} → \"Open trace file\" → choose the file "
              f"(.json.gz is read as is).",
              "  Perfetto runs inside the browser, whose memory is limited (about 2 GB is typical, "
              "and a trace takes several times its size once loaded);",
              f"  for a big trace run `trace_processor --httpd {cap.path / traces[0]}` and let the page use it "
              f"({LARGE_TRACES_DOC})."]
    if cap.has("memory_snapshot.pickle"):
        L += ["", f"memory snapshot: {cap.path / 'memory_snapshot.pickle'} — drag it onto "
                  f"https://pytorch.org/memory_viz"]
    if cap.kind not in ("torch_profiler", "timing", "memory_snapshot") and not traces:
        L += ["", f"files: {', '.join(cap.files)} (a {cap.kind} capture; see the lessons for how "
                  f"kitlib reads it)"]
    return "\n".join(L)


def _trace_top_lines(t: dict, per: str, src: str) -> list:
    L = ["", f"top operators by self host time ({per}; from {src}):"]
    rows = [(n, c, _ms(sf), f"{100 * sf / (t['operator_total_us'] or 1):.1f}", _ms(tot))
            for n, c, sf, tot in t["operators"]]
    L += _table(["operator", "calls", "self host ms", "%", "host total ms"], rows, 48)
    if t["kernels"]:
        L += ["", f"top kernels by device time ({per}; from {src}):"]
        rows = [(n, c, _ms(d), f"{100 * d / (t['kernel_total_us'] or 1):.1f}", f"{d / max(c, 1):,.1f}")
                for n, c, d in t["kernels"]]
        L += _table(["kernel", "calls", "device ms", "%", "avg us"], rows, 72)
    return L


def _lint_lines(findings: list) -> list:
    if not findings:
        return []
    L = ["", "before you read the numbers (kitlib.lint):"]
    for f in findings:
        L += [f"  [{f.severity}] {f.code}: {f.meaning}", f"      what to do: {f.action}"]
    return L


def summarize_trace(path, top: int = 10) -> str:
    """A plain-text summary of a torch.profiler trace without a bundle: format, GPUs, profiler
    options, steps, top operators and kernels, and :func:`kitlib.lint`'s findings, all read
    from the trace. Raises as :func:`kitlib.readers.trace.load_trace`."""
    from ..analyses.lint import lint
    from ..readers.trace import load_trace
    _check_top(top)
    path = Path(path)
    trace = load_trace(path)
    meta = trace.meta
    gpus = [d.get("name", "?") for d in meta.get("devices") or [] if isinstance(d, dict)]
    opts = [k for k, v in (meta.get("profiler_options") or {}).items() if v]
    L = [f"{path.name} (a torch.profiler trace without a bundle: no manifest, so no workload or recipe)",
         f"  format:   {meta.get('format')}, schema {meta.get('versions', {}).get('schemaVersion', '?')}, "
         f"{meta.get('n_events', 0):,} events, {meta.get('json_bytes', 0) / 1e6:,.1f} MB of JSON",
         f"  device:   {', '.join(gpus) if gpus else 'no GPU listed (deviceProperties is empty or absent)'}",
         f"  recorded: {', '.join(opts) if opts else 'no attribution options listed'}",
         f"  tables:   {len(trace.ops):,} CPU events, {len(trace.launches):,} CUDA API calls, "
         f"{len(trace.kernels):,} GPU events, {len(trace.memory):,} memory records"]
    st = trace.steps
    if len(st):
        L += ["", f"steps in the trace: {len(st)} ({st['name'].iloc[0]} … {st['name'].iloc[-1]}); "
                  "wall time per step (ms, host): "
                  + ", ".join(f"{v:,.1f}" for v in ns_to_ms(st["dur_ns"]).tolist()[:12])]
    else:
        L += ["", "steps in the trace: none found (no ProfilerStep#N or torch_step#N)"]
    t = top_from_trace(trace, top)
    per = f"over {len(st)} recorded steps" if len(st) else "over the whole trace"
    L += _trace_top_lines(t, per, "the trace tables")
    L += _lint_lines(lint(trace))
    L += ["", f"open it in Perfetto: {PERFETTO_URL} → \"Open trace file\" → choose {path}"]
    return "\n".join(L)


def _frame(stack: list) -> str:
    """The innermost ``.py`` frame of a key_averages stack, else the innermost one."""
    return next((str(f) for f in stack if ".py(" in str(f)), str(stack[0]))


def _recorded_tables(ka: dict, recipe: dict, on_gpu: bool, per: str, top: int) -> list:
    """The tables of what the recipe recorded beyond names: memory (``profile_memory``),
    operators by input shape (``record_shapes``) and by call stack (``with_stack``)."""
    L = []
    where = "device" if on_gpu else "cpu"
    time_col, unit = f"self_{where}_time_total_us", ("self device ms" if on_gpu else "self host ms")
    ops = _operators(ka.get("by_name"))
    if recipe.get("profile_memory"):
        col = f"self_{where}_memory_usage_bytes"
        mem = sorted((o for o in ops if o.get(col)), key=lambda o: abs(o[col]), reverse=True)
        L += ["", f"memory ({'GPU' if on_gpu else 'CPU'}, profile_memory; {per}): operators by "
                  "the memory they allocated themselves, net of what they freed (from "
                  "key_averages() rows, MiB; negative = freed more than allocated):"]
        if mem:
            L += _table(["operator", "calls", "self MiB", "total MiB"],
                        [(o["key"], o["count"], f"{bytes_to_mib(o[col]):,.2f}",
                          f"{bytes_to_mib(o.get(f'{where}_memory_usage_bytes') or 0):,.2f}")
                         for o in mem[:top]], 48)
        else:
            L.append("    (no operator allocated memory in the recorded steps)")
    shaped = [o for o in _operators(ka.get("by_input_shape")) if o.get("input_shapes") not in (None, "", "[]")]
    if recipe.get("record_shapes") or shaped:
        shaped.sort(key=lambda o: o.get(time_col) or 0, reverse=True)
        L += ["", f"top operators by input shape (record_shapes; {per}; "
                  "key_averages(group_by_input_shape=True)):"]
        L += _table(["operator", "input shapes", "calls", unit],
                    [(o["key"], _short(o["input_shapes"], 60), o["count"], _ms(o.get(time_col) or 0))
                     for o in shaped[:top]], 32) if shaped else \
            ["    (no rows: this capture's key_averages.json has no by_input_shape table)"]
    stacked = [o for o in (ka.get("by_stack_5") or []) if o.get("stack")
               and (o.get("cpu_time_total_us") or 0) > 0 and not _is_annotation(o["key"])]
    if recipe.get("with_stack") or stacked:
        stacked.sort(key=lambda o: o.get(time_col) or 0, reverse=True)
        L += ["", f"top operators by Python call stack (with_stack; {per}; "
                  "key_averages(group_by_stack_n=5), innermost frame in a .py file shown):"]
        L += _table(["operator", "called from", "calls", unit],
                    [(o["key"], _short(_frame(o["stack"]), 60), o["count"], _ms(o.get(time_col) or 0))
                     for o in stacked[:top]], 32) if stacked else \
            ["    (no rows with a stack: torch records stacks in key_averages only with "
             "_ExperimentalConfig(verbose=True); the trace holds them, see lesson 05)"]
    return L


def _check_top(top) -> int:
    if not isinstance(top, int) or top < 1:
        raise KitError(f"top must be a positive integer, not {top!r}")
    return top


__all__ = ["summarize", "top_from_key_averages", "top_from_trace", "PERFETTO_URL"]
