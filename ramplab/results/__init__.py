"""What a run measured: records on disk, the typed summary, its gates and the report.

``writer`` appends the records' journal; ``steps`` defines the per-step figures; ``producer``
turns records plus the run's facts into a ``summary.RunSummary`` (the one place a summary is
built); ``slo`` holds per-request SLOs and the gates the producer evaluates. ``report``
renders a run directory: ``digest`` reads the records once for what the summary does
not hold, ``breakdown`` joins client and server phases, ``recommend`` applies the rules,
``tables``, ``mdreport``, ``htmlreport`` and ``charts`` (the public charting API, runs
overlaid) draw it; ``offered`` is the x-axis they share.
"""
