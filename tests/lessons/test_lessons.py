"""Every lesson notebook runs top to bottom in replay mode, and is stored without outputs."""
import html
import re
from pathlib import Path

import nbformat
import pytest

from conftest import unwrapped

LESSONS = sorted((Path(__file__).resolve().parents[2] / "lessons").glob("[0-9][0-9]_*.ipynb"))

#: Pictures each lesson shows when run in replay mode (PNG outputs under Jupyter's inline
#: backend). A lesson that loses a picture, or draws one twice, fails its test.
EXPECTED_FIGURES = {"00": 2, "01": 1, "02": 2, "03": 1, "04": 1, "05": 3, "06": 2, "07": 1, "08": 3, "09": 5,
                    "10": 1, "11": 1, "12": 4, "13": 1}


#: The longest code line a lesson holds (characters): what a code cell shows whole in
#: JupyterLab at 1280 x 800 with the file browser open (tests/lessons/test_browser.py measures it).
CODE_LINE_CHARS = 95

#: The note under what lesson 12 shows of the public NCCL pair (not a kit recording).
PUBLIC = "public NCCL pair (HTA's sampled A100 run)"


#: Of those, the pictures a lesson holds back until their prediction is made (``ex.outcome``):
#: after Run All without answers the lesson shows the others (tests/lessons/test_browser.py too).
HELD_BACK_FIGURES = {"01": 1, "02": 2, "03": 1, "07": 1, "08": 1, "09": 2, "11": 1, "12": 2, "13": 1}


def figure_count(nb) -> int:
    """PNG pictures among the outputs of an executed notebook."""
    return sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def logical_lines(source: str) -> int:
    """Lines of logic in a code cell: Python's logical lines (a statement wrapped over several
    lines inside brackets counts once; comments and blank lines do not count), IPython's
    ``%magic`` and ``!shell`` lines counted as one each."""
    import io
    import tokenize
    from IPython.core.inputtransformer2 import TransformerManager
    code = TransformerManager().transform_cell(source)
    return sum(t.type == tokenize.NEWLINE for t in tokenize.generate_tokens(io.StringIO(code).readline))


def test_logical_lines_count_statements_not_wrapped_lines():
    wrapped = 'x = f(1,\n      2)   # one statement\n\n# a comment\nprint(x)\n%time y = 1\n'
    assert logical_lines(wrapped) == 3 and len(wrapped.splitlines()) == 6


#: The width of a notebook's output in JupyterLab at 1280 x 800 with the file browser open
#: (CSS px, measured by tests/lessons/test_browser.py): a wider picture is shown shrunk.
OUTPUT_PX = 848


def picture_sizes(nb) -> list:
    """``(width_px, smallest_text_px)`` of each PNG among an executed notebook's outputs: the
    PNG's own width and the size of its smallest text that kitlib writes into it
    (``kitlib.plots.SMALLEST_TEXT_KEY``; None where absent)."""
    import base64
    import io
    from PIL import Image
    from kitlib.plots import SMALLEST_TEXT_KEY
    out = []
    for c in nb.cells:
        for o in c.get("outputs", []) if c.cell_type == "code" else []:
            if "image/png" in o.get("data", {}):
                png = Image.open(io.BytesIO(base64.b64decode(o["data"]["image/png"])))
                text = png.text.get(SMALLEST_TEXT_KEY)
                out.append((png.width, None if text is None else float(text)))
    return out


def test_every_lesson_has_an_expected_figure_count():
    assert sorted(EXPECTED_FIGURES) == [p.name[:2] for p in LESSONS]
    assert all(n >= 1 for n in EXPECTED_FIGURES.values()), "every lesson has a picture"


def test_there_are_lessons():
    assert len(LESSONS) >= 2


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_is_stored_clean_and_has_exercises(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code), "commit lessons without outputs"
    assert sum("ex.check(" in c.source for c in code) >= 2, "each lesson has at least two exercises"
    md = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert md.lstrip().startswith("# ") and "## Takeaways" in md and "## Go further" in md
    # logic over ~15 lines belongs in kitlib: lines of logic (a statement wrapped to fit the
    # cell's width is one), and no cell taller than 22 lines on screen
    assert all(logical_lines(c.source) <= 15 for c in code), "logic over ~15 lines belongs in kitlib"
    assert all(len(c.source.splitlines()) <= 22 for c in code), "a cell over 22 lines belongs in kitlib"
    # a code cell in JupyterLab at 1280 x 800 with the file browser open shows about 100
    # characters of a line (13 px monospace); longer lines scrolled sideways (issue 40)
    wide = [line for c in code for line in c.source.splitlines() if len(line) > CODE_LINE_CHARS]
    assert not wide, f"code lines over {CODE_LINE_CHARS} characters: {wide}"


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_lesson_runs_in_replay_mode(path, executed_lesson):
    """Each lesson runs once (shared with tests/lessons/test_lesson_figures.py): the odd-numbered
    ones on "your own" recordings (every recording in KITLIB_REPLAY_DIR, see conftest's
    executed_lesson), the even-numbered on the kit's; the note under each table names the
    recordings, and never the kit's when the learner's are there."""
    run = executed_lesson(path.name[:2])
    own = run.own
    outputs = run.outputs
    assert not [o for o in outputs if o.get("output_type") == "error"]
    tables = [o["data"]["text/html"] for o in outputs if "<table" in o.get("data", {}).get("text/html", "")]
    noted = [t for t in tables if ">data: " in t]
    if path.name[:2] != "01":                  # lesson 01 shows only the learner's own CPU run
        # once a recording is open, every table says which recordings it comes from (a table
        # of facts shown before, such as lesson 11's routes, has no recording to name)
        first = next(i for i, t in enumerate(tables) if ">data: " in t)
        assert tables[first:] == noted, "every table says which recordings it comes from"
        if path.name[:2] == "13":              # the clinic's cases are the kit's in every mode
            own = False
        assert all(("your own recording" in t) if own else re.search(r"kit's \w+ (reference|clinic case)", t)
                   or PUBLIC in t for t in noted)
        assert not own or not any("kit's" in t for t in noted)
    text = "\n".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "mode: replay" in text or "recorded" in text
    # the exercises ran unanswered: each asks for an answer instead of judging
    assert "replace `None`" in "\n".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    # Run All gives no prediction away (issue 40): every ex.predicted(...) says the prediction is still open
    predicted = [c for c in run.nb.cells if c.cell_type == "code" and "ex.predicted(" in c.source]
    shown = "\n".join(str(o.get("data", {}).get("text/plain", "")) for c in predicted for o in c.outputs)
    assert shown.count("your prediction is still open") == sum(c.source.count("ex.predicted(") for c in predicted)
    assert "the recording says" not in shown and "you predicted" not in shown
    # each as the line (a widget) that the question's form redraws once the learner predicts
    state = run.nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    lines = [state.get(o["data"][WIDGET_VIEW]["model_id"], {}).get("state", {}).get("_dom_classes", [])
             for c in predicted for o in c.outputs if WIDGET_VIEW in o.get("data", {})]
    assert len(lines) == shown.count("your prediction is still open") and all("kitlib-predicted" in k for k in lines)
    # and drew its pictures, each once: those held back until a prediction is made (ex.outcome)
    # show once the predictions are revealed (the last cell the tests add)
    n = path.name[:2]
    assert (figure_count(run.run_all), figure_count(run.nb)) == (EXPECTED_FIGURES[n] - HELD_BACK_FIGURES.get(n, 0),
                                                              EXPECTED_FIGURES[n]), "a lesson's pictures are part of it"
    # each shown at 1x where learners work, its smallest text 9 px or more (issue 40)
    sizes = picture_sizes(run.nb)
    print(f"lesson {path.name[:2]}: pictures (PNG px wide, smallest text px): {sizes}")
    assert all(w <= OUTPUT_PX and text is not None and text >= 9 for w, text in sizes), sizes


@pytest.mark.parametrize("path", [p for p in LESSONS if p.name[:2] in ("00", "02", "03")], ids=lambda p: p.stem)
def test_lesson_runs_on_a_capture_the_kit_recorded_live(path, lesson_on_live_capture):
    """The lessons built on profiler_5step, fed the kit's own live H200 capture
    (through KITLIB_REPLAY_DIR) instead of the reference recording (conftest's
    lesson_on_live_capture)."""
    nb = lesson_on_live_capture(path.name[:2]).nb
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "\n".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert "(torch_profiler, live)" in text


