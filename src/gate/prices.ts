// The price table model calls are metered with (docs/gate.md "Metered cost"): US dollars per million tokens; a model
// in neither it nor the operator's SVC_PRICES_FILE is unpriced, never $0.
import { isJsonObject } from '../json-value.ts';
import { GatePolicyError, readGateFile } from './policy.ts';
import type { CallTokens } from './evidence.ts';

interface ModelPrice {
  input: number;
  output: number;
  /** Absent: priced as input. */
  cache_read?: number;
  cache_write?: number;
  /** An hour's cache writes (Anthropic: twice the input price); absent: priced as cache_write. */
  cache_write_1h?: number;
  /** The vendor's long-context tier: a call whose prompt (input, cache reads and writes) is past `above` tokens is
   * priced whole at these rates. */
  long?: { above: number } & Omit<ModelPrice, 'long'>;
}

export interface PriceTable {
  date: string;
  models: Readonly<Record<string, ModelPrice>>;
}

const p = (input: number, output: number, cache_read?: number, cache_write?: number): ModelPrice =>
  ({ input, output, cache_read, cache_write });
// Anthropic's: cache reads a tenth of the input price, five minutes' writes 1.25 times it, an hour's twice it.
const claude = (input: number, output: number): ModelPrice =>
  ({ ...p(input, output, input / 10, input * 1.25), cache_write_1h: input * 2 });
// Past 200k prompt tokens: Claude Sonnet 4 and 4.5 (their 1M-token context), Gemini 2.5 Pro.
const LONG_SONNET = { above: 200_000, ...claude(6, 22.5) };

/** Standard (not batch, not priority) prices, with the long-context tiers of the models that have one. */
export const PRICES: PriceTable = {
  date: '2026-11-01',
  models: {
    'claude-opus-4-5': claude(5, 25),
    'claude-opus-4-1': claude(15, 75),
    'claude-opus-4': claude(15, 75),
    'claude-sonnet-4-5': { ...claude(3, 15), long: LONG_SONNET },
    'claude-sonnet-4': { ...claude(3, 15), long: LONG_SONNET },
    'claude-3-7-sonnet': claude(3, 15),
    'claude-haiku-4-5': claude(1, 5),
    'claude-3-5-haiku': claude(0.8, 4),
    'gpt-5.1': p(1.25, 10, 0.125),
    'gpt-5': p(1.25, 10, 0.125),
    'gpt-5-codex': p(1.25, 10, 0.125),
    'gpt-5.1-codex': p(1.25, 10, 0.125),
    'gpt-5.1-codex-mini': p(0.25, 2, 0.025),
    'gpt-5.1-codex-max': p(1.25, 10, 0.125),
    'gpt-5.1-chat-latest': p(1.25, 10, 0.125),
    'gpt-5-chat-latest': p(1.25, 10, 0.125),
    'gpt-5-mini': p(0.25, 2, 0.025),
    'gpt-5-nano': p(0.05, 0.4, 0.005),
    'gpt-4.1': p(2, 8, 0.5),
    'gpt-4.1-mini': p(0.4, 1.6, 0.1),
    'gpt-4.1-nano': p(0.1, 0.4, 0.025),
    'gpt-4o': p(2.5, 10, 1.25),
    // A snapshot its vendor prices apart from its model's row (no cached-input price): matched before the date goes.
    'gpt-4o-2024-05-13': p(5, 15),
    'gpt-4o-mini': p(0.15, 0.6, 0.075),
    'o3': p(2, 8, 0.5),
    'o4-mini': p(1.1, 4.4, 0.275),
    'gemini-2.5-pro': { ...p(1.25, 10, 0.125), long: { above: 200_000, ...p(2.5, 15, 0.25) } },
    'gemini-2.5-flash': p(0.3, 2.5, 0.03),
    'gemini-2.5-flash-lite': p(0.1, 0.4, 0.01),
  },
};

/** The row of a model's exact name, else of its name less a snapshot's date; a variant (`o3-pro`), and a snapshot
 * priced apart (`gpt-4o-2024-05-13`), needs its own. */
