# shellcheck shell=bash
#
# Throwaway PostgreSQL and Redis for tests and benchmarks.
#
#   source scripts/services.sh
#   ensure_postgres   # exports TEST_DATABASE_URL and PG_BIN
#   ensure_redis      # exports TEST_REDIS_URL
#
# If DATABASE_URL / REDIS_URL are set we use those servers as they are, so CI
# (or a developer) can point the suite at managed instances. Otherwise we start
# private servers on free ports in temp dirs, so runs never collide with a
# system-wide server, with each other, or with data that is worth keeping.
# They are torn down when the sourcing shell exits.
#
# This file is a library: it deliberately does not `set -euo pipefail`,
# because sourcing it into an interactive shell would then close that shell on
# the first failing command. Callers set their own options; every step here
# checks its own result and returns non-zero with a one-line reason, so it
# also behaves inside `if ensure_postgres; then`, where `set -e` is suspended.
#
# Everything this prints goes to stderr, so a wrapped command's stdout stays
# clean, and teardown prints nothing at all, so a caller's closing summary
# line stays the last line of output.

if [[ -n "${_SERVICES_SH_LOADED:-}" ]]; then
  return 0
fi
_SERVICES_SH_LOADED=1

_SERVICES_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# --------------------------------------------------------------------------
# Cleanup stack. Shell traps do not compose: a second `trap ... EXIT`
# silently replaces the first. So there is one trap, and everything that
# needs undoing pushes a command here. Commands run newest first, like
# `defer`, so a server is stopped before the directory it lives in is deleted.
# Callers should use services_on_exit instead of their own EXIT trap.
# --------------------------------------------------------------------------

_SERVICES_CLEANUPS=()
_SERVICES_TRAP_INSTALLED=""

services_on_exit() {
  _SERVICES_CLEANUPS+=("$1")
  _services_install_trap
}