def printed_tables(lines: list) -> list:
    """``(first, last)`` line numbers of the tables among printed lines: two or more
    consecutive lines of the same length (12 characters or more), each with a gap of two
    spaces or more between words — how ``DataFrame.to_string``, ``Series.to_string`` and
    the profiler's own tables print."""
    def row(s):
        return len(s) >= 12 and re.search(r"\S\s{2,}\S", s) is not None
    blocks, i = [], 0
    while i < len(lines):
        j = i
        while row(lines[i]) and j + 1 < len(lines) and len(lines[j + 1]) == len(lines[i]) and row(lines[j + 1]):
            j += 1
        if j > i:
            blocks.append((i, j))
        i = j + 1
    return blocks


def unlabelled(cell) -> list:
    """What an executed cell shows without the note saying which recording it comes from:
    each figure (PNG) whose text output lacks the ``[data: ...]`` line written under it, and
    each printed table (:func:`printed_tables`) not followed, within four lines of the
    cell's printed output or by the cell's next displayed result (its note in the text or
    under the HTML table), by a note."""
    missing, lines, printed = [], [], ""
    for o in cell.get("outputs", []):
        data = o.get("data", {})
        if "image/png" in data and "\n[data: " not in data.get("text/plain", ""):
            missing.append(f"figure {data.get('text/plain', '')[:40]!r}")
        if o.get("output_type") == "stream" and o.get("name") == "stdout":
            printed += o["text"]   # one print may arrive in several chunks, split anywhere
        elif data:   # a displayed result: its note (under a table or figure) counts as the next line
            lines += printed.split("\n") if printed else []
            printed = ""
            noted = "\n[data: " in str(data.get("text/plain", "")) or ">data: " in str(data.get("text/html", ""))
            lines.append("[data: " if noted else "<display>")
    lines += printed.split("\n") if printed else []
    for a, b in printed_tables(lines):
        after = [s for s in lines[b + 1:] if s.strip()][:4]
        if not any(s.startswith("[data: ") for s in after):
            missing.append(f"printed table {lines[a].strip()[:60]!r}")
    return missing


def test_the_label_check_finds_what_it_looks_for():
    """unlabelled() flags an unlabelled printed table and figure, and passes labelled ones."""
    import pandas as pd
    table = pd.Series({"external_id": 3710, "launched_before_recording": 78}, name="link").to_string()
    stream = lambda text: {"output_type": "stream", "name": "stdout", "text": text}
    png = lambda plain: {"output_type": "display_data", "data": {"image/png": "", "text/plain": plain}}
    assert unlabelled({"outputs": [stream(table + "\nsome words\n")]}) == ["printed table 'external_id                  3710'"]
    assert unlabelled({"outputs": [stream(table + "\n[data: x: kit's H200 reference]\n")]}) == []
    half = len(table) // 2 + 3           # the same print, delivered in two chunks split mid-line
    assert unlabelled({"outputs": [stream(table[:half]), stream(table[half:] + "\n[data: x]\n")]}) == []
    assert unlabelled({"outputs": [stream(table[:half]), stream(table[half:] + "\nsome words\n")]}) != []
    assert unlabelled({"outputs": [stream(table + "\n"), png("<Figure>\n[data: x]")]}) == []
    assert unlabelled({"outputs": [png("<Figure size 640x480 with 1 Axes>")]}) == ["figure '<Figure size 640x480 with 1 Axes>'"]
    assert unlabelled({"outputs": [stream("mode: replay\nfiles will be written to /tmp/x\n")]}) == []


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_every_figure_and_printed_table_says_which_recording(path, executed_lesson):
    """Every figure a lesson draws, and every table it prints, carries the note naming the
    recording it comes from (lesson 01: the learner's own CPU run of the lesson)."""
    nb = executed_lesson(path.name[:2]).nb
    missing = {i: m for i, c in enumerate(nb.cells) if c.cell_type == "code" for m in [unlabelled(c)] if m}
    assert not missing, f"cells without the note: {missing}"


def test_lesson12_notes_name_each_tables_own_recording(executed_lesson):
    """Lesson 12's public NCCL pair is labelled as itself: the notes of the cells that read
    only the pair name it alone, and the notes of the cells that read only the kit's two
    Gloo runs never name it."""
    nb = executed_lesson("12").nb
    seen = {"nccl": 0, "gloo": 0}
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        text = "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in c.outputs)
        notes = re.findall(r"^\[data: (.*)\]$", text, re.M)
        # the kit's own HTML tables (widgets.readable) carry the note in their HTML only
        notes += [html.unescape(n) for o in c.outputs if "[data: " not in str(o.get("data", {}).get("text/plain", ""))
                  for n in re.findall(r'<div style="font-size:smaller;color:#666">data: (.*?)</div>',
                                      str(o.get("data", {}).get("text/html", "")))]
        nccl, gloo = re.search(r"\bnccl\b", c.source), re.search(r"\b(bal|slow)\b", c.source)
        if nccl and not gloo:
            assert notes and all(n == PUBLIC for n in notes), c.source
            seen["nccl"] += len(notes)
        elif gloo and not nccl:
            assert all("ranks_" in n and "NCCL" not in n for n in notes), c.source
            seen["gloo"] += len(notes)
    assert seen["nccl"] >= 2 and seen["gloo"] >= 3   # the overlap table and its figure; the Gloo tables and figure


#: Answer forms each lesson shows: one per ``ex.check`` call that runs (lesson 11 checks
#: four of its questions in one loop), except lesson 13's ten evidence questions, whose
#: cells say "name the right cause first" until their cause is named right or revealed, and its three questions
#: about the fixes, which wait until every case's cause has been (run in order with no
#: answers, none has). tests/lessons/test_browser.py counts the same in JupyterLab.
FORMS = {"00": 4, "01": 5, "02": 8, "03": 7, "04": 5, "05": 8, "06": 5, "07": 6, "08": 6, "09": 11, "10": 10, "11": 16,
         "12": 13, "13": 31}
def _notes(cell) -> list:
    """The ``data: ...`` notes of an executed cell's outputs: under figures and printed or
    displayed tables (text), and under the kit's own HTML tables (widgets.readable)."""
    text = "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs)
    notes = re.findall(r"^\[data: (.*)\]$", text, re.M)
    notes += [html.unescape(n) for o in cell.outputs if "[data: " not in str(o.get("data", {}).get("text/plain", ""))
              for n in re.findall(r'<div style="font-size:smaller;color:#666">data: (.*?)</div>',
                                  str(o.get("data", {}).get("text/html", "")))]
    return notes


#: The characters of a printed line a notebook's output shows whole in JupyterLab at 1280 x 800
#: with the file browser open (848 px of 13 px monospace, about 108; a few kept in hand, as
#: for code lines): a longer line of a table wraps, and its columns no longer line up.
PRINTED_TABLE_CHARS = 95


def test_lesson11_map_is_held_back_until_the_routes_are_answered(executed_lesson):
    """Lesson 11's map draws the answer of every routing question (none of them a prediction):
    after Run All with no answer it is one line naming the questions to answer, no picture;
    it is drawn once they are answered or revealed."""
    run = executed_lesson("11")
    (i,) = [i for i, c in enumerate(run.run_all.cells) if c.cell_type == "code" and "plot_routes(" in c.source]
    outs = run.run_all.cells[i].outputs
    said = _shown_text(outs)
    assert not any("image/png" in o.get("data", {}) for o in outs), "the map drawn before its questions are answered"
    assert "held back until you answer" in said, said
    from kitlib.course.exercises import l11
    assert all(key in said for key in l11.route_table()["key"]), said
    assert any("image/png" in o.get("data", {}) for o in run.nb.cells[i].outputs), "the map not drawn once revealed"


#: Per recall question of lesson 11, what (regular expressions, case aside) no cell before its
#: own check may say after Run All, in its markdown or its outputs (HTML tables read as text): a
#: new learner's Run All at 1280 x 800 (December 2026) found the tool table, the lesson's first
#: output, answering the routing questions ("device time grouped by shape and by call site;
#: tensor memory per operator", "why one kernel takes the time it does", "whether a change made
#: the step faster"), and the prose before the forms saying Nsight Systems names a kernel's
#: operator once emit_nvtx is on (op_of_kernel's "both"). The table shows with the map.
EARLIER_TELLS = {
    "op_of_kernel": [r"can name the operator of a kernel", r"operator of a kernel[^?.]*once `?emit_nvtx`? is on"],
    "memory_per_op": [r"tensor memory per operator; FLOP"],
    "shape_groups": [r"grouped by shape"],
    "line_of_code": [r"grouped by shape and by call site", r"\bby call site\b"],
    "occupancy": [r"throughput, occupancy, stalls", r"why one kernel takes"],
    "conv_bound": [r"why one kernel takes", r"throughput, occupancy, stalls"],
    "is_it_faster": [r"whether a change made"],
    "context_switch": [r"the OS, copies and GPU streams interact"],
}


