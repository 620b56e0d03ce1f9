"""Helpers of the real-browser test (tests/lessons/test_browser.py): a JupyterLab server on a free
local port, the system's Chromium driven by Playwright, and what a page shows.

Kept apart from the test so that a maintainer can drive a lesson by hand:
``python tests/support/browser.py lessons/02_*.ipynb`` runs it and prints what the test measures.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
#: Chromium's switches: no sandbox (root in a container), no GPU, and nothing that phones home.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
#: JupyterLab's window as a laptop shows it (CSS pixels).
VIEWPORT = {"width": 1280, "height": 800}
REPO = Path(__file__).resolve().parents[2]
#: The PNG text chunk with the size of a picture's smallest text (kitlib.plots.SMALLEST_TEXT_KEY).
SMALLEST_TEXT_KEY = "kitlib smallest text px"
#: The smallest text a learner should have to read, as shown (CSS pixels).
MIN_TEXT_PX = 9
#: The class's JupyterLab defaults (no news or update pop-up over the lesson, issue 40), as the
#: course image and the hub install them in ``{sys.prefix}/share/jupyter/lab/settings``.
CLASS_OVERRIDES = REPO / "deploy" / "jupyterlab" / "overrides.json"


def why_no_browser() -> str | None:
    """None when the browser test can run here; else why not (for pytest's skip reason)."""
    if not Path(CHROMIUM).exists():
        return (f"{CHROMIUM} is missing: install Debian's chromium (`apt-get install -y chromium`, "
                "as .ci/run does)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing: pip install -e '.[test]'"
    return None


#: Set (to anything but "" or "0") where the browser test must run, as .ci/run does: a
#: missing Chromium or Playwright then fails the test instead of skipping it.
REQUIRE_ENV = "KITLIB_REQUIRE_BROWSER"


def browser_required() -> bool:
    """Whether ``$KITLIB_REQUIRE_BROWSER`` asks for the browser test to run (not be skipped)."""
    return os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A JupyterLab server on 127.0.0.1 serving copies of ``lessons`` from ``root``.

    The server runs this checkout's kitlib (``PYTHONPATH``), in replay mode, with user
    settings of its own: notebooks rendered whole (``windowingMode: none``) so every cell
    is in the page, and nothing restored from a learner's workspace.
    """

    def __init__(self, root: Path, lessons, env: dict | None = None):
        self.root = Path(root)
        (self.root / "work").mkdir(parents=True, exist_ok=True)
        for p in lessons:
            shutil.copy(p, self.root / "work" / Path(p).name)
        settings = self.root / "user-settings" / "@jupyterlab" / "notebook-extension"
        settings.mkdir(parents=True, exist_ok=True)
        (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
        # JupyterLab's app settings as the class gets them: the environment's own (page_config.json
        # and the like, if any) with the class's overrides.json, which a learner's machine holds in
        # {sys.prefix}/share/jupyter/lab/settings (the default app_settings_dir)
        app_settings = self.root / "app-settings"
        installed = Path(sys.prefix) / "share" / "jupyter" / "lab" / "settings"
        if installed.is_dir():
            shutil.copytree(installed, app_settings)
        app_settings.mkdir(parents=True, exist_ok=True)
        shutil.copy(CLASS_OVERRIDES, app_settings / "overrides.json")
        self.port, self.token = free_port(), "kitlib-browser-test"
        e = dict(os.environ)
        e.update({"KITLIB_MODE": "replay", "KITLIB_PROGRESS": "0",
                  "PYTHONPATH": os.pathsep.join([str(REPO), e.get("PYTHONPATH", "")]).rstrip(os.pathsep),
                  "JUPYTER_CONFIG_DIR": str(self.root / "config"), "JUPYTER_RUNTIME_DIR": str(self.root / "runtime")})
        e.pop("MPLBACKEND", None)            # the kernel's inline backend draws the figures
        e.update(env or {})
        cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={self.port}", "--ip=127.0.0.1",
               f"--IdentityProvider.token={self.token}", "--ServerApp.open_browser=False",
               f"--ServerApp.root_dir={self.root / 'work'}", f"--LabApp.user_settings_dir={self.root / 'user-settings'}",
               f"--LabApp.app_settings_dir={app_settings}",
               f"--LabApp.workspaces_dir={self.root / 'workspaces'}", "--ServerApp.disable_check_xsrf=False"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        self.log = open(self.root / "jupyterlab.log", "w")
        self.proc = subprocess.Popen(cmd, env=e, stdout=self.log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/lab/tree/{name}?token={self.token}&reset"

    def _wait_ready(self, timeout_s: float = 60):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited: {(self.root / 'jupyterlab.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/status?token={self.token}",
                                            timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"JupyterLab did not answer on port {self.port} within {timeout_s:.0f} s")

    def settings(self, plugin: str) -> dict:
        """What JupyterLab's settings API gives the page for ``plugin`` (``composite``: the
        values in force, user settings over the app's overrides over the schema's defaults)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/lab/api/settings/{plugin}?token={self.token}",
                                    timeout=10) as r:
            return json.loads(r.read())

    def notebook(self, name: str) -> dict:
        """The saved notebook (outputs included), as JSON."""
        return json.loads((self.root / "work" / name).read_text())

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def launch_browser(playwright, profile_dir: Path):
    """The system Chromium, headless, with a fresh profile in ``profile_dir``."""
    return playwright.chromium.launch_persistent_context(
        str(profile_dir), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, viewport=VIEWPORT)


