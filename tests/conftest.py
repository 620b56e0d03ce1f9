"""Shared fixtures: the reference recordings (as kitlib bundles) and public traces."""
import atexit
import functools
import gc
import gzip
import os
import re
import sys
import time
from pathlib import Path

import orjson
import pytest

os.environ.setdefault("KITLIB_PROGRESS", "0")      # no progress bars in test output
# No IRI syntax checks in the test processes (see tests/support/run_notebook.py): nbformat's import
# of jsonschema then takes 0.05 s, not 1.5 s, in each pytest process.
sys.modules.setdefault("rfc3987_syntax", None)
# One intra-op thread for torch in the test process and everything it starts (CLI runs,
# Jupyter kernels, JupyterLab). The suite's models are tiny (batch 2-4, 32-64 px), so a
# second thread gains nothing on a quiet machine; on a shared two-core machine, though, a
# two-thread OpenMP team spins at every barrier while the other core is busy, and the same
# CPU capture took 7-47 s instead of 3-8 s (measured 30 Nov 2026). Set it yourself to override.
os.environ.setdefault("OMP_NUM_THREADS", "1")
if "torch" in sys.modules:                          # imported before this file (a plugin)
    sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

# The cyclic garbage collector less often in the test processes. With Python's default
# thresholds (700, 10, 10) each pytest process of the README's command spent 71-83 s in
# collections, 64-76 s of it in some seventy full ones, each walking every object the tests
# keep (parsed traces, tables: millions of objects). With youngest-generation collections
# every 10,000 allocations and the older ones every 50 of the one below, about 10 s, one or
# two full collections; with that day's other cuts the suite ran in 301 s against 395 s back
# to back (gc callbacks, fresh clones, 2 December 2026). Garbage without cycles is freed as
# before, at once.
GC_THRESHOLDS = (10_000, 50, 50)
gc.set_threshold(*GC_THRESHOLDS)

ROOT = Path(__file__).resolve().parent.parent
REF = ROOT / "data" / "reference"
PUBLIC = ROOT / "tests" / "data" / "public-traces"


@functools.lru_cache(maxsize=3)
def raw_trace_events(path) -> list:
    """A torch.profiler trace's ``traceEvents`` as the profiler wrote them (gzip + orjson,
    which gives json's floats, faster; no kitlib): the raw side of the tests that rebuild a
    figure without kitlib. Read once per process while it is among the last three files asked
    for (one parsed 35 MB trace is 100-150 MB). Kept across modules: 23 test files read the
    same few recordings, and parsing them again in each module was about 45 s of the README
    command's CPU (py-spy, 2 December 2026). Callers only read the events (the tests that
    change an event copy it first)."""
    return orjson.loads(gzip.decompress(Path(path).read_bytes()))["traceEvents"]


_PER_RAW: dict = {}


def per_raw(raw, key: str, make):
    """``make(raw)``, worked out once for this list of raw events (``raw_trace_events``'
    lists, which callers only read) and kept while that list is the one asked about: an index
    of the trace (events by name, by thread) that a test would otherwise rebuild with a scan
    of every event on each call. ``key`` names what ``make`` builds."""
    kept = _PER_RAW.get((id(raw), key))
    if kept is None or kept[0] is not raw:
        kept = _PER_RAW[id(raw), key] = (raw, make(raw))
    return kept[1]


@pytest.fixture(scope="module", autouse=True)
def _free_per_raw():
    yield
    _PER_RAW.clear()


def sql_rows(db, sql, *args) -> list:
    """The rows of one query on an SQLite file opened read-only: the tests' own reading of
    an Nsight Systems export, without kitlib."""
    import sqlite3
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql, args).fetchall()
    finally:
        con.close()


def merged_length(spans):
    """Length of the union of (start, end) spans: the tests' own interval merge, written
    without kitlib to check its unions (busy time, waits, collectives per step)."""
    total, cur = 0, None
    for a, b in sorted(spans):
        if cur is None or a > cur[1]:
            total += 0 if cur is None else cur[1] - cur[0]
            cur = [a, b]
        else:
            cur[1] = max(cur[1], b)
    return total + (0 if cur is None else cur[1] - cur[0])