# Runs (and forgets) all registered cleanups. Safe to call more than once:
# the EXIT trap fires again after a signal handler exits.
services_cleanup() {
  local i cmd
  for ((i = ${#_SERVICES_CLEANUPS[@]} - 1; i >= 0; i--)); do
    cmd="${_SERVICES_CLEANUPS[i]}"
    # Cleanup must not stop halfway: a failure in one step (server already
    # dead, say) must not leave the next server running.
    eval "$cmd" || true
  done
  _SERVICES_CLEANUPS=()
}

_services_on_signal() {
  local sig="$1"
  services_cleanup
  # Die of the same signal rather than `exit 130`, so the parent (make,
  # CI runner, an outer shell loop) sees "killed by SIGINT" and stops too.
  trap - "$sig"
  kill -s "$sig" "$$"
}

_services_install_trap() {
  [[ -n "$_SERVICES_TRAP_INSTALLED" ]] && return 0
  _SERVICES_TRAP_INSTALLED=1
  trap services_cleanup EXIT
  # In an interactive shell, Ctrl-C only cancels the current line; tearing
  # down the servers then would be a surprise. They go when the shell exits.
  if [[ $- != *i* ]]; then
    trap '_services_on_signal INT' INT
    trap '_services_on_signal TERM' TERM
    trap '_services_on_signal HUP' HUP
  fi
}

# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------

_services_log() {
  printf 'services: %s\n' "$*" >&2
}

_services_is_root() {
  [[ "$(id -u)" -eq 0 ]]
}

# Installs a Debian package if we are allowed to (root with apt-get), which
# is the CI case; developers get told what to install instead, because
# running apt behind someone's back on their own machine would be rude.
_services_apt_install() {
  local package="$1" what="$2"
  if ! _services_is_root || ! command -v apt-get >/dev/null 2>&1; then
    return 1
  fi
  _services_log "$what not found; installing Debian package '$package' with apt-get"
  # apt's chatter goes to stderr so it cannot end up in a wrapped command's
  # stdout. A fresh container has no package lists, hence the update.
  apt-get update >&2 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y "$package" >&2
}

# Prints a TCP port on 127.0.0.1 that is free right now. Asking the kernel
# for port 0 is race-free at the moment of asking; between here and the
# server binding it, another process could take it, which is why the start
# functions retry on "address already in use".
_services_free_port() {
  local js='const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
  local runtime port
  for runtime in node "$_SERVICES_REPO_ROOT/node_modules/.bin/bun" bun; do
    if command -v "$runtime" >/dev/null 2>&1; then
      port="$("$runtime" -e "$js" 2>/dev/null </dev/null)" || port=""
      if [[ "$port" =~ ^[0-9]+$ ]]; then
        printf '%s\n' "$port"
        return 0
      fi
    fi
  done
  # No JS runtime: probe random high ports below the kernel's ephemeral range
  # (32768+), so we do not race outgoing connections for a port. A refused
  # connection means nobody is listening.
  local attempt
  for ((attempt = 1; attempt <= 100; attempt++)); do
    port=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      printf '%s\n' "$port"
      return 0
    fi
  done
  _services_log "could not find a free TCP port on 127.0.0.1"
  return 1
}

# --------------------------------------------------------------------------
# PostgreSQL
# --------------------------------------------------------------------------

# Prints the directory holding initdb/pg_ctl/postgres, preferring the newest
# Debian-style versioned install (Debian keeps server binaries off PATH).
_services_find_pg_bin() {
  local newest
  newest="$(
    for f in /usr/lib/postgresql/*/bin/initdb; do
      if [[ -x "$f" ]]; then printf "%s\n" "$f"; fi
    done | sort -V | tail -n 1
  )"
  if [[ -n "$newest" ]]; then
    dirname "$newest"
  elif command -v initdb >/dev/null 2>&1; then
    dirname "$(command -v initdb)"
  else
    return 1
  fi
}

# initdb and postgres refuse to run as root, so as root they run as the
# `postgres` user. The subshell cd keeps them out of a cwd they may not be
# allowed to read (e.g. /root), which otherwise produces noisy warnings.
_services_as_pg() {
  if _services_is_root; then
    (cd / && runuser -u postgres -- "$@")
  else
    "$@"
  fi
}

# Makes a temp dir the server user can own and write. As root that means a
# dir chowned to postgres, and a fallback to /tmp when $TMPDIR lives
# somewhere postgres cannot reach (e.g. under /root).
_services_pg_tmpdir() {
  local base dir
  for base in "${TMPDIR:-/tmp}" /tmp; do
    dir="$(mktemp -d "$base/scheduler-pg.XXXXXX" 2>/dev/null)" || continue
    if ! _services_is_root; then
      printf '%s\n' "$dir"
      return 0
    fi
    if chown postgres: "$dir" && runuser -u postgres -- test -w "$dir"; then
      printf '%s\n' "$dir"
      return 0
    fi
    rm -rf "$dir"
  done
  _services_log "could not create a temp dir writable by the postgres user"
  return 1
}

ensure_postgres() {
  if [[ -n "${DATABASE_URL:-}" ]]; then
    export TEST_DATABASE_URL="$DATABASE_URL"
    # Not echoing the URL: it may carry a password into CI logs.
    _services_log "postgres from DATABASE_URL"
    # The failover drill still runs a primary and a standby of its own: it needs the
    # server programs even when the tests' database is elsewhere.
    local drill_bin
    if ! drill_bin="$(_services_find_pg_bin)"; then
      _services_apt_install postgresql "PostgreSQL server (initdb, for the failover drill)" || true
      drill_bin="$(_services_find_pg_bin)" || drill_bin=""
    fi
    export PG_BIN="$drill_bin"
    return 0
  fi
  # Sourced twice or called twice: one server is enough.
  if [[ -n "${_SERVICES_PG_URL:-}" ]]; then
    export TEST_DATABASE_URL="$_SERVICES_PG_URL" PG_BIN="$_SERVICES_PG_BIN"
    return 0
  fi

  local bin
  if ! bin="$(_services_find_pg_bin)"; then
    _services_apt_install postgresql "PostgreSQL server (initdb)" || true
    if ! bin="$(_services_find_pg_bin)"; then
      _services_log "PostgreSQL server binaries (initdb) not found: install PostgreSQL (Debian: apt-get install postgresql) or set DATABASE_URL"
      return 1
    fi
  fi

  if _services_is_root; then
    if ! command -v runuser >/dev/null 2>&1; then
      _services_log "running as root needs runuser (util-linux) to start postgres as a non-root user; or set DATABASE_URL"
      return 1
    fi
    if ! id -u postgres >/dev/null 2>&1; then
      useradd -r -m postgres || {
        _services_log "could not create the postgres user"
        return 1
      }
    fi
  fi

  local dir
  dir="$(_services_pg_tmpdir)" || return 1
  # Registered before anything can fail, so a half-started cluster is removed.
  # pg_ctl only runs if a postmaster may exist; "immediate" because the data
  # is thrown away anyway, so a clean checkpoint would only cost time.
  local q_dir q_bin
  printf -v q_dir '%q' "$dir"
  printf -v q_bin '%q' "$bin"
  services_on_exit "if [[ -f $q_dir/data/postmaster.pid ]]; then _services_as_pg $q_bin/pg_ctl -D $q_dir/data -m immediate stop >/dev/null 2>&1; fi; rm -rf $q_dir"

  # UTF8 with the C locale: without it, initdb takes the encoding from the
  # environment's locale, which in minimal CI images is POSIX, giving a
  # SQL_ASCII database that accepts any bytes and behaves unlike production.
  # --no-sync: a throwaway cluster need not survive a power cut.
  if ! _services_as_pg "$bin/initdb" -D "$dir/data" -A trust -U postgres --no-sync \
    -E UTF8 --locale=C >"$dir/initdb.log" 2>&1; then
    _services_log "initdb failed; its output:"
    sed 's/^/  /' "$dir/initdb.log" >&2
    return 1
  fi

  # Two profiles (SERVICES_PG_PROFILE). "test" (the default): durability off
  # (fsync etc.), because nothing here needs to survive a crash and it makes
  # schema-heavy test setup much faster. "bench": production durability, because
  # a commit's flush is the cost that dominates delivery in production and a
  # bench without it measures something else; "bench-fast" is the bench on the
  # test settings, for a quick look, and the benches say so in their output.
  # Both bench profiles load pg_stat_statements when the server has it, so the
  # benches can count statements per job. Many connections because test suites
  # run pools in parallel. The socket goes in our own dir, as the default
  # (/var/run/postgresql) may not exist or may belong to the system cluster.
  local profile="${SERVICES_PG_PROFILE:-test}" durability extra=""
  case "$profile" in
    test | bench-fast) durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off" ;;
    bench) durability="-c fsync=on -c synchronous_commit=on -c full_page_writes=on" ;;
    *)
      _services_log "SERVICES_PG_PROFILE must be test, bench or bench-fast (got '$profile')"
      return 1
      ;;
  esac
  if [[ "$profile" != test && -f "$bin/../lib/pg_stat_statements.so" ]]; then
    extra="-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.max=10000"
  fi
  local port attempt
  for attempt in 1 2 3; do
    port="$(_services_free_port)" || return 1
    if _services_as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
      -o "-p $port -k $q_dir -c listen_addresses=127.0.0.1 $durability $extra -c max_connections=400 -c shared_buffers=256MB" \
      start >/dev/null 2>&1; then
      break
    fi
    # Someone took the port between our probe and the bind: try another.
    # Any other failure will not fix itself, so report it now.
    if [[ $attempt -lt 3 ]] && grep -q 'already in use' "$dir/postgres.log" 2>/dev/null; then
      : >"$dir/postgres.log"
      continue
    fi
    _services_log "postgres failed to start; end of its log:"
    tail -n 20 "$dir/postgres.log" 2>/dev/null | sed 's/^/  /' >&2
    return 1
  done

  local version
  version="$("$bin/postgres" -V 2>/dev/null | sed -E 's/^[^0-9]*([0-9]+).*/\1/')" || version=""
  _SERVICES_PG_URL="postgres://postgres@127.0.0.1:$port/postgres"
  _SERVICES_PG_BIN="$bin"
  export TEST_DATABASE_URL="$_SERVICES_PG_URL"
  # Tests that start their own clusters (failover, restarts) need the same
  # server version we just used, not whatever happens to be on PATH.
  export PG_BIN="$bin"
  if [[ -n "$extra" ]]; then
    # The view lives in whichever database has the extension; the admin database will do.
    _services_as_pg "$bin/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qAt \
      -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements" >/dev/null 2>&1 ||
      _services_log "could not create the pg_stat_statements extension; statement counts will be missing"
  fi
  _services_log "postgres ${version:-?} on 127.0.0.1:$port (throwaway, $profile settings)"
}

# --------------------------------------------------------------------------
# Redis
# --------------------------------------------------------------------------

# True once the server on $1 answers PING. Uses redis-cli when present, else
# speaks RESP over bash's /dev/tcp, since some distros package the CLI
# separately from the server.
_services_redis_ping() {
  local port="$1" reply
  if command -v redis-cli >/dev/null 2>&1; then
    reply="$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" || return 1
    [[ "$reply" == PONG ]]
  else
    (
      exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
      printf 'PING\r\n' >&3
      IFS= read -r -t 2 reply <&3 || exit 1
      [[ "$reply" == "+PONG"* ]]
    ) 2>/dev/null
  fi
}

# Stops the redis whose pidfile is $1, waiting for it to exit so the caller
# can delete its directory without racing its last log writes.
_services_redis_stop() {
  local pidfile="$1" pid i
  [[ -f "$pidfile" ]] || return 0
  pid="$(cat "$pidfile" 2>/dev/null)" || return 0
  [[ "$pid" =~ ^[0-9]+$ ]] || return 0
  kill "$pid" 2>/dev/null || return 0
  for ((i = 1; i <= 50; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
}

ensure_redis() {
  if [[ -n "${REDIS_URL:-}" ]]; then
    export TEST_REDIS_URL="$REDIS_URL"
    _services_log "redis from REDIS_URL"
    # The index fault tests still start (and SIGKILL) a redis-server of their own.
    if ! command -v redis-server >/dev/null 2>&1; then
      _services_apt_install redis-server "redis-server" || true
    fi
    return 0
  fi
  if [[ -n "${_SERVICES_REDIS_URL:-}" ]]; then
    export TEST_REDIS_URL="$_SERVICES_REDIS_URL"
    return 0
  fi

  if ! command -v redis-server >/dev/null 2>&1; then
    _services_apt_install redis-server "redis-server" || true
    if ! command -v redis-server >/dev/null 2>&1; then
      _services_log "redis-server not found: install Redis (Debian: apt-get install redis-server) or set REDIS_URL"
      return 1
    fi
  fi

  local dir
  dir="$(mktemp -d "${TMPDIR:-/tmp}/scheduler-redis.XXXXXX")" || {
    _services_log "could not create a temp dir for redis"
    return 1
  }
  local q_dir
  printf -v q_dir '%q' "$dir"
  services_on_exit "_services_redis_stop $q_dir/redis.pid; rm -rf $q_dir"

  # No persistence: tests must not see data from a previous run, and writing
  # snapshots would only slow them down. Daemonized so that redis-server
  # returns once it has forked; the pidfile is then how cleanup finds it.
  local port attempt i pid started
  for attempt in 1 2 3; do
    port="$(_services_free_port)" || return 1
    rm -f "$dir/redis.pid" "$dir/redis.log"
    redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
      --daemonize yes --dir "$dir" --pidfile "$dir/redis.pid" \
      --logfile "$dir/redis.log" >/dev/null 2>&1 </dev/null || true
    # With --daemonize, redis-server's exit status says nothing about
    # whether the daemon managed to bind, so wait for it to answer.
    started=""
    for ((i = 1; i <= 100; i++)); do
      if _services_redis_ping "$port"; then
        started=1
        break
      fi
      # Daemon already gone (bad port, bad flag): no point waiting 10s.
      if [[ -f "$dir/redis.pid" ]]; then
        pid="$(cat "$dir/redis.pid" 2>/dev/null)" || pid=""
        if [[ "$pid" =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null; then
          break
        fi
      fi
      sleep 0.1
    done
    if [[ -n "$started" ]]; then
      break
    fi
    _services_redis_stop "$dir/redis.pid"
    if [[ $attempt -lt 3 ]] && grep -q 'already in use' "$dir/redis.log" 2>/dev/null; then
      continue
    fi
    _services_log "redis-server failed to start; end of its log:"
    tail -n 20 "$dir/redis.log" 2>/dev/null | sed 's/^/  /' >&2
    return 1
  done

  local version
  version="$(redis-server --version 2>/dev/null | sed -nE 's/.*v=([0-9.]+).*/\1/p')" || version=""
  _SERVICES_REDIS_URL="redis://127.0.0.1:$port"
  export TEST_REDIS_URL="$_SERVICES_REDIS_URL"
  _services_log "redis ${version:-?} on 127.0.0.1:$port (throwaway)"
}

# --------------------------------------------------------------------------
# Chromium (the dashboard's browser tests, test/ui)
# --------------------------------------------------------------------------

# Exports CHROMIUM_PATH. Debian's package rather than a browser download by playwright:
# no network fetch from the tests, and the same binary CI and developers use. Failing here
# is not fatal for the run: the dashboard tests then fail with a clear message themselves.
ensure_chromium() {
  local path="${CHROMIUM_PATH:-}"
  if [[ -z "$path" ]]; then
    path="$(command -v chromium 2>/dev/null)" || path=""
  fi
  if [[ -z "$path" || ! -x "$path" ]]; then
    _services_apt_install chromium "chromium (for the dashboard tests)" || true
    path="$(command -v chromium 2>/dev/null)" || path=""
  fi
  if [[ -z "$path" || ! -x "$path" ]]; then
    _services_log "chromium not found: the dashboard tests (test/ui) will fail; install it (Debian: apt-get install chromium) or set CHROMIUM_PATH"
    return 1
  fi
  export CHROMIUM_PATH="$path"
  local version
  # Debian's wrapper script prints a shell warning on some systems; only the version line matters.
  version="$("$path" --version 2>/dev/null | sed -nE 's/^Chromium ([0-9.]+).*/\1/p')" || version=""
  _services_log "chromium ${version:-?} at $path"
}
