import path from 'node:path';
import { z } from 'zod';
import type { VerifiedDir } from '../../guards/paths/fd-path.ts';
import { defineTool, READ_ONLY } from '../../kit/define.ts';
import { ToolError } from '../../kit/errors.ts';
import { IsoTime, LIMITS, onPath } from './common.ts';
import { openRegular } from './text.ts';

// read_media_file: an image or audio file as base64 with its MIME type, so binary content a model can take
// in (vision, audio) is reachable at all. The type comes from the file's own leading bytes, not its name
// (SVG, which is text, is the one type recognised by name plus content). A file over the cap is refused
// rather than cut: half an image or half an MP3 would be corrupt data.

/** What read_media_file recognises: a MIME type, its kind, and the test on the file's first bytes. */
interface MediaType {
  mime: string;
  kind: 'image' | 'audio';
  label: string;
  test: (head: Buffer) => boolean;
}

const ascii = (head: Buffer, at: number, text: string) =>
  head.toString('latin1', at, at + text.length) === text;
const bytes = (head: Buffer, at: number, values: number[]) => values.every((v, i) => head[at + i] === v);
/** An ISO base media file (MP4 family) whose major brand is one of `brands`. */
const isoBrand = (head: Buffer, brands: string[]) =>
  ascii(head, 4, 'ftyp') && brands.includes(head.toString('latin1', 8, 12));

