// Cost and token figures from each provider's own output, as increments; a provider that reports nothing leaves them
// null.
import { isJsonObject, obj } from '../untrusted.ts';

export interface Usage {
  cost_usd: number | null;
  tokens_in: number | null;
  tokens_out: number | null;
}

export type UsageParser = (line: string) => Usage | null;

function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : null;
}

function json(line: string): Record<string, unknown> | null {
  const t = line.trim();
  if (!t.startsWith('{')) return null;
  try {
    const v = JSON.parse(t) as unknown;
    return isJsonObject(v) ? v : null;
  } catch {
    return null;
  }
}

/** `claude -p --output-format json`: the result object carries total_cost_usd and usage. */
function claude(line: string): Usage | null {
  const o = json(line);
  if (!o || o.type !== 'result') return null;
  const u = obj(o.usage);
  const cacheIn = (num(u.cache_creation_input_tokens) ?? 0) + (num(u.cache_read_input_tokens) ?? 0);
  const input = num(u.input_tokens);
  return {
    cost_usd: num(o.total_cost_usd) ?? num(o.cost_usd),
    tokens_in: input === null ? null : input + cacheIn,
    tokens_out: num(u.output_tokens),
  };
}

/** `codex exec --json`: turn.completed events carry usage; codex reports no price. */
function codex(line: string): Usage | null {
  const o = json(line);
  if (!o || o.type !== 'turn.completed') return null;
  const u = obj(o.usage);
  return { cost_usd: null, tokens_in: num(u.input_tokens), tokens_out: num(u.output_tokens) };
}

/**
 * `gemini --output-format json`: stats per model (tokens.prompt / tokens.candidates) or flat inputTokens/outputTokens.
 */
function gemini(line: string): Usage | null {
  const o = json(line);
  if (!o || !o.stats) return null;
  const stats = obj(o.stats);
  let tin = num(stats.inputTokens);
  let tout = num(stats.outputTokens);
  for (const model of Object.values(obj(stats.models))) {
    const t = obj(obj(model).tokens);
    // A model entry without token counts reports nothing: the figure stays null rather than 0.
    const prompt = num(t.prompt);
    const candidates = num(t.candidates);
    if (prompt !== null) tin = (tin ?? 0) + prompt;
    if (candidates !== null) tout = (tout ?? 0) + candidates;
  }
  return { cost_usd: null, tokens_in: tin, tokens_out: tout };
}

/**
 * `opencode run --format json`: each step_finish part carries cost and tokens (input excludes the cache figures, which
 * are added as claude's are).
 */
function opencode(line: string): Usage | null {
  const o = json(line);
  if (!o) return null;
  const part = obj(o.part);
  const cost = num(part.cost) ?? num(o.cost);
  const tokens = obj(part.tokens ?? o.tokens);
  if (cost === null && tokens.input === undefined) return null;
  const input = num(tokens.input);
  const cache = obj(tokens.cache);
  const cacheIn = (num(cache.read) ?? 0) + (num(cache.write) ?? 0);
  return { cost_usd: cost, tokens_in: input === null ? null : input + cacheIn, tokens_out: num(tokens.output) };
}

function kilo(text: string): number {
  return text.endsWith('k') ? Math.round(Number(text.slice(0, -1)) * 1000) : Number(text);
}

const AIDER_TOKENS = /^Tokens: ([\d.]+k?) sent, (?:[\d.]+k? cache (?:write|hit), )*([\d.]+k?) received\.(.*)$/;
const AIDER_COST = /^\s*Cost: \$([\d.]+) message, \$[\d.]+ session\.\s*$/;

/**
 * aider's usage report per message (aider/coders/base_coder.py): "Tokens: 2.5k sent[, 1.9k cache write][, 1.9k cache
 * hit], 61 received. Cost: $0.0081 message, $0.0081 session." The cost goes on the next line when a message both hit
 * and wrote the prompt cache, and is absent for a model aider has no price for. Only a cost line right after a
 * report without one counts, so model text quoting an old report is not counted twice. The session total is never
 * read: the per-message figures are increments.
 */
function createAider(): UsageParser {
  let costMayFollow = false;
  return (line) => {
    const expectingCost = costMayFollow;
    costMayFollow = false;
    const tokens = AIDER_TOKENS.exec(line.trim());
    if (tokens) {
      const cost = AIDER_COST.exec(tokens[3]!);
      costMayFollow = !cost;
      return { cost_usd: cost ? Number(cost[1]) : null, tokens_in: kilo(tokens[1]!), tokens_out: kilo(tokens[2]!) };
    }
    const cost = expectingCost ? AIDER_COST.exec(line) : null;
    return cost ? { cost_usd: Number(cost[1]), tokens_in: null, tokens_out: null } : null;
  };
}

/**
 * `command` providers report with a JSON line {"type":"svc.cost","usd":…,"tokens_in":…,"tokens_out":…} (an
 * increment).
 */
function command(line: string): Usage | null {
  const o = json(line);
  if (!o) return null;
  if (o.type === 'svc.cost') {
    return { cost_usd: num(o.usd), tokens_in: num(o.tokens_in), tokens_out: num(o.tokens_out) };
  }
  return claude(line);
}

/**
 * Tools that print one JSON result may pretty-print it over many lines: gather from a line that is exactly `{` to a
 * line that is exactly `}` (nested braces are indented) and hand the compacted object to the line parser.
 */
function wholeDocument(parse: UsageParser): UsageParser {
  let lines: string[] | null = null;
  return (line) => {
    const single = parse(line);
    if (single) return single;
    const bare = line.trimEnd();
    if (lines === null) {
      if (bare === '{') lines = [line];
      return null;
    }
    lines.push(line);
    if (lines.length > 100_000) lines = null;
    if (bare !== '}' || lines === null) return null;
    const text = lines.join('\n');
    lines = null;
    try {
      return parse(JSON.stringify(JSON.parse(text)));
    } catch {
      return null;
    }
  };
}

/** A fresh parser for one invocation of a provider of this kind; a command provider's for any other. */
export function createUsageParser(kind: string): UsageParser {
  const parsers: Record<string, () => UsageParser> = {
    claude: () => wholeDocument(claude), codex: () => codex, gemini: () => wholeDocument(gemini),
    opencode: () => opencode, aider: createAider,
  };
  return (parsers[kind] ?? (() => command))();
}

/** Adds an increment; a figure stays null until something reports it (unknown is never 0). */
export function addUsage(total: Usage, inc: Usage): Usage {
  const add = (a: number | null, b: number | null) => (b === null ? a : (a ?? 0) + b);
  return {
    cost_usd: add(total.cost_usd, inc.cost_usd),
    tokens_in: add(total.tokens_in, inc.tokens_in),
    tokens_out: add(total.tokens_out, inc.tokens_out),
  };
}