def raw_self_us(events) -> dict:
    """Host self time (µs) of raw Chrome-trace events, keyed by ``id(event)``: each event's
    ``dur`` less its direct children's on the same thread (an event is a child when it starts
    before its parent ends), written without kitlib to check its self times. ``events`` in
    (tid, ts, -dur) order."""
    self_us, stack = {}, []
    for e in events:
        while stack and (stack[-1]["tid"] != e["tid"] or e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]):
            stack.pop()
        if stack:
            self_us[id(stack[-1])] = self_us.get(id(stack[-1]), stack[-1]["dur"]) - e["dur"]
        self_us.setdefault(id(e), e["dur"])
        stack.append(e)
    return self_us


@pytest.fixture(scope="session")
def built_lessons():
    """``{lesson: (Exercises, recordings used)}``: every lesson's questions from the answer
    key's builders (``kitlib.course.cli._builders``), on the kit's recordings (without
    ``KITLIB_REPLAY_DIR``), built once per process. tests/lessons/test_questions_teach.py and the
    answer key of tests/course/test_classroom.py each built all of them (9-15 s of CPU each); their
    files share a process (pytest_collection_modifyitems). "Recordings used" is what
    ``python -m kitlib answers`` prints under each lesson (``cli._build``, as the answer key
    builds them). Tests read the questions or judge answers to them."""
    from kitlib.course.cli import _build, _builders
    mp = pytest.MonkeyPatch()
    mp.delenv("KITLIB_REPLAY_DIR", raising=False)
    try:
        return {n: _build(make) for n, make in _builders().items()}
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def ex(request):
    """The questions of the lesson whose answers a ``test_answers_lNN.py`` file checks (NN from
    the file's name), built once per module as ``support.answers.QUESTIONS[NN]`` builds them.
    Lesson 01's file has its own (its questions come from a CPU run the file makes)."""
    from support.answers import QUESTIONS
    number = re.fullmatch(r"test_answers_l(\d\d)", request.path.stem)
    if number is None:
        raise LookupError(f"{request.path.name}: the fixture ex is for tests/lessons/test_answers_lNN.py files")
    return QUESTIONS[number.group(1)]()


@pytest.fixture(scope="module")
def raw_5step():
    """profiler_5step's raw trace events (``raw_trace_events``), for a module's tests."""
    return raw_trace_events(REF / "profiler_5step" / "trace.json.gz")


@pytest.fixture(scope="module")
def raw_fixed_batch():
    """fixed_batch's raw trace events (``raw_trace_events``), for a module's tests."""
    return raw_trace_events(REF / "fixed_batch" / "trace.json.gz")


@pytest.fixture(scope="module")
def nsys_8step_report():
    """The Nsight Systems export of data/reference/nsys_8step, loaded once per module (the
    one Nsight recording that six test files read)."""
    from kitlib.readers.nsys import load_nsys
    return load_nsys(REF / "nsys_8step" / "report.sqlite")


@pytest.fixture(scope="session")
def ref_trace():
    """Load a reference trace once per test session: ref_trace('profiler_5step')."""
    from kitlib.readers.trace import load_trace
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = load_trace(REF / name / "trace.json.gz")
        return cache[name]
    return get


@pytest.fixture(scope="session")
def public_trace():
    from kitlib.readers.trace import load_trace
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = load_trace(PUBLIC / name)
        return cache[name]
    return get


#: The backend a learner's Jupyter uses: figures become PNG outputs of the cell that drew them.
INLINE = "module://matplotlib_inline.backend_inline"


def own_recordings(folder: Path) -> Path:
    """A KITLIB_REPLAY_DIR holding every recording of the kit (links), as a learner's
    folder of their own course-GPU recordings would."""
    from kitlib.readers.bundle import list_references, reference_dir
    folder.mkdir()
    for name in list_references():
        (folder / name).symlink_to(reference_dir() / name)
    return folder


