"""The lessons in a real browser: JupyterLab on a free local port, Debian's Chromium driven
by Playwright, every cell run, then what a learner sees is checked: no error, every picture
drawn once, an answer form per question, an answer form that turns a wrong answer into a
hint and a right one into a confirmation, an explorer whose table follows its selection,
and no table or picture wider than its cell at a laptop's width (1280 × 800, the file browser
open): every picture shown at 1x with no text under 9 px, no output or code line scrolling
sideways, no drop-down narrower than its choices. Screenshots of each whole lesson go under
the test's tmp_path.

Needs /usr/bin/chromium (`apt-get install -y chromium`, which .ci/run does) and the
playwright package (the `test` extra); Playwright's own browser download is never used.
Without them the test is skipped, unless KITLIB_REQUIRE_BROWSER is set (.ci/run sets it):
then it fails. KITLIB_BROWSER_LESSONS="04 08" opens more lessons than the default one
("all": every lesson, about 10 s each; .ci/run sets "all").
"""
import json
import os
import time
from pathlib import Path

import pytest

from support.browser import (Lab, MEASURE_JS, MIN_TEXT_PX, REQUIRE_ENV, browser_required, error_outputs, launch_browser, run_all_cells,
                     save, screenshot_notebook, why_no_browser)
from test_lessons import EXPECTED_FIGURES, FORMS, HELD_BACK_FIGURES, LESSONS

#: Lessons opened by default: 02 (the answer form's hint and confirmation, the chain
#: explorer, and one of the four lessons whose width issue 13's "done when" names). About
#: 10-15 s a lesson beside the lesson runs that start with the session; with 04, 08 and 11
#: as well the README's test command took 5 min 21 s here on the evening of 1 December, and
#: with 11 alone 4 min 47 s to 5 min 1 s, at or over its five minutes. The others (04, 08
#: and 11, the rest of issue 13's four; 00 and 10, whose cut columns were ones a question
#: needs; 03, 05 and 09, cut before too) open with KITLIB_BROWSER_LESSONS="04 08 11", or
#: "all", which .ci/run sets: CI opens every lesson.
DEFAULT_LESSONS = ["02"]


def _lessons_opened() -> list:
    more = os.environ.get("KITLIB_BROWSER_LESSONS", "").replace(",", " ").split()
    numbers = [p.name[:2] for p in LESSONS] if "all" in more else DEFAULT_LESSONS + [n for n in more
                                                                                     if n not in DEFAULT_LESSONS]
    return [next(p for p in LESSONS if p.name.startswith(n)) for n in numbers]


OPENED = _lessons_opened()
#: Explorers per lesson; each draws one picture in the browser beyond the cell outputs.
EXPLORERS = {"00": 1, "02": 1, "04": 1, "05": 1, "06": 1, "07": 1, "09": 1}
#: Explorers held back with a prediction's outcome (``ex.outcome``): lesson 07's names the peak.
HELD_BACK_EXPLORERS = {"07": 1}

_browser_missing = why_no_browser()
#: Skips a test that needs the browser where none is, unless CI requires it (then the
#: ``lab`` fixture fails with the reason).
needs_browser = pytest.mark.skipif(_browser_missing is not None and not browser_required(),
                                   reason=f"{_browser_missing} (set {REQUIRE_ENV}=1 to fail instead)")


def test_ci_requires_the_browser_test(monkeypatch):
    """.ci/run sets KITLIB_REQUIRE_BROWSER=1, so a CI machine without Chromium or
    Playwright fails the browser test instead of skipping it."""
    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    assert f"export {REQUIRE_ENV}=1" in ci
    for value, required in [("1", True), ("yes", True), ("0", False), ("", False)]:
        monkeypatch.setenv(REQUIRE_ENV, value)
        assert browser_required() is required
    monkeypatch.delenv(REQUIRE_ENV)
    assert not browser_required()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if _browser_missing is not None:       # only reached when the browser is required
        pytest.fail(f"{REQUIRE_ENV} is set and the browser test cannot run: {_browser_missing}")
    server = Lab(tmp_path_factory.mktemp("lab"), OPENED)
    yield server
    server.close()


def test_the_class_jupyterlab_fetches_no_news(lab):
    """Issue 40: JupyterLab's news and update pop-up covered a lesson's bottom-right corner.
    The JupyterLab the test drives reads the class's overrides.json (as the course image and
    the hub install it), and its settings API gives the page "never" and "no" as defaults,
    with no user setting of its own (tests/readers/test_shared_cache.py checks the file itself)."""
    s = lab.settings("@jupyterlab/apputils-extension:notification")
    defaults = {k: v.get("default") for k, v in s["schema"]["properties"].items()}
    assert (defaults["fetchNews"], defaults["checkForUpdates"]) == ("false", False)
    assert s["settings"] == {}


