"""pytest configuration for the whole repository.

When nbval runs a chapter (``make test-notebooks``), every exercise solution of that
chapter runs after it, in the same kernel: see tests/test_solutions.py.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))

from test_solutions import pytest_collection_modifyitems  # noqa: E402, F401
