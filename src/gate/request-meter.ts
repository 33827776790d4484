// What a model API request asks for, read from its body as it passes upstream, never buffered (docs/gate.md "Metered
// cost"): the model, the output maximum and answers that bound a call whose usage never comes, and what it asks that
// the gate cannot price, which is refused before the body's last bytes go upstream.
import type { Transform } from 'node:stream';
import { constants, createBrotliDecompress, createGunzip, createInflate, createZstdDecompress } from 'node:zlib';
import type { Zlib } from 'node:zlib';
import { str, tryParseJson } from '../untrusted.ts';
import { JsonPicker } from './json-picker.ts';
import { FAMILIES, familyOf, MAX_TOKENS, type Asked, type Family } from './usage.ts';

/** Bytes of a request body read for what it asked (a coding agent's is about 1 MB at a full context, more with
 * images: an honest request must not be counted as one not read), and values taken. */
const ASKED_READ_MAX = 32 * 1024 * 1024;
const ASKED_PICKS_MAX = 64;

// `prompt` is kept input only on /responses: to the legacy /completions it is the text itself.
const RESPONSES_KEPT: readonly string[] = [...FAMILIES.openai.kept, 'prompt'];
/** What a request may ask that costs past its tokens, priced by no row (docs/gate.md "Metered cost"): the key paths of
 * each family, read as the body passes, and a request asking it is refused before its last bytes go upstream. A
 * server-side tool only offered (`tools`) costs nothing until the model uses it: its use is read in the response. */
const UNMETERED: Record<Family, readonly string[]> = {
  anthropic: [],
  openai: ['service_tier', 'web_search_options'],
  gemini: [],
};

/** What of a request's value at an UNMETERED path the meter cannot price, or null. */
function unmetered(path: string, value: unknown): string | null {
  if (path === 'service_tier') return value === 'priority' ? 'the "priority" service tier' : null;
  // A background response is answered later, read back by another call: the gate never reads its usage.
  if (path === 'background') return value === true ? 'a background response' : null;
  // Chat completions' web search: its search models search on every call, asked by being there.
  return value === null ? null : `"${path}"`;
}

// Each Responses input item's type: an `item_reference` names an item the API keeps. Not counted towards
// ASKED_PICKS_MAX: a whole history has one per item.
const ITEM_TYPE = 'input.type';
// At most this many items read: each costs the picker a value, and a hostile body of 2 million tiny items held the
// gate's one event loop 2.7 s. A long agent history is some thousands; one past this is read no further (doubted).
const ITEM_TYPES_MAX = 20_000;
const RESPONSES = /\/responses(\/compact)?$/i;
// Where a request offers tools: each tool's type (OpenAI, Anthropic), or its key (Gemini). Not counted towards
// ASKED_PICKS_MAX: an agent offers many tools.
const OFFERED: Record<Family, readonly string[]> = {
  openai: ['tools.type'],
  anthropic: ['tools.type'],
  gemini: ['tools.googleSearch', 'tools.googleSearchRetrieval', 'tools.googleMaps', 'tools.google_search',
    'tools.google_search_retrieval', 'tools.google_maps'],
};
const PER_USE_TOOL: Record<Family, RegExp> = {
  openai: /^(web_search|file_search|code_interpreter|image_generation)/,
  anthropic: /^(web_search|code_execution)_/,
  gemini: /./,
};

/** A decompressor for a request body sent with Content-Encoding `encoding` (codex logged in to ChatGPT sends zstd),
 * or null for one the gate does not read (none, or codings stacked). */
function bodyDecoder(encoding: string): (Transform & Zlib) | null {
  const coding = encoding.toLowerCase();
  if (coding === 'gzip' || coding === 'x-gzip') return createGunzip();
  if (coding === 'deflate') return createInflate();
  if (coding === 'br') return createBrotliDecompress();
  // A zstd frame names the window its decoder allocates (up to 2 GiB): a 1.3 KB frame asking 128 MiB cost ~30 MiB
  // of the shared gate per request. Held to RFC 9659's 8 MiB for HTTP; a frame asking more is not read.
  const window = { [constants.ZSTD_d_windowLogMax]: 23 };
  return coding === 'zstd' ? createZstdDecompress({ params: window }) : null;
}

