import { checkpointsSection } from './checkpoints.ts';
import { codeSection } from './code-report.ts';
import type { ConcurrencyRun } from './concurrency.ts';
import { crossover } from './crossover.ts';
import type { Recall } from './discovery.ts';
import { learnedSection } from './discovery-learned.ts';
import { PRICE } from './economics.ts';
import { f2, mib, ms, n0, pct, table, usd } from './format.ts';
import { arm, type BenchResults, goals } from './goals.ts';
import { limitsSection } from './limits.ts';
import type { MemoryStage } from './memory-parts.ts';
import { ANTHROPIC_PRICE } from './provider-cost.ts';
import { streamingSection } from './streaming.ts';

// BENCHMARKS.md from one run's measurements: every figure with its goal and whether it was met, then each
// figure's detail and how it was measured. Pure formatting; bench/run.ts measures, goals.ts judges.

const mark = (met: boolean | null) => (met === null ? '–' : met ? 'met' : '**missed**');

/** Which of figure 16's goals even the thinnest proxy, measured in the same run, could not meet. */
function outOfReach(hop: NonNullable<BenchResults['mcpHop']>): string {
  const first = hop.thinnest / hop.proxy > 0.3;
  const second = hop.thinnest / hop.direct > 3;
  if (first && second) return 'both goals are';
  if (first) return 'the first goal is';
  if (second) return 'the second goal is';
  return 'neither goal is';
}

