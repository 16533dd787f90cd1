# syntax=docker/dockerfile:1
#
# supplier-sync container image: multi-stage, production dependencies only, non-root.
#
#   docker build -t supplier-sync .                       (or: podman build --format docker ...)
#   docker build --secret id=ca,src=corp-ca.pem -t supplier-sync .
#       behind a TLS-inspecting proxy: the PEM bundle is trusted by npm during the
#       build only (a build secret never lands in a layer).
#   docker run supplier-sync supplier-sync migrate        one-shot commands
#   docker run supplier-sync supplier-sync-simulator --host 0.0.0.0   the demo simulator
#
# The default command is the daemon. Embedded PostgreSQL (a dev dependency) is not in
# the image: DATABASE_URL is required (NODE_ENV=production makes its absence exit 2).

ARG BASE_IMAGE=node:24-bookworm-slim

# ---- build: all dependencies, compile TypeScript, then drop dev dependencies ----------
FROM ${BASE_IMAGE} AS build
WORKDIR /app
ENV npm_config_fund=false \
    npm_config_audit=false \
    npm_config_update_notifier=false

COPY package.json package-lock.json ./
# --ignore-scripts: tsc needs no install script, and the production dependencies have
# none; the ones that do (embedded-postgres, esbuild) are dev-only tools never shipped.
# NODE_EXTRA_CA_CERTS adds the corporate CA to Node's roots (npm's `cafile` would
# replace them, breaking registries the proxy does not intercept).
RUN --mount=type=secret,id=ca,required=false \
    if [ -s /run/secrets/ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/ca; fi; \
    npm ci --ignore-scripts

COPY tsconfig.json tsconfig.build.json ./
COPY cmd cmd
COPY internal internal
RUN npm run build \
 && npm prune --omit=dev --ignore-scripts \
 && find node_modules -mindepth 1 -maxdepth 1 -type d -empty -delete

# ---- runtime ---------------------------------------------------------------------------
FROM ${BASE_IMAGE} AS runtime
WORKDIR /app
ENV NODE_ENV=production \
    SUPPLIER_SYNC_HTTP_ADDR=0.0.0.0:9464 \
    SUPPLIER_SYNC_CONNECTORS_DIR=/app/config/suppliers

# Everything is owned by root and read-only to the process: it writes nothing locally.
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY drizzle ./drizzle
COPY config/suppliers ./config/suppliers
# Commands on PATH: wrappers that exec node, so node still replaces the shell as PID 1.
# --heap-growing-percent=25: extra margin. The peak RSS at 1M SKUs is within the 160 MB
# target without any flag (bench/README.md, Memory without heap flags); with it the old
# generation grows by 25 % after a full GC instead of up to 4x, a few MB lower still. A
# growth heuristic, not a cap. It is a node flag, not an environment setting: Node
# refuses it in NODE_OPTIONS.
# NODE_OPTIONS still takes the allowed sizing flags (e.g. --max-old-space-size=384).
RUN printf '#!/bin/sh\nexec node --heap-growing-percent=25 /app/dist/cmd/supplier-sync/main.js "$@"\n' >/usr/local/bin/supplier-sync \
 && printf '#!/bin/sh\nexec node /app/dist/internal/simulator/main.js "$@"\n' >/usr/local/bin/supplier-sync-simulator \
 && chmod 0755 /usr/local/bin/supplier-sync /usr/local/bin/supplier-sync-simulator

# Numeric uid:gid (the base image's `node` user) so Kubernetes runAsNonRoot can verify it.
USER 1000:1000
EXPOSE 9464

# Probes /livez on the port of SUPPLIER_SYNC_HTTP_ADDR (a wildcard host is probed on
# loopback). Node, because the slim base has no curl or wget.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD node -e 'const a=process.env.SUPPLIER_SYNC_HTTP_ADDR||"127.0.0.1:9464";const i=a.lastIndexOf(":");let h=a.slice(0,i).replace(/^\[|\]$/g,"");if(h===""||h==="0.0.0.0")h="127.0.0.1";if(h==="::")h="::1";require("http").get({host:h,port:+a.slice(i+1),path:"/livez",timeout:4000},r=>process.exit(r.statusCode===200?0:1)).on("error",()=>process.exit(1)).on("timeout",()=>process.exit(1))'

# Exec form: node is PID 1 (the wrapper execs it) and receives SIGTERM directly, so the
# graceful shutdown runs. Stop grace period must exceed SUPPLIER_SYNC_SHUTDOWN_TIMEOUT.
CMD ["supplier-sync"]
