"""Experiments built from runs: the max-rate search under SLO (``search.py`` and its parts)."""
