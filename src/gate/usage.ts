// The usage a model API reports for one call, read from the response bytes as they pass to the client, never buffered:
// JsonPicker keeps only the values at a few key paths (docs/gate.md "Metered cost" says which, and why that is safe).
// A response cut before its final usage is counted at what was read and bounds for the rest, never at $0.
import type { Transform } from 'node:stream';
import { constants, createBrotliDecompress, createGunzip, createInflate, createZstdDecompress } from 'node:zlib';
import type { Zlib } from 'node:zlib';
import { isJsonObject, obj, str, tryParseJson } from '../untrusted.ts';
import { callCost, costAt, highestPrice, type PriceTable } from './prices.ts';
import type { CallTokens, MeteredCall } from './evidence.ts';
import { JsonPicker } from './json-picker.ts';

/** Beyond any context window: a bigger count is the response's error. */
const MAX_TOKENS = 100_000_000;

/** The output a call is counted at when its request set no maximum: the most any model of the table can write. */
export const OUTPUT_BOUND = 128_000;

/** The most input a call whose usage never came is counted at, however large its body: the largest context window any
 * vendor serves (2M tokens, Gemini's); a prompt past it is refused by the API, never billed. Counted at the request's
 * bytes alone, a 30 MiB body aborted after its upload counted ~$480 toward the server's day cap. */
export const INPUT_BOUND = 2_000_000;

type Family = 'anthropic' | 'openai' | 'gemini';

/** The field of an event stream's line that carries its data, with the colon that ends the name. */
const DATA_FIELD = Buffer.from('data:', 'latin1');

/**
 * The reader of a call by its endpoint's shape (`endpoint` of model-apis.ts modelPath), whatever the route: Anthropic
 * and Gemini answer OpenAI's shape on their OpenAI-compatible endpoints too. Another endpoint (a response read back)
 * reads as its route's family; the OpenAI-compatible APIs (openrouter, groq, …) read as openai.
 */
function familyOf(route: string, endpoint: string): Family {
  if (/:(generateContent|streamGenerateContent)$/i.test(endpoint)) return 'gemini';
  if (/\/messages$/i.test(endpoint)) return 'anthropic';
  if (/\/(chat\/completions|completions|responses)$/i.test(endpoint)) return 'openai';
  return route === 'anthropic' || route === 'gemini' ? route : 'openai';
}

/**
 * Each family's key paths. In a response: where its usage object and model are, and the counts a usage object holds.
 * In a request: the names of the output maximum and of the answers asked (Gemini names its model in the path), the
 * input the API keeps that the request's bytes do not show (OpenAI's Responses: a stored response or conversation
 * continued, a stored prompt, which names its model too: the call's input is not bounded by its bytes, docs/gate.md
 * "Metered cost"), and other spellings the API reads as one key (Gemini reads a field in snake_case as in camelCase).
 */