@pytest.fixture(scope="module")
def page(lab, tmp_path_factory):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        ctx = launch_browser(pw, tmp_path_factory.mktemp("chromium-profile"))
        yield ctx.new_page()
        ctx.close()


def _tool_cut_names():
    """Names the profiler's own printed table cuts with "..." (lesson 03 shows that table as
    printed, so its "..." are the tool's, not the notebook's)."""
    from kitlib.readers.bundle import open_capture
    from kitlib.readers.profiler_table import profiler_table
    table, _ = profiler_table(open_capture("profiler_5step"))
    return {n for n in table["name"] if str(n).endswith("...")}


def _form(page, key):
    return page.locator(f".kitlib-answer-form-{key}").first


def _type_answer(form, text: str):
    """Type an answer and wait until the kernel holds it (the form says "not checked yet"
    for exactly this text), so Check judges it and not an earlier answer."""
    form.locator("input").fill(text)
    form.locator(f".kitlib-pending[data-given={json.dumps(text)}]").wait_for(timeout=20_000)


def _lesson02_clicks(page, tmp_path, stem):
    from kitlib.course import exercises
    from kitlib.readers.bundle import open_capture
    # the answer form: a wrong number gets a hint, the right one (computed, not typed) a confirmation
    # (longest_kernel_launch: not a prediction, whose first wrong try opens the explanation at once)
    q = exercises.lesson02(open_capture("profiler_5step"))["longest_kernel_launch"]
    form = _form(page, "longest_kernel_launch")
    form.scroll_into_view_if_needed()
    _type_answer(form, str(q.answer + 5))
    form.locator("button:has-text('Check')").click()
    wrong = form.locator(".kitlib-verdict[data-correct='false']")
    wrong.wait_for(timeout=20_000)
    # the first wrong try's hint (a second one would show the explanation instead)
    said = wrong.inner_text()
    assert "the next wrong try shows the answer" in said and q.explain not in said, said
    _type_answer(form, str(q.answer))
    form.locator("button:has-text('Check')").click()
    form.locator(".kitlib-verdict[data-correct='true']").wait_for(timeout=20_000)
    # the prediction (issue 40): after Run All the line of ex.predicted says it is still open,
    # without the answer; a prediction made in the form above fills it in, with no cell re-run
    line = page.locator(".kitlib-predicted-launch_count").first
    line.scroll_into_view_if_needed()
    said = line.inner_text()
    assert "still open" in said and "recording says" not in said, said
    form = _form(page, "launch_count")
    form.scroll_into_view_if_needed()
    _type_answer(form, "1")
    form.locator("button:has-text('Check')").click()
    page.wait_for_function("() => { const l = document.querySelector('.kitlib-predicted-launch_count');"
                           " return l && l.innerText.includes('the recording says 3.'); }", timeout=20_000)
    # the explorer: choose another operator, its table changes
    explorer = page.locator(".kitlib-explorer").first
    explorer.scroll_into_view_if_needed()
    before = explorer.locator("table").first.inner_text()
    picture = explorer.locator(".jp-RenderedImage img").first.get_attribute("src")
    explorer.locator("select").nth(1).select_option("aten::mm")
    page.wait_for_function("(b) => { const t = document.querySelector('.kitlib-explorer table');"
                           " return t && t.innerText !== b; }", arg=before, timeout=30_000)
    after = explorer.locator("table").first.inner_text()
    assert after != before and "cudnn" in before and "cudnn" not in after
    # and the picture follows
    page.wait_for_function("(p) => { const i = document.querySelector('.kitlib-explorer .jp-RenderedImage img');"
                           " return i && i.getAttribute('src') !== p; }", arg=picture, timeout=30_000)
    page.screenshot(path=str(tmp_path / f"{stem}-after-clicks.png"))


def _lesson11_choices(page, tmp_path, stem):
    # choices: the drop-down offers the tools; a right one is confirmed
    form = _form(page, "conv_bound")
    form.scroll_into_view_if_needed()
    form.locator("select").select_option("nsight compute")
    form.locator(".kitlib-pending[data-given='nsight compute']").wait_for(timeout=20_000)
    form.locator("button:has-text('Check')").click()
    form.locator(".kitlib-verdict[data-correct='true']").wait_for(timeout=20_000)


