"""Locust wiring of the ramp engine: options, the engines per process role, messages, gates.

A locustfile that imports ``ramplab.plugin`` parts gets these hooks; the streaming user's own
hooks (``ramplab.plugin.hooks``) are registered first, so the summary they write at the end
(this engine's figures and gate verdicts, from ``MasterEngine.summary``) exists when the exit
code is taken from it.
"""

from __future__ import annotations

import logging
import random
import sys
import time
from typing import Any

from locust import events
from locust.runners import LocalRunner, MasterRunner, WorkerRunner

from ramplab.errors import UsageError
from ramplab.exitcodes import ExitCode, exit_code
from ramplab.load.plan import PLAN_MESSAGE, PROGRESS_MESSAGE, Plan
from ramplab.options import run as run_options
from ramplab.plugin import hooks as user_hooks
from ramplab.plugin.default_args import cache_default_args
from ramplab.plugin.master import MasterEngine
from ramplab.plugin.worker import WorkerEngine
from ramplab.results.slo import print_gates
from ramplab.retry.config import RetrySetup

_workers: dict[int, WorkerEngine] = {}
_masters: dict[int, MasterEngine] = {}


def worker_for(environment: Any) -> WorkerEngine | None:
    return _workers.get(id(environment))


def master_for(environment: Any) -> MasterEngine | None:
    return _masters.get(id(environment))


def _on_parser(parser: Any, **_: Any) -> None:
    run_options.register(parser)


def _on_init(environment: Any, **_: Any) -> None:
    # httpx logs every request at INFO, which Locust's root logger shows and a worker forwards to
    # its master: at 300 QPS that is a large share of the generator's CPU, for nothing.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    parsed = environment.parsed_options
    if parsed is None:
        return
    try:
        opts = run_options.from_options(parsed)
        if opts.shape is None:
            raise UsageError("--ramplab-shape", "a ramp run needs a shape, e.g. '1,2,5@20s/5s'")
    except UsageError as exc:
        user_hooks.fail(str(exc))
        return
    runner = environment.runner
    worker_id = str(runner.client_id) if isinstance(runner, WorkerRunner) else "local"
    environment._ramplab_slo = opts.slo
    if isinstance(runner, (WorkerRunner, LocalRunner)):
        engine = WorkerEngine(runner, worker_id)
        _workers[id(environment)] = engine
        if opts.retry is not None:
            rng = random.Random(f"{opts.seed}/{worker_id}")
            environment._ramplab_retry = RetrySetup(opts.retry, time.monotonic, rng)
        runner.register_message(
            PLAN_MESSAGE, lambda environment, msg, **_: engine.on_plan(Plan.from_message(msg.data))
        )
    if isinstance(runner, (MasterRunner, LocalRunner)):
        master = MasterEngine(runner, opts, "local" if isinstance(runner, LocalRunner) else None)
        _masters[id(environment)] = master
        runner.register_message(
            PROGRESS_MESSAGE, lambda environment, msg, **_: master.on_progress(msg.data)
        )
        user_hooks.summary_providers[id(environment)] = master.summary


def _on_test_stop(environment: Any, **_: Any) -> None:
    engine = worker_for(environment)
    if engine is not None:
        engine.stop()


def _on_quitting(environment: Any, **_: Any) -> None:
    master = master_for(environment)
    if master is None:
        return
    summary = user_hooks.last_summary.get(id(environment))
    if master.outage_error is not None:
        sys.stderr.write(f"ramplab: {master.outage_error}\n")
    elif summary is None:
        return  # no --results-dir: nothing was summarised, Locust's own exit code stands
    elif summary.requests == 0:
        sys.stderr.write("ramplab: the run produced no request records\n")
    elif summary.gates:
        print_gates(summary.gates)
    code = exit_code(
        summary,
        usage_error=master.outage_exit == ExitCode.USAGE,
        run_failed=master.outage_exit == ExitCode.RUN_FAILED,
    )
    environment.process_exit_code = int(code)


cache_default_args()
_events: Any = events
_events.init_command_line_parser.add_listener(_on_parser)
_events.init.add_listener(_on_init)
_events.test_stop.add_listener(_on_test_stop)
_events.quitting.add_listener(_on_quitting)
