"""What an option's value may be: one ``Kind`` per shape of value, shared by the options of it.

A kind parses the text of a command line, a ``RAMPLAB_*`` variable or a Locust config file into
the value Locust's parsed options hold, and formats such a value (or a campaign's spelling of it,
e.g. a retry mapping) back into that text. The check is written once and serves every source: the
flag (``--max-tokens 0``), the campaign field (``workload.max_tokens: 0``) and a namespace built
by hand; the caller names the field, so the ``UsageError`` names what the user wrote.

Parsed values stay plain (``str``, ``int``, ``float``, ``bool``, ``dict``): Locust's master sends
its parsed options to the workers in a msgpack message. Options whose text stands for a richer
object (a shape, a retry policy, gates) keep the checked text; ``ramplab.options.run`` builds the
object from it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ramplab.errors import UsageError
from ramplab.load.arrivals.schedule import make_process
from ramplab.load.outage import parse_outage
from ramplab.load.shapes import parse_shape
from ramplab.load.think import SPEC_HELP, parse_think_time
from ramplab.results.slo import parse_gates, parse_request_slo
from ramplab.retry.config import parse_retry
from ramplab.workload.dataset import parse_range
from ramplab.workload.lengths import parse_output_lengths
from ramplab.workload.prefix import parse_shared_prefix

__all__ = [
    "ADDRESS",
    "ARRIVALS",
    "ENGINE_METRICS",
    "GATES",
    "HEADER_NAME",
    "JSON_OBJECT",
    "OUTAGE",
    "OUTPUT_LENGTHS",
    "PORT",
    "RETRY",
    "SESSION_THINK_TIME",
    "SHAPE",
    "SHARED_PREFIX",
    "SLO",
    "SWITCH_OFF",
    "SWITCH_ON",
    "TEXT",
    "TOKEN_RANGE",
    "URL_PATH",
    "Kind",
    "choice",
    "gate_texts",
    "integer",
    "non_empty_text",
    "number",
    "parse_address",
    "retry_spec",
]


@dataclass(frozen=True, slots=True)
class Kind:
    """How one shape of option value is read and written.

    ``parse(text, field)`` returns the parsed value or raises ``UsageError`` on ``field`` (or a
    sub-field of it: ``retry.policy``); ``format(value)`` is the text ``parse`` reads back to the
    same value. A switch (``switch`` = the value its flag sets) takes no text on the command line.
    """

    name: str  # what the docs say the value is
    parse: Callable[[str, str], Any]
    format: Callable[[Any], str] = str
    switch: bool | None = None

    def check(self, value: Any, field: str) -> Any:
        """``value`` as a parsed option value, checked; raises ``UsageError`` on ``field``."""
        if self.switch is not None:
            if not isinstance(value, bool):
                raise UsageError(field, f"expected true or false, got {value!r}")
            return value
        return self.parse(self.format(value), field)


def _text(text: str, field: str) -> str:
    return text


def _number_text(value: Any) -> str:
    # repr keeps every digit (str(0.1 + 0.2) would too, but '%g' would not); whole numbers
    # print without '.0' so a campaign's `ttft_ms: 500` reads back as written.
    if isinstance(value, str):
        return value
    number = float(value)
    return str(int(number)) if number.is_integer() and abs(number) < 1e15 else repr(number)


def integer(minimum: int | None = None) -> Kind:
    """A whole number, at least ``minimum`` when given."""

    def parse(text: str, field: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise UsageError(field, f"{text!r} is not a whole number") from None
        if minimum is not None and value < minimum:
            raise UsageError(field, f"must be at least {minimum}, got {value}")
        return value

    name = "integer" if minimum is None else f"integer ≥ {minimum}"
    return Kind(name, parse, lambda value: value if isinstance(value, str) else str(int(value)))


def number(minimum: float, *, above: bool = False) -> Kind:
    """A finite number, at least ``minimum`` (more than it with ``above``)."""

    def parse(text: str, field: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise UsageError(field, f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise UsageError(field, f"must be a finite number, got {text!r}")
        if value < minimum or (above and value == minimum):
            relation = "more than" if above else "at least"
            raise UsageError(field, f"must be {relation} {minimum:g}, got {value:g}")
        return value

    return Kind(f"number {'>' if above else '≥'} {minimum:g}", parse, _number_text)


def choice(*values: str) -> Kind:
    """One of ``values``."""

    def parse(text: str, field: str) -> str:
        if text not in values:
            raise UsageError(field, f"expected one of {', '.join(values)}, got {text!r}")
        return text

    return Kind(" | ".join(values), parse)


def non_empty_text(what: str) -> Kind:
    def parse(text: str, field: str) -> str:
        if not text.strip():
            raise UsageError(field, f"must not be empty (it is {what})")
        return text.strip()

    return Kind("text", parse)


def _port(text: str, field: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise UsageError(field, f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise UsageError(field, f"{value} is not a port (0-65535; 0 = off)")
    return value


def parse_address(text: str, field: str) -> tuple[str, int]:
    """``HOST:PORT`` (an IPv4 address or a name, port 1-65535); ``UsageError`` on ``field``."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise UsageError(field, f"expected HOST:PORT (e.g. 127.0.0.1:5353), got {text!r}")
    return host, int(port)


