#!/usr/bin/env bash
#
# `npm test`: typecheck, then the bun test suite against throwaway PostgreSQL
# and Redis (or DATABASE_URL / REDIS_URL). Arguments go to `bun test`, e.g.
#
#   npm test -- test/store      # only the store suites
#
# The last line of output is always "N passed, N failed", whatever happened
# before it, because CI reads that line to report the result.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=scripts/services.sh
source scripts/services.sh

# Cleanups run newest first, so registering this first makes it the very
# last thing printed. If we die before the real summary (no bun, postgres
# would not start), CI still gets a closing line that says "failed".
summary_printed=""
# shellcheck disable=SC2016 # expanded later, when the cleanup runs
services_on_exit '[[ -n "$summary_printed" ]] || echo "0 passed, 1 failed"'

if [[ ! -x node_modules/.bin/bun ]]; then
  echo "test: node_modules/.bin/bun not found; run 'npm install' first" >&2
  exit 1
fi

# `npm test` puts node_modules/.bin on PATH but running this script directly
# does not; tests that spawn `bun` should get the pinned one either way.
export PATH="$PWD/node_modules/.bin:$PATH"

ensure_postgres
ensure_redis

# The dashboard tests drive a real browser; only fetch one when they are part of this run
# (bun test filters by path substring, so no filter or one that matches test/ui selects them).
wants_ui_tests() {
  local arg filters=0
  for arg in "$@"; do
    [[ "$arg" == -* ]] && continue
    filters=1
    arg="${arg#./}"
    if [[ "test/ui/dashboard.test.ts" == *"$arg"* || "$arg" == test/ui* ]]; then
      return 0
    fi
  done
  [[ $filters -eq 0 ]]
}
if wants_ui_tests "$@"; then
  ensure_chromium || true
fi

failed=0
passed=0

# A type error is a failed suite, but keep going: the test results are still
# worth seeing, and both problems get fixed in one round trip.
echo "test: typecheck (tsc --noEmit)" >&2
if ! node_modules/.bin/tsc --noEmit; then
  echo "test: typecheck FAILED" >&2
  typecheck_failed=1
else
  typecheck_failed=0
fi

# The formatter and linter (Biome, biome.jsonc): a finding is a failed suite, like a type error.
# `npx biome check --write .` fixes what it can.
echo "test: format and lint (biome ci)" >&2
if ! node_modules/.bin/biome ci --colors=off . >&2; then
  echo "test: format or lint FAILED; 'npm run format' fixes formatting and the safe lint findings" >&2
  typecheck_failed=$((typecheck_failed + 1))
fi

log="$(mktemp "${TMPDIR:-/tmp}/scheduler-test.XXXXXX")"
services_on_exit "rm -f $(printf '%q' "$log")"

# bun prints results and the summary on stderr, so both streams go through
# tee; PIPESTATUS gives bun's own code rather than tee's.
set +e
# Test files at a time (TEST_PARALLEL; 1 for one at a time): the cores plus one, 2 to 8. Most
# files wait on processes, timers and the network rather than the CPU: on a 2-core machine
# two at a time left the CPU a third idle (7 minutes). Four kept it busy (under 5) on a quiet
# day, but on a slower one (2026-12-03) every full run at four, of this build and of the one
# before, failed 1 to 5 tests on their time bounds (PGlite schedulers, herds), where three
# at a time passed all of them in 8 minutes. Every file makes its own databases, ports and
# Redis prefix or server, so files share no state.
# test/timings.json (per-file durations, refresh with `npm test -- --update-timings`) starts
# the slowest files first, so the run does not end with one long file and idle cores.
cores="$(nproc 2>/dev/null || echo 2)"
parallel="${TEST_PARALLEL:-$((cores + 1 < 2 ? 2 : cores + 1 > 8 ? 8 : cores + 1))}"
echo "test: $parallel test files at a time (TEST_PARALLEL to change)" >&2
# A JUnit report beside the console one: its failures are printed again at the end (see
# scripts/failure-digest.ts), where CI's kept tail of the output shows them.
junit="$(mktemp "${TMPDIR:-/tmp}/scheduler-junit.XXXXXX")"
services_on_exit "rm -f $(printf '%q' "$junit")"
node_modules/.bin/bun test --parallel="$parallel" --timings=test/timings.json --timeout 60000 \
  --reporter=junit --reporter-outfile="$junit" "$@" 2>&1 | tee "$log"
bun_rc=${PIPESTATUS[0]}
node_modules/.bin/bun scripts/failure-digest.ts "$junit" || echo "test: could not read the JUnit report $junit" >&2
set -e

# Colour codes (FORCE_COLOR) and CRs would break the anchored patterns. The
# last match wins, in case a test itself printed something similar earlier.
clean="$(sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g' -e 's/\r$//' "$log")"
pass_count="$(grep -E '^[[:space:]]*[0-9]+ pass$' <<<"$clean" | tail -n 1 | tr -dc '0-9')" || true
fail_count="$(grep -E '^[[:space:]]*[0-9]+ fail$' <<<"$clean" | tail -n 1 | tr -dc '0-9')" || true

if [[ -z "$pass_count" || -z "$fail_count" ]]; then
  # No summary: bun crashed, or found no test files. Either way, a failure.
  echo "test: no summary from bun test (exit code $bun_rc)" >&2
  passed=0
  failed=1
else
  passed=$pass_count
  failed=$fail_count
  # bun failed without reporting a failed test (e.g. a crash after the
  # summary): still a failure, and the closing line must agree with that.
  if [[ $bun_rc -ne 0 && $failed -eq 0 ]]; then
    echo "test: bun test exited with code $bun_rc but reported no failures" >&2
    failed=1
  fi
fi
failed=$((failed + typecheck_failed))

# shellcheck disable=SC2034 # read by the exit cleanup registered above
summary_printed=1
echo "$passed passed, $failed failed"

# Zero passing tests means the suite did not really run (wrong filter, empty
# test dir): that must not look green.
if [[ $failed -ne 0 || $passed -eq 0 ]]; then
  exit 1
fi
exit 0
