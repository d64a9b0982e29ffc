"""Warm capacity (docs/capacity.md)."""