def _address(text: str, field: str) -> str:
    host, port = parse_address(text, field)
    return f"{host}:{port}"


def _url_path(text: str, field: str) -> str:
    if not text.startswith("/"):
        raise UsageError(field, f"must be a URL path starting with '/', got {text!r}")
    return text


def _http_url(text: str, field: str) -> str:
    if not text.strip():
        return ""  # not set, as compose's ${VAR:-} gives it
    if not text.strip().startswith(("http://", "https://")):
        raise UsageError(field, f"must be an http:// or https:// URL, got {text!r}")
    return text.strip().rstrip("/")


def _ratio(text: str, field: str) -> float:
    value = float(number(0.0).parse(text, field))
    if value > 1.0:
        raise UsageError(field, f"must be between 0 and 1, got {value:g}")
    return value


def _json_object(text: str, field: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(field, f"not valid JSON ({exc.msg}): {text!r}") from None
    if not isinstance(value, dict):
        raise UsageError(field, f"must be a JSON object, got {text!r}")
    return value


def _think_time(text: str, field: str) -> str:
    parse_think_time(text, field)
    return text.strip()


def _header_name(text: str, field: str) -> str:
    name = text.strip()
    if name and not all(c.isascii() and (c.isalnum() or c == "-") for c in name):
        raise UsageError(field, f"{text!r} is not an HTTP header name (letters, digits, '-')")
    return name


# Multi-turn sessions (docs/workloads.md).
SESSION_THINK_TIME = Kind(SPEC_HELP, _think_time, _number_text)
HEADER_NAME = Kind("header name ('': none)", _header_name)


def _shape(text: str, field: str) -> str:
    if text.strip():
        try:
            parse_shape(text)
        except UsageError as exc:
            raise UsageError(field, str(exc)) from None
    return text.strip()


def _arrivals(text: str, field: str) -> str:
    make_process(text, field=field)
    return text


def retry_spec(text: str, field: str) -> Any:
    """``--ramplab-retry``'s text as the spec ``parse_retry`` reads: a mapping, a name, or None."""
    text = text.strip()
    if not text:
        return None
    if text.startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(field, f"invalid JSON: {exc.msg}") from None
    return text


def _retry(text: str, field: str) -> str:
    spec = retry_spec(text, field)
    if spec is not None:
        parse_retry(spec, field=field)
    return text.strip()


def _retry_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _slo(text: str, field: str) -> str:
    parse_request_slo(text.strip() or None, field=field)
    return text.strip()


def _slo_text(value: Any) -> str:
    if isinstance(value, Mapping):
        return ",".join(f"{name}<={_number_text(limit)}" for name, limit in value.items())
    return str(value)


def gate_texts(text: str) -> list[str]:
    """``--ramplab-gate``'s ';'-separated gates."""
    return [gate.strip() for gate in text.split(";") if gate.strip()]


def _gates(text: str, field: str) -> str:
    parse_gates(gate_texts(text), field=field)
    return text


def _outage(text: str, field: str) -> str:
    if text.strip():
        parse_outage(text.strip(), field=field)
    return text.strip()


def _token_range(text: str, field: str) -> str:
    parse_range(text, field)
    return text.strip()


def _output_lengths(text: str, field: str) -> str:
    parse_output_lengths(text, field)
    return text.strip()


def _shared_prefix(text: str, field: str) -> dict[str, Any]:
    value = _json_object(text, field) if text.strip() else {}
    parse_shared_prefix(value, field)
    return value


TEXT = Kind("text", _text)


def _engine_metrics(text: str, field: str) -> str:
    value = text.strip()
    if value in ("auto", "off"):
        return value
    if not value.startswith(("http://", "https://")):
        raise UsageError(field, f"must be auto, off or an http(s) URL, got {text!r}")
    return value


URL_PATH = Kind("URL path", _url_path)
ENGINE_METRICS = Kind("auto|off|URL", _engine_metrics)
HTTP_URL = Kind("http(s) URL", _http_url)
RATIO = Kind("ratio 0-1", _ratio, _number_text)
ADDRESS = Kind("HOST:PORT", _address)
PORT = Kind("port (0 = off)", _port)
JSON_OBJECT = Kind("JSON object", _json_object, json.dumps)
SWITCH_ON = Kind("switch", _text, switch=True)
SWITCH_OFF = Kind("switch", _text, switch=False)
SHAPE = Kind("shape", _shape)
ARRIVALS = Kind("constant | poisson | gamma:B", _arrivals)
RETRY = Kind("policy name or JSON", _retry, _retry_text)
SLO = Kind("NAME<=MS,...", _slo, _slo_text)
GATES = Kind("gates, ;-separated", _gates)
OUTAGE = Kind("START+DURATION", _outage)
TOKEN_RANGE = Kind("LOW..HIGH tokens", _token_range)
OUTPUT_LENGTHS = Kind("max_tokens | dataset | uniform:LO,HI | normal:MEAN,STD | "
                      "lognormal:MEDIAN,SIGMA", _output_lengths)  # fmt: skip
SHARED_PREFIX = Kind("JSON object", _shared_prefix, json.dumps)
