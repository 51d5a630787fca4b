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
#
# This is how the benches run, so the throwaway PostgreSQL gets production
# durability (fsync, synchronous_commit, full_page_writes on) and
# pg_stat_statements. `--fast` anywhere in the arguments (it is taken out before
# the command runs), or SCHEDULER_BENCH_FAST=1, gives it the test suite's fast
# settings instead; the benches print the settings they ran on.
set -euo pipefail

args=()
fast="${SCHEDULER_BENCH_FAST:-}"
[[ "$fast" == 0 ]] && fast=""
for arg in "$@"; do
  if [[ "$arg" == --fast ]]; then
    fast=1
  else
    args+=("$arg")
  fi
done
set -- "${args[@]+"${args[@]}"}"

if [[ $# -eq 0 ]]; then
  echo "usage: bash scripts/with-services.sh [--fast] COMMAND [ARGS...]" >&2
  exit 2
fi

if [[ -n "$fast" ]]; then
  export SERVICES_PG_PROFILE=bench-fast SCHEDULER_BENCH_FAST=1
else
  export SERVICES_PG_PROFILE="${SERVICES_PG_PROFILE:-bench}"
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