#: Appended to each lesson the tests run (issue 40): once every cell has run with no
#: answer, reveal every prediction, and every other question an outcome still waits on (lesson
#: 11's map waits on its routing questions), so that each outcome held back by ``ex.outcome``
#: shows in its output widget, as it would for a learner who answers. Every ``Exercises`` the
#: kernel holds (a lesson builds ``ex`` again under "Your turn", after its outcomes). Lesson 13's
#: ``Clinic`` also holds outcomes back until compute and cause questions are answered: it has
#: ``answered``, and every one of its questions is revealed.
REVEAL_PREDICTIONS = ("import gc as _gc\nfrom kitlib.course.exercises import Exercises as _Ex\n"
                      "for _e in [o for o in _gc.get_objects() if isinstance(o, _Ex)]:\n"
                      "    _held = {k for k, fs in _e.followers.items()\n"
                      "             if any('held_bundle' in f.__qualname__ for f in fs)}\n"
                      "    for _q in [q for q in _e.questions if q.kind == 'predict' or q.key in _held\n"
                      "               or hasattr(_e, 'answered')]:\n"
                      "        _e.reveal(_q.key)\n")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def unwrapped(text: str) -> str:
    """``text`` with the lines ``kitlib.units.wrapped`` broke joined again: a line that starts
    with four spaces or more goes on the line before it, after one space (also a table's
    right-aligned rows: for finding a sentence, not a table)."""
    return re.sub(r"\n {4,}(?=\S)", " ", text)


class ExecutedLesson:
    """A lesson notebook run once under Jupyter (nbclient, inline backend, replay mode), with
    :data:`REVEAL_PREDICTIONS` as its last cell. ``run_all``: the executed notebook as Run
    All left it with no answer (each outcome of ``ex.outcome`` a line saying it is held
    back); ``held_back``: per outcome's output widget (model id), what it showed once the
    predictions were revealed; ``nb``: ``run_all`` with those outputs in place of their
    widgets, what a learner who answers sees; ``text``: every stream and text/plain output
    of ``nb``, in order, one per line."""

    def __init__(self, nb, own: bool):
        import copy
        self.run_all, self.own = nb, own
        state = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
        self.held_back = {m: s["state"].get("outputs", []) for m, s in state.items()
                          if "kitlib-outcome" in s.get("state", {}).get("_dom_classes", [])}
        self.nb = copy.deepcopy(nb)
        for cell in self.nb.cells:
            if cell.cell_type == "code":
                cell.outputs = [x for o in cell.outputs for x in self.held_back.get(
                    o.get("data", {}).get(WIDGET_VIEW, {}).get("model_id"), [o])]
        parts = []
        for cell in self.nb.cells:
            for o in cell.get("outputs", []) if cell.cell_type == "code" else []:
                if o.get("output_type") == "stream":
                    parts.append(o.get("text", ""))
                elif o.get("output_type") in ("execute_result", "display_data"):
                    parts.append(str(o.get("data", {}).get("text/plain", "")) + "\n")
        self.text = "\n" + "".join(parts)

    @property
    def outputs(self):
        return [o for c in self.nb.cells if c.cell_type == "code" for o in c.outputs]


#: The kit's own live H200 capture (issue 8), fed to the lessons built on profiler_5step.
LIVE_BUNDLE = ROOT / "tests" / "data" / "live-h200-2026-11-30" / "profiler_full"
#: The fixtures that run lessons, and the kind of run each asks for.
_LESSON_FIXTURES = {"executed_lesson": "replay", "lesson_on_live_capture": "live"}


def _lesson_runs_asked(items) -> list:
    """The lesson runs the selected tests ask for, as (number, kind), in the order they run:
    a test parametrized by a lesson ``path``, or one named ``test_lessonNN_...``."""
    found = []
    for item in items:
        kinds = [k for f, k in _LESSON_FIXTURES.items() if f in getattr(item, "fixturenames", ())]
        callspec = getattr(item, "callspec", None)
        path = callspec.params.get("path") if callspec else None
        m = re.match(r"test_lesson(\d\d)_", item.name)
        n = path.name[:2] if isinstance(path, Path) else (m.group(1) if m else None)
        for kind in kinds:
            if n and (n, kind) not in found:
                found.append((n, kind))
    return found


