"""Mutants of the lessons' question builders (kitlib/course/exercises/lNN.py), judged by the
verdicts they give on the recordings (issue 31: "a survivor that changes a picture or a
verdict is a missing test").

    python tools/exercise_mutants.py [00 02 ...] [--json out.json] [--timeout 120] [--limit N]

For each lesson the questions are built once, unmutated, with the answer key's builders
(``kitlib.course.cli._builders()``; lesson 01 from one small CPU run made here, as
tests/lessons/test_answers_l01.py makes it). Then, for each mutant of ``lNN.py`` (the edits of
``tools/mutate.py``), a forked child (the recordings already loaded and cached in the parent,
so a mutant costs only the rebuild) executes the mutated source as the module
``kitlib.course.exercises.lNN``, rebuilds the questions, and computes a *verdict digest*:
per question key, the answer, kind, unit, tolerance, choices, the traps' answers, and the
verdict (right or not, and its message) on a fixed probe set taken from the unmutated
question (the answer, ×1.05, ×0.95, ×1000, each trap's answer, each choice, "yes", "no";
each probe judged on a fresh question: no earlier wrong try, no prediction kept).

Each mutant is then
- ``same``: the digest equals the unmutated one (equivalent on the recordings in use);
- ``changed``: the digest differs (``fields`` names what differs: ``answer``, ``verdict``
  (right/wrong on a probe), ``message`` (only a message's text), ``tolerance``, ``traps``,
  ``choices``, ``kind``, ``unit``, ``keys``): a changed verdict the module's tests must catch
  (run them with ``tools/mutate.py ... --select``);
- ``error``: building the questions raises (the lesson's cell would fail: caught by the
  lesson-run tests);
- ``timeout``: the rebuild ran past ``--timeout``.

With ``--kill`` (after a run that wrote ``--json``), each ``changed`` mutant of the lessons
named is run against the lesson's own tests, tests/lessons/test_answers_lNN.py, in a forked child
too (pytest in the child, the mutant installed as above, the recordings already cached):
``killed`` when the tests fail, ``survived`` when they pass. A test that starts a
subprocess would import the unmutated module there, so a survivor is confirmed with
``python tools/mutate.py kitlib/course/exercises/lNN.py --tests tests/lessons/test_answers_lNN.py
--select <indices>``, which runs the tests on a mutated copy of the package.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import signal
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ["KITLIB_MODE"] = "replay"

from mutate import mutants  # noqa: E402

LESSONS = ["00", "01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12", "13"]


def _plain(v):
    if type(v).__module__ == "numpy" and hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float):
        return float(f"{v:.12g}") if math.isfinite(v) else repr(v)
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v if isinstance(v, (int, str, bool, type(None))) else repr(v)


def _probes(q) -> list:
    """The fixed inputs each question is judged on (from the unmutated question)."""
    out = [q.answer]
    a = _plain(q.answer)
    if isinstance(a, (int, float)) and not isinstance(a, bool):
        out += [a * 1.05, a * 0.95, a * 1000]
    out += [t for t, _ in (q.traps or [])]
    out += list(q.choices or [])
    out += ["yes", "no"]
    seen, uniq = set(), []
    for p in out:
        k = repr(_plain(p))
        if k not in seen:
            seen.add(k)
            uniq.append(p)
    return uniq


def digest(ex, probes: dict | None = None) -> dict:
    """Per question key: what decides its verdicts, and its verdicts on the probes."""
    out = {}
    for q in ex.questions:
        ps = probes.get(q.key, []) if probes is not None else _probes(q)
        verdicts = []
        for p in ps:
            tries, pred = q.wrong_tries, q.prediction
            q.wrong_tries, q.prediction = 0, ...
            try:
                v = q.judge(p)
                verdicts.append([repr(_plain(p)), v.correct, str(v.message)])
            except Exception as e:  # noqa: BLE001 - a raising judge is a changed verdict
                verdicts.append([repr(_plain(p)), "raises", type(e).__name__])
            finally:
                q.wrong_tries, q.prediction = tries, pred
        out[q.key] = {"answer": repr(_plain(q.answer)), "kind": q.kind, "unit": q.unit,
                      "tolerance": _plain(q.tolerance), "choices": _plain(list(q.choices or [])),
                      "traps": [repr(_plain(t)) for t, _ in (q.traps or [])], "verdicts": verdicts}
    return out


def _differences(base: dict, new: dict) -> list:
    if list(base) != list(new):
        return ["keys"]
    fields = set()
    for k in base:
        b, n = base[k], new[k]
        for f in ("answer", "kind", "unit", "tolerance", "choices", "traps"):
            if b[f] != n[f]:
                fields.add(f)
        for vb, vn in zip(b["verdicts"], n["verdicts"]):
            if vb[1] != vn[1]:
                fields.add("verdict")
            elif vb[2] != vn[2]:
                fields.add("message")
    return sorted(fields)


def _lesson01_builder():
    """Lesson 01 from one small CPU run (kitlib.course.first_profile), made once."""
    import tempfile
    rec = {}

    def build():
        if not rec:
            from kitlib.course import first_profile
            rec.update(first_profile.record_small_profile(Path(tempfile.mkdtemp(prefix="exmut_l01_"))))
        from kitlib.course.exercises import l01
        return l01.questions(rec["trace"], rec["memory_timeline"])
    return build


def builders() -> dict:
    """``{"00": build, ...}``: the answer key's builders, the recordings they open memoised."""
    import kitlib.course as course
    opened = {}
    real = course.replay_capture

    def cached(name):
        if name not in opened:
            opened[name] = real(name)
        return opened[name]
    course.replay_capture = cached
    from kitlib.course import cli
    b = dict(cli._builders())
    b["01"] = _lesson01_builder()
    return b


