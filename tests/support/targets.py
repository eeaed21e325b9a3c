"""Targets for the tests: one shared subprocess per session, reset between tests, and the real
app served by uvicorn in a thread of the test process.

Sharing: starting a target process costs a second or two of CPU on a 2-core machine, and the ramp,
retry and gate tests all want the same one. What they differ in — faults, latency model, signing
mode, rate limits — the admin API changes at run time, so ``SharedTarget.reset`` puts every such
section back to what the target started with (plus the caller's patch) before each test.
"""

from __future__ import annotations

import asyncio
import copy
import faulthandler
import sys
import threading
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import httpx
import uvicorn

from target_service.app import create_app
from target_service.settings import Settings, load_settings
from target_service.shutdown import awaiting
from tests.support.processes import TargetProcess

ADMIN_TOKEN = "ramplab-tests-admin"
Sections = Mapping[str, Mapping[str, Any]]


class SharedTarget:
    """A running target with an admin token, and what its admin sections were at start-up."""

    def __init__(self, target: TargetProcess, token: str = ADMIN_TOKEN) -> None:
        self.target = target
        self._headers = {"authorization": f"Bearer {token}"}
        self.baseline: dict[str, dict[str, Any]] = self.config()

    @property
    def url(self) -> str:
        return self.target.url

    def config(self) -> dict[str, dict[str, Any]]:
        response = httpx.get(self.url + "/admin/config", headers=self._headers, timeout=10.0)
        assert response.status_code == 200, response.text
        data: dict[str, dict[str, Any]] = response.json()["config"]
        return data

    def configure(self, sections: Sections) -> None:
        response = httpx.put(
            self.url + "/admin/config", json=sections, headers=self._headers, timeout=10.0
        )
        assert response.status_code == 200, response.text

    def reset(self, patch: Sections | None = None) -> TargetProcess:
        """Every admin section back to its start-up value, then ``patch`` on top (a fresh fault
        counter and outage clock come with it); the target, for the test to use."""
        assert self.target.running(), "the shared target died:\n" + self.target.log()[-3000:]
        sections = copy.deepcopy(self.baseline)
        for name, fields in (patch or {}).items():
            sections[name].update(fields)
        # Start-only fields are refused even when unchanged: send only what may change.
        sections["signing"].pop("threads", None)
        self.configure(sections)
        return self.target


def settings_from_env(env: Mapping[str, str]) -> Settings:
    """The settings a target process would build from ``APP_*`` variables ``env`` (on top of
    ``configs/app.toml``), built here without touching this process's environment."""
    overrides: dict[str, Any] = {}
    for name, value in env.items():
        *sections, key = name.removeprefix("APP_").lower().split("__")
        node = overrides
        for section in sections:
            node = node.setdefault(section, {})
        node[key] = value
    return load_settings(**overrides)


class ThreadTarget:
    """The real app (``create_app``) served by uvicorn on 127.0.0.1:0 in a thread of this process.

    For tests where a subprocess adds nothing: the same routes, middleware, Redis pool and
    lifespan, one event loop. Multi-process behaviour (workers, signals, the embedded Redis's
    lifetime) needs ``TargetProcess``.
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.app = create_app(settings)
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=0, log_level="warning", access_log=False,
            lifespan="on", timeout_graceful_shutdown=5,
        )  # fmt: skip
        self.server = uvicorn.Server(config)
        self.port = 0
        self._thread = threading.Thread(target=self._serve, name="thread-target", daemon=True)
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _serve_here(self) -> None:
        self._loop = asyncio.get_running_loop()
        await self.server.serve()

    def _serve(self) -> None:
        try:
            asyncio.run(self._serve_here())
        except BaseException as exc:  # reported by start()
            self._error = exc

    def start(self, timeout_s: float = 30.0) -> ThreadTarget:
        self._thread.start()
        deadline = threading.Event()
        for _ in range(int(timeout_s / 0.02)):
            if self.server.started or not self._thread.is_alive():
                break
            deadline.wait(0.02)
        if not self.server.started:
            self.stop()
            raise RuntimeError(f"the in-process target did not start: {self._error!r}")
        (server,) = self.server.servers
        self.port = server.sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        """Shut down as uvicorn does on SIGTERM; a shutdown still running after 30 s fails the
        test (it takes 0.1 s; the lifespan bounds its own clean-up at 5 s), naming the tasks of
        the app's loop and where each one waits."""
        self.server.should_exit = True
        self._thread.join(30)
        if not self._thread.is_alive():
            return
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        loop = getattr(self, "_loop", None)
        tasks = asyncio.all_tasks(loop) if loop is not None else set()
        stuck = "\n".join(f"  {task.get_name()}: {awaiting(task)}" for task in tasks)
        # uvicorn's force_exit stops waiting, as a second Ctrl-C does, so the thread can end.
        self.server.force_exit = True
        self._thread.join(10)
        raise AssertionError(f"the in-process target's shutdown hung for 30 s; tasks:\n{stuck}")

    def __enter__(self) -> ThreadTarget:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
