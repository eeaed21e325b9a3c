"""The one wrapper for every process a test starts: the target, Locust masters and workers,
Prometheus, the ``ramplab`` CLI.

One way to do each step: ``start`` puts the process in its own process group with its output in
a log file; ``ready`` polls a health URL until a deadline (and gives up at once when the process
dies); ``stop`` sends SIGTERM to the whole group and SIGKILL to whatever is left after a grace
period, so nothing a test started — nor anything that started — outlives the test. ``stop_all``
does the same for several processes side by side.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

import httpx

from target_service.embedded_redis import free_port

REPO = Path(__file__).resolve().parents[2]
GRACE_S = 15.0
POLL_S = 0.05


def poll_until(
    predicate: Callable[[], bool],
    timeout_s: float,
    what: str,
    alive: Callable[[], bool] | None = None,
) -> None:
    """Return once ``predicate()`` holds; TimeoutError after ``timeout_s``, RuntimeError as soon
    as ``alive()`` says the process it waits on is gone."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if alive is not None and not alive():
            raise RuntimeError(f"the process exited before {what}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s} s")
        time.sleep(POLL_S)


def http_ok(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


class Process:
    """A command run as a process-group leader, its stdout and stderr in ``log_path``.

    ``stderr_path`` keeps stderr apart (the CLI's tests read the two streams separately).
    """

    def __init__(
        self,
        args: Sequence[str],
        log_path: Path | None = None,
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path = REPO,
        ready_url: str | None = None,
        stderr_path: Path | None = None,
        grace_s: float = GRACE_S,
    ) -> None:
        self.args = list(args)
        self.log_path = log_path
        self.stderr_path = stderr_path
        self.env = {**os.environ, **(env or {})}
        self.cwd = cwd
        self.ready_url = ready_url
        self.grace_s = grace_s
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.popen is not None, "not started"
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self, timeout_s: float = 30.0) -> Process:
        """Spawn, then wait for ``ready_url`` (when set) to answer 200 within ``timeout_s``."""
        out: IO[bytes] | int = subprocess.DEVNULL
        err: IO[bytes] | int = subprocess.STDOUT
        handles: list[IO[bytes]] = []
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            out = self.log_path.open("wb")
            handles.append(out)
        if self.stderr_path is not None:
            err = self.stderr_path.open("wb")
            handles.append(err)
        try:
            self.popen = subprocess.Popen(
                self.args, cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                stderr=err, start_new_session=True,
            )  # fmt: skip
        finally:
            for handle in handles:
                handle.close()  # the child holds its own descriptors
        if self.ready_url is not None:
            try:
                self.wait_ready(timeout_s)
            except BaseException:
                self.stop()  # __exit__ does not run when __enter__ raises: no orphan
                raise
        return self

    def wait_ready(self, timeout_s: float) -> None:
        assert self.ready_url is not None
        url = self.ready_url
        try:
            poll_until(lambda: http_ok(url), timeout_s, f"{url} answered 200", self.running)
        except (TimeoutError, RuntimeError) as exc:
            raise type(exc)(f"{exc} ({self.args[:4]}…)\n{self.log()[-3000:]}") from None

    def wait(self, timeout_s: float) -> int:
        """The exit code; TimeoutError (the process keeps running) after ``timeout_s``."""
        assert self.popen is not None, "not started"
        try:
            return self.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"{self.args[:4]}… still running after {timeout_s} s") from None

    def signal(self, signum: int, *, group: bool = True) -> None:
        """Send ``signum`` to the process group, or with ``group=False`` to the leader only."""
        if self.running():
            if group:
                os.killpg(self.pid, signum)
            else:
                os.kill(self.pid, signum)

    def log(self) -> str:
        path = self.log_path
        return path.read_text(errors="replace") if path is not None and path.exists() else ""

    def stop(self, grace_s: float | None = None) -> int | None:
        """SIGTERM the group, SIGKILL it after the grace period; the exit code of the leader."""
        if self.popen is None:
            return None
        stop_all([self], grace_s)
        return self.popen.returncode

    def __enter__(self) -> Process:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def reap(proc: subprocess.Popen[str]) -> None:
    """Kill ``proc``'s process group if it still runs, wait for it and close its pipes.

    For the tests that start a CLI with ``Popen(stdout=PIPE)`` themselves: when an assertion
    fails before ``communicate()``, the pipes would otherwise be closed by the garbage collector
    later, and the ``ResourceWarning`` fails whichever test runs then (``filterwarnings = error``).
    """
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def group_gone(pid: int) -> bool:
    """True when no process of the group led by ``pid`` is left."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


def stop_all(processes: Iterable[Process], grace_s: float | None = None) -> None:
    """Stop several processes side by side: every group is signalled before any is waited for.

    A leader that exited on its own may leave children in its group; those are ended too.
    """
    started = [p for p in processes if p.popen is not None]
    for process in started:
        if not group_gone(process.pid):
            os.killpg(process.pid, signal.SIGTERM)
    for process in started:
        assert process.popen is not None
        grace = process.grace_s if grace_s is None else grace_s
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.popen.wait(timeout=grace)
        deadline = time.monotonic() + grace
        while not group_gone(process.pid) and time.monotonic() < deadline:
            time.sleep(POLL_S)  # children of the group finishing their own shutdown
        if not group_gone(process.pid):
            os.killpg(process.pid, signal.SIGKILL)
        process.popen.wait()


def python(*args: str) -> list[str]:
    """A command line running this interpreter (the test's venv)."""
    return [sys.executable, *args]


def run_under_gevent(code: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter monkey-patched first, as a Locust process is; its output
    captured (``check`` is the caller's)."""
    return subprocess.run(
        python("-c", f"import gevent.monkey; gevent.monkey.patch_all()\n{code}"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


class TargetProcess(Process):
    """``python -m target_service`` as a subprocess; settings through ``APP_*`` variables."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        workers: int = 1,
        port: int | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.port = port or free_port()
        self.workers = workers
        super().__init__(
            python("-m", "target_service", "--host", "127.0.0.1", "--port", str(self.port),
                   "--workers", str(workers)),
            log_path,
            env={"APP_CONFIG_FILE": str(REPO / "configs" / "app.toml"), **(env or {})},
            ready_url=f"http://127.0.0.1:{self.port}/healthz",
        )  # fmt: skip

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def process(self) -> subprocess.Popen[bytes] | None:
        """The running process (``None`` once stopped), for tests that signal the pid itself."""
        return self.popen if self.running() else None

    def start(self, timeout_s: float = 30.0) -> TargetProcess:
        super().start(timeout_s)
        return self

    def __enter__(self) -> TargetProcess:
        return self.start()


def wait_http_ok(url: str, timeout_s: float = 20.0, process: Process | None = None) -> None:
    """Poll ``url`` until it answers 200; give up at once when ``process`` has died."""
    alive = None if process is None else process.running
    poll_until(lambda: http_ok(url), timeout_s, f"{url} answered 200", alive)


def stop_groups(processes: Sequence[Process], grace_s: float = GRACE_S) -> None:
    """``stop_all`` under its old name, for callers that still use it."""
    stop_all(processes, grace_s)


def log_tail(processes: Mapping[str, Process], chars: int = 3000) -> str:
    return "\n".join(f"--- {name}\n{p.log()[-chars:]}" for name, p in processes.items())
