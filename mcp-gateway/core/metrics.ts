import { Counter, Gauge } from 'prom-client';
import { type Metrics, observeToolCall } from '../../lib/telemetry/metrics.ts';
import type { Gateway } from './gateway.ts';

// The gateway's metrics, recorded around the rules of gateway.ts (whoever calls them: the REST routes, the
// agent's manage_toolsets, the MCP face): tool calls by tool and outcome, toolset activations, active sessions.

/** A session counts as active this long after its last call or toolset change. */
const ACTIVE_MS = 15 * 60 * 1000;

/** The same gateway, with every tool call, activation and session recorded on `m`'s registry. */
export function instrumentGateway(gateway: Gateway, m: Metrics, now: () => number = Date.now): Gateway {
  const registers = [m.registry];
  const lastSeen = new Map<string, number>();
  const seen = (sessionId: string | undefined) => lastSeen.set(sessionId ?? 'default', now());
  new Gauge({
    name: 'toolshift_gateway_active_sessions',
    help: 'Sessions that called a tool or changed their toolsets in the last 15 minutes (this process)',
    registers,
    collect() {
      const cutoff = now() - ACTIVE_MS;
      for (const [id, at] of lastSeen) if (at < cutoff) lastSeen.delete(id);
      this.set(lastSeen.size);
    },
  });
  const activations = new Counter({
    name: 'toolshift_toolset_activations_total',
    help: 'Toolsets activated in a session (admin API, manage_toolsets, MCP face), by toolset',
    labelNames: ['toolset'],
    registers,
  });
  return {
    ...gateway,
    callTool: (sessionId, name, args, call) => {
      seen(sessionId);
      return observeToolCall(m, name, () => gateway.callTool(sessionId, name, args, call));
    },
    changeToolsets: async (req) => {
      const res = await gateway.changeToolsets(req);
      if (req.action === 'ACTIVATE' || req.action === 'DEACTIVATE') seen(req.session_id);
      if (req.action === 'ACTIVATE') {
        for (const id of new Set(req.toolset_ids))
          if (!res.unchanged.includes(id)) activations.inc({ toolset: id });
      }
      return res;
    },
    manageToolsets: async (sessionId, args) => {
      const res = await gateway.manageToolsets(sessionId, args);
      seen(sessionId);
      if (res.change?.action === 'ACTIVATE') {
        for (const id of res.change.toolset_ids) activations.inc({ toolset: id });
      }
      return res;
    },
  };
}
