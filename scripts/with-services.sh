#!/usr/bin/env bash
#
# Runs a command with throwaway PostgreSQL and Redis (or the servers named by
# DATABASE_URL / REDIS_URL), e.g.
#
#   bash scripts/with-services.sh bun bench/throughput.ts
#   bash scripts/with-services.sh psql   # poke at a scratch database
#
# The command sees TEST_DATABASE_URL, TEST_REDIS_URL and PG_BIN (see
# services.sh). Its exit code becomes ours; the servers are removed either way.
set -euo pipefail

if [[ $# -eq 0 ]]; then
  echo "usage: bash scripts/with-services.sh COMMAND [ARGS...]" >&2
  exit 2
fi

# shellcheck source=scripts/services.sh
source "$(dirname "${BASH_SOURCE[0]}")/services.sh"

ensure_postgres
ensure_redis

# Not `exec`: this shell has to outlive the command to run the cleanup trap.
# `|| rc=$?` rather than letting set -e exit, so we return the command's own
# code instead of a generic failure.
rc=0
"$@" || rc=$?
exit "$rc"