_STALLED = object()


def _next_line(lines, wait_s: float):
    """The next line from a reader thread's queue (None once it ends), or _STALLED."""
    import queue
    try:
        return lines.get(timeout=wait_s)
    except queue.Empty:
        return _STALLED


def run_notebook(path: Path, cwd: Path, env: dict, stall_s: float = 60, tries: int = 2):
    """Execute a notebook in a process of its own (tests/support/run_notebook.py: nbclient, the
    kernel started in ``cwd`` with ``env``) and return the executed notebook.

    The runner prints a line as the kernel becomes ready and as each cell starts and ends;
    a run that prints nothing for ``stall_s`` seconds (a cell takes at most a few seconds in
    replay here) has stalled: the stacks of the runner and its kernel are asked for
    (SIGUSR1) and shown in a warning, the two are killed, and the run starts again, up to
    ``tries`` runs. On 1 December 2026 a lesson run sat idle for minutes in three of five
    runs of the whole suite, and never in 39 runs of the lessons alone."""
    import queue
    import signal
    import subprocess
    import threading
    import warnings

    import nbformat
    out = cwd / f"executed_{path.name}"
    for attempt in range(1, tries + 1):
        proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "run_notebook.py"), str(path), str(out)],
                                cwd=str(cwd), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True, text=True, errors="replace")
        lines: queue.Queue = queue.Queue()
        reader = threading.Thread(target=lambda: [*map(lines.put, proc.stdout), lines.put(None)], daemon=True)
        reader.start()
        log, stalled = [], False
        while (line := _next_line(lines, stall_s)) is not None:
            if line is _STALLED:
                stalled = True
                break
            log.append(line)
        if stalled:
            os.killpg(proc.pid, signal.SIGUSR1)            # the runner's and the kernel's stacks
            time.sleep(2)
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            reader.join(5)
            log += [x for x in iter(lambda: lines.get() if not lines.empty() else None, None)]
            said = "".join(log)
            kept = cwd / f"stall_{attempt}_{path.stem}.txt"
            kept.write_text(said)
            warnings.warn(f"{path.name}: nothing for {stall_s:.0f} s (run {attempt} of {tries}); runner and "
                          f"kernel stacks in {kept}; the last lines:\n{said[-6000:]}")
            if attempt == tries:
                raise RuntimeError(f"{path.name}: stalled in each of {tries} runs; see the warnings")
            continue
        proc.wait()
        if proc.returncode != 0:
            raise RuntimeError(f"{path.name} failed to run:\n{''.join(log)[-4000:]}")
        return nbformat.read(out, as_version=4)


#: The recording scripts beside the test data (tests/data/*/record.py) are run by hand from
#: their folder, never imported by ``--doctest-modules``: importing one recorded a profile
#: into the working directory.
collect_ignore_glob = ["data/*"]


#: Lessons run side by side (each in its own kernel, a process of its own): two on a machine
#: with two cores or more.
LESSON_WORKERS = min(2, os.cpu_count() or 1)


