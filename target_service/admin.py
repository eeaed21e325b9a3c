"""``GET/PUT /admin/config``: run-time changes to faults, signing, latency model and rate limits.

The routes exist only when ``APP_ADMIN_TOKEN`` is set, and answer only to
``Authorization: Bearer <token>`` (compared in constant time; the token is never logged).

A PUT carries any subset of the sections ``faults``, ``signing``, ``latency``, ``ratelimit``,
``prefix_cache``, ``reasoning``, each with any subset of its fields (a PUT of ``prefix_cache``,
even ``{}``, also empties the prefix cache of every process). The whole change is validated
before anything applies: each section is rebuilt from its current values plus the patch and
validated with the same models as the settings file, and one failure refuses everything with a
400 whose ``param`` names the field (``faults.ratio_429``). ``signing.threads`` sizes a thread
pool made at start and is refused.

Several worker processes: the PUT is answered by one process, so the change travels through
Redis. One Lua call increments ``<prefix>admin:version`` and stores ``<version>\\n<json>`` at
``<prefix>admin:config`` atomically (so two PUTs cannot interleave their version and body); every
process polls that key each ``admin_poll_s`` and applies a newer version, so all processes agree
within one poll period. A process that starts later applies the stored version too. A PUT while
Redis is down is refused with 503, so processes never diverge. Changing ``faults`` restarts the
fault counters and the outage clock on every process.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from target_service.errors import InvalidRequest, RedisUnavailable, Unauthorized
from target_service.runtime import Runtime

log = logging.getLogger("target_service.admin")
SECTIONS = ("faults", "signing", "latency", "ratelimit", "prefix_cache", "reasoning")
START_ONLY = {("signing", "threads")}

PUBLISH_LUA = """
local v = redis.call('INCR', KEYS[1])
redis.call('SET', KEYS[2], v .. '\\n' .. ARGV[1])
return v
"""


def _runtime(request: Request) -> Runtime:
    runtime: Runtime = request.app.state.runtime
    return runtime


def _check_token(runtime: Runtime, request: Request) -> None:
    token = runtime.settings.admin_token
    assert token is not None  # the routes exist only with a token
    expected = b"Bearer " + token.get_secret_value().encode()
    given = request.headers.get("authorization", "").encode()
    if not hmac.compare_digest(expected, given):
        raise Unauthorized("admin token missing or wrong", code="invalid_admin_token")


def current_config(runtime: Runtime) -> dict[str, Any]:
    return {name: getattr(runtime.settings, name).model_dump(mode="json") for name in SECTIONS}


def validate_patch(runtime: Runtime, patch: object) -> dict[str, BaseModel]:
    """The sections a patch would produce, all validated; a 400 names the first bad field."""
    if not isinstance(patch, dict):
        raise InvalidRequest("the body must be a JSON object of sections", code="invalid_value")
    built: dict[str, BaseModel] = {}
    for name, fields in patch.items():
        if name not in SECTIONS:
            raise InvalidRequest(
                f"unknown section '{name}' (allowed: {', '.join(SECTIONS)})",
                code="invalid_value",
                param=name,
            )
        if not isinstance(fields, dict):
            raise InvalidRequest(
                f"section '{name}' must be an object", code="invalid_value", param=name
            )
        current: BaseModel = getattr(runtime.settings, name)
        for field in fields:
            if (name, field) in START_ONLY and fields[field] != getattr(current, field):
                raise InvalidRequest(
                    f"'{name}.{field}' can only be set at start-up",
                    code="invalid_value",
                    param=f"{name}.{field}",
                )
        try:
            built[name] = type(current).model_validate({**current.model_dump(), **fields})
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join(str(part) for part in (name, *first["loc"]))
            message = first["msg"].removeprefix("Value error, ")
            raise InvalidRequest(
                f"invalid value for '{where}': {message}", code="invalid_value", param=where
            ) from None
    return built


def apply(runtime: Runtime, sections: dict[str, BaseModel]) -> None:
    for name, new in sections.items():
        current: BaseModel = getattr(runtime.settings, name)
        # Replace every field at once, in place: the parts that hold this section object (the
        # inference model, the limiter, the signer, the faults) see the change without
        # rewiring, and no half-applied state is ever validated on its own.
        current.__dict__.update(new.__dict__)
    if "faults" in sections:
        runtime.faults.reset()
    cache = runtime.generator.prefix_cache
    if "prefix_cache" in sections and cache is not None:
        # Any PUT of the section, even ``{}``, empties every process's cache: the reset that
        # makes one run's cache state independent of the previous run's.
        cache.clear()


def _keys(runtime: Runtime) -> list[str]:
    prefix = runtime.settings.redis_prefix
    return [f"{prefix}admin:version", f"{prefix}admin:config"]


async def get_config(request: Request) -> Response:
    runtime = _runtime(request)
    _check_token(runtime, request)
    body = {
        "version": runtime.admin_version,
        "config": current_config(runtime),
        "process": runtime.process_info(),
    }
    return Response(orjson.dumps(body), media_type="application/json")


async def put_config(request: Request) -> Response:
    runtime = _runtime(request)
    _check_token(runtime, request)
    try:
        patch = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        raise InvalidRequest("request body is not valid JSON", code="invalid_json") from None
    sections = validate_patch(runtime, patch)
    merged = {**current_config(runtime)}
    for name, model in sections.items():
        merged[name] = model.model_dump(mode="json")
    payload = orjson.dumps({"changed": sorted(sections), "config": merged}).decode()
    keys = _keys(runtime)
    version = await runtime.redis.run(
        "admin_publish",
        lambda r: r.eval(PUBLISH_LUA, 2, keys[0], keys[1], payload),
    )
    apply(runtime, sections)
    runtime.admin_version = int(version)
    log.info("admin config version %s applied: %s", version, ", ".join(sorted(sections)))
    return await get_config(request)


async def poll_once(runtime: Runtime) -> bool:
    """Apply a newer stored version, if any; returns whether one was applied."""
    raw = await runtime.redis.run("admin_poll", lambda r: r.get(_keys(runtime)[1]))
    if raw is None:
        return False
    head, _, body = (raw if isinstance(raw, bytes) else raw.encode()).partition(b"\n")
    version = int(head)
    if version <= runtime.admin_version:
        return False
    stored = orjson.loads(body)
    changed = stored["changed"]
    sections = validate_patch(runtime, {name: stored["config"][name] for name in changed})
    apply(runtime, sections)
    runtime.admin_version = version
    log.info("admin config version %d applied from redis: %s", version, ", ".join(changed))
    return True


async def watch(runtime: Runtime) -> None:
    """Background task of every process when admin is on."""
    while True:
        try:
            await poll_once(runtime)
        except RedisUnavailable:
            pass  # counted by the pool; the next poll retries
        except InvalidRequest as exc:
            log.warning("stored admin config refused: %s", exc.message)
        await asyncio.sleep(runtime.settings.admin_poll_s)
