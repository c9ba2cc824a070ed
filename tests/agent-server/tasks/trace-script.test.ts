import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { describe, expect, it } from 'vitest';
import { TaskTrace } from '../../../agent-server/tasks/trace.ts';
import type { ServiceTracing } from '../../../lib/telemetry/tracing.ts';

// A run_code call's trace: an execute_tool span per call its script made, each a child of the run_code call's
// span, ending as the call does; one still open when the run is cut short ends with it.

function traced() {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  const tracing: ServiceTracing = {
    tracer: provider.getTracer('test'),
    content: false,
    redact: (t) => t,
    safe: (t, max = 200) => t.slice(0, max),
    shutdown: () => provider.shutdown(),
  };
  const trace = new TaskTrace(tracing, { taskId: 't1', sessionId: 's1', model: 'm', exposure: 'code' });
  return { trace, spans: () => exporter.getFinishedSpans() };
}

describe('a run_code call in the trace', () => {
  it('puts each call of the script under the run_code span, with its outcome', () => {
    const { trace, spans } = traced();
    trace.event('task_started', { goal: 'g' });
    trace.event('tool_call_started', { step: 1, tool_call_id: 'c', name: 'run_code', script: 'x' });
    trace.event('tool_call_started', {
      step: 1,
      tool_call_id: 'c#1',
      name: 'read_text_file',
      in_script: 'c',
    });
    trace.event('tool_call_started', {
      step: 1,
      tool_call_id: 'c#2',
      name: 'list_directory',
      in_script: 'c',
    });
    trace.event('tool_call', {
      tool_call_id: 'c#2',
      name: 'list_directory',
      ok: false,
      toolset: 'fs',
      in_script: 'c',
    });
    trace.event('tool_call', {
      tool_call_id: 'c#1',
      name: 'read_text_file',
      ok: true,
      toolset: 'fs',
      in_script: 'c',
    });
    trace.event('tool_call', { tool_call_id: 'c', name: 'run_code', ok: true });
    const byName = new Map(spans().map((s) => [s.name, s]));
    const run = byName.get('execute_tool run_code');
    const read = byName.get('execute_tool read_text_file');
    const list = byName.get('execute_tool list_directory');
    expect(run && read && list).toBeTruthy();
    expect(read?.parentSpanContext?.spanId).toBe(run?.spanContext().spanId);
    expect(list?.parentSpanContext?.spanId).toBe(run?.spanContext().spanId);
    expect(read?.attributes['toolshift.tool.outcome']).toBe('ok');
    expect(list?.status.code).toBe(2);
    expect(read?.attributes['gen_ai.tool.call.id']).toBe('c#1');
  });

  it('ends a call still in flight when the run_code call ends without it', () => {
    const { trace, spans } = traced();
    trace.event('task_started', { goal: 'g' });
    trace.event('tool_call_started', { step: 1, tool_call_id: 'c', name: 'run_code' });
    trace.event('tool_call_started', { step: 1, tool_call_id: 'c#1', name: 'slow', in_script: 'c' });
    trace.event('task_finished', { status: 'cancelled', error: 'cancelled' });
    const slow = spans().find((s) => s.name === 'execute_tool slow');
    expect(slow?.attributes).toMatchObject({ 'gen_ai.tool.call.id': 'c#1' });
    expect(Object.values(slow?.attributes ?? {})).toContain('stopped');
  });
});
