import { readFileSync } from 'node:fs';
import { Tiktoken } from 'js-tiktoken/lite';
import { describe, expect, it } from 'vitest';
import { createTokenCounter, leanEncoder, ranksOf, TOKENIZERS } from '../../lib/telemetry/tokens.ts';

// The lean rank-map loader (lib/telemetry/tokens.ts) must encode exactly as js-tiktoken's own constructor does: same
// token ids for text in many scripts, code, JSON and the benchmark's real tool definitions.

const SAMPLES = [
  'Hello, world! The quick brown fox jumps over the lazy dog.',
  'Ünïcödé — naïve café; 日本語のテキスト; Ελληνικά; עברית; العربية; emoji 🚀🔥👩‍💻',
  'function add(a: number, b: number): number {\n  return a + b;\n}\n\t  indented\r\nCRLF',
  '{"type":"function","function":{"name":"read_text_file","parameters":{"type":"object"}}}',
  '    12345678901234567890 3.14159 0xDEADBEEF   \n\n\n',
  readFileSync('tests/fixtures/recorded/github-mcp-server-tools.json', 'utf8').slice(0, 40_000),
];

/** js-tiktoken's own encoder for `name`, built once for the file (building one is most of the file's time). */
const libraries = new Map<string, Tiktoken>();
function library(name: (typeof TOKENIZERS)[number]): Tiktoken {
  let encoder = libraries.get(name);
  if (!encoder) {
    encoder = new Tiktoken(ranksOf(name));
    libraries.set(name, encoder);
  }
  return encoder;
}

describe('token counting', () => {
  for (const name of TOKENIZERS) {
    it(`encodes like js-tiktoken's constructor (${name})`, () => {
      const lean = leanEncoder(ranksOf(name));
      const own = library(name);
      for (const text of SAMPLES) expect(lean.encode(text)).toEqual(own.encode(text));
      // Special tokens are refused by default and allowed when asked, the same way.
      expect(() => lean.encode('<|endoftext|>')).toThrow(/special token/);
      expect(lean.encode('a <|endoftext|> b', 'all')).toEqual(own.encode('a <|endoftext|> b', 'all'));
    });
  }

  it('counts text as the encoder does, through the caches', () => {
    const counter = createTokenCounter('o200k_base');
    const own = library('o200k_base');
    for (const text of SAMPLES) {
      const expected = own.encode(text.slice(0, 16_000), 'all').length;
      expect(counter.text(text.slice(0, 16_000))).toBe(expected);
      // A second time from the caches.
      expect(counter.text(text.slice(0, 16_000))).toBe(expected);
    }
  });
});
