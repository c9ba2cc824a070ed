import { readFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { loadConfig } from '../../lib/config/config.ts';
import { withCredentials } from '../../lib/config/credentials.ts';
import { installBase } from '../../lib/http/http.ts';
import { type ServiceName, securityFor } from '../../lib/http/security.ts';
import { log } from '../helpers/stack.ts';

interface Service {
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  expose?: string[];
  volumes?: string[];
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
  profiles?: string[];
  build?: string;
  image?: string;
}

const compose = parse(readFileSync('docker-compose.yml', 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
};
const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> };
const defaults = loadConfig({});

describe('docker-compose.yml', () => {
  const core = Object.entries(compose.services).filter(([, s]) => !s.profiles);

  it('has one container per service, each built from this repo and started as `toolshift serve <service>`', () => {
    expect(core.map(([name]) => name).sort()).toEqual(['agent-server', 'mcp-gateway', 'tool-server']);
    const scripts = {
      'agent-server': 'start:agent',
      'mcp-gateway': 'start:gateway',
      'tool-server': 'start:tools',
    };
    for (const [name, s] of core) {
      expect(s.build).toBe('.');
      // Node itself is the container's process (no npm in between to hold or drop SIGTERM), and the command
      // is the one the service's npm script runs.
      expect(s.command).toEqual(['node', 'bin/toolshift.js', 'serve', name]);
      expect(pkg.scripts[scripts[name as keyof typeof scripts]]).toBe(`${s.command?.join(' ')}`);
    }
  });

  it('publishes the agent and gateway on host loopback only, keeps the tool-server internal, and health-checks each', () => {
    const ports = {
      'agent-server': defaults.agent.port,
      'mcp-gateway': defaults.gateway.port,
      'tool-server': defaults.tools.port,
    };
    for (const [name, s] of core) {
      const port = ports[name as keyof typeof ports];
      if (name === 'tool-server') {
        expect(s.ports).toBeUndefined();
        expect(s.expose).toEqual([String(port)]);
      } else {
        expect(s.ports).toEqual([`127.0.0.1:${port}:${port}`]);
      }
      expect(s.environment?.HOST).toBe('0.0.0.0');
      expect(s.healthcheck?.test.join(' ')).toContain(`127.0.0.1:${port}/health`);
    }
  });

  it('wires each service to the next by service name and port, waiting for it to be healthy', () => {
    const s = compose.services;
    expect(s['agent-server'].environment?.GATEWAY_URL).toBe(`http://mcp-gateway:${defaults.gateway.port}`);
    expect(s['mcp-gateway'].environment?.TOOL_SERVER_URL).toBe(`http://tool-server:${defaults.tools.port}`);
    expect(s['agent-server'].depends_on?.['mcp-gateway'].condition).toBe('service_healthy');
    expect(s['mcp-gateway'].depends_on?.['tool-server'].condition).toBe('service_healthy');
    for (const key of ['OPENAI_BASE_URL', 'OPENAI_API_KEY', 'AGENT_MODEL']) {
      expect(s['agent-server'].environment).toHaveProperty(key);
    }
  });

  it('mounts the workspace where the tool-server’s FS_ROOTS points, and persists the databases', () => {
    const tools = compose.services['tool-server'];
    const root = tools.environment?.FS_ROOTS;
    expect(tools.volumes?.some((v) => v.endsWith(`:${root}`))).toBe(true);
    for (const name of ['agent-server', 'mcp-gateway']) {
      const s = compose.services[name];
      expect(s.volumes?.some((v) => v.endsWith(`:${s.environment?.TOOLSHIFT_DATA_DIR}`))).toBe(true);
    }
  });

  describe('the `scale` profile', () => {
    const scaled = Object.entries(compose.services).filter(([, svc]) => svc.profiles?.includes('scale'));
    const s = compose.services;
    const nginx = readFileSync('deploy/scale/nginx.conf', 'utf8');
    const upstream = (name: string) =>
      [
        ...(nginx.match(new RegExp(`upstream ${name} \\{([^}]*)\\}`))?.[1] ?? '').matchAll(
          /server ([\w.-]+:\d+)/g,
        ),
      ].map((m) => m[1]);

    it('runs PostgreSQL, two gateways, an agent API, two workers and a load balancer, all behind the profile', () => {
      expect(scaled.map(([name]) => name).sort()).toEqual(
        ['agent-api', 'gateway-1', 'gateway-2', 'lb', 'postgres', 'worker-1', 'worker-2'].sort(),
      );
      expect(s['gateway-1'].command).toEqual(['node', 'bin/toolshift.js', 'serve', 'mcp-gateway']);
      expect(s['gateway-2'].command).toEqual(['node', 'bin/toolshift.js', 'serve', 'mcp-gateway']);
      expect(s['agent-api'].command).toEqual(['node', 'bin/toolshift.js', 'serve', 'agent-api']);
      expect(s['worker-1'].command).toEqual(['node', 'bin/toolshift.js', 'serve', 'worker']);
      expect(s['worker-2'].command).toEqual(['node', 'bin/toolshift.js', 'serve', 'worker']);
      expect(pkg.scripts['start:agent-api']).toBe('node bin/toolshift.js serve agent-api');
      expect(pkg.scripts['start:worker']).toBe('node bin/toolshift.js serve worker');
    });

    it('shares one PostgreSQL between every gateway and agent process, and gives each gateway its own data dir', () => {
      const url = s['agent-api'].environment?.DATABASE_URL;
      expect(url).toMatch(
        /^postgres:\/\/toolshift:\$\{POSTGRES_PASSWORD:-toolshift\}@postgres:5432\/toolshift$/,
      );
      for (const name of ['gateway-1', 'gateway-2', 'worker-1', 'worker-2']) {
        expect(s[name].environment?.DATABASE_URL).toBe(url);
        expect(s[name].depends_on?.postgres.condition).toBe('service_healthy');
      }
      const dataVolume = (name: string) => s[name].volumes?.find((v) => v.endsWith(':/data'));
      expect(dataVolume('gateway-1')).toBe('gateway-1-data:/data');
      expect(dataVolume('gateway-2')).toBe('gateway-2-data:/data');
      expect(compose.volumes).toHaveProperty('postgres-data');
      expect(s.postgres.ports).toBeUndefined();
      expect(s.postgres.healthcheck?.test).toContain('pg_isready');
    });

    it('balances the agent API and both gateways, and every process reaches the gateways through it', () => {
      expect(upstream('gateways')).toEqual(['gateway-1:8080', 'gateway-2:8080']);
      expect(upstream('agent_api')).toEqual(['agent-api:8000']);
      expect(nginx).toContain('proxy_buffering off'); // event streams pass through as written
      expect(s.lb.ports).toEqual(['127.0.0.1:9000:8000', '127.0.0.1:9080:8080']);
      expect(s.lb.volumes).toContain('./deploy/scale/nginx.conf:/etc/nginx/nginx.conf:ro');
      for (const name of ['agent-api', 'worker-1', 'worker-2'])
        expect(s[name].environment?.GATEWAY_URL).toBe('http://lb:8080');
      // The balancer waits for what it fronts; the workers, which reach the gateways through it, wait for it.
      for (const name of ['gateway-1', 'gateway-2', 'agent-api'])
        expect(s.lb.depends_on?.[name].condition).toBe('service_healthy');
      for (const name of ['worker-1', 'worker-2'])
        expect(s[name].depends_on?.lb.condition).toBe('service_healthy');
      expect(Object.keys(s.lb.depends_on ?? {})).not.toContain('worker-1');
      for (const name of ['gateway-1', 'gateway-2', 'agent-api', 'worker-1', 'worker-2']) {
        expect(s[name].healthcheck?.test.join(' ')).toMatch(/127\.0\.0\.1:80[08]0\/health/);
        expect(s[name].ports).toBeUndefined();
      }
      // nginx 1.27.3+ looks the replicas' names up again (`resolve`); the image pins a line that has it.
      expect(s.lb.image).toBe('nginx:1.28-alpine');
      expect(nginx).toMatch(/server gateway-1:8080 resolve/);
      expect(s.lb.healthcheck?.test.join(' ')).toContain('/lb-health');
      expect(nginx).toContain('location = /lb-health');
    });

    it('each replica starts with its tokens and answers the host the load balancer passes on', async () => {
      const shared = path.join(await mkdtemp(path.join(tmpdir(), 'compose-scale-')), 'credentials.json');
      const roles: [string, ServiceName, Record<string, string>][] = [
        ['gateway-1', 'mcp-gateway', {}],
        ['gateway-2', 'mcp-gateway', {}],
        ['agent-api', 'agent-server', { AGENT_ROLE: 'api' }],
        ['worker-1', 'agent-server', { AGENT_ROLE: 'worker' }],
      ];
      for (const [name, service, extra] of roles) {
        const config = withCredentials(
          loadConfig({ ...environment(name, dotenv), ...extra, TOOLSHIFT_CREDENTIALS_FILE: shared }),
        );
        expect(config.databaseUrl).toMatch(/^postgres:\/\/toolshift:toolshift@postgres:5432\/toolshift$/);
        const security = securityFor(config, service);
        const app = new Hono();
        installBase(app, log, security);
        app.get('/probe', (c) => c.json({ ok: true }));
        const token = security.tokens[0].token;
        const host = name.startsWith('worker')
          ? `${name}:8000`
          : name.startsWith('gateway')
            ? 'lb:8080'
            : 'lb:8000';
        expect(
          (await app.request('/probe', { headers: { host, authorization: `Bearer ${token}` } })).status,
        ).toBe(200);
        const rebound = await app.request('/probe', {
          headers: { host: 'evil.example', authorization: `Bearer ${token}` },
        });
        expect(rebound.status).toBe(403);
      }
    });
  });

  it('keeps the model server optional, behind a profile', () => {
    expect(compose.services.ollama.profiles).toEqual(['ollama']);
    expect(compose.services.ollama.healthcheck).toBeDefined();
  });

  /** A service's environment as compose would fill it from a .env holding `dotenv`. */
  function environment(name: string, dotenv: Record<string, string>): Record<string, string> {
    const env: Record<string, string> = {};
    for (const [key, value] of Object.entries(compose.services[name].environment ?? {})) {
      env[key] = value.replace(/\$\{(\w+)(:[?-][^}]*)?\}/g, (_m, v: string, rest?: string) => {
        if (dotenv[v]) return dotenv[v];
        if (rest?.startsWith(':?')) throw new Error(`compose refuses: ${rest.slice(2)}`);
        return rest?.startsWith(':-') ? rest.slice(2) : '';
      });
    }
    return env;
  }
  const dotenv = {
    AGENT_API_TOKEN: 'a'.repeat(32),
    GATEWAY_ADMIN_TOKEN: 'b'.repeat(32),
    GATEWAY_AGENT_TOKEN: 'c'.repeat(32),
    TOOL_SERVER_TOKEN: 'd'.repeat(32),
  };

  it('needs no typed token: every service shares one credentials file, and a token in .env wins', () => {
    for (const name of ['tool-server', 'mcp-gateway', 'agent-server']) {
      const service = compose.services[name];
      expect(service.environment?.TOOLSHIFT_CREDENTIALS_FILE).toBe('/credentials/credentials.json');
      expect(service.volumes).toContain('credentials:/credentials');
      for (const [key, value] of Object.entries(service.environment ?? {})) {
        if (key.endsWith('_TOKEN')) expect(value).toBe(`\${${key}:-}`);
      }
      // Without a .env every variable still has a value: compose starts.
      expect(() => environment(name, {})).not.toThrow();
    }
    expect(compose.volumes).toHaveProperty('credentials');
  });

  it('lets each service start on 0.0.0.0 with its tokens and answer the service name it is reached by', async () => {
    const reachedAs: Record<ServiceName, string> = {
      'tool-server': new URL(compose.services['mcp-gateway'].environment?.TOOL_SERVER_URL ?? '').host,
      'mcp-gateway': new URL(compose.services['agent-server'].environment?.GATEWAY_URL ?? '').host,
      'agent-server': 'agent-server:8000',
    };
    // The shared volume, as a temp file: whichever service starts first makes it, the others read it.
    const shared = path.join(await mkdtemp(path.join(tmpdir(), 'compose-')), 'credentials.json');
    const generated: Record<string, string | undefined> = {};
    for (const [name, host] of Object.entries(reachedAs) as [ServiceName, string][]) {
      const fromFile = withCredentials(
        loadConfig({ ...environment(name, {}), TOOLSHIFT_CREDENTIALS_FILE: shared }),
      );
      // Locked with no .env at all: the service has its tokens, the same ones as its neighbours'.
      const own = securityFor(fromFile, name);
      expect(own.tokens.length).toBeGreaterThan(0);
      for (const t of own.tokens) {
        generated[t.variable] ??= t.token;
        expect(t.token).toBe(generated[t.variable]);
      }
      const config = loadConfig(environment(name, dotenv));
      const security = securityFor(config, name);
      const app = new Hono();
      installBase(app, log, security);
      app.get('/probe', (c) => c.json({ ok: true }));
      const token = security.tokens[0].token;
      const asNeighbour = await app.request('/probe', {
        headers: { host, authorization: `Bearer ${token}` },
      });
      expect(asNeighbour.status).toBe(200);
      const rebound = await app.request('/probe', {
        headers: { host: 'evil.example:8080', authorization: `Bearer ${token}` },
      });
      expect(rebound.status).toBe(403);
      // The same container without its tokens refuses to listen on 0.0.0.0.
      const bare = loadConfig({
        ...environment(name, dotenv),
        ...Object.fromEntries(Object.keys(dotenv).map((k) => [k, ''])),
      });
      expect(() => securityFor(bare, name)).toThrow(/refuses to listen on 0\.0\.0\.0/);
    }
  });
});
