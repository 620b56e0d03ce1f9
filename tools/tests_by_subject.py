"""Sort tests/ by subject: tests/ mirrors kitlib/, plus lessons/, oracle/ and support/.

    python tools/tests_by_subject.py            # move, then fix what moving breaks
    python tools/tests_by_subject.py --check    # say what it would do; change nothing

Every ``tests/test_*.py`` has a folder in :data:`FOLDERS` (by what it tests); ``""`` keeps it
at the top of tests/, beside conftest.py: the tests of kitlib's top-level modules
(``kitlib/settings.py``, ``kitlib/errors.py``) and of the package or the repository as a whole
(layering, packaging, examples present, docstrings). The helper modules of :data:`HELPERS`
go into ``tests/support/``. The script then fixes what the move breaks, by rules, never by
hand, so that it can run again after other branches are merged:

- in every file one folder down (``tests/<folder>/*.py``, ``tests/support/*.py``), the
  paths worked out from ``__file__`` as a file at the top of tests/ wrote them: the
  repository's root (``.parent.parent``, ``.parents[1]``) becomes ``.parents[2]``, and
  tests/data (``.parent / "data"``) becomes ``.parents[2] / "tests" / "data"``;
- ``from browser import ...`` (and the other helpers) becomes ``from support.browser import
  ...``, in tests/, tools/ and benchmarks/ (tools that put tests/ on ``sys.path``);
  ``import test_x`` in tools/ and benchmarks/ becomes ``from <folder> import test_x``;
- every mention of a moved file in the repository's text files (``tests/test_x.py``,
  ``"tests" / "test_x.py"``, pyproject.toml's mutmut selection, .ci/run, docs, README,
  docstrings) names its new place.

Each rule's result no longer matches the rule, so a second run changes nothing; a run on a
tree where most files were moved moves only the new flat ones. It stops, before changing
anything, on a ``test_*.py`` with no folder here (add it to :data:`FOLDERS`), on two test
files with one name (pytest's default ``prepend`` import mode imports a test file by its
name: names stay unique), and, after the move, on a test file importing another test file of
another folder (only a folder that pytest has put on ``sys.path`` can be imported from; put
what they share in tests/support/).

Import mode: pytest's default (``prepend``). tests/ and its folders have no ``__init__.py``
(tests/support has one: a package); importing tests/conftest.py puts tests/ on ``sys.path``,
so ``from conftest import ...`` and ``from support.x import ...`` work from every folder, in
each pytest-xdist process too.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

#: Where each test file goes: a folder of tests/ ("" = stays at the top).
FOLDERS = {
    # kitlib/model
    "test_model": "model",
    "test_model_examples": "model",
    "test_model_moved_examples": "model",
    # kitlib/readers
    "test_bad_input": "readers",
    "test_bad_trace": "readers",
    "test_fuzz": "readers",
    "test_json_messages": "readers",
    "test_live_bundles": "readers",
    "test_nsys": "readers",
    "test_nsys_damaged": "readers",
    "test_nsys_ranks": "readers",
    "test_ranks_parallel": "readers",
    "test_raw_events": "readers",
    "test_reader_files_units": "readers",
    "test_readers_bundle_ranks_examples": "readers",
    "test_readers_examples": "readers",
    "test_shared_cache": "readers",
    "test_snapshot": "readers",
    "test_snapshot_damaged": "readers",
    "test_trace_cache": "readers",
    "test_trace_cache_units": "readers",
    "test_trace_parsers": "readers",
    # kitlib/analyses
    "test_compare": "analyses",
    "test_moved_examples": "analyses",
    "test_transfers": "analyses",
    "test_align_lint": "analyses",
    "test_boundary": "analyses",
    "test_callsites_host_calls": "analyses",
    "test_coldstart": "analyses",
    "test_collective_matching": "analyses",
    "test_distributed": "analyses",
    "test_events": "analyses",
    "test_gpu_idle": "analyses",
    "test_grouping": "analyses",
    "test_intervals": "analyses",
    "test_kernel_breakdown": "analyses",
    "test_lesson_analyses": "analyses",
    "test_memory_flops": "analyses",
    "test_pinning_dataloader": "analyses",
    "test_precision": "analyses",
    "test_speedups": "analyses",
    "test_steps_measures": "analyses",
    "test_stragglers": "analyses",
    "test_trace_chain": "analyses",
    "test_trace_diff": "analyses",
    # kitlib/plots
    "test_gui_timeline": "plots",
    "test_nsys_gui": "plots",
    "test_plots_drawn": "plots",
    "test_plots_exposed": "plots",
    "test_plots_queue": "plots",
    "test_plots_scale": "plots",
    # kitlib/course (and the class it is taught to: the hub, the class view)
    "test_classroom": "course",
    "test_classview": "course",
    "test_course": "course",
    "test_course_examples": "course",
    "test_exercises_feedback": "course",
    "test_first_profile": "course",
    "test_form_fallback": "course",
    "test_hub": "course",
    "test_outcome": "course",
    "test_plot_fixes": "course",
    "test_raw_views": "course",
    "test_step_series_rawranks": "course",
    "test_widgets": "course",
    # kitlib/capture
    "test_capture_examples": "capture",
    "test_careless_runs": "capture",
    "test_cli_messages": "capture",
    "test_clinic": "capture",
    "test_live_paths": "capture",
    "test_summary": "capture",
    "test_workload_capture": "capture",
    # the lessons: their runs, figures, answers, questions, text and guide
    **{f"test_answers_l{n:02d}": "lessons" for n in range(14)},
    "test_browser": "lessons",
    "test_instructors": "lessons",
    "test_lesson_diagrams": "lessons",
    "test_lesson_figures": "lessons",
    "test_lessons": "lessons",
    "test_questions_teach": "lessons",
    "test_reach": "lessons",
    # against the tools' own outputs
    "test_golden_derived": "oracle",
    "test_oracle": "oracle",
    "test_oracle_versions": "oracle",
    # the top of tests/: kitlib's top-level modules, the package and the repository
    "test_docstring_share": "",
    "test_errors_pickle": "",
    "test_examples_present": "",
    "test_k8s_values": "",
    "test_layers": "",
    "test_packaging": "",
    "test_settings": "",
    "test_units_examples": "",
}

#: Names of test files that the text mentions as a pattern (``tests/test_answers_lNN.py``,
#: ``f"test_answers_l{n}.py"``), by prefix: their folder.
PREFIXES = {"test_answers_l": "lessons"}

#: Helper modules of the tests, moved into tests/support/.
HELPERS = ("browser", "damage", "hub_support", "lesson_tables", "run_notebook")

#: Text files whose mentions of test files are rewritten (git ls-files, these suffixes or names).
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".yml", ".yaml", ".cfg", ".ini", ".sh", ".ipynb", ".rst", ""}
SKIP = ("shared/",)


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout


def folder_of(name: str) -> str | None:
    """The folder of a test file's stem, or None when the script has none for it."""
    if name in FOLDERS:
        return FOLDERS[name]
    return next((f for p, f in PREFIXES.items() if name.startswith(p)), None)


