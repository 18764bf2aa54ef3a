"""The results corpus: records written per session, read back, judged offline, migrated.

PYTEST_DONT_REWRITE
"""
