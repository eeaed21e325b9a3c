"""The target's OpenAPI 3.1 document, served at ``GET /openapi.json``.

The request schemas of the three generation endpoints are generated from the models that
validate them (``wire.ChatCompletionRequest``, ``completions_api.CompletionRequest``,
``responses_api.ResponsesRequest``), so the document and the validation cannot drift apart; the
rest is written here. Every error answer is described by one schema, ``Error`` — the OpenAI
form ``{"error": {"message", "type", "param", "code"}}`` — which is what
``tests/target/test_fuzz.py`` holds the target to, with schemathesis. The admin API is left out:
it is off unless an admin token is configured, and it is not part of the OpenAI surface.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import BaseModel

from target_service.completions_api import CompletionRequest
from target_service.responses_api import ResponsesRequest
from target_service.wire import ChatCompletionRequest

# Path, operation id and request model of each generation endpoint.
GENERATION: tuple[tuple[str, str, type[BaseModel]], ...] = (
    ("/v1/chat/completions", "createChatCompletion", ChatCompletionRequest),
    ("/v1/completions", "createCompletion", CompletionRequest),
    ("/v1/responses", "createResponse", ResponsesRequest),
)

REF = "#/components/schemas/{model}"


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    error = {"$ref": "#/components/schemas/Error"}
    descriptions = {
        400: "invalid request",
        401: "missing or invalid credentials",
        404: "not found",
        413: "request body too large",
        429: "rate limited (Retry-After)",
        503: "overloaded or Redis unavailable (Retry-After)",
    }
    return {str(s): _json(error, descriptions[s]) for s in statuses}


def _schemas(models: tuple[str, ...]) -> dict[str, Any]:
    schemas: dict[str, Any] = {}
    for _, _, model in GENERATION:
        request = model.model_json_schema(ref_template=REF)
        # The served models, so that generated requests reach the handler (another name: 404).
        request["properties"]["model"] = {"type": "string", "enum": list(models)}
        schemas.update(request.pop("$defs", {}))
        schemas[model.__name__] = request
    schemas["Error"] = {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["message", "type"],
                "properties": {
                    "message": {"type": "string"},
                    "type": {"type": "string"},
                    "param": {"type": ["string", "null"]},
                    "code": {"type": ["string", "null"]},
                },
            }
        },
    }
    schemas["TokenRequest"] = {
        "type": "object",
        "required": ["client_id", "client_secret"],
        "properties": {
            "client_id": {"type": "string"},
            "client_secret": {"type": "string"},
            "grant_type": {"type": "string", "enum": ["client_credentials"]},
        },
    }
    schemas["Token"] = {
        "type": "object",
        "required": ["access_token", "token_type", "expires_in"],
        "properties": {
            "access_token": {"type": "string"},
            "token_type": {"type": "string", "enum": ["Bearer"]},
            "expires_in": {"type": "integer"},
        },
    }
    schemas["Model"] = {
        "type": "object",
        "required": ["id", "object", "created", "owned_by"],
        "properties": {
            "id": {"type": "string"},
            "object": {"type": "string", "enum": ["model"]},
            "created": {"type": "integer"},
            "owned_by": {"type": "string"},
        },
    }
    return schemas


def _generation(operation: str, schema: str, bearer: list[dict[str, list[str]]]) -> dict[str, Any]:
    return {
        "post": {
            "operationId": operation,
            "security": bearer,
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": {"$ref": REF.format(model=schema)}}},
            },
            "responses": {
                "200": {
                    "description": "a completion (JSON), or an SSE stream with stream",
                    "content": {
                        "application/json": {"schema": {"type": "object"}},
                        "text/event-stream": {"schema": {"type": "string"}},
                    },
                },
                **_errors(400, 401, 404, 413, 429, 503),
            },
        }
    }


@functools.cache
def document(models: tuple[str, ...]) -> dict[str, Any]:
    """The OpenAPI document of a target serving ``models``."""
    ref = "#/components/schemas/"
    bearer: list[dict[str, list[str]]] = [
        {"bearer": []},
        {},
    ]  # off (no credentials) in the default auth mode
    return {
        "openapi": "3.1.0",
        "info": {"title": "ramplab reference target", "version": "1"},
        "paths": {
            **{
                path: _generation(operation, model.__name__, bearer)
                for path, operation, model in GENERATION
            },
            "/v1/models": {
                "get": {
                    "operationId": "listModels",
                    "security": bearer,
                    "responses": {
                        "200": _json({"type": "object"}, "the models"),
                        **_errors(401),
                    },
                }
            },
            "/v1/models/{model}": {
                "get": {
                    "operationId": "retrieveModel",
                    "security": bearer,
                    "parameters": [
                        {
                            "name": "model",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string"},
                        }
                    ],
                    "responses": {
                        "200": _json({"$ref": ref + "Model"}, "the model"),
                        **_errors(401, 404),
                    },
                }
            },
            "/v1/auth/token": {
                "post": {
                    "operationId": "issueToken",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": ref + "TokenRequest"}},
                            "application/x-www-form-urlencoded": {
                                "schema": {"$ref": ref + "TokenRequest"}
                            },
                        },
                    },
                    "responses": {
                        "200": _json({"$ref": ref + "Token"}, "an access token"),
                        **_errors(400, 401, 503),
                    },
                }
            },
            "/.well-known/jwks.json": {
                "get": {
                    "operationId": "jwks",
                    "responses": {
                        "200": _json({"type": "object"}, "the public keys"),
                        **_errors(503),
                    },
                }
            },
            "/healthz": {
                "get": {
                    "operationId": "healthz",
                    "responses": {"200": _json({"type": "object"}, "the process is up")},
                }
            },
            "/readyz": {
                "get": {
                    "operationId": "readyz",
                    "responses": {
                        "200": _json({"type": "object"}, "Redis answers"),
                        "503": _json({"type": "object"}, "Redis does not answer"),
                    },
                }
            },
        },
        "components": {
            "schemas": _schemas(models),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
