"""``python -m kitlib``: the capture layer's commands (:mod:`kitlib.capture.cli`) and the course's:

``answers [--lesson NN] [--out FILE] [--clinic]``
    The exercises' answer key, computed from the recordings in use (for instructors).
``workspace [--dest DIR]``
    Copy the lessons into a git-ignored workspace; lessons already there are kept.
``cache --build DIR [NAME ...]``
    Parse the shipped recordings into a trace cache to share read-only (``KITLIB_SHARED_CACHE``)."""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from ..capture import cli as capture_cli
from ..errors import KitError, KitFileError
from ..paths import make_folder, repo_root

COMMANDS = ("answers", "workspace", "cache")


#: ``{lesson: builder}``: the exercises from the recordings, as the replay cells build them, or
#: ``(exercises, labels)`` naming the recordings used (lesson 01's come from the learner's run).
def _builders():
    from . import exercises
    from . import replay_capture as rec
    from . import ranks

    def l04():
        return exercises.lesson04({"cold": rec("cold_start_8step"), "timing": rec("profiler_5step")})

    def l09():
        return exercises.lesson09(rec("nsys_8step"), emit=rec("nsys_emit_nvtx"))

    def l10():
        cap = rec("profiler_5step")
        return exercises.lesson10(cap, series=cap.step_times(), trace_capture=cap)

    def l12():
        runs = ranks.recordings(live=False)          # the recordings in use, never a live torchrun
        slow, nccl = runs["straggler"], runs["nccl"]
        ex = exercises.lesson12(slow, nccl, injected_ms=ranks.straggler_delay(slow)["ms"], balanced=runs["balanced"])
        return ex, [slow.label, nccl.label]

    return {
        "00": lambda: exercises.lesson00(rec("profiler_5step")),
        "02": lambda: exercises.lesson02(rec("profiler_5step")),
        "03": lambda: exercises.lesson03(rec("profiler_5step")),
        "04": l04,
        "05": lambda: exercises.lesson05(rec("fixed_batch")),
        "06": lambda: exercises.lesson06(rec("fixed_batch")),
        "07": lambda: exercises.lesson07(rec("profiler_5step")),
        "08": lambda: exercises.lesson08(rec("fixed_batch")),
        "09": l09,
        "10": l10,
        "11": lambda: exercises.lesson11(),
        "12": l12,
        "13": lambda: exercises.lesson13(),
    }


