"""The gate: pins, verdicts and the session's `Outcome`. Pure logic, no JAX, no pytest hooks.

PYTEST_DONT_REWRITE
"""
