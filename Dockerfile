# Flow Notify, production image (UNTESTED: no container runtime on the machines this project is built on).
# The steps are those test/dist.test.ts runs: compile with the dev dependencies, then a copy with production
# dependencies only (npm ci --omit=dev) that runs dist/. One image, three commands:
#   docker run IMAGE                                   the worker (node --max-semi-space-size=4 dist/worker.js)
#   docker run IMAGE node dist/api/server.js           an API process (set HOST=0.0.0.0)
#   docker run IMAGE bin/flow-notify emit ...          the runner CLI
# Configuration comes from the environment only (docs/production.md, docs/configuration.md); nothing is installed or
# built at start.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY bin ./bin
USER node
CMD ["node", "--max-semi-space-size=4", "dist/worker.js"]
