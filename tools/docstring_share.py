"""How much of kitlib is docstrings: total lines, docstring lines and their share, and the
provenance essays (issue 39, "Documentation where each reader reads it").

* **lines**: every line of every ``.py`` file under ``kitlib/`` (blank lines and comments
  included, as ``wc -l`` counts them).
* **docstring lines**: the lines a module, class or function docstring spans (from its
  opening quotes to its closing ones), found with :mod:`ast`.
* **provenance essay**: a function or method whose docstring, less its ``Examples``
  section, has more than twice as many lines as its code and at least :data:`ESSAY_MIN`
  lines. Code is the lines of its body after the docstring that are neither blank nor only
  a comment. (Issue 39 counted 37 on 5 December by a rule it did not write down; this is the
  rule this tool keeps.) ``prose`` in the listing is the part outside every section a caller
  reads (:data:`CALLER_SECTIONS`), the part that could move to ``docs/SOURCES.md``.

Usage::

    python tools/docstring_share.py              # totals, per folder, and the essay count
    python tools/docstring_share.py --essays     # and each essay: path:line name doc/code
    python tools/docstring_share.py --top 20     # the 20 largest docstrings

``tests/test_docstring_share.py`` uses :func:`measure`.
"""
from __future__ import annotations

import argparse
import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kitlib"
#: The numpydoc sections that are not prose: what a caller needs, or an example.
CALLER_SECTIONS = frozenset({"Parameters", "Other Parameters", "Returns", "Yields", "Raises",
                             "Warns", "Attributes", "See Also", "Examples"})
#: The fewest docstring lines (less Examples) a provenance essay has.
ESSAY_MIN = 12
_UNDERLINE = re.compile(r"^\s*-{3,}\s*$")


def section_lines(doc: str, sections) -> int:
    """Lines of ``doc`` inside the numpydoc sections named in ``sections`` (a section runs
    from its title to the next title).

    >>> section_lines("Sum.\\n\\nMore.\\n\\nReturns\\n-------\\nint\\n", {"Returns"})
    3
    """
    lines = doc.splitlines()
    section, n = None, 0
    for i, line in enumerate(lines):
        if line.strip() and i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1]):
            section = line.strip()
        n += section in sections
    return n


def prose_lines(doc: str) -> int:
    """Lines of ``doc`` outside the sections of :data:`CALLER_SECTIONS`."""
    return len(doc.splitlines()) - section_lines(doc, CALLER_SECTIONS)


@dataclass
class Docstring:
    path: str           # relative to the repository
    name: str           # qualified name, or "<module>"
    lineno: int         # the line the docstring starts on
    doc_lines: int
    code_lines: int | None = None   # functions only: lines of code after the docstring
    prose_lines: int = 0            # lines outside the caller's sections (prose_lines)
    example_lines: int = 0          # lines of the Examples section


@dataclass
class Share:
    lines: int = 0
    doc_lines: int = 0
    files: int = 0
    docstrings: list = field(default_factory=list)

    @property
    def share(self) -> float:
        return self.doc_lines / self.lines if self.lines else 0.0

    @property
    def essays(self) -> list:
        return [d for d in self.docstrings
                if d.code_lines is not None
                and d.doc_lines - d.example_lines >= ESSAY_MIN
                and d.doc_lines - d.example_lines > 2 * d.code_lines]


def _docstring_node(node):
    body = getattr(node, "body", None)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[0]
    return None


def _code_lines(node, doc, source_lines) -> int:
    first = doc.end_lineno + 1 if doc is not None else node.body[0].lineno
    n = 0
    for line in source_lines[first - 1:node.end_lineno]:
        s = line.strip()
        if s and not s.startswith("#"):
            n += 1
    return n


def file_docstrings(path: Path) -> tuple[int, list]:
    """``(number of lines, [Docstring, ...])`` for one source file."""
    text = path.read_text(encoding="utf-8")
    source_lines = text.splitlines()
    rel = path.relative_to(ROOT).as_posix()
    tree = ast.parse(text)
    found = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                doc = _docstring_node(child)
                is_fn = not isinstance(child, ast.ClassDef)
                if doc is not None:
                    found.append(Docstring(rel, name, doc.lineno,
                                           doc.end_lineno - doc.lineno + 1,
                                           _code_lines(child, doc, source_lines) if is_fn else None,
                                           prose_lines(doc.value.value),
                                           section_lines(doc.value.value, {"Examples"})))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    doc = _docstring_node(tree)
    if doc is not None:
        found.append(Docstring(rel, "<module>", doc.lineno, doc.end_lineno - doc.lineno + 1))
    visit(tree, "")
    return len(source_lines), found


def measure(package: Path = PACKAGE) -> dict:
    """``{folder: Share}`` for each folder of ``package`` (``"kitlib"`` for the top-level
    modules) and ``"total"`` for all of it."""
    out: dict = {"total": Share()}
    for path in sorted(package.rglob("*.py")):
        n, docs = file_docstrings(path)
        rel = path.relative_to(package).parts
        folder = "kitlib" if len(rel) == 1 else f"kitlib/{rel[0]}"
        for key in ("total", folder):
            s = out.setdefault(key, Share())
            s.lines += n
            s.doc_lines += sum(d.doc_lines for d in docs)
            s.files += 1
            s.docstrings.extend(docs)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--essays", action="store_true", help="list each provenance essay")
    ap.add_argument("--top", type=int, default=0, help="list the N largest docstrings")
    args = ap.parse_args(argv)
    shares = measure()
    print(f"{'folder':<18}{'files':>6}{'lines':>8}{'doc lines':>11}{'share':>8}{'essays':>8}")
    for key in sorted(k for k in shares if k != "total") + ["total"]:
        s = shares[key]
        print(f"{key:<18}{s.files:>6}{s.lines:>8,}{s.doc_lines:>11,}{s.share:>8.1%}"
              f"{len(s.essays):>8}")
    total = shares["total"]
    if args.essays:
        print("\nprovenance essays: path:line name, docstring less Examples / code (prose)")
        for d in sorted(total.essays, key=lambda d: -(d.doc_lines - d.example_lines)):
            print(f"  {d.path}:{d.lineno} {d.name} {d.doc_lines - d.example_lines}/"
                  f"{d.code_lines} ({d.prose_lines})")
    if args.top:
        print(f"\nthe {args.top} largest docstrings:")
        for d in sorted(total.docstrings, key=lambda d: -d.doc_lines)[:args.top]:
            print(f"  {d.path}:{d.lineno} {d.name} {d.doc_lines}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