const FAMILIES: Record<Family, {
  usage: readonly string[]; model: readonly string[]; counts: readonly string[]; maxOutput: readonly string[];
  choices: readonly string[]; kept: readonly string[]; aliases: ReadonlyMap<string, string>;
}> = {
  anthropic: {
    usage: ['usage', 'message.usage'], model: ['model', 'message.model'],
    counts: ['input_tokens', 'output_tokens', 'cache_read_input_tokens', 'cache_creation_input_tokens'],
    maxOutput: ['max_tokens'], choices: [], kept: [], aliases: new Map(),
  },
  openai: {
    usage: ['usage', 'response.usage'], model: ['model', 'response.model'],
    counts: ['prompt_tokens', 'completion_tokens', 'input_tokens', 'output_tokens'],
    maxOutput: ['max_tokens', 'max_completion_tokens', 'max_output_tokens'], choices: ['n'],
    kept: ['previous_response_id', 'conversation'], aliases: new Map(),
  },
  gemini: {
    usage: ['usageMetadata'], model: ['modelVersion'],
    counts: ['promptTokenCount', 'candidatesTokenCount', 'cachedContentTokenCount', 'thoughtsTokenCount'],
    maxOutput: ['generationConfig.maxOutputTokens'], choices: ['generationConfig.candidateCount'], kept: [],
    aliases: new Map([['generation_config', 'generationConfig'], ['max_output_tokens', 'maxOutputTokens'],
      ['candidate_count', 'candidateCount']]),
  },
};

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
  if (family === 'anthropic') {
    // input_tokens excludes the cache's tokens; message_delta repeats the running output count.
    const out: Partial<CallTokens> = {};
    const fields = [['input_tokens', 'tokens_in'], ['output_tokens', 'tokens_out'], ['cache_read_input_tokens',
      'cache_read'], ['cache_creation_input_tokens', 'cache_write']] as const;
    for (const [key, field] of fields) if (u[key] !== undefined && u[key] !== null) out[field] = count(u, key, bad);
    // Of the cache writes, an hour's (the rest are five minutes'): priced apart, so read apart.
    const hour = count(obj(u.cache_creation), 'ephemeral_1h_input_tokens', bad);
    if (hour > 0) out.cache_write_1h = hour;
    return out;
  }
  // OpenAI and Gemini count cached input inside the input. Chat completions say prompt/completion, responses say
  // input/output; Gemini bills thinking as output.
  const chat = (u.prompt_tokens ?? null) !== null || (u.completion_tokens ?? null) !== null;
  const [cached, input, output] = family === 'openai' ? [
    count(obj(u[chat ? 'prompt_tokens_details' : 'input_tokens_details']), 'cached_tokens', bad),
    count(u, chat ? 'prompt_tokens' : 'input_tokens', bad), count(u, chat ? 'completion_tokens' : 'output_tokens', bad),
  ] : [
    count(u, 'cachedContentTokenCount', bad), count(u, 'promptTokenCount', bad),
    count(u, 'candidatesTokenCount', bad) + count(u, 'thoughtsTokenCount', bad),
  ];
  return { tokens_in: Math.max(0, input - cached), cache_read: Math.min(cached, input), tokens_out: output };
}

/** What a request asked for, read from its body as it passes upstream: the model it names, the most output it
 * allows (the API stops there, so it bounds the output of a call whose usage never came), and its bytes. */
export interface Asked {
  model: string | null;
  maxOutput: number | null;
  /** The answers it asks for (OpenAI's `n`, Gemini's `candidateCount`; 1 when absent), each up to `maxOutput`. */
  choices: number;
  bytes: number;
  /** Only when what it asked is not known for certain (its bounds may be low): why. A call counted at those bounds
   * marks the run's spending doubtful (MeteredCall `doubt`). */
  doubt?: string;
  /** The reader stopped (`doubt` says why): what the request asked past its tokens (the priority tier) is not known,
   * so even a call whose usage came whole is in doubt. */
  unread?: true;
  /** A server-side tool billed per use the request offers (its first): a call whose response is not read whole may
   * have used it unseen. */
  offered?: string;
}

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

// Gemini names the model in its path (`…/models/gemini-2.5-pro:generateContent`) when the body does not: read from
// the endpoint as the API reads it (escapes decoded, no query), never the raw path, whose query could name another.
const pathModel = (endpoint: string): string | null =>
  /\/models\/([A-Za-z0-9._-]{1,100}):[^/]*$/.exec(endpoint)?.[1] ?? null;

/**
 * A generation call whose usage was not all read, counted at what was (`read`: the input's counts, a lower output
 * figure) and its bounds for the rest (docs/gate.md "Metered cost"): input not read at the request's bytes (a token
 * stands for at least one byte) up to INPUT_BOUND, output at `maxOutput` (null: OUTPUT_BOUND) for each answer asked;
 * priced by the model named, else at the table's highest prices (prices.ts highestPrice). `unseen`: the response was
 * not read whole, so a per-use tool the request offered may have been used unseen (a doubt).
 */
function boundedCall(
  prices: PriceTable, asked: Asked, model: string | null, read: CallTokens | null, maxOutput: number | null,
  unknown: string, unseen: boolean,
): MeteredCall {
  const counted = {
    model: model ?? asked.model, tokens_in: read ? read.tokens_in : Math.min(asked.bytes, INPUT_BOUND),
    tokens_out: Math.max(read?.tokens_out ?? 0, (maxOutput ?? OUTPUT_BOUND) * asked.choices),
    cache_read: read?.cache_read ?? 0, cache_write: read?.cache_write ?? 0,
    ...(read?.cache_write_1h !== undefined ? { cache_write_1h: read.cache_write_1h } : {}),
  };
  const usd = counted.model === null ? costAt(highestPrice(prices), counted) : callCost(prices, counted);
  const doubt = asked.doubt ?? (asked.offered === undefined || !unseen ? undefined
    : `it offered a per-use server tool (${asked.offered}) and its response was not read whole`);
  return { ...counted, usd, unknown, ...(doubt !== undefined ? { doubt } : {}) };
}