def test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "data" not in p.relative_to(TESTS).parts)


def check_names(files: list[Path]) -> None:
    """Stop on a test file the mapping lacks, or on two with one name."""
    unmapped = [p.relative_to(ROOT) for p in files if p.stem not in FOLDERS]
    if unmapped:
        sys.exit("tools/tests_by_subject.py: no folder for " + ", ".join(map(str, unmapped))
                 + "\n  add each to FOLDERS in tools/tests_by_subject.py (by what it tests) and run it again")
    seen: dict = {}
    for p in files:
        seen.setdefault(p.name, []).append(p.relative_to(ROOT))
    twice = {n: ps for n, ps in seen.items() if len(ps) > 1}
    if twice:
        sys.exit("tools/tests_by_subject.py: test files with one name (pytest's prepend import mode needs unique "
                 "names): " + "; ".join(f"{n}: {', '.join(map(str, ps))}" for n, ps in twice.items()))


def move(src: Path, dst: Path, dry: bool) -> None:
    print(f"move {src.relative_to(ROOT)} -> {dst.relative_to(ROOT)}")
    if dry:
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--error-unmatch", str(src)],
                             capture_output=True).returncode == 0
    if tracked:
        git("mv", str(src), str(dst))
    else:
        src.rename(dst)


def moves(dry: bool) -> None:
    for p in test_files():
        want = TESTS / FOLDERS[p.stem] / p.name if FOLDERS[p.stem] else TESTS / p.name
        if p != want:
            move(p, want, dry)
    for h in HELPERS:
        if (TESTS / f"{h}.py").exists():
            move(TESTS / f"{h}.py", TESTS / "support" / f"{h}.py", dry)


# --------------------------------------------------------------------------- the rules
_FILE = r"Path\(__file__\)(?P<res>\.resolve\(\))?"


