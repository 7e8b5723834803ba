# syntax=docker/dockerfile:1
# taskgate container image: build with `docker build -t taskgate .`, or run the whole stack with
# `docker compose -f docker/compose.yaml up --build`.
ARG NODE_IMAGE=node:24-slim

# --- build: compile TypeScript with the full (dev) dependency set ---
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# --- runtime: production dependencies and compiled output only ---
FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY config ./config
# The default config; mount your own file over it, or point TASKGATE_CONFIG elsewhere.
COPY config/taskgate.docker.yaml /etc/taskgate/taskgate.yaml
ENV TASKGATE_CONFIG=/etc/taskgate/taskgate.yaml
# Files stay root-owned and read-only to the process; it runs as the image's unprivileged `node` user.
USER node
EXPOSE 8080
# slim images have no curl: probe /healthz with Node's own fetch.
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.TASKGATE_PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# Node handles SIGTERM itself (graceful shutdown); run with `--init` (compose: `init: true`) so stdio upstreams'
# orphaned children are reaped. One gateway process per core: TASKGATE_WORKERS=auto (with the Redis store;
# docs/operations.md: One process per core).
CMD ["node", "dist/cli.js", "serve"]
