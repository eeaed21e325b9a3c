#!/bin/sh
# Grafana's admin password for the compose stack, kept in the file given (the stack passes
# /secrets/admin-password: grafana/secrets/admin-password in the checkout, git-ignored):
#   GRAFANA_ADMIN_PASSWORD set  -> that password, written to the file (the variable wins);
#   the file already there      -> kept as it is;
#   neither                     -> 24 random letters and digits, generated once.
# docker-compose.yml runs it as the one-shot service `grafana-password` before Grafana starts,
# as RAMPLAB_UID (the file is yours, mode 0600); Grafana reads it through
# GF_SECURITY_ADMIN_PASSWORD__FILE. No password is ever committed or printed.
# On the host it works the same: sh scripts/grafana-password.sh grafana/secrets/admin-password
set -eu
file=${1:?usage: grafana-password.sh FILE}
umask 077
if [ -n "${GRAFANA_ADMIN_PASSWORD:-}" ]; then
  printf '%s' "$GRAFANA_ADMIN_PASSWORD" > "$file.tmp"
  how="set from GRAFANA_ADMIN_PASSWORD"
elif [ -s "$file" ]; then
  echo "grafana-password: $file kept (admin's password)"
  exit 0
else
  # tr ends on SIGPIPE once head has its 24 characters (no pipefail in sh: not an error).
  tr -dc 'A-Za-z0-9' < /dev/urandom | head -c 24 > "$file.tmp"
  how="generated"
fi
mv "$file.tmp" "$file"
echo "grafana-password: $file $how (admin's password)"
