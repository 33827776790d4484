// Provider adapters: each built-in CLI's invocation and what its output says of cost and session; command providers.
import { BadSettingError, UnavailableError, UsageError } from '../errors.ts';
import type { Obj } from '../json-value.ts';
import { countOrNull, figure, obj, objOrNull, tryParseJson } from '../untrusted.ts';
import { which } from '../spawn/svc-paths.ts';
import type { CostFigures } from '../run-json.ts';

export const BUILTIN_PROVIDERS = ['claude', 'codex', 'gemini', 'aider', 'opencode'] as const;

export interface ResolvedProvider {
  name: string;
  /** Parser family: a builtin name, or "command". */
  kind: string;
  /** argv[0] is an absolute path; `{task_file}` is replaced when the run starts. */
  argv: string[];
  /** Whether the prompt is written to stdin (it is always in SVC_TASK_FILE too). */
  stdinPrompt: boolean;
  /** A command provider's folders writable in its sandbox (absolute), as config.ts allowed them. */
  writable?: string[];
  /** False: its sandbox shows the program file alone, not the folder it lives in (a repository's own provider). */
  showFolder?: boolean;
}

export type Usage = CostFigures;

export const NO_USAGE: Usage = { cost_usd: null, tokens_in: null, tokens_out: null };

function json(line: string): Obj | null {
  const t = line.trim();
  return t.startsWith('{') ? objOrNull(tryParseJson(t)) : null;
}

function kilo(text: string): number | null {
  return countOrNull(text.endsWith('k') ? Math.round(Number(text.slice(0, -1)) * 1000) : Number(text));
}

const AIDER_TOKENS = /^Tokens: ([\d.]+k?) sent, (?:[\d.]+k? cache (?:write|hit), )*([\d.]+k?) received\.(.*)$/;
const AIDER_COST = /^\s*Cost: \$([\d.]+) message, \$[\d.]+ session\.\s*$/;

/** aider's report per message (its forms: docs/engine.md). A cost line counts only right after a report without one,
 * so model text quoting an old report is not counted twice; the session total is never read (increments only). */
