"""What the ``Examples`` of :func:`kitlib.units.wrapped` and :func:`~kitlib.units.print_wrapped`
showed, as tests (issue 39: kitlib/units.py is not collected as doctests, so nothing ran them)."""
from kitlib.units import print_wrapped, wrapped


def test_wrapped_breaks_at_spaces_and_indents_the_rest():
    assert wrapped("first data_load 535.258 ms; the texts give no later ranges", 30) == (
        "first data_load 535.258 ms;\n    the texts give no later\n    ranges")


def test_wrapped_ends_broken_lines_for_a_shell():
    assert wrapped("ncu --clock-control none -k regex:conv --launch-count 3", 30, line_end=" \\") == (
        "ncu --clock-control none -k \\\n    regex:conv \\\n    --launch-count 3")


def test_wrapped_keeps_short_lines():
    assert wrapped("short\n  two lines", 30) == "short\n  two lines"


def test_print_wrapped(capsys):
    print_wrapped("in the step times:", "uninstrumented median 12.0 ms (30 steps)", width=30)
    assert capsys.readouterr().out == "in the step times:\n    uninstrumented median 12.0\n    ms (30 steps)\n"
