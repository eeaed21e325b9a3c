#!/usr/bin/env bash
# Builds the project image ramplab:0.1.0 without any image registry: FROM the local Debian base
# (scripts/base-image.sh), the project and its dependencies installed from wheels this script
# makes with the host's pip (PyPI, and pip's cache) into wheelhouse/; the image build itself
# runs with --network none.
#   scripts/image.sh               prints the image tag; PYTHON=... picks the pip to use
# An image whose label org.ramplab.inputs equals the hash of its inputs (Dockerfile, the
# package sources, the files ramplab/data links to, configs/, the base image) is reused as is.
set -euo pipefail
cd "$(dirname "$0")/.."
image=${RAMPLAB_IMAGE:-ramplab:0.1.0}
python=${PYTHON:-.venv/bin/python}
base=$(scripts/base-image.sh)
inputs=$(
  {
    echo "$base"
    find Dockerfile .dockerignore pyproject.toml README.md ramplab target_service campaigns \
      locustfiles prometheus grafana configs -type f ! -path '*/__pycache__/*' ! -name '*.pyc' \
      -print0 | sort -z | xargs -0 sha256sum
  } | sha256sum | cut -c1-16
)
have=$(docker image inspect --format '{{ index .Config.Labels "org.ramplab.inputs" }}' "$image" \
  2>/dev/null || true)
if [ "$have" = "$inputs" ]; then
  echo "$image"
  exit 0
fi
echo "image: building $image from $base (inputs $inputs)" >&2
rm -rf wheelhouse
"$python" -m pip wheel --quiet --wheel-dir wheelhouse '.[tracing]' >&2
docker build --network none --label "org.ramplab.inputs=$inputs" \
  --build-arg "BASE_IMAGE=$base" \
  --build-arg 'INSTALL=--no-index --find-links /src/wheelhouse ramplab[tracing]' \
  -t "$image" . >&2
rm -rf wheelhouse
echo "$image"
