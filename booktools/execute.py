"""Execute the book's notebooks once, side by side, for the site and for the tests.

    python -m booktools.execute                      # every chapter, into the cache
    python -m booktools.execute --solutions          # ... and every exercise solution
    python -m booktools.execute --solutions book/03_softmax.ipynb

Each notebook runs in its own kernel (as Jupyter runs it: from ``book/``, with the
cell timeout of ``_config.yml``), several at a time (``--jobs``, one per core by
default). The executed notebooks go into the jupyter-cache that ``_config.yml`` names,
where ``jupyter-book build`` and the Chinese editions (``tools/editions.py``) find
them, so ``make book`` executes each notebook once.

With ``--solutions``, every exercise solution of a chapter then runs in the same kernel,
after the chapter's last cell, as a learner would paste it (``tools/solutions.py``):
it fails when it raises, or when its exercise's checker still says "not attempted".
``make test`` builds the book this way, so the chapters run once for the site and for
their solutions together.

Before a chapter's first cell, a setup cell (not part of the chapter, and not cached)
asks the kernel to draw every figure once more in each Chinese edition's language
(``transformer_lib.viz.image_words``), with the words of ``locales/*/images.po``; the
editions then show those pictures.

A cell that raises, a cell over the timeout, or a failing solution is reported with its
traceback, and the exit status is 1. The notebooks that ran are cached either way.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from . import solutions
from .catalogs import image_tables
from .paths import BUILD, CACHE, CELL_TIMEOUT, CHAPTERS

TIMEOUT = CELL_TIMEOUT
# how long each notebook took last time, so the slowest start first; on a fresh clone,
# how long each took under `make test` on a 2-core machine (refresh it by copying the
# first file over the second after a clean `make test`; a chapter missing from both
# starts last)
TIMES = BUILD / "notebook-times.json"
TYPICAL_TIMES = Path(__file__).with_name("notebook-seconds.json")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
SOLUTION_TAG = "raises-exception"  # nbclient records the error and goes on


@dataclass
class Result:
    path: Path
    seconds: float
    notebook: dict | None  # the executed chapter, without the solutions
    error: str | None = None  # why the chapter itself failed
    solutions: dict[str, str | None] = field(default_factory=dict)  # label -> failure

    @property
    def failures(self) -> list[str]:
        out = [f"{self.path.name}: {self.error}"] if self.error else []
        out += [
            f"{self.path.name}::solution {label}: {why}"
            for label, why in self.solutions.items()
            if why is not None
        ]
        return out


def _solution_failure(cell: dict, label: str, readable: str) -> str | None:
    """Why the solution cell failed, or None if it passed."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            tb = ANSI.sub("", "\n".join(out.get("traceback", [])))
            return f"{out['ename']}: {out['evalue']}\n{readable}\n{tb}"
    printed = "".join(
        out.get("text", "")
        for out in cell.get("outputs", [])
        if out.get("output_type") == "stream"
    )
    if solutions.NOT_ATTEMPTED.search(printed):
        return (
            f"the solution of {label} leaves its exercise 'not attempted':\n{printed}"
        )
    return None


def setup_cell(tables: dict[str, dict[str, str]]) -> nbformat.NotebookNode:
    """The cell run before a chapter: its figures are also drawn in each edition's
    language, from these tables ({language: {key: translation}})."""
    source = (
        "import json as _json\n"
        "from transformer_lib.viz import image_words as _image_words\n\n"
        f"_image_words.render_editions(_json.loads({json.dumps(tables)!r}))\n"
        "del _json, _image_words"
    )
    return nbformat.v4.new_code_cell(source)


