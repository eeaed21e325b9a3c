"""What a run measured: records on disk, the typed summary, its gates and the report.

``writer`` appends ``requests.jsonl``; ``steps`` defines the per-step figures; ``producer``
turns records plus the run's facts into a ``summary.RunSummary`` (the one place a summary is
built); ``slo`` holds per-request SLOs and the gates the producer evaluates; ``report`` and
``htmlreport`` render a run directory.
"""
