"""Experiments built from runs: a campaign's variants run interleaved under one directory, their
comparison, and the max-rate search under SLO.

::

    matrix.py    a campaign's ``matrix``/``variants``/``repeat`` expanded, each variant validated
    order.py     the interleaved run order (repeat blocks; shuffled, abba or fixed inside)
    manifest.py  ``experiment.json``, rewritten atomically after every run
    runner.py    the runs, one ``ramplab.stack.run.execute`` each, then the comparison
    sources.py   run and experiment directories as groups of runs (the one summary reader)
    compare.py   the per-step comparison with its noise: ``comparison.json``'s typed form
    expr.py      ``--fail-if`` conditions
    render.py    the comparison as a terminal table, ``comparison.md`` and ``comparison.json``
    recommendations.py  each variant's recommendations: the runs' rules merged over repeats
    overview.py  what the experiment's report shows, gathered once; its shared tables
    mdreport.py  the experiment's ``report.md``
    htmlreport.py  the experiment's ``report.html``: every run overlaid in the report's charts
    report.py    ``conclude`` (comparison, study, report) and ``ramplab report EXPERIMENT_DIR``
    search.py        the max-rate search under SLO: its settings and the probe sequence
    search_run.py    ``ramplab search``: probes chosen, run, judged, recorded in ``search.json``
    probe.py         one probe: a run at one constant rate against a target that stays up
    watch.py         a running probe stopped as soon as it cannot pass
    verdict.py       a probe judged: windows, attainment and its interval, the reason
    confidence.py    Wilson and t intervals
    cpu.py           the generator's own CPU per worker, from /proc
    search_table.py  ``search.json`` shown: the probe table and the answer

Nothing is imported here: ``ramplab.campaign.schema`` imports ``search.py`` for the campaign's
``search:`` section, and the comparison side imports ``stack``; importing the package must not
pull the one into the other.

The layer sits beside ``ramplab.stack`` in the CLI process: it runs campaigns only through
``execute(RunRequest(...))`` and reads results only through ``sources.read_summary``.
"""
