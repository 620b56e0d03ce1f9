"""Run the workload under a :class:`Recipe` and write a capture bundle
(:mod:`kitlib.readers.bundle`) that :func:`kitlib.open_capture` opens like the recorded ones:

``trace.json.gz``
    ``prof.export_chrome_trace`` (one per cycle).
``key_averages.json``
    The profiler's ``key_averages()`` rows (:func:`key_average_rows`): ``torch``, ``steps``,
    ``batch_size``, ``by_name``, ``by_input_shape`` (record_shapes), ``by_stack_5``
    (with_stack); times in µs, memory in bytes.
``step_times.json``
    ``step_ms_profiled``, ``step_ms_uninstrumented`` (ms) and ``process``
    (:func:`kitlib.capture.workload.time_steps`).

Sources: PyTorch docs, "torch.profiler" and "Understanding CUDA Memory Usage";
``data/reference/how_captured/capture.py``."""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import json
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..readers.bundle import Capture, open_capture, software_provenance, write_bundle
from ..errors import BundleError, KitError
from ..paths import checkout_folder
from .workload import (Workload, WorkloadConfig, build_workload, find_food101, resolve_device,
                       time_steps)
from ..units import ns_to_ms


@dataclass(frozen=True)
class Recipe:
    """What a capture records.

    ``name`` (a key of :data:`RECIPES`); ``kind``: ``"torch_profiler"`` or ``"timing"``
    (uninstrumented step times only); ``wait``, ``warmup``, ``active``, ``repeat``:
    ``torch.profiler.schedule``'s (for ``timing``, ``active`` is the steps timed);
    ``record_shapes``, ``profile_memory``, ``with_stack``, ``with_flops``: the profiler's
    attribution options; ``use_schedule=False``: every one of ``active`` steps recorded from the
    start, each in a ``step_label``-N range (wait and warmup 0; the cold start); ``wallclock``:
    also ``wallclock.json``; ``verbose_stack``: with ``with_stack`` pass
    ``_ExperimentalConfig(verbose=True)``, without which ``key_averages(group_by_stack_n=N)``
    rows carry no stack (pytorch/pytorch#100253); ``pre_steps``: unprofiled warm-up steps;
    ``timing_steps``: uninstrumented timed steps before the profiler; ``description``.
    Raises :class:`KitError` for a bad kind or count."""

    name: str
    kind: str = "torch_profiler"
    wait: int = 1
    warmup: int = 1
    active: int = 5
    repeat: int = 1
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    use_schedule: bool = True
    step_label: str = "torch_step#"
    wallclock: bool = False
    verbose_stack: bool = True
    pre_steps: int = 0
    timing_steps: int = 0
    description: str = ""

    def __post_init__(self):
        if self.kind not in ("torch_profiler", "timing"):
            raise KitError(f"recipe {self.name!r}: kind must be 'torch_profiler' or 'timing', "
                           f"not {self.kind!r}")
        for f in ("wait", "warmup", "pre_steps", "timing_steps", "active", "repeat"):
            v, least = getattr(self, f), int(f in ("active", "repeat"))
            if not isinstance(v, int) or v < least:
                raise KitError(f"recipe {self.name!r}: {f} must be an integer >= {least}, not {v!r}")
        if not self.use_schedule and (self.wait or self.warmup or self.repeat != 1):
            raise KitError(f"recipe {self.name!r}: without a schedule (use_schedule=False) wait and "
                           f"warmup must be 0 and repeat 1; every step is recorded")

    @property
    def profiled_steps(self) -> int:
        """Steps run under the profiler: ``(wait + warmup + active) * repeat`` (0 for timing)."""
        return (self.wait + self.warmup + self.active) * self.repeat if self.kind == "torch_profiler" else 0

    def schedule_actions(self) -> list:
        """``"wait"``, ``"warmup"`` or ``"active"`` for each ``prof.step()`` in turn."""
        one = ["wait"] * self.wait + ["warmup"] * self.warmup + ["active"] * self.active
        return one * self.repeat if self.kind == "torch_profiler" else []

    def replace(self, **changes) -> "Recipe":
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """The recipe for a manifest, with ``schedule`` (``None`` without one)."""
        d = dataclasses.asdict(self)
        if self.kind == "torch_profiler":
            d["schedule"] = ({"wait": self.wait, "warmup": self.warmup, "active": self.active,
                              "repeat": self.repeat} if self.use_schedule else None)
        return d


