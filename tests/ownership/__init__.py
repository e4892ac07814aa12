"""The author's replacements of every example (tests/test_ownership.py)."""
