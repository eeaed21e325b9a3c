"""The Locust plugin: the only package of ramplab that imports ``locust`` or ``gevent``.

Everything here runs inside a gevent-patched Locust process (master, worker or local). The code it
drives is plain Python: what a request measures (``ramplab.measure``), when arrivals are due
(``ramplab.load``), how results are summarised (``ramplab.results``) and exported
(``ramplab.metrics``).

Open-loop arrival rates on Locust's master/worker mode (and closed-loop steps for comparison):
Locust's own shapes set a number of users, not a rate, and its pacing waits are per user, so a
slow server slows the load down (coordinated omission). Here the master owns one global schedule
of arrival times, reproducible from a seed; every worker rebuilds it and paces its deterministic
share against absolute due times, handing each arrival to a free user or counting it as dropped.

    plugin.py        ``RamplabPlugin``: one per Locust environment, owns every part below and
                     adds its listeners in one written order; ``install``/``register``
    users.py         ``LLMStreamUser``: one measured streaming request per task
    ramp_user.py     ``RampUser``: an ``LLMStreamUser`` that takes its requests from the pacer
    shape.py         the ``LoadTestShape`` the ramp locustfile exposes
    master.py        plan, re-split on membership changes, user sizing, summary
    worker.py        a worker's pacer, its progress reports
    dispatch.py      the hand-off of arrivals to idle users on one worker
    forwarder.py     records from the workers to the master's journal
    exporters.py     what a process serves on ``/metrics``, polled from the engines
    progress.py      the master's progress file for the CLI
    role.py          local, master or worker: what a process does in a run
    default_args.py  a fix of a Locust worker stall at every user-count change

Importing ``users.py`` (or the ramp classes) calls ``plugin.install()``: the only listeners on
Locust's global events, the options and ``init``; nothing else here registers on import.
"""
