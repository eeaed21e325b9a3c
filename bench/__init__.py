"""Benchmarks behind ``make bench``; each module measures against a baseline in the same run."""
