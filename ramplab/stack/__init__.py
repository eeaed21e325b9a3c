"""The local stack: the reference target, a Locust master and N workers as local processes.

    process.py    one child process: its own process group, its log file, a clean stop
    readiness.py  what "up" means for each kind of process (HTTP 200, a log line, a port)
    local.py      ``LocalStack``: start in order, wait until healthy, watch, stop everything
    progress.py   the run's progress as the CLI shows it (master snapshot + records so far)
    reporter.py   the Locust side of progress: the master writes ``progress.json`` (imports Locust)
    run.py        one campaign run end to end: run directory, stack, progress, summary, exit code

Nothing here imports Locust except ``reporter.py``: the CLI process must not be gevent-patched.
"""
