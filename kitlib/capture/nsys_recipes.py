"""Record the workload under Nsight Systems and write an ``nsys`` capture bundle.

A capture is two processes: ``nsys profile … python -m kitlib.capture.nsys_recipes
run-workload …`` runs the labelled training steps (:func:`run_workload`), then ``nsys export
--type sqlite`` writes what :func:`kitlib.readers.nsys.load_nsys` reads. An
:class:`NsysRecipe` names the collectors; the bundle's manifest says which were on.

Sources: docs/SOURCES.md#nsys-collectors"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ..errors import KitError
from ..settings import value as setting

__all__ = ["NsysRecipe", "NSYS_RECIPES", "NsysNotFound", "collectors", "profile_command",
           "torchrun_profile_command", "torchrun_export_commands", "RANK_PATTERN", "export_command", "import_command", "workload_command", "find_nsys", "find_importer",
           "capture_nsys", "run_workload", "main", "KNOWN_LOCATIONS"]

#: Where an ``nsys`` off the PATH is commonly installed (inside Nsight Compute, or standalone).
KNOWN_LOCATIONS = ("/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
                   "/opt/nvidia/nsight-systems/*/bin/nsys",
                   "/opt/nvidia/nsight-systems/*/target-linux-x64/nsys",
                   "/usr/local/cuda*/bin/nsys")

NSYS_ENV = "KITLIB_NSYS"
#: A folder with ``libdw.so.1`` for the QdstrmImporter.
LIBDW_ENV = "KITLIB_LIBDW"


class NsysNotFound(KitError):
    """``nsys`` is not installed where kitlib looks."""


@dataclass(frozen=True)
class NsysRecipe:
    """What an Nsight Systems capture records.

    ``cuda``, ``nvtx``, ``osrt`` (``-t``; ``osrt_threshold_ns``: ``--osrt-threshold``),
    ``cpu_sampling`` (``--sample``), ``context_switches`` (``--cpuctxsw``),
    ``cuda_memory_usage``, ``trace_forks`` (``--trace-fork-before-exec``: the DataLoader
    workers), ``capture_range`` (only between ``torch.cuda.profiler.start()`` and ``stop()``),
    ``emit_nvtx`` (one NVTX range per operator; ``record_shapes`` adds input sizes);
    ``steps`` recorded after ``warmup_steps``; ``data_load_covers_h2d`` as in ``nsys_8step``
    (``False``: the torch.profiler recordings' labels). Raises :class:`KitError` for a recipe
    that traces nothing or a bad count."""

    name: str
    cuda: bool = True
    nvtx: bool = True
    osrt: bool = True
    osrt_threshold_ns: int = 10_000
    cpu_sampling: bool = False
    context_switches: bool = False
    cuda_memory_usage: bool = False
    trace_forks: bool = False
    capture_range: bool = False
    emit_nvtx: bool = False
    record_shapes: bool = True
    steps: int = 8
    warmup_steps: int = 0
    data_load_covers_h2d: bool = True
    description: str = ""

    def __post_init__(self):
        if not (self.cuda or self.nvtx or self.osrt):
            raise KitError(f"nsys recipe {self.name!r}: trace at least one of cuda, nvtx, osrt")
        for f in ("steps", "warmup_steps", "osrt_threshold_ns"):
            v = getattr(self, f)
            if not isinstance(v, int) or v < (1 if f == "steps" else 0):
                raise KitError(f"nsys recipe {self.name!r}: {f} must be an integer "
                               f"{'>= 1' if f == 'steps' else '>= 0'}, not {v!r}")

    def replace(self, **changes) -> "NsysRecipe":
        """A copy with some fields changed."""
        return replace(self, **changes)


#: The named recipes.
NSYS_RECIPES = {r.name: r for r in [
    NsysRecipe("nsys_8step", description="the reference nsys_8step: 8 steps from a cold DataLoader, "
                                         "-t cuda,nvtx,osrt --osrt-threshold=10000, CPU sampling and "
                                         "context switches off; data_load covers the transfer"),
    NsysRecipe("matched", data_load_covers_h2d=False,
               description="the Nsight half of a matched pair with the cold_start torch.profiler recipe: "
                           "8 cold steps, torch_step#N ranges, data_load = next() only, separate h2d"),
    NsysRecipe("emit_nvtx", osrt=False, capture_range=True, emit_nvtx=True, steps=2, warmup_steps=3,
               description="3 warm steps, then 2 steps under emit_nvtx(record_shapes=True) inside a "
                           "cudaProfilerApi capture range (cf. the reference nsys_emit_nvtx)"),
    NsysRecipe("system", cpu_sampling=True, context_switches=True,
               description="as nsys_8step with CPU sampling and context-switch tracing on"),
    NsysRecipe("workers", cpu_sampling=True, context_switches=True, trace_forks=True,
               description="as system, and the forked DataLoader workers traced too "
                           "(--trace-fork-before-exec=true): whether batch 0 was late from its worker "
                           "or queued behind pinning (lesson 04's open question)"),
]}


def _recipe(recipe) -> NsysRecipe:
    if isinstance(recipe, NsysRecipe):
        return recipe
    if recipe in NSYS_RECIPES:
        return NSYS_RECIPES[recipe]
    raise KitError(f"unknown nsys recipe {recipe!r}; known: {', '.join(NSYS_RECIPES)}")


def collectors(recipe) -> dict:
    """The collectors a recipe turns on, as the reference manifests list them: ``cuda``,
    ``nvtx``, ``osrt``, ``osrt_threshold_ns``, ``cpu_sampling``, ``context_switches``,
    ``cuda_memory_usage``, ``trace_forks``, ``capture_range`` (``"cudaProfilerApi"`` or
    ``None``), ``emit_nvtx``."""
    r = _recipe(recipe)
    return {"cuda": r.cuda, "nvtx": r.nvtx, "osrt": r.osrt,
            "osrt_threshold_ns": r.osrt_threshold_ns if r.osrt else None,
            "cpu_sampling": r.cpu_sampling, "context_switches": r.context_switches,
            "cuda_memory_usage": r.cuda_memory_usage, "trace_forks": r.trace_forks,
            "capture_range": "cudaProfilerApi" if r.capture_range else None, "emit_nvtx": r.emit_nvtx}


def workload_command(recipe, python: str | None = None, describe_to=None, workload_args=()) -> list:
    """The command ``nsys`` runs: ``python -m kitlib.capture.nsys_recipes run-workload …``
    (``describe_to``: where the workload describes itself; ``workload_args``: extra options)."""
    r = _recipe(recipe)
    cmd = [python or sys.executable, "-m", "kitlib.capture.nsys_recipes", "run-workload",
           "--steps", str(r.steps), "--warmup-steps", str(r.warmup_steps)]
    cmd.append("--data-load-covers-h2d" if r.data_load_covers_h2d else "--no-data-load-covers-h2d")
    if r.capture_range:
        cmd.append("--capture-range")
    if r.emit_nvtx:
        cmd.append("--emit-nvtx")
        if r.record_shapes:
            cmd.append("--record-shapes")
    if describe_to is not None:
        cmd += ["--describe-to", str(describe_to)]
    return cmd + [str(a) for a in workload_args]


def profile_command(recipe, output, nsys: str = "nsys", python: str | None = None, describe_to=None,
                    workload_args=()) -> list:
    """The ``nsys profile …`` command line of a recipe, ``-o output`` (nsys adds ``.nsys-rep``),
    followed by :func:`workload_command`'s."""
    r = _recipe(recipe)
    trace = ",".join(t for t, on in (("cuda", r.cuda), ("nvtx", r.nvtx), ("osrt", r.osrt)) if on)
    cmd = [str(nsys), "profile", "-t", trace]
    if r.osrt:
        cmd.append(f"--osrt-threshold={r.osrt_threshold_ns}")
    cmd += [f"--sample={'process-tree' if r.cpu_sampling else 'none'}",
            f"--cpuctxsw={'process-tree' if r.context_switches else 'none'}"]
    if r.cuda:
        cmd.append(f"--cuda-memory-usage={'true' if r.cuda_memory_usage else 'false'}")
    if r.trace_forks:
        cmd.append("--trace-fork-before-exec=true")
    if r.capture_range:
        cmd += ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"]
    cmd += ["-o", str(output), "--force-overwrite=true"]
    return cmd + workload_command(r, python, describe_to, workload_args)


#: ``nsys profile -o``'s stand-in for each process's ``RANK`` (``%q{ENV_VAR}``).
RANK_PATTERN = "%q{RANK}"


def torchrun_profile_command(recipe="nsys_8step", nproc: int = 2, output_prefix="report", *, nsys: str = "nsys",
                             python: str | None = None, device: str = "auto", workload_args=()) -> list:
    """One Nsight Systems report per rank of a torchrun launch: ``python -m torch.distributed.run
    --standalone --nproc_per_node=N --no-python nsys profile … -o <prefix>_%q{RANK} python -m
    kitlib.capture.nsys_recipes run-workload --device D …``; each rank's ``nsys`` names its
    report after its ``RANK`` (:data:`RANK_PATTERN`) and the workload joins the process group.
    Export with :func:`torchrun_export_commands`, read with
    :func:`kitlib.readers.nsys_ranks.load_nsys_ranks`. Raises :class:`KitError` for ``nproc``
    below 1 or an unknown recipe.

    Sources: docs/SOURCES.md#nsys-collectors"""
    _check_nproc(nproc)
    py = python or sys.executable
    inner = profile_command(recipe, f"{output_prefix}_{RANK_PATTERN}", nsys=nsys, python=py,
                            workload_args=["--device", device, *workload_args])
    return [py, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", "--no-python", *inner]


def _check_nproc(nproc) -> None:
    if not isinstance(nproc, int) or isinstance(nproc, bool) or nproc < 1:
        raise KitError(f"nproc must be a whole number of ranks, 1 or more, not {nproc!r}")


def torchrun_export_commands(nproc: int, output_prefix="report", nsys: str = "nsys") -> list:
    """The ``nsys export`` command of each rank's report (``<prefix>_<r>.nsys-rep`` →
    ``<prefix>_<r>.sqlite``), rank 0 first."""
    _check_nproc(nproc)
    return [export_command(f"{output_prefix}_{r}.nsys-rep", f"{output_prefix}_{r}.sqlite", nsys) for r in range(nproc)]


def export_command(report, sqlite, nsys: str = "nsys") -> list:
    """``nsys export --type sqlite --force-overwrite true -o SQLITE REPORT``."""
    return [str(nsys), "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(sqlite), str(report)]


def import_command(qdstrm, importer) -> list:
    """``QdstrmImporter -i FILE.qdstrm``: the ``.nsys-rep`` that ``nsys profile`` could not write."""
    return [str(importer), "-i", str(qdstrm)]


_INSTALL = ("Nsight Systems' command line `nsys` was not found ({why}). Install Nsight Systems "
            "(https://developer.nvidia.com/nsight-systems, or the `nsight-systems` / `cuda-nsight-systems` "
            "package of the CUDA repository), or point kitlib at it: on the command line pass "
            "--nsys /path/to/nsys, in Python nsys='/path/to/nsys', or set "
            f"{NSYS_ENV}. Also looked in: {', '.join(KNOWN_LOCATIONS)}. Without it, the lessons read the "
            "recorded export data/reference/nsys_8step/report.sqlite.")


def find_nsys(path=None, locations=KNOWN_LOCATIONS) -> Path:
    """The ``nsys`` executable: ``path`` (checked, never searched past), ``$KITLIB_NSYS``, the
    PATH, then ``locations`` (newest first). Raises :class:`NsysNotFound` saying what to
    install, or that a given path is not executable."""
    env = setting(NSYS_ENV) if path is None else None
    if path is not None or env:
        p = Path(path if path is not None else env)
        if p.is_file() and os.access(p, os.X_OK):
            return p
        given = p if path is not None else f"{NSYS_ENV}={env}"
        raise NsysNotFound(_INSTALL.format(why=f"{given} is not an executable file"))
    hit = shutil.which("nsys")
    if hit:
        return Path(hit)
    for pat in locations:
        for cand in sorted(glob.glob(pat), reverse=True):     # newest version first
            if os.access(cand, os.X_OK):
                return Path(cand)
    raise NsysNotFound(_INSTALL.format(why="not on the PATH"))


def find_importer(nsys) -> Path | None:
    """The ``QdstrmImporter`` of the same install as ``nsys``, or ``None``."""
    base = Path(nsys).resolve().parent
    for pat in ("QdstrmImporter", "../*/QdstrmImporter", "../../host-linux-x64/QdstrmImporter",
                "../host-linux-x64/QdstrmImporter"):
        for cand in sorted(glob.glob(str(base / pat))):
            if os.access(cand, os.X_OK):
                return Path(os.path.normpath(cand))
    return None


def _run(cmd, log, timeout_s, env=None, what="command"):
    log.write(f"$ {' '.join(cmd)}\n")
    log.flush()
    try:
        res = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        raise KitError(f"{what} ran longer than {timeout_s} s: {' '.join(cmd)}") from None
    return res.returncode


def capture_nsys(recipe="nsys_8step", out_dir=None, *, nsys=None, python: str | None = None,
                 workload_args=(), timeout_s: int = 1800, notes: str = "", run_id: str | None = None):
    """Run the workload under ``nsys profile``, export SQLite, and write a bundle (``out_dir``:
    default ``runs/<UTC time>_<recipe>``; ``timeout_s`` per subprocess; ``run_id``: two bundles
    with the same id are one run seen by two tools, :func:`kitlib.analyses.align.align`).

    Returns the opened bundle: kind ``nsys``, ``report.sqlite`` and ``nsys.log``; the recipe
    holds both command lines and :func:`collectors`, the provenance ``nsight_systems``.

    Raises :class:`NsysNotFound` (before any work) or :class:`KitError` (a subprocess failed or
    wrote no report; see ``nsys.log``)."""
    from ..readers.bundle import open_capture, software_provenance, write_bundle
    from .recipes import claim_out
    r = _recipe(recipe)
    exe = find_nsys(nsys)
    claim = claim_out(out_dir, r.name)
    out = claim.path
    base, sqlite, desc = out / "report", out / "report.sqlite", out / "workload.json"
    prof_cmd = profile_command(r, base, exe, python, desc, workload_args)
    exp_cmd = export_command(base.with_suffix(".nsys-rep"), sqlite, exe)
    t0 = time.perf_counter()
    with claim:
        with open(out / "nsys.log", "w") as log:
            rc = _run(prof_cmd, log, timeout_s, what="nsys profile")
            rep = base.with_suffix(".nsys-rep")
            qd = base.with_suffix(".qdstrm")
            if not rep.exists() and qd.exists():            # the importer could not run inside nsys
                imp = find_importer(exe)
                if imp is None:
                    raise KitError(f"{out / 'nsys.log'}: nsys left {qd.name} but no QdstrmImporter was found "
                                   f"beside {exe}")
                env = dict(os.environ)
                libdw = setting(LIBDW_ENV)
                if libdw:
                    env["LD_LIBRARY_PATH"] = libdw + os.pathsep + env.get("LD_LIBRARY_PATH", "")
                _run(import_command(qd, imp), log, timeout_s, env, "QdstrmImporter")
            if not rep.exists():
                raise KitError(f"{out / 'nsys.log'}: nsys profile (exit {rc}) wrote no {rep.name}; "
                               f"if a .qdstrm is left, set {LIBDW_ENV} to a folder holding libdw.so.1")
            if _run(exp_cmd, log, timeout_s, what="nsys export") != 0 or not sqlite.exists():
                raise KitError(f"{out / 'nsys.log'}: nsys export failed")
        version = subprocess.run([str(exe), "--version"], capture_output=True, text=True).stdout.strip()
        workload = json.loads(desc.read_text()) if desc.exists() else {}
        for f in (rep, qd, desc):
            if f.exists():
                f.unlink()
        prov = software_provenance()
        prov["nsight_systems"] = version
        write_bundle(out, kind="nsys", name=out.name,
                     files={"report.sqlite": f"nsys export --type sqlite of the {r.name} run",
                            "nsys.log": "the commands run and their output"},
                     recipe={"name": r.name, "command": " ".join(map(str, prof_cmd)),
                             "export_command": " ".join(map(str, exp_cmd)), "collectors": collectors(r),
                             "settings": asdict(r),
                             "nvtx_ranges": "push/pop torch_step#N > {" + ", ".join(
                                 ["data_load"] + ([] if r.data_load_covers_h2d else ["h2d"])
                                 + ["forward", "backward", "optimizer"]) + "}"
                             + (" + one range per operator (emit_nvtx)" if r.emit_nvtx else "")},
                     workload=workload, provenance=prov, origin="live", notes=notes,
                     extra={"run_id": run_id, "elapsed_s": round(time.perf_counter() - t0, 3)})
    return open_capture(out)


def run_workload(steps: int = 8, warmup_steps: int = 0, *, data_load_covers_h2d: bool = True,
                 capture_range: bool = False, emit_nvtx: bool = False, record_shapes: bool = True,
                 describe_to=None, progress: bool = False, **config) -> list:
    """The steps an Nsight Systems capture records (inside ``nsys profile``): ``warmup_steps``,
    ``torch.cuda.profiler.start()`` with ``capture_range``, ``steps`` steps each in a
    ``torch_step#N`` range (under ``emit_nvtx`` when asked), a synchronisation, ``stop()``.
    Under torchrun it joins the process group first. ``**config``: ``WorkloadConfig`` fields.
    Returns each step's wall-clock marks (:func:`kitlib.capture.workload.train_step`)."""
    import contextlib

    import torch

    from .workload import WorkloadConfig, build_workload, init_distributed, torchrun_env
    cfg = WorkloadConfig.for_device(config.pop("device", "auto"), data_load_covers_h2d=data_load_covers_h2d,
                                    **{k: v for k, v in config.items() if v is not None})
    if torchrun_env() is not None:           # one rank of torchrun_profile_command: DDP in a process group
        init_distributed(cfg.device)
    marks: list = []
    with build_workload(cfg, progress=progress) as wl:
        cuda = wl.device.type == "cuda"
        for i in range(warmup_steps):
            wl.step(step_label=f"warmup#{i}")
        wl.sync()
        if capture_range and cuda:
            torch.cuda.profiler.start()
        ctx = torch.autograd.profiler.emit_nvtx(record_shapes=record_shapes) if emit_nvtx else contextlib.nullcontext()
        try:
            with ctx:
                for i in range(warmup_steps, warmup_steps + steps):
                    wl.step(step_label=f"torch_step#{i}", marks=marks)
                wl.sync()
        finally:
            if capture_range and cuda:
                torch.cuda.profiler.stop()
        if describe_to is not None:
            d = wl.describe()
            d["recorded_steps"] = steps
            d["warmup_steps"] = warmup_steps
            Path(describe_to).write_text(json.dumps(d, indent=1, default=str) + "\n")
    return marks


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m kitlib.capture.nsys_recipes",
                                description="Nsight Systems captures of the course workload.")
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("run-workload", help="run the labelled training steps (what nsys profile starts)")
    w.add_argument("--steps", type=int, default=8)
    w.add_argument("--warmup-steps", type=int, default=0)
    w.add_argument("--data-load-covers-h2d", dest="data_load_covers_h2d", action="store_true", default=True)
    w.add_argument("--no-data-load-covers-h2d", dest="data_load_covers_h2d", action="store_false")
    for flag in ("--capture-range", "--emit-nvtx", "--record-shapes"):
        w.add_argument(flag, action="store_true")
    w.add_argument("--describe-to")
    w.add_argument("--device", default="auto")
    w.add_argument("--batch-size", type=int)
    w.add_argument("--image-size", type=int)
    w.add_argument("--straggler-rank", type=int, metavar="R",
                   help="under torchrun: rank R sleeps --straggler-ms at the start of every step")
    w.add_argument("--straggler-ms", type=float, metavar="MS")
    w.add_argument("--workers", "--num-workers", dest="num_workers", type=int, metavar="N",
                   help="DataLoader worker processes (the same option as "
                        "'python -m kitlib profile --workers'; --num-workers is kept as an alias)")
    c = sub.add_parser("capture", help="run nsys profile + export and write a bundle",
                       description="Run the course workload under `nsys profile` with a recipe, export the "
                                   "report to SQLite (`nsys export --type sqlite`) and write a bundle "
                                   "(report.sqlite, nsys.log, manifest.json) that the lessons read.")
    c.add_argument("--recipe", default="nsys_8step", choices=list(NSYS_RECIPES),
                   help="what to record (see `python -m kitlib.capture.nsys_recipes commands`; "
                        "default: nsys_8step, as the reference recording)")
    c.add_argument("--out", metavar="DIR", help="bundle folder to write, new or empty (default: "
                                                "runs/<UTC time>_<recipe>/)")
    c.add_argument("--nsys", metavar="PATH", help=f"the nsys executable (default: ${NSYS_ENV}, the PATH, "
                                                  "then the usual install folders)")
    c.add_argument("--run-id", metavar="ID", help="stored in the manifest: two bundles with the same id are "
                                                  "one run seen by two tools (lesson 09's alignment)")
    sub.add_parser("commands", help="print the command lines of every recipe").add_argument(
        "--nsys", default="nsys", metavar="PATH", help="the nsys executable to write into the lines (default: nsys)")
    return p


def main(argv=None) -> int:
    """Command-line entry point (``python -m kitlib.capture.nsys_recipes …``)."""
    a = _parser().parse_args(argv)
    if a.command == "run-workload":
        run_workload(**{k: v for k, v in vars(a).items() if k != "command"})   # options named as its arguments
        print("nsys workload done", flush=True)
    elif a.command == "capture":
        try:
            cap = capture_nsys(a.recipe, a.out, nsys=a.nsys, run_id=a.run_id)
        except KitError as e:
            msg = str(e).replace(", in Python nsys='/path/to/nsys',", ",") if isinstance(e, NsysNotFound) else str(e)
            print(f"kitlib: error: {msg}", file=sys.stderr)
            return 2
        print(cap.path)
    else:
        print(commands_text(a.nsys), end="")
    return 0


def commands_text(nsys: str = "nsys") -> str:
    """``commands``' output: per recipe its ``nsys profile`` and ``nsys export`` lines."""
    out = []
    for name, r in NSYS_RECIPES.items():
        out.append(f"# {name}: {r.description}\n"
                   f"{' '.join(map(str, profile_command(r, 'report', nsys)))}\n"
                   f"{' '.join(map(str, export_command('report.nsys-rep', 'report.sqlite', nsys)))}\n")
    return "\n".join(out) + "\n# then, in Python: kitlib.load_nsys('report.sqlite')\n"


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KitError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
