"""Outputs: each renders an `Outcome` (terminal, JSON report, JUnit, GitHub, dashboard)."""
