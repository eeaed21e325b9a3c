#!/usr/bin/env bash
# Starts Debian's dockerd when no Docker engine answers (this machine has no init system), and
# waits until it does. Idempotent; prints nothing when an engine already runs.
#   scripts/docker-engine.sh            exit 0: `docker info` works; 1: no engine could start
# The daemon is left running for later runs (the compose test and the image cache reuse it);
# its log is /var/log/ramplab-dockerd.log.
set -euo pipefail
docker_cli=$(command -v docker || true)
if [ -z "$docker_cli" ]; then
  echo "docker-engine: no docker client (apt-get install docker.io)" >&2
  exit 1
fi
if docker info >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then
  echo "docker-engine: no engine answers and we are not root: start dockerd yourself" >&2
  exit 1
fi
if ! command -v dockerd >/dev/null 2>&1; then
  echo "docker-engine: no dockerd (apt-get install docker.io)" >&2
  exit 1
fi
log=/var/log/ramplab-dockerd.log
echo "docker-engine: starting dockerd (log: $log)"
# setsid: the daemon outlives this script and the test session that called it.
setsid dockerd >>"$log" 2>&1 </dev/null &
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then exit 0; fi
  sleep 1
done
echo "docker-engine: dockerd did not answer within 60 s; last lines of $log:" >&2
tail -n 20 "$log" >&2
exit 1