def _lesson13_evidence(page, tmp_path, stem):
    # a case's evidence form, held back after Run All, opens in place once its cause is
    # revealed (a wrong cause would leave it held: its prompt names the figure), and judges
    form = _form(page, "case_a_evidence")
    assert not form.count(), "case_a's evidence form shown before its cause is named"
    _answer_in_its_form(page, "case_a_evidence")
    assert _form(page, "case_a_cause").locator(".kitlib-verdict:has-text('the answer is')").count()


#: What a lesson's test does after the common checks, with the lesson still open.
CLICKS = {"02": _lesson02_clicks, "11": _lesson11_choices, "13": _lesson13_evidence}


@needs_browser
@pytest.mark.parametrize("path", OPENED, ids=[p.name[:2] for p in OPENED])
def test_lesson_in_the_browser(lab, page, tmp_path, path):
    n = path.name[:2]
    t0 = time.monotonic()
    page.goto(lab.url(path.name))
    ran_all = run_all_cells(page)
    save(page)
    assert error_outputs(lab.notebook(path.name)) == []
    assert ran_all, "a cell did not run"
    seen = page.evaluate(MEASURE_JS)
    shots = screenshot_notebook(page, tmp_path / f"{path.stem}.png")
    print(f"lesson {n}: {time.monotonic() - t0:.1f} s; screenshots: {', '.join(str(s) for s in shots)}")
    pics = seen["pictures"]
    print(f"lesson {n}: file browser {seen['file_browser_px']:.0f} px, output {seen['output_px']} px; pictures "
          f"(scale, smallest text px as shown): {[(p['scale'], p['shown_text_px']) for p in pics]}; code cells "
          f"scrolling sideways: {seen['wide_code']} (an editor shows {seen['code_chars']} characters of a line)")
    assert seen["file_browser_px"] > 0, "JupyterLab's default layout has the file browser open: measure with it"
    assert seen["errors"] == 0, seen
    # what a learner reads: every picture at 1x (not shrunk to its cell), no text under 9 px
    assert [p for p in pics if p["scale"] < 0.99] == [], f"pictures shrunk to fit their cell: {pics}"
    assert [p for p in pics if p["text_px"] is None] == [], f"pictures without their text size: {pics}"
    assert [p for p in pics if p["shown_text_px"] < MIN_TEXT_PX] == [], f"text under {MIN_TEXT_PX} px: {pics}"
    assert seen["scrolls"] == [], f"outputs scrolling sideways: {seen['scrolls']}"
    assert seen["md_wide"] == [], f"markdown wider than its cell or scrolling sideways: {seen['md_wide']}"
    assert seen["wide_code"] == [], f"code cells (by index) whose lines scroll sideways: {seen['wide_code']}"
    assert seen["cut_choices"] == [], f"drop-downs narrower than a choice: {seen['cut_choices']}"
    # Run All without answers: the pictures held back until their prediction is made are not drawn
    assert seen["figures"] == (EXPECTED_FIGURES[n] + EXPLORERS.get(n, 0) - HELD_BACK_FIGURES.get(n, 0)
                               - HELD_BACK_EXPLORERS.get(n, 0)), seen
    assert seen["cut"] == [], f"wider than its cell at {page.viewport_size}: {seen['cut']}"
    assert seen["spill"] == [], f"table cells whose text runs over the next column: {seen['spill']}"
    cut_text = set(seen["cut_text"]) - (_tool_cut_names() if n == "03" else set())
    assert not cut_text, f"text cut with '...': {sorted(cut_text)}"
    assert (seen["forms"], seen["explorers"]) == (FORMS[n], EXPLORERS.get(n, 0) - HELD_BACK_EXPLORERS.get(n, 0)), seen
    held = page.evaluate(_HELD_BACK_JS)
    assert all("held back until you" in h["text"] and not h["shows"] for h in held), held
    if n in CLICKS:
        CLICKS[n](page, tmp_path, path.stem)
    if held:
        _predict_and_see_the_outcome(page, held[0]["keys"])


#: Each output of ``ex.outcome`` on the page: its questions, its text, whether it shows a
#: table, a picture or printed lines.
_HELD_BACK_JS = """() => [...document.querySelectorAll('.kitlib-outcome')].map(o => ({
  keys: [...o.classList].filter(c => c.startsWith('kitlib-outcome-')).map(c => c.slice(15)),
  text: o.innerText.slice(0, 300), shows: !!o.querySelector('table, img, pre')}))"""


