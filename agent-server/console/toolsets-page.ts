import { html } from 'hono/html';
import type { ToolsetInfo } from '../../mcp-gateway/contract.ts';
import { type Can, type Html, health } from './pages.ts';

// The console's toolsets page: the catalog with health and cost, enable/disable, reload, and the upstream
// changes withheld until an operator approves them, shown as diffs. Everything an upstream wrote is escaped
// by hono/html, and its invisible characters are shown (visible()).

/** An upstream server's tools are listed when it first starts: until then, neither they nor their cost is known. */
const notListed = (t: ToolsetInfo) => t.health === 'idle' && t.tools.length === 0;
const unlisted = html`<span class="muted" title="listed when its server first starts (on first use)">—</span>`;

export function toolsetsPage(toolsets: ToolsetInfo[], can: Can, allTokens: number): Html {
  const unknown = toolsets.filter(notListed).map((t) => t.id);
  return html`${
    can.operate
      ? html`<p class="actions">
          <button type="button" data-post="/console/actions/reload" data-show="reload" data-then="reload">
            Reload toolset files
          </button>
        </p>
        <pre class="reload-result" data-result="reload" hidden></pre>`
      : ''
  }
    <p class="muted">
      ${toolsets.length} toolsets; all of them at once would cost ${unknown.length > 0 ? 'at least ' : ''}${allTokens} tokens
      of tool definitions per model request${
        unknown.length > 0
          ? ` (not counted yet: ${unknown.join(', ')}, whose servers start, and list their tools, on first use)`
          : ''
      }.
    </p>
    <table class="toolsets">
      <thead>
        <tr><th>Toolset</th><th>Tools</th><th>Tokens</th><th>Health</th><th>Enabled</th></tr>
      </thead>
      <tbody>
        ${toolsets.map(
          (t) => html`<tr id="${t.id}" data-toolset="${t.id}">
            <td>
              <strong>${t.id}</strong>${t.default ? html` <span class="tag">default</span>` : ''}
              <div class="muted">${t.description}</div>
            </td>
            <td class="num">${notListed(t) ? unlisted : t.tools.length}</td>
            <td class="num">${notListed(t) ? unlisted : (t.definition_tokens ?? 0)}</td>
            <td>${health(t.health)}${t.health_reason ? html`<div class="reason">${t.health_reason}</div>` : ''}</td>
            <td>
              <span class="enabled e-${t.enabled}">${t.enabled ? 'enabled' : 'disabled'}</span>
              ${
                can.operate
                  ? changeButton(
                      '/console/actions/toolsets',
                      { action: t.enabled ? 'DISABLE' : 'ENABLE', toolset_ids: [t.id] },
                      t.enabled ? 'Disable' : 'Enable',
                    )
                  : ''
              }
            </td>
          </tr>
          ${
            t.withheld && t.withheld.length > 0
              ? html`<tr class="withheld">
                  <td colspan="5">
                    <strong>${t.withheld.length} upstream change(s) withheld</strong> until an operator approves
                    them:
                    ${t.withheld.map(
                      (w) => html`<details open>
                        <summary>${visible(w.name)} (${w.status})</summary>
                        <pre class="diff">${diffLines(w.diff ?? JSON.stringify(w.definition, null, 2))}</pre>
                      </details>`,
                    )}
                    ${
                      can.operate
                        ? changeButton(
                            `/console/actions/toolsets/${encodeURIComponent(t.id)}/approve`,
                            { tools: t.withheld.map((w) => ({ name: w.name, hash: w.hash })) },
                            'Approve what is shown',
                          )
                        : ''
                    }
                  </td>
                </tr>`
              : ''
          }`,
        )}
      </tbody>
    </table>`;
}

/** A button that posts `body` to `url` (console.js adds the CSRF token) and then draws the page afresh. */
const changeButton = (url: string, body: unknown, label: string) =>
  html`<button type="button" data-post="${url}" data-body="${JSON.stringify(body)}" data-then="reload">${label}</button>`;

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
