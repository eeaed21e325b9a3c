"""The source study's analyses (§4.1–§4.4 of ``shared/seed/DIGEST.md``), one module each.

An experiment campaign names its analysis with ``study: NAME``; after the runs (and on
``ramplab report EXPERIMENT_DIR``) the analysis turns the experiment's runs into the study's
table, chart and computed conclusion, written beside the comparison as ``study.json`` and
``study.md`` and shown in the experiment's report.

    result.py     ``StudyResult``: tables, charts, conclusions and the figures behind them
    registry.py   the analyses by name, and running one on an experiment directory

Each analysis is a function ``analyse(directory: Path, manifest: Manifest) -> StudyResult``
registered in ``registry.STUDIES``; it reads the runs through ``ramplab.experiment.sources``
and never starts anything.
"""