#: The questions a held-back form (``kitlib-held-form``: lesson 13's evidence, waiting for its
#: case's cause, and its fix questions, waiting for every case's) waits on, found by the key
#: its line names in bold; [] where no such form is on the page.
_HELD_FORM_KEYS_JS = """(key) => { const h = [...document.querySelectorAll('.kitlib-held-form')].find(
  o => [...o.querySelectorAll('b')].some(b => b.innerText.trim() === key));
  return h ? [...h.classList].filter(c => c.startsWith('kitlib-held-form-')).map(c => c.slice(17)) : []; }"""


def _answer_in_its_form(page, key):
    """Answer question ``key`` in its form (any answer: a prediction need not be right). A
    form held back until other questions are answered (lesson 13's fixes wait for every case's
    cause tried, its evidence for its case's cause named right) is opened first, by revealing
    those in their forms: a reveal opens either, where any answer would open only the first."""
    form = _open_form(page, key)
    if form.locator(".kitlib-verdict[data-correct='true'], .kitlib-verdict[data-correct='false']").count():
        return                        # answered already (lesson 02's clicks)
    if form.locator("select").count():
        choice = form.locator("select option").nth(1).get_attribute("value")
        form.locator("select").select_option(choice)
    elif form.locator("button:has-text('yes')").count():
        choice = "yes"
        form.locator("button:has-text('yes')").first.click()
    else:
        choice = "1"
        form.locator("input").fill(choice)
    form.locator(f".kitlib-pending[data-given={json.dumps(choice)}]").wait_for(timeout=20_000)
    form.locator("button:has-text('Check')").click()
    form.locator(".kitlib-verdict").wait_for(timeout=20_000)


def _open_form(page, key):
    """Question ``key``'s form, scrolled into view; a form held back is opened first, by
    revealing the questions its line waits on."""
    form = _form(page, key)
    if not form.count():
        waits = page.evaluate(_HELD_FORM_KEYS_JS, key)
        assert waits, f"no form of {key} on the page, and no held-back line naming it"
        for other in waits:
            _reveal_in_its_form(page, other)
        form.wait_for(timeout=30_000)          # the held line gives way to the form, in place
    form.scroll_into_view_if_needed()
    return form


def _reveal_in_its_form(page, key):
    """Reveal question ``key`` with its form's Reveal button (a form itself held back opened
    first), and wait for the answer it shows."""
    form = _open_form(page, key)
    done = ".kitlib-verdict[data-correct='true'], .kitlib-verdict:has-text('the answer is')"
    if form.locator(done).count():
        return                        # named right or revealed already
    form.locator("button:has-text('Reveal')").click()
    form.locator(".kitlib-verdict:has-text('the answer is')").wait_for(timeout=20_000)


def _predict_and_see_the_outcome(page, keys):
    """Issue 40: answer the questions of the first outcome held back, each in its form (any
    answer: a prediction need not be right; a form itself held back opened first), and the
    outcome shows in place, no cell re-run."""
    for key in keys:
        _answer_in_its_form(page, key)
    selector = ".kitlib-outcome-" + keys[0]
    page.wait_for_function("(s) => { const o = document.querySelector(s); return o && "
                           "!o.innerText.includes('held back') && o.querySelector('table, img, pre'); }",
                           arg=selector, timeout=30_000)


#: The projector setting the README gives (KITLIB_PLOT_SCALE=1.5: pictures, tables, forms and
#: explorers grow by half; pictures in text and height, not in width), and the lessons checked
#: at it when opened: issue 40's learner trial found three of lesson 12's pictures shown shrunk
#: (their legends wider than the cell) and lesson 13's drop-downs cutting their longest choices.
PROJECTOR_SCALE = "1.5"
PROJECTOR_LESSONS = [p for p in OPENED if p.name[:2] in ("12", "13")]


@pytest.fixture(scope="module")
def projector_lab(tmp_path_factory):
    if _browser_missing is not None:       # only reached when the browser is required
        pytest.fail(f"{REQUIRE_ENV} is set and the browser test cannot run: {_browser_missing}")
    server = Lab(tmp_path_factory.mktemp("lab_projector"), PROJECTOR_LESSONS, env={"KITLIB_PLOT_SCALE": PROJECTOR_SCALE})
    yield server
    server.close()


