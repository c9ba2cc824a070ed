# toolshift's image: `docker run` starts the three services in one process (`toolshift serve`);
# docker-compose.yml runs one per container (`toolshift serve <service>`). Node runs the TypeScript sources
# with its type stripping, so there is no build step. tests/system/image.test.ts derives what the entry point
# imports and checks every module, and the files read at run time, are COPY'd below.

# Dependencies, without the dev ones. better-sqlite3 fetches a prebuilt binary when one exists for this Node;
# the compilers are there for when none does, and stay in this stage.
FROM node:26-slim AS deps
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM node:26-slim
# git for git_tools; the certificates for web_tools and model endpoints over https.
RUN apt-get update \
  && apt-get install -y --no-install-recommends git ca-certificates \
  && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production HOST=0.0.0.0 TOOLSHIFT_DATA_DIR=/data FS_ROOTS=/workspace
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY bin ./bin
COPY start ./start
COPY client.ts ./
COPY cli ./cli
COPY lib ./lib
COPY agent-server ./agent-server
COPY mcp-gateway ./mcp-gateway
COPY tool-server ./tool-server
COPY toolsets ./toolsets
COPY prompts ./prompts
# The data, the workspace and compose's shared credentials volume belong to the unprivileged `node` user
# (a named volume takes the ownership of the directory it is mounted on).
RUN mkdir -p /data /workspace /credentials && chown node:node /data /workspace /credentials
USER node
VOLUME ["/data", "/workspace"]
EXPOSE 8000 8080 8001
# The agent-server's /health (the last service to start); compose checks each service on its own port.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.AGENT_PORT||8000)+'/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "bin/toolshift.js", "serve"]
