"""Flaketally: tells flaky test failures from real ones, with evidence and cost."""

__version__ = "0.1.0"