@needs_browser
@pytest.mark.parametrize("path", PROJECTOR_LESSONS, ids=[p.name[:2] for p in PROJECTOR_LESSONS])
def test_lesson_at_the_projector_scale(projector_lab, page, tmp_path, path):
    """At the projector setting, 1280 x 800 with the file browser open: every picture still
    shown at 1x (the kit keeps each within the cell's width at any scale), its smallest text
    9 px or more as shown, and no drop-down narrower than one of its choices (a chosen one
    would show cut). Tables may scroll at this scale (docs/INSTRUCTORS.md: close the side
    panel); they are not checked here."""
    n = path.name[:2]
    page.goto(projector_lab.url(path.name))
    ran_all = run_all_cells(page)
    save(page)
    assert error_outputs(projector_lab.notebook(path.name)) == []
    assert ran_all, "a cell did not run"
    for held in page.evaluate(_HELD_BACK_JS):     # outcomes held back: opened, so that their
        _predict_and_see_the_outcome(page, held["keys"])   # pictures are measured too
    # a held-back outcome shows its text first and its picture once drawn: wait for the pictures
    # (a busy CI machine measured lesson 12 before its step budgets arrived)
    expected = EXPECTED_FIGURES[n] + EXPLORERS.get(n, 0)
    try:
        page.wait_for_function("(k) => document.querySelectorAll('.jp-OutputArea .jp-RenderedImage img')"
                               ".length >= k", arg=expected, timeout=60_000)
    except Exception:   # noqa: BLE001 (the assertion below names what is missing)
        pass
    seen = page.evaluate(MEASURE_JS)
    screenshot_notebook(page, tmp_path / f"{path.stem}-projector.png")
    pics = seen["pictures"]
    print(f"lesson {n} at {PROJECTOR_SCALE}: pictures (cell, PNG px, scale, smallest text px as shown): "
          f"{[(p['cell'], p['png_px'], p['scale'], p['shown_text_px']) for p in pics]}")
    assert seen["figures"] == EXPECTED_FIGURES[n] + EXPLORERS.get(n, 0), seen
    assert [p for p in pics if p["scale"] < 0.99] == [], f"pictures shrunk to fit their cell: {pics}"
    assert [p for p in pics if p["text_px"] is None or p["shown_text_px"] < MIN_TEXT_PX] == [], pics
    assert seen["cut_choices"] == [], f"drop-downs narrower than a choice: {seen['cut_choices']}"


#: The outputs of the open notebook: classes, text, and what CSS adds after the text.
_OUTPUTS_JS = """() => [...document.querySelectorAll('.jp-OutputArea-output')].map(o => ({cls: o.className,
   text: o.innerText.slice(0, 200), after: getComputedStyle(o, '::after').content}))"""


@needs_browser
def test_a_saved_form_reopened_without_its_kernel_says_how_to_get_it_back(page, tmp_path):
    """Issue 40: a lesson saved with its forms, reopened in JupyterLab once its kernel is gone
    (here: a second server), shows JupyterLab's "Error displaying widget: model not found" in
    place of each form; the style kitlib saves beside the form adds the kit's hint under it.
    (The browser of the ``page`` fixture, in tabs of its own.)"""
    import nbformat
    from kitlib.course.widgets import WIDGET_GONE_CSS
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "from kitlib.course.exercises import l11\nex = l11.questions()\nex.check('conv_bound', None)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "form.ipynb")
    lab = Lab(tmp_path / "first", [tmp_path / "form.ipynb"])
    try:
        tab = page.context.new_page()
        tab.goto(lab.url("form.ipynb"))
        assert run_all_cells(tab)
        tab.locator(".kitlib-answer-form-conv_bound").wait_for(timeout=20_000)
        save(tab)
        tab.close()
        saved = lab.notebook("form.ipynb")
    finally:
        lab.close()
    assert any(WIDGET_GONE_CSS in "".join(o.get("data", {}).get("text/html", "")) for o in saved["cells"][0]["outputs"])
    (tmp_path / "again").mkdir()
    (tmp_path / "again" / "form.ipynb").write_text(json.dumps(saved))
    lab = Lab(tmp_path / "second", [tmp_path / "again" / "form.ipynb"])
    try:
        tab = page.context.new_page()
        tab.goto(lab.url("form.ipynb"))
        tab.wait_for_function("() => [...document.querySelectorAll('.jp-OutputArea-output')]"
                              ".some(o => o.innerText.includes('model not found'))", timeout=60_000)
        outputs = tab.evaluate(_OUTPUTS_JS)
        tab.screenshot(path=str(tmp_path / "reopened.png"))
        tab.close()
    finally:
        lab.close()
    print(outputs)
    (gone,) = [o for o in outputs if "model not found" in o["text"]]
    assert "re-run the cell to get it back" in gone["after"], gone
    assert all(o["after"] in ("none", "normal", "") for o in outputs if o is not gone)
