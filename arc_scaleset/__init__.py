"""arc-scaleset: GitHub Actions Runner Controller (runner scale sets) in Python."""

__version__ = "0.1.0"
