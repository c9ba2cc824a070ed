# One image for the three services; docker-compose.yml picks the service with `command`.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force
COPY lib ./lib
COPY agent-server ./agent-server
COPY mcp-gateway ./mcp-gateway
COPY tool-server ./tool-server
COPY toolsets ./toolsets
COPY cli ./cli
COPY bin ./bin
COPY start ./start
COPY prompts ./prompts
COPY client.ts ./
ENV HOST=0.0.0.0 TOOLSHIFT_DATA_DIR=/data FS_ROOTS=/workspace TOOLSETS_DIR=/app/toolsets
# FS_ROOTS entries must exist (a mounted volume replaces this empty one).
RUN mkdir -p /workspace /data
EXPOSE 8000 8080 8001
CMD ["npm", "start"]
