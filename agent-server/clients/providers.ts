import type { Provider } from '../../lib/config/provider.ts';
import { type Model, type OpenAIModelOptions, openAIModel } from './model.ts';
import { openAIResponsesModel } from './model-responses.ts';

// The client of each provider (AGENT_PROVIDER): the loop, its events, traces and the store see one Model
// whichever API is behind it. lib/config/provider.ts chooses the provider and its endpoint.

/** What every provider's client is made from: the endpoint, key and limits of config.agent.model. */
export interface ProviderSettings extends OpenAIModelOptions {
  provider: Provider;
  /** The output limit a request asks for where the API requires one (anthropic). */
  maxTokens?: number;
}

/** Each provider's client. */
const FACTORIES: Record<Provider, (s: ProviderSettings) => Model> = {
  'openai-chat': (s) => openAIModel(s),
  'openai-responses': (s) => openAIResponsesModel(s),
  // Anthropic's SDK is loaded only where it is spoken (about 0.2 s of every start otherwise).
  anthropic: (s) =>
    loadedOnUse(s.baseURL ?? DEFAULT_URLS.anthropic, async () =>
      (await import('./model-anthropic.ts')).anthropicModel(s),
    ),
};

/** A client made on its first call; its health is `unknown` until then, as any client's is before a call. */
function loadedOnUse(url: string, make: () => Promise<Model>): Model {
  let made: Promise<Model> | undefined;
  let model: Model | undefined;
  return {
    async complete(request, options) {
      made ??= make();
      model = await made;
      return model.complete(request, options);
    },
    health: () => model?.health?.() ?? { url, state: 'unknown' },
  };
}

/** The endpoint a provider's client calls when its base URL is not set. */
export const DEFAULT_URLS: Record<Provider, string> = {
  'openai-chat': 'https://api.openai.com/v1',
  'openai-responses': 'https://api.openai.com/v1',
  anthropic: 'https://api.anthropic.com',
};

/** The variables that configure a provider's endpoint, for the warning when none is set. */
export const ENDPOINT_VARIABLES: Record<Provider, string> = {
  'openai-chat': 'OPENAI_API_KEY or OPENAI_BASE_URL',
  'openai-responses': 'OPENAI_API_KEY or OPENAI_BASE_URL',
  anthropic: 'ANTHROPIC_API_KEY or ANTHROPIC_BASE_URL',
};

/** The provider's client; its health names the provider. */
export function modelFor(settings: ProviderSettings): Model {
  const model = FACTORIES[settings.provider](settings);
  const health = model.health;
  return {
    complete: (request, options) => model.complete(request, options),
    ...(health ? { health: () => ({ ...health(), provider: settings.provider }) } : {}),
  };
}