def _seen_text(cell) -> str:
    """What a cell shows after a run: its markdown, or its outputs' text and HTML (tags out)."""
    if cell.cell_type == "markdown":
        return cell.source
    outs = cell.get("outputs", [])
    page = " ".join(str(o.get("data", {}).get("text/html", "")) for o in outs)
    return _shown_text(outs) + " " + re.sub(r"<[^>]+>", " ", page.replace("<wbr>", ""))


def test_lesson11_no_cell_before_a_routing_question_answers_it(executed_lesson):
    """A recall question whose answer the same lesson prints above it is copying: after Run All
    with no answer, no cell before a routing question's form holds EARLIER_TELLS for it; the
    tool table (l11.tool_table()) is one held-back line naming the routing questions, and shows
    once they are answered or revealed."""
    from kitlib.course.exercises import l11
    run = executed_lesson("11")
    cells = run.run_all.cells[:-1]                  # the revealing cell the tests add left out
    found = []
    for key, tells in EARLIER_TELLS.items():
        ask = next(i for i, c in enumerate(cells) if c.cell_type == "code" and "ex.check(" in c.source
                   and f'"{key}"' in c.source)
        found += [(key, i, t) for i in range(ask) for t in tells if re.search(t, _seen_text(cells[i]), re.I)]
    assert not found, f"routing questions answered above their forms (key, cell, tell): {found}"
    (i,) = [i for i, c in enumerate(cells) if c.cell_type == "code" and "l11.tool_table()" in c.source]
    assert i > max(j for j, c in enumerate(cells) if c.cell_type == "code" and "plot_routes(" in c.source)
    said = unwrapped(_seen_text(cells[i]))
    assert "held back until you answer" in said and all(k in said for k in l11.route_table()["key"]), said
    assert "why one kernel takes the time it does" not in said
    shown = unwrapped(_seen_text(run.nb.cells[i]))
    assert "why one kernel takes the time it does" in shown and "tensor memory per operator" in shown, shown


def test_lesson07_printed_tables_fit_a_laptop_output(executed_lesson):
    """Issue 40: in lesson 07 the profiler's own table (its Name column padded to 55
    characters, 98 in all) and fixed_batch's key_averages() rows (108) wrapped their lines at
    1280 x 800 with the file browser open. Every table the lesson prints fits
    PRINTED_TABLE_CHARS, and the profiler's table keeps its four columns."""
    nb = executed_lesson("07").nb
    wide = []
    for i, c in enumerate(nb.cells):
        lines = "".join(o.get("text", "") for o in c.get("outputs", []) if o.get("output_type") == "stream").split("\n")
        wide += [(i, len(ln), ln[:60]) for a, b in printed_tables(lines) for ln in lines[a:b + 1]
                 if len(ln) > PRINTED_TABLE_CHARS]
    assert not wide, wide
    text = executed_lesson("07").text
    assert re.search(r"\n\s+Name\s+CUDA Mem\s+Self CUDA Mem\s+# of Calls\n", text)


def _held_outputs(run, marker: str) -> tuple:
    """``(as Run All left it, once revealed)``: the outputs of the one code cell of ``run``
    whose source holds ``marker``."""
    (i,) = [i for i, c in enumerate(run.run_all.cells) if c.cell_type == "code" and marker in c.source]
    return run.run_all.cells[i].outputs, run.nb.cells[i].outputs


def test_lesson06_nothing_shown_before_the_prediction_says_autograds_thread_runs_no_python(executed_lesson):
    """A new learner's Run All at 1280 x 800 (December 2026): three sentences of lesson 06 (the
    C++ thread, a backward operator's borrowed stack, in the prose before and after the
    question and in the takeaways) told backward_python_frames' answer, which a single digit
    cannot be searched for. No markdown cell and no output Run All shows, before the question
    or after it, holds LATER_TELLS' phrases for it; the teaching comes with the held-back count."""
    run = executed_lesson("06")
    cells = run.run_all.cells[:-1]
    found = []
    for i, cell in enumerate(cells):
        text = _later_text(cell)
        for pattern in LATER_UNRELATED["backward_python_frames"]:
            text = re.sub(pattern, " ", text)
        found += [(i, t) for t in LATER_TELLS["backward_python_frames"] if re.search(t, text, re.I)]
    assert not found, found
    held, opened = _held_outputs(run, "l06.BACKWARD_CALL_SITES")
    assert "held back until you predict" in _shown_text(held)
    shown = unwrapped(_shown_text(opened))
    assert "the same sequence number" in shown and "no forward operator to borrow a stack from" in shown, shown


def test_lesson06_longest_events_name_each_kernel_whole_and_say_what_a_gap_is(executed_lesson):
    """The same learner: the five longest GPU events showed kernels cut mid-word
    ("…::max_p") and a row of ``nan``. Once hot_kernel_module is predicted, each kernel's name
    is whole but for its templates and arguments (diff_rows.short_name), no cell of the table
    reads nan, the gap says "not recorded" (readable's na_rep) and a line says what that means."""
    from kitlib.course.diff_rows import short_name
    from kitlib.readers.bundle import open_capture
    run = executed_lesson("06")
    held, opened = _held_outputs(run, "longest_shown")
    assert "held back until you predict" in _shown_text(held)
    html_ = " ".join(str(o.get("data", {}).get("text/html", "")) for o in opened)
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", html_.replace("<wbr>", ""),
                                                                  re.S)]
    names = {html.unescape(short_name(n, width=None)) for n in open_capture("fixed_batch").trace.gpu["name"]}
    kernels = [html.unescape(c) for c in cells if "::" in c and not c.startswith(("aten::", "torchvision"))]
    assert kernels and all(k in names and not k.endswith("…") for k in kernels), kernels
    assert "nan" not in [c.lower() for c in cells] and "not recorded" in cells, cells
    said = unwrapped(_shown_text(opened))
    assert "not recorded: launched before the profiler began recording" in said, said


def test_lesson06_explorer_offers_the_views_by_layer_only_once_predicted(executed_lesson):
    """The same learner switched lesson 06's explorer to module_type, the held-back table of
    hot_kernel_module, before predicting. As Run All shows it (its static view, made as the
    cell ran), the explorer offers user_frame alone, with the note saying why; the layout and
    the opening of the views are tests/course/test_widgets.py's."""
    run = executed_lesson("06")
    (i,) = [i for i, c in enumerate(run.run_all.cells) if c.cell_type == "code" and "grouping_explorer(" in c.source]
    static = " ".join(str(o.get("data", {}).get("text/html", "")) for o in run.run_all.cells[i].outputs)
    assert "group by module_type and module waits for your prediction of hot_kernel_module" in html.unescape(static)


def test_lesson08_busy_times_per_step_wait_for_the_busy_share_prediction(executed_lesson):
    """The same learner, in lesson 08: the table of three busy times (ms per step) sat beside
    gpu_busy_share before it was predicted, and divided by a step's time gives its share. Run
    All shows its held-back line (LATER_TELLS searches the rest); once revealed, the table."""
    held, opened = _held_outputs(executed_lesson("08"), "busy_times_shown")
    assert "held back until you predict" in _shown_text(held)
    assert "busy ms per step" in _shown_text(opened)


def _outcome_widgets(run) -> list:
    """``(keys, outputs once revealed)`` of every output widget ``ex.outcome`` left in ``run``:
    the questions it waits on (its ``kitlib-outcome-KEY`` classes) and what it showed."""
    state = run.run_all.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}) \
        .get("state", {})
    found = []
    for s in state.values():
        classes = s.get("state", {}).get("_dom_classes", [])
        if "kitlib-outcome" in classes:
            keys = {c.removeprefix("kitlib-outcome-") for c in classes if c.startswith("kitlib-outcome-")}
            found.append((keys, s["state"].get("outputs", [])))
    return found


