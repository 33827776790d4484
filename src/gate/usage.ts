// The usage a model API reports for one call, read from the response bytes as they pass to the client, never buffered:
// JsonPicker keeps only the values at a few key paths (docs/gate.md "Metered cost" says which, and why that is safe).
// A response cut before its final usage is counted at what was read and bounds for the rest, never at $0.
import { isJsonObject, obj, str, tryParseJson } from '../untrusted.ts';
import { callCost, costAt, highestPrice, priceOf, type PriceTable } from './prices.ts';
import type { CallTokens, MeteredCall } from './evidence.ts';

/** Beyond any context window: a bigger count is the response's error. */
const MAX_TOKENS = 100_000_000;
/** Bytes kept of one picked value (a usage object is a few hundred), of a key, and nesting followed. */
const PICK_MAX = 16 * 1024;
const KEY_MAX = 64;
const DEPTH_MAX = 64;

/** The output a call is counted at when its request set no maximum: the most any model of the table can write. */
export const OUTPUT_BOUND = 128_000;

type Family = 'anthropic' | 'openai' | 'gemini';

// The OpenAI-compatible APIs (openrouter, groq, …) read as openai.
const familyOf = (route: string): Family => (route === 'anthropic' || route === 'gemini' ? route : 'openai');

const PATHS: Record<Family, { usage: readonly string[]; model: readonly string[] }> = {
  anthropic: { usage: ['usage', 'message.usage'], model: ['model', 'message.model'] },
  openai: { usage: ['usage', 'response.usage'], model: ['model', 'response.model'] },
  gemini: { usage: ['usageMetadata'], model: ['modelVersion'] },
};

/** The raw text of each value at the wanted key paths (keys joined by ".", arrays not counted), as each ends. */
class JsonPicker {
  private readonly stack: Array<{ array: boolean; key: string | null }> = [];
  private inString = false;
  private escaped = false;
  private stringIsKey = false;
  private key: number[] = [];
  private expectKey = false;
  private captureDepth = -1;
  private capturePath = '';
  private captured: number[] = [];
  private overflow = false;
  readonly picks: Array<{ path: string; text: string }> = [];

  private readonly wanted: ReadonlySet<string>;

  constructor(wanted: ReadonlySet<string>) {
    this.wanted = wanted;
  }

  private path(): string {
    let out = '';
    for (const frame of this.stack) if (!frame.array) out += (out ? '.' : '') + (frame.key ?? '');
    return out;
  }

  private endCapture(): void {
    if (!this.overflow) this.picks.push({ path: this.capturePath, text: Buffer.from(this.captured).toString('utf8') });
    this.finish();
  }

  private valueStarts(b: number): void {
    if (this.captureDepth >= 0) return;
    const top = this.stack.at(-1);
    if (!top || top.array) return;
    const path = this.path();
    if (!this.wanted.has(path)) return;
    this.captureDepth = this.stack.length;
    this.capturePath = path;
    this.captured.push(b);
  }

  push(bytes: Uint8Array): void {
    // Inside a string that is neither a key nor captured only its closing quote and escapes matter: the text between
    // (a request's messages, a response's model text: nearly all the bytes) is skipped to the next of those.
    const next = (byte: number, from: number): number => {
      const at = bytes.indexOf(byte, from);
      return at < 0 ? bytes.length : at;
    };
    let quote = -1;
    let backslash = -1;
    for (let i = 0; i < bytes.length; i++) {
      if (this.inString && !this.escaped && !this.stringIsKey && this.captureDepth < 0) {
        if (quote < i) quote = next(0x22, i);
        if (backslash < i) backslash = next(0x5c, i);
        i = Math.min(quote, backslash);
        if (i >= bytes.length) return;
      }
      this.byte(bytes[i]!);
    }
  }

