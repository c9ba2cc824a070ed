import { html } from 'hono/html';
import type { z } from 'zod';
import type { ConnectionInfo, GatewayTool, ToolsetInfo } from '../../mcp-gateway/contract.ts';
import { health, num, plural } from './format.ts';
import type { Can, Html } from './pages.ts';

// The console's toolsets page: the catalog with health and cost, each toolset's tools (descriptions and input
// schemas), enable/disable (a disable asks first), reload, and the upstream changes withheld until an operator
// approves them, shown as diffs. Everything an upstream wrote is escaped
// by hono/html, and its invisible characters are shown (visible()).

/** An upstream server's tools are listed when it first starts: until then, neither they nor their cost is known. */
const notListed = (t: ToolsetInfo) => t.health === 'idle' && t.tools.length === 0;
const unlisted = html`<span class="muted" title="listed when its server first starts (on first use)">—</span>`;

/**
 * The catalog. `tools` holds each toolset's definitions as the gateway offers them (absent: not asked, or the
 * gateway did not say); the total counts the enabled toolsets, the ones a model could be given.
 */
export function toolsetsPage(
  toolsets: ToolsetInfo[],
  can: Can,
  tools: Record<string, GatewayTool[] | undefined> = {},
  connections: z.infer<typeof ConnectionInfo>[] = [],
): Html {
  const own = new Map(connections.map((x) => [x.toolset, x]));
  return html`${can.operate ? reloadButton : ''}
    ${costLine(toolsets)}
    <div class="scroll"><table class="toolsets fit">
      <thead>
        <tr><th>Toolset</th><th class="num">Tools</th><th class="num">Tokens</th><th>Health</th><th>Enabled</th></tr>
      </thead>
      <tbody>
        ${toolsets.map((t) => html`${toolsetRow(t, can, tools[t.id], own.get(t.id))}${withheldRow(t, can)}`)}
      </tbody>
    </table></div>`;
}

/** The operator's button that reads the toolset files again, and where its outcome shows. */
const reloadButton = html`<p class="actions">
    <button type="button" class="secondary" data-post="/console/actions/reload" data-show="reload" data-then="reload">
      Reload toolset files
    </button>
  </p>
  <div class="reload-result" data-result="reload" role="status" hidden></div>`;

/** How many toolsets, and what the enabled ones would cost a model request at once. */
function costLine(toolsets: ToolsetInfo[]) {
  const enabled = toolsets.filter((t) => t.enabled);
  const unknown = enabled.filter(notListed).map((t) => t.id);
  const total = enabled.reduce((sum, t) => sum + (t.definition_tokens ?? 0), 0);
  return html`<p class="muted" data-total="${total}">
      ${plural(toolsets.length, 'toolset')}, ${num(enabled.length)} enabled; all the enabled ones at once would cost
      ${unknown.length > 0 ? 'at least ' : ''}${num(total)} tokens of tool definitions per model request${
        unknown.length > 0
          ? ` (not counted yet: ${unknown.join(', ')}, whose servers start, and list their tools, on first use)`
          : ''
      }.
    </p>`;
}

/** One toolset's row: its tools, cost, health, and whether it is enabled (with the operator's switch). */
function toolsetRow(
  t: ToolsetInfo,
  can: Can,
  defs: GatewayTool[] | undefined,
  own: z.infer<typeof ConnectionInfo> | undefined,
) {
  return html`<tr id="${t.id}" data-toolset="${t.id}">
    <td>
      <strong>${t.id}</strong>${t.default ? html` <span class="tag">default</span>` : ''}
      <div class="muted">${t.description}</div>
      ${own ? connectLink(t.id, own.connected) : ''}
      ${toolList(t, defs)}
    </td>
    <td class="num">${notListed(t) ? unlisted : num(t.tools.length)}</td>
    <td class="num">${notListed(t) ? unlisted : num(t.definition_tokens ?? 0)}</td>
    <td>${health(t.health)}${t.health_reason ? html`<div class="reason">${t.health_reason}</div>` : ''}</td>
    <td class="nowrap">
      <span class="enabled e-${t.enabled}">${t.enabled ? 'enabled' : 'disabled'}</span>
      ${can.operate ? enableButton(t) : ''}
    </td>
  </tr>`;
}