const MEDIA_TYPES: MediaType[] = [
  {
    mime: 'image/png',
    kind: 'image',
    label: 'PNG',
    test: (h) => bytes(h, 0, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  },
  { mime: 'image/jpeg', kind: 'image', label: 'JPEG', test: (h) => bytes(h, 0, [0xff, 0xd8, 0xff]) },
  {
    mime: 'image/gif',
    kind: 'image',
    label: 'GIF',
    test: (h) => ascii(h, 0, 'GIF87a') || ascii(h, 0, 'GIF89a'),
  },
  {
    mime: 'image/webp',
    kind: 'image',
    label: 'WebP',
    test: (h) => ascii(h, 0, 'RIFF') && ascii(h, 8, 'WEBP'),
  },
  { mime: 'image/bmp', kind: 'image', label: 'BMP', test: (h) => ascii(h, 0, 'BM') && h.length >= 26 },
  { mime: 'image/x-icon', kind: 'image', label: 'ICO', test: (h) => bytes(h, 0, [0, 0, 1, 0]) && h[4] > 0 },
  {
    mime: 'image/tiff',
    kind: 'image',
    label: 'TIFF',
    test: (h) => ascii(h, 0, 'II*\0') || ascii(h, 0, 'MM\0*'),
  },
  { mime: 'image/avif', kind: 'image', label: 'AVIF', test: (h) => isoBrand(h, ['avif', 'avis']) },
  { mime: 'audio/wav', kind: 'audio', label: 'WAV', test: (h) => ascii(h, 0, 'RIFF') && ascii(h, 8, 'WAVE') },
  { mime: 'audio/ogg', kind: 'audio', label: 'Ogg', test: (h) => ascii(h, 0, 'OggS') },
  { mime: 'audio/flac', kind: 'audio', label: 'FLAC', test: (h) => ascii(h, 0, 'fLaC') },
  { mime: 'audio/mp4', kind: 'audio', label: 'M4A', test: (h) => isoBrand(h, ['M4A ', 'M4B ']) },
  {
    mime: 'audio/aiff',
    kind: 'audio',
    label: 'AIFF',
    test: (h) => ascii(h, 0, 'FORM') && ascii(h, 8, 'AIFF'),
  },
  { mime: 'audio/midi', kind: 'audio', label: 'MIDI', test: (h) => ascii(h, 0, 'MThd') },
  {
    mime: 'audio/mpeg',
    kind: 'audio',
    label: 'MP3',
    // An ID3 tag, or an MPEG audio frame header (sync bits, layer III, a valid bitrate and sample rate).
    test: (h) =>
      ascii(h, 0, 'ID3') ||
      (h[0] === 0xff && (h[1] & 0xe6) === 0xe2 && (h[2] & 0xf0) !== 0xf0 && (h[2] & 0x0c) !== 0x0c),
  },
  { mime: 'audio/aac', kind: 'audio', label: 'AAC', test: (h) => h[0] === 0xff && (h[1] & 0xf6) === 0xf0 },
];

const SVG: MediaType = {
  mime: 'image/svg+xml',
  kind: 'image',
  label: 'SVG',
  test: (h) => /<svg[\s>]/i.test(h.toString('utf8')),
};

/** The formats named in the description and in the refusal, so the model knows what to expect. */
const KNOWN = [...MEDIA_TYPES, SVG].map((t) => t.label).join(', ');

/** The media type of a file from its name and first bytes, or undefined when it is neither image nor audio. */
export function mediaTypeOf(name: string, head: Buffer): MediaType | undefined {
  const byContent = MEDIA_TYPES.find((t) => t.test(head));
  if (byContent) return byContent;
  return path.extname(name).toLowerCase() === '.svg' && SVG.test(head) ? SVG : undefined;
}

/** Reads the whole file `name` in `dir` if it is media within the cap. */
async function readMedia(dir: VerifiedDir, name: string, maxBytes: number) {
  const real = path.join(dir.real, name);
  const { handle, size, modified } = await openRegular(dir, name);
  try {
    if (size > maxBytes) {
      throw new ToolError(
        `${real} is ${size} bytes; read_media_file returns files up to ${maxBytes} bytes (a cut image or ` +
          'sound would be corrupt, so larger files are not returned at all)',
      );
    }
    // One byte more than the cap: a file that grew since stat() is refused the same way.
    const buffer = Buffer.alloc(Math.min(maxBytes + 1, size + 1));
    let filled = 0;
    while (filled < buffer.length) {
      const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, filled);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    if (filled > maxBytes) throw new ToolError(`${real} grew past ${maxBytes} bytes while being read`);
    const data = buffer.subarray(0, filled);
    const type = mediaTypeOf(name, data.subarray(0, 512));
    if (!type) {
      throw new ToolError(
        `${real} is not an image or audio file read_media_file recognises (${KNOWN}); ` +
          'use read_text_file for text',
      );
    }
    return {
      path: real,
      type: type.kind,
      mime_type: type.mime,
      size_bytes: filled,
      modified,
      encoding: 'base64' as const,
      data: data.toString('base64'),
      max_bytes: maxBytes,
    };
  } finally {
    await handle.close();
  }
}

/** Returns an image or audio file as base64 with its MIME type, so binary media is reachable at all. */
export const readMediaFile = defineTool({
  name: 'read_media_file',
  description:
    `Read an image or audio file (${KNOWN}) and return it as base64: {path, type: "image"|"audio", ` +
    'mime_type, size_bytes, modified, encoding: "base64", data, max_bytes}. The type is detected from the ' +
    "file's content. Files larger than max_bytes are refused, never cut. For text files use read_text_file.",
  input: z.object({
    path: z.string().describe('Image or audio file: absolute, or relative to the first allowed directory'),
  }),
  output: z.object({
    path: z.string(),
    type: z.enum(['image', 'audio']),
    mime_type: z.string(),
    size_bytes: z.number(),
    modified: IsoTime,
    encoding: z.literal('base64'),
    data: z.string().describe("The file's bytes, base64"),
    max_bytes: z.number().describe('The largest file this tool returns'),
  }),
  annotations: { title: 'Read media file', ...READ_ONLY },
  async execute(args, ctx) {
    const real = await ctx.paths.resolveForRead(args.path);
    const maxBytes = ctx.maxMediaBytes ?? LIMITS.mediaBytes;
    return onPath(real, () => ctx.paths.withParent(real, (dir, name) => readMedia(dir, name, maxBytes)));
  },
});