/** A generation call whose request was sent and whose answer never came (the client or the gate gave up first): the
 * API may have run it to its end. */
export function unansweredCall(endpoint: string, asked: Asked, prices: PriceTable): MeteredCall {
  const unknown = 'the call ended before its answer came';
  return boundedCall(prices, asked, pathModel(endpoint), null, asked.maxOutput, unknown, true);
}

export type UsageMeter = ReturnType<typeof usageMeter>;

// The tier an OpenAI-shaped response says it served the call at: "priority" costs more than the standard rows (asked
// by the request, it was refused; `auto` is served so at a project whose default tier is priority).
const TIER = ['service_tier', 'response.service_tier'];
const PRIORITY_DOUBT = { doubt: 'it was served at the priority tier, which the gate prices at the standard rows' };
// An Anthropic usage counting web searches (a stream cut before its server_tool_use block still counts them): billed
// per search, which no row prices.
const SEARCH_DOUBT = { doubt: 'its usage counts web searches, billed per search, which the gate does not price' };

// Where a response says the model used a server-side tool billed per use (a search, a container, an image), which no
// row prices: offered by the request (not refused: Codex offers web search on every call), used at the model's choice.
// OpenAI Responses' output items (a body's `output`, a stream's `item` and final `response.output`), Anthropic's
// content blocks (`server_tool_use`), Gemini's grounding (the queries it searched or retrieved, a Maps widget).
const TOOL_USE: Record<Family, readonly string[]> = {
  openai: ['output.type', 'item.type', 'response.output.type'],
  anthropic: ['content.type', 'content_block.type', 'content.name', 'content_block.name'],
  gemini: ['candidates.groundingMetadata.webSearchQueries', 'candidates.groundingMetadata.retrievalQueries',
    'candidates.groundingMetadata.googleMapsWidgetContextToken', 'candidates.groundingMetadata.groundingChunks'],
};
// Anthropic's server tools billed per use (web_fetch and tool search cost only tokens): a server_tool_use block's name.
const ANTHROPIC_PER_USE = /^(web_search|code_execution|bash_code_execution|text_editor_code_execution)/;
const OPENAI_TOOL_CALL = /^(web_search|file_search|code_interpreter|image_generation)_call$/;

/** The server-side tool a response's value at a TOOL_USE path says was used, or null; `serverBlock`: the Anthropic
 * content block being read is a server_tool_use one (its type comes before its name). */
function toolUsed(family: Family, path: string, value: unknown, serverBlock: boolean): string | null {
  if (family === 'openai') return typeof value === 'string' && OPENAI_TOOL_CALL.test(value) ? value : null;
  if (family === 'anthropic') {
    const name = path.endsWith('.name') && serverBlock ? str(value) : null;
    return name !== null && ANTHROPIC_PER_USE.test(name) ? name : null;
  }
  const grounded = Array.isArray(value) ? value.length > 0 : value !== null;
  return grounded ? path.slice(path.lastIndexOf('.') + 1) : null;
}

