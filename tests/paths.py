"""Where the checkout under test is: the one place that knows how ``tests/`` sits in the repository.

Tests that read the repository's own files (pyproject.toml, the CRDs, the charts, the dashboards, the README)
build their paths from :data:`REPO_ROOT`, so moving a test file never changes what it reads.
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
"""The repository root: the directory holding pyproject.toml and ``tests/``."""