def _depth_rules(text: str) -> str:
    """A file one folder down: its ``__file__`` paths written for the top of tests/ fixed."""
    # tests/data from the top of tests/: .parent / "data"
    text = re.sub(_FILE + r"\.parent(?=\s*/\s*\"data\")",
                  lambda m: f'Path(__file__){m["res"] or ""}.parents[2] / "tests"', text)
    # the root from the top of tests/: .parent.parent (not a third .parent)
    text = re.sub(_FILE + r"\.parent\.parent(?!\.parent)\b", lambda m: f'Path(__file__){m["res"] or ""}.parents[2]', text)

    # .parents[1]: the root from the top; one folder down, tests/ (then only followed by "data"
    # and a folder of tests/data, left alone)
    def parents1(m):
        rest = m["rest"] or ""
        seg = re.match(r'\s*/\s*"data"\s*/\s*"([^"]+)"', rest)
        if seg and (TESTS / "data" / seg[1]).exists() and not (ROOT / "data" / seg[1]).exists():
            return m[0]
        return f'Path(__file__){m["res"] or ""}.parents[2]' + rest
    return re.sub(_FILE + r"\.parents\[1\](?P<rest>\s*/\s*\"data\"\s*/\s*\"[^\"]+\")?", parents1, text)


def _helper_imports(text: str) -> str:
    names = "|".join(HELPERS)
    text = re.sub(rf"^(?P<i>[ \t]*)from (?P<h>{names}) import ", r"\g<i>from support.\g<h> import ", text, flags=re.M)
    return re.sub(rf"^(?P<i>[ \t]*)import (?P<h>{names})\b(?! as)", r"\g<i>from support import \g<h>", text, flags=re.M)


def _test_imports_in_tools(text: str) -> str:
    def sub(m):
        f = folder_of(m["t"])
        return f'{m["i"]}from {f} import {m["t"]}' if f else m[0]
    return re.sub(r"^(?P<i>[ \t]*)import (?P<t>test_\w+)\b", sub, text, flags=re.M)


def _mentions(text: str) -> str:
    """Mentions of a test file or helper at its old place, at its new one."""
    def path_sub(m):
        f = folder_of(m["t"])
        return f"tests/{f}/{m['t']}.py" if f else m[0]
    text = re.sub(r"(?<![\w./-])tests/(?P<t>test_[\w{}<>]+)\.py\b", path_sub, text)

    def join_sub(m):
        f = folder_of(m["t"])
        return f'"tests" / "{f}" / {m["f"]}"{m["t"]}' if f else m[0]
    text = re.sub(r'"tests"\s*/\s*(?P<f>f?)"(?P<t>test_[\w{}<>]+)(?=\.py")', join_sub, text)
    names = "|".join(HELPERS)
    text = re.sub(rf"(?<![\w./-])tests/(?P<h>{names})\.py\b", r"tests/support/\g<h>.py", text)
    return re.sub(rf'"tests"\s*/\s*"(?P<h>{names})\.py"', r'"tests" / "support" / "\g<h>.py"', text)


def rewrite(dry: bool) -> list[str]:
    changed = []
    for rel in git("ls-files", "-co", "--exclude-standard").splitlines():
        path = ROOT / rel
        if rel.startswith(SKIP) or rel == "tools/tests_by_subject.py" or not path.is_file():
            continue
        if path.suffix not in TEXT_SUFFIXES and path.name not in ("run",):
            continue
        try:
            old = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        new = _mentions(old)
        if rel.startswith(("tests/", "tools/", "benchmarks/")) and path.suffix == ".py":
            new = _helper_imports(new)
        if rel.startswith(("tools/", "benchmarks/")) and path.suffix == ".py":
            new = _test_imports_in_tools(new)
        if rel.startswith("tests/") and not rel.startswith("tests/data/") and len(Path(rel).parts) == 3 \
                and path.suffix == ".py":
            new = _depth_rules(new)
        if new != old:
            changed.append(rel)
            if not dry:
                path.write_text(new)
    return changed


def check_cross_imports() -> None:
    """Stop on a test file importing a test file of another folder."""
    bad = []
    for p in test_files() + sorted((TESTS / "support").glob("*.py")):
        for m in re.finditer(r"^\s*(?:from (test_\w+) import|import (test_\w+))", p.read_text(), re.M):
            other = next(iter(TESTS.rglob(f"{m[1] or m[2]}.py")), None)
            if other is None or other.parent != p.parent:
                bad.append(f"{p.relative_to(ROOT)} imports {m[1] or m[2]} "
                           f"({other.relative_to(ROOT) if other else 'not found'})")
    if bad:
        sys.exit("tools/tests_by_subject.py: test files import test files of other folders; put what they share "
                 "in tests/support/:\n  " + "\n  ".join(bad))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="say what would change; change nothing")
    args = ap.parse_args(argv)
    files = test_files()
    check_names(files)
    moves(args.check)
    for rel in rewrite(args.check):
        print(f"{'would fix' if args.check else 'fixed'} {rel}")
    if not args.check:
        check_cross_imports()
        check_names(test_files())


if __name__ == "__main__":
    main()
