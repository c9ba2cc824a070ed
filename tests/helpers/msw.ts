import { setupServer } from 'msw/node';

/** An msw server that mocks the model endpoint and lets loopback traffic (our own services) through. */
export function modelEdge() {
  const server = setupServer();
  server.listen({
    onUnhandledRequest(request, print) {
      const host = new URL(request.url).hostname;
      if (host === '127.0.0.1' || host === 'localhost') return;
      print.error();
    },
  });
  return server;
}

export const MODEL_BASE_URL = 'http://model.test/v1';

/** A chat completion body as an OpenAI-compatible server returns it. */
export function completion(
  message: Record<string, unknown>,
  usage = { prompt_tokens: 100, completion_tokens: 10 },
) {
  return {
    id: 'chatcmpl-test',
    object: 'chat.completion',
    created: 0,
    model: 'test-model',
    choices: [{ index: 0, message: { role: 'assistant', content: null, ...message }, finish_reason: 'stop' }],
    usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
  };
}