  byte(b: number): void {
    if (this.stack.length > DEPTH_MAX) return;
    if (this.captureDepth >= 0) {
      // Back in the frame that holds the value: a comma or that frame's close ends it.
      const closer = b === 0x2c || b === 0x7d || b === 0x5d;
      const ends = !this.inString && this.stack.length === this.captureDepth && closer;
      if (ends) this.endCapture();
      else if (this.captured.length < PICK_MAX) this.captured.push(b);
      else this.overflow = true;
    }
    if (this.inString) {
      if (this.escaped) this.escaped = false;
      else if (b === 0x5c) this.escaped = true;
      else if (b === 0x22) {
        this.inString = false;
        const top = this.stack.at(-1);
        const key = this.key.length <= KEY_MAX ? Buffer.from(this.key).toString('utf8') : null;
        if (this.stringIsKey && top) top.key = key;
        return;
      }
      if (this.stringIsKey && this.key.length <= KEY_MAX) this.key.push(b);
      return;
    }
    switch (b) {
      case 0x7b: // {
      case 0x5b: // [
        if (!this.expectKey) this.valueStarts(b);
        this.stack.push({ array: b === 0x5b, key: null });
        this.expectKey = b === 0x7b;
        return;
      case 0x7d: // }
      case 0x5d: // ]
        this.stack.pop();
        this.expectKey = false;
        return;
      case 0x2c: // ,
        this.expectKey = this.stack.at(-1)?.array === false;
        return;
      case 0x3a: // :
        this.expectKey = false;
        return;
      case 0x22: // "
        this.inString = true;
        this.stringIsKey = this.expectKey;
        this.key = [];
        if (!this.stringIsKey) this.valueStarts(b);
        return;
      case 0x20: case 0x09: case 0x0a: case 0x0d:
        return;
      default:
        // A number or literal: its first byte starts it, the rest are captured above.
        if (!this.expectKey) this.valueStarts(b);
    }
  }

  /** A value still open at the end of the text was cut short, and is dropped. */
  finish(): void {
    this.captureDepth = -1;
    this.captured = [];
    this.overflow = false;
  }
}

/** Absent is 0; anything but a whole number in range makes the usage unknown. */
function count(o: Record<string, unknown>, key: string, bad: string[]): number {
  const v = o[key];
  if (v === undefined || v === null) return 0;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > MAX_TOKENS) {
    bad.push(key);
    return 0;
  }
  return v;
}

/** One usage object in the family's own words → tokens; `bad` collects unreadable fields. */
function readTokens(family: Family, u: Record<string, unknown>, bad: string[]): Partial<CallTokens> {
  const has = (k: string): boolean => u[k] !== undefined && u[k] !== null;
  const out: Partial<CallTokens> = {};
  if (family === 'anthropic') {
    // input_tokens excludes the cache's tokens; message_delta repeats the running output count.
    if (has('input_tokens')) out.tokens_in = count(u, 'input_tokens', bad);
    if (has('output_tokens')) out.tokens_out = count(u, 'output_tokens', bad);
    if (has('cache_read_input_tokens')) out.cache_read = count(u, 'cache_read_input_tokens', bad);
    if (has('cache_creation_input_tokens')) out.cache_write = count(u, 'cache_creation_input_tokens', bad);
  } else if (family === 'openai') {
    // Chat completions say prompt/completion, responses say input/output; both count cached input inside the input.
    const chat = has('prompt_tokens') || has('completion_tokens');
    const details = obj(u[chat ? 'prompt_tokens_details' : 'input_tokens_details']);
    const cached = count(details, 'cached_tokens', bad);
    const input = count(u, chat ? 'prompt_tokens' : 'input_tokens', bad);
    out.tokens_in = Math.max(0, input - cached);
    out.cache_read = Math.min(cached, input);
    out.tokens_out = count(u, chat ? 'completion_tokens' : 'output_tokens', bad);
  } else {
    // Gemini counts cached input inside the prompt, and bills thinking as output.
    const cached = count(u, 'cachedContentTokenCount', bad);
    const prompt = count(u, 'promptTokenCount', bad);
    out.tokens_in = Math.max(0, prompt - cached);
    out.cache_read = Math.min(cached, prompt);
    out.tokens_out = count(u, 'candidatesTokenCount', bad) + count(u, 'thoughtsTokenCount', bad);
  }
  return out;
}

