import type { GatewayTool, RefusalCode } from '../../mcp-gateway/contract.ts';
import { type GatewayClient, refusalCode } from '../clients/gateway.ts';
import { activatedOf } from './tool-execution.ts';

/** Refusals that mean the kept list is out of date: the next step lists the session's tools again. */
const STALE: ReadonlySet<RefusalCode> = new Set(['inactive', 'unknown_tool', 'disabled', 'withheld']);

// A task's tool list between steps. The loop needs the session's tools before every model call; asking the
// gateway each time costs a round trip and a JSON parse of every schema per step. The list only changes when
// toolsets change, so it is kept and replaced when one does: by the task's own manage_toolsets (whose answer
// carries the new list), or — for changes made elsewhere (an operator disabling a toolset, a reload) — when
// the gateway refuses a call as unknown or inactive, which makes the next step list again, or runs a tool the
// list does not hold (activating its toolset on the way). The gateway stays the judge of every call whatever
// this list says.

/** The gateway client of one task's session, with the session's tool list kept until it changes. */
export function withToolList(gateway: GatewayClient, sessionId: string): GatewayClient {
  let cached: GatewayTool[] | undefined;
  const forget = (err: unknown) => {
    if (STALE.has(refusalCode(err) as RefusalCode)) cached = undefined;
  };
  return {
    ...gateway,
    async tools(sid, signal) {
      if (sid !== sessionId) return gateway.tools(sid, signal);
      cached ??= await gateway.tools(sid, signal);
      return cached;
    },
    async manageToolsets(sid, args, signal) {
      try {
        const res = await gateway.manageToolsets(sid, args, signal);
        if (sid === sessionId && res.change) cached = res.tools;
        return res;
      } catch (err) {
        if (sid === sessionId) cached = undefined;
        throw err;
      }
    },
    async changeToolsets(body) {
      cached = undefined;
      return gateway.changeToolsets(body);
    },
    async callTool(sid, name, args, signal, call) {
      try {
        const res = await gateway.callTool(sid, name, args, signal, call);
        // A tool the list does not hold ran: its toolset was activated on the way (the answer carries the new
        // list), or by an earlier try of this call whose answer was lost (the next step lists again).
        if (sid === sessionId && cached && !cached.some((t) => t.name === name))
          cached = res.activated?.tools;
        return res;
      } catch (err) {
        // Refused after its toolset was activated on the way: the refusal carries the new list.
        const activated = sid === sessionId ? activatedOf(err) : undefined;
        if (activated?.tools) cached = activated.tools;
        else if (sid === sessionId) forget(err);
        throw err;
      }
    },
  };
}
