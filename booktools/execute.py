"""nbval's run of the chapters is the book's execution: a pytest plugin.

    python -m pytest --nbval-lax -n auto --dist loadfile book/  # every chapter
    python -m pytest --nbval-lax --solutions book/03_softmax.ipynb  # and its solutions

nbval runs each chapter in its own kernel, cell by cell, as Jupyter runs it (from
``book/``, with the cell timeout of ``_config.yml``), and fails on any cell that raises.
This plugin (``-p booktools.execute``, in pyproject.toml's pytest options) adds three
things through pytest's own hooks, so that the same run serves the site:

* before a chapter's first cell, the kernel is asked to draw every figure once more in
  each Chinese edition's language, with the words of ``locales/*/images.po``
  (:mod:`booktools.figures`); the editions then show those pictures;
* every message a chapter cell's execution publishes is kept, and turned into the cell's
  outputs by nbclient (what jupyter-book's own execution would store); a chapter whose
  every cell passed goes into the jupyter-cache that ``_config.yml`` names, where
  ``jupyter-book build`` and the Chinese editions (:mod:`booktools.editions`) read it,
  so ``make book`` executes each notebook once;
* with ``--solutions``, every exercise solution of a chapter then runs as one more test
  in the same kernel, after the chapter's last cell, as a learner would paste it
  (:mod:`booktools.solutions`): it fails when it raises, or when its exercise's checker
  still says "not attempted".

With pytest-xdist (``-n auto --dist loadfile``), the chapters run side by side, a whole
chapter on one worker, the slowest first (by ``_build/notebook-times.json``, or on a
fresh clone ``booktools/notebook-seconds.json``); each worker leaves its executed
chapters in a spool directory, and the controlling process stores them into the cache.

nbval reads every message of a cell through ``IPyNbFile.get_kernel_message``, which
:class:`BookNotebook` extends to keep them; ``tests/test_execute.py`` checks that nbval
still does so.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections import defaultdict
from pathlib import Path

import nbformat
import pytest
from nbval.plugin import IPyNbCell, IPyNbFile, NbCellError

from . import solutions
from .catalogs import figure_tables, image_tables
from .figures import FONTS
from .paths import BUILD, CACHE, CELL_TIMEOUT
from .upstream import KeepsKernelMessages, outputs_from_messages

# how long each notebook took last time, so the slowest start first; on a fresh clone,
# how long each took under `make test` on a 2-core machine (refresh it by copying the
# first file over the second after a clean `make test`; a chapter missing from both
# starts last)
TIMES = BUILD / "notebook-times.json"
TYPICAL_TIMES = Path(__file__).with_name("notebook-seconds.json")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
NBVAL_DEFAULT_TIMEOUT = 2000  # nbval's own default, replaced by _config.yml's


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("booktools", "the book's execution (booktools.execute)")
    group.addoption(
        "--solutions",
        action="store_true",
        help="run every exercise solution after its chapter, in the chapter's kernel",
    )
    group.addoption(
        "--book-cache",
        type=Path,
        default=CACHE,
        help="the jupyter-cache the executed chapters go into (default: _config.yml's)",
    )
    group.addoption(
        "--image-words",
        type=Path,
        default=None,
        help="a JSON file {language: {key: translation}} of the words inside the"
        " figures (default: the editions' catalogs images.po)",
    )
    group.addoption(
        "--page-words",
        type=Path,
        default=None,
        help="a JSON file {language: {word: translation}} of the words of the"
        " interactive figures' HTML (default: the editions' catalogs figures.po)",
    )


def _active(config: pytest.Config) -> bool:
    return bool(config.option.nbval or config.option.nbval_lax)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _spool(config: pytest.Config) -> Path:
    """Where workers leave the chapters they executed, for the controller to cache."""
    cache = Path(config.option.book_cache)
    return cache.with_name(cache.name + "-executed")


def pytest_configure(config: pytest.Config) -> None:
    if not _active(config):
        return
    if config.option.nbval_cell_timeout == NBVAL_DEFAULT_TIMEOUT:
        config.option.nbval_cell_timeout = CELL_TIMEOUT
    if _is_worker(config):
        return
    shutil.rmtree(_spool(config), ignore_errors=True)
    tables = _tables(config)
    from transformer_lib.viz.image_words import font_family

    for language in tables:
        try:
            font_family(FONTS[language])  # before any kernel starts
        except RuntimeError as err:
            raise pytest.UsageError(str(err)) from None


def _tables(config: pytest.Config) -> dict[str, dict[str, str]]:
    path = config.option.image_words
    return json.loads(path.read_text(encoding="utf-8")) if path else image_tables()


def _page_words(config: pytest.Config) -> dict[str, dict[str, str]]:
    path = config.option.page_words
    return json.loads(path.read_text(encoding="utf-8")) if path else figure_tables()


def setup_source(
    tables: dict[str, dict[str, str]], page_words: dict[str, dict[str, str]]
) -> str:
    """The code run before a chapter: its figures are also drawn in each edition's
    language and font, from these tables ({language: {key: translation}}), and its
    interactive figures written with each edition's words (``page_words``)."""
    fonts = {language: FONTS[language] for language in tables}
    return (
        "import json as _json\n"
        "from transformer_lib.viz import image_words as _image_words\n\n"
        f"_image_words.render_editions(_json.loads({json.dumps(tables)!r}),"
        f" {fonts!r}, _json.loads({json.dumps(page_words)!r}))\n"
        "del _json, _image_words"
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    """nbval's notebook collector, as :class:`BookNotebook`."""
    outcome = yield
    found = outcome.get_result()
    if any(isinstance(c, IPyNbFile) and not isinstance(c, BookNotebook) for c in found):
        outcome.force_result(
            [
                BookNotebook.from_parent(parent, path=file_path)
                if isinstance(c, IPyNbFile)
                else c
                for c in found
            ]
        )


class BookNotebook(KeepsKernelMessages):
    """nbval's notebook, which also keeps each cell's messages
    (:class:`~booktools.upstream.KeepsKernelMessages`), runs the editions' setup
    before the first cell, and (``--solutions``) the solutions after the last."""

    def collect(self):
        yield from super().collect()
        if self.config.option.solutions:
            for ex in solutions.exercises(Path(self.fspath)):
                if ex.code:
                    yield SolutionCell.for_exercise(self, ex)

    def setup(self) -> None:
        self.started = time.perf_counter()
        self.executed = nbformat.read(str(self.fspath), as_version=4)
        self.recorded: list[tuple[dict, list[dict]]] = []  # (cell, its messages)
        self.failed = False
        super().setup()
        kernel = self.kernel
        msg_id = kernel.kc.execute(
            setup_source(_tables(self.config), _page_words(self.config)),
            store_history=False,
        )
        reply = kernel.kc.get_shell_msg(timeout=CELL_TIMEOUT)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = kernel.kc.get_shell_msg(timeout=CELL_TIMEOUT)
        kernel.await_idle(msg_id, CELL_TIMEOUT)
        if reply["content"]["status"] != "ok":
            tb = ANSI.sub("", "\n".join(reply["content"].get("traceback", [])))
            raise RuntimeError(f"the editions' setup failed in the kernel:\n{tb}")

    def record(self, item: IPyNbCell, messages: list[dict], passed: bool) -> None:
        """Turn a chapter cell's messages into its outputs, as nbclient would."""
        self.failed = self.failed or not passed
        inputs = [m for m in messages if m["msg_type"] == "execute_input"]
        if not inputs:
            return
        msg_id = inputs[-1]["parent_header"]["msg_id"]
        self.recorded.append((item.cell, [m for m in messages if _parent(m) == msg_id]))

    def teardown(self) -> None:
        try:
            if not self.failed and self.recorded:
                self._spool_executed()
        finally:
            super().teardown()

    def _spool_executed(self) -> None:
        from nbclient import NotebookClient

        nb = self.executed
        client = NotebookClient(nb, record_timing=False)
        client.reset_execution_trackers()
        index = {id(c): i for i, c in enumerate(self.nb.cells)}
        count = 0
        for cell, messages in self.recorded:
            i = index[id(cell)]
            target = nb.cells[i]
            outputs_from_messages(client, target, i, messages)
            # nbval runs cells without storing history, so its counts stay put: number
            # them as a notebook run counts them
            count += 1
            target.execution_count = count
            for out in target.outputs:
                if out.get("output_type") == "execute_result":
                    out.execution_count = count
        spool = _spool(self.config)
        spool.mkdir(parents=True, exist_ok=True)
        name = Path(self.fspath).name
        nbformat.write(nb, spool / name)
        seconds = time.perf_counter() - self.started
        (spool / f"{name}.json").write_text(
            json.dumps({"path": str(self.fspath), "seconds": seconds})
        )


def _parent(msg: dict) -> str | None:
    return msg["parent_header"].get("msg_id")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
    notebook = item.parent
    if not isinstance(notebook, BookNotebook) or isinstance(item, SolutionCell):
        yield
        return
    notebook.messages = []
    outcome = yield
    messages, notebook.messages = notebook.messages, None
    skipped = outcome.excinfo and issubclass(outcome.excinfo[0], pytest.skip.Exception)
    notebook.record(item, messages, passed=outcome.excinfo is None or skipped)


class SolutionCell(IPyNbCell):
    """One exercise's solution, run after the chapter in its kernel, followed by the
    exercise's check cell without its stub."""

    @classmethod
    def for_exercise(cls, notebook: BookNotebook, ex: solutions.Exercise):
        source, readable = solutions.runner_source(ex)
        cell = nbformat.v4.new_code_cell(source)
        item = cls.from_parent(
            notebook,
            name=f"solution {ex.label}",
            cell_num=ex.label,
            cell=cell,
            options=defaultdict(bool, check=False),
        )
        item.readable = readable
        return item

    def runtest(self) -> None:
        super().runtest()
        printed = "".join(  # a checker in the editions' build displays its message
            out.get("text", "")
            if out.get("output_type") == "stream"
            else str(out.get("data", {}).get("text/plain", ""))
            for out in self.test_outputs or []
        )
        if solutions.NOT_ATTEMPTED.search(printed):
            self.raise_cell_error(
                f"the solution of {self.cell_num} leaves its exercise"
                f" 'not attempted':\n{printed}"
            )

    def repr_failure(self, excinfo):
        exc = excinfo.value
        if not isinstance(exc, NbCellError):
            return super().repr_failure(excinfo)
        tb = ANSI.sub("", exc.inner_traceback or "")
        return f"solution {self.cell_num}: {exc}\n{self.readable}\n{tb}"

    def reportinfo(self):
        return self.fspath, 0, f"{self.fspath.basename}::solution {self.cell_num}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    """The slowest chapters first, each chapter's items together and in order."""
    if not _active(config):
        return
    last = json.loads((TIMES if TIMES.exists() else TYPICAL_TIMES).read_text())
    order = {}
    for i, item in enumerate(items):
        order.setdefault(item.parent, i)

    def key(item: pytest.Item):
        name = Path(str(item.parent.fspath)).name
        return (-last.get(name, 0.0), order[item.parent])

    items.sort(key=key)  # stable: a chapter's cells keep their order


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Store every chapter the workers executed into the jupyter-cache."""
    config = session.config
    if not _active(config) or _is_worker(config):
        return
    spool = _spool(config)
    done = sorted(spool.glob("*.ipynb")) if spool.is_dir() else []
    if not done:
        return
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(str(config.option.book_cache))
    times = {}
    for executed in done:
        info = json.loads(executed.with_name(executed.name + ".json").read_text())
        record = cache.add_nb_to_project(info["path"])
        cache.cache_notebook_bundle(
            CacheBundleIn(
                nbformat.read(executed, as_version=4),
                record.uri,
                data={"execution_seconds": info["seconds"]},
            ),
            check_validity=False,
            overwrite=True,
        )
        # the book reads the notebook from disk: it must match what was cached
        cache.match_cache_notebook(nbformat.read(info["path"], as_version=4))
        times[executed.name] = info["seconds"]
    shutil.rmtree(spool, ignore_errors=True)
    if Path(config.option.book_cache) == CACHE:
        last = json.loads(TIMES.read_text()) if TIMES.exists() else {}
        TIMES.parent.mkdir(parents=True, exist_ok=True)
        TIMES.write_text(json.dumps({**last, **times}))