/** What a request asked for, read from its body as it passes upstream: the model it names, the most output it
 * allows (the API stops there, so it bounds the output of a call whose usage never came), and its bytes. */
export interface Asked {
  model: string | null;
  maxOutput: number | null;
  bytes: number;
}

/** Bytes of a request body read for what it asked (a coding agent's is about 1 MB at a full context), and values
 * taken. */
const ASKED_READ_MAX = 4 * 1024 * 1024;
const ASKED_PICKS_MAX = 64;

// Each family's names for the output maximum; Gemini names its model in the path.
const ASKED_MAX: Record<Family, readonly string[]> = {
  anthropic: ['max_tokens'],
  openai: ['max_tokens', 'max_completion_tokens', 'max_output_tokens'],
  gemini: ['generationConfig.maxOutputTokens'],
};

export function requestMeter(route: string) {
  const family = familyOf(route);
  const picker = new JsonPicker(new Set(['model', ...ASKED_MAX[family]]));
  const asked: Asked = { model: null, maxOutput: null, bytes: 0 };
  let picks = 0;
  // The agent writes the request: past ASKED_READ_MAX bytes or ASKED_PICKS_MAX values (a key repeated without end)
  // the reader stops, and what a later value could have changed counts as unknown (the larger bounds).
  const stopped = (): boolean => asked.bytes > ASKED_READ_MAX || picks > ASKED_PICKS_MAX;
  const take = (): void => {
    picks += picker.picks.length;
    for (const { path, text } of picker.picks.splice(0)) {
      const value = tryParseJson(text);
      if (path === 'model') asked.model = str(value)?.slice(0, 200) ?? asked.model;
      else if (typeof value === 'number' && Number.isInteger(value) && value > 0 && value <= MAX_TOKENS) {
        // A key given twice is read by the API as one of them: the larger bounds both.
        asked.maxOutput = Math.max(asked.maxOutput ?? 0, value);
      }
    }
  };
  return {
    push(chunk: Uint8Array): void {
      if (!stopped()) {
        picker.push(chunk);
        take();
      }
      asked.bytes += chunk.length;
    },
    read(): Asked {
      picker.finish();
      take();
      return stopped() ? { model: null, maxOutput: null, bytes: asked.bytes } : { ...asked };
    },
  };
}

export type UsageMeter = ReturnType<typeof usageMeter>;

