"""Count the public functions, classes and methods of kitlib's model and analyses whose
docstring has (or lacks) a runnable ``Examples`` section. (The readers had to have one too
until issue 39: their examples were tests in disguise and moved into ``tests/``; the model and
the analyses are what a learner opens and reads.)

Public means: a module-level ``def`` or ``class`` whose name has no leading
underscore, in a module whose name has none either (``__init__.py`` counts), and
the methods and properties (no leading underscore) of such a class. An ``Examples``
section is a line ``Examples`` underlined by dashes, followed by at least one
``>>>`` line before the next section, as in scikit-learn's docstrings.

Usage::

    python tools/count_examples.py            # counts per package
    python tools/count_examples.py --missing  # and each public name without Examples

``tests/test_examples_present.py`` uses :func:`public_names` and fails on any name
that lacks an ``Examples`` section.
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kitlib/model", "kitlib/analyses")

_SECTION = re.compile(r"^\s*Examples\s*\n\s*-{3,}\s*\n(.*?)(?=^\s*\S[^\n]*\n\s*-{3,}\s*$|\Z)",
                      re.M | re.S)


def has_examples(doc: str | None) -> bool:
    """True when ``doc`` has an ``Examples`` section with at least one ``>>>`` line.

    >>> has_examples("Sum.\\n\\nExamples\\n--------\\n>>> 1 + 1\\n2\\n")
    True
    >>> has_examples("Sum.\\n\\nExamples\\n--------\\nNone here.\\n")
    False
    """
    if not doc:
        return False
    return any(">>>" in m.group(1) for m in _SECTION.finditer(doc))


def _modules(package: str):
    for path in sorted((ROOT / package).rglob("*.py")):
        if path.name.startswith("_") and path.name != "__init__.py":
            continue
        if any(part.startswith("_") and part != "__init__.py"
               for part in path.relative_to(ROOT / package).parts[:-1]):
            continue
        yield path


def public_names(packages=PACKAGES):
    """Yield ``(module path, qualified name, has Examples)`` for every public name."""
    for package in packages:
        for path in _modules(package):
            rel = path.relative_to(ROOT).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in tree.body:
                if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue
                if node.name.startswith("_"):
                    continue
                yield rel, node.name, has_examples(ast.get_docstring(node))
                if isinstance(node, ast.ClassDef):
                    for sub in node.body:
                        if (isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef))
                                and not sub.name.startswith("_")):
                            yield rel, f"{node.name}.{sub.name}", has_examples(ast.get_docstring(sub))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--missing", action="store_true", help="list the public names without Examples")
    args = ap.parse_args(argv)
    rows = list(public_names())
    for package in PACKAGES:
        mine = [r for r in rows if r[0].startswith(package + "/")]
        have = sum(r[2] for r in mine)
        print(f"{package:18s} {have:4d} of {len(mine):4d} public names have Examples")
    have = sum(r[2] for r in rows)
    print(f"{'all':18s} {have:4d} of {len(rows):4d}")
    if args.missing:
        for rel, name, ok in rows:
            if not ok:
                print(f"  {rel}::{name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