def run_one(
    path: Path,
    with_solutions: bool,
    threads: int,
    tables: dict[str, dict[str, str]] | None = None,
) -> Result:
    """Execute one notebook (then its solutions) in a fresh kernel; its figures are
    also drawn in the languages of ``tables`` (none by default)."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    nb = nbformat.read(path, as_version=4)
    work = copy.deepcopy(nb)
    work.cells.insert(0, setup_cell(tables or {}))
    readable: dict[str, str] = {}
    if with_solutions:
        for ex in solutions.exercises(path):
            if ex.code:
                source, readable[ex.label] = solutions.runner_source(ex)
                cell = nbformat.v4.new_code_cell(source)
                cell.metadata = {"tags": [SOLUTION_TAG], "tl_solution": ex.label}
                work.cells.append(cell)
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    client = NotebookClient(
        work,
        timeout=TIMEOUT,
        allow_errors=False,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    start = time.perf_counter()
    error = None
    try:
        client.execute(env=env)
    except (CellExecutionError, CellTimeoutError) as err:
        error = ANSI.sub("", str(err))
    seconds = time.perf_counter() - start
    result = Result(path, seconds, None, error)
    if error is None:
        # the chapter as the book reads it: its own cells, with their outputs, counted
        # from 1 as if the setup cell had not run
        chapter = work.cells[1 : len(nb.cells) + 1]
        for cell, ran in zip(nb.cells, chapter, strict=True):
            if cell.cell_type == "code":
                cell.outputs = ran.outputs
                cell.execution_count = _one_less(ran.execution_count)
                for out in cell.outputs:
                    if out.get("execution_count") is not None:
                        out.execution_count = _one_less(out.execution_count)
        result.notebook = nb
        for cell in work.cells[len(nb.cells) + 1 :]:
            label = cell.metadata["tl_solution"]
            result.solutions[label] = _solution_failure(cell, label, readable[label])
    return result


def _one_less(count: int | None) -> int | None:
    return None if count is None else count - 1


def cache_notebook(cache, result: Result) -> None:
    """Store an executed notebook where MyST-NB's cache mode finds it."""
    from jupyter_cache.base import CacheBundleIn

    record = cache.add_nb_to_project(str(result.path))
    cache.cache_notebook_bundle(
        CacheBundleIn(
            nbformat.from_dict(result.notebook),
            record.uri,
            data={"execution_seconds": result.seconds},
        ),
        check_validity=False,
        overwrite=True,
    )
    # the book reads the notebook from disk: it must match what was cached
    cache.match_cache_notebook(nbformat.read(result.path, as_version=4))


def run(paths: list[Path], with_solutions: bool, jobs: int) -> list[Result]:
    from jupyter_cache import get_cache

    last = json.loads((TIMES if TIMES.exists() else TYPICAL_TIMES).read_text())
    paths = sorted(paths, key=lambda p: (-last.get(p.name, 0.0), p.name))
    threads = max(1, (os.cpu_count() or 1) // jobs)
    cache = get_cache(str(CACHE))
    tables = image_tables()
    from transformer_lib.viz.image_words import font_family

    for language in tables:
        try:
            font_family(language)  # before any kernel starts
        except RuntimeError as err:
            raise SystemExit(str(err)) from None
    results: list[Result] = []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {
            pool.submit(run_one, p, with_solutions, threads, tables): p for p in paths
        }
        for future in as_completed(futures):
            result = future.result()
            results.append(result)
            if result.notebook is not None:
                cache_notebook(cache, result)
            ran = len(result.solutions)
            bad = sum(why is not None for why in result.solutions.values())
            status = "FAILED" if result.failures else "ok"
            extra = f", solutions {ran - bad}/{ran} passed" if with_solutions else ""
            print(
                f"{result.path.name:32} {result.seconds:6.1f} s  {status}{extra}",
                flush=True,
            )
    TIMES.parent.mkdir(parents=True, exist_ok=True)
    TIMES.write_text(json.dumps({**last, **{r.path.name: r.seconds for r in results}}))
    return results


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "notebooks", nargs="*", type=Path, help="default: every chapter"
    )
    parser.add_argument(
        "--solutions", action="store_true", help="run every solution too"
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or list(CHAPTERS)
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        parser.error(f"no such notebook: {', '.join(missing)}")
    start = time.perf_counter()
    results = run(paths, args.solutions, max(1, args.jobs))
    failures = [f for r in results for f in r.failures]
    solved = sum(len(r.solutions) for r in results)
    print(
        f"{len(results)} notebooks"
        + (f" and {solved} solutions" if args.solutions else "")
        + f" in {time.perf_counter() - start:.0f} s with {args.jobs} jobs; "
        + f"{len(failures)} failed"
    )
    for failure in failures:
        print("\n" + "=" * 88 + "\nFAILED " + failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
