"""The book's execution is nbval's run of the chapters (booktools/execute.py).

A chapter run with ``pytest --nbval-lax`` lands in the jupyter-cache with the outputs
nbclient would have stored; nbval still reads every message through the method the
plugin extends (nbval is pinned; this fails first when an upgrade changes it).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import nbformat
import pytest
from nbval import plugin as nbval_plugin

from booktools.figures import cached_notebooks

ROOT = Path(__file__).resolve().parents[1]


def execute_chapter(
    path: Path,
    tmp_path: Path,
    *,
    solutions: bool = False,
    tables: dict[str, dict[str, str]] | None = None,
) -> tuple[int, dict[str, str | None], nbformat.NotebookNode | None]:
    """Run one notebook as ``make book`` runs the chapters: (pytest's exit status,
    {test name: its failure, or None when it passed}, the executed notebook from the
    cache, or None when it was not cached)."""
    words = tmp_path / "words.json"
    words.write_text(json.dumps(tables or {}), encoding="utf-8")
    report, cache = tmp_path / "report.xml", tmp_path / "cache"
    cmd = [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml")]
    cmd += ["--rootdir", str(tmp_path), "-p", "no:cacheprovider", "-q"]
    cmd += ["--nbval-lax", "--nbval-kernel-name", "python3", "--junitxml", str(report)]
    cmd += ["--book-cache", str(cache), "--image-words", str(words), str(path)]
    cmd += ["--solutions"] if solutions else []
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    tests = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        problem = case.find("failure")
        problem = case.find("error") if problem is None else problem
        tests[case.get("name")] = (
            None if problem is None else (problem.text or problem.get("message"))
        )
    executed = [nb for _, _, nb in cached_notebooks(cache)] if cache.exists() else []
    if not executed:
        return run.returncode, tests, None
    return run.returncode, tests, nbformat.reads(json.dumps(executed[0]), as_version=4)


def test_nbval_still_reads_every_message_through_get_kernel_message():
    """BookNotebook keeps a cell's messages by extending IPyNbFile.get_kernel_message;
    it relies on nbval's cell reading its iopub messages there, and nowhere else."""
    runtest = inspect.getsource(nbval_plugin.IPyNbCell.runtest)
    assert "self.parent.get_kernel_message(" in runtest
    assert "kc.get_iopub_msg" not in runtest and "get_message(" not in runtest.replace(
        "get_kernel_message(", ""
    )
    signature = inspect.signature(nbval_plugin.IPyNbFile.get_kernel_message)
    assert list(signature.parameters) == ["self", "timeout", "stream"]
    # the pinned nbval's code, as read when this plugin was written: a new version
    # must be read again (then update the digest)
    digest = hashlib.sha256(runtest.encode()).hexdigest()[:16]
    assert digest == "5c1bc2f036fa8747", digest


@pytest.mark.slow  # a notebook kernel: not in make test-fast
def test_a_chapter_is_cached_with_the_outputs_a_notebook_run_stores(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("print('a')\nprint('b')"),
        nbformat.v4.new_markdown_cell("text"),
        nbformat.v4.new_code_cell(
            "from IPython.display import display\n"
            "print('before')\ndisplay('shown')\nprint('after')\n6 * 7"
        ),
    ]
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nb, path)
    status, tests, executed = execute_chapter(path, tmp_path)
    assert status == 0 and all(v is None for v in tests.values()), tests
    first, second = executed["cells"]  # the cache keeps the code cells
    assert [c["execution_count"] for c in (first, second)] == [1, 2]
    texts = [o.get("text") for o in first["outputs"]]
    assert "".join(texts) == "a\nb\n"
    # in the order they were published (nbval's own record merges the streams)
    kinds = [o.get("name", o["output_type"]) for o in second["outputs"]]
    assert kinds == ["stdout", "display_data", "stdout", "execute_result"], kinds
    assert second["outputs"][-1]["execution_count"] == 2
    assert second["outputs"][-1]["data"]["text/plain"] == "42"
