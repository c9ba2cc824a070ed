import type { ErrorObject } from 'ajv';

// Short, model-readable renderings of a JSON Schema and of what failed against it, so a bad call's error
// says both what was wrong and what is valid.

interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  enum?: unknown[];
  items?: JsonSchema;
}

function typeOf(s: JsonSchema): string {
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join('|');
  if (s.type === 'array' && s.items) return `${typeOf(s.items)}[]`;
  if (Array.isArray(s.type)) return s.type.join('|');
  return s.type ?? 'any';
}

/** `{path: string (required), head?: integer}` for a tool's parameters schema. */
export function describeParameters(schema: Record<string, unknown>): string {
  const s = schema as JsonSchema;
  const required = new Set(s.required ?? []);
  const fields = Object.entries(s.properties ?? {}).map(
    ([name, prop]) => `${name}${required.has(name) ? '' : '?'}: ${typeOf(prop)}`,
  );
  return `{${fields.join(', ')}}`;
}

/** `content: required; /head must be integer` from ajv's errors. */
export function describeValidationErrors(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? [])
    .map((e) => {
      if (e.keyword === 'required') return `missing required property '${String(e.params.missingProperty)}'`;
      if (e.keyword === 'additionalProperties') {
        return `unexpected property '${String(e.params.additionalProperty)}'`;
      }
      const where = e.instancePath ? e.instancePath.slice(1).replaceAll('/', '.') : 'arguments';
      return `${where} ${e.message ?? 'is invalid'}`;
    })
    .join('; ');
}
