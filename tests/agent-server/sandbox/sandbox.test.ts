import { describe, expect, it } from 'vitest';
import { DEFAULT_SCRIPT_LIMITS, type ScriptLimits } from '../../../agent-server/sandbox/limits.ts';
import { runScript, type ScriptCall } from '../../../agent-server/sandbox/sandbox.ts';

// The run_code sandbox against hostile scripts: each bound ends the run with an error naming it, nothing of the
// host is reachable, and the task's thread keeps running while a script spins (its timers still fire).

const LIMITS: ScriptLimits = { ...DEFAULT_SCRIPT_LIMITS, cpuMs: 400, memoryBytes: 16 * 1024 * 1024 };

const TOOLS = [
  { name: 'add', alias: 'add' },
  { name: 'get-sum', alias: 'get_sum' },
  { name: 'boom', alias: 'boom' },
];

/** A tool server in miniature: `add` adds, `boom` fails; every call is recorded. */
function tools() {
  const seen: { name: string; args: Record<string, unknown> }[] = [];
  const call: ScriptCall = async (name, args) => {
    seen.push({ name, args });
    if (name === 'boom') return { ok: false, error: 'the disk is on fire' };
    return { ok: true, value: { sum: Number(args.a ?? 0) + Number(args.b ?? 0) } };
  };
  return { seen, call };
}

async function run(code: string, limits: ScriptLimits = LIMITS) {
  const t = tools();
  // The host's event loop keeps turning while the script runs in its own thread.
  let ticks = 0;
  const timer = setInterval(() => ticks++, 20);
  try {
    const result = await runScript({ code, tools: TOOLS, limits }, t.call);
    return { ...result, seen: t.seen, ticks };
  } finally {
    clearInterval(timer);
  }
}