export function priceOf(table: PriceTable, model: string | null): ModelPrice | null {
  if (model === null) return null;
  const name = model.toLowerCase().replace(/^models\//, '');
  const undated = name.replace(/-(\d{8}|\d{4}-\d{2}-\d{2})$/, '');
  // Own rows only: a model named `constructor` is not priced by Object's prototype.
  const key = [name, undated].find((k) => Object.hasOwn(table.models, k));
  return key === undefined ? null : table.models[key] ?? null;
}

/** Tokens at a row's prices (its long-context tier's for a prompt past it), in US dollars. */
export function costAt(row: ModelPrice, tokens: CallTokens): number {
  const prompt = tokens.tokens_in + tokens.cache_read + tokens.cache_write;
  const price = row.long !== undefined && prompt > row.long.above ? row.long : row;
  const write = price.cache_write ?? price.input;
  const hour = Math.min(tokens.cache_write_1h ?? 0, tokens.cache_write);
  const usd = tokens.tokens_in * price.input + tokens.tokens_out * price.output +
    tokens.cache_read * (price.cache_read ?? price.input) + (tokens.cache_write - hour) * write +
    hour * (price.cache_write_1h ?? write);
  return usd / 1_000_000;
}

export function callCost(table: PriceTable, tokens: CallTokens): number | null {
  const price = priceOf(table, tokens.model);
  return price ? costAt(price, tokens) : null;
}

/** The table's highest input and highest output price (each from whichever row has it): what a call naming no model
 * is counted at, since it may have been any of them. Not its vendor's highest row: a vendor's API serves models the
 * table lacks (gpt-5-pro, o1-pro, gemini-3-pro), so its rows are no bound for it. */
export function highestPrice(table: PriceTable): ModelPrice {
  const rows = Object.values(table.models);
  return { input: Math.max(0, ...rows.map((r) => r.input)), output: Math.max(0, ...rows.map((r) => r.output)) };
}

const PRICE_KEYS = ['input', 'output', 'cache_read', 'cache_write', 'cache_write_1h'] as const;

/** One row of the operator's file, at `where` (a file and model name, for its errors); `long` (a tier's `above` and
 * its prices) read at the top level only. */
function readRow(where: string, row: unknown, top: boolean): ModelPrice {
  if (!isJsonObject(row)) throw new GatePolicyError(where, 'must be {"input": …, "output": …}');
  const price: Record<string, number> = {};
  for (const key of [...PRICE_KEYS, ...(top ? [] : ['above'] as const)]) {
    const v = row[key];
    if (v === undefined && key !== 'input' && key !== 'output' && key !== 'above') continue;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) {
      const unit = key === 'above' ? 'a number of prompt tokens' : 'a number of US dollars per million tokens';
      throw new GatePolicyError(`${where}.${key}`, `must be ${unit}`);
    }
    price[key] = v;
  }
  // A row replaces the built-in row whole: a model with a long-context tier keeps one only when the file gives it.
  if (top && row.long !== undefined) {
    return { ...price, long: readRow(`${where}.long`, row.long, false) } as unknown as ModelPrice;
  }
  return price as unknown as ModelPrice;
}

/** The built-in table with the operator's file laid over it (`{"date", "models": {name: {input, output, …}}}`). */
export function loadPriceTable(file: string | undefined): PriceTable {
  if (file === undefined) return PRICES;
  const value = readGateFile(file);
  if (!isJsonObject(value) || !isJsonObject(value.models) || typeof value.date !== 'string') {
    throw new GatePolicyError(file, 'must be {"date": "YYYY-MM-DD", "models": {"<model>": {"input", "output", …}}}',
      'file');
  }
  const models: Record<string, ModelPrice> = { ...PRICES.models };
  for (const [name, row] of Object.entries(value.models)) {
    models[name.toLowerCase()] = readRow(`${file}: ${name}`, row, true);
  }
  return { date: value.date.slice(0, 40), models };
}
