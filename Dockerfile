# Shoal's container image: `shoal serve` on the model repository mounted at /models.
#
#   podman build -t shoal .                 (or docker build; --build-arg BASE=node:22-bookworm-slim)
#   podman run -p 8000:8000 -v "$PWD/examples/models:/models:ro" shoal
#
# Every flag is also an environment variable (SHOAL_WORKERS=2, SHOAL_TIMEOUT=5000, ...: see the
# README's Flags). To serve a server script of your own, see docs/deploy.md.

# The Node.js image (20 or later) every stage starts from.
ARG BASE=node:20-bookworm-slim

# The production dependencies, installed from the lock file. No install scripts: onnxruntime-node's
# would download GPU providers; its CPU backend is in the package.
FROM ${BASE} AS deps
WORKDIR /app
ENV ONNXRUNTIME_NODE_INSTALL=skip NPM_CONFIG_UPDATE_NOTIFIER=false
COPY package.json package-lock.json .npmrc ./
# onnxruntime-node ships its native library for every platform: keep this one's.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force \
 && ort=node_modules/onnxruntime-node/bin/napi-v6 \
 && find "$ort" -mindepth 2 -maxdepth 2 -type d ! -path "$ort/$(node -p process.platform)/$(node -p process.arch)" -exec rm -rf {} +

# The compiled JavaScript: the compiler and Node's types only (the lock file's versions), not the
# development dependencies the tests and benchmarks need. Then the package as npm would publish
# it (package.json's "files": dist/ and the other files it ships), unpacked in /package. The image
# has no node-llama-cpp (an optional peer of 680 MB): `shoal/llama` compiles against a stand-in of its types.
FROM deps AS build
RUN mkdir /tools && cd /tools && npm install --no-save --no-package-lock --ignore-scripts --no-audit --no-fund \
      "typescript@$(node -p "require('/app/package-lock.json').packages['node_modules/typescript'].version")" \
      "@types/node@$(node -p "require('/app/package-lock.json').packages['node_modules/@types/node'].version")"
COPY . ./
RUN /tools/node_modules/.bin/tsc -p deploy/container/tsconfig.image.json --typeRoots /tools/node_modules/@types \
 && npm pack --ignore-scripts --pack-destination /tmp >/dev/null \
 && mkdir /package && tar -xzf /tmp/shoal-*.tgz -C /package --strip-components=1

FROM ${BASE}
WORKDIR /app
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /package/ ./
# The modules of a mounted model repository, and server scripts copied into the image, import
# "shoal" from wherever they are: Node looks for it in /node_modules last.
RUN mkdir -p /node_modules /models && ln -s /app /node_modules/shoal
ENV NODE_ENV=production SHOAL_LOG_FORMAT=json SHOAL_GRPC_PORT=8001
# glibc's malloc with large blocks mapped on their own: each ONNX model then costs its weights, not
# 2-3 MiB more (src/workers/allocator.ts; shoal serve sets it itself only on Node 22.15 and later).
ENV GLIBC_TUNABLES=glibc.malloc.mmap_threshold=262144
# A user with no other rights; numeric, so that Kubernetes can check runAsNonRoot.
USER 10001:10001
VOLUME /models
# HTTP (REST, probes, metrics), and gRPC.
EXPOSE 8000 8001
# Node is PID 1 and handles SIGTERM itself: Shoal drains (every accepted request is answered
# within --timeout), stops its workers and exits 0.
ENTRYPOINT ["node", "/app/dist/cli/main.js"]
CMD ["serve", "--model-repository", "/models"]
