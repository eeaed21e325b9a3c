# One slim, non-root image for the target and for Locust (master and workers).
#   docker build -t ramplab:0.1.0 .
# Build stage: install the package (with the tracing extra) into a venv; the runtime stage copies
# only the venv and the files the processes read, so no compiler or pip cache ships.
FROM python:3.11.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY ramplab ramplab
COPY target_service target_service
RUN python -m venv /opt/venv && /opt/venv/bin/pip install ".[tracing]"

FROM python:3.11.11-slim-bookworm
RUN groupadd --gid 10001 ramplab \
    && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin ramplab \
    && mkdir -p /app/results \
    && chown ramplab:ramplab /app/results
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY configs configs
COPY locustfiles locustfiles
COPY campaigns campaigns
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    APP_CONFIG_FILE=/app/configs/app.toml
USER 10001:10001
# target 8000, Locust web UI 8089, Locust master 5557, master exporter 9100, worker exporter 9101
EXPOSE 8000 8089 5557 9100 9101
CMD ["python", "-m", "target_service", "--host", "0.0.0.0", "--port", "8000"]