def test_lesson06_call_sites_and_labels_wait_for_backward_python_frames(executed_lesson):
    """A new learner's Run All at 1280 x 800 (December 2026), lesson 06: the by-call-site table
    (and its explorer) showed a call site "(none)" with 4,290 operators, and the labels' table
    the label backward with 4.4 µs of device time, both hinting that backward work runs without
    Python frames. After Run All with no answer the table, the picture's data and the explorer
    leave the row (none) out, the labels show no device time (LATER_TELLS searches the text);
    once backward_python_frames is revealed, both show."""
    run = executed_lesson("06")
    cells = run.run_all.cells[:-1]
    def seen(outputs):      # text, and a table's HTML as its cells read
        html_ = " ".join(str(o.get("data", {}).get("text/html", "")) for o in outputs)
        return _shown_text(outputs) + " " + re.sub(r"<[^>]+>", " ", html_.replace("<wbr>", ""))
    everything = "\n".join(seen(c.outputs) for c in cells if c.cell_type == "code")
    assert "(none)" not in everything.replace("the row (none), the operators with no call site", "")
    assert "device_total_us" not in everything
    assert "the row (none), the operators with no call site, waits for your prediction of " \
           "backward_python_frames" in everything
    opened = [seen(outs) for keys, outs in _outcome_widgets(run) if keys == {"backward_python_frames"}]
    assert any(re.search(r"\(none\)\s+\d+\s+\d+", o) for o in opened), opened
    assert any(re.search(r"\bbackward\s+5\s+[\d.]+\s+[\d.]+", o) for o in opened), opened


def test_lesson06_longest_event_prompt_and_prose_say_the_same(executed_lesson, built_lessons):
    """The same learner: the prose asked for "the single longest GPU event", the form for the
    longest "launched inside a module", and the table of the five longest showed a row "not
    recorded". Prose and prompt both ask about the events launched inside a module and say the
    events launched before the recording are left out; the note under the table says so."""
    nb = executed_lesson("06").run_all
    ask = next(i for i, c in enumerate(nb.cells) if 'ex.check("hot_kernel_module"' in c.source)
    prose = unwrapped(nb.cells[ask - 1].source)
    prompt = built_lessons["06"][0]["hot_kernel_module"].prompt
    for said in (prose, prompt):
        assert "single longest" not in said and "launched inside a module" in said, said
        assert re.search(r"before the (profiler began recording|recording began)", said), said
        assert "left out" in said or "leaves such events out" in said, said
    assert '"not recorded"' in prose
    held, opened = _held_outputs(executed_lesson("06"), "longest_shown")
    assert "the question asks about the longest of the others" in unwrapped(_shown_text(opened))


def test_lesson08_whole_step_row_waits_for_the_busy_share_prediction_too(executed_lesson):
    """The same learner, in lesson 08: once with_flops_share was answered, the rates table
    showed the whole step's GPU busy time (41.6 ms a step), from which gpu_busy_share follows
    with the step time. No outcome that waits on with_flops_share alone shows the whole-step
    row or its rate; one that waits on both does, with the sentence on the peak, which no
    markdown cell says before it."""
    run = executed_lesson("08")
    whole = "GPU busy time of the kernels, copies and memsets"
    outcomes = _outcome_widgets(run)
    alone = [_shown_text(o) + str([x.get("data", {}).get("text/html", "") for x in o])
             for keys, o in outcomes if "gpu_busy_share" not in keys]
    assert alone and not [t for t in alone if whole in t or "whole step" in t], alone
    both = [unwrapped(_shown_text(o)) + str([x.get("data", {}).get("text/html", "") for x in o])
            for keys, o in outcomes if keys == {"with_flops_share", "gpu_busy_share"}]
    assert len(both) == 1 and "The whole step sits far below the peak" in both[0] and whole in both[0], both
    md = " ".join(c.source for c in run.run_all.cells if c.cell_type == "markdown")
    assert "far below the peak" not in md and "sat idle" not in md


#: The characters of a printed line a notebook's output shows without wrapping in JupyterLab
#: at 1280 x 800 with the file browser open (848 px of 13 px monospace): a longer line wraps,
#: and JupyterLab breaks it anywhere, mid-word (issue 40).
PRINTED_LINE_CHARS = 105

#: Printed lines allowed past PRINTED_LINE_CHARS, per lesson: (a regular expression the whole
#: line matches, why it cannot fit).
LONG_LINES_ALLOWED: dict = {}


def printed_lines(nb) -> list:
    """``(cell index, line)`` of every line an executed notebook prints where a learner reads
    it as text: stream outputs (stdout and stderr; one print may come in several chunks) and
    text/plain results that nothing richer replaces (JupyterLab shows a result's HTML, picture
    or widget in place of its text/plain)."""
    out = []
    for i, c in enumerate(nb.cells):
        if c.cell_type != "code":
            continue
        streams = {}
        for o in c.get("outputs", []):
            data = o.get("data", {})
            if o.get("output_type") == "stream":
                streams[o.get("name")] = streams.get(o.get("name"), "") + o.get("text", "")
            elif data and set(data) <= {"text/plain"}:
                out += [(i, ln) for ln in str(data["text/plain"]).split("\n")]
        out += [(i, ln) for text in streams.values() for ln in text.split("\n")]
    return out


def test_printed_lines_count_streams_and_plain_results_only():
    stream = lambda text: {"output_type": "stream", "name": "stdout", "text": text}
    cell = {"cell_type": "code", "outputs": [stream("a b"), stream("c\nd\n"),
                                              {"output_type": "execute_result", "data": {"text/plain": "e"}},
                                              {"output_type": "display_data", "data": {"text/plain": "f",
                                                                                       "text/html": "<b>f</b>"}}]}
    assert printed_lines(nbformat.from_dict({"cells": [cell]})) == [(0, "e"), (0, "a bc"), (0, "d"), (0, "")]


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_printed_lines_fit_a_laptop_output(path, executed_lesson):
    """Issue 40: at 1280 x 800 with the file browser open JupyterLab wraps a printed line
    longer than PRINTED_LINE_CHARS anywhere, mid-word (the profiler's own tables, raw JSON
    events, kitlib's sentences, ``print(ex.show())``). Every line a lesson prints, held-back
    outcomes included, fits, except those LONG_LINES_ALLOWED names with their reason."""
    n = path.name[:2]
    allowed = LONG_LINES_ALLOWED.get(n, [])
    nb = executed_lesson(n).nb
    nb = nbformat.from_dict({**nb, "cells": nb.cells[:-1]})   # the revealing cell the tests add left out
    wide = [(i, len(ln), ln) for i, ln in printed_lines(nb) if len(ln) > PRINTED_LINE_CHARS
            and not any(re.fullmatch(pattern, ln) for pattern, _ in allowed)]
    print(f"lesson {n}: {len(wide)} printed lines over {PRINTED_LINE_CHARS} characters")
    assert not wide, "\n".join(f"cell {i}, {k} chars: {ln}" for i, k, ln in wide)


def test_lesson10_figure_note_names_exactly_the_recordings_drawn(executed_lesson):
    """Issue 40: the note under lesson 10's figure (every series of step times, one marker a
    step) named every recording the lesson had opened (fixed_batch, the Nsight exports, the
    two-rank runs its questions read), though the figure draws profiler_5step's
    step_times.json alone (its three series: ``times = ref.step_times()``). A note names
    what the figure or table shows: the figure's, and the table of the same series', name
    profiler_5step and nothing else."""
    from kitlib.readers.bundle import open_capture
    nb = executed_lesson("10").nb
    drawn = [open_capture("profiler_5step").label]
    figures = [c for c in nb.cells if c.cell_type == "code"
               and any("image/png" in o.get("data", {}) for o in c.outputs)]
    assert len(figures) == 1 and "plot_step_times(times" in figures[0].source
    assert _notes(figures[0]) == ["; ".join(drawn)], _notes(figures[0])
    table = next(c for c in nb.cells if c.cell_type == "code" and "step_time_stats(times)" in c.source
                 and c.source.lstrip().startswith("readable("))
    assert _notes(table) == ["; ".join(drawn)], _notes(table)


