// Which API the agent-server speaks to its model (AGENT_PROVIDER), and where: said outright, or chosen from the
// endpoint settings when that is obvious (only Anthropic's variables set: anthropic; otherwise openai-chat, as
// before there was a choice). agent-server/clients/providers.ts makes the client of each.

export const PROVIDERS = ['openai-chat', 'openai-responses', 'anthropic'] as const;
export type Provider = (typeof PROVIDERS)[number];

/** The default model of each provider when AGENT_MODEL is not set. */
export const DEFAULT_MODELS: Record<Provider, string> = {
  'openai-chat': 'gpt-4o-mini',
  'openai-responses': 'gpt-4o-mini',
  anthropic: 'claude-sonnet-4-5',
};

interface ProviderEnv {
  AGENT_PROVIDER?: Provider;
  OPENAI_BASE_URL?: string;
  OPENAI_API_KEY?: string;
  ANTHROPIC_BASE_URL?: string;
  ANTHROPIC_API_KEY?: string;
}

/** The provider set, or the one the endpoint settings make obvious. */
export function providerOf(e: ProviderEnv): Provider {
  if (e.AGENT_PROVIDER) return e.AGENT_PROVIDER;
  const openai = e.OPENAI_BASE_URL !== undefined || e.OPENAI_API_KEY !== undefined;
  const anthropic = e.ANTHROPIC_BASE_URL !== undefined || e.ANTHROPIC_API_KEY !== undefined;
  return anthropic && !openai ? 'anthropic' : 'openai-chat';
}

/** The provider's endpoint and key: OPENAI_* for the OpenAI APIs, ANTHROPIC_* for anthropic. */
export function endpointOf(provider: Provider, e: ProviderEnv): { baseURL?: string; apiKey?: string } {
  if (provider === 'anthropic') return { baseURL: e.ANTHROPIC_BASE_URL, apiKey: e.ANTHROPIC_API_KEY };
  return { baseURL: e.OPENAI_BASE_URL, apiKey: e.OPENAI_API_KEY };
}
