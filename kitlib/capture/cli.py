"""``python -m kitlib``: ``profile`` (ResNet-50 under torch.profiler, a bundle under runs/ and
its summary), ``info`` (machine, software, data, recordings), ``summary PATH``,
``record-course`` and ``record-clinic``.

:func:`main` returns the exit status: 0 on success, 2 for a bad option or a kitlib error
(one ``kitlib: error: …`` line, no traceback), 130 on Ctrl-C, 143 on SIGTERM."""
from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import sys
import textwrap
import time

from ..errors import KitError
from ..units import bytes_to_gib

EPILOG = """\
examples:
  python -m kitlib profile                      # best device present, recipe 'full'
  python -m kitlib profile --device cpu --steps 2 --recipe light
  python -m kitlib profile --data-root ~/data   # Food-101 in ~/data/food-101 instead of synthetic images
  torchrun --nproc_per_node=2 -m kitlib profile --device cpu --recipe light --straggler-rank 1
                                                # two Gloo ranks (DDP), rank 1 100 ms late each step
  python -m kitlib summary profiler_5step       # a recorded reference capture
  python -m kitlib info
"""


NEXT_STEPS = ("\nnext: open the trace in https://ui.perfetto.dev, then the lessons: "
              "python -m kitlib workspace && jupyter lab workspace/ (start with 00)")


class _Parser(argparse.ArgumentParser):
    """argparse with a "did you mean" for a mistyped option (difflib's close matches among
    every command's options)."""

    def error(self, message):
        import difflib
        if message.startswith("unrecognized arguments:"):
            known = {o for a in self._actions for o in a.option_strings}
            for a in self._actions:
                if isinstance(a, argparse._SubParsersAction):
                    known |= {o for sp in a.choices.values() for b in sp._actions for o in b.option_strings}
            hints = []
            for word in message.split(":", 1)[1].split():
                if word.startswith("--"):
                    close = difflib.get_close_matches(word.split("=")[0], sorted(known), n=1, cutoff=0.75)
                    hints += [f"{word}: did you mean {close[0]}?"] if close else []
            if hints:
                message += " (" + "; ".join(hints) + ")"
        super().error(message)


def _whole_number(least: int, words: str):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if v < least:
            raise argparse.ArgumentTypeError(f"must be {words}, got {v}")
        return v
    return parse


_positive_int = _whole_number(1, "at least 1")
_nonneg_int = _whole_number(0, "0 or more")


