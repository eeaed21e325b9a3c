#!/usr/bin/env bash
# Builds the project image ramplab:0.1.0 without any image registry: FROM the local Debian base
# (scripts/base-image.sh), the project and its dependencies installed from wheels this script
# makes with the host's pip (PyPI, and pip's cache) into wheelhouse/; the image build itself
# runs with --network none.
#   scripts/image.sh               prints the image tag
# The wheels are resolved by a Python of the base image's version (environment markers such as
# redis's `python_full_version < "3.11.3"` differ between patch releases): a venv of
# $BASE_PYTHON (default /usr/bin/python3, Debian bookworm's 3.11.2, as in the base) kept in
# build/image-pip/. wheelhouse/ (the dependencies) is kept between builds.
# An image whose label org.ramplab.inputs equals the hash of its inputs (Dockerfile, the
# package sources, the files ramplab/data links to, configs/, the base image) is reused as is.
set -euo pipefail
cd "$(dirname "$0")/.."
# One build at a time: `make test` starts one in the background while the parallel phase runs, and
# the compose test's own call waits here for it, then finds the image current.
mkdir -p build
exec 9>build/image.lock
flock 9
image=${RAMPLAB_IMAGE:-ramplab:0.1.0}
base_python=${BASE_PYTHON:-/usr/bin/python3}
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
want=$(docker run --rm --network none "$base" python3 --version)
have=$("$base_python" --version 2>&1 || true)
if [ "$want" != "$have" ]; then
  echo "image: the base has $want, $base_python is '$have': set BASE_PYTHON to a $want" >&2
  exit 1
fi
if [ ! -e build/image-pip/.ready ]; then
  rm -rf build/image-pip
  "$base_python" -m venv build/image-pip >&2
  build/image-pip/bin/pip install --quiet 'setuptools>=77' wheel >&2
  touch build/image-pip/.ready
fi
# The dependencies' wheels are made again only when pyproject.toml changes: the same files keep
# the image's dependency layer cached. The project's own wheel is made every time.
deps_key=$({ echo "$base"; sha256sum pyproject.toml; } | sha256sum | cut -c1-16)
if [ "$(cat wheelhouse/.key 2>/dev/null || true)" != "$deps_key" ]; then
  rm -rf wheelhouse
  build/image-pip/bin/pip wheel --quiet --wheel-dir wheelhouse '.[tracing]' >&2
  rm -f wheelhouse/ramplab-*.whl
  echo "$deps_key" >wheelhouse/.key
fi
rm -rf dist-image
build/image-pip/bin/pip wheel --quiet --no-deps --no-build-isolation --wheel-dir dist-image . >&2
docker build --network none --label "org.ramplab.inputs=$inputs" \
  --build-arg "BASE_IMAGE=$base" \
  --build-arg 'INSTALL=--no-index --no-deps dist-image/ramplab-*.whl' \
  -t "$image" . >&2
rm -rf dist-image
# The image this one replaced (now untagged) would otherwise stay, ~700 MB per source change;
# the build stage's untagged images stay: they are the dependency layer's cache.
docker image prune --force --filter dangling=true --filter label=org.ramplab.inputs >/dev/null
echo "$image"
