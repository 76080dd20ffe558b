"""On-demand benchmarks (never part of the test suite). Run from the repository root: ``python -m bench.NAME``."""
