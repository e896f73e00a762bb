"""The benchmark harness behind ``bench/evaluate.py``: sets, runners, classes, tables."""
