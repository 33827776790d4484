// The served repositories file (docs/trigger.md "Served repositories"): one line per repository, refused whole when
// any line is wrong, so the server never starts with a routing table it half understood. Pure text in, entries out.
import { posix } from 'node:path';
import { BadSettingError } from '../errors.ts';
import { isRepoName } from '../engine/spec.ts';
import { CHAT_KINDS, ROUTING_KINDS, type ChatKind, type RoutingKind } from '../webhook-sources.ts';
import { oneOf } from '../untrusted.ts';

// A chat channel's mapping is a permission, not only a route: a message may start work only in an entry that names
// its channel, or in one that opted in to every channel with `<chat>=*`.
export const EVERY_CHANNEL = '*';

export function isChatKind(kind: RoutingKind): kind is ChatKind {
  return oneOf(kind, CHAT_KINDS) !== null;
}

export interface ServedRepo {
  /** As the file spells it. */
  name: string;
  /** Exactly one of an absolute checkout the jobs run in and a clone URL svc manages. */
  checkout: string | null;
  clone: string | null;
  keys: Record<RoutingKind, string[]>;
  /** Takes the events of non-GitHub sources whose key no entry names. */
  isDefault: boolean;
  /** 1-based line in the file (0 for the `--repo` shorthand). */
  line: number;
}

export interface ReposProblem {
  line: number;
  text: string;
  reason: string;
}

export class ReposFileError extends BadSettingError {
  readonly problems: readonly ReposProblem[];
  /** `added`: the line of the entry `svc repos add` tried, not in the file: its problems say "Not added". */
  constructor(file: string, problems: readonly ReposProblem[], added?: number) {
    const shown = problems.slice(0, 20).map((p) => (p.line === added ? `Not added: ${p.reason}`
      : `${file}:${p.line}: ${p.reason}${p.text ? ` (in "${p.text.slice(0, 200)}")` : ''}`));
    const inFile = problems.some((p) => p.line !== added);
    super(inFile ? `Invalid served repositories file:\n${shown.join('\n')}` : shown.join('\n'));
    this.problems = problems;
  }
}

const KEY_VALUE = /^[^\s,=#]{1,200}$/;

/** Team, project and slug keys are matched without case (vendors show them in either); channel ids exactly. */
export function keyOf(kind: RoutingKind, value: string): string {
  return isChatKind(kind) ? value : value.toLowerCase();
}

/** Why a clone URL is refused, or null. */
function cloneUrlProblem(url: string): string | null {
  if (/[\s\0]/.test(url)) return 'a clone URL has no spaces or control characters';
  if (/^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^/]/.test(url) && !url.includes('://')) return null; // git@host:owner/name.git
  const parsed = URL.parse(url);
  const kinds = 'an https://, ssh://, file:// or git@host:owner/name URL';
  if (!parsed) return `clone= must be ${kinds}`;
  if (!['https:', 'ssh:', 'file:'].includes(parsed.protocol)) {
    return `clone URLs over ${parsed.protocol} are not allowed: give ${kinds}`;
  }
  if (parsed.password) return 'a clone URL must not hold a password: svc sends GITHUB_TOKEN to the origin host itself';
  if (parsed.protocol === 'file:' && (parsed.host || !parsed.pathname.startsWith('/'))) {
    return 'a file:// clone URL names an absolute local path (file:///srv/git/api.git)';
  }
  return null;
}

