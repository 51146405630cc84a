"""The JupyterLab experience in a real browser: what a newcomer sees after `make lab`.

JupyterLab is served on 127.0.0.1 from this environment (a free port, a token, no browser
of its own) over a *copy* of lessons/ (JupyterLab autosaves, and lessons are committed
without outputs). Debian's headless Chromium, driven by Playwright with that executable
(browser downloads are impossible here), then:

1. opens lessons/00_start_here.ipynb, runs all cells from the Run menu, and checks that no
   cell failed, that a pandas table rendered and that a chart rendered (charts are inline
   SVG images: gpu_lab.charts registers an offline renderer);
2. opens a small notebook that shows ``gpu_lab.drill.quiz(n=2, seed=0)``, clicks "Show
   answer", then the self-score button "Got it", and checks the widget's feedback (the
   model answer appears, the score reads 1 / 1).

Screenshots go to $GPU_LAB_ARTIFACTS (else a temporary folder); their paths are printed.
Chromium: ``apt-get install -y chromium``; $GPU_LAB_CHROMIUM names another executable.
Fails in CI when Chromium or Playwright is missing.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from delivery_support import REPO, need

pytestmark = pytest.mark.delivery

LOAD_S = 120  # JupyterLab's first page load on a busy 2-core machine
RUN_S = 300  # running every cell of lesson 00


def chromium_executable() -> str | None:
    env = os.environ.get("GPU_LAB_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    # Debian's /usr/bin/chromium is a shell wrapper; the binary itself starts cleaner.
    for candidate in ("/usr/lib/chromium/chromium", "chromium", "chromium-browser",
                      "google-chrome"):
        path = candidate if Path(candidate).is_file() else shutil.which(candidate)
        if path:
            return path
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def jupyterlab(tmp_path_factory):
    """A JupyterLab server over a copy of lessons/; yields (base url, token, root)."""
    root = tmp_path_factory.mktemp("lab")
    shutil.copytree(REPO / "lessons", root / "lessons",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("import gpu_lab\n\ngpu_lab.drill.quiz(n=2, seed=0)")]
    nbformat.write(nb, root / "lessons" / "drill_smoke.ipynb")

    port, token = _free_port(), secrets.token_hex(16)
    state = root / ".jupyter"
    env = dict(os.environ,
               JUPYTER_CONFIG_DIR=str(state / "config"),
               JUPYTER_RUNTIME_DIR=str(state / "runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(state / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(state / "workspaces"),
               GPU_LAB_CACHE=str(state / "no-controlplane"))  # the sim path, as on Binder
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
           "--LabApp.news_url=None",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]
    settings = REPO / "jupyter" / "lab-settings"  # what `make lab` passes (no news pop-up)
    if settings.is_dir():
        cmd.append(f"--LabApp.app_settings_dir={settings}")
    if hasattr(os, "getuid") and os.getuid() == 0:
        cmd.append("--allow-root")
    log = (root / "jupyterlab.log").open("w")
    proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + LOAD_S
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"jupyter lab exited {proc.returncode}:\n"
                            + (root / "jupyterlab.log").read_text()[-3000:])
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("jupyter lab did not answer in time:\n"
                                + (root / "jupyterlab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield base, token, root
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def page():
    exe = chromium_executable()
    need(exe is not None, "Chromium", "apt-get install -y chromium (or set GPU_LAB_CHROMIUM)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        need(False, "Playwright", f"{sys.executable} -m pip install playwright (dev extra)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport={"width": 1400, "height": 1000})
        finally:
            browser.close()


ACTIVE = """() => {
  const tab = document.querySelector('.lm-DockPanel-tabBar .lm-TabBar-tab.jp-mod-current');
  const panel = tab && document.getElementById(tab.dataset.id);
  return panel && panel.classList.contains('jp-NotebookPanel') ? panel : null;
}"""  # the notebook in the current tab (other open notebooks stay in the DOM)


def _active(page):
    """A locator for the notebook panel of the current tab."""
    pid = page.evaluate(f"() => {{ const p = ({ACTIVE})(); return p ? p.id : null }}")
    assert pid, "no notebook in the current tab"
    return page.locator(f"[id='{pid}']")


def _open(page, base, token, path):
    page.goto(f"{base}/lab/tree/{path}?token={token}", timeout=LOAD_S * 1000)
    # loaded and the kernel started: cells in the panel, the status bar reads "... | Idle"
    # (the toolbar's execution indicator says idle before any kernel exists, so not that)
    page.wait_for_function(
        f"""() => {{
          const panel = ({ACTIVE})();
          const bar = [...document.querySelectorAll('.jp-StatusBar-TextItem')]
            .map(e => e.textContent).join(' | ');
          return panel && panel.querySelectorAll('.jp-Cell').length > 0
            && bar.includes('Idle') && !bar.includes('No Kernel');
        }}""", timeout=LOAD_S * 1000)
    no_news = page.locator(".Toastify__toast button:text-is('No')")
    if no_news.count():  # "Would you like to get notified about official Jupyter news?"
        no_news.first.click()


_PROMPTS = f"""() => {{
  const panel = ({ACTIVE})();
  return panel ? [...panel.querySelectorAll('.jp-CodeCell .jp-InputPrompt')]
    .map(p => p.textContent.trim()) : [];
}}"""


def _run_all(page, artifacts: Path, name: str):
    """Run > Run All Cells, then wait until every code cell shows an execution count."""
    deadline = time.monotonic() + RUN_S
    for _attempt in range(3):
        _dismiss_dialog(page, artifacts, name)
        page.click(".lm-MenuBar-itemLabel:text-is('Run')")
        page.click(".lm-Menu-itemLabel:text-is('Run All Cells')")
        started = time.monotonic()
        while time.monotonic() < deadline:
            prompts = page.evaluate(_PROMPTS)
            if prompts and all(re.fullmatch(r"\[\d+\]:", p) for p in prompts):
                return
            if time.monotonic() - started > 20 and all(p in ("[ ]:", "") for p in prompts):
                break  # the click did not start anything: open the menu again
            time.sleep(0.5)
        else:
            break
    _shot(page, artifacts, f"{name}-FAILED-run-all")
    pytest.fail(f"{name}: not every cell ran within {RUN_S}s; prompts: {page.evaluate(_PROMPTS)}")


def _dismiss_dialog(page, artifacts: Path, name: str) -> None:
    """A JupyterLab dialog over the page (one was seen once, on a loaded machine) takes every
    click: say what it said, keep its picture, and close it with Escape (its Cancel). Nothing
    is excused by that: the cells must still all run and show what the test checks."""
    dialog = page.locator("dialog.jp-Dialog")
    if not dialog.count():
        return
    text = " ".join(dialog.first.inner_text().split())
    print(f"{name}: a JupyterLab dialog was open: {text!r}")
    _shot(page, artifacts, f"{name}-dialog")
    page.keyboard.press("Escape")
    dialog.first.wait_for(state="detached", timeout=10_000)


def _shot(page, artifacts: Path, name: str, locator=None) -> Path:
    path = artifacts / f"browser-{name}.png"
    if locator is not None:
        locator.scroll_into_view_if_needed()
        locator.screenshot(path=str(path))
    else:
        page.screenshot(path=str(path))
    print(f"screenshot: {path}")
    return path


def test_lesson_00_runs_and_renders_a_table_and_a_chart(page, jupyterlab, artifacts):
    base, token, _root = jupyterlab
    _open(page, base, token, "lessons/00_start_here.ipynb")
    _shot(page, artifacts, "00-opened")
    started = time.monotonic()
    _run_all(page, artifacts, "00")
    print(f"lesson 00: run all cells in the browser took {time.monotonic() - started:.1f}s")
    panel = _active(page)
    errors = panel.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
                           ":has-text('Traceback')")
    assert errors.count() == 0, errors.first.inner_text()[:2000]
    table = panel.locator(".jp-OutputArea-output table.dataframe").first
    table.wait_for(timeout=10_000)
    assert table.locator("tbody tr").count() > 0
    chart = panel.locator(".jp-RenderedSVG img, .jp-RenderedSVG svg").first
    chart.wait_for(timeout=10_000)
    box = chart.bounding_box()
    assert box and box["width"] > 100 and box["height"] > 50, box
    assert page.evaluate("el => el.tagName === 'svg' || (el.complete && el.naturalWidth > 0)",
                         chart.element_handle()), "the chart image did not load"
    _shot(page, artifacts, "00-table", table.locator("xpath=ancestor::div[contains(@class,"
                                                     "'jp-Cell ')][1]"))
    _shot(page, artifacts, "00-chart", chart.locator("xpath=ancestor::div[contains(@class,"
                                                     "'jp-Cell ')][1]"))


def test_drill_widget_show_answer_and_self_score(page, jupyterlab, artifacts):
    base, token, _root = jupyterlab
    _open(page, base, token, "lessons/drill_smoke.ipynb")
    _run_all(page, artifacts, "drill")
    panel = _active(page)
    widget = panel.locator(".jp-OutputArea-output .widget-vbox").first
    widget.wait_for(timeout=60_000)
    assert "card 1 of 2" in widget.inner_text()
    _shot(page, artifacts, "drill-question", widget)
    widget.locator("button:has-text('Show answer')").click()
    page.wait_for_function(
        "el => el.innerText.includes('Likely follow-ups')", arg=widget.element_handle(),
        timeout=30_000)
    got = widget.locator("button:has-text('Got it')")
    assert got.is_enabled()
    got.click()
    page.wait_for_function("el => el.innerText.includes('score 1 / 1')",
                           arg=widget.element_handle(), timeout=30_000)
    assert widget.locator("button:has-text('Got it')").is_disabled()  # scored once only
    _shot(page, artifacts, "drill-scored", widget)


def test_the_jupyterlab_log_has_no_warning_about_our_settings(jupyterlab):
    """After the kernels above ran: nothing in JupyterLab's log about gpu-lab's settings
    (a misspelt overrides.json, a setting JupyterLab does not know, would warn here)."""
    _, _, root = jupyterlab
    log = (root / "jupyterlab.log").read_text()
    assert "Kernel started" in log  # the tests above did start kernels
    ours = [line for line in log.splitlines()
            if line.startswith(("[W", "[E")) and ("lab-settings" in line or "overrides" in line)]
    assert ours == []