def _fill(*paragraphs) -> str:
    return "\n\n".join(textwrap.fill(x, 88) for x in paragraphs)


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m kitlib``; every option is documented in its ``--help``."""
    from .recipes import RECIPE_STEPS_NOTE, RECIPES
    top = _Parser(
        prog="python -m kitlib",
        description="Profile ResNet-50 training with torch.profiler and read the captures the "
                    "course's lessons use.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="command", metavar="{profile,info,summary,record-course,record-clinic}")

    recipes = "\n".join(textwrap.fill(r.description, 88, initial_indent=f"  {n:<7} ",
                                       subsequent_indent=" " * 10) for n, r in RECIPES.items())
    p = sub.add_parser(
        "profile", help="run the training workload under torch.profiler and summarise it",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_fill(
            "Run ResNet-50 training (torchvision resnet50, 101 classes, channels-last, SGD) "
            "under torch.profiler on the best device present, write a capture bundle "
            "(trace.json.gz, key_averages.json, step_times.json, manifest.json) and print "
            "its summary.",
            "On a CUDA GPU the defaults are the reference workload (batch 128, 224 px, 1,792 "
            "synthetic images), checked first against the GPU's free memory: with too little, a "
            "smaller batch runs, with a warning (see --no-memory-check). Without a GPU they are small "
            "enough to finish in about a minute "
            "on two CPU cores (batch 8, 112 px, 3 active steps, 202 synthetic images).")
        + f"\n\nrecipes ({RECIPE_STEPS_NOTE}):\n" + recipes,
        epilog="The synthetic dataset is generated once into the cache ($KITLIB_CACHE, else "
               "<checkout>/.cache, else ~/.cache/kitlib). Nothing is downloaded.")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                   help="where to train: 'auto' = a CUDA GPU when torch.cuda.is_available(), else "
                        "the CPU; 'cuda' fails with a clear error when there is no GPU (default: auto)")
    p.add_argument("--recipe", choices=list(RECIPES), default="full",
                   help="what to record (see the list above; default: full)")
    p.add_argument("--batch-size", type=_positive_int, metavar="N",
                   help="images per step (default: 128 on a GPU, 8 on the CPU)")
    p.add_argument("--steps", type=_positive_int, metavar="N",
                   help="steps to record: the profiler schedule's active steps, or the timed steps "
                        "of the 'timing' recipe (default: the recipe's, 5; 3 on the CPU)")
    p.add_argument("--workers", "--num-workers", dest="workers", type=_nonneg_int, metavar="N",
                   help="DataLoader worker processes, 0 = load in the training process "
                        "(default: min(8, CPUs) on a GPU, min(2, CPUs) on the CPU; --num-workers, "
                        "as nsys_recipes run-workload spells it, is the same option)")
    p.add_argument("--image-size", type=_positive_int, metavar="PX",
                   help="side of the RandomResizedCrop in pixels, at least 32 (default: 224 on a "
                        "GPU, 112 on the CPU)")
    p.add_argument("--data-root", metavar="DIR",
                   help="folder holding Food-101 as torchvision.datasets.Food101 expects it "
                        "(DIR/food-101/images, DIR/food-101/meta); never downloaded. Default: "
                        "$KITLIB_FOOD101, else a synthetic 101-class dataset cut from scikit-image's "
                        "sample photographs")
    p.add_argument("--synthetic-images", type=_positive_int, metavar="N",
                   help="images in the synthetic dataset, at least 101 (default: 1792 on a GPU, "
                        "202 on the CPU)")
    p.add_argument("--data-load-covers-h2d", action="store_true",
                   help="let the 'data_load' label also cover the .to(device, non_blocking=True) "
                        "transfer submission, with no separate 'h2d' label (as in the reference "
                        "Nsight Systems recording); by default data_load is next(batches) only and "
                        "the transfer is labelled 'h2d' (as in the reference torch.profiler recordings)")
    p.add_argument("--pre-steps", type=_nonneg_int, metavar="N",
                   help="unprofiled warm-up steps before anything is recorded (default: 2; the "
                        "'timing' recipe: 3; 'cold_start': 0)")
    p.add_argument("--timing-steps", type=_nonneg_int, metavar="N",
                   help="uninstrumented timed steps (perf_counter_ns, + cuda.synchronize on a GPU) before the "
                        "profiler, saved beside the profiled step times (default: 10 on a GPU, 2 on "
                        "the CPU; 'cold_start': 0)")
    p.add_argument("--pin-memory", action=argparse.BooleanOptionalAction, default=None,
                   help="DataLoader pin_memory (default: on for a GPU, off for the CPU)")
    p.add_argument("--persistent-workers", action="store_true",
                   help="keep DataLoader workers alive between epochs (default: off, as in the "
                        "reference, so each epoch restarts them)")
    p.add_argument("--prefetch-factor", type=_positive_int, metavar="N",
                   help="batches each worker loads ahead (default: PyTorch's, 2; needs --workers > 0)")
    p.add_argument("--model", choices=["resnet50", "small_cnn"], default=None,
                   help="the model: torchvision resnet50 (default) or small_cnn, two convolutions and a "
                        "linear head, for quick CPU runs (e.g. two ranks in seconds)")
    p.add_argument("--straggler-rank", type=_nonneg_int, metavar="R",
                   help="under torchrun: rank R sleeps --straggler-ms at the start of every step (in a "
                        "'straggler_delay' range), so the other ranks wait for it in the all-reduce")
    p.add_argument("--straggler-ms", type=float, default=None, metavar="MS",
                   help="the injected delay per step, in ms (default 100 when --straggler-rank is given)")
    p.add_argument("--seed", type=_nonneg_int, default=0, metavar="N",
                   help="seed of the model weights and the synthetic crops (default: 0)")
    p.add_argument("--out", metavar="DIR",
                   help="bundle folder to write (default: runs/<UTC timestamp>_<recipe>/ in the "
                        "checkout, or $KITLIB_RUNS)")
    p.add_argument("--top", type=_positive_int, default=10, metavar="N",
                   help="operators and kernels to list in the summary (default: 10)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bars (for logs and scripts)")
    p.add_argument("--no-memory-check", action="store_true",
                   help="on a GPU, start even when the estimate of the memory the batch needs (scaled "
                        "from the reference's 13.35 GB reserved peak at batch 128) is more than the GPU "
                        "has free; by default a smaller batch is run then, with a warning, or, below "
                        "batch 16, nothing")

    s = sub.add_parser("summary", help="summarise a capture bundle",
                       description="Print the summary of a capture bundle: device and software, "
                                   "workload, steps and their times, top operators and kernels, "
                                   "and how to open the trace in Perfetto.")
    s.add_argument("path", metavar="PATH",
                   help="a bundle folder (or its manifest.json), or the name of a reference capture "
                        "such as profiler_5step (see 'python -m kitlib info')")
    s.add_argument("--top", type=_positive_int, default=10, metavar="N",
                   help="operators and kernels to list (default: 10)")

    r = sub.add_parser(
        "record-course", help="record, on a GPU, every bundle the lessons replay (for KITLIB_REPLAY_DIR)",
        description=_fill(
            "Record every bundle the lessons replay (profiler_5step with its memory snapshot, "
            "fixed_batch with its FLOP count, cold_start_8step, nsys_8step and nsys_emit_nvtx when "
            "Nsight Systems is there, ncu when Nsight Compute is there) into one folder, under the "
            "names the lessons expect. Hand the folder to students: with KITLIB_REPLAY_DIR set to "
            "it, every lesson shows the course GPU's figures. Takes a few minutes on a GPU."))
    r.add_argument("--out", required=True, metavar="DIR", help="a new or empty folder for the bundles")
    r.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                   help="cuda: the course GPU, the reference workload (default); cpu: a tiny workload and "
                        "only the torch.profiler bundles, to try the command")
    r.add_argument("--nsys", metavar="PATH", help="the nsys executable (default: found on the PATH "
                                                  "or in the usual places)")
    r.add_argument("--ncu", metavar="PATH", help="the ncu executable (default: ncu on the PATH)")
    r.add_argument("--dry-run", action="store_true", help="print the plan (each bundle, how it is made, "
                                                          "what is skipped and why) and stop")

    c = sub.add_parser(
        "record-clinic", help="record the clinic's cases: jobs with one planted cause, before and after the fix",
        description=_fill(
            "Record every case of the clinic (issue 30, lesson 13): training jobs with one planted cause "
            "each, named case_a, case_b, ... so that no folder or manifest names the cause. Each case gets "
            "a 'before' and an 'after' bundle (torch.profiler trace with record_shapes, key_averages, "
            "uninstrumented step times), and DIR/baseline is a healthy run. DIR/clinic.json lists the cases "
            "and their symptoms; the causes are in the answer key (python -m kitlib answers --clinic).",
            "--device cpu records the cases a CPU can show (small_cnn, 64 px; a few minutes); --device cuda "
            "records all of them with ResNet-50."))
    where = c.add_mutually_exclusive_group(required=True)
    where.add_argument("--out", metavar="DIR", help="a new or empty folder")
    where.add_argument("--retime", metavar="DIR",
                       help="a clinic already recorded: time each case's two jobs again side by side "
                            "(ABBA blocks) and replace only their uninstrumented step times")
    c.add_argument("--steps", type=int, default=None, metavar="N",
                   help="with --retime: steps timed per side (default: as record-clinic, 200)")
    c.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where to train (default: cpu)")
    c.add_argument("--cases", nargs="+", metavar="X",
                   help="only these cases, e.g. --cases a c or case_a (default: every case the device shows)")
    c.add_argument("--smallest", action="store_true",
                   help="the CI settings: 1 warm-up step, 5 timed steps, 2 profiled steps, 202 images")
    c.add_argument("--dry-run", action="store_true", help="print the plan and stop")

    sub.add_parser("info", help="the machine, software, data and reference captures found",
                   description="Print the machine and software found (Python, torch, CUDA, GPU, "
                               "Nsight tools), where data and captures go, the recipes, and the "
                               "reference captures shipped with the kit.")
    return top


#: Said before a CPU run: the two messages the profiler prints there, and why they are harmless.
CPU_NOTE = ("on the CPU, two messages of the profiler's own are expected and harmless: Kineto "
            "(torch.profiler's tracing library) looks for a GPU and reports 'gpuGetDeviceCount failed' "
            "when there is none (silenced here with KINETO_LOG_LEVEL=6), and PyTorch warns 'Memory block "
            "of unknown size was allocated before the profiling started' when a tensor made before the "
            "profiler started is freed while it records (silenced with TORCH_CPP_LOG_LEVEL=ERROR, set "
            "before torch loads for --device cpu, or when no NVIDIA driver (nvidia-smi) is found). Set "
            "either variable yourself to see them.")


def _profile(args) -> int:
    import os
    if args.device == "cpu" or (args.device == "auto" and not shutil.which("nvidia-smi")):
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")   # before torch loads: read once
    from .recipes import capture, get_recipe
    from .summary import summarize
    from .workload import WorkloadConfig, resolve_device, torchrun_env
    ranks = torchrun_env()
    if args.straggler_ms is not None and args.straggler_ms < 0:
        raise KitError(f"--straggler-ms must be 0 or more, not {args.straggler_ms}")
    if ranks is None and args.straggler_rank is not None:
        raise KitError("--straggler-rank needs several ranks: run under torchrun, e.g. "
                       "torchrun --nproc_per_node=2 -m kitlib profile --device cpu --straggler-rank 1")
    device = resolve_device(args.device)
    why_cpu = ""
    if ranks is not None and args.device == "auto" and device.type == "cuda":
        import torch                   # NCCL only with a GPU for every rank on this host
        n = torch.cuda.device_count()
        if n < ranks["local_world_size"]:
            device = resolve_device("cpu")
            why_cpu = (f"; {n} GPU(s) for {ranks['local_world_size']} ranks and NCCL needs one GPU per "
                       "rank, so Gloo on the CPU")
    on_gpu = device.type == "cuda"
    if not on_gpu:
        os.environ.setdefault("KINETO_LOG_LEVEL", "6")   # read when the profiler starts
    cfg = WorkloadConfig.for_device(
        "cpu" if ranks is not None and not on_gpu else args.device,
        batch_size=args.batch_size, steps=args.steps, num_workers=args.workers,
        image_size=args.image_size, data_root=args.data_root, synthetic_images=args.synthetic_images,
        data_load_covers_h2d=True if args.data_load_covers_h2d else None, pin_memory=args.pin_memory,
        persistent_workers=True if args.persistent_workers else None,
        prefetch_factor=args.prefetch_factor, seed=args.seed, model=args.model,
        straggler_rank=args.straggler_rank,
        straggler_ms=(args.straggler_ms if args.straggler_ms is not None
                      else (100.0 if args.straggler_rank is not None else None)))
    rec = get_recipe(args.recipe)
    changes = {}
    if rec.kind == "torch_profiler" and rec.use_schedule:   # warm by default; a cold start stays cold
        changes["pre_steps"] = args.pre_steps if args.pre_steps is not None else 2
        changes["timing_steps"] = (args.timing_steps if args.timing_steps is not None
                                   else (10 if on_gpu else 2))
    else:
        if args.pre_steps is not None:
            changes["pre_steps"] = args.pre_steps
        if args.timing_steps is not None and rec.kind == "torch_profiler":
            changes["timing_steps"] = args.timing_steps
    rec = rec.replace(**changes)
    active = cfg.steps or rec.active
    if rec.kind != "torch_profiler":
        plan = f"{active} timed steps, no profiler"
    elif rec.use_schedule:
        plan = f"schedule wait={rec.wait}, warmup={rec.warmup}, active={active}"
    else:
        plan = f"no schedule, steps 0-{active - 1} recorded"
    if ranks is None:
        _check_out(args.out, rec.name)        # a refused folder is all that is said: no note, no plan
    if not on_gpu:
        print(textwrap.fill("kitlib profile: " + CPU_NOTE, 88), flush=True)
    if ranks is not None:
        return _profile_ranks(args, cfg, rec, ranks, plan + why_cpu)
    if on_gpu and not args.no_memory_check:
        cfg = _memory_checked(cfg)
    print(f"kitlib profile: {'ResNet-50' if cfg.model == 'resnet50' else cfg.model} on {device}, batch {cfg.batch_size}, {cfg.image_size} px, "
          f"{cfg.num_workers} loader worker{'' if cfg.num_workers == 1 else 's'}; recipe {rec.name} "
          f"({plan})", flush=True)
    t0 = time.perf_counter()
    with _stop_promptly():
        cap = capture(cfg, rec, args.out, progress=not args.no_progress)
    print(f"done in {time.perf_counter() - t0:,.1f} s: {cap.path}\n", flush=True)
    print(summarize(cap, top=args.top))
    print(NEXT_STEPS)
    return 0


def _check_out(out, recipe_name: str) -> None:
    """Refuse, before the run says anything, an output folder the capture would refuse
    (:func:`kitlib.capture.recipes.claim_out`, claimed and let go at once)."""
    from .recipes import claim_out
    claim_out(out, recipe_name).abandon()


def _memory_checked(cfg):
    """``profile`` on one GPU: ``cfg``, or a copy with the smaller batch
    :func:`kitlib.capture.gpu_memory.live_memory_plan` gives (with a warning); ResNet-50 only.
    Raises :class:`KitError` when not even the smallest batch fits."""
    import dataclasses

    from .gpu_memory import live_memory_plan
    if cfg.model != "resnet50":
        return cfg
    mem = live_memory_plan(batch_size=cfg.batch_size, image_size=cfg.image_size)
    if mem["batch_size"] is None:
        raise KitError(f"{mem['message']} Free the GPU (another process may hold its memory), record on the "
                       "CPU (--device cpu), replay the recordings (python -m kitlib summary profiler_5step), "
                       "or pass --no-memory-check to try anyway.")
    if mem["batch_size"] != cfg.batch_size:
        print(f"kitlib profile: warning: {mem['message']} (--no-memory-check keeps batch {cfg.batch_size})",
              file=sys.stderr, flush=True)
        cfg = dataclasses.replace(cfg, batch_size=mem["batch_size"]).validate()
    return cfg


def _profile_ranks(args, cfg, rec, ranks, plan) -> int:
    """``profile`` on one torchrun rank: every rank records, rank 0 prints the summary."""
    from .distributed import capture_ranks, exit_rank, leave_together, summarize_ranks
    rank = ranks["rank"]
    if rank == 0:
        lag = (f"; rank {cfg.straggler_rank} sleeps {cfg.straggler_ms:g} ms per step"
               if cfg.straggler_rank is not None and cfg.straggler_ms else "")
        print(f"kitlib profile: {cfg.model} under torchrun, {ranks['world_size']} ranks "
              f"({'NCCL, one GPU per rank' if str(cfg.device).startswith('cuda') or cfg.device == 'auto' else 'Gloo on the CPU'}), "
              f"batch {cfg.batch_size} per rank, {cfg.image_size} px; recipe {rec.name} ({plan}){lag}",
              flush=True)
    t0 = time.perf_counter()
    with leave_together():
        with _stop_promptly():
            cap = capture_ranks(cfg, rec, args.out, progress=not args.no_progress)
        if rank == 0:
            print(f"done in {time.perf_counter() - t0:,.1f} s: {cap.path}\n", flush=True)
            print(summarize_ranks(cap.path))
    exit_rank(0)


class Terminated(SystemExit):
    """SIGTERM during ``profile``: unwinds like Ctrl-C, then exit status 143."""


@contextlib.contextmanager
def _stop_promptly():
    """While a capture runs, Ctrl-C and SIGTERM say what happens, then stop the run (its cleanup
    removes what it wrote)."""
    from .workload import STOP
    terminated = []

    def on_signal(signum, frame):
        STOP.set()
        what = "interrupted (Ctrl-C)" if signum == signal.SIGINT else "terminated (SIGTERM)"
        print(f"\nkitlib: {what}: stopping the DataLoader workers and removing the unfinished bundle ...",
              file=sys.stderr, flush=True)
        if signum == signal.SIGINT:
            signal.signal(signal.SIGINT, signal.default_int_handler)   # a second Ctrl-C: at once
            raise KeyboardInterrupt
        terminated.append(signum)
        raise Terminated(143)

    STOP.clear()
    old = {}
    try:
        old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:                 # not the main thread: leave the handlers alone
        pass
    try:
        yield
    except KeyboardInterrupt:          # SIGTERM's stop, raised at a step boundary (Workload.step)
        if terminated:
            raise Terminated(143) from None
        raise
    finally:
        for sig, fn in old.items():
            signal.signal(sig, fn)
        STOP.clear()


def _summary(args) -> int:
    from .summary import summarize
    from ..readers.bundle import open_capture
    from .distributed import KIND, summarize_ranks
    try:
        multi = open_capture(args.path).kind == KIND
    except KitError:
        multi = False                  # summarize says what is wrong with it
    print(summarize_ranks(open_capture(args.path).path) if multi else summarize(args.path, top=args.top))
    return 0


def _info(args) -> int:
    from importlib.metadata import PackageNotFoundError, version
    try:
        __version__ = version("kitlib")
    except PackageNotFoundError:       # run from a checkout that was never installed
        __version__ = "(not installed)"
    from ..readers.bundle import REPLAY_DIR_ENV, list_references, open_capture, reference_dir, software_provenance
    from ..settings import value as setting
    from .recipes import RECIPE_STEPS_NOTE, RECIPES, runs_dir
    from ..paths import cache_dir
    from .workload import find_food101
    p = software_provenance()
    L = [f"kitlib {__version__}", "", "machine and software:",
         f"  python       {p['python']} on {p['os']}, {p['cpu_count']} CPUs",
         f"  torch        {p['torch']} (CUDA {p['cuda']}, cuDNN {p['cudnn']}), "
         f"torchvision {p['torchvision']}"]
    if p.get("gpu"):
        mem = f", {bytes_to_gib(p['gpu_memory_bytes']):,.0f} GiB" if p.get("gpu_memory_bytes") else ""
        L.append(f"  GPU          {p['gpu']} x{p['gpu_count']} (compute capability "
                 f"{p['compute_capability']}{mem}), driver {p.get('driver') or '?'}")
    else:
        L.append("  GPU          none (torch.cuda.is_available() is False): profile runs on the CPU; "
                 "the lessons run on the recorded captures")
    try:
        import nvtx  # noqa: F401
        has_nvtx = "installed"
    except ImportError:
        has_nvtx = "not installed (torch.cuda.nvtx is used on a GPU)"
    L.append(f"  nvtx package {has_nvtx}")
    for tool in ("nsys", "ncu"):
        L.append(f"  {tool:<12} {shutil.which(tool) or 'not on the PATH'}")
    L += ["", "data and captures:"]
    try:
        food = find_food101(None)
        L.append(f"  Food-101     {food / 'food-101'}" if food else
                 "  Food-101     not set (KITLIB_FOOD101 or --data-root); the synthetic dataset is used")
    except KitError as e:
        L.append(f"  Food-101     KITLIB_FOOD101 is set but unusable: {e}")
    syn = cache_dir() / "synthetic_food"
    made = sorted(x.name for x in syn.iterdir() if (x / ".complete.json").is_file()) if syn.is_dir() else []
    L.append(f"  synthetic    {syn} ({', '.join(made) if made else 'not generated yet'})")
    L.append(f"  live runs    {runs_dir()}")
    L += ["", f"recipes (python -m kitlib profile --recipe NAME; {RECIPE_STEPS_NOTE}):"]
    L += [f"  {n:<7} {r.description}" for n, r in RECIPES.items()]
    own = setting(REPLAY_DIR_ENV)
    L += ["", "recordings the lessons replay (python -m kitlib summary NAME), looked up in "
          + (f"{REPLAY_DIR_ENV}={own}, then " if own else f"{REPLAY_DIR_ENV} (not set), then ")
          + f"the kit's {reference_dir()}; never the working directory:"]
    refs = list_references()
    for name in refs:
        try:
            c = open_capture(name)
            files = c.files if len(c.files) <= 4 else c.files[:3] + [f"… {len(c.files) - 3} more"]
            L.append(f"  {name:<18} {c.kind:<15} {c.whose}, {str(c.provenance.get('date', '?'))[:10]}: "
                     f"{c.path}  [{', '.join(files)}]")
        except KitError as e:
            L.append(f"  {name:<18} unreadable: {e}")
    if not refs:
        L.append("  none found: the kit's recordings are not installed here (reinstall from a checkout, "
                 "or set KITLIB_REFERENCE)")
    L += ["", *settings_lines()]
    print("\n".join(L))
    return 0


def settings_lines() -> list:
    """``info``'s settings table: per :func:`kitlib.settings.describe` row, the value in force,
    set or default, and the meaning."""
    from ..settings import describe
    rows = describe()
    out = ["settings (environment variables; an empty one counts as unset):"]
    width = max(len(r["name"]) for r in rows)
    for r in rows:
        value = r["value"] if r["value"] is not None else "(unset)"
        how = "set" if r["set"] else "default"
        out.append(f"  {r['name']:<{width}}  {value} [{how}]: {r['meaning']}")
    return out


def _quiet_cpu_profiler(device: str) -> None:
    """On the CPU, silence the profiler's two known messages (:data:`CPU_NOTE`)."""
    import os
    if device == "cpu":
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
        os.environ.setdefault("KINETO_LOG_LEVEL", "6")


