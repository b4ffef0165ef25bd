"""The repository's address is written in one place, `_config.yml`; the chapters'
install cells follow it (booktools.repository), and a fork changes it with one command
(the deploy workflow runs the same command with the repository it runs in)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from booktools import repository

FORK = "https://github.com/someone/a-fork-of-the-book"


def test_every_chapter_installs_from_the_configured_repository():
    cells = repository.install_cells()
    assert len(cells) >= 18, f"only {len(cells)} chapters install the library"
    assert not repository.disagreements()


def test_the_address_is_written_nowhere_else():
    url = repository.repository_url()
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=repository.ROOT, capture_output=True, text=True
    ).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    elsewhere = [
        name
        for name in tracked
        if name != "_config.yml"
        and not name.endswith(".ipynb")
        and (repository.ROOT / name).is_file()
        and url in (repository.ROOT / name).read_text(encoding="utf-8", errors="ignore")
    ]
    assert not elsewhere, f"{url} is also written in {elsewhere}; read _config.yml"


def test_set_url_rewrites_the_config_and_every_install_cell(tmp_path):
    config = tmp_path / "_config.yml"
    shutil.copy(repository.CONFIG_FILE, config)
    book = tmp_path / "book"
    shutil.copytree(repository.BOOK, book, ignore=shutil.ignore_patterns("_*"))
    changed = repository.set_url(FORK + "/", config, book)
    assert repository.repository_url(config) == FORK
    assert not repository.disagreements(config, book)
    assert len(changed) == 1 + len(repository.install_cells(book))
    assert repository.set_url(FORK, config, book) == []  # a second run changes nothing
    cells = repository.install_cells(book)
    assert {found for _, found in cells.values()} == {FORK}


def test_a_wrong_address_is_refused_with_its_value(tmp_path):
    with pytest.raises(ValueError, match="not-an-address"):
        repository.set_url("not-an-address", tmp_path / "_config.yml", tmp_path)


def test_a_config_without_the_url_line_is_refused(tmp_path):
    config = tmp_path / "_config.yml"
    config.write_text("title: a book\nrepository:\n  branch: main\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no `url:`"):
        repository.repository_url(config)
    with pytest.raises(ValueError, match="no `url:` line"):
        repository.set_url(FORK, config, tmp_path)


def test_check_fails_when_a_chapter_disagrees(tmp_path, monkeypatch):
    config = tmp_path / "_config.yml"
    shutil.copy(repository.CONFIG_FILE, config)
    config.write_text(
        config.read_text(encoding="utf-8").replace(repository.repository_url(), FORK),
        encoding="utf-8",
    )
    problems = repository.disagreements(config, repository.BOOK)
    assert problems and all(FORK in p for p in problems)
    monkeypatch.setattr(repository, "CONFIG_FILE", config)
    assert repository.main(["--check"]) == 1


@pytest.mark.slow  # a Python process: not in make test-fast
def test_the_command_runs():
    out = subprocess.run(
        [sys.executable, "-m", "booktools.repository", "--check"],
        cwd=repository.ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