@pytest.fixture(scope="session")
def _lesson_runs(tmp_path_factory, request):
    """Each lesson run once per session: ``get(number, kind)``, kind "replay" (see
    executed_lesson) or "live" (see lesson_on_live_capture).
    As the session starts (``_lessons_start_early``), every run the selected tests will ask
    for starts, ``LESSON_WORKERS`` at a time, in the order the tests run, beside the tests
    that need no lesson (most of them, and the first 300 in file order): a test waits only
    for its own run, and a lesson that failed to run fails every test that asks for it."""
    from concurrent.futures import ThreadPoolExecutor

    # Each kernel collects cyclic garbage less often, as the test processes do (see
    # gc.set_threshold above): collections took 0.5-2 s of a lesson's 7.5-9.5 s of CPU with
    # the default thresholds, 0.07-0.34 s with these (lessons 06, 09, 10, 12, 2 December
    # 2026). What a lesson computes and prints is the same either way.
    def ipython_dir_with(name: str, startup_files: dict) -> Path:
        folder = tmp_path_factory.mktemp(name)
        startup = folder / "profile_default" / "startup"
        startup.mkdir(parents=True)
        for file, text in startup_files.items():
            (startup / file).write_text(text)
        return folder
    fewer_collections = {"01-gc.py": f"import gc\ngc.set_threshold(*{GC_THRESHOLDS})\n"}
    ipython_dir = ipython_dir_with("ipython", {"00-display.py": (
        "import pandas as pd\npd.set_option('display.width', 200)\npd.set_option('display.max_columns', 30)\n"),
        **fewer_collections})
    live_ipython_dir = ipython_dir_with("ipython_live", fewer_collections)   # the defaults, but for the collections
    # the environment as the session set it up (not as a test running meanwhile patches it)
    session_env = dict(os.environ)

    def execute(number: str, kind: str, cwd: Path) -> ExecutedLesson:
        path = next((ROOT / "lessons").glob(f"{number}_*.ipynb"))
        env = {k: v for k, v in session_env.items() if k not in ("KITLIB_REPLAY_DIR",)}
        if kind == "live":
            (cwd / "own").mkdir()
            (cwd / "own" / "profiler_5step").symlink_to(LIVE_BUNDLE)
            env.update(KITLIB_MODE="replay", KITLIB_REPLAY_DIR=str(cwd / "own"), MPLBACKEND="Agg",
                       IPYTHONDIR=str(live_ipython_dir))
            own = True
        else:
            env.update(KITLIB_MODE="replay", MPLBACKEND=INLINE, IPYTHONDIR=str(ipython_dir))
            own = int(number) % 2 == 1
            if own:
                env["KITLIB_REPLAY_DIR"] = str(own_recordings(cwd / "own"))
        import nbformat
        nb = nbformat.read(path, as_version=4)
        nb.cells.append(nbformat.v4.new_code_cell(REVEAL_PREDICTIONS))
        revealing = cwd / path.name
        nbformat.write(nb, revealing)
        return ExecutedLesson(run_notebook(revealing, cwd, env), own)

    pool = ThreadPoolExecutor(max_workers=LESSON_WORKERS, thread_name_prefix="lesson")
    runs = {}

    def start(number: str, kind: str):
        if (number, kind) not in runs:
            cwd = tmp_path_factory.mktemp(f"lesson{number}" + ("_live" if kind == "live" else ""))
            runs[number, kind] = pool.submit(execute, number, kind, cwd)
        return runs[number, kind]

    def get(number: str, kind: str) -> ExecutedLesson:
        return start(number, kind).result()
    for n, k in _lesson_runs_asked(request.session.items):
        start(n, k)
    yield get
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session", autouse=True)
def _lessons_start_early(request):
    """Start the lesson runs the session will need (see _lesson_runs) with its first test,
    not with the first test that needs one: the suite then spends its time waiting on
    neither. Nothing starts where no selected test runs a lesson.

    Not under pytest-xdist: there every process collects every test, so each would start
    every lesson run, and all but one process would run all fourteen lessons for nothing
    (until 2 December 2026 each lesson ran twice in the README's two-process command). The
    tests that run a lesson are all in one xdist group (pytest_collection_modifyitems), the
    largest, which xdist hands out first; its first test starts every run (_lesson_runs)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if _lesson_runs_asked(request.session.items):
        request.getfixturevalue("_lesson_runs")


@pytest.fixture(scope="session")
def executed_lesson(_lesson_runs):
    """Run a lesson (by its two-digit number) once per session and share the result between
    the run check (tests/lessons/test_lessons.py) and the figure checks (tests/lessons/test_lesson_figures.py).
    Odd-numbered lessons run on "your own" recordings (every recording linked into a
    KITLIB_REPLAY_DIR), even-numbered ones on the kit's: the figures are the same, the notes
    under the tables differ.
    Wide tables print on one line (pandas display width 200, up to 30 columns, set in an
    IPython startup file of a private IPYTHONDIR), so a figure check can read a row.
    Runs start two at a time (see _lesson_runs)."""
    return lambda number: _lesson_runs(number, "replay")


@pytest.fixture(scope="session")
def lesson_on_live_capture(_lesson_runs):
    """A lesson built on profiler_5step run once per session on the kit's own live H200
    capture (LIVE_BUNDLE, as profiler_5step in a KITLIB_REPLAY_DIR of its own) instead of the
    reference recording, with the Agg backend. Runs start two at a time (see _lesson_runs)."""
    return lambda number: _lesson_runs(number, "live")


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (the README's command runs the suite in two processes with
    ``--dist loadgroup``), every test that runs a lesson goes to one process, as the group
    ``lessons``: each lesson then runs once in the whole suite (see _lesson_runs), not once in
    each process that asks for it. The rest of such a test's file goes with it, so that the
    file's module fixtures (every lesson's questions built, a raw trace parsed: 11 s of CPU in
    tests/lessons/test_questions_teach.py) are made once, not once in each process. The other tests go
    in groups by file, for the same reason (a torchrun, a CPU recording). The files that read
    every lesson's questions (the session fixture ``built_lessons``) join the lessons' group
    too, so that the questions are built once. The browser test
    (tests/lessons/test_browser.py) joins the lessons' group too: xdist hands out the largest groups
    first, so as a group of its own it ran last, its half minute of waiting on JupyterLab
    and Chromium beside an idle process; in the lessons' group it runs early, while the
    lesson runs keep both cores busy. Without xdist the marker does nothing."""
    shared = {*_LESSON_FIXTURES, "built_lessons"}
    with_lessons = {item.path for item in items if shared & set(getattr(item, "fixturenames", ()))}
    with_lessons |= {item.path for item in items if item.path.name == "test_browser.py"}
    for item in items:
        item.add_marker(pytest.mark.xdist_group("lessons" if item.path in with_lessons else item.path.name))


