import { databaseHealth, StoreUnavailable } from '../../lib/db/reachability.ts';
import { callRoute, type ServiceEndpoint, ServiceError } from '../../lib/http/http-client.ts';
import { gatewayRoutes } from '../../mcp-gateway/contract.ts';
import type { ModelHealth } from '../clients/model.ts';
import type { TaskStatus } from '../contract.ts';
import type { TaskStore } from '../store/interface.ts';
import type { Agent } from '../tasks/agent.ts';
import { approvalsInSight } from '../tasks/threads.ts';
import type { ServiceHealth } from './pages.ts';

// What the console's Overview shows: each part's state (the agent-server with its model endpoint and name, the
// database in use, the gateway, the tool-server behind it), the task counts, pending approvals, recent
// failures and the upstream servers' health. A part that does not answer is shown as down with why, beside the
// rest: the page is still served while the database or the gateway is away.

export interface OverviewDeps {
  agent: Agent;
  store: TaskStore;
  modelHealth?: () => ModelHealth;
  /** The model the tasks use: its name and endpoint (absent: OpenAI's default). */
  model?: { name: string; baseURL?: string; provider?: string };
  /** Which database the agent-server uses, in words (lib/db/reachability.ts describeDatabase). */
  database?: string;
}

/** A gateway answer, or the reason it could not be had (the page says so instead of failing). */
export async function attempt<T>(
  work: Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; error: string }> {
  try {
    return { ok: true, value: await work };
  } catch (err) {
    if (err instanceof ServiceError || err instanceof StoreUnavailable)
      return { ok: false, error: err.message };
    throw err;
  }
}

/** `owner`: the tasks counted and listed are theirs only; `visible`: the approvals of these users only. */
export async function loadOverview(
  deps: OverviewDeps,
  gateway: ServiceEndpoint,
  scope: { owner?: string; visible?: readonly string[] } = {},
) {
  const { owner, visible } = scope;
  const [gatewayHealth, toolsets, counts, approvals, failures] = await Promise.all([
    attempt(callRoute(gateway, gatewayRoutes.health)),
    attempt(callRoute(gateway, gatewayRoutes.listToolsets)),
    attempt(deps.store.countTasks(owner)),
    attempt(deps.agent.pendingApprovals().then((all) => approvalsInSight(deps.store, all, visible))),
    attempt(deps.store.recentTasks(8, { status: 'failed', ...(owner ? { owner } : {}) })),
  ]);
  const services: ServiceHealth[] = [
    agentHealth(deps),
    databaseCard(deps.database),
    gatewayHealth.ok
      ? { name: 'mcp-gateway', state: 'ok', detail: 'answering' }
      : { name: 'mcp-gateway', state: 'down', detail: gatewayHealth.error },
    backendHealth(gatewayHealth),
  ];
  const upstreams = toolsets.ok
    ? toolsets.value.toolsets.flatMap((t) =>
        t.health ? [{ id: t.id, health: t.health, reason: t.health_reason }] : [],
      )
    : [];
  return {
    services,
    counts: counts.ok ? counts.value : ({} as Partial<Record<TaskStatus, number>>),
    approvals: approvals.ok ? approvals.value.length : undefined,
    failures: failures.ok ? failures.value : [],
    upstreams,
    /** Why the task figures are missing (the database did not answer). */
    unavailable: [counts, approvals, failures].find((r) => !r.ok)?.error,
  };
}

function agentHealth(deps: OverviewDeps): ServiceHealth {
  if (!deps.agent.modelConfigured)
    return {
      name: 'agent-server',
      state: 'degraded',
      detail: 'no model configured (OPENAI_API_KEY or OPENAI_BASE_URL; for Anthropic, ANTHROPIC_API_KEY)',
    };
  const model = deps.modelHealth?.();
  const which = deps.model
    ? `model ${deps.model.name}${deps.model.provider ? ` (${deps.model.provider})` : ''} at ${deps.model.baseURL ?? "OpenAI's default endpoint"}`
    : 'model';
  return {
    name: 'agent-server',
    state: model?.state === 'unreachable' || model?.state === 'error' ? 'degraded' : 'ok',
    detail: `${which}: ${model?.state ?? 'scripted'}${model?.error ? ` (${model.error})` : ''}`,
  };
}

/** The database in use and whether this process reaches it (its last statements' word). */
function databaseCard(database: string | undefined): ServiceHealth {
  const health = databaseHealth();
  const name = database ?? 'SQLite';
  return health.state === 'ok'
    ? { name: 'database', state: 'ok', detail: name }
    : {
        name: 'database',
        state: 'down',
        detail: `${name}: unreachable since ${health.since} (${health.error})`,
      };
}

function backendHealth(health: { ok: true; value: unknown } | { ok: false; error: string }): ServiceHealth {
  const body = health.ok ? health.value : undefined;
  const backends = (body as { backends?: Record<string, { ok: boolean; error?: string }> } | undefined)
    ?.backends;
  const tools = backends?.['tool-server'];
  if (!tools) return { name: 'tool-server', state: health.ok ? 'ok' : 'down', detail: 'through the gateway' };
  return tools.ok
    ? { name: 'tool-server', state: 'ok', detail: 'answering the gateway' }
    : { name: 'tool-server', state: 'down', detail: tools.error ?? 'not answering the gateway' };
}
