"""Harnesses the tests and the benchmarks share (bench/ imports them too)."""
