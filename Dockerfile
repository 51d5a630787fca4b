# syntax=docker/dockerfile:1
#
# Two stages: build the single binary with the pinned Bun from package-lock.json, then ship
# only that binary on a small glibc base. The binary needs nothing else at run time: the
# SQL files and PGlite's wasm/data are embedded in it.
#
#   docker build -t scheduler .
#   docker run -p 8080:8080 -v scheduler-data:/var/lib/scheduler scheduler     # embedded PGlite
#   docker run -e DATABASE_URL=postgres://… scheduler --mode=worker             # one role

# ---- build ------------------------------------------------------------------------------
# Node, not oven/bun: Bun is an npm devDependency here, so `npm ci` installs exactly the
# version in package-lock.json (its postinstall step runs under node).
FROM node:22-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# npm ci runs the postinstall script, patch-package, which applies patches/ to node_modules
# (postgres.js, see patches/): they must be here before it, or the binary would embed the
# unpatched driver (patch-package finds no patches and says nothing is wrong).
COPY patches ./patches
RUN npm ci --no-audit --no-fund
COPY . .
# Runs scripts/build.ts, which also smoke-tests `dist/scheduler --version`.
RUN npm run build

# ---- run --------------------------------------------------------------------------------
# glibc is required: the compiled binary does not run on alpine or distroless/static.
FROM debian:bookworm-slim
# ca-certificates: HTTPS webhook targets and TLS to Postgres/Upstash.
# tzdata: IANA time zones for schedules, whatever the binary's own ICU data lacks.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 scheduler \
 && useradd --system --uid 10001 --gid scheduler --home-dir /var/lib/scheduler --shell /usr/sbin/nologin scheduler \
 && install -d -o scheduler -g scheduler -m 0750 /var/lib/scheduler
COPY --from=build /src/dist/scheduler /usr/local/bin/scheduler
USER scheduler:scheduler
# Without DATABASE_URL the embedded database lives in ./data, i.e. here: mount a volume on
# this directory to keep it.
WORKDIR /var/lib/scheduler
ENV PORT=8080
# The JS engine sizes its garbage collection by the RAM it believes the machine has, and in a
# container it sees the host's. Told 1 GiB, it collects the garbage of a burst of calls sooner:
# peak RSS 130 MiB instead of 201 through a 50,000-job herd, at the same CPU per job (bench/README.md,
# "memory"). A larger value for a larger machine; the scheduler itself needs far less.
ENV BUN_JSC_forceRAMSize=1073741824
EXPOSE 8080
# The scheduler stops gracefully on SIGTERM (no new claims, finishes calls in flight).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/scheduler"]
CMD ["--mode=all"]