/** A meter for one response, JSON or SSE by its type, priced by `prices`; anything else is of unknown usage. */
export function usageMeter(
  route: string, path: string, headers: Readonly<Record<string, unknown>>, prices: PriceTable,
) {
  const family = familyOf(route);
  const wanted = new Set([...PATHS[family].usage, ...PATHS[family].model]);
  const type = typeof headers['content-type'] === 'string' ? headers['content-type'].toLowerCase() : '';
  const encoding = typeof headers['content-encoding'] === 'string' ? headers['content-encoding'].toLowerCase() : '';
  const sse = type.startsWith('text/event-stream');
  const json = type.startsWith('application/json');
  const unreadable = encoding !== '' && encoding !== 'identity'
    ? `the response is ${encoding.slice(0, 40)}-encoded`
    : sse || json ? null : `the response is not JSON or an event stream (${type.slice(0, 60) || 'no type'})`;
  // Gemini names the model in its path (`…/models/gemini-2.5-pro:generateContent`) when the body does not.
  const model = /\/models\/([A-Za-z0-9._-]{1,100}):/.exec(path)?.[1] ?? null;
  const tokens: CallTokens = { model, tokens_in: 0, tokens_out: 0, cache_read: 0, cache_write: 0 };
  const bad: string[] = [];
  let usageSeen = false;
  /** A usage object was read: the input counts are known (Anthropic's message_start, any of Gemini's chunks). */
  let inputSeen = false;
  let picker = new JsonPicker(wanted);

  const take = (p: JsonPicker): void => {
    p.finish();
    for (const { path: at, text } of p.picks) {
      const value = tryParseJson(text);
      if (value === undefined) continue;
      if (PATHS[family].model.includes(at)) tokens.model = str(value)?.slice(0, 200) ?? tokens.model;
      else if (value === null) continue; // a streamed chunk before the one that carries the usage
      else if (isJsonObject(value)) {
        // Anthropic's message_start (`message.usage`) counts the input only: the call's usage is known once the
        // final count (`usage`: a body's, or a message_delta's) arrives; a stream closed before it counts at its
        // bounds (end).
        if (family !== 'anthropic' || at === 'usage') usageSeen = true;
        inputSeen = true;
        Object.assign(tokens, readTokens(family, value, bad));
      } else bad.push(at);
    }
  };

  // SSE (WHATWG): `data:` lines (joined by newlines) make an event's data, a blank line ends it; the data goes byte by
  // byte into the event's picker.
  let atLineStart = true;
  let field: number[] = [];
  let inField = false;
  let inData = false;
  let skipSpace = false;
  let eventHasData = false;
  let lastCr = false;
  const sseByte = (b: number): void => {
    if (b === 0x0a && lastCr) {
      lastCr = false;
      return;
    }
    lastCr = b === 0x0d;
    if (b === 0x0a || b === 0x0d) {
      if (atLineStart) {
        if (eventHasData) take(picker);
        picker = new JsonPicker(wanted);
        eventHasData = false;
      }
      atLineStart = true;
      inField = false;
      inData = false;
      return;
    }
    if (atLineStart) {
      atLineStart = false;
      inField = true;
      field = [];
    }
    if (inField) {
      if (b === 0x3a) {
        inField = false;
        inData = field.length === 4 && Buffer.from(field).toString('latin1') === 'data';
        skipSpace = true;
        if (inData && eventHasData) picker.byte(0x0a);
        if (inData) eventHasData = true;
      } else if (field.length <= 8) field.push(b);
      return;
    }
    if (!inData) return;
    if (skipSpace) {
      skipSpace = false;
      if (b === 0x20) return;
    }
    picker.byte(b);
  };

  return {
    push(chunk: Uint8Array): void {
      if (unreadable) return;
      if (sse) for (const b of chunk) sseByte(b);
      else picker.push(chunk);
    },
    /** `complete`: the response arrived whole (not cut by the API, the client or the gate). */
    end(asked: Asked, complete: boolean): MeteredCall {
      if (!sse || eventHasData) take(picker);
      // Anthropic's final count is its last usage; Gemini's counts run on, so a cut stream's are not yet final.
      const ended = usageSeen && (family !== 'gemini' || complete);
      const unknown = unreadable ?? (bad.length > 0 ? `unreadable usage field ${bad[0]!.slice(0, 60)}`
        : ended ? null : inputSeen || !complete ? 'the response ended before its final usage'
          : 'the response carried no usage');
      if (unknown === null) return { ...tokens, usd: callCost(prices, tokens), unknown };
      // What was read counts, the rest at its bound (docs/gate.md "Metered cost"): input not read at the request's
      // bytes (a token stands for at least one byte), output at the request's maximum.
      const read = inputSeen && bad.length === 0;
      const counted = {
        model: tokens.model ?? asked.model, tokens_in: read ? tokens.tokens_in : asked.bytes,
        tokens_out: Math.max(read ? tokens.tokens_out : 0, asked.maxOutput ?? OUTPUT_BOUND),
        cache_read: read ? tokens.cache_read : 0, cache_write: read ? tokens.cache_write : 0,
      };
      const price = counted.model === null ? highestPrice(prices) : priceOf(prices, counted.model);
      return { ...counted, usd: price ? costAt(price, counted) : null, unknown };
    },
  };
}
