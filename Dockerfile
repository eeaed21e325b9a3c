# One non-root image for the target and for Locust (master and workers).
#   docker build -t ramplab:0.1.0 .                  a registry's python:slim base, PyPI
#   scripts/image.sh                                 no registry: the local Debian base
#                                                    (scripts/base-image.sh) and local wheels
# Build stage: install the package (with the tracing extra) into a venv; the runtime stage copies
# only the venv and the target's config, so no compiler or pip cache ships. The campaigns,
# locustfiles and Prometheus rules are package data (ramplab/data): nothing else is copied.
ARG BASE_IMAGE=python:3.11.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
# What the last step installs: the source tree (dependencies from PyPI), or for a build with no
# index (scripts/image.sh, `--network none`) the project's wheel from dist-image/.
ARG INSTALL=".[tracing]"
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
RUN python3 -m venv /opt/venv
# scripts/image.sh: the dependencies' wheels (wheelhouse/) first, a layer of their own that is
# reused until they change. A registry build has no wheelhouse/ and installs nothing here.
COPY pyproject.toml wheelhouse* /src/deps/
RUN if ls /src/deps/*.whl >/dev/null 2>&1; then \
      /opt/venv/bin/pip install --quiet --no-index --no-deps /src/deps/*.whl; fi
COPY . .
RUN /opt/venv/bin/pip install --quiet $INSTALL

FROM ${BASE_IMAGE}
# /prometheus: the TSDB when this image runs Prometheus too (a local base that has it).
RUN groupadd --gid 10001 ramplab \
    && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin ramplab \
    && mkdir -p /app/results /prometheus \
    && chown ramplab:ramplab /app/results /prometheus
COPY --from=build /opt/venv /opt/venv
WORKDIR /app
COPY configs configs
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    APP_CONFIG_FILE=/app/configs/app.toml
USER 10001:10001
# target 8000, Locust web UI 8089, Locust master 5557, master exporter 9100, worker exporter 9101
EXPOSE 8000 8089 5557 9100 9101
CMD ["python", "-m", "target_service", "--host", "0.0.0.0", "--port", "8000"]