/** One line's entry, or the reason it is refused; null for blank and comment lines. */
function parseLine(text: string, line: number): ServedRepo | string | null {
  // A `#` starts a comment at the line's start or after whitespace; inside a token it stays.
  const at = text.search(/(^|\s)#/);
  const tokens = (at < 0 ? text : text.slice(0, at)).trim().split(/\s+/).filter(Boolean);
  if (tokens.length === 0) return null;
  const [name, ...rest] = tokens as [string, ...string[]];
  if (!isRepoName(name)) {
    // The name the --repo shorthand gives a checkout with no origin, which a person may have seen in its log.
    const local = !name.includes('/') && isRepoName(`local/${name}`);
    return `"${name}" is not a repository owner/name${local ? ` (a checkout with no origin: local/${name})` : ''}`;
  }
  const keys = Object.fromEntries(ROUTING_KINDS.map((kind) => [kind, []])) as unknown as ServedRepo['keys'];
  const entry: ServedRepo = { name, checkout: null, clone: null, keys, isDefault: false, line };
  for (const token of rest) {
    if (token === 'default') {
      if (entry.isDefault) return '"default" is given twice';
      entry.isDefault = true;
      continue;
    }
    const eq = token.indexOf('=');
    const key = eq < 0 ? token : token.slice(0, eq);
    const value = eq < 0 ? '' : token.slice(eq + 1);
    if (key === 'checkout' || key === 'clone') {
      if (entry.checkout !== null || entry.clone !== null) return 'give one checkout= or clone=, not two';
      if (value === '') return `${key}= needs a value`;
      if (key === 'checkout') {
        if (!value.startsWith('/') || value.includes('\0')) return 'checkout= must be an absolute directory path';
        entry.checkout = value.length > 1 ? value.replace(/\/+$/, '') : value;
      } else {
        const problem = cloneUrlProblem(value);
        if (problem) return problem;
        entry.clone = value;
      }
      continue;
    }
    if (oneOf(key, ROUTING_KINDS) === null) {
      return `unknown "${key}" (known: checkout=, clone=, ${ROUTING_KINDS.map((k) => `${k}=`).join(', ')}, default)`;
    }
    const values = value.split(',');
    if (values.some((v) => !KEY_VALUE.test(v))) {
      return `${key}= needs one or more comma-separated values without spaces`;
    }
    if (values.includes(EVERY_CHANNEL) && !isChatKind(key as RoutingKind)) {
      const chats = CHAT_KINDS.map((k) => `${k}=*`).join(' and ');
      return `${key}=* is not allowed: only ${chats} open an entry to every channel (see "default")`;
    }
    entry.keys[key as RoutingKind].push(...values);
  }
  if (entry.checkout === null && entry.clone === null) return 'each repository needs checkout=DIR or clone=URL';
  return entry;
}

/** Problems that span lines: a name, a checkout, a routing key or `default` claimed twice. */
function crossCheck(entries: readonly ServedRepo[], lines: readonly string[]): ReposProblem[] {
  const problems: ReposProblem[] = [];
  const seen = new Map<string, ServedRepo>();
  const claim = (what: string, id: string, entry: ServedRepo): void => {
    const holder = seen.get(id);
    if (holder) {
      const reason = `${what} is already on line ${holder.line}`;
      problems.push({ line: entry.line, text: lines[entry.line - 1] ?? '', reason });
    } else seen.set(id, entry);
  };
  for (const entry of entries) {
    claim(`repository "${entry.name}"`, `name:${entry.name.toLowerCase()}`, entry);
    // However it is spelled (`/srv//api`, `/srv/./api`): one folder served as two repositories would run one's jobs
    // in the other's checkout, towards its origin.
    if (entry.checkout) claim(`checkout ${entry.checkout}`, `checkout:${posix.resolve(entry.checkout)}`, entry);
    if (entry.isDefault) claim('"default"', 'default', entry);
    // A chat channel may reach several entries (it then picks one with repo=); other keys route to exactly one.
    for (const kind of ROUTING_KINDS) {
      if (isChatKind(kind)) continue;
      for (const value of new Set(entry.keys[kind].map((v) => keyOf(kind, v)))) {
        claim(`${kind}=${value}`, `key:${kind}:${value}`, entry);
      }
    }
  }
  return problems;
}

/** Every entry, or ReposFileError listing every line that is wrong (`added`: as for ReposFileError). */
export function parseServedRepos(text: string, file: string, added?: number): ServedRepo[] {
  const lines = text.split(/\r?\n/);
  const entries: ServedRepo[] = [];
  const problems: ReposProblem[] = [];
  lines.forEach((raw, i) => {
    const parsed = parseLine(raw, i + 1);
    if (typeof parsed === 'string') problems.push({ line: i + 1, text: raw.trim(), reason: parsed });
    else if (parsed) entries.push(parsed);
  });
  problems.push(...crossCheck(entries, lines));
  if (problems.length === 0 && entries.length === 0) {
    problems.push({ line: 1, text: '', reason: 'the file serves no repository' });
  }
  if (problems.length) throw new ReposFileError(file, problems.sort((a, b) => a.line - b.line), added);
  return entries;
}

/** What `svc repos add` appends. */
export function formatServedRepo(entry: ServedRepo): string {
  const parts = [entry.name, entry.checkout !== null ? `checkout=${entry.checkout}` : `clone=${entry.clone ?? ''}`];
  for (const kind of ROUTING_KINDS) if (entry.keys[kind].length) parts.push(`${kind}=${entry.keys[kind].join(',')}`);
  if (entry.isDefault) parts.push('default');
  return parts.join(' ');
}

/** The text without the line(s) of `name`, the rest kept as written. */
export function removeServedRepo(text: string, name: string, file: string): { text: string; removed: boolean } {
  const entries = parseServedRepos(text, file);
  const gone = new Set(entries.filter((e) => e.name.toLowerCase() === name.toLowerCase()).map((e) => e.line));
  const kept = text.split(/\r?\n/).filter((_, i) => !gone.has(i + 1));
  return { text: kept.join('\n'), removed: gone.size > 0 };
}
