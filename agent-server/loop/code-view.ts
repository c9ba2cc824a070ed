import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import type { GatewayTool } from '../../mcp-gateway/contract.ts';
import { MANAGE_TOOLSETS } from './manage-toolsets.ts';

// A code task's conversation as the model is sent it. Declarations stay where an activation put them, so
// activating never changes what came before; once a toolset is deactivated its declarations are withdrawn
// from the activation result that carried them (and declared again if it comes back), so a task does not pay
// for tools it can no longer call in every request that follows. The prefix a provider caches then changes
// once, from that activation result on, where native mode's changes at the tools array on every toggle.

/** The first line of a toolset's declarations (declarations.ts). */
const SECTION = /^\/\/ toolset (\S+)$/;

/** Where an activation's result turns from the gateway's JSON to the declarations. */
const DECLARATIONS = '\n\n// toolset ';

/** The declarations text in sections, one per toolset, in order. */
function sections(text: string): { toolset: string; text: string }[] {
  const out: { toolset: string; lines: string[] }[] = [];
  for (const line of text.split('\n')) {
    const head = SECTION.exec(line);
    if (head) out.push({ toolset: head[1], lines: [line] });
    else out.at(-1)?.lines.push(line);
  }
  return out.map((s) => ({ toolset: s.toolset, text: s.lines.join('\n') }));
}

/**
 * `messages` with the declarations of toolsets not in `active` withdrawn, and of each active toolset only the
 * latest kept; messages with nothing to withdraw are the same objects.
 */
export function withdrawInactive(
  messages: ChatCompletionMessageParam[],
  active: ReadonlySet<string>,
): ChatCompletionMessageParam[] {
  const activations = new Set<string>();
  for (const m of messages) {
    if (m.role !== 'assistant') continue;
    for (const c of m.tool_calls ?? [])
      if (c.type === 'function' && c.function.name === MANAGE_TOOLSETS) activations.add(c.id);
  }
  const later = new Set<string>();
  const out = [...messages];
  for (let i = out.length - 1; i >= 0; i--) {
    const m = out[i];
    if (m.role !== 'tool' || typeof m.content !== 'string' || !activations.has(m.tool_call_id)) continue;
    const at = m.content.indexOf(DECLARATIONS);
    if (at < 0) continue;
    let changed = false;
    const kept = sections(m.content.slice(at + 2)).map((s) => {
      const keep = active.has(s.toolset) && !later.has(s.toolset);
      later.add(s.toolset);
      if (keep) return s.text;
      changed = true;
      return active.has(s.toolset)
        ? `// toolset ${s.toolset}: declared again below`
        : `// toolset ${s.toolset}: deactivated, its declarations withdrawn`;
    });
    if (changed) out[i] = { ...m, content: `${m.content.slice(0, at)}\n\n${kept.join('\n')}` };
  }
  return out;
}

/** Forgets the tools no longer usable, so an activation that brings them back declares them again. */
export function forgetUnusable(shown: Set<string>, usable: readonly GatewayTool[]): void {
  const names = new Set(usable.map((t) => t.name));
  for (const name of shown) if (!names.has(name)) shown.delete(name);
}
