import contextlib
import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

# the browser tests' Chromium (Debian's: playwright cannot download its own here)
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-gpu",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest's output clean
        pass


class _Server(http.server.ThreadingHTTPServer):
    # Chromium opens several connections at once: a backlog larger than the default
    # 5, so that a busy machine drops none (a dropped one is retried after 1, 2, 4 s)
    request_queue_size = 128
    daemon_threads = True


@contextlib.contextmanager
def serve(directory: Path, handler: type = QuietHandler) -> Iterator[str]:
    """Serve ``directory`` on 127.0.0.1 (a free port) while the block runs; its URL."""
    httpd = _Server(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(directory))
    )
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium for a module's browser tests."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is in requirements.txt"
    )
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium"
            " (apt-get install chromium fonts-noto-cjk)"
        )
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same RNG state, so failures reproduce."""
    torch.manual_seed(0)
    yield


@pytest.fixture
def one_thread():
    """Run a test on one torch thread, then restore the setting. For modules of tiny
    models: one thread is fastest, and on a busy machine two threads wait on each
    other. Use it with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _is_xdist_worker(config) -> bool:
    return hasattr(config, "workerinput")


def pytest_sessionstart(session):
    """A new run starts a new site report (see write_report in built_site.py)."""
    if not _is_xdist_worker(session.config):
        import shutil

        from built_site import ROWS

        shutil.rmtree(ROWS, ignore_errors=True)


def pytest_sessionfinish(session):
    """Write the site report once every worker has finished its pages."""
    if not _is_xdist_worker(session.config):
        from built_site import write_report

        write_report()


@pytest.fixture(scope="module")
def site() -> Path:
    """The built site (``make book``), every page of every edition in it."""
    from built_site import EDITION_PAGES, SITE

    if not (SITE / "index.html").is_file():
        pytest.fail(
            f"No built site at {SITE}: run `make book` first"
            " (make test builds it before this test)."
        )
    missing = [p for p in EDITION_PAGES if not (SITE / p).is_file()]
    assert not missing, f"pages listed in _toc.yml but not built: {missing}"
    return SITE