/** BENCHMARKS.md. */
export function renderReport(r: BenchResults): string {
  const { machine: m, tokens: t, latency: l, concurrency: c } = r;
  const arms = t.arms;
  const all = arm(r, 'all-loaded');
  const g = goals(r);
  const out: string[] = [];
  out.push('# Benchmarks');
  out.push('');
  out.push(
    `Written by \`npm run bench\` (bench/run.ts) on ${m.date.slice(0, 10)}, commit ${m.commit}, in ${Math.round(r.durationS)} s. ` +
      'Every ratio compares arms measured side by side in this one run; nothing below is copied from an earlier run.',
  );
  out.push('');
  out.push(
    `Machine: ${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}, Node ${m.node}. ` +
      `Load average when the run started: ${m.loadAtStart.toFixed(2)} (the machine is shared; latency figures move with it).`,
  );
  out.push('');
  out.push('## Goals');
  out.push('');
  out.push(
    table(
      ['figure', 'measured', 'goal', ''],
      g.map((x) => [x.figure, x.measured, x.goal, mark(x.met)]),
    ),
  );
  out.push('');

  out.push('## Catalog and tasks');
  out.push('');
  out.push(
    `${t.catalog.toolsets} toolsets, ${t.catalog.tools} tools of real definitions: the native file, git, database and ` +
      'web toolsets; the reference memory, sequential-thinking and "everything" MCP servers from npm (stdio); and the ' +
      `GitHub MCP server's 117 recorded definitions split into ${t.catalog.recorded} toolsets, served by a recorded-catalog ` +
      'MCP backend (bench/recorded-server.ts: an SDK v2 server on loopback that answers tools/list only; its server name ' +
      'and every one of its toolsets\' descriptions say "Recorded definitions: listing only, calls are not served").',
  );
  out.push('');
  out.push(
    `${t.tasks} scripted multi-step tasks (bench/tasks.ts: read and summarise a project, edit a changelog, inspect ` +
      'commits and uncommitted changes, query a shop database, save and recall memories, think a plan through, use the ' +
      'reference server, read two web pages from a loopback server, write a report from a query, carry git history into ' +
      'memory), each run against the real services over HTTP: **native** (the tools array follows the active ' +
      'toolsets), **dispatch** (`exposure: "dispatch"`: `[manage_toolsets, call_tool]` fixed), **all-loaded** (every ' +
      `toolset active from the start: ${n0(all.toolTokensPerRequest)} tokens of tool definitions in every request), ` +
      '**primed** and **code** (below). The scripted ' +
      'model activates what a task needs (after a LIST with a query in 2 of the 12), switches toolsets in the same reply as ' +
      'its last call to the old one, and deactivates with its last call; all-loaded drops the toolset calls and the turns ' +
      'that held nothing else. Every task completed with every tool call succeeding' +
      (t.problems.length > 0 ? ` — except: ${t.problems.join('; ')}` : '') +
      ". Tokens are counted with toolshift's own counter (o200k_base) on the request bodies the mock model received.",
  );
  out.push('');

  out.push('## 1–4. Token economics');
  out.push('');
  out.push(
    table(
      ['', ...arms.map((a) => a.arm)],
      [
        [`model requests (${t.tasks} tasks)`, ...arms.map((a) => a.requests)],
        ['model calls per task', ...arms.map((a) => f2(a.modelCallsPerTask))],
        ['tool-definition tokens per request (tools array)', ...arms.map((a) => n0(a.toolTokensPerRequest))],
        [
          'tool definitions carried in messages, per task',
          ...arms.map((a) => n0(a.definitionsInMessagesPerTask)),
        ],
        ['input tokens per task', ...arms.map((a) => n0(a.inputTokensPerTask))],
        ['output tokens per task', ...arms.map((a) => n0(a.outputTokensPerTask))],
        [
          'prefix kept, steps without a toggle (mean / min)',
          ...arms.map((a) => `${pct(a.prefixSteady)} / ${pct(a.prefixSteadyMin)}`),
        ],
        ['prefix kept, steps after a toggle', ...arms.map((a) => pct(a.prefixToggle))],
        ['prefix kept, all steps', ...arms.map((a) => pct(a.prefixAll))],
        ['input tokens served from the cache', ...arms.map((a) => pct(a.cachedShare))],
        ['cost per task, with prompt caching', ...arms.map((a) => usd(a.costPerTask))],
        ['cost per task, without caching', ...arms.map((a) => usd(a.costPerTaskUncached))],
        [
          `${ANTHROPIC_PRICE.model}: input tokens read from / written to the cache`,
          ...arms.map((a) =>
            a.anthropic ? `${pct(a.anthropic.cacheReadShare)} / ${pct(a.anthropic.cacheWriteShare)}` : '–',
          ),
        ],
        [
          `${ANTHROPIC_PRICE.model}: cost per task, with prompt caching`,
          ...arms.map((a) => (a.anthropic ? usd(a.anthropic.costPerTask) : '–')),
        ],
        [
          `${ANTHROPIC_PRICE.model}: cost per task, without caching`,
          ...arms.map((a) => (a.anthropic ? usd(a.anthropic.costPerTaskUncached) : '–')),
        ],
      ],
    ),
  );
  out.push('');
  out.push(
    "- Prefix kept: for each pair of consecutive requests of a task, the share of the earlier request's bytes — serialised " +
      "in the provider's order, tools then messages, one JSON value each — that is the unchanged prefix of the later one.",
  );
  out.push(
    `- Cost: ${PRICE.model}'s published API prices, $${PRICE.inputPerM.toFixed(2)} per million input tokens, ` +
      `$${PRICE.cachedInputPerM.toFixed(2)} per million cached input tokens (a 75% discount) and $${PRICE.outputPerM.toFixed(2)} ` +
      `per million output tokens. A request's cached part is the longest run of whole leading units (tools, then messages) it ` +
      `shares with an earlier request of the same arm, counted as OpenAI caches: only prompts of ${PRICE.minCachedPrompt}+ tokens, ` +
      `in steps of ${PRICE.cacheIncrement} tokens (a warm cache: the tasks run one after another within minutes).`,
  );
  out.push(
    `- ${ANTHROPIC_PRICE.model}: Anthropic's published prices, $${ANTHROPIC_PRICE.inputPerM.toFixed(2)} per million input ` +
      `tokens, $${ANTHROPIC_PRICE.cacheWritePerM.toFixed(2)} written to the cache (1.25×), $${ANTHROPIC_PRICE.cacheReadPerM.toFixed(2)} ` +
      `read from it (0.1×), $${ANTHROPIC_PRICE.outputPerM.toFixed(2)} output. Its cache is explicit: a request writes the prefix up ` +
      'to each of its cache_control breakpoints — where the Anthropic client puts them: after the tools, after the system ' +
      'prompt, after the last two user turns — and reads the longest prefix an earlier request wrote (bench/provider-cost.ts).',
  );
  const primedTasks = t.primed;
  if (primedTasks) {
    const given = primedTasks.filter((p) => p.primed.length > 0);
    out.push(
      '- Goal-primed (`primed`): the native arm with the agent activating, before the first model call, the toolset ' +
        "discovery is certain the goal needs (its first hit leads the second by the ranking's margin; " +
        '`agent-server/loop/prime.ts`). The scripted model acts on what it finds active: it skips the LIST and ACTIVATE ' +
        'its first reply no longer needs, and deactivates an active toolset the task does not need. ' +
        `Primed: ${given.length} of ${primedTasks.length} tasks (${given.map((p) => `${p.task} → ${p.primed.join(', ')}`).join('; ') || 'none'}); ` +
        `not needed: ${primedTasks.flatMap((p) => p.unneeded).join(', ') || 'none'}.`,
    );
  }
  const autoArm = t.arms.find((a) => a.arm === 'auto');
  if (autoArm) {
    const x = crossover(arm(r, 'all-loaded'), autoArm);
    out.push(
      '- Activation without a turn (`auto`): the primed arm whose model calls a tool the system prompt names instead of ' +
        'a LIST and an ACTIVATE before it (bench/tasks.ts directTask); the gateway activates its toolset for the call ' +
        '(AUTO_ACTIVATE). It still deactivates with its last call. Crossover, where all-loaded costs a task as much as ' +
        `this arm (exposure auto's AUTO_EXPOSURE_TOKENS, bench/crossover.ts): ${x.cached.toLocaleString('en-US')} tokens ` +
        `of tool definitions with prompt caching, ${x.uncached.toLocaleString('en-US')} without.`,
    );
  }
  const native = arm(r, 'native');
  const dispatch = arm(r, 'dispatch');
  out.push(
    "- Dispatch sends the activated tools' definitions once, in the activation's result, and they stay in the " +
      'conversation; native sends them in every request while the toolset is active and drops them on deactivation, ' +
      `but each toggle breaks the cached prefix. Here dispatch's cached share is ${pct(dispatch.cachedShare)} against ` +
      `native's ${pct(native.cachedShare)}, and its cost per task ${usd(dispatch.costPerTask)} against ${usd(native.costPerTask)} ` +
      `(${f2(dispatch.costPerTask / native.costPerTask)}×), on tasks of about ${f2(native.modelCallsPerTask)} model calls.`,
  );
  out.push(...codeSection(t), '');

  const rec = t.recall;
  out.push('## 5. Discovery');
  out.push('');
  const at = (x: { recallAt1: number; recallAt3: number }) =>
    `recall@1 ${pct(x.recallAt1)}, recall@3 ${pct(x.recallAt3)}`;
  const split = (x: Recall) =>
    x.heldOut && x.tune
      ? `held out: ${at(x.heldOut)}; ${x.fresh ? `fresh: ${at(x.fresh)}; ` : ''}tuning half: ${at(x.tune)}`
      : at(x);
  out.push(
    `${rec.needs} plain-language needs (tests/fixtures/discovery/needs.json: tasks as people phrase them, several per ` +
      "toolset, split once into a tuning half — what the ranking weights and the toolsets' `keywords` were chosen on — " +
      'and a held-out half, written without looking at the ranker and measured only, and a fresh third split ' +
      "written later in everyday words, not the tools' vocabulary, measured only: the estimate of needs written by " +
      'people), each asked as ' +
      `\`manage_toolsets\` LIST with a query through the gateway's HTTP route, over the benchmark catalog ` +
      `(${rec.toolsets} toolsets, ${rec.tools} tools): ${split(rec)}; ${f2(rec.msPerQuery)} ms per query. ` +
      `On a catalog of ${r.scale.tools} tools (${r.scale.toolsets} toolsets: the GitHub toolsets twice, github.com and an ` +
      `Enterprise copy, either counting), in process: ${split(r.scale)}; ${f2(r.scale.msPerQuery)} ms per query.`,
  );
  if (rec.misses.length > 0) {
    out.push('');
    out.push(
      'Tuning needs missed at 3 on the benchmark catalog (held-out and fresh misses are counted above, not listed):',
    );
    out.push('');
    for (const x of rec.misses) out.push(`- "${x.need}" → ${x.want}; ranked ${x.got.join(', ')}`);
  }
  out.push(...learnedSection(r.learned));
  out.push('');

  out.push('## 6–8. Latency on the call path');
  out.push('');
  out.push(
    `Medians of ${l.rounds} interleaved samples each (the probes take turns, so a noisy moment hits all alike). The bare ` +
      "round trip is the services' own HTTP client (undici's request API, kept-alive) posting a small JSON body to a plain " +
      `Node server that answers at once: ${ms(l.bareRtt)}. "Direct" calls the tool-server with the gateway's own client; ` +
      '"via gateway" is the agent-server\'s client of the gateway, which checks the session, the arguments, the policy and ' +
      'rate limit, writes the audit row and calls the tool-server.',
  );
  out.push('');
  out.push(
    table(
      ['probe', 'direct', 'via gateway', 'overhead'],
      [
        ['echo tool', ms(l.echo.direct), ms(l.echo.viaGateway), ms(l.echo.viaGateway - l.echo.direct)],
        ['20 ms tool', ms(l.delay.direct), ms(l.delay.viaGateway), ms(l.delay.viaGateway - l.delay.direct)],
      ],
    ),
  );
  out.push('');
  out.push(
    `- Toggle (fig. 8): a \`manage_toolsets\` ACTIVATE or DEACTIVATE through the agent's client — the gateway judges it, ` +
      `commits the session change and the audit row to SQLite, and answers with the session's new tool list — ${ms(l.toggle.manage)}, ` +
      `against a plain echo call on the same path, ${ms(l.toggle.call)}.`,
  );
  out.push(
    `- Own time per model step (fig. 7): ${l.step.tasks} sequential tasks of ${l.step.steps / l.step.tasks} model steps (an ` +
      'activation, six echo calls, the deactivation with the last, an answer) through the real agent-server, gateway and ' +
      'tool-server, the model answering at once from a mock endpoint; own time = task time minus the time the mock spent ' +
      `building replies: ${ms(l.step.ownMsPerStep)} per step, against a bare round trip of ${ms(l.step.bareRtt)} measured ` +
      'between the tasks (goal priming off: the script activates its toolset itself). The goal line is the median ' +
      'ratio of the tracing-off runs of figure 15 (the same measurement, each in a fresh process).',
  );
  out.push('');

  out.push('## 9. Concurrency');
  out.push('');
  out.push(
    `\`npm start\` (the three services in one process, on one thread) in a child process; ${n0(c.tasks)} tasks submitted at once, each ` +
      `${c.turnsPerTask} model turns (activate the file tools, four file-tool calls, deactivate, answer) against a mock model ` +
      `in another process that answers every call after ${c.latencyMs} ms. With ${n0(c.tasks)} turns in flight and one ` +
      `second each, Little's law allows ${n0(c.idealTurnsPerS)} turns/s.`,
  );
  out.push('');
  out.push(
    table(
      ['', ''],
      [
        [
          'tasks completed',
          `${c.completed} of ${c.tasks}${c.failed.length ? ` (${c.failed.join('; ')})` : ''}`,
        ],
        [
          'wall time',
          `${c.wallS.toFixed(1)} s (${((c.turnsPerTask * c.latencyMs) / 1000).toFixed(0)} s of model time per task)`,
        ],
        ['window: the middle 80% of model requests', `${c.windowS.toFixed(1)} s`],
        [
          'model turns per second in that window',
          `${n0(c.turnsPerS)} (${f2(c.turnsPerS / c.idealTurnsPerS)} of ideal)`,
        ],
        [
          'turn latency p50 / p99',
          `${(c.turnLatencyP50Ms / 1000).toFixed(3)} s / ${(c.turnLatencyP99Ms / 1000).toFixed(3)} s`,
        ],
        [
          'CPU time of the services per model turn',
          `${c.cpuMsPerTurn.toFixed(2)} ms (about ${n0(1000 / c.cpuMsPerTurn)} turns/s for each core's worth of CPU)`,
        ],
        [
          'resident memory idle / peak / after',
          `${mib(c.idle.rss)} / ${mib(c.peakRss)} / ${mib(c.after.rss)}`,
        ],
        ['resident memory per held task', `${(c.rssPerHeldTaskBytes / 1024).toFixed(0)} KiB`],
      ],
    ),
  );
  out.push('');
  out.push(
    "- Turn latency is measured where the model sees it: from a task's request to its next one (one second of model " +
      'time, then toolshift recording the reply, running the tool calls and sending the next request).',
  );
  if (r.concurrencyVariants.length > 0) {
    out.push('');
    out.push('The same tasks in other shapes, in the same run:');
    out.push('');
    const layout = (x: ConcurrencyRun) =>
      x.layout === 'npm-start'
        ? '`npm start` (one thread)'
        : x.layout === 'npm-start-http'
          ? '`npm start`, `TOOLSHIFT_LINK=http` (its services over loopback HTTP)'
          : x.layout === 'two-threads'
            ? '`npm start`, `TOOLSHIFT_THREADS=2` (gateway and tool-server on a second thread)'
            : x.layout === 'postgres-workers'
              ? `PostgreSQL: agent API + ${x.workers} worker process${x.workers === 1 ? '' : 'es'} (+ gateway, tool-server)`
              : 'three processes (as docker compose runs them)';
    out.push(
      table(
        [
          'services',
          'tasks',
          'turns/s (of ideal)',
          'turn p50 / p99',
          'CPU per turn',
          'wall',
          'resident idle / after',
          'resident per held task',
        ],
        [c, ...r.concurrencyVariants].map((x) => [
          layout(x),
          n0(x.tasks),
          `${n0(x.turnsPerS)} (${f2(x.turnsPerS / x.idealTurnsPerS)})`,
          `${(x.turnLatencyP50Ms / 1000).toFixed(2)} s / ${(x.turnLatencyP99Ms / 1000).toFixed(2)} s`,
          `${x.cpuMsPerTurn.toFixed(2)} ms`,
          `${x.wallS.toFixed(1)} s`,
          `${mib(x.idle.rss)} / ${mib(x.after.rss)}`,
          `${(x.rssPerHeldTaskBytes / 1024).toFixed(0)} KiB`,
        ]),
      ),
    );
  }
  if (r.scaledSkipped)
    out.push('', `With PostgreSQL and worker processes: not measured (${r.scaledSkipped}).`);
  else {
    out.push(
      '',
      'The PostgreSQL rows run the agent API (`toolshift serve agent-api`) and one or two `toolshift serve worker` ' +
        'processes on a throwaway cluster, each worker taking an equal share of the tasks at a time, and the gateway ' +
        'with its state on the same database; CPU and resident memory are every process summed (the PostgreSQL ' +
        'server not included).',
    );
  }
  out.push('');

  out.push('## 10. Event-log persistence');
  out.push('');
  out.push(
    `${n0(r.eventLog.records)} step records (a model_call event, ${r.eventLog.recordBytes} bytes of JSON) through the ` +
      `agent-server's task store — \`appendEvent\` as the loop writes them, then the store's group commit, ` +
      `${r.eventLog.batch} records to a commit — ${n0(r.eventLog.storeRecordsPerS)} per second, against ` +
      'raw better-sqlite3 inserts of the same rows (`JSON.stringify` and `run()`) into the same database (WAL, same pragmas), in ' +
      `alternating batches: ${n0(r.eventLog.rawRunPerS)} per second with one commit each, ${n0(r.eventLog.rawBatchedPerS)} ` +
      `per second with ${r.eventLog.batch} to a transaction; the faster is the baseline.`,
  );
  out.push('');
  const pgLog = r.eventLogPg;
  if (pgLog?.skipped) out.push(`On PostgreSQL: not measured (${pgLog.skipped}).`, '');
  else if (pgLog) {
    out.push(
      `On PostgreSQL (a throwaway server on loopback, bench/event-log-pg.ts), ${n0(pgLog.records)} records through the ` +
        `PostgreSQL task store — \`appendEvent\`, then its write-behind, one multi-row INSERT per flush of ${pgLog.batch} — ` +
        `${n0(pgLog.storeRecordsPerS)} per second, against raw \`pg\` inserts of the same rows: ${n0(pgLog.rawRunPerS)} per ` +
        `second one INSERT each, ${n0(pgLog.rawBatchedPerS)} per second as one multi-row INSERT of ${pgLog.batch}; the faster ` +
        'is the baseline.',
      '',
    );
  }

  out.push('## 11. Memory');
  out.push('');
  out.push(
    `\`npm start\` idle: ${mib(c.idle.rss)} resident, of which V8 heap ${mib(c.idle.heapUsed)} used (${mib(c.idle.heapTotal)} ` +
      `reserved) and ${mib(c.idle.external)} outside the heap; after the concurrency run ${mib(c.after.rss)} resident, heap ` +
      `${mib(c.after.heapUsed)} used. Where it goes, measured stage by stage in a process of its own (bench/memory-parts.ts, ` +
      'a full collection before each reading):',
  );
  out.push('');
  const stageTable = (list: MemoryStage[]) =>
    table(
      ['stage', 'resident', 'added', 'V8 heap used (main thread)', 'external'],
      list.map((s, i) => [
        s.stage,
        mib(s.rss),
        i === 0 ? '' : `${s.rss >= list[i - 1].rss ? '+' : '−'}${mib(Math.abs(s.rss - list[i - 1].rss))}`,
        mib(s.heapUsed),
        mib(s.external),
      ]),
    );
  out.push(stageTable(r.memory));
  out.push('');
  out.push(
    'With `TOOLSHIFT_THREADS=2` the gateway and the tool-server start on a worker thread, which loads its own copy of ' +
      "their modules and of the tokenizer into a V8 heap of its own (read 2 s after they listen, the thread's start-up " +
      'garbage left to its own collector, as in the idle reading above):',
  );
  out.push('');
  out.push(stageTable(r.memoryTwoThreads));
  out.push('');
  const idleSpaces = Object.entries(c.idle.spaces)
    .filter(([, v]) => v > 0)
    .map(([k, v]) => `${k} ${mib(v)}`)
    .join(', ');
  out.push(`- V8 heap spaces of the idle service (used): ${idleSpaces}.`);
  out.push(
    "- The rest of resident memory is code (Node itself, V8's compiled code, the modules' stripped sources), " +
      "SQLite's page caches, and allocator slack.",
  );
  out.push('');

  const s = r.startup;
  out.push('## 12. Start-up');
  out.push('');
  out.push(
    `What \`npm start\` runs, started ${s.after.runs} times each on a fresh data directory and free ports, the two ` +
      'commands alternating (bench/startup.ts): before, `tsx start/start.ts` (the script until toolshift ran on ' +
      "Node's type stripping: tsx's CLI starts Node again with its loader, and esbuild transforms each module); " +
      'after, `node bin/toolshift.js serve`. Ready is the time from spawning the command to its ready line; idle ' +
      "memory is the command's process tree (tsx's CLI and its child summed), read 2 s after ready. npm's own " +
      'process is the same for both and left out.',
  );
  out.push('');
  out.push(
    table(
      ['command', 'ready, median', 'ready, slowest', 'idle resident, median', 'idle resident, largest'],
      [s.before, s.after].map((f) => [
        f.label,
        ms(f.readyMs.median),
        ms(f.readyMs.max),
        `${f.idleRssMiB.median.toFixed(1)} MiB`,
        `${f.idleRssMiB.max.toFixed(1)} MiB`,
      ]),
    ),
  );
  out.push('');
  out.push(
    `After / before: ready ${(s.after.readyMs.median / s.before.readyMs.median).toFixed(2)}×, idle resident ` +
      `${(s.after.idleRssMiB.median / s.before.idleRssMiB.median).toFixed(2)}× (medians).`,
  );
  out.push('');
  const rep = r.replicas;
  if (rep) {
    out.push('## 13. Gateway replicas on PostgreSQL');
    out.push('');
    if (rep.skipped) out.push(`Not measured (${rep.skipped}).`);
    else {
      out.push(
        `Two gateways on one throwaway PostgreSQL (bench/gateway-replicas.ts). Each keeps the operator's disabled set in ` +
          'memory and drops it when another replica announces a change (LISTEN/NOTIFY, sent in the same transaction ' +
          `as the change). Over ${rep.disableMs.rounds} DISABLEs, alternating which replica got it, the time from its ` +
          `answer until the other replica lists the toolset disabled (read back to back): p50 ${rep.disableMs.p50} ms, ` +
          `p95 ${rep.disableMs.p95} ms, slowest ${rep.disableMs.max} ms. A session's toolsets are not cached: every ` +
          'request reads them, so a change is used by any replica at its next request.',
        '',
        `What the shared store costs a call: a read_text_file through the gateway (and the tool-server behind it), ` +
          `${rep.callMs.calls} calls each, alternating: p50 ${rep.callMs.sqlite} ms with the gateway on SQLite, ` +
          `${rep.callMs.postgres} ms on a replica on PostgreSQL (the session's read and the audit row go through ` +
          "the replica's pool, asynchronously).",
      );
    }
    out.push('');
  }
  if (rep && !rep.skipped && rep.lock && rep.loop) {
    out.push('## 17. A gateway replica never waits on PostgreSQL with its event loop');
    out.push('');
    out.push(
      'A third replica on the same database, in a process of its own (bench/gateway-probe.ts). A plain ' +
        "connection, no replica's, locks one session's row (`SELECT … FOR UPDATE`, held up to 5 s) and the replica " +
        `is asked to change that session, which waits for the row; meanwhile ${rep.lock.samples} times each, one ` +
        `after the other: its \`/health\` took p50 ${rep.lock.healthMs.p50} ms (slowest ${rep.lock.healthMs.max} ms) ` +
        `and a tool call of another session p50 ${rep.lock.otherCallMs.p50} ms (slowest ${rep.lock.otherCallMs.max} ms); ` +
        `the locked session's change answered once the row was released, ${rep.lock.lockedWaitedMs} ms after it was ` +
        'asked. (Its statements used to run synchronously on a worker thread: one waiting on a lock froze the whole ' +
        'process, /health included, for as long as the lock or the 5–30 s timeouts lasted.)',
      '',
      `Then its event loop's delay (perf_hooks monitorEventLoopDelay, 1 ms resolution) while ${rep.loop.clients} ` +
        `clients, each in a session of its own, send it calls, toggles of a toolset (a short transaction on the ` +
        `session's row) and tool listings for ${rep.loop.seconds} s (${rep.loop.requests.toLocaleString('en')} requests): ` +
        `p50 ${rep.loop.p50} ms, p99 ${rep.loop.p99} ms, max ${rep.loop.max} ms (goal: p99 under 20 ms).`,
    );
    out.push('');
  }
  const pages = r.console;
  if (pages) {
    out.push("## 14. The console's pages on a full store");
    out.push('');
    out.push(
      `${pages.tasks.toLocaleString('en')} tasks in the agent's store and ${pages.auditRows.toLocaleString('en')} audit rows ` +
        "in the gateway's, on SQLite (bench/console.ts). Each page asked for " +
        `${pages.rounds} times by a logged-in operator over loopback, after two warm-ups: the time to the whole ` +
        'answer (an upper bound of the server time; the goal is under 50 ms each).',
      '',
      table(
        ['Page', 'Median', 'Slowest'],
        pages.pages.map((p) => [`\`${p.page}\``, `${p.p50} ms`, `${p.max} ms`]),
      ),
    );
    out.push('');
  }
  const hop = r.mcpHop;
  if (hop) {
    out.push("## 16. The MCP face's hop");
    out.push('');
    out.push(
      "One `tools/call` of the reference everything server's `echo` by an SDK client, five ways in the same run, " +
        `interleaved, ${hop.rounds} calls each after a warm-up of 300 (bench/mcp-hop.ts): straight to the server over ` +
        `stdio ${ms(hop.direct)}; through mcp-proxy (a TypeScript MCP proxy serving the stdio server over Streamable ` +
        `HTTP) ${ms(hop.proxy)}; through toolshift's MCP face (the fixed view \`/mcp/toolsets/mcp_reference\`: the ` +
        "gateway's checks, audit and routing to its own copy of the server over stdio, answered as one JSON body) " +
        `${ms(hop.toolshift)} — ${f2(hop.toolshift / hop.proxy)} of mcp-proxy's and ${f2(hop.toolshift / hop.direct)}× ` +
        'the direct call (medians; the goal is ≤ 0.3 and ≤ 3×). The fourth way is the thinnest proxy that can be ' +
        'written: a plain HTTP server in the bench process relaying each JSON-RPC message to its own copy of the ' +
        'stdio server and the answer back, with no SDK, no checks and no records: ' +
        `${ms(hop.thinnest)}, ${f2(hop.thinnest / hop.proxy)} of mcp-proxy's and ${f2(hop.thinnest / hop.direct)}× ` +
        `direct — so ${outOfReach(hop)} out of reach of any proxy this client measures. The fifth is the same ` +
        'client calling an SDK server in the bench process that answers `echo` by itself (stateless, JSON, ' +
        `nothing behind it): ${ms(hop.floor)}, ${f2(hop.floor / hop.proxy)} of mcp-proxy's — what the SDK's ` +
        "server side adds to an HTTP hop. toolshift's own share is what it costs above the thinnest proxy " +
        `(${ms(hop.toolshift - hop.thinnest)}).`,
    );
    out.push('');
  }
  const traced = r.tracing;
  if (traced) {
    out.push('## 15. Tracing off and on');
    out.push('');
    out.push(
      "Figure 7's measurement (own time per model step: whole tasks of eight steps, one after another, minus the " +
        `mock model's time) in ${traced.off.length} runs with tracing off and ${traced.on.length} with it on, ` +
        'alternating, each run a fresh process (bench/tracing.ts). On: every span sampled (`OTEL_TRACES_SAMPLER=always_on`) ' +
        'and exported over OTLP/HTTP protobuf to a receiver on loopback that reads and drops it. Off is the ' +
        'default (no `OTEL_EXPORTER_OTLP_ENDPOINT`): no SDK is loaded and no span is made; what is left of tracing ' +
        'in the request path is a test of an empty map before each call and log line.',
      '',
      table(
        ['Run', 'Off: own time per step', 'On: own time per step', 'Bare round trip (off / on)', 'Exported'],
        traced.off.map((o, i) => {
          const on = traced.on[i];
          return [
            String(i + 1),
            ms(o.ownMsPerStep),
            on ? ms(on.ownMsPerStep) : '—',
            `${ms(o.bareRtt)} / ${on ? ms(on.bareRtt) : '—'}`,
            on ? `${(on.exportedBytes / 1024).toFixed(0)} KiB in ${on.steps} steps` : '—',
          ];
        }),
      ),
      '',
      `Medians: off ${ms(traced.offMs)}, on ${ms(traced.onMs)} per step (${f2(traced.onMs / traced.offMs)}×, ` +
        `+${ms(traced.onMs - traced.offMs)}).`,
    );
    out.push('');
  }
  if (r.streaming) out.push(...streamingSection(r.streaming));
  if (r.limits) out.push(...limitsSection(r.limits));
  if (r.checkpoints) out.push(...checkpointsSection(r.checkpoints));
  const threads = r.threads;
  if (threads) {
    out.push('## 19. Threads: the prefix across turns, and compaction');
    out.push('');
    out.push(
      'A scripted model reads the file each turn names and answers, on the in-process stack (bench/threads.ts). ' +
        `Over a ${threads.turns}-turn thread with a budget far above it, the share of each request's bytes (tools ` +
        'and messages as sent) that prefix the next: at the turn boundaries ' +
        `${pct(threads.turnBoundaryMin)} at least (mean ${pct(threads.turnBoundaryMean)}); over every pair of ` +
        `consecutive requests ${pct(threads.allPairsMin)} at least (the first turn's activation changes the tools ` +
        `array, as in figure 3). A ${threads.longTurns}-turn thread of the same kind, each file about 2,000 tokens, ` +
        `under a ${n0(threads.budget)}-token budget (AGENT_CONTEXT_TOKENS): ${n0(threads.compactedPerTurn)} input ` +
        `tokens per turn, against ${n0(threads.wholePerTurn)} for the same thread sent whole ` +
        `(${f2(threads.compactedPerTurn / threads.wholePerTurn)}×); its largest request ${n0(threads.compactedMax)} ` +
        `tokens (whole: ${n0(threads.wholeMax)}); ${threads.compactions} compactions, ${threads.summaries} of them ` +
        'with a summary (the summary calls are counted).',
    );
    out.push('');
  }
  return `${out.join('\n')}\n`;
}