def run_all_cells(page, timeout_s: float = 240):
    """Run every cell of the open notebook (Run → Run All Cells) and wait until none is pending."""
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_function("() => { const s = document.querySelector('.jp-Notebook-ExecutionIndicator');"
                           " return !s || s.getAttribute('data-status') === 'idle'; }", timeout=60_000)
    page.wait_for_selector("#jp-main-statusbar >> text=/\\| Idle/", timeout=60_000)
    started = ("() => [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]"
               ".some(e => /\\[(\\*|\\d+)\\]/.test(e.textContent))")
    for attempt in range(3):      # a click before the kernel is connected can be lost: try again
        page.keyboard.press("Escape")
        page.click(".lm-MenuBar-item:has-text('Run')")
        page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
        try:
            page.wait_for_function(started, timeout=30_000)
            break
        except Exception:
            if attempt == 2:
                raise
    # done when no cell is pending ([*]) twice in a row, 2 s apart: all ran, or one failed and
    # JupyterLab dropped the rest (the caller reads the saved notebook's errors)
    none_pending = ("() => { const p = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')];"
                    " return !p.some(e => e.textContent.includes('*')); }")
    deadline = time.monotonic() + timeout_s
    while True:
        page.wait_for_function(none_pending, timeout=max(1, deadline - time.monotonic()) * 1000)
        page.wait_for_timeout(2000)
        if page.evaluate(none_pending):
            break
    return page.evaluate("() => [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')]"
                         ".every(e => /\\[\\d+\\]/.test(e.textContent))")


def save(page):
    """Ctrl+S, then wait until JupyterLab has the file saved: the notebook's tab loses its
    jp-mod-dirty mark when the server has answered the save (the file is on disk)."""
    page.keyboard.press("Control+s")
    page.wait_for_function("() => !document.querySelector('.lm-TabBar-tab.jp-mod-current.jp-mod-dirty')",
                           timeout=30_000)


#: The element that scrolls the open notebook (JupyterLab 4).
_SCROLLER = ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer"


def screenshot_notebook(page, path: Path, max_height: int = 8000) -> list:
    """Screenshots of the whole open notebook, top to bottom, at the viewport's width.

    The window is made as tall as the notebook (up to ``max_height`` CSS pixels; a longer
    notebook gives several pictures, ``<stem>-2.png`` and on), so a picture shows every cell
    as a learner would scroll through it; the window's size is restored afterwards.

    Returns
    -------
    list of Path
        The pictures written: ``path`` first.
    """
    path = Path(path)
    size = dict(page.viewport_size or VIEWPORT)
    total = page.evaluate(f"() => {{ const s = document.querySelector('{_SCROLLER}'); return s ? s.scrollHeight : 0; }}")
    chrome = size["height"] - page.evaluate(f"() => {{ const s = document.querySelector('{_SCROLLER}');"
                                            " return s ? s.clientHeight : 0; }")
    shots = []
    try:
        page.set_viewport_size({"width": size["width"], "height": int(min(total + chrome, max_height))})
        view = page.evaluate(f"() => document.querySelector('{_SCROLLER}').clientHeight") if total else 1
        top = 0
        while True:
            page.evaluate(f"(y) => {{ const s = document.querySelector('{_SCROLLER}'); if (s) s.scrollTop = y; }}", top)
            page.wait_for_timeout(200)
            out = path if not shots else path.with_name(f"{path.stem}-{len(shots) + 1}{path.suffix}")
            page.screenshot(path=str(out))
            shots.append(out)
            top += view
            if top >= total:
                break
    finally:
        page.set_viewport_size(size)
    return shots