def _record_course(args) -> int:
    _quiet_cpu_profiler(args.device)
    from .course_set import record_course
    record_course(args.out, device=args.device, nsys=args.nsys, ncu=args.ncu, dry_run=args.dry_run)
    return 0


def _record_clinic(args) -> int:
    _quiet_cpu_profiler(args.device)
    from .clinic import INTERLEAVED_STEPS, record_clinic, retime_clinic
    if args.retime:
        if args.smallest or args.dry_run:
            raise KitError("record-clinic --retime times a recorded clinic again: --smallest and --dry-run "
                           "belong to a new recording (--out)")
        steps = args.steps if args.steps is not None else INTERLEAVED_STEPS
        if steps < 5:
            raise KitError(f"record-clinic --steps {steps}: at least 5 steps a side (lesson 10's interval)")
        retime_clinic(args.retime, device=args.device, letters=args.cases, steps=steps)
        return 0
    if args.steps is not None:
        raise KitError("record-clinic --steps goes with --retime (a new recording times "
                       f"{INTERLEAVED_STEPS} steps a side)")
    record_clinic(args.out, device=args.device, letters=args.cases, smallest=args.smallest,
                  dry_run=args.dry_run)
    return 0


def main(argv=None) -> int:
    """Entry point of ``python -m kitlib``; ``argv`` defaults to ``sys.argv[1:]``. Returns the
    exit status of the module docstring (``--help`` exits through ``SystemExit(0)``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return {"profile": _profile, "summary": _summary, "info": _info,
                "record-course": _record_course, "record-clinic": _record_clinic}[args.command](args)
    except KitError as e:
        print(f"kitlib: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kitlib: interrupted; nothing unfinished was kept", file=sys.stderr)
        return 130
    except Terminated:
        print("kitlib: terminated; nothing unfinished was kept", file=sys.stderr)
        return 143


__all__ = ["main", "build_parser"]