#: Lesson 13's evidence cells: a note instead of a form until the case's cause is tried, then
#: the form in its place; its fix questions' cells: the same until every case's cause is tried.
LOCKED = re.compile(r'ex\.check\("case_\w_evidence"')
FIX_LOCKED = re.compile(r'ex\.check\("(fix_\w+)"')
#: Lesson 13's case letters, in the lesson's order.
CLINIC_LETTERS = "abcdefghkl"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_every_exercise_check_shows_an_answer_form(path, executed_lesson):
    """In a kernel, each ``ex.check`` cell's result carries its ipywidgets form (the widget
    view beside the verdict's text), the form of that question: nbclient keeps the widgets'
    state in the notebook, where each form's classes name its question. No browser needed."""
    run = executed_lesson(path.name[:2])
    state = run.nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    forms = []
    for cell in (c for c in run.nb.cells if c.cell_type == "code" and "ex.check(" in c.source):
        views = [o["data"][WIDGET_VIEW]["model_id"] for o in cell.outputs if WIDGET_VIEW in o.get("data", {})]
        if path.name[:2] == "13" and LOCKED.search(cell.source):
            # a note in an output widget that gives way to the evidence's form, in place, once the
            # cause is named right or revealed (the tests' last cell reveals it): no re-run
            text = "".join(str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs)
            assert len(views) == 1 and "name the right cause first" in text, cell.source
            (key,) = re.findall(r'ex\.check\("(case_\w_evidence)"', cell.source)
            held = state.get(views[0], {}).get("state", {})
            assert f"kitlib-held-form-{key.replace('evidence', 'cause')}" in held.get("_dom_classes", []), held
            inner = [o["data"][WIDGET_VIEW]["model_id"] for o in held.get("outputs", [])
                     if WIDGET_VIEW in o.get("data", {})]
            assert [f"kitlib-answer-form-{key}" in state.get(m, {}).get("state", {}).get("_dom_classes", [])
                    for m in inner] == [True], (cell.source, held.get("outputs"))
            continue
        if path.name[:2] == "13" and FIX_LOCKED.search(cell.source):
            # a fix names what it changed: a line naming every cause still open (all of them, with
            # no answer), which gives way to the form once the last is tried (the last cell reveals)
            text = "".join(str(o.get("data", {}).get("text/plain", "")) for o in cell.outputs)
            causes = [f"case_{x}_cause" for x in CLINIC_LETTERS]
            assert len(views) == 1 and "held back until you have tried every case's cause" in text, cell.source
            assert f"Still open: {', '.join(causes)} (" in unwrapped(text), text
            (key,) = FIX_LOCKED.findall(cell.source)
            held = state.get(views[0], {}).get("state", {})
            assert {f"kitlib-held-form-{c}" for c in causes} <= set(held.get("_dom_classes", [])), held
            inner = [o["data"][WIDGET_VIEW]["model_id"] for o in held.get("outputs", [])
                     if WIDGET_VIEW in o.get("data", {})]
            assert [f"kitlib-answer-form-{key}" in state.get(m, {}).get("state", {}).get("_dom_classes", [])
                    for m in inner] == [True], (cell.source, held.get("outputs"))
            continue
        assert views, f"no answer form under: {cell.source}"
        keys = []
        for model in views:
            classes = state.get(model, {}).get("state", {}).get("_dom_classes", [])
            assert "kitlib-answer-form" in classes, (cell.source, classes)
            keys += [c.removeprefix("kitlib-answer-form-") for c in classes if c.startswith("kitlib-answer-form-")]
        # the form of the question the cell checks (a literal key; lesson 11's loop names them by variable)
        literal = re.findall(r'ex\.check\("(\w+)"', cell.source)
        assert set(literal) <= set(keys), (cell.source, keys)
        forms += keys
    assert len(forms) == FORMS[path.name[:2]], forms


