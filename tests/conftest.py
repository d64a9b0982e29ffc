"""Shared pytest configuration for every test tier."""

from __future__ import annotations