/** A meter for one response, JSON or SSE by its type, priced by `prices`; anything else is of unknown usage. */
export function usageMeter(
  route: string, endpoint: string, headers: Readonly<Record<string, unknown>>, prices: PriceTable,
) {
  const family = familyOf(route, endpoint);
  const paths = FAMILIES[family];
  const wanted = new Set([...paths.usage, ...paths.model, ...TOOL_USE[family], ...(family === 'openai' ? TIER : [])]);
  const type = str(headers['content-type'])?.toLowerCase() ?? '';
  const encoding = str(headers['content-encoding'])?.toLowerCase() ?? '';
  const sse = type.startsWith('text/event-stream');
  const json = type.startsWith('application/json');
  const unreadable = encoding !== '' && encoding !== 'identity'
    ? `the response is ${encoding.slice(0, 40)}-encoded`
    : sse || json ? null : `the response is not JSON or an event stream (${type.slice(0, 60) || 'no type'})`;
  const tokens: CallTokens = { model: pathModel(endpoint), tokens_in: 0, tokens_out: 0, cache_read: 0, cache_write: 0 };
  const bad: string[] = [];
  let usageSeen = false;
  /** A usage object was read: the input counts are known (Anthropic's message_start, any of Gemini's chunks). */
  let inputSeen = false;
  let priority = false;
  let searched = false;
  let used: string | null = null;
  let serverBlock = false;
  let picker = new JsonPicker(wanted);

  const take = (p: JsonPicker): void => {
    p.finish();
    for (const { path: at, text } of p.picks) {
      const value = tryParseJson(text);
      if (value === undefined) continue;
      if (TIER.includes(at)) priority ||= value === 'priority';
      else if (TOOL_USE[family].includes(at)) {
        if (at.endsWith('.type')) serverBlock = value === 'server_tool_use';
        used ??= toolUsed(family, at, value, serverBlock);
      }
      else if (paths.model.includes(at)) tokens.model = str(value)?.slice(0, 200) ?? tokens.model;
      else if (value === null) continue; // a streamed chunk before the one that carries the usage
      // A usage object with none of the reader's counts (another API's shape, or each null) says nothing: never $0 as
      // if final.
      else if (isJsonObject(value) && !paths.counts.some((key) => (value[key] ?? null) !== null)) continue;
      else if (isJsonObject(value)) {
        // Anthropic's message_start (`message.usage`) counts the input only: the call's usage is known once the
        // final count (`usage`: a body's, or a message_delta's) arrives; a stream closed before it counts at its
        // bounds (end).
        if (family !== 'anthropic' || at === 'usage') usageSeen = true;
        inputSeen = true;
        Object.assign(tokens, readTokens(family, value, bad));
        const searches = obj(value.server_tool_use).web_search_requests;
        searched ||= family === 'anthropic' && typeof searches === 'number' && searches > 0;
      } else bad.push(at);
    }
  };

  // SSE (WHATWG): `data:` lines (joined by newlines) make an event's data, a blank line ends it; the data goes byte by
  // byte into the event's picker.
  // How much of "data:" the line began with (-1: another field, or a comment); all of it: a data line's value follows.
  let matched = 0;
  let lineEmpty = true;
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
      if (lineEmpty) {
        if (eventHasData) take(picker);
        picker = new JsonPicker(wanted);
        eventHasData = false;
      }
      lineEmpty = true;
      matched = 0;
      return;
    }
    lineEmpty = false;
    if (matched < 0) return;
    if (matched < DATA_FIELD.length) {
      matched = b === DATA_FIELD[matched] ? matched + 1 : -1;
      if (matched < DATA_FIELD.length) return;
      if (eventHasData) picker.byte(0x0a);
      eventHasData = true;
      skipSpace = true;
      return;
    }
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
    /** `asked`: what a generation call's request asked (null for other calls: nothing to bound); `complete`: the
     * response arrived whole (not cut by the API, the client or the gate). */
    end(asked: Asked | null, complete: boolean): MeteredCall {
      if (!sse || eventHasData) take(picker);
      // Anthropic's final count is its last usage; Gemini's counts run on, so a cut stream's are not yet final.
      const ended = usageSeen && (family !== 'gemini' || complete);
      const none = !inputSeen && complete && !unreadable && bad.length === 0;
      const unknown = unreadable ?? (bad.length > 0 ? `unreadable usage field ${bad[0]!.slice(0, 60)}`
        : ended ? null : none ? 'the response carried no usage' : 'the response ended before its final usage');
      const toolDoubt = used === null ? null
        : { doubt: `it used a server-side tool (${used.slice(0, 60)}), billed per use, which the gate does not price` };
      const unread = asked?.unread && asked.doubt !== undefined ? { doubt: asked.doubt } : null;
      const tier = searched ? SEARCH_DOUBT : toolDoubt ?? unread ?? (priority ? PRIORITY_DOUBT : {});
      if (unknown === null) return { ...tokens, usd: callCost(prices, tokens), unknown, ...tier };
      // Not a generation (a stored completion listed, a response read back): it wrote nothing to bound.
      if (asked === null) {
        return { model: null, tokens_in: 0, tokens_out: 0, cache_read: 0, cache_write: 0, usd: 0, unknown };
      }
      // A whole response with no usage at all was asked so by the agent (no `stream_options.include_usage`), which
      // also wrote the maximum the gate read: its output counts at OUTPUT_BOUND.
      const read = inputSeen && bad.length === 0 ? tokens : null;
      const bounded = boundedCall(prices, asked, tokens.model, read, none ? null : asked.maxOutput, unknown, !none);
      return { ...tier, ...bounded };
    },
  };
}