def _build(build):
    ex = build()
    return ex[0] if isinstance(ex, tuple) else ex


def _install(name: str, text: str):
    """Execute ``text`` as the module ``name`` (a fresh module object of that name and package)."""
    import importlib
    old = importlib.import_module(name)
    mod = types.ModuleType(name, old.__doc__)
    mod.__file__, mod.__package__, mod.__spec__ = old.__file__, old.__package__, old.__spec__
    sys.modules[name] = mod
    pkg = sys.modules[old.__package__]
    setattr(pkg, name.rsplit(".", 1)[1], mod)
    exec(compile(text, old.__file__, "exec"), mod.__dict__)


def run_mutant(name: str, text: str, build, probes: dict, timeout: float):
    """Fork; the child installs the mutant, rebuilds, and sends back its digest (or error)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            import warnings
            warnings.simplefilter("ignore")
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            try:
                _install(name, text)
                res = ("ok", digest(_build(build), probes))
            except BaseException as e:  # noqa: BLE001
                res = ("error", f"{type(e).__name__}: {str(e)[:200]}")
            data = pickle.dumps(res)
        except BaseException as e:  # noqa: BLE001
            data = pickle.dumps(("error", f"{type(e).__name__}: {e}"[:200]))
        with os.fdopen(w, "wb") as f:
            f.write(data)
        os._exit(0)
    os.close(w)
    chunks, t0 = [], time.time()
    os.set_blocking(r, False)
    while True:
        try:
            c = os.read(r, 1 << 20)
        except BlockingIOError:
            c = None
        if c:
            chunks.append(c)
            continue
        if c == b"":
            break
        if time.time() - t0 > timeout:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
            return ("timeout", None)
        time.sleep(0.02)
    os.close(r)
    os.waitpid(pid, 0)
    try:
        return pickle.loads(b"".join(chunks))
    except Exception as e:  # noqa: BLE001
        return ("error", f"child died: {e}")


class _OnlyExerciseTests:
    """A pytest plugin that keeps the tests that can see the module: those that use a
    fixture named ``ex`` or whose code names ``exercises`` or ``lNN`` (the others, the
    lesson's sentences pinned to the raw files, cannot catch a mutant of it), less those that
    read an executed notebook and not ``ex`` (``executed_lesson``, ``lesson_on_live_capture``:
    the notebook runs in a kernel of its own, which imports the unmutated module, and it
    cost 15-20 s a child, each child being a new pytest session)."""

    def __init__(self, n: str):
        self.n = n

    def pytest_collection_modifyitems(self, config, items):
        import inspect
        for mod in {id(it.module): it.module for it in items if getattr(it, "module", None)}.values():
            _rebind(mod, f"kitlib.course.exercises.l{self.n}")
        keep, drop = [], []
        for it in items:
            try:
                code = inspect.getsource(it.function)
            except (OSError, TypeError, AttributeError):
                code = ""
            names = set(getattr(it, "fixturenames", ()))
            uses = "ex" in names or (("exercises" in code or f"l{self.n}" in code)
                                     and not names & {"executed_lesson", "lesson_on_live_capture"})
            (keep if uses else drop).append(it)
        if drop:
            config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _pytest(tests: list, n: str, *extra: str) -> int:
    import pytest
    return int(pytest.main(["-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", *extra, *tests],
                           plugins=[_OnlyExerciseTests(n)]))


#: the children's pytest ``--basetemp`` (each child empties it): without it each child's
#: session makes a numbered folder under pytest-of-<user> and deletes all but the newest
#: three, the parent's included, where a module's once-made files lie (lesson 01's CPU run)
_CHILD_TMP: list = []


_KEPT: dict = {}


def _kept_raw_trace_events(path):
    """tests/conftest.py's raw trace reader with a cache that is never cleared: the parent
    reads each raw file once, every forked child finds it parsed (the conftest's own cache is
    emptied when each module ends, and pytest imports the conftest afresh each session)."""
    if str(path) not in _KEPT:
        import gzip
        import orjson
        _KEPT[str(path)] = orjson.loads(gzip.decompress(Path(path).read_bytes()))["traceEvents"]
    return _KEPT[str(path)]


def _rebind(mod, name: str):
    """In a test module (kept from the parent's run: pytest imports a test module once per
    process): the raw reader made :func:`_kept_raw_trace_events`, and a name bound to the
    exercise module ``name`` or to one of its functions (``from kitlib.course.exercises
    import l13``) bound to the one installed now, the mutant in a child."""
    if getattr(mod, "raw_trace_events", None) is not None:
        mod.raw_trace_events = _kept_raw_trace_events
    now = sys.modules.get(name)
    if now is None:
        return
    for k, v in list(vars(mod).items()):
        if isinstance(v, types.ModuleType) and v.__name__ == name and v is not now:
            setattr(mod, k, now)
        elif callable(v) and getattr(v, "__module__", None) == name and hasattr(now, getattr(v, "__name__", "")) \
                and getattr(now, v.__name__) is not v:
            setattr(mod, k, getattr(now, v.__name__))


def run_tests(name: str, text: str | None, tests: list, timeout: float, n: str = "") -> str:
    """``killed``/``survived``/``timeout`` of the mutant ``text`` against ``tests`` (the
    exercise tests of them), with pytest in a forked child."""
    pid = os.fork()
    if pid == 0:
        rc = 3
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            if text is not None:
                _install(name, text)
            rc = _pytest(tests, n, *(f"--basetemp={d}" for d in _CHILD_TMP[:1]))
        except BaseException:  # noqa: BLE001
            rc = 4
        os._exit(min(rc, 255))
    t0 = time.time()
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return "survived" if os.waitstatus_to_exitcode(status) == 0 else "killed"
        if time.time() - t0 > timeout:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.1)


def kill(lessons: list, results: dict, out: Path, timeout: float, subtle: bool = False, select=None):
    """Run each ``changed`` mutant of ``lessons`` against tests/lessons/test_answers_lNN.py (the
    lesson's recordings opened first, so each child finds them parsed)."""
    import tempfile
    builders()                      # replay_capture made to keep what it opens: the children find it
    os.chdir(ROOT)
    sys.path.insert(0, str(ROOT / "tests"))
    _CHILD_TMP[:] = [str(Path(tempfile.mkdtemp(prefix="exmut_kill_")) / "child")]
    for n in lessons:
        n = f"{int(n):02d}"
        if n not in results:
            continue
        name = f"kitlib.course.exercises.l{n}"
        src = (ROOT / "kitlib" / "course" / "exercises" / f"l{n}.py").read_text()
        tests = [str(ROOT / "tests" / "lessons" / f"test_answers_l{n}.py")]
        every = list(mutants(src, None))
        rows = results[n]["rows"]
        if len(every) != len(rows) or any((r["line"], r["edit"]) != (m[1], m[2]) for r, m in zip(rows, every)):
            raise SystemExit(f"lesson {n}: l{n}.py changed since the run that wrote the json; run it again")
        # the unmutated tests, once in this process: they pass, and what they read stays parsed
        # (no answer-key build before them: lesson 13's questions share state between builds,
        # and a build made here first changed a feedback message its tests read)
        rc = _pytest(tests, n)
        if rc != 0:
            raise SystemExit(f"lesson {n}: {tests[0]} fails without a mutant (pytest exit {rc})")
        # what the parent holds now (recordings, raw events, the tests' cached expectations)
        # is left out of every child's garbage collections: pytest collects five times at the
        # end of a session, which on this heap cost 2.7 s a child and copied its pages
        import gc
        gc.collect()
        gc.freeze()
        todo = [r for r in rows if r["status"] == "changed" and not (subtle and (
            "answer" in r["fields"] or r["fields"] == ["message"]))
            and (select is None or r["index"] in select)]
        print(f"lesson {n}: {len(todo)} changed mutants against {Path(tests[0]).name}", flush=True)
        for r in todo:
            t0 = time.time()
            r["tests"] = run_tests(name, every[r["index"]][3], tests, timeout, n)
            print(f"  [{r['index']}] {r['tests']:8s} {r['function']} line {r['line']}: {r['edit']} "
                  f"{r.get('fields')} {r.get('questions')} ({time.time() - t0:.0f} s)", flush=True)
        results[n]["killed"] = sum(r.get("tests") == "killed" for r in todo)
        results[n]["survivors"] = [r["index"] for r in todo if r.get("tests") != "killed"]
        print(f"lesson {n}: {results[n]['killed']} of {len(todo)} killed; survivors: "
              f"{','.join(map(str, results[n]['survivors']))}", flush=True)
        out.write_text(json.dumps(results, indent=1))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lessons", nargs="*", default=LESSONS)
    ap.add_argument("--json", default=None, help="write the results here (one object per lesson)")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--kill", action="store_true",
                    help="run the changed mutants in --json against tests/lessons/test_answers_lNN.py")
    ap.add_argument("--subtle", action="store_true",
                    help="with --kill: only the changed mutants that keep every answer and change more "
                         "than a message (a trap, a tolerance, a verdict on a probe): the likeliest survivors")
    ap.add_argument("--select", default=None, help="with --kill: only these mutant indices (each lesson named)")
    a = ap.parse_args(argv)
    import warnings
    warnings.simplefilter("ignore")
    results = {}
    if a.json and Path(a.json).exists():
        results = json.loads(Path(a.json).read_text())
    if a.kill:
        if not a.json:
            raise SystemExit("--kill needs the --json of a run")
        kill(a.lessons, results, Path(a.json), max(a.timeout, 300), a.subtle,
             {int(i) for i in a.select.split(",")} if a.select else None)
        return 0
    b = builders()
    for n in a.lessons:
        n = f"{int(n):02d}"
        name = f"kitlib.course.exercises.l{n}"
        src = (ROOT / "kitlib" / "course" / "exercises" / f"l{n}.py").read_text()
        t0 = time.time()
        ex = _build(b[n])
        base = digest(ex)
        probes = {q.key: _probes(q) for q in ex.questions}
        again = digest(_build(b[n]), probes)           # the digest is reproducible
        if _differences(base, again):
            raise SystemExit(f"lesson {n}: two unmutated builds differ in {_differences(base, again)}")
        # the unmutated source, installed as a mutant is, gives the same digest
        chk = run_mutant(name, src, b[n], probes, a.timeout)
        if chk[0] != "ok" or _differences(base, chk[1]):
            raise SystemExit(f"lesson {n}: the unmutated source run as a mutant gives {chk[0]} "
                             f"{chk[1] if chk[0] != 'ok' else _differences(base, chk[1])}")
        todo = list(mutants(src, None))[: a.limit]
        print(f"lesson {n}: {len(ex.questions)} questions, {len(todo)} mutants", flush=True)
        rows = []
        for i, (fn, line, what, text) in enumerate(todo):
            t1 = time.time()
            status, payload = run_mutant(name, text, b[n], probes, a.timeout)
            row = {"index": i, "function": fn, "line": line, "edit": what, "seconds": round(time.time() - t1, 1)}
            if status == "ok":
                diff = _differences(base, payload)
                row["status"] = "changed" if diff else "same"
                if diff:
                    row["fields"] = diff
                    row["questions"] = sorted(k for k in base if k in payload and base[k] != payload[k]) \
                        if "keys" not in diff else sorted(set(base) ^ set(payload))
            else:
                row["status"] = status
                if payload:
                    row["error"] = payload
            rows.append(row)
            print(f"  [{i}] {row['status']:8s} {fn} line {line}: {what} "
                  f"{row.get('fields', '')} {row.get('questions', '')} {row.get('error', '')}", flush=True)
        counts = {s: sum(r["status"] == s for r in rows) for s in ("same", "changed", "error", "timeout")}
        results[n] = {"mutants": len(rows), **counts, "seconds": round(time.time() - t0),
                      "changed_indices": [r["index"] for r in rows if r["status"] == "changed"], "rows": rows}
        print(f"lesson {n}: {counts} ({time.time() - t0:.0f} s); changed: "
              f"{','.join(map(str, results[n]['changed_indices']))}", flush=True)
        if a.json:
            Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
