"""Two Locust environments in one process, each with its own ramplab plugin.

``python -m tests.ramplab.plugin.plugin_probe OUT_DIR`` builds them the way Locust's ``main``
does (options parsed by Locust's parser, one runner each), drives their events by hand and prints
one JSON object of what it saw, for ``test_plugin_object.py``. A subprocess because importing
Locust monkey-patches the interpreter with gevent.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import locust
from locust.argument_parser import parse_options
from locust.env import Environment
from locust.event import Events

from ramplab.measure.record import RequestRecord
from ramplab.plugin.plugin import plugin_of, register
from ramplab.plugin.users import LLMStreamUser
from tests.support.records import record_count

HOST = "http://127.0.0.1:9"  # never connected to: --model is given, so nothing asks the target


def environment(out: Path, *extra: str) -> Environment:
    parsed = parse_options(["-f", "locustfiles/llm_stream.py", "--host", HOST, "--model", "m",
                            "--results-dir", str(out), *extra])  # fmt: skip
    env = Environment(
        user_classes=[LLMStreamUser], events=Events(), host=parsed.host, parsed_options=parsed
    )
    env.create_local_runner()
    return env


def record(n: int) -> RequestRecord:
    now = time.time()
    return RequestRecord(request_id=f"r{n}", worker="probe", intended_start=now,
                         actual_start=now, ok=True, status=200, error_kind=None, total_ms=5.0,
                         ttft_ms=1.0, ttlt_ms=4.0, itl_ms=[1.0], output_tokens=2)  # fmt: skip


def written(run_dir: Path) -> int:
    return record_count(run_dir)


def names(hook: Any) -> list[str]:
    return [getattr(h, "__qualname__", repr(h)) for h in hook._handlers]


def main(out: Path) -> dict[str, Any]:
    a = environment(out / "a", "--headless")
    b = environment(out / "b")  # the web UI's kind of run: not headless
    pa, pb = register(a), register(b)
    seen: dict[str, Any] = {
        "distinct_plugins": pa is not pb,
        "registered_once": register(a) is pa and plugin_of(a) is pa and plugin_of(b) is pb,
        "distinct_writers": pa.writer is not None
        and pb.writer is not None
        and pa.writer is not pb.writer,
    }
    ca, cb = pa.context(), pb.context()
    seen["distinct_contexts"] = ca is not cb and pa.context() is ca
    seen["context_is_the_plugins"] = LLMStreamUser(a).shared is ca
    ca.emit(record(1))
    ca.emit(record(2))
    cb.emit(record(3))
    # What the plugin's half-second flush does (its greenlet does not run: no event loop here).
    for plugin in (pa, pb):
        assert plugin.writer is not None
        plugin.writer.flush()
    seen["records"] = {"a": written(out / "a"), "b": written(out / "b")}
    seen["listeners"] = {
        event: {"a": names(getattr(a.events, event)), "b": names(getattr(b.events, event))}
        for event in ("test_start", "test_stop", "quitting", "quit")
    }
    seen["global_listeners"] = {
        event: [
            f"{h.__module__}.{h.__qualname__}"
            for h in getattr(locust.events, event)._handlers
            if h.__module__.startswith("ramplab")
        ]
        for event in (
            "init_command_line_parser",
            "init",
            "test_start",
            "test_stop",
            "quitting",
            "quit",
            "request",
        )
    }

    # Headless (a): the end of the test writes nothing; quitting writes the summary, once.
    a.events.test_stop.fire(environment=a)
    seen["a_summary_after_test_stop"] = (out / "a" / "summary.json").exists()
    a.events.quitting.fire(environment=a, reverse=True)
    summary_a = out / "a" / "summary.json"
    seen["a_summary_requests"] = json.loads(summary_a.read_text())["requests"]
    seen["b_summary_after_a_quit"] = (out / "b" / "summary.json").exists()

    # Web UI (b): a stop ends a run and writes its summary; quitting with nothing new does not
    # write again (the file removed here stays removed); a record after the stop is written.
    summary_b = out / "b" / "summary.json"
    b.events.test_stop.fire(environment=b)
    seen["b_summary_after_stop"] = json.loads(summary_b.read_text())["requests"]
    summary_b.unlink()
    b.events.quitting.fire(environment=b, reverse=True)
    seen["b_rewritten_with_nothing_new"] = summary_b.exists()
    return seen


def late_record(out: Path) -> dict[str, Any]:
    """Web UI: records that arrive after the stop make quitting write the summary again."""
    c = environment(out / "c")
    pc = register(c)
    context = pc.context()
    context.emit(record(1))
    c.events.test_stop.fire(environment=c)
    context.emit(record(2))
    c.events.quitting.fire(environment=c, reverse=True)
    return {"c_summary_requests": json.loads((out / "c" / "summary.json").read_text())["requests"]}


if __name__ == "__main__":
    target = Path(sys.argv[1])
    print(json.dumps({**main(target), **late_record(target)}))