def _freeze_before_exit():
    """Move every object the process still holds out of the cyclic garbage collector's
    reach (``gc.freeze``) as the interpreter exits.

    After the atexit handlers, Python's shutdown clears each module and collects garbage
    again, walking every object still held: at the end of the README's command each process
    holds about two million (the recordings and tables its tests loaded), and each process
    took about 5 s to exit after its last atexit handler, which the main process waits for
    (2 December 2026; 0.9 s against 0.09 s for a process holding two parsed reference traces).
    Frozen objects are still freed as the modules are cleared; only cycles among them are
    left to the operating system, which takes the whole process back anyway. Registered as
    this file is imported, so it runs after every handler registered later (atexit runs the
    last registered first): pytest's own end-of-session work is done by then."""
    gc.freeze()


atexit.register(_freeze_before_exit)


def pytest_configure(config):
    """One garbage collection at the end of the session, not pytest's five.

    pytest collects garbage five times as it ends (its unraisable-exception plugin, to report
    a finaliser that raised); each pass walks every object a process still holds. At the end
    of the README's command each process holds about 1.8 million (the recordings and tables
    its tests loaded), and the five passes took 6.7 s, in each process, after the last test
    (2 December 2026). One pass still collects every unreachable object and reports what its
    finalisers raise; the further passes only matter for finalisers that make new garbage.
    The setting is pytest's own (a private stash key): a pytest without it keeps its
    default."""
    try:
        from _pytest.unraisableexception import gc_collect_iterations_key
    except ImportError:
        return
    config.stash[gc_collect_iterations_key] = 1


def pytest_sessionstart(session):
    """Under mutmut, start each mutant's tests from nothing kept in the process.

    mutmut runs a mutant's tests in a process forked from one that has already run them
    unmutated; the kit's reference bundles, read once per process with each trace's
    worked-out chain (``chain`` keeps it in the trace's cache), would then hand the mutant
    tables its own code never made. mutmut names the mutant in ``MUTANT_UNDER_TEST``."""
    if os.environ.get("MUTANT_UNDER_TEST"):
        from kitlib.readers import bundle
        bundle._SHARED.clear()
