import type { ChatCompletionMessageParam } from 'openai/resources/chat/completions';
import { MANAGE_TOOLSETS } from './manage-toolsets.ts';

// A code task's conversation as the model is sent it. Declarations stay where an activation put them, so
// activating never changes what came before; while a toolset is inactive its declarations are withdrawn from
// the activation result that carried them (and stand there again once it is active again: the conversation
// still holds them), so a task does not pay for tools it cannot call in every request that follows. The prefix
// a provider caches then changes at that activation result, where native mode's changes at the tools array.

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

/** The gateway's JSON and the declarations after it, when `content` is a code task's activation result. */
function declared(content: string): { json: string; declarations: string } | undefined {
  const at = content.indexOf(DECLARATIONS);
  if (!content.startsWith('{') || at < 0) return undefined;
  // Only the result the agent wrote: the gateway's JSON whole (a JSON text holds no raw line break), then ours.
  try {
    JSON.parse(content.slice(0, at));
  } catch {
    return undefined;
  }
  return { json: content.slice(0, at), declarations: content.slice(at + 2) };
}

/** `messages` with the declarations of toolsets not in `active` withdrawn; other messages are the same objects. */
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
  return messages.map((m) => {
    if (m.role !== 'tool' || typeof m.content !== 'string' || !activations.has(m.tool_call_id)) return m;
    const parts = declared(m.content);
    if (!parts) return m;
    const all = sections(parts.declarations);
    if (all.every((s) => active.has(s.toolset))) return m;
    const kept = all.map((s) =>
      active.has(s.toolset) ? s.text : `// toolset ${s.toolset}: deactivated, its declarations withdrawn`,
    );
    return { ...m, content: `${parts.json}\n\n${kept.join('\n')}` };
  });
}