def _key_answer(v) -> str:
    """An answer as the key prints it: ``yes``/``no``, a plain number (not ``np.float64(..)``), quoted text."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    return repr(v.item() if type(v).__module__ == "numpy" and hasattr(v, "item") else v)


def _tolerance_text(q) -> str:
    """`` (accepted within ±0.5 %: why)`` for a number judged with a tolerance, else ``""``."""
    if not q.tolerance or isinstance(q.answer, (bool, str)):
        return ""
    why = f": {q.tolerance_why}" if q.tolerance_why else ""
    return f" (accepted within ±{q.tolerance:.2%}{why})"


#: What the key says for lesson 01, whose exercises are built from each learner's own run.
LESSON01_LINE = ("Computed from each learner's own CPU run, recorded in the lesson (the counts follow the "
                 "lesson's code, the times and the top operator differ by machine): run `ex.reveal(\"<key>\")` "
                 "in the learner's notebook.")


def _build(make) -> tuple:
    """``(exercises, labels of the recordings used)`` from a builder of :func:`_builders`."""
    from ..readers.bundle import OPEN_LOG
    start = len(OPEN_LOG)
    ex = make()
    return ex if isinstance(ex, tuple) else (ex, OPEN_LOG[start:])


def answer_key(lessons=None) -> str:
    """The answer key as Markdown: per lesson (two-digit numbers, default all), each question's
    key, prompt, answer and explanation, under the recordings it was computed from.

    Raises KitError: an unknown lesson number."""
    builders = _builders()
    wanted = list(lessons) if lessons else sorted(["01", *builders])
    out = ["# Answer key", "",
           "Computed by `python -m kitlib answers` from the recordings in use; not for the students' copies.", ""]
    for n in wanted:
        n = f"{int(n):02d}" if str(n).isdigit() else str(n)
        if n == "01":
            out += ["## Lesson 01", "", LESSON01_LINE, ""]
            continue
        if n not in builders:
            raise KitError(f"no exercises for lesson {n!r}; lessons: 01, {', '.join(builders)}")
        ex, used = _build(builders[n])
        out += [f"## Lesson {n}: {ex.title}", ""]
        if used:
            out += ["data: " + "; ".join(dict.fromkeys(used)), ""]
        for q in ex.questions:
            out += [f"- **{q.key}** ({q.kind or 'recall'}): {q.prompt}", f"  - answer: `{_key_answer(q.answer)}`"
                    + _tolerance_text(q), f"  - why: {q.explain}"]
        out.append("")
    return "\n".join(out)


def lessons_dir() -> Path:
    """The checkout's ``lessons/`` folder.

    Raises KitError: kitlib was installed without a checkout."""
    root = repo_root()
    if root is None or not (root / "lessons").is_dir():
        raise KitError("the lessons are not installed with the package: clone the course repository and run "
                       "this command from the checkout (python -m pip install -e . there)")
    return root / "lessons"


def make_workspace(dest=None, source=None) -> dict:
    """Copy the lessons (default the checkout's) into ``dest`` (default ``<checkout>/workspace``).

    Returns ``{dest, added, kept}``: lessons copied now, and those already there, left as they are.

    Raises KitError: ``dest`` is a file, or it or a lesson in it cannot be written."""
    src = Path(source) if source else lessons_dir()
    dest = make_folder(Path(dest) if dest else src.parent / "workspace", "workspace --dest")
    added, kept = [], []
    for nb in sorted(src.glob("[0-9][0-9]_*.ipynb")):
        target = dest / nb.name
        if target.exists():
            kept.append(nb.name)
        else:
            try:
                shutil.copy2(nb, target)
            except OSError as e:
                raise KitError(f"workspace --dest {dest}: cannot write {nb.name} ({e.strerror or e})") from None
            added.append(nb.name)
    return {"dest": dest, "added": added, "kept": kept}


def shipped_recordings() -> dict:
    """``{name: folder}`` of the shipped recordings: each folder of
    :func:`~kitlib.readers.bundle.reference_dir`, then the clinic's as ``clinic/<device>/<case>``."""
    from ..readers.bundle import clinic_dir, reference_dir
    out = {}
    ref, clinic = reference_dir(), clinic_dir()
    if ref.is_dir():
        out.update({d.name: d for d in sorted(ref.iterdir()) if d.is_dir() and not d.name.startswith(".")})
    if clinic.is_dir():
        for dev in sorted(d for d in clinic.iterdir() if d.is_dir()):
            out.update({f"clinic/{dev.name}/{d.name}": d for d in sorted(dev.iterdir()) if d.is_dir()})
    return out


def _read_recording(folder: Path) -> int:
    """Load every torch.profiler trace of one recording as the lessons do (so it is cached under
    the key they ask for); returns how many."""
    from ..readers.bundle import MANIFEST, open_capture
    from ..readers.ranks import load_traces
    from ..readers.trace import load_trace
    n = 0
    for d in [folder, *sorted(x for x in folder.rglob("*") if x.is_dir())]:
        if d.name.startswith("rank") and (d.parent / "rank0").is_dir():
            continue                                   # read with its run, below
        if (d / "rank0").is_dir():
            n += len(load_traces(d, progress=False).traces)
        elif (d / MANIFEST).is_file():
            name = next((f for f in ("trace.json.gz", "trace.json") if (d / f).is_file()), None)
            if name:                                   # as Capture.trace reads it (never its in-memory copy)
                cap = open_capture(d)
                load_trace(cap.file(name), torch_version=cap.provenance.get("torch"), progress=False)
                n += 1
        else:                                          # the public traces: plain files, no manifest
            for f in sorted(d.glob("*.json.gz")):
                load_trace(f, progress=False)
                n += 1
    return n


def build_cache(dest, names=None, out=print) -> dict:
    """Parse the shipped recordings (``names``, default all) into a trace cache at ``dest``, then read
    them back from it alone; ``out`` gets one progress line per recording and a summary.

    Returns ``{recordings, traces, parsed, entries, bytes, seconds}``.

    Raises KitError: an unknown name; ``KITLIB_TRACE_CACHE`` is off; an entry was not written."""
    import os
    import time
    from unittest import mock
    from ..readers import trace_cache
    if not trace_cache.enabled():
        raise KitError("KITLIB_TRACE_CACHE is off: nothing would be cached; unset it to build the cache")
    known = shipped_recordings()
    names = list(names) if names else list(known)
    bad = [n for n in names if n not in known]
    if bad:
        raise KitError(f"no shipped recording named {', '.join(bad)}; recordings: {', '.join(known)}")
    dest = Path(dest).expanduser().resolve()
    dest.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    n_traces = 0
    parsed0 = trace_cache.hits["parsed"]
    # written as a learner's own cache would be, reading no other shared one
    with mock.patch.dict(os.environ, {"KITLIB_CACHE": str(dest), "KITLIB_SHARED_CACHE": ""}):
        for i, name in enumerate(names, 1):
            t = time.perf_counter()
            n = _read_recording(known[name])
            trace_cache.wait()
            n_traces += n
            what = f"{n} trace{'s' * (n != 1)}" if n else "no torch.profiler trace (nothing to parse)"
            out(f"[{i}/{len(names)}] {name}: {what}, {time.perf_counter() - t:.1f} s")
    parsed = trace_cache.hits["parsed"] - parsed0
    # every trace read back from dest alone
    import tempfile
    with tempfile.TemporaryDirectory() as own, \
            mock.patch.dict(os.environ, {"KITLIB_CACHE": own, "KITLIB_SHARED_CACHE": str(dest)}):
        before = trace_cache.hits["parsed"]
        for name in names:
            _read_recording(known[name])
        missing = trace_cache.hits["parsed"] - before
    if missing:
        raise KitError(f"{dest}: {missing} of {n_traces} traces were not cached (is the folder writable, "
                       "the disk full?)")
    files = [f for f in dest.rglob("*") if f.is_file()]
    entries = sum(1 for d in (dest / "traces").iterdir() if d.is_dir() and not d.name.startswith(".")) \
        if (dest / "traces").is_dir() else 0
    r = {"recordings": len(names), "traces": n_traces, "parsed": parsed, "entries": entries,
         "bytes": sum(f.stat().st_size for f in files), "seconds": time.perf_counter() - t0}
    out(f"{dest}: {r['recordings']} recordings, {r['traces']} traces ({r['parsed']} parsed now), "
        f"{r['entries']} entries, {r['bytes'] / 1e6:.1f} MB, {r['seconds']:.1f} s")
    return r


def build_parser() -> argparse.ArgumentParser:
    """``python -m kitlib``'s parser: the capture layer's commands plus the course's."""
    top = capture_cli.build_parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    sub.metavar = "{profile,info,summary,record-course,record-clinic,answers,workspace,cache}"
    a = sub.add_parser("answers", help="the exercises' answer key, from the recordings in use (instructors)",
                       description="Print the answer key of every lesson's exercises, computed from the "
                                   "recordings the lessons would replay here (KITLIB_REPLAY_DIR, else the "
                                   "kit's). Never stored in the lessons.")
    a.add_argument("--lesson", action="append", metavar="NN", help="only this lesson (repeatable)")
    a.add_argument("--out", metavar="FILE", help="write the key to FILE instead of printing it")
    a.add_argument("--clinic", action="store_true",
                   help="the clinic's key instead (lesson 13: each case's cause, fix, evidence and settings)")
    w = sub.add_parser("workspace", help="copy the lessons into a git-ignored folder of your own",
                       description="Copy lessons/*.ipynb into a workspace (default <checkout>/workspace, "
                                   "git-ignored). Work there: pulling course updates never conflicts "
                                   "with your answers. Lessons already in the workspace are kept; delete "
                                   "one to get the course's new version.")
    w.add_argument("--dest", metavar="DIR", help="the workspace folder (default <checkout>/workspace)")
    c = sub.add_parser("cache", help="build the trace cache of every shipped recording, to share read-only",
                       description="Parse every recording shipped with the kit (python -m kitlib info's, the "
                                   "public traces and the clinic's cases) into a trace cache at DIR. Make it "
                                   "read-only and set KITLIB_SHARED_CACHE=DIR for every learner: their "
                                   "kernels then read the tables there and never parse a shipped recording.")
    c.add_argument("--build", metavar="DIR", required=True, help="the folder to build the cache in")
    c.add_argument("names", nargs="*", metavar="NAME", help="only these recordings (default: all)")
    return top


def _answer_file(out) -> Path:
    """``answers --out FILE`` checked before the key is worked out: a new file in an existing folder
    (an existing file may be a learner's notebook, issue 41).

    Raises KitError: ``FILE`` is a folder or its folder is missing; KitFileError: ``FILE`` exists."""
    path = Path(out)
    if path.is_file() or path.is_symlink():
        raise KitFileError(path, "already exists; answers --out never replaces a file (it may be your "
                                 "work): give a new file name, or move this one away first")
    if path.is_dir():
        raise KitError(f"--out {out}: is a folder; give the answer key's file name, e.g. {path / 'answers.md'}")
    if not path.parent.is_dir():
        what = "is not a folder" if path.parent.exists() else "does not exist"
        raise KitError(f"--out {out}: cannot write the answer key there: {path.parent} {what}")
    return path


def run(args) -> int:
    """Run ``answers``, ``workspace`` or ``cache`` from parsed arguments."""
    if args.command == "cache":
        build_cache(args.build, args.names)
        return 0
    if args.command == "answers":
        path = _answer_file(args.out) if args.out else None
        if args.clinic:
            from ..capture.clinic import answer_key as clinic_key
            text = clinic_key()
        else:
            text = answer_key(args.lesson)
        if path is not None:
            try:
                with open(path, "x") as f:      # "x": a file made since the check is not replaced either
                    f.write(text + "\n")
            except FileExistsError:
                raise KitFileError(path, "already exists; answers --out never replaces a file: give a "
                                         "new file name") from None
            except OSError as e:
                raise KitError(f"--out {args.out}: cannot write the answer key ({e.strerror or e})") from None
            print(f"answer key written to {args.out}")
        else:
            print(text)
        return 0
    r = make_workspace(args.dest)
    print(f"workspace {r['dest']}: {len(r['added'])} lessons copied, {len(r['kept'])} kept as they were. "
          f"Start with: jupyter lab {r['dest']}")
    return 0


def main(argv=None) -> int:
    """Entry point of ``python -m kitlib`` (exit statuses: :func:`kitlib.capture.cli.main`)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    if args.command not in COMMANDS:
        return capture_cli.main(argv)
    try:
        return run(args)
    except KitError as e:
        print(f"kitlib: error: {e}", file=sys.stderr)
        return 2
