"""Open-loop arrival rates on Locust's master/worker mode (and closed-loop steps for comparison).

Locust's own shapes set a number of users, not a rate, and its pacing waits are per user, so a
slow server slows the load down (coordinated omission). Here the master owns one global schedule
of arrival times, reproducible from a seed; every worker rebuilds it and paces its deterministic
share against absolute due times, handing each arrival to a free user or counting it as dropped.

    plan.py      the run plan the master broadcasts (start time, shape, arrivals, worker epochs)
    options.py   the ``--ramplab-*`` command-line options
    dispatch.py  the hand-off of arrivals to idle users on one worker
    worker.py    a worker's pacer, its progress reports
    master.py    plan, re-split on membership changes, user sizing, summary, SLO gates
    shape.py     the ``LoadTestShape`` the locustfile exposes
    user.py      ``RampUser``: an ``LLMStreamUser`` that takes its requests from the pacer
    outage.py    an outage window set on the reference target at run offsets; recovery time
    default_args.py  a fix of a Locust worker stall at every user-count change
"""
