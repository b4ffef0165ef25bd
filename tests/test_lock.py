"""requirements.lock is requirements.txt compiled (``make lock``): every package the
book, the tests and the build's workarounds load, at an exact version with its hashes,
which ``make setup`` installs (``pip install --require-hashes``)."""

from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][\w.-]*)==(\S+)")


def requirements() -> list[Requirement]:
    """requirements.txt's packages (its ``-e .`` is the book's own)."""
    out = []
    for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            out.append(Requirement(line))
    return out


def lock() -> dict[str, tuple[str, list[str]]]:
    """{package: (version, [hashes])} of requirements.lock."""
    pins: dict[str, tuple[str, list[str]]] = {}
    current = None
    for line in (ROOT / "requirements.lock").read_text(encoding="utf-8").splitlines():
        match = PIN.match(line)
        if match:
            current = canonicalize_name(match.group(1))
            pins[current] = (match.group(2), [])
        elif current and line.strip().startswith("--hash=sha256:"):
            pins[current][1].append(line.strip().split(":", 1)[1].rstrip(" \\"))
    return pins


def test_every_requirement_is_pinned_at_a_version_it_allows():
    pins = lock()
    for req in requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in requirements.lock: run make lock"
        version = pins[name][0]
        assert req.specifier.contains(Version(version), prereleases=True), (
            f"requirements.lock pins {req.name}=={version}, which requirements.txt's"
            f" {req} does not allow: run make lock"
        )


def test_every_pin_is_exact_and_hashed():
    pins = lock()
    assert len(pins) > 100, len(pins)
    for name, (_, hashes) in pins.items():
        assert hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), name
    # torch: the CPU build on the machines' wheel directory, exactly
    assert pins["torch"][0] == "2.13.0+cpu"


def test_the_environment_is_the_lock():
    """What runs the tests is what the lock pins (make setup reinstalls it when the
    lock changes)."""
    different = {
        name: (version, importlib.metadata.version(name))
        for name, (version, _) in lock().items()
        if importlib.metadata.version(name) != version
    }
    assert not different, different