#: JavaScript measuring what a learner sees: pictures drawn, their scale and smallest text
#: as shown, outputs wider than their cell or scrolling sideways, code lines wider than
#: their editor, and the file browser's width (JupyterLab's default: open).
MEASURE_JS = """() => {
  const outs = [...document.querySelectorAll('.jp-OutputArea-output')];
  const cut = [];
  for (const o of outs) {
    for (const t of o.querySelectorAll('table, img')) {
      const box = o.getBoundingClientRect(), r = t.getBoundingClientRect();
      if (r.right > box.right + 2) cut.push({kind: t.tagName, text: (t.innerText || t.alt || '').slice(0, 80),
                                             over_px: Math.round(r.right - box.right)});
    }
    if (o.scrollWidth > o.clientWidth + 2 && !o.querySelector('table, img'))
      cut.push({kind: 'output', text: o.innerText.slice(0, 80), over_px: o.scrollWidth - o.clientWidth});
  }
  // every picture: its scale on screen (shown width / PNG width) and its smallest text as
  // shown, from the size the kit writes into the PNG (kitlib.plots.SMALLEST_TEXT_KEY)
  const pngText = (src, key) => {
    if (!src || !src.startsWith('data:image/png;base64,')) return null;
    const b = atob(src.slice(22));
    const u32 = (i) => ((b.charCodeAt(i) << 24) | (b.charCodeAt(i + 1) << 16) | (b.charCodeAt(i + 2) << 8) | b.charCodeAt(i + 3)) >>> 0;
    for (let i = 8; i + 8 <= b.length;) {
      const len = u32(i), type = b.slice(i + 4, i + 8);
      if (type === 'tEXt') {
        const d = b.slice(i + 8, i + 8 + len), z = d.indexOf('\0');
        if (d.slice(0, z) === key) return parseFloat(d.slice(z + 1));
      }
      i += 12 + len;
    }
    return null;
  };
  const cellOf = (e) => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].indexOf(e.closest('.jp-Cell'));
  const pictures = [...document.querySelectorAll('.jp-OutputArea-output img')].map(img => {
    const shown = img.getBoundingClientRect().width, text = pngText(img.getAttribute('src'), '%s');
    return {cell: cellOf(img), png_px: img.naturalWidth, shown_px: Math.round(shown),
            scale: +(shown / img.naturalWidth).toFixed(3), text_px: text,
            shown_text_px: text === null ? null : +(text * shown / img.naturalWidth).toFixed(2)};
  });
  // anything in an output that scrolls sideways (a table in its scrolling box, a long line)
  const scrolls = [...document.querySelectorAll('.jp-OutputArea-output, .jp-OutputArea-output *')]
    .filter(e => e.scrollWidth > e.clientWidth + 2 && e.clientWidth > 0
                 && ['auto', 'scroll'].includes(getComputedStyle(e).overflowX))
    .map(e => ({cell: cellOf(e), tag: e.tagName, text: e.innerText.slice(0, 80), over_px: e.scrollWidth - e.clientWidth}));
  // markdown cells (issue 40: lesson 07's table of four memory questions scrolled sideways):
  // anything in one that scrolls sideways, or a table or picture wider than the cell's text
  const md_wide = [...document.querySelectorAll('.jp-MarkdownCell .jp-RenderedMarkdown')].flatMap(m => {
    const box = m.getBoundingClientRect();
    const over = [...m.querySelectorAll('*')]
      .filter(e => e.scrollWidth > e.clientWidth + 2 && e.clientWidth > 0
                   && ['auto', 'scroll'].includes(getComputedStyle(e).overflowX))
      .map(e => ({cell: cellOf(e), tag: e.tagName, text: e.innerText.slice(0, 80), over_px: e.scrollWidth - e.clientWidth}));
    const wide = [...m.querySelectorAll('table, img, pre')].filter(e => e.getBoundingClientRect().right > box.right + 2)
      .map(e => ({cell: cellOf(e), tag: e.tagName, text: e.innerText.slice(0, 80),
                  over_px: Math.round(e.getBoundingClientRect().right - box.right)}));
    return over.concat(wide);
  });
  // code lines wider than their editor (the learner scrolls sideways to read them)
  const wide_code = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea .cm-scroller')]
    .filter(e => e.scrollWidth > e.clientWidth + 2).map(e => cellOf(e));
  // drop-downs of the answer forms narrower than a choice (the chosen one would show cut)
  const ctx = document.createElement('canvas').getContext('2d');
  const cut_choices = [...document.querySelectorAll('.kitlib-answer-form select')].flatMap(s => {
    const st = getComputedStyle(s);
    ctx.font = `${st.fontSize} ${st.fontFamily}`;
    const room = s.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight) - 16;   // the arrow
    return [...s.options].filter(o => ctx.measureText(o.text).width > room)
      .map(o => ({cell: cellOf(s), choice: o.text, room_px: Math.round(room)}));
  });
  // characters of a code line an editor shows whole (its width over the monospace advance)
  const line = document.querySelector('.jp-CodeCell .cm-line');
  let code_chars = null;
  if (line) {
    const st = getComputedStyle(line);
    ctx.font = `${st.fontSize} ${st.fontFamily}`;
    const room = line.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight);
    code_chars = Math.floor(room / (ctx.measureText('x'.repeat(100)).width / 100));
  }
  const side = document.querySelector('#filebrowser');
  const anOutput = document.querySelector('.jp-OutputArea-output');
  const cells = [...document.querySelectorAll('.jp-CodeCell')];
  const byCell = cells.map(c => c.querySelectorAll('.jp-RenderedImage img').length);
  const cut_text = [...document.querySelectorAll('.jp-OutputArea-output td, .jp-OutputArea-output th')]
    .map(e => e.innerText.trim()).filter(t => t.endsWith('...'));
  // a table cell or row label whose text runs out of its box (drawn over the next column's
  // numbers: lesson 06's call sites, "torchvision/models/resnet.py(143): forward", issue 40);
  // column headers break at underscores and are not checked here
  const spill = [...document.querySelectorAll('.jp-OutputArea-output td, .jp-OutputArea-output th.row_heading')]
    .filter(e => e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 2)
    .map(e => ({cell: cellOf(e), text: e.innerText.trim().slice(0, 80), over_px: e.scrollWidth - e.clientWidth}));
  return {pictures: pictures, scrolls: scrolls, md_wide: md_wide, wide_code: wide_code, cut_choices: cut_choices, code_chars: code_chars,
          file_browser_px: side ? side.getBoundingClientRect().width : 0,
          output_px: anOutput ? anOutput.clientWidth : 0,
          figures: document.querySelectorAll('.jp-OutputArea .jp-RenderedImage img').length, cut_text: cut_text,
          figures_by_cell: byCell, cut: cut, spill: spill,
          errors: document.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"] .jp-RenderedText, .jp-OutputArea-output .ansi-red-fg').length,
          forms: document.querySelectorAll('.kitlib-answer-form').length,
          explorers: document.querySelectorAll('.kitlib-explorer').length};
}""" % SMALLEST_TEXT_KEY


