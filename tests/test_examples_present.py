"""Every public function, class and method of kitlib.model and kitlib.analyses has a
runnable ``Examples`` section (issue 27; scikit-learn's rule). The readers' examples were
tests in disguise and became tests (issue 39): Examples go where a learner reads.

Public, and what counts as an ``Examples`` section: :mod:`tools.count_examples`.
The examples themselves run as doctests (``--doctest-modules`` in pyproject.toml);
this test only says which names lack one. Nothing is exempt without a line in
:data:`PENDING` saying why.
"""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("count_examples", ROOT / "tools" / "count_examples.py")
count_examples = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(count_examples)

#: Names without Examples yet, each with the reason. An entry that gains its Examples
#: must leave this list (the second test says so).
PENDING: dict = {}


def _names():
    return {f"{rel}::{name}": ok for rel, name, ok in count_examples.public_names()}


def test_every_public_name_has_examples():
    missing = sorted(k for k, ok in _names().items() if not ok and k not in PENDING)
    assert not missing, (
        f"{len(missing)} public name(s) of model/analyses have no runnable Examples "
        "section (a line 'Examples', dashes, then >>> lines that build their input and show "
        "real output; kitlib.model.examples has tiny_trace and tiny_profile_doc):\n  "
        + "\n  ".join(missing))


def test_pending_list_is_not_stale():
    names = _names()
    done = sorted(k for k in PENDING if names.get(k, True))
    assert not done, ("these PENDING names now have Examples (or are gone): remove them "
                      "from tests/test_examples_present.py:\n  " + "\n  ".join(done))


def test_the_counter_sees_sections():
    assert count_examples.has_examples("F.\n\nExamples\n--------\n>>> 1\n1\n")
    assert not count_examples.has_examples("F.\n\nExamples\n--------\nprose only\n")
    assert not count_examples.has_examples("F.\n\n>>> 1\n1\n")          # no section header
    names = _names()
    assert names["kitlib/model/window.py::containing"]
    assert len(names) > 150
