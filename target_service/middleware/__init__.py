"""Pure ASGI middleware (never ``BaseHTTPMiddleware``: it buffers and breaks streaming)."""