#: The named recipes (``full`` is the reference ``profiler_5step``'s); N: :data:`RECIPE_STEPS_NOTE`.
RECIPES: dict = {r.name: r for r in [
    Recipe("light", description="schedule wait=1 warmup=1 active=N, no attribution: the least "
                                "overhead torch.profiler can have"),
    Recipe("full", record_shapes=True, profile_memory=True, with_stack=True, with_flops=True,
           description="schedule wait=1 warmup=1 active=N with shapes, memory, stacks and FLOPs "
                       "(the reference profiler_5step recipe, N=5)"),
    Recipe("shapes", record_shapes=True,
           description="wait=1 warmup=1 active=N with record_shapes (operators by input shape)"),
    Recipe("stack", with_stack=True,
           description="wait=1 warmup=1 active=N with with_stack (operators by Python call stack)"),
    Recipe("memory", profile_memory=True,
           description="wait=1 warmup=1 active=N with profile_memory (allocator events)"),
    Recipe("flops", with_flops=True,
           description="wait=1 warmup=1 active=N with with_flops (FLOP estimates for conv/matmul)"),
    Recipe("cold_start", wait=0, warmup=0, active=8, use_schedule=False, wallclock=True,
           description="no schedule: steps 0 to N-1 from a freshly started DataLoader, step i "
                       "in torch_step#i, with wall-clock stamps around every next() (the reference "
                       "cold_start_8step recipe, N=8)"),
    Recipe("timing", kind="timing", wait=0, warmup=0, active=10, pre_steps=3,
           description="no profiler: wall-clock times of N steps after 3 warm-up steps "
                       "(perf_counter_ns, + cuda.synchronize on a GPU; the reference, N=10)"),
]}

RECIPE_STEPS_NOTE = ("N = --steps: by default 5 on a GPU (cold_start 8, timing 10) and 3 on "
                     "the CPU")


def get_recipe(recipe) -> Recipe:
    """A :class:`Recipe` from a name in :data:`RECIPES` (or itself); :class:`KitError` for an
    unknown name."""
    if isinstance(recipe, Recipe):
        return recipe
    if isinstance(recipe, str) and recipe in RECIPES:
        return RECIPES[recipe]
    raise KitError(f"unknown recipe {recipe!r}; known recipes: {', '.join(RECIPES)}")


def runs_dir() -> Path:
    """Where live captures go: ``$KITLIB_RUNS``, else ``<checkout>/runs``, else ``./runs``."""
    return checkout_folder("KITLIB_RUNS", "runs", Path.cwd() / "runs")