function createAider(): (line: string) => Usage | null {
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

/** What output says of the CLI's session: its id (shape-checked: it goes into an argv), the agent's (last) words. */
export interface SessionSighting {
  id: string | null;
  said: string | null;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const OPENCODE_SESSION = /^ses_[0-9A-Za-z]{8,64}$/;

function shaped(value: unknown, shape: RegExp): string | null {
  return typeof value === 'string' && shape.test(value) ? value : null;
}

function sighting(id: string | null, said: unknown): SessionSighting | null {
  const text = typeof said === 'string' && said.trim() !== '' ? said : null;
  return id === null && text === null ? null : { id, said: text };
}

// What a stdout line is of the CLI's own records, read from a top-level field of its event (never from text a message
// or tool result could quote): docs/engine.md "Why a run failed".
type LoginRecord = 'answered' | 'logged-out' | 'other' | null;

/** A CLI's reader of one line: `o` is the JSON object it holds (or the document it ends), else null. */
type LineReader = (
  line: string, o: Obj | null,
) => { usage?: Usage | null; session?: SessionSighting | null; login?: LoginRecord };

/** A CLI without a session (aider, a command provider): its last line that is not a JSON report is what it said. */
const lastLine = (line: string, o: Obj | null): SessionSighting | null => (o ? null : sighting(null, line));

/** How svc drives one kind of provider CLI and reads its output. */
type Adapter = {
  args: string[];
  stdin: boolean;
  /** A CLI that prints JSON objects: what each says of cost, of its session (docs/engine.md "Resuming the CLI's
   * session") and, on stdout, of its credentials. */
  usage?: (o: Obj) => Usage | null;
  session?: (o: Obj) => SessionSighting | null;
  login?: (o: Obj) => LoginRecord;
  /** Else a fresh reader of each line for one invocation's output (it may keep state across lines). */
  reader?: () => LineReader;
  /** It prints one JSON result, maybe pretty-printed over many lines (createOutputReader gathers them): read for its
   * usage only, or for all it says (the session and the login record too, from stdout). */
  document?: 'usage' | 'all';
  /** The args that continue session `id` instead of starting one; absent: the CLI can't, and gets a summary. */
  resume?: (id: string) => string[];
  /** The CLI names its session only in its result (gemini): an earlier id was printed by something else. */
  sessionIdLast?: true;
  /** How the CLI says it has no credentials (its exit code for it; `said`: it prints a login record) and the fix. */
  notLoggedIn?: { exitCode: number; said?: true; fix: string };
  /** A CLI that ignores the base-URL variable of its model API (`env`): the options, put right after the program,
   * that give it the URL that variable names. */
  baseUrl?: { env: string; args: (url: string) => string[] };
  /** What the CLI's environment needs beyond the variables the gate gives it (`gate`) so that its model calls, and
   * nothing else, go out through the gate (docs/gate.md "The model CLIs and the gate"). */
  underGate?: (gate: Readonly<Record<string, string | undefined>>) => Record<string, string>;
};

const CLAUDE_ARGS = ['-p', '--output-format', 'stream-json', '--verbose', '--permission-mode', 'acceptEdits',
  '--allowedTools', 'Bash'];
const CODEX_ARGS = ['exec', '--json', '--sandbox', 'danger-full-access'];
const GEMINI_ARGS = ['--output-format', 'json', '--yolo', '--skip-trust'];
const OPENCODE_ARGS = ['--format', 'json', 'Do the task described in the attached file.', '--file', '{task_file}'];

// Why each flag: docs/engine.md "What the real CLIs exposed"; how each resumes: "Resuming the CLI's session".
const BUILTINS: Record<(typeof BUILTIN_PROVIDERS)[number], Adapter> = {
  claude: {
    args: CLAUDE_ARGS, stdin: true, document: 'usage',
    // `claude -p --output-format json`: the result object carries total_cost_usd and usage.
    usage(o) {
      if (o.type !== 'result') return null;
      const u = obj(o.usage);
      const cacheWrite = countOrNull(u.cache_creation_input_tokens) ?? 0;
      const cacheIn = cacheWrite + (countOrNull(u.cache_read_input_tokens) ?? 0);
      const input = countOrNull(u.input_tokens);
      return {
        cost_usd: figure(o.total_cost_usd) ?? figure(o.cost_usd),
        tokens_in: input === null ? null : input + cacheIn,
        tokens_out: countOrNull(u.output_tokens),
      };
    },
    session: (o) => sighting(shaped(o.session_id, UUID), o.type === 'result' ? o.result : null),
    // claude marks the assistant message it makes up for an API error with the error's kind (an enum of its own).
    login(o) {
      if (o.type !== 'assistant') return null;
      return o.error === undefined ? 'answered' : o.error === 'authentication_failed' ? 'logged-out' : 'other';
    },
    resume: (id) => [...CLAUDE_ARGS, '--resume', id],
    notLoggedIn: { exitCode: 1, said: true,
      fix: 'run `claude` and /login as the user svc runs as, or set ANTHROPIC_API_KEY in svc\'s environment' },
    // Without it claude 2.1 also tunnels to api.anthropic.com for feature flags, telemetry and plugin listings.
    underGate: () => ({ CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1' }),
  },
  // exec never asks for approval; its own sandbox is off (svc's is the boundary); its flags go before `resume`.
  codex: {
    args: [...CODEX_ARGS, '-'], stdin: true,
    // `codex exec --json`: turn.completed events carry usage; codex reports no price.
    usage(o) {
      if (o.type !== 'turn.completed') return null;
      const u = obj(o.usage);
      return { cost_usd: null, tokens_in: countOrNull(u.input_tokens), tokens_out: countOrNull(u.output_tokens) };
    },
    session(o) {
      if (o.type === 'thread.started') return sighting(shaped(o.thread_id, UUID), null);
      const item = obj(o.item);
      return o.type === 'item.completed' && item.type === 'agent_message' ? sighting(null, item.text) : null;
    },
    // Item events are the model's doing (an error item is codex's own); turn.failed leads with the API's status.
    login(o) {
      const type = typeof o.type === 'string' ? o.type : '';
      if (type === 'turn.completed' || (type.startsWith('item.') && obj(o.item).type !== 'error')) return 'answered';
      if (type !== 'turn.failed') return null;
      const message = obj(o.error).message;
      return typeof message === 'string' && message.startsWith('unexpected status 401 ') ? 'logged-out' : 'other';
    },
    resume: (id) => [...CODEX_ARGS, 'resume', id, '-'],
    // Without credentials codex asks anyway; the model API's refusal is what it reports.
    notLoggedIn: { exitCode: 1, said: true,
      fix: 'run `codex login` as the user svc runs as, or set OPENAI_API_KEY in svc\'s environment' },
    // codex 0.169 reads OPENAI_BASE_URL no more, only its openai_base_url setting; a user's own model_providers
    // entry is unaffected (docs/gate.md "The model CLIs and the gate").
    baseUrl: { env: 'OPENAI_BASE_URL', args: (url) => ['-c', `openai_base_url=${JSON.stringify(url)}`] },
  },
  // Headless when stdin is not a TTY; --skip-trust trusts the fresh worktree for this session only.
  gemini: {
    args: GEMINI_ARGS, stdin: true, document: 'all',
    // `gemini --output-format json`: stats per model (tokens.prompt / tokens.candidates) or flat input/outputTokens.
    usage(o) {
      if (!o.stats) return null;
      const stats = obj(o.stats);
      const flat = { tokens_in: countOrNull(stats.inputTokens), tokens_out: countOrNull(stats.outputTokens) };
      // A model entry without token counts reports nothing (addUsage): the figure stays null rather than 0.
      return Object.values(obj(stats.models)).map((model) => obj(obj(model).tokens)).reduce<Usage>((total, t) =>
        addUsage(total, { cost_usd: null, tokens_in: countOrNull(t.prompt), tokens_out: countOrNull(t.candidates) }),
        { cost_usd: null, ...flat });
    },
    session: (o) => sighting(shaped(o.session_id, UUID), o.response),
    resume: (id) => [...GEMINI_ARGS, '--resume', id], sessionIdLast: true,
    // 41 is the exit code of its FatalAuthenticationError; it prints nothing until it exits.
    notLoggedIn: { exitCode: 41,
      fix: 'run `gemini` and log in as the user svc runs as, or set GEMINI_API_KEY in svc\'s environment' },
  },
  // svc commits, so aider's own auto-commits are off. It has no session to resume.
  aider: {
    args: ['--yes-always', '--no-auto-commits', '--no-pretty', '--no-stream', '--message-file', '{task_file}'],
    stdin: false,
    reader: () => {
      const usage = createAider();
      return (line, o) => ({ usage: usage(line), session: lastLine(line, o) });
    },
  },
  // --file takes an array and would swallow a message after it, so the message comes first.
  opencode: {
    args: ['run', ...OPENCODE_ARGS], stdin: false,
    // `opencode run --format json`: each step_finish part carries cost and tokens (cache figures added as claude's).
    usage(o) {
      const part = obj(o.part);
      const cost = figure(part.cost) ?? figure(o.cost);
      const tokens = obj(part.tokens ?? o.tokens);
      if (cost === null && tokens.input === undefined) return null;
      const input = countOrNull(tokens.input);
      const cache = obj(tokens.cache);
      const cacheIn = (countOrNull(cache.read) ?? 0) + (countOrNull(cache.write) ?? 0);
      const output = countOrNull(tokens.output);
      return { cost_usd: cost, tokens_in: input === null ? null : input + cacheIn, tokens_out: output };
    },
    session: (o) => sighting(shaped(o.sessionID, OPENCODE_SESSION), o.type === 'text' ? obj(o.part).text : null),
    resume: (id) => ['run', '--session', id, ...OPENCODE_ARGS],
    // Its Anthropic client posts to <base>/messages, where claude posts to <base>/v1/messages.
    underGate: (gate): Record<string, string> =>
      gate.ANTHROPIC_BASE_URL ? { ANTHROPIC_BASE_URL: `${gate.ANTHROPIC_BASE_URL}/v1` } : {},
  },
};

/** The usage of an object of svc's own shape `{"usd":…,"tokens_in":…,"tokens_out":…}`: a command provider's
 * `svc.cost` line, and the run's `cost` events. */
export function svcCost(o: Obj): Usage {
  return { cost_usd: figure(o.usd), tokens_in: countOrNull(o.tokens_in), tokens_out: countOrNull(o.tokens_out) };
}

// `command` providers report an increment as {"type":"svc.cost","usd":…,"tokens_in":…,"tokens_out":…}, else as claude.
const COMMAND: Adapter = {
  args: [], stdin: true, reader: () => (line, o) => {
    const usage = o && (o.type === 'svc.cost' ? svcCost(o) : BUILTINS.claude.usage!(o));
    return { usage, session: lastLine(line, o) };
  },
};

export function adapterOf(kind: string): Adapter {
  return isBuiltin(kind) ? BUILTINS[kind] : COMMAND;
}

/** `argv` of a `kind` CLI pointed at the model API base URL svc's gate gave it in `gateEnv`, if it needs telling. */
export function pointedAtGate(kind: string, argv: string[], gateEnv: Record<string, string>): string[] {
  const { baseUrl } = adapterOf(kind);
  const url = baseUrl ? gateEnv[baseUrl.env] : undefined;
  return url === undefined ? argv : [argv[0]!, ...baseUrl!.args(url), ...argv.slice(1)];
}

/** What a `kind` CLI's environment needs beyond the variables a gate gives it (`gateEnv`: the run gate's, or a job
 * pod's environment, which names the shared gate). */
export function gateEnvFor(
  kind: string, gateEnv: Readonly<Record<string, string | undefined>>,
): Record<string, string> {
  return adapterOf(kind).underGate?.(gateEnv) ?? {};
}

/** Reads one invocation's output, each line parsed once; `session` is what its stdout said of the CLI's session. A CLI
 * that prints one JSON document may pretty-print it: its lines from one that is exactly `{` to one that is exactly
 * `}` (nested braces are indented) are read as one. */
export function createOutputReader(kind: string) {
  const adapter = adapterOf(kind);
  const read: LineReader = adapter.reader?.() ?? ((_, o) => o
    ? { usage: adapter.usage?.(o), session: adapter.session?.(o), login: adapter.login?.(o) } : {});
  const session: SessionSighting = { id: null, said: null };
  // Each stream gathers its own document: the two pipes are read apart, so their lines interleave.
  const open: Record<'stdout' | 'stderr', string[] | null> = { stdout: null, stderr: null };
  const documentEndedBy = (stream: 'stdout' | 'stderr', line: string): Obj | null => {
    const bare = line.trimEnd();
    const lines = open[stream];
    if (lines === null) {
      if (bare === '{') open[stream] = [line];
      return null;
    }
    lines.push(line);
    if (lines.length > 100_000) open[stream] = null;
    if (bare !== '}' || open[stream] === null) return null;
    open[stream] = null;
    return objOrNull(tryParseJson(lines.join('\n')));
  };
  return {
    session,
    /** The line's usage increment, and on stdout the CLI's record on its credentials. */
    line(stream: 'stdout' | 'stderr', line: string): { usage: Usage | null; login: LoginRecord } {
      const ended = adapter.document ? documentEndedBy(stream, line) : null;
      const one = json(line);
      const { usage = null, session: seen = null, login = null } = read(line, one ?? ended);
      if (stream !== 'stdout' || (one === null && ended !== null && adapter.document === 'usage')) {
        return { usage, login: null };
      }
      // Most CLIs name their session before any model output: a later id is never taken over the first.
      if (seen?.id && (session.id === null || adapter.sessionIdLast)) session.id = seen.id;
      if (seen?.said) session.said = seen.said;
      return { usage, login };
    },
  };
}
export type OutputReader = ReturnType<typeof createOutputReader>;

/** Adds an increment; a figure stays null until something reports it (unknown is never 0). */
export function addUsage(total: Usage, inc: Usage): Usage {
  const add = (a: number | null, b: number | null) => (b === null ? a : (a ?? 0) + b);
  return {
    cost_usd: add(total.cost_usd, inc.cost_usd),
    tokens_in: add(total.tokens_in, inc.tokens_in),
    tokens_out: add(total.tokens_out, inc.tokens_out),
  };
}

/** Whether an invocation's CLI counted no tokens: its model did nothing (it never started, or was never reached). */
export const modelSilent = (usage: Usage): boolean => !usage.tokens_in && !usage.tokens_out;

export class ProviderMissingError extends UnavailableError {}

export function isBuiltin(name: string): name is (typeof BUILTIN_PROVIDERS)[number] {
  return (BUILTIN_PROVIDERS as readonly string[]).includes(name);
}

export interface ProviderEntry {
  command: string[];
  /** Folders the provider's CLI writes (absolute, or relative to HOME), writable inside its sandbox. */
  writable?: string[];
  /** Not read from a file: false when only the program file itself may be shown, not its folder (config.ts). */
  showFolder?: boolean;
}

/** Where the operator's providers come from (config.ts loadOperatorConfig), as an error names them. */
const OPERATOR_PROVIDERS = 'operator.json, and for a run the Control Plane starts its "providers" setting';

/** The providers part of a run's config (config.ts). */
type ProviderConfig = { provider: string | null; providers: Record<string, ProviderEntry> };

function resolveNamed(name: string, config: ProviderConfig, pathVar: string | undefined): ResolvedProvider | null {
  // Own keys only: a name like `constructor` is no provider of the config's.
  const configured = Object.hasOwn(config.providers, name) ? config.providers[name] : undefined;
  if (configured) {
    const [bin, ...rest] = configured.command;
    const path = which(bin!, pathVar);
    if (!path) {
      const where = pathVar ?? '';
      throw new ProviderMissingError(`Provider "${name}" runs "${bin}", which was not found on PATH (${where})`);
    }
    return {
      name, kind: 'command', argv: [path, ...rest], stdinPrompt: true, writable: configured.writable ?? [],
      showFolder: configured.showFolder ?? true,
    };
  }
  if (!isBuiltin(name)) return null;
  const path = which(name, pathVar);
  if (!path) return null;
  const spec = BUILTINS[name];
  return { name, kind: name, argv: [path, ...spec.args], stdinPrompt: spec.stdin };
}

/** Picks --provider, else config "provider", else the first builtin on PATH; says what it looked for when none is. */
export function resolveProvider(
  requested: string | null, config: ProviderConfig, env: NodeJS.ProcessEnv,
): ResolvedProvider {
  const name = requested ?? config.provider;
  if (name) {
    const found = resolveNamed(name, config, env.PATH);
    if (found) return found;
    if (isBuiltin(name)) {
      // The PATH searched is that of the process doing the run: a server's, or a Kubernetes job pod image's, not the
      // shell's where the person has the CLI. Say so, or "not found" reads as wrong.
      throw new ProviderMissingError(`Provider "${name}" not found: looked for the "${name}" executable on the ` +
        "PATH of the process that started the run (a server's or a job pod's, not always your shell's): install " +
        'it where that process runs, or put it on that PATH');
    }
    // A name no provider has is the person's to fix (exit 2): their --provider, else the config's "provider".
    const configured = Object.keys(config.providers);
    const [Unknown, given] = requested !== null ? [UsageError, '--provider'] : [BadSettingError, '"provider"'];
    throw new Unknown(
      `Unknown provider "${name}" (${given}): builtins are ${BUILTIN_PROVIDERS.join(', ')}; the providers of ` +
        `.svc/config.json and the operator's (${OPERATOR_PROVIDERS}) are ` +
        (configured.length ? configured.join(', ') : '(none)') + '; `svc providers` shows which are installed',
    );
  }
  for (const builtin of BUILTIN_PROVIDERS) {
    const found = resolveNamed(builtin, config, env.PATH);
    if (found) return found;
  }
  const looked = `No provider found: looked for ${BUILTIN_PROVIDERS.join(', ')} on PATH and a "provider" in ` +
    '.svc/config.json.';
  // A command provider is never picked unnamed; one configured (the operator's above all, which the repository
  // cannot see) is what the person meant to run, so name it rather than send them to install a CLI or to svc init.
  const configured = Object.keys(config.providers);
  if (configured.length > 0) {
    throw new ProviderMissingError(`${looked} The command providers configured for this run (.svc/config.json ` +
      `and the operator's: ${OPERATOR_PROVIDERS}) are ${configured.join(', ')}: pass --provider NAME, or name one as ` +
      '"provider" in .svc/config.json');
  }
  throw new ProviderMissingError(
    `${looked} Install one and pass --provider NAME, or try svc with no API key: \`svc init\` writes a command ` +
      'provider (a small script svc runs as the agent) into .svc/ (README "Quick start")',
  );
}
