"""The lessons in a real browser: JupyterLab on a free local port, Debian's Chromium driven
by Playwright, every cell run, then what a learner sees is checked: no error, every picture
drawn once, an answer form that turns a wrong answer into a hint and a right one into a
confirmation, an explorer whose table follows its selection, and no table or picture wider
than its cell at a laptop's width (1280 × 800). A screenshot per lesson goes under the
test's tmp_path.

Needs /usr/bin/chromium (`apt-get install -y chromium`, which .ci/run does) and the
playwright package (the `test` extra); Playwright's own browser download is never used.
"""
from pathlib import Path

import pytest

from browser import Lab, MEASURE_JS, error_outputs, launch_browser, run_all_cells, save, why_no_browser
from test_lessons import EXPECTED_FIGURES, LESSONS

pytestmark = pytest.mark.skipif(why_no_browser() is not None, reason=str(why_no_browser()))

#: Pictures drawn in the browser beyond those stored as cell outputs: an explorer's picture.
EXPLORER_FIGURES = {"02": 1, "11": 0}
#: Lessons opened: 02 (answer forms, the chain explorer), 11 (choices, the routing tables).
OPENED = [p for p in LESSONS if p.name[:2] in EXPLORER_FIGURES]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    server = Lab(tmp_path_factory.mktemp("lab"), OPENED)
    yield server
    server.close()


@pytest.fixture(scope="module")
def page(lab, tmp_path_factory):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        ctx = launch_browser(pw, tmp_path_factory.mktemp("chromium-profile"))
        yield ctx.new_page()
        ctx.close()


def _open_and_run(lab, page, path: Path, tmp_path):
    page.goto(lab.url(path.name))
    ran_all = run_all_cells(page)
    save(page)
    assert error_outputs(lab.notebook(path.name)) == []
    assert ran_all, "a cell did not run"
    seen = page.evaluate(MEASURE_JS)
    page.screenshot(path=str(tmp_path / f"{path.stem}.png"))
    return seen


def _form(page, key):
    return page.locator(f".kitlib-answer-form-{key}").first


def _type_answer(form, text: str):
    """Type an answer and wait until the kernel holds it (the form says "not checked yet"
    for exactly this text), so Check judges it and not an earlier answer."""
    form.locator("input").fill(text)
    form.locator(f".kitlib-pending[data-given='{text}']").wait_for(timeout=20_000)


def test_lesson02_in_the_browser(lab, page, tmp_path):
    from kitlib.course import exercises
    from kitlib.readers.bundle import open_capture
    path = next(p for p in OPENED if p.name.startswith("02"))
    seen = _open_and_run(lab, page, path, tmp_path)
    assert error_outputs(lab.notebook(path.name)) == []
    assert seen["figures"] == EXPECTED_FIGURES["02"] + EXPLORER_FIGURES["02"], seen
    assert seen["cut"] == [] and seen["cut_text"] == [], seen
    assert seen["forms"] == 5 and seen["explorers"] == 1
    # the answer form: a wrong count gets a hint, the right one (computed, not typed) a confirmation
    right = exercises.lesson02(open_capture("profiler_5step"))["launch_count"].answer
    form = _form(page, "launch_count")
    form.scroll_into_view_if_needed()
    _type_answer(form, str(right + 5))
    form.locator("button:has-text('Check')").click()
    wrong = form.locator(".kitlib-verdict[data-correct='false']")
    wrong.wait_for(timeout=20_000)
    assert "not quite" in wrong.inner_text()
    _type_answer(form, str(right))
    form.locator("button:has-text('Check')").click()
    form.locator(".kitlib-verdict[data-correct='true']").wait_for(timeout=20_000)
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
    page.screenshot(path=str(tmp_path / f"{path.stem}-after-clicks.png"))


def test_lesson11_in_the_browser(lab, page, tmp_path):
    path = next(p for p in OPENED if p.name.startswith("11"))
    seen = _open_and_run(lab, page, path, tmp_path)
    assert error_outputs(lab.notebook(path.name)) == []
    assert seen["figures"] == EXPECTED_FIGURES["11"] + EXPLORER_FIGURES["11"], seen
    assert seen["cut"] == [] and seen["cut_text"] == [], seen
    assert seen["forms"] == 9
    # choices: the drop-down offers the tools; a right one is confirmed
    form = _form(page, "conv_bound")
    form.scroll_into_view_if_needed()
    form.locator("select").select_option("nsight compute")
    form.locator(".kitlib-pending[data-given='nsight compute']").wait_for(timeout=20_000)
    form.locator("button:has-text('Check')").click()
    form.locator(".kitlib-verdict[data-correct='true']").wait_for(timeout=20_000)