/** A toolset that takes each person's own account: whether they connected theirs, and where they do. */
function connectLink(id: string, connected: boolean) {
  return html`<p class="connect">
    ${connected ? html`<span class="tag">connected</span> ` : ''}<a
      class="button secondary"
      href="/console/connect/${encodeURIComponent(id)}"
      data-connect="${id}"
      >${connected ? 'Connect again' : 'Connect your account'}</a
    >
  </p>`;
}

/** Disable (asked first: everyone loses it) or enable. */
function enableButton(t: ToolsetInfo) {
  return t.enabled
    ? changeButton(
        '/console/actions/toolsets',
        { action: 'DISABLE', toolset_ids: [t.id] },
        'Disable',
        `Disable ${t.id} for everyone? Tasks and MCP clients lose its ${plural(t.tools.length, 'tool')} until it is enabled again.`,
      )
    : changeButton('/console/actions/toolsets', { action: 'ENABLE', toolset_ids: [t.id] }, 'Enable');
}

/** The upstream changes withheld from a toolset until approved, as diffs, with the operator's approval. */
function withheldRow(t: ToolsetInfo, can: Can) {
  if (!t.withheld || t.withheld.length === 0) return '';
  const withheld = t.withheld;
  return html`<tr class="withheld">
    <td colspan="5">
      <strong>${plural(withheld.length, 'upstream change')} withheld</strong> until an operator approves
      them:
      ${withheld.map(
        (w) => html`<details open>
          <summary>${visible(w.name)} (${w.status})</summary>
          <pre class="diff">${diffLines(w.diff ?? JSON.stringify(w.definition, null, 2))}</pre>
        </details>`,
      )}
      ${
        can.operate
          ? changeButton(
              `/console/actions/toolsets/${encodeURIComponent(t.id)}/approve`,
              { tools: withheld.map((w) => ({ name: w.name, hash: w.hash })) },
              'Approve what is shown',
            )
          : ''
      }
    </td>
  </tr>`;
}

/** A toolset's tools, folded: each with its description and input schema as the model receives them. */
function toolList(t: ToolsetInfo, defs: GatewayTool[] | undefined) {
  if (notListed(t) || (t.tools.length === 0 && !defs?.length)) return '';
  if (!defs)
    return html`<details class="tools"><summary>${plural(t.tools.length, 'tool')}</summary>
      <p class="muted">${t.tools.join(', ')}</p></details>`;
  return html`<details class="tools" data-tools="${t.id}">
    <summary>${plural(defs.length, 'tool')}: descriptions and schemas</summary>
    <dl>
      ${defs.map(
        (d) => html`<dt><code>${visible(d.name)}</code></dt>
          <dd>
            <p>${visible(d.description)}</p>
            <details class="schema"><summary>Input schema</summary><pre>${visible(JSON.stringify(d.parameters, null, 2))}</pre></details>
          </dd>`,
      )}
    </dl>
  </details>`;
}

/**
 * A button that posts `body` to `url` (console.js adds the CSRF token) and then draws the page afresh; with
 * `confirm`, console.js asks that question first and sends nothing unless the operator confirms.
 */
const changeButton = (url: string, body: unknown, label: string, confirm?: string) =>
  html`<button type="button" class="${confirm ? 'secondary danger' : ''}" data-post="${url}" data-body="${JSON.stringify(body)}" data-then="reload" data-confirm="${confirm ?? ''}">${label}</button>`;

/** Control and format characters (zero-width, text direction, BOM): they can make two different lines look the same. */
const INVISIBLE = /[\p{Cc}\p{Cf}]/gu;

/** A text an upstream wrote, with its invisible characters (but line breaks and tabs) shown as `\u{…}` escapes. */
export function visible(text: string): string {
  return text.replace(INVISIBLE, (c) =>
    c === '\n' || c === '\t' ? c : `\\u{${(c.codePointAt(0) ?? 0).toString(16)}}`,
  );
}

/** A unified diff with its added and removed lines marked for the stylesheet (the `====` rule left out). */
function diffLines(diff: string) {
  return visible(diff)
    .split('\n')
    .filter((line) => !/^=+$/.test(line))
    .map((line) =>
      line.startsWith('+') && !line.startsWith('+++')
        ? html`<ins>${line}</ins>\n`
        : line.startsWith('-') && !line.startsWith('---')
          ? html`<del>${line}</del>\n`
          : html`${line}\n`,
    );
}