def default_out_dir(recipe_name: str) -> Path:
    """``runs_dir()/<UTC timestamp>_<recipe>``, with a numeric suffix when taken."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    base = runs_dir() / f"{stamp}_{recipe_name}"
    p, i = base, 1
    while p.exists():
        i += 1
        p = base.with_name(f"{base.name}-{i}")
    return p


#: All a failed run removes again (with the lock file): nothing else is ever deleted.
WRITTEN_NAMES = ("manifest.json", "key_averages.json", "step_times.json", "wallclock.json",
                 "memory_snapshot.pickle", "report.sqlite", "report.nsys-rep", "report.qdstrm",
                 "workload.json", "nsys.log")
LOCK_NAME = ".kitlib-writing"


class OutFolder:
    """The bundle folder one run claimed (:func:`claim_out`); ``created``: this run made it."""

    def __init__(self, path: Path, created: bool):
        self.path, self.created = path, created
        self._lock = path / LOCK_NAME
        self._token = f"{os.getpid()} {time.time_ns()}"

    def _owned(self) -> bool:
        try:
            return self._lock.read_text() == self._token
        except OSError:
            return False

    def done(self) -> None:
        """The bundle is complete: drop the lock file."""
        if self._owned():
            self._lock.unlink()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        """``done()`` after the block, ``abandon()`` when it raised (Ctrl-C included)."""
        self.abandon() if exc_type is not None else self.done()

    def abandon(self) -> None:
        """The run failed: remove the files it wrote (:data:`WRITTEN_NAMES`, ``trace*.json.gz``),
        then the folder if this run made it and it is empty."""
        if not self._owned():
            return
        for f in self.path.iterdir():
            if f.name in WRITTEN_NAMES or (f.name.startswith("trace") and f.name.endswith(".json.gz")):
                with contextlib.suppress(OSError):
                    f.unlink()
        with contextlib.suppress(OSError):
            self._lock.unlink()
        if self.created:
            with contextlib.suppress(OSError):      # not empty: something else is there, keep it
                self.path.rmdir()


class _Taken(BundleError):
    """A default folder name another run took first (internal: try the next)."""


def claim_out(out_dir, recipe_name, _default: bool = False) -> OutFolder:
    """Claim a new or empty folder for one run's bundle before any work starts, holding it with
    an ``O_EXCL`` lock file (:data:`LOCK_NAME`); ``None``: a new :func:`default_out_dir`.
    Returns an :class:`OutFolder` (``done()`` when written, ``abandon()`` on failure).

    Raises :class:`BundleError`: a file; a folder holding a bundle, other files or another
    run's lock; or one that cannot be created or written."""
    if out_dir is None:                 # a default folder: take the next free name, never wait
        for _ in range(100):
            try:
                return claim_out(default_out_dir(recipe_name), recipe_name, _default=True)
            except _Taken:
                continue
        raise BundleError(runs_dir(), "no free folder name for a new run (100 tried)")
    out = Path(out_dir)
    where = ("choose a writable --out folder, or set KITLIB_RUNS" if not _default else
             f"the default runs folder {runs_dir()} is not writable: set KITLIB_RUNS to a "
             "writable folder or pass --out")
    if out.exists() and not out.is_dir():
        raise BundleError(out, "exists and is not a folder")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            out.mkdir()
            created = True
        except FileExistsError:
            created = False
    except OSError as e:
        block = next((a for a in out.parents if a.exists()), None)
        why = (f"{block} is a file, not a folder" if block is not None and not block.is_dir()
               else e.strerror or str(e))
        raise BundleError(out, f"cannot create the bundle folder ({why}); {where}") from None
    if not out.is_dir():
        raise BundleError(out, "exists and is not a folder")
    if not created and _default:
        raise _Taken(out, "taken by another run")
    if not created:
        if (out / "manifest.json").exists():
            raise BundleError(out, "already holds a capture bundle; choose another output folder "
                                   "(or leave --out out: each run gets a new runs/<time>_<recipe>/)")
        if (out / LOCK_NAME).exists():
            raise BundleError(out, "another kitlib run is writing a bundle here (lock file "
                                   f"{LOCK_NAME}); choose another output folder")
        others = sorted(x.name for x in out.iterdir())
        if others:
            shown = ", ".join(others[:4]) + (", ..." if len(others) > 4 else "")
            raise BundleError(out, f"is not empty ({shown}); kitlib writes each capture into a "
                                   "new or empty folder of its own, so that no run overwrites or "
                                   "deletes files it did not write: choose another output folder")
    claim = OutFolder(out, created)
    try:
        fd = os.open(claim._lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise (_Taken if _default else BundleError)(
            out, "another kitlib run is writing a bundle here (lock file "
                 f"{LOCK_NAME}); choose another output folder") from None
    except OSError as e:
        if created:
            with contextlib.suppress(OSError):
                out.rmdir()
        raise BundleError(out, f"cannot write into the bundle folder ({e.strerror or e}); {where}") from None
    with os.fdopen(fd, "w") as f:
        f.write(claim._token)
    return claim


def profiler_activities(device) -> list:
    """CPU, plus CUDA on a CUDA ``device``."""
    from torch.profiler import ProfilerActivity
    acts = [ProfilerActivity.CPU]
    if device.type == "cuda":
        acts.append(ProfilerActivity.CUDA)
    return acts


def _experimental_config(rec: Recipe):
    """``_ExperimentalConfig(verbose=True)`` when the recipe wants stacks in ``key_averages``, else ``None``."""
    if not (rec.with_stack and rec.verbose_stack):
        return None
    try:
        from torch._C._profiler import _ExperimentalConfig
        return _ExperimentalConfig(verbose=True)
    except (ImportError, TypeError):  # a torch without it: stacks stay in the trace only
        return None


def _first_attr(e, *names, default=0):
    """The first of ``names`` ``e`` has (torch 2.4 renamed ``cuda_*`` to ``device_*``)."""
    for n in names:
        try:
            v = getattr(e, n)
        except Exception:
            continue
        if v is not None:
            return v
    return default


def key_average_rows(averages) -> list:
    """The rows of ``prof.key_averages(...)`` as dicts: ``key``, ``count``, ``input_shapes``,
    ``stack`` (5 frames), ``cpu_time_total_us``, ``self_cpu_time_total_us``, ``flops``,
    ``device_time_total_us``, ``self_device_time_total_us`` (µs), ``cpu_memory_usage_bytes``,
    ``self_cpu_memory_usage_bytes``, ``device_memory_usage_bytes``,
    ``self_device_memory_usage_bytes`` (the reference ``fixed_batch`` schema)."""
    rows = []
    for e in averages:
        rows.append({
            "key": e.key,
            "count": int(e.count),
            "input_shapes": str(e.input_shapes if e.input_shapes is not None else ""),
            "stack": [str(s) for s in list(e.stack or [])[:5]],
            "cpu_time_total_us": float(e.cpu_time_total),
            "self_cpu_time_total_us": float(e.self_cpu_time_total),
            "flops": int(getattr(e, "flops", 0) or 0),
            "device_time_total_us": float(_first_attr(e, "device_time_total", "cuda_time_total")),
            "self_device_time_total_us": float(_first_attr(e, "self_device_time_total",
                                                           "self_cuda_time_total")),
            "cpu_memory_usage_bytes": int(_first_attr(e, "cpu_memory_usage")),
            "self_cpu_memory_usage_bytes": int(_first_attr(e, "self_cpu_memory_usage")),
            "device_memory_usage_bytes": int(_first_attr(e, "device_memory_usage", "cuda_memory_usage")),
            "self_device_memory_usage_bytes": int(_first_attr(e, "self_device_memory_usage",
                                                              "self_cuda_memory_usage")),
        })
    return rows


def step_loop(workload: Workload, n: int, desc: str, progress: bool, on_step=None, *,
              marks=None, label: str | None = None, sync_each: bool = True) -> list:
    """Run ``n`` steps; returns their ms (each synchronised) with ``sync_each``, else ``[]``.
    ``on_step`` (``prof.step``) runs after each, untimed; ``label`` + index names each step's
    range; ``marks`` as :func:`kitlib.capture.workload.train_step`."""
    from tqdm.auto import tqdm
    times = []
    for i in tqdm(range(n), desc=desc, unit="step", disable=not progress or n == 0, leave=False):
        t0 = time.perf_counter_ns()
        workload.step(step_label=f"{label}{i}" if label else None, marks=marks)
        if sync_each:
            workload.sync()
            times.append(ns_to_ms(time.perf_counter_ns() - t0))
        if on_step is not None:
            on_step()
    return times


def run_profiler(wl: Workload, rec: Recipe, device, out: Path, progress: bool):
    """The profiled part of :func:`capture` (and of each rank's): returns ``(prof, trace names,
    step ms, marks or None, start ns or None, end ns or None)``; no trace is written after a
    step raised."""
    from torch.profiler import profile, schedule
    traces, stopped = [], []

    def on_ready(prof):
        if stopped:          # the steps ended in an exception (Ctrl-C, SIGTERM, an error): the
            return           # unfinished bundle is removed, so its trace is not written first
        name = "trace.json.gz" if not traces else f"trace_cycle{len(traces) + 1}.json.gz"
        prof.export_chrome_trace(str(out / name))
        traces.append(name)

    options = dict(activities=profiler_activities(device), record_shapes=rec.record_shapes,
                   profile_memory=rec.profile_memory, with_stack=rec.with_stack,
                   with_flops=rec.with_flops, experimental_config=_experimental_config(rec))
    marks = [] if rec.wallclock else None
    times, t_rec, t_end = [], None, None
    with warnings.catch_warnings():
        if rec.repeat == 1:   # one cycle: torch's "clears events at the end of each cycle" is moot
            warnings.filterwarnings("ignore", message=".*clears events at the end of each cycle",
                                    category=UserWarning)
        if rec.use_schedule:
            with profile(schedule=schedule(wait=rec.wait, warmup=rec.warmup, active=rec.active,
                                           repeat=rec.repeat),
                         on_trace_ready=on_ready, **options) as prof:
                try:
                    times = step_loop(wl, rec.profiled_steps, f"profiling ({rec.name})", progress,
                                      prof.step, marks=marks)
                except BaseException:
                    stopped.append(True)
                    raise
        else:
            t_rec = time.perf_counter_ns()
            with profile(**options) as prof:
                step_loop(wl, rec.active, f"profiling ({rec.name})", progress, marks=marks,
                          label=rec.step_label, sync_each=False)
                wl.sync()
            t_end = time.perf_counter_ns()
            on_ready(prof)
    return prof, traces, times, marks, t_rec, t_end


def capture(config: WorkloadConfig | None = None, recipe="full", out_dir=None, progress: bool = True,
            *, notes: str = "") -> Capture:
    """Run the workload under a recipe and write a bundle: build it, ``pre_steps`` warm-up,
    ``timing_steps`` uninstrumented steps, then the profiler's schedule with every step timed
    (``perf_counter_ns`` and ``synchronize``). ``config.steps`` replaces the recipe's
    ``active``; ``out_dir`` defaults to ``runs/<UTC time>_<recipe>/``.

    Returns the opened bundle (``origin`` ``live``): ``trace.json.gz`` (``trace_cycleN`` for
    more cycles), ``key_averages.json`` (the last cycle), ``step_times.json``, and a manifest
    with recipe, workload, provenance and ``steps``.

    Raises :class:`KitError` (unknown recipe, bad settings, no such device) or
    :class:`BundleError` (``out_dir`` refused by :func:`claim_out`, or no trace written), the
    first before any work. A failed run removes what it wrote."""
    import torch
    rec = get_recipe(recipe)
    config = (config or WorkloadConfig.for_device()).validate()
    if config.steps is not None:
        rec = rec.replace(active=config.steps)
    device = resolve_device(config.device)   # fail fast, before any folder or dataset
    find_food101(config.data_root)           # raises when a Food-101 path holds none
    claim = claim_out(out_dir, rec.name)
    out = claim.path
    t_start = time.perf_counter()
    with claim:
        with build_workload(config, progress=progress) as wl:
            if rec.pre_steps:
                step_loop(wl, rec.pre_steps, "warm-up", progress)
            step_times = {}
            if rec.timing_steps or rec.kind == "timing":
                n = rec.active if rec.kind == "timing" else rec.timing_steps
                proc = {}
                step_times["step_ms_uninstrumented"] = time_steps(wl, n, progress=progress, process=proc)
                step_times["process"] = proc
            files = {}
            steps_info = {"pre_steps": rec.pre_steps,
                          "uninstrumented_steps": len(step_times.get("step_ms_uninstrumented", []))}
            ka = None
            if rec.kind == "torch_profiler":
                prof, traces, profiled_ms, marks, t_rec, t_end = run_profiler(wl, rec, device, out, progress)
                if profiled_ms:
                    step_times["step_ms_profiled"] = profiled_ms
                if not traces:
                    raise BundleError(out, "torch.profiler wrote no trace: its schedule never "
                                           "reached the end of an active window")
                ka = {"torch": torch.__version__, "steps": rec.active, "batch_size": config.batch_size,
                      "by_name": key_average_rows(prof.key_averages())}
                if rec.record_shapes:
                    ka["by_input_shape"] = key_average_rows(prof.key_averages(group_by_input_shape=True))
                if rec.with_stack:
                    ka["by_stack_5"] = key_average_rows(prof.key_averages(group_by_stack_n=5))
                what = (f"{rec.active} active steps" if rec.use_schedule else
                        f"steps 0-{rec.active - 1} from the start of the recording (no schedule), each in "
                        f"{rec.step_label}N")
                for i, name in enumerate(traces):
                    files[name] = (f"torch.profiler Chrome trace (export_chrome_trace), cycle {i + 1}: "
                                   f"{what} of batch {config.batch_size}")
                steps_info.update(profiled=rec.profiled_steps, active=rec.active * rec.repeat,
                                  schedule_actions=rec.schedule_actions())
                if marks is not None:
                    wc = {"t0_ns": t_rec, "end_ns": t_end, "steps": marks}
                    (out / "wallclock.json").write_text(json.dumps(wc, indent=1) + "\n")
                    files["wallclock.json"] = ("perf_counter_ns stamps around each next() and after each "
                                               "step's submission (independent of the profiler)")
            workload_desc = wl.describe()
        if ka is not None:
            (out / "key_averages.json").write_text(json.dumps(ka) + "\n")
            files["key_averages.json"] = ("the profiler's key_averages() rows of the last cycle: by_name"
                                          + (", by_input_shape" if "by_input_shape" in ka else "")
                                          + (", by_stack_5" if "by_stack_5" in ka else "")
                                          + " (times in us, memory in bytes, flops)")
        if step_times:
            (out / "step_times.json").write_text(json.dumps(step_times, indent=1) + "\n")
            what = []
            if "step_ms_profiled" in step_times:
                what.append("step_ms_profiled = every step under the profiler, in schedule order "
                            "(see manifest steps.schedule_actions)")
            if "step_ms_uninstrumented" in step_times:
                what.append("step_ms_uninstrumented = steps with no profiler running; process = during those "
                            "steps, the process's RSS after each (rss_bytes_after_step, /proc/self/statm), the "
                            "machine's 1-minute load average before and after them, the process's CPU time and "
                            "the wall time in s (workload.time_steps)")
            clock = ("perf_counter_ns + cuda.synchronize" if device.type == "cuda" else
                     "perf_counter_ns; on the CPU nothing to synchronize")
            files["step_times.json"] = (f"wall-clock step times in ms ({clock}): " + "; ".join(what))
        rd = rec.to_dict()
        if rec.kind == "torch_profiler":
            rd["activities"] = [a.name for a in profiler_activities(device)]
        write_bundle(out, kind=rec.kind, name=out.name, files=files, recipe=rd,
                     workload=workload_desc, provenance=software_provenance(), origin="live",
                     notes=notes, extra={"steps": steps_info,
                                         "elapsed_s": round(time.perf_counter() - t_start, 3)})
    return open_capture(out)


def memory_history(config: WorkloadConfig | None = None, steps: int = 3, out_dir=None, *,
                   pre_steps: int = 3, max_entries: int = 60000, progress: bool = True,
                   notes: str = "") -> Capture:
    """Record the CUDA caching allocator's history over ``steps`` steps (after ``pre_steps``) and
    dump ``memory_snapshot.pickle`` (``_record_memory_history(max_entries=...)``, as the
    reference ``profiler_5step`` snapshot; open at https://pytorch.org/memory_viz).

    Returns the opened bundle (kind ``memory_snapshot``; the manifest adds
    ``max_memory_allocated`` and ``max_memory_reserved``, bytes). Raises :class:`KitError` off
    a CUDA GPU or for ``steps`` < 1."""
    import torch
    config = (config or WorkloadConfig.for_device()).validate()
    device = resolve_device(config.device)
    if device.type != "cuda":
        raise KitError("memory_history needs a CUDA GPU: torch.cuda.memory._record_memory_history "
                       f"records the CUDA caching allocator, and this workload runs on {device}. "
                       "Open the recorded snapshot instead: "
                       "open_capture('profiler_5step').file('memory_snapshot.pickle').")
    if not isinstance(steps, int) or steps < 1:
        raise KitError(f"memory_history: steps must be a positive integer, not {steps!r}")
    claim = claim_out(out_dir, "memory_history")
    out = claim.path
    t_start = time.perf_counter()
    with claim:
        with build_workload(config, progress=progress) as wl:
            step_loop(wl, pre_steps, "warm-up", progress)
            torch.cuda.reset_peak_memory_stats(device)
            torch.cuda.memory._record_memory_history(max_entries=max_entries)
            try:
                times = step_loop(wl, steps, "memory history", progress)
                torch.cuda.synchronize(device)
                torch.cuda.memory._dump_snapshot(str(out / "memory_snapshot.pickle"))
            finally:
                torch.cuda.memory._record_memory_history(enabled=None)
            peaks = {"max_memory_allocated": int(torch.cuda.max_memory_allocated(device)),
                     "max_memory_reserved": int(torch.cuda.max_memory_reserved(device))}
            workload_desc = wl.describe()
        (out / "step_times.json").write_text(json.dumps({"step_ms_memory_history": times}, indent=1) + "\n")
        write_bundle(out, kind="memory_snapshot", name=out.name,
                     files={"memory_snapshot.pickle":
                            f"torch.cuda.memory._dump_snapshot() after {steps} steps with "
                            f"_record_memory_history(max_entries={max_entries})",
                            "step_times.json": "wall-clock times in ms of the recorded steps "
                                               "(perf_counter_ns + cuda.synchronize)"},
                     recipe={"name": "memory_history", "kind": "memory_snapshot", "steps": steps,
                             "pre_steps": pre_steps, "max_entries": max_entries},
                     workload=workload_desc, provenance=software_provenance(), origin="live",
                     notes=notes, extra={**peaks, "elapsed_s": round(time.perf_counter() - t_start, 3)})
    return open_capture(out)
