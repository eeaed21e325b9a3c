"""Workloads that look like production: datasets, shared prefixes, per-request output lengths.

``formats``  reading ShareGPT-style conversations, prompt JSONL and plain prompt files
``dataset``  counting, filtering and ordering a file's prompts by seed
``lengths``  each request's output length (``--output-lengths``)
``prefix``   N shared system prefixes of L tokens, M requests each, salted per run
``source``   what request ``i`` of a run asks for (one ``Workload`` per Locust process)
``inspect``  ``ramplab dataset inspect``: length histograms of a dataset file

The submodules are imported by name: ``ramplab.options.kinds`` checks option values with the
parsers here, and ``source`` reads the options' settings, so this package's root imports nothing.
See ``docs/workloads.md``.
"""