describe('run_code sandbox', () => {
  it('runs a script against its tools: awaits, parallel calls, printed lines and the returned value', async () => {
    const r = await run(`
      const one = await add({ a: 1, b: 2 });
      const many = await Promise.all([1, 2, 3].map((i) => tools['get-sum']({ a: i, b: i })));
      console.log('one', one, 'many', many.map((m) => m.sum));
      return { total: one.sum + many.reduce((s, m) => s + m.sum, 0) };
    `);
    expect(r.error).toBeUndefined();
    expect(r.output).toBe('one {"sum":3} many [2,4,6]\n');
    expect(JSON.parse(r.returned as string)).toEqual({ total: 15 });
    expect(r.calls).toBe(4);
    expect(r.seen.map((c) => c.name).sort()).toEqual(['add', 'get-sum', 'get-sum', 'get-sum']);
  });

  it('throws a failing tool’s error in the script, where it can be caught or end the run', async () => {
    const r = await run(
      `try { await boom({}) } catch (e) { print('caught:', e.message) }\nawait boom({ again: true })`,
    );
    expect(r.output).toBe('caught: the disk is on fire\n');
    expect(r.error?.message).toBe('Error: the disk is on fire');
    expect(r.calls).toBe(2);
  });

  it('ends an endless loop at its computing bound, uncatchably, while the host thread runs on', async () => {
    const r = await run('let i = 0;\ntry { while (true) { i++ } } catch (e) { return "escaped" }');
    expect(r.returned).toBeUndefined();
    expect(r.error?.message).toMatch(/ran longer than its 400 ms of computing time/);
    expect(r.ticks).toBeGreaterThan(5);
  });

  it('ends a memory bomb at the heap bound', async () => {
    const before = process.memoryUsage().heapUsed;
    const r = await run('const a = [];\nfor (;;) a.push(new Array(100000).fill(a.length))', {
      ...LIMITS,
      cpuMs: 10_000,
    });
    expect(r.error?.message).toMatch(/out of memory/);
    expect(r.error?.line).toBe(2);
    // The bomb lived in the worker's WebAssembly memory, not this thread's heap.
    expect(process.memoryUsage().heapUsed - before).toBeLessThan(32 * 1024 * 1024);
  });

  it('ends deep recursion at the interpreter’s stack bound with the script’s line', async () => {
    const r = await run('function down(n) {\n  return down(n + 1) + 1\n}\nreturn down(0)');
    expect(r.error?.message).toBe('InternalError: stack overflow');
    expect(r.error?.line).toBe(2);
  });

  it('reaches nothing of the host through constructor and prototype tricks', async () => {
    const r = await run(`
      const F = ({}).constructor.constructor;
      const g = F('return this')();
      const fromProto = await Object.getPrototypeOf(add).constructor('return typeof process')();
      return [typeof g.process, typeof g.require, typeof g.fetch, typeof g.setTimeout, typeof g.WebAssembly,
        fromProto, typeof g.__call, typeof g.__print, Object.keys(g).filter((k) => k.startsWith('__'))];
    `);
    expect(JSON.parse(r.returned as string)).toEqual([
      'undefined',
      'undefined',
      'undefined',
      'undefined',
      'undefined',
      'undefined',
      'undefined',
      'undefined',
      [],
    ]);
  });

  it('has no clock but a bounded sleep; a date from a value still works', async () => {
    const now = await run('return Date.now()');
    expect(now.error?.message).toMatch(/no clock/);
    const fresh = await run('return new Date().getTime()');
    expect(fresh.error?.message).toMatch(/no clock/);
    const viaProto = await run('return new (new Date(0).constructor)().getTime()');
    expect(viaProto.error?.message).toMatch(/no clock/);
    const ok = await run('await sleep(5); return new Date(86400000).toISOString()');
    expect(JSON.parse(ok.returned as string)).toBe('1970-01-02T00:00:00.000Z');
    // A minute asked of a run allowed 100 ms of sleeping in all: refused at once, nothing waits.
    const long = await run('const minute = 60 * 1000;\nawait sleep(minute)', { ...LIMITS, sleepMs: 100 });
    expect(long.error?.message).toMatch(/sleep\(\) past the run's 100 ms/);
  });

  it('stops a script that makes 100,000 calls at the bound of calls, having made no more', async () => {
    const r = await run('for (let i = 0; i < 100000; i++) await add({ a: i })', { ...LIMITS, calls: 50 });
    expect(r.error?.message).toMatch(/more than 50 tool calls/);
    expect(r.seen).toHaveLength(50);
    const parallel = await run('await Promise.all(Array.from({ length: 100000 }, (_, i) => add({ a: i })))', {
      ...LIMITS,
      calls: 50,
    });
    expect(parallel.error?.message).toMatch(/more than 50 tool calls/);
    expect(parallel.seen.length).toBeLessThanOrEqual(50);
  });

  it('stops a script printing a gigabyte at the output bound, keeping what fit', async () => {
    const r = await run(
      'const line = "x".repeat(1 << 20);\nfor (let i = 0; i < 1024; i++) console.log(line)',
      {
        ...LIMITS,
        outputBytes: 4096,
      },
    );
    expect(r.error?.message).toMatch(/printed more than 4096 bytes/);
    expect(r.truncated).toBe(true);
    expect(Buffer.byteLength(r.output)).toBe(4096);
  });

  it('says which line a syntax error or an undefined name is on, and what hangs forever', async () => {
    const syntax = await run('const a = 1;\nconst b = ;');
    expect(syntax.error).toMatchObject({ line: 2 });
    expect(syntax.error?.message).toMatch(/SyntaxError/);
    const unknown = await run('await add({});\nawait delete_everything({})');
    expect(unknown.error).toEqual({ message: "ReferenceError: 'delete_everything' is not defined", line: 2 });
    const hang = await run('await new Promise(() => {})');
    expect(hang.error?.message).toMatch(/waits on a promise nothing will settle/);
  });

  it('refuses arguments that are not one object, and huge ones, without calling the tool', async () => {
    const r = await run(
      'const out = [];\nfor (const a of [7, [1], "s", null]) { try { await add(a) } catch (e) { out.push(e.message) } }\n' +
        'try { await add({ s: "y".repeat(300000) }) } catch (e) { out.push(e.message) }\nreturn out',
    );
    const messages = JSON.parse(r.returned as string) as string[];
    expect(messages).toHaveLength(5);
    for (const m of messages.slice(0, 4)) expect(m).toMatch(/add takes one object of its parameters/);
    expect(messages[4]).toMatch(/arguments of add are over 262144 bytes/);
    expect(r.seen).toEqual([]);
  });

  it('ends the run at its wall-clock bound and when the task is stopped', async () => {
    const slow: ScriptCall = () => new Promise(() => {});
    const timed = await runScript(
      { code: 'await add({})', tools: TOOLS, limits: { ...LIMITS, wallMs: 150 } },
      slow,
    );
    expect(timed.error?.message).toMatch(/longer than 0.15 s in all/);
    const stop = new AbortController();
    const stopped = runScript({ code: 'await add({})', tools: TOOLS, limits: LIMITS }, slow, stop.signal);
    stop.abort(new Error('cancelled'));
    await expect(stopped).rejects.toThrow('cancelled');
  });

  it('makes no call the script did not wait for once it ended, and ends those in flight with the run', async () => {
    const started: number[] = [];
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const slow: ScriptCall = async (_name, args) => {
      started.push(Number(args.a));
      await gate;
      return { ok: true, value: 1 };
    };
    const pending = runScript(
      { code: 'for (let i = 0; i < 12; i++) add({ a: i });\nreturn "ok"', tools: TOOLS, limits: LIMITS },
      slow,
    );
    await expect.poll(() => started.length).toBe(4);
    // The script has ended in its worker; the host hears it a moment later (a busy machine makes it longer).
    await new Promise((resolve) => setTimeout(resolve, 150));
    release();
    const r = await pending;
    expect(r).toMatchObject({ returned: '"ok"', calls: 4, abandoned: 8 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(started).toEqual([0, 1, 2, 3]);
  });

  it('makes no call after a bound was passed, even from a handler that caught the interrupt', async () => {
    const r = await run(
      'async function spin() { for (;;) {} }\nspin().catch(() => add({ a: 7 }));\nawait sleep(50)',
    );
    expect(r.error?.message).toMatch(/computing time/);
    expect(r.seen).toEqual([]);
    const printed = await run('print("x".repeat(5000));\nawait add({ a: 1 })', {
      ...LIMITS,
      outputBytes: 1024,
    });
    expect(printed.error?.message).toMatch(/printed more than 1024 bytes/);
    expect(printed.seen).toEqual([]);
  });

  it('ends a slice the interpreter does not interrupt (one long operation after another) from the task', async () => {
    const r = await run('const big = "x".repeat(5e6);\nfor (;;) big.slice(1).length', {
      ...LIMITS,
      cpuMs: 300,
    });
    expect(r.error?.message).toMatch(/ran longer than its 300 ms of computing time/);
  });

  it('bounds output and value in bytes, cutting on a character, and says what a call takes', async () => {
    const limits = { ...LIMITS, outputBytes: 4096 };
    const value = await run('return "€".repeat(40000)', limits);
    expect(value.truncated).toBe(true);
    expect(Buffer.byteLength(value.returned as string)).toBeLessThanOrEqual(4096 + 3);
    expect(value.returned).not.toContain('\uFFFD');
    const printed = await run('print("€".repeat(3000))', limits);
    expect(Buffer.byteLength(printed.output)).toBeLessThanOrEqual(4096);
    expect(printed.output).not.toContain('\uFFFD');
    const fn = await run('await add(() => 1)');
    expect(fn.error?.message).toBe(
      'TypeError: add takes one object of its parameters, as its declaration shows',
    );
    const clock = await run("return Object.getOwnPropertyDescriptor(Date, 'now').value()");
    expect(clock.error?.message).toMatch(/no clock/);
  });
});
