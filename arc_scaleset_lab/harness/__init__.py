"""Helpers shared by the test suites, the benchmarks and the demo (never imported by the operator)."""
