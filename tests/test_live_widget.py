"""In Jupyter, the cell that shows a kernel-free figure on the site gives a live widget
instead.

Starts JupyterLab on 127.0.0.1 over a scratch copy of a two-cell notebook, runs it in
Debian's Chromium (Playwright), and checks that the Explorer arrives as ipywidgets
controls over an image, that moving a control redraws the image through the kernel, and
that the static twin is not what JupyterLab shows. Network to other hosts is blocked, as
on the site test.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from urllib.parse import urlsplit
from urllib.request import urlopen

import nbformat
import pytest
from built_site import SHOTS
from conftest import CHROMIUM, CHROMIUM_ARGS

playwright = pytest.importorskip("playwright.sync_api")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_code_cell("from transformer_lib.viz import ch02_scale"),
        nbformat.v4.new_code_cell("ch02_scale.scale_explorer()"),
        nbformat.v4.new_code_cell(
            "from transformer_lib.demos import reversal\n"
            "from transformer_lib.viz.live_panel import LivePanel\n"
            "panel = LivePanel(reversal.random_model(), 'reversal', length=8)"
        ),
        nbformat.v4.new_code_cell("panel"),
    ]
    nbformat.write(nb, root / "live.ipynb")
    port = _free_port()
    log = open(root / "lab.log", "w")  # the server's log, for a failing run
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(root / ".jupyter"),
        "JUPYTER_RUNTIME_DIR": str(root / ".rt"),
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            f"--port={port}",
            "--ip=127.0.0.1",
            "--ServerApp.token=",
            "--ServerApp.password=",
            "--allow-root",
            f"--ServerApp.root_dir={root}",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urlopen(f"{url}/lab", timeout=1)
            break
        except OSError:
            time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("JupyterLab did not start within 60 s")
    yield url
    proc.terminate()
    proc.wait(timeout=20)
    log.close()


def test_explorer_is_a_live_widget_in_jupyterlab(lab):
    from playwright.sync_api import sync_playwright

    outside = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})

        def route(r):
            if urlsplit(r.request.url).hostname in ("127.0.0.1", "localhost"):
                r.continue_()
            else:
                outside.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        try:
            before, after = _run_and_toggle(page, lab)
        except Exception:
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / "live-widget-jupyterlab.png"))
            raise
        finally:
            browser.close()
    assert before and before.startswith(("blob:", "data:"))
    assert after != before, "moving the checkbox did not redraw the live figure"
    assert not outside, f"JupyterLab asked other hosts for {outside}"


def _run_and_toggle(page, lab: str) -> tuple[str | None, str | None]:
    """Open the notebook, run every cell, click the checkbox; the image's src before and
    after."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.goto(f"{lab}/lab/tree/live.ipynb")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    page.wait_for_selector(
        ".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000
    )
    # Run both cells from the keyboard (select a cell, command mode, Ctrl+Enter). Keys
    # sent before the kernel's connection is up are dropped without a trace, so try
    # again until outputs appear.
    prompts = page.locator(".jp-Notebook .jp-Cell .jp-InputPrompt")
    for _attempt in range(8):
        page.wait_for_timeout(1000)
        for idx in (0, 1):
            prompts.nth(idx).click()
            page.keyboard.press("Escape")
            page.keyboard.press("Control+Enter")
        try:
            page.wait_for_selector(".widget-image", timeout=8_000)
            break
        except PlaywrightTimeout:
            continue
    else:
        raise AssertionError(
            "the Explorer cell never showed a widget image in JupyterLab"
        )
    image = page.locator(".widget-image").first
    assert page.locator(".widget-hslider").count() == 1  # d_k
    assert page.locator(".widget-checkbox").count() == 1  # scale on/off
    assert (
        page.locator(".tl-explorer").count() == 0
    )  # JupyterLab shows the widget, not the twin
    before = image.get_attribute("src")
    page.locator(".widget-checkbox input").first.click()
    for _ in range(60):  # the kernel redraws and sends the new PNG back
        if image.get_attribute("src") != before:
            break
        time.sleep(0.25)
    return before, image.get_attribute("src")


def test_live_panel_runs_the_pytorch_model_in_jupyterlab(lab):
    """Chapters 11 and 14's live panel: in JupyterLab it is an anywidget whose front end
    is the site's own panel script, and whose numbers come from the PyTorch model on the
    kernel (the answer, the maps and the chain arrive); an input the model was not
    trained on gives the message, not a picture."""
    from playwright.sync_api import sync_playwright

    outside, errors = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})

        def route(r):
            if urlsplit(r.request.url).hostname in ("127.0.0.1", "localhost"):
                r.continue_()
            else:
                outside.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        page.on("pageerror", lambda e: errors.append(str(e)))
        try:
            page.goto(f"{lab}/lab/tree/live.ipynb")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            prompts = page.locator(".jp-Notebook .jp-Cell .jp-InputPrompt")
            panel = page.locator(".tl-live-panel[data-state='done']")
            for _attempt in range(8):
                page.wait_for_timeout(1000)
                for idx in (2, 3):
                    prompts.nth(idx).click()
                    page.keyboard.press("Escape")
                    page.keyboard.press("Control+Enter")
                try:
                    panel.first.wait_for(timeout=30_000)
                    break
                except Exception:
                    continue
            else:
                raise AssertionError("the live panel never showed its answer")
            # the widget's view, not the site's markup (which carries its hidden words)
            assert page.locator(".tl-live-words").count() == 0
            root = panel.first
            assert root.locator(".tl-live-answer .tl-live-tok.new").count() == 8
            assert (
                root.locator(".tl-live-map canvas").count() == 8
            )  # 2 layers x 4 heads
            assert root.locator(".tl-live-chain-table").count() == 1
            box = root.locator("input[type='text']")
            box.fill("abc")
            box.press("Enter")
            page.locator(".tl-live-msg", has_text="exactly 8 symbols").first.wait_for(
                timeout=30_000
            )
            assert root.locator(".tl-live-map").count() == 0
        except Exception:
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / "live-panel-jupyterlab.png"))
            raise
        finally:
            browser.close()
    assert not outside, f"JupyterLab asked other hosts for {outside}"
    assert not errors, errors
