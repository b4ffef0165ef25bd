"""The environments the book runs in besides this machine, checked from their files:
each chapter installs the library when it is missing (Colab), Binder's requirements,
and the Pages workflow is the same ``make book``.
"""

from __future__ import annotations

import json
import re

import yaml
from built_site import BOOK, ROOT, _notebook_sources


def test_notebooks_install_the_library_when_missing():
    """In Colab (no transformer_lib), each chapter's first code cell installs the
    library from the repository."""
    repo = yaml.safe_load((BOOK / "_config.yml").read_text())["repository"][
        "url"
    ].rstrip("/")
    for path in _notebook_sources():
        nb = json.loads(path.read_text(encoding="utf-8"))
        code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
        text = "".join("".join(c["source"]) for c in nb["cells"])
        if not code or "transformer_lib" not in text or "PLACEHOLDER" in text:
            # a page that does not use the library (or is not written yet)
            continue
        first = code[0]
        assert (
            "except ImportError" in first
            and "%pip install" in first
            and f"git+{repo}" in first
        ), (
            f"{path.name}: first code cell does not install transformer_lib"
            " when it is missing"
        )


def test_binder_environment():
    """Binder builds binder/requirements.txt from the repository root: CPU torch, the
    notebooks' needs, the library."""
    lines = [
        ln.split("#")[0].strip()
        for ln in (ROOT / "binder" / "requirements.txt").read_text().splitlines()
        if ln.split("#")[0].strip()
    ]
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in lines
    assert any(re.fullmatch(r"torch==[\d.]+\+cpu", ln) for ln in lines), lines
    for pkg in ("numpy", "matplotlib", "ipywidgets"):
        assert any(ln.startswith(pkg) for ln in lines), (
            f"binder/requirements.txt lacks {pkg}"
        )
    assert "-e ." in lines, (
        "binder/requirements.txt must install the repository's own library"
    )
    runtime = (ROOT / "binder" / "runtime.txt").read_text().strip()
    assert re.fullmatch(r"python-3\.\d+", runtime), runtime


def test_deploy_workflow_is_the_same_build():
    """The Pages workflow runs `make book` and publishes _build/html."""
    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "deploy.yml").read_text())
    steps = [s for job in wf["jobs"].values() for s in job.get("steps", [])]
    runs = " ".join(s.get("run", "") for s in steps)
    assert re.search(r"\bmake book\b", runs), runs
    uploads = [
        s
        for s in steps
        if str(s.get("uses", "")).startswith("actions/upload-pages-artifact")
    ]
    assert uploads and uploads[0]["with"]["path"] == "_build/html"
    assert any(str(s.get("uses", "")).startswith("actions/deploy-pages") for s in steps)
    triggers = wf.get("on", wf.get(True))  # YAML 1.1 reads a bare `on:` key as True
    assert "push" in triggers and "workflow_dispatch" in triggers
    assert (
        wf["permissions"]["pages"] == "write"
        and wf["permissions"]["id-token"] == "write"
    )