export function requestMeter(route: string, endpoint: string, headers: Readonly<Record<string, unknown>>) {
  const family = familyOf(route, endpoint);
  const { maxOutput: maxKeys, choices: choiceKeys, kept, aliases } = FAMILIES[family];
  const responses = RESPONSES.test(endpoint);
  const keptKeys = responses ? RESPONSES_KEPT : kept;
  const unmeteredKeys = responses ? [...UNMETERED[family], 'background'] : UNMETERED[family];
  const offeredKeys = OFFERED[family];
  const wanted = ['model', ...maxKeys, ...choiceKeys, ...keptKeys, ...unmeteredKeys, ...offeredKeys,
    ...(responses ? [ITEM_TYPE] : [])];
  const picker = new JsonPicker(new Set(wanted), aliases, new Set(responses ? ['input', 'tools'] : ['tools']));
  const asked: Asked = { model: null, maxOutput: null, choices: 1, bytes: 0 };
  // What the request asks that the meter cannot price (the first): the gate refuses it.
  let refused: string | null = null;
  // A maximum given as null: the APIs read it as absent, so no maximum (OUTPUT_BOUND), the larger of any given.
  let unbounded = false;
  let picks = 0;
  let items = 0;
  // A body compressed (gzip, deflate, br, zstd) is read as it is decompressed, its bytes and caps those decompressed;
  // one of another coding, or not starting with `{` past whitespace (a UTF-8 BOM, UTF-16, a form), is not one this
  // reader walks, though the API may read it: what it asked is not known.
  const encoding = str(headers['content-encoding'])?.trim() ?? '';
  const identity = encoding === '' || encoding.toLowerCase() === 'identity';
  let decoder = identity ? null : bodyDecoder(encoding);
  let unread = identity || decoder !== null ? null : `the request body is ${encoding.slice(0, 40)}-encoded`;
  let started = false;
  // The agent writes the request: past ASKED_READ_MAX bytes or ASKED_PICKS_MAX values (a key repeated without end),
  // at a wanted value that is no whole number (or no string, for the model), or where the picker is in doubt (an
  // escaped key, nesting past its depth) the reader stops, and what the API may read there counts as unknown (the
  // larger bounds): the reader cannot tell which of two spellings the API takes.
  const stopped = (): string | null => unread
    ?? (picker.doubtful ? 'a key or value it cannot read for certain (an escaped key, a second generationConfig, ' +
      'a value past 16 KB, nesting past 64 levels)' : null)
    ?? (asked.bytes > ASKED_READ_MAX ? 'a body past 32 MiB' : null)
    ?? (picks > ASKED_PICKS_MAX ? 'more than 64 values of the keys the gate reads' : null);
  const take = (): void => {
    for (const { path, text } of picker.picks.splice(0)) {
      const value = tryParseJson(text);
      if (unmeteredKeys.includes(path)) {
        picks += 1;
        refused ??= unmetered(path, value);
        continue;
      }
      if (offeredKeys.includes(path)) {
        const tool = family === 'gemini' ? path.slice('tools.'.length) : str(value);
        if (value !== null && tool !== null && PER_USE_TOOL[family].test(tool)) asked.offered ??= tool.slice(0, 60);
        continue;
      }
      if (path === ITEM_TYPE) {
        if (++items > ITEM_TYPES_MAX) unread ??= 'more than 20,000 input items';
        else if (value === 'item_reference') {
          asked.doubt ??= 'its request continues input the API keeps (item_reference)';
        }
        continue;
      }
      picks += 1;
      const whole = typeof value === 'number' && Number.isInteger(value) && value > 0 && value <= MAX_TOKENS;
      if (path === 'model') {
        const model = str(value)?.slice(0, 200) ?? null;
        // A model named twice, differently: which the API takes is not known.
        if (model === null || (asked.model !== null && asked.model !== model)) {
          unread ??= 'a model named twice or not by name';
        }
        asked.model = model;
      } else if (keptKeys.includes(path)) {
        // Read, not stopped at: the model and maximum are still known; only the input is not.
        if (value !== null) asked.doubt ??= `its request continues input the API keeps (${path})`;
      } else if (value === null) {
        // Absent to the API (`"n": null` is one answer): no doubt, and a null maximum bounds nothing.
        if (maxKeys.includes(path)) unbounded = true;
      } else if (!whole) unread ??= 'a maximum or count of answers that is no whole number';
      // A key given twice is read by the API as one of them: the larger bounds both.
      else if (maxKeys.includes(path)) asked.maxOutput = Math.max(asked.maxOutput ?? 0, value);
      else asked.choices = Math.max(asked.choices, value);
    }
  };
  const read = (chunk: Uint8Array): void => {
    if (!started) {
      const first = chunk.findIndex((b) => b !== 0x20 && b !== 0x09 && b !== 0x0a && b !== 0x0d);
      started = first >= 0;
      if (started && chunk[first] !== 0x7b) unread ??= 'a body that is no JSON object';
    }
    if (stopped() === null) {
      picker.push(chunk);
      take();
    }
    asked.bytes += chunk.length;
    // Past what is read, decompressing more would only cost the gate: the rest passes upstream unread.
    if (decoder !== null && stopped() !== null) stopDecoding();
  };
  // What waits on the decoder (the chunks' way upstream): each called once, when read or when decoding stops.
  const waiting = new Set<() => void>();
  const afterDecoding = (then: () => void): (() => void) => {
    const once = (): void => {
      if (waiting.delete(once)) then();
    };
    waiting.add(once);
    return once;
  };
  const stopDecoding = (): void => {
    decoder?.destroy();
    decoder = null;
    for (const then of waiting) then();
  };
  decoder?.on('data', read);
  decoder?.on('error', () => {
    unread ??= `a body that is not valid ${encoding.slice(0, 40)}`;
    stopDecoding();
  });
  // The decoder stops at the compressed body's end, but bytes sent past it (a second deflate or brotli stream, data
  // after a zstd frame) still go upstream: what the API reads there is not known. node:zlib ends a stream once bytes
  // follow its end (or at the body's end), having taken fewer bytes than were sent exactly when some lie past it.
  let sent = 0;
  decoder?.on('end', () => {
    if (decoder !== null && decoder.bytesWritten < sent) unread ??= 'bytes past the end of the compressed body';
  });
  return {
    /** Reads a chunk of the body as sent; `then` once it is read (decompressed first: later, on another tick). */
    push(chunk: Uint8Array, then: () => void = () => {}): void {
      sent += chunk.length;
      if (decoder === null) {
        read(chunk);
        return then();
      }
      decoder.write(chunk, afterDecoding(then));
    },
    /** `then` once the whole body is read (a compressed one's last bytes decompressed). */
    end(then: () => void): void {
      if (decoder === null) return then();
      decoder.end(afterDecoding(then));
    },
    /** What the request read so far asks that the meter cannot price (a server-side tool billed per use, the priority
     * tier), or null: read after each push, before the chunk goes upstream. */
    refusal(): string | null {
      return refused === null ? null : `the request asks for ${refused}, which the gate cannot meter (it prices ` +
        'tokens only): refused on a metered model route';
    },
    read(): Asked {
      picker.finish();
      take();
      const why = stopped();
      if (why === null) return { ...asked, ...(unbounded ? { maxOutput: null } : {}) };
      // One answer, not the family's most (128 for OpenAI's n): counting a request not read at 128 answers at the
      // table's highest price let one cheap call with an escaped key count $1,229 toward the server's day cap. The
      // doubt fails the run closed instead (budgets.ts RunSpend): its next call is refused under a budget.
      const doubt = `its request was not read: ${why}`;
      return { model: null, maxOutput: null, choices: 1, bytes: asked.bytes, doubt, unread: true,
        ...(asked.offered !== undefined ? { offered: asked.offered } : {}) };
    },
  };
}