def _profiler_steps(bundle: str) -> list:
    """The ProfilerStep#N numbers of a reference trace, read from its raw JSON."""
    import gzip
    import json
    ref = Path(__file__).resolve().parents[2] / "data" / "reference"
    doc = json.loads(gzip.decompress((ref / bundle / "trace.json.gz").read_bytes()))
    return sorted({int(e["name"].split("#")[1]) for e in doc["traceEvents"]
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")})


def test_each_explorer_opens_on_the_view_its_lesson_describes(executed_lesson):
    """An explorer's first view (its text/plain, also what a static export shows) is the one
    the lesson's text and the picture before it describe: 00 the second profiled step, as
    drawn just before; 02 the first step's first convolution; 04 the first step of the
    cold-start recording, where the first data_load is; 05 convolutions by input shape, 06 call
    sites, both by device time; 07 the first profiled step's memory peak; 09 the step of
    the table above it. Step numbers of profiler_5step come from its raw JSON."""
    steps = _profiler_steps("profiler_5step")
    assert steps == [2, 3, 4, 5, 6]
    want = {
        "00": f"profiler_5step (step: {steps[1]}, steps: 1, window: (0.0, 100.0))",
        "02": f"operator → launch → GPU event (step: {steps[0]}, operator: aten::cudnn_convolution)",
        "04": "cold_start_8step (step: 0, steps: 2, window: (0.0, 100.0))",
        "05": "device time by input shape (operator: aten::cudnn_convolution, sort_by: device_total_us, contains: , top: 8)",
        "06": "device time by call site (group_by: user_frame, sort_by: device_self_us, contains: , top: 8)",
        "07": f"memory held at the step's peak, by the operator that allocated it (step: {steps[0]})",
        "09": "Nsight Systems (step: 2, steps: 1, window: (0.0, 100.0))",
    }
    for n, view in want.items():
        nb = executed_lesson(n).nb
        shown = [o["data"].get("text/plain") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                 if "application/vnd.jupyter.widget-view+json" in o.get("data", {}) and "explorers." in c.source]
        assert shown == [view], (n, shown)


#: Per prediction, what in an output states its answer where the answer as shown cannot be
#: searched for (a yes/no, a single digit, a choice no output words), or states it as well:
#: the line or column that gives it. Each must show once the prediction is revealed (in the
#: outcome held back until then), so that a renamed column fails here instead of passing.
TELLS = {"forward_mostly_api": ["cuda_api_share"], "launch_count": ["cudaLaunchKernelExC"],
         "kernel_after_op": ["gpu_at_us"], "total_sum_exceeds_wall": ["host_ops_total_sum"],
         "busy_or_sum": ["gpu_sum"], "first_load_order": ["1523.3615"],
         "shapes_allocator_peak": ["peak_allocated_MB"], "hot_kernel_module": ["max_pool2d"],
         "backward_python_frames": ["python_frames"], "self_mem_vs_peak": ["peak allocated"],
         "peak_phase": ["peak allocated"], "with_flops_share": ["with_flops per step"],
         "gpu_busy_share": ["GPU busy"], "streams_one_for_all": ["streamId"],
         "backward_gpu_ops": ["Total GPU Ops"], "syncs_in_steps": ["host time in waiting calls"],
         "same_batches_verdict": ["like with like:"], "gpu_idle_over_tenth": ["idle_ms"],
         "conv_kernels_named_conv": ["with 'conv' in their name"],
         "clock_offset": ["end spreads with rank 1's clock"], "straggler_part": ["outside_ops_ms"],
         "steps_in_trace": ["ProfilerStep#4", "# of Calls"]}


def lesson_questions(n: str, built_lessons) -> list:
    """Lesson ``n``'s questions as the answer key builds them; lesson 01's prediction alone,
    built as its cell builds it (the lesson's other questions come from the learner's own run)."""
    if n == "01":
        from kitlib.course.exercises import lesson01
        return lesson01(schedule=dict(wait=1, warmup=1, active=3), steps_run=5).questions
    return built_lessons[n][0].questions


def answer_as_shown(answer) -> list:
    """The forms in which a lesson or the kit shows ``answer``: a word or phrase as written,
    a whole number with and without a thousands separator, a fraction as ``ex.reveal``
    rounds it and to two decimals or three significant figures. Left out where a search
    would find it everywhere: a yes/no and a single character."""
    from kitlib.course.exercises import _answer_shown, _plain
    answer = _plain(answer)
    if isinstance(answer, bool):
        return []
    if isinstance(answer, str):
        forms = {answer} | ({f"{int(answer):,}"} if answer.isdigit() else set())
    elif isinstance(answer, int):
        forms = {str(answer), f"{answer:,}"}
    else:
        forms = {_answer_shown(answer), f"{answer:.2f}", f"{answer:,.2f}", f"{answer:.3g}"}
    return sorted(f for f in forms if len(f) >= 2)


def shows(text: str, form: str) -> bool:
    """Whether ``text`` holds ``form`` as a word or a number of its own (not ``23`` in
    ``230`` or ``2.23``, not ``sum`` in ``gpu_sum``), case aside."""
    return re.search(rf"(?<![\w.,-]){re.escape(form)}(?![\w-]|[.,]\d)", text, re.I) is not None


def _shown_text(outputs) -> str:
    return "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs)


def test_the_answer_search_finds_words_and_numbers_of_their_own():
    assert answer_as_shown("10000") == ["10,000", "10000"] and answer_as_shown(0.8912) == ["0.89", "0.891", "0.8912"]
    assert answer_as_shown(False) == [] and answer_as_shown(3) == [] and answer_as_shown(23) == ["23"]
    assert shows("23 shape groups", "23") and not shows("230 calls, 2.23 ms", "23")
    assert shows("phase backward, after", "backward") and not shows("gpu_sum  busy_or_sum", "sum")


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_run_all_without_answers_shows_no_prediction_answer(path, executed_lesson, built_lessons):
    """Issue 40: run top to bottom with no answer, a lesson shows no prediction's answer
    before it is predicted: from the question's cell to its ``ex.predicted`` cell, no output
    (other questions' forms aside) holds the answer as shown, nor its tell (TELLS), and the
    markdown right after it (the takeaway) does not state the answer. Once the predictions
    are revealed (the cell the tests add), every outcome held back shows, tells included."""
    n = path.name[:2]
    run = executed_lesson(n)
    cells = run.run_all.cells[:-1]                  # the revealing cell the tests add left out
    found, missing = [], []
    for q in (q for q in lesson_questions(n, built_lessons) if q.kind == "predict"):
        ask = next(i for i, c in enumerate(cells) if c.cell_type == "code" and f'ex.check("{q.key}"' in c.source)
        done = next(i for i, c in enumerate(cells) if c.cell_type == "code" and f'ex.predicted("{q.key}")' in c.source)
        region = [i for i in range(ask + 1, done + 1) if cells[i].cell_type == "code" and "ex.check(" not in cells[i].source]
        text = _shown_text(o for i in region for o in cells[i].outputs)
        # the takeaway: the markdown right after the ex.predicted cell, up to the next code cell
        after = next((i for i in range(done + 1, len(cells)) if cells[i].cell_type == "code"), len(cells))
        md = "\n".join(cells[i].source for i in range(done + 1, after))
        found += [(q.key, f) for f in answer_as_shown(q.answer) if shows(text, f) or shows(md, f)]
        found += [(q.key, t) for t in TELLS.get(q.key, []) if shows(text, t)]
        opened = _shown_text(o for i in region for o in run.nb.cells[i].outputs)
        missing += [(q.key, t) for t in TELLS.get(q.key, []) if t not in opened]
    assert not found, f"answers shown before their prediction (key, as shown): {found}"
    assert not missing, f"tells not shown once revealed (renamed?): {missing}"
    assert all("held back until you" not in _shown_text(outs) for outs in run.held_back.values())



#: Predictions whose choice, as written, is searched for in later cells: the choices that no
#: sentence of a lesson uses in another sense ("sum", "lower", "backward", "slower", "a few"
#: are everywhere; their later giveaways are in LATER_TELLS).
DISTINCTIVE = {"first_load_order": ("10,000", "10000"), "hot_kernel_module": ("MaxPool2d",),
               "with_flops_share": ("about a third",), "gpu_busy_share": ("over three quarters",),
               "backward_gpu_ops": ("one or a few",), "queue_verdict": ("GPU-bound",),
               "same_batches_verdict": ("no difference beyond the noise",),
               "clock_offset": ("all about 5 ms apart",), "straggler_part": ("between operators",)}

#: Per prediction, what (regular expressions, case aside) in a markdown cell or an output further
#: down states its answer where the answer itself cannot be searched for (a yes/no, a one-digit
#: count, a common word), or gives it away (the figures it is read from, a sentence that says
#: it): each found in a lesson by a new learner's Run All (issue 40), or a column or line that
#: prints the figures.
LATER_TELLS = {
    "launch_count": [r"\b3 of 3\b", r"\bthree launches\b", r"made \*\*several\*\* launches", r"\blaunch #\d"],
    "kernel_after_op": [r"starts? after (its|the operator's) host interval", r"need not overlap at all"],
    "total_sum_exceeds_wall": [r"counts? the same (nanoseconds|work) again"],
    "busy_or_sum": [r"\bunion \(device busy\)", r"\bgpu_sum_ms\b", r"device busy \(union\), whole trace",
                    r"\d+ kernels start before the previous", r"yet some start early", r"even on one stream",
                    r"exceed their union", r"every overlapping kernel"],
    "first_load_order": [r"thousands of times", r"\b1,?523\.\d", r"\brange_end_ms\b"],
    "conv_shapes": [r"couple of dozen"],
    "shapes_allocator_peak": [r"did not raise the allocator's peak"],
    "forward_mostly_api": [r"host time is not mostly launches"],
    "steps_in_trace": [r"\bthree recorded steps\b", r"only the active steps"],
    "backward_python_frames": [r"without Python frames", r"C\+\+ thread", r"\bin C\+\+", r"no Python (runs|frame)",
                               r"\bborrow\w*\b.{0,40}\bstack", r"\bstack\b.{0,40}\bborrowed",
                               r"stack of the forward operator", r"with the same sequence number",
                               # the call site (none)'s operator count, the labels' device time
                               r"\(none\)[ \t]+\d+[ \t]+\d+", r"\bbackward[ \t]+\d+[ \t]+[\d.]+[ \t]+[\d.]+"],
    "self_mem_vs_peak": [r"\bpeak: trace \d", r"history peak \d", r"\bpeak_allocated_bytes\b"],
    "peak_phase": [r"ReluBackward0", r"threshold_backward"],
    "with_flops_share": [r"\btflop_per_step\b"],
    "gpu_busy_share": [r"busy (almost )?all the time", r"\bbusy ms per step\b", r"\bbusy ms, 5 steps\b",
                       r"sat idle most of the time", r"sits far below the peak"],
    "streams_one_for_all": [r"on streams \[\d+, \d+"],
    "backward_gpu_ops": [r"projects almost nothing"],
    "syncs_in_steps": [r"has none inside its steps", r"no synchronising call inside a step",
                       r"had the loop printed"],
    "queue_verdict": [r"queue still runs dry", r"on it never does", r"\bhost_wait_ms\b"],
    "gpu_idle_over_tenth": [r"what differs is the loader"],
    "clock_offset": [r"every figure also carries", r"not on the clocks that stamp", r"end together in real time"],
    "hot_kernel_module": [r"\b912\b", r"519\.9", r"\[128, 64, 112, 112\]", r"largest only in a tie",
                          r"cost little in total and still hold", r"\d calls, [\d,.]+ µs device:"],
    "conv_kernels_named_conv": [r"can never catch", r"\bxmma_fprop"],
    "nsys8_worker_calls": [r"no worker processes"],
    # lesson 13's fix table and its printed verdicts: case_g per image, one step from per step
    "fix_g_verdict": [r"\d+\.\d\d → \d+\.\d\d ms/image", r"\(\d+ → \d+ images\)"],
    # lesson 11: a later question's prompt that says both tools tie a kernel to its operator (issue 40)
    "op_of_kernel": [r"torch\.profiler ties a kernel to its operator", r"what ties them in Nsight Systems"],
    # lesson 06: the sentence after stacks_share's form that said the share (a learner's Run All)
    "stacks_share": [r"about a third of (this|the compressed) file"],
    # lesson 12, a new learner's Run All at 1280 x 800 (December 2026): the step table and the prose
    # under it, the lateness line, the Gloo exposed sentence and the takeaways
    "both_ranks_slower": [r"grew as much as the sleeper", r"runs? at the pace of the slowest",
                          r"every rank's step lasts (about )?as long as the slowest", r"both ranks' steps take about as long",
                          r"median step: balanced [\d,]+ ms, straggler", r"\bin_collectives_ms\s+wait_ms\b"],
    "late_ms": [r"kept the others waiting longest in \d+ of \d+ steps"],
    "what_to_fix": [r"fix the straggler, not", r"transfer part is about the same", r"faster network would not shorten",
                    r"is mostly waiting for the slow one", r"almost all waiting for the sleeper"],
    "straggler_part": [r"time outside operators", r"excess of the time outside", r"time\.sleep at the start",
                       r"\boutside_ops_ms\b"],
}

#: Per prediction, text after its question that holds a form of its answer without giving it
#: (regular expressions), removed before the search, each with why.
LATER_UNRELATED = {
    "launch_count": {
        r'"name": "cudaLaunchKernelExC"': "lesson 02's transfer excerpt: six raw events of another recording "
                                          "(fixed_batch), two operators with one launch each; it says nothing of "
                                          "how many launches the studied operator made",
    },
    "hot_kernel_module": {
        r"e\.g\. Conv2d, BatchNorm2d, ReLU, MaxPool2d": "the question's own prompt, which names four candidates, "
                                                       "printed again by ex.show() under Your turn",
    },
    "queue_verdict": {
        r"GPU-bound: queue empty <= \d+% and GPU busy >= \d+%": "the kit's rule, printed above the verdicts: it "
                                                               "names all three verdicts, not step 7's",
    },
    "backward_python_frames": {
        r"without Python frames \(with_stack\)": "lesson 06's trace-size table: the trace written again without "
                                                  "the with_stack option's records, a row of sizes in bytes",
    },
    "straggler_part": {
        r"The step's time between operators is what": "lesson 12's definition of the part, in the by-hand "
                                                      "recipe; it names no part as the answer",
    },
}


#: Per prediction, what (regular expressions, case aside) in a later cell's visible code states
#: its answer: a held-back cell's comment or the sentence it prints once the outcome shows
#: (lesson 01's read-back spelled out which steps the schedule keeps; issue 40). Column names
#: in code are not searched: naming a column says nothing of its values.
CODE_TELLS = {"steps_in_trace": [r"only the active steps", r"wait step ran without recording",
                                 r"warm-?up step recorded"],
              # lesson 11's visible code filtered on xmma_fprop "# forward convolutions" and printed an
              # ncu filter on it: the forward convolutions' kernels are not named conv (December 2026)
              "conv_kernels_named_conv": [r"xmma_fprop", r"forward convolution"]}


def _later_text(cell, asked=()) -> str:
    """What a cell says to a learner after Run All with no answer: a markdown cell's text, a
    code cell's outputs as shown (an outcome held back by ``ex.outcome`` is its one line),
    and the key and prompt of each question of ``asked`` whose key the cell's code names
    (a form shows both, and ``ex.show()`` lists them)."""
    if cell.cell_type == "markdown":
        return cell.source
    named = set(re.findall(r"""["'](\w+)["']""", cell.source))
    return "\n".join([_shown_text(cell.get("outputs", []))]
                     + [f"{q.key}\n{getattr(q, 'prompt', '')}" for q in asked if q.key in named])


def later_giveaways(cells, questions, asked=None) -> list:
    """``(key, cell, form)`` for each predict question among ``questions`` whose answer a later
    cell of ``cells`` (a lesson run with Run All and no answer) states: a markdown cell, an
    output, or the key or prompt of a question asked there (``asked``, default ``questions``:
    the text of its form) after the question's own cell holds the answer as shown
    (:func:`answer_as_shown`; a choice only where DISTINCTIVE lists it), a phrase of
    LATER_TELLS, or, in an output, its tell (TELLS); text of LATER_UNRELATED aside. A later
    cell's code (its comments, the strings it prints once the outcome shows) is searched for
    the CODE_TELLS phrases. A question of another kind with LATER_TELLS is searched for
    those phrases only (lesson 11's takeaways on nsys_8step's collectors)."""
    asked = list(questions if asked is None else asked)
    found = []
    for q in (q for q in questions if q.kind == "predict" or q.key in LATER_TELLS):
        ask = next(i for i, c in enumerate(cells) if c.cell_type == "code" and f'ex.check("{q.key}"' in c.source)
        forms = [f for f in answer_as_shown(q.answer) if not q.choices or f in DISTINCTIVE.get(q.key, ())] \
            if q.kind == "predict" else []        # another kind: only its LATER_TELLS phrases
        for i in range(ask + 1, len(cells)):
            text = _later_text(cells[i], [a for a in asked if a.key != q.key])
            code = cells[i].source if cells[i].cell_type == "code" else ""
            for pattern in LATER_UNRELATED.get(q.key, {}):
                text = re.sub(pattern, " ", text)
                code = re.sub(pattern, " ", code)
            said = [f for f in forms if shows(text, f)]
            said += [t for t in LATER_TELLS.get(q.key, []) if re.search(t, text, re.I)]
            said += [t for t in CODE_TELLS.get(q.key, []) if re.search(t, code, re.I)]
            said += [t for t in TELLS.get(q.key, []) if cells[i].cell_type == "code" and shows(text, t)]
            found += [(q.key, i, f) for f in said]
    return found


def test_the_later_search_finds_a_giveaway_and_leaves_the_unrelated():
    """later_giveaways() flags an answer in a later markdown cell or output, and not one before
    the question, nor the allowed text, nor a choice that is a common word."""
    from types import SimpleNamespace as NS
    import nbformat
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    def ran(source, text):
        c = code(source)
        c.outputs = [nbformat.v4.new_output("stream", text=text)]
        return c
    q = [NS(key="conv_shapes", kind="predict", answer=23, choices=None),
         NS(key="busy_or_sum", kind="predict", answer="sum", choices=["busy", "sum", "equal"])]
    cells = [md("23 shapes, before"), code('ex.check("conv_shapes", None)'), code('ex.check("busy_or_sum", None)'),
             md("the sum and the union"), ran("print(x)", "265 calls in 23 shape groups"),
             md("a couple of dozen groups"), ran("print(y)", "device_busy_ms gpu_sum_ms")]
    assert later_giveaways(cells, q) == [("conv_shapes", 4, "23"), ("conv_shapes", 5, "couple of dozen"),
                                         ("busy_or_sum", 6, r"\bgpu_sum_ms\b")]
    q = [NS(key="queue_verdict", kind="predict", answer="GPU-bound", choices=["CPU-bound", "GPU-bound", "mixed"])]
    cells = [code('ex.check("queue_verdict", None)'),
             ran("print(rule)", "CPU-bound: queue empty >= 20% of the step; GPU-bound: queue empty <= 5% and "
                                "GPU busy >= 90%; mixed otherwise"), md("step 7 was GPU-bound")]
    assert later_giveaways(cells, q) == [("queue_verdict", 2, "GPU-bound")]
    # a later question's key and prompt (its form shows both), and a later cell's code: what a
    # learner reads there too (lesson 11's op_of_kernel_how, lesson 01's read-back, issue 40)
    q = [NS(key="op_of_kernel", kind="recall", answer="both", choices=None, prompt="Which tool?"),
         NS(key="op_of_kernel_how", kind="compute", answer="the NVTX range", choices=None,
            prompt="torch.profiler ties a kernel to its operator through the external id. What ties them in "
                   "Nsight Systems?"),
         NS(key="steps_in_trace", kind="predict", answer=3, choices=None, prompt="Predict: how many steps?"),
         NS(key="conv_shapes", kind="predict", answer=23, choices=None, prompt="Predict: how many shapes?"),
         NS(key="shape_groups_23", kind="compute", answer=1, choices=None, prompt="Of the 23 groups, how many?")]
    cells = [code('ex.check("op_of_kernel", None)'), code('ex.check("steps_in_trace", None)'),
             code('ex.check("conv_shapes", None)'), code('ex.check("op_of_kernel_how", None)'),
             code('print("only the active steps were kept")'), code('ex.check("shape_groups_23", None)')]
    assert later_giveaways(cells, q[:1] + q[2:4]) == [("steps_in_trace", 4, r"only the active steps")]  # no prompt
    assert later_giveaways(cells, q[:1] + q[2:4], q) == [
        ("op_of_kernel", 3, r"torch\.profiler ties a kernel to its operator"),
        ("op_of_kernel", 3, r"what ties them in Nsight Systems"), ("steps_in_trace", 4, r"only the active steps"),
        ("conv_shapes", 5, "23")]


#: What lesson 13's fix table and verdict lines, and its reader check, give away (a new
#: learner's Run All, 6 December): the fixes' medians (fix_difference_ms, fix_a_verdict,
#: fix_g_verdict) and the causes' operator counts (the cause questions).
CLINIC_GIVEAWAYS = [r"\bcase_h\b.{0,300}?33\.78\s+12\.76\s+-21\.02", r"33\.78 → 12\.76 ms", r"92\.10 → 64\.51 ms",
                    r"\[-35\.00, -15\.56\] ms", r"2\.00 → 0\.61 ms/image", r"\(2 → 16 images\)",
                    r"faster beyond the noise", r"\b297 / 297\b", r"\b306 / 306\b", r"\b66 / 66\b",
                    r"kitlib after the fold equals"]


def test_l13_fix_and_trust_tables_held_back_in_run_all(executed_lesson):
    """Lesson 13 after Run All with no answer: the fix table (its figure) and the printed
    verdicts wait for fix_g_verdict, fix_difference_ms and fix_a_verdict, the
    reader's counts for the cause questions they name (``Clinic.outcome``): each cell shows
    its one held-back line, no output anywhere holds CLINIC_GIVEAWAYS, and once the questions
    are revealed (the tests' last cell) the tables show."""
    run = executed_lesson("13")
    cells = run.run_all.cells[:-1]
    held = [i for i, c in enumerate(cells) if c.cell_type == "code"
            and re.search(r"^ex\.outcome\((FIX_KEYS|TRUST_KEYS)", c.source, re.M)]
    assert len(held) == 3, held
    for i in held:
        text = _shown_text(cells[i].outputs)
        assert "held back until you" in text, (i, text)
        assert not cells[i].outputs or all(o.get("output_type") != "display_data" or "image/png" not in o.get("data", {})
                                           for o in cells[i].outputs), i
    def seen(outputs):      # text, and a table's HTML as its cells read (tags and <wbr> out)
        html = " ".join(str(o.get("data", {}).get("text/html", "")) for o in outputs)
        return _shown_text(outputs) + " " + re.sub(r"<[^>]+>", " ", html.replace("<wbr>", ""))
    everything = "\n".join(seen(c.outputs) for c in cells if c.cell_type == "code")
    found = [t for t in CLINIC_GIVEAWAYS if re.search(t, everything, re.S)]
    assert not found, f"lesson 13 shows before its questions are answered: {found}"
    opened = "\n".join(seen(run.nb.cells[i].outputs) for i in held)
    missing = [t for t in CLINIC_GIVEAWAYS if not re.search(t, opened, re.S)]
    assert not missing, f"held back and never shown once revealed (figures changed? update the list): {missing}"
    for i in held:       # the fix table and verdicts wait for every case's cause, and say so (a fix names it)
        if "FIX_KEYS" in cells[i].source:
            said = unwrapped(_shown_text(cells[i].outputs))
            assert all(f"case_{x}_cause" in said for x in CLINIC_LETTERS), said


#: Words of the clinic's causes and fixes that the prose of lesson 13's fix section must not
#: hold: it shows before every case's cause is tried ("the layout fix" tells case_a's cause).
FIX_PROSE_TELLS = ("batch", "image", "layout", "channels", "contiguous", "loader", "worker", "transform",
                   "optimizer", "fused", "foreach", "anomaly", "isnan", "straggler", "rank", "rss", "heavy profile",
                   "same operators", "tensor", "autograd", "sync", "pinned", "pageable")


def test_l13_fix_section_prose_names_no_cause():
    """A learner's report: the fix section, shown before every case is diagnosed, gave causes
    away. Its markdown (from "Did the fixes work?" to the next section) names cases by letter
    ("case_a's fix"), never by their cause or fix."""
    nb = nbformat.read(next(p for p in LESSONS if p.name.startswith("13")), as_version=4)
    start = next(i for i, c in enumerate(nb.cells) if c.source.startswith("## Did the fixes work?"))
    end = next(i for i, c in enumerate(nb.cells) if i > start and c.cell_type == "markdown"
               and c.source.startswith("## "))
    prose = " ".join(c.source.lower() for c in nb.cells[start:end] if c.cell_type == "markdown")
    assert "case_a's" in prose and "every case's cause" in prose
    assert [w for w in FIX_PROSE_TELLS if re.search(rf"\b{w}", prose)] == []


def test_l13_case_g_step_times_wait_for_its_fix_prediction(executed_lesson):
    """A learner's Run All (issue 40): case_g's cell printed its steps per step against the
    healthy run's (batch 16, the fixed job's), which answers fix_g_verdict further
    down. After Run All with no answer the cell holds that line back, naming the question and
    where it is, and shows it once the prediction is revealed."""
    run = executed_lesson("13")
    (i,) = [i for i, c in enumerate(run.run_all.cells) if c.cell_type == "code"
            and 'complaint_check("g")' in c.source]
    said = unwrapped(_shown_text(run.run_all.cells[i].outputs))
    assert "held back until you predict" in said and "fix_g_verdict" in said, said
    assert 'Did the fixes work?' in said and "in the step times" not in said and " ms" not in said, said
    opened = unwrapped(_shown_text(run.nb.cells[i].outputs))
    assert "in the step times: uninstrumented step times" in opened and "per step" in opened, opened


@pytest.mark.parametrize("path", LESSONS, ids=[p.stem for p in LESSONS])
def test_no_later_cell_gives_an_open_prediction_away(path, executed_lesson, built_lessons, tmp_path):
    """Issue 40: after Run All with no answer, a learner who scrolls past a predict question
    reads no cell further down that states its answer (later_giveaways): not in a section
    after the outcome, not in the takeaways, not in a table or a line printed without
    ``ex.outcome``. Prose points back ("the number you predicted above") instead."""
    n = path.name[:2]
    cells = executed_lesson(n).run_all.cells[:-1]      # the revealing cell the tests add left out
    found = later_giveaways(cells, lesson_questions(n, built_lessons), every_question(n, built_lessons, tmp_path))
    assert not found, f"open predictions' answers in later cells (key, cell, as shown): {found}"


def every_question(n: str, built_lessons, tmp_path) -> list:
    """All of lesson ``n``'s questions, whose keys and prompts a learner reads in their forms
    and in ``ex.show()``: the answer key's, and for lesson 01 those built from a recording made
    as its cells make it (:func:`kitlib.course.first_profile.record_small_profile`), after its
    prediction."""
    if n != "01":
        return built_lessons[n][0].questions
    from kitlib.course import first_profile
    from kitlib.course.exercises import lesson01
    files = first_profile.record_small_profile(tmp_path / "l01")
    return lesson_questions(n, built_lessons) + lesson01(files["trace"], files["memory_timeline"]).questions


#: Lesson 12's questions whose answers a new learner's Run All at 1280 x 800 found stated before
#: they were asked or answered (December 2026); their LATER_TELLS are searched in the whole lesson.
L12_KEYS = ("both_ranks_slower", "late_ms", "what_to_fix", "clock_offset", "straggler_part")


def test_l12_no_answer_stated_above_its_question_or_before_it_is_answered(executed_lesson):
    """Lesson 12 after Run All with no answer: no markdown cell anywhere (above its question too:
    "…every call would still end together in real time, but not on the clocks that stamp it" stood
    right above clock_offset) and no output holds a LATER_TELLS phrase of L12_KEYS; the
    straggler's description printed at the top says which rank and how long, not how (a
    time.sleep: straggler_part); delay_excess_ms, whose form names the part once the
    prediction is open, is asked after ex.predicted("straggler_part") and names no part. Once
    the questions are revealed, the held-back outputs show what was held."""
    run = executed_lesson("12")
    cells = run.run_all.cells[:-1]
    found = []
    for i, c in enumerate(cells):
        text = c.source if c.cell_type == "markdown" else _shown_text(c.get("outputs", []))
        found += [(i, k, t) for k in L12_KEYS for t in LATER_TELLS[k] if re.search(t, text, re.I)]
    assert not found, found
    top = _shown_text(next(c for c in cells if "injected_text(slow)" in c.source).outputs)
    assert "rank 1, 500 ms per step" in unwrapped(top) and "sleep" not in top, top
    code = [c.source for c in cells if c.cell_type == "code"]
    at = lambda text: next(i for i, s in enumerate(code) if text in s)  # noqa: E731
    assert at('ex.check("straggler_part"') < at('ex.predicted("straggler_part")') < at('ex.check("delay_excess_ms"')
    opened = unwrapped("\n".join(_shown_text(c.outputs) for c in run.nb.cells if c.cell_type == "code"))
    for shown in ("kept the others waiting longest in 3 of 3 steps", "median step: balanced",
                  "time.sleep at the start of every step", "outside_ops_ms"):
        assert shown in opened, shown


def _ns_columns(text: str) -> list:
    """``(header, value)`` for each value printed under a column whose name ends in ``_ns`` in
    ``text`` (pandas' tables: a value ends where its header ends)."""
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        for m in re.finditer(r"\S*_ns\b", line):
            end = m.end()
            for row in lines[i + 1:]:
                if not row.strip() or re.search(r"\S*_ns\b", row):
                    break
                if len(row) >= end and (len(row) == end or row[end] == " ") and row[end - 1] != " ":
                    out.append((m.group(0), row[:end].split()[-1]))
    return out


def test_the_ns_column_search_reads_a_table():
    table = "   rank  step_ns  ops_ms\n0     1  1234567   1.2\n1     0   987654   0.9"
    assert _ns_columns(table) == [("step_ns", "1234567"), ("step_ns", "987654")]
    assert _ns_columns("   step_ns  x\n0   2449.6  1") == [("step_ns", "2449.6")]


def test_l12_columns_say_their_unit(executed_lesson):
    """A correctness defect a learner found: lesson 12's step-budget table divided step_budget's
    ns by 1e6 and kept the names step_ns, ops_ns, outside_ops_ns…, so ms read as ns. Every value
    the revealed lesson prints under a column named ``*_ns`` is a whole number of ns, and the
    step-budget table's columns are named in ms."""
    run = executed_lesson("12")
    texts = [_shown_text(c.outputs) for c in run.nb.cells if c.cell_type == "code"]
    bad = [(h, v) for t in texts for h, v in _ns_columns(t) if re.fullmatch(r"[-+]?[\d,.]+(e[-+]?\d+)?", v)
           and not re.fullmatch(r"[-+]?[\d,]+", v)]
    assert not bad, f"columns named in ns holding ms or fractions: {bad[:10]}"
    (budget,) = [t for t in texts if "outside_ops" in t and "in_collectives" in t]
    assert re.search(r"step_ms\s+in_collectives_ms\s+ops_ms\s+exposed_ms\s+outside_ops_ms", budget), budget
    assert "_ns" not in budget, budget