def error_outputs(nb: dict) -> list:
    """The error outputs of a saved notebook: (cell index, ename, evalue)."""
    return [(i, o.get("ename"), o.get("evalue")) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"
            for o in c.get("outputs", []) if o.get("output_type") == "error"]


if __name__ == "__main__":   # a lesson by hand: what the test measures
    import tempfile
    from playwright.sync_api import sync_playwright
    tmp = Path(tempfile.mkdtemp(prefix="kitlib-browser-"))
    paths = [Path(p) for p in sys.argv[1:]]
    lab = Lab(tmp, paths)
    try:
        with sync_playwright() as pw:
            ctx = launch_browser(pw, tmp / "profile")
            page = ctx.new_page()
            for p in paths:
                t0 = time.monotonic()
                page.goto(lab.url(p.name))
                ran_all = run_all_cells(page)
                save(page)
                m = page.evaluate(MEASURE_JS)
                screenshot_notebook(page, tmp / f"{p.stem}.png")
                print(p.name, f"{time.monotonic() - t0:.1f} s", "all cells ran" if ran_all else "NOT ALL CELLS RAN",
                      json.dumps(m), error_outputs(lab.notebook(p.name)), flush=True)
            ctx.close()
    finally:
        lab.close()
        print("screenshots in", tmp)
