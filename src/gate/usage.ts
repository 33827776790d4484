// The usage a model API reports for one call, read from the response bytes as they pass to the client, never buffered:
// JsonPicker keeps only the values at a few key paths (docs/gate.md "Metered cost" says which, and why that is safe).
// A response cut before its final usage is counted at what was read and bounds for the rest, never at $0. It also holds
// what both readers share, this one and request-meter.ts's of the request: the family table (FAMILIES, the key paths
// each API family uses) and Asked, what a request asked for.
import { isJsonObject } from '../json-value.ts';
import { obj, str, tryParseJson } from '../untrusted.ts';
import { callCost, costAt, highestPrice, type PriceTable } from './prices.ts';
import type { CallTokens, MeteredCall } from './evidence.ts';
import { JsonPicker } from './json-picker.ts';

/** Beyond any context window: a bigger count is the response's error. */
export const MAX_TOKENS = 100_000_000;

/** The output a call is counted at when its request set no maximum: the most any model of the table can write. */
export const OUTPUT_BOUND = 128_000;

/** The most input a call whose usage never came is counted at, however large its body: the largest context window any
 * vendor serves (2M tokens, Gemini's); a prompt past it is refused by the API, never billed. Counted at the request's
 * bytes alone, a 30 MiB body aborted after its upload counted ~$480 toward the server's day cap. */
export const INPUT_BOUND = 2_000_000;

export type Family = 'anthropic' | 'openai' | 'gemini';

/** The field of an event stream's line that carries its data, with the colon that ends the name. */
const DATA_FIELD = Buffer.from('data:', 'latin1');

/**
 * The reader of a call by its endpoint's shape (`endpoint` of model-apis.ts modelPath), whatever the route: Anthropic
 * and Gemini answer OpenAI's shape on their OpenAI-compatible endpoints too. Another endpoint (a response read back)
 * reads as its route's family; the OpenAI-compatible APIs (openrouter, groq, …) read as openai.
 */
export function familyOf(route: string, endpoint: string): Family {
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
export const FAMILIES: Record<Family, {
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
