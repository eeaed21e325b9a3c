"""``python -m bench.engine install|model|serve|stop|status|study``: the real engine by hand.

``serve`` leaves vLLM running in the background (its own session) and writes where it runs into
the cache (``serve.json``); ``stop`` ends it, its whole process group. ``serve --foreground``
serves until Ctrl-C instead. Every failure prints one ``engine: …`` message: a refusal before
anything ran (``EngineRefused``: CPU, memory, disk, port, no wheel) exits 2, any other failure 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from pathlib import Path

from bench.engine import install, model, server, study
from bench.engine.errors import EngineError, EngineRefused


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engine", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("install", help="build vLLM's venv (cached)")
    made = commands.add_parser("model", help="make the tiny model and tokenizer (cached)")
    made.add_argument("--seed", type=int, default=0)
    serve = commands.add_parser("serve", help="start vLLM on 127.0.0.1 and wait until it answers")
    serve.add_argument("--seed", type=int, default=0, help="the model's seed")
    serve.add_argument("--port", type=int, default=0, help="0: any free port")
    serve.add_argument("--kv-cache-mib", type=int, default=server.Settings.kv_cache_bytes >> 20)
    serve.add_argument("--max-num-seqs", type=int, default=server.Settings.max_num_seqs)
    serve.add_argument("--max-model-len", type=int, default=server.Settings.max_model_len)
    serve.add_argument(
        "--compile", action="store_true", help="torch.compile (minutes longer to start)"
    )
    serve.add_argument("--foreground", action="store_true", help="serve until Ctrl-C")
    serve.add_argument("extra", nargs="*", help="more api_server arguments, after --")
    commands.add_parser("stop", help="stop the vLLM that `serve` started")
    commands.add_parser("status", help="where the vLLM that `serve` started runs, if it does")
    study_parser = commands.add_parser(
        "study", help="the study's sections on vLLM (docs/study.md; its own servers)"
    )
    study_parser.add_argument("parts", nargs="*", help=f"of {list(study.PARTS)} (default: all)")
    study_parser.add_argument("--out", type=Path, default=Path("results/engine-study"))
    study_parser.add_argument(
        "--findings-only", action="store_true", help="recompute OUT/PART/PART.md from its runs"
    )
    arguments = parser.parse_args(argv)
    try:
        return _run(arguments)
    except EngineError as failed:
        print(f"engine: {failed}", file=sys.stderr)
        return 2 if isinstance(failed, EngineRefused) else 1


def _run(arguments: argparse.Namespace) -> int:
    if arguments.command == "install":
        python = install.ensure(_logs() / "install.log")
        print(python)
    elif arguments.command == "model":
        made = model.ensure(arguments.seed)
        how = f"built in {made.built_s:.1f} s" if made.built_s else "cached"
        print(f"{made.path} ({how}, {model.parameters():,} parameters)")
    elif arguments.command == "serve":
        return _serve(arguments)
    elif arguments.command == "stop":
        _stop()
    elif arguments.command == "study":
        if arguments.findings_only:
            return study.refind(arguments.parts, arguments.out)
        return study.main(arguments.parts, arguments.out)
    else:
        state = _alive_state()
        print(json.dumps(state, indent=1) if state else "not serving")
    return 0


def _serve(arguments: argparse.Namespace) -> int:
    running = _alive_state()
    if running is not None:
        raise EngineError(f"already serving at {running['url']}: python -m bench.engine stop first")
    settings = server.Settings(
        enforce_eager=not arguments.compile,
        kv_cache_bytes=arguments.kv_cache_mib << 20,
        max_model_len=arguments.max_model_len,
        max_num_seqs=arguments.max_num_seqs,
        extra=tuple(arguments.extra),
    )
    server.preflight(settings, arguments.port or None)  # before seconds of building the model
    made = model.ensure(arguments.seed)
    log = _logs() / f"serve-{time.strftime('%Y%m%dT%H%M%S')}.log"
    engine = server.start(made, settings, log=log, port=arguments.port)
    state = {"pid": engine.pid, "url": engine.url, "model": made.name, "log": str(log)}
    print(f"{engine.url}/v1 serves {made.name} (ready in {engine.ready_s:.1f} s, "
          f"{engine.memory_bytes() / server.GiB:.2f} GiB PSS)")  # fmt: skip
    if not arguments.foreground:
        _state_file().write_text(json.dumps(state) + "\n")
        print("stop it with: python -m bench.engine stop")
        return 0
    try:
        while engine.process.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        engine.stop()
    return 0


def _stop() -> None:
    state = _alive_state()
    if state is None:
        print("not serving")
        return
    server.stop_group(int(state["pid"]))
    _state_file().unlink(missing_ok=True)
    print(f"stopped the vLLM at {state['url']}")


def _alive_state() -> dict[str, str | int] | None:
    """serve.json when the process it names still runs vLLM (a pid can be reused)."""
    path = _state_file()
    if not path.exists():
        return None
    state: dict[str, str | int] = json.loads(path.read_text())
    with contextlib.suppress(OSError):
        command = Path(f"/proc/{state['pid']}/cmdline").read_bytes()
        if b"vllm.entrypoints" in command and os.getpgid(int(state["pid"])) == state["pid"]:
            return state
    path.unlink(missing_ok=True)
    return None


def _state_file() -> Path:
    return model.cache_root() / "serve.json"


def _logs() -> Path:
    logs = model.cache_root() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    return logs


if __name__ == "__main__":
    sys.exit(main())
