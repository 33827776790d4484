// Which served repository an event belongs to: exactly one, or a reason it is refused, never a guess
// (docs/trigger.md "Served repositories"); and the table as the running server sees it.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { pinPushTarget } from '../engine/git-push.ts';
import { githubWebHost, httpRemoteHost } from '../engine/git-token.ts';
import { repoRoot } from '../engine/git.ts';
import { orNull, pathKind, realOrNull } from '../spawn/tree.ts';
import type { Logger } from '../log.ts';
import { BadSettingError, errorMessage } from '../errors.ts';
import {
  EVERY_CHANNEL, isChatKind, keyOf, parseServedRepos, ReposFileError, type ReposProblem, type ServedRepo,
} from './served-repos-file.ts';
import {
  DEFAULT_BRIEF_BYTES, ROUTING_KINDS, sanitizeBrief, type ChatKind, type RoutingKind,
} from '../webhook-sources.ts';
import { isRepoName } from '../engine/spec.ts';
import { shownValue } from '../one-line.ts';

export type Routed = { kind: 'repo'; repo: ServedRepo } | { kind: 'unserved'; reason: string };

/** `attach`: a table read from a file gets its logger and reload listener once the server has them. */
export type RepoRouter = ReturnType<typeof createRepoRouter> & { attach?(hooks: LiveHooks): void };

/** `source`: the file's path, or what named the one-repository shorthand (`--repo DIR`, …). */
function createRepoRouter(entries: readonly ServedRepo[], source: string) {
  const byName = new Map(entries.map((e) => [e.name.toLowerCase(), e]));
  const byKey = new Map<string, ServedRepo>();
  for (const entry of entries) {
    for (const kind of ROUTING_KINDS) {
      if (isChatKind(kind)) continue;
      for (const v of entry.keys[kind]) byKey.set(`${kind}:${keyOf(kind, v)}`, entry);
    }
  }
  const fallback = entries.find((e) => e.isDefault);
  const naming = (kind: ChatKind, channel: string | null): ServedRepo[] =>
    channel === null || channel === EVERY_CHANNEL ? [] : entries.filter((e) => e.keys[kind].includes(channel));
  const open = (kind: ChatKind): ServedRepo[] => entries.filter((e) => e.keys[kind].includes(EVERY_CHANNEL));
  return {
    entries,
    source,
    /** A checkout served as `local/<folder>` also answers to its folder alone: the name svc start gives its runs. */
    byName: (name: string): ServedRepo | undefined =>
      byName.get(name.toLowerCase()) ?? (name.includes('/') ? undefined : byName.get(`local/${name.toLowerCase()}`)),
    /**
     * A GitHub event: its repository.full_name must be served; `default` never applies. A `local/<folder>` entry is
     * svc's name for a checkout with no origin, not the repository of a GitHub account called "local": it takes none.
     */
    webhook(fullName: string | null): Routed {
      if (!fullName) return { kind: 'unserved', reason: 'the event names no repository' };
      const repo = byName.get(fullName.toLowerCase());
      if (repo && !repo.name.toLowerCase().startsWith('local/')) return { kind: 'repo', repo };
      return { kind: 'unserved', reason: `repository "${shownValue(fullName)}" is not served` };
    },
    /**
     * Another source's key, then the default entry. A `stranger`'s (from a vendor account the operator did not name)
     * reaches neither: its key is another account's, whatever this table maps that key to.
     */
    route(kind: RoutingKind, key: string | null, stranger = false): Routed {
      const repo = key === null || stranger ? undefined : byKey.get(`${kind}:${keyOf(kind, key)}`);
      if (repo) return { kind: 'repo', repo };
      if (fallback && !stranger) return { kind: 'repo', repo: fallback };
      const what = key === null
        ? `the ${kind} event names no routing key`
        : `${kind} key "${shownValue(key)}" is not served`;
      return { kind: 'unserved', reason: stranger ? what : `${what} and no repository is the default` };
    },
    /**
     * Only an entry the channel may reach; `option` (repo=owner/name) picks among those. A `stranger`'s message (from
     * a workspace the operator did not name) reaches none, and hears what a channel mapped to nothing hears: a channel
     * id is the workspace's own, so a stranger learns nothing of this table from its answer.
     */
    chat(kind: ChatKind, channel: string | null, option: string | null, stranger = false): Routed {
      const named = stranger ? [] : naming(kind, channel);
      const reach = stranger ? [] : [...named, ...open(kind).filter((e) => !named.includes(e))];
      const where = channel === null
        ? `a ${kind} message with no channel`
        : `${kind} channel "${shownValue(channel, 'name')}"`;
      const may = reach.length
        ? `it may start work in ${reach.slice(0, 10).map((e) => e.name).join(', ')}`
        : 'it may start work in no repository here';
      if (option !== null) {
        const repo = reach.find((e) => e.name.toLowerCase() === option.toLowerCase());
        if (repo) return { kind: 'repo', repo };
        // The same words whether the repository is served elsewhere or not at all: a channel learns only its own reach.
        return { kind: 'unserved', reason: `${where} may not start work in "${shownValue(option)}" (${may})` };
      }
      if (named.length === 1) return { kind: 'repo', repo: named[0]! };
      if (named.length > 1) {
        return { kind: 'unserved', reason: `${where} reaches several repositories: add repo=owner/name (${may})` };
      }
      if (fallback && reach.includes(fallback)) return { kind: 'repo', repo: fallback };
      const hint = reach.length ? `: add repo=owner/name (${may})` : ` (${may})`;
      return { kind: 'unserved', reason: `${where} is mapped to no repository${hint}` };
    },
  };
}

type RepoOption = { kind: 'option'; repo: string | null; text: string } | { kind: 'bad'; reason: string };

const REPO_TOKEN = /(^|\s)repo=(\S*)/gi;

/** `repo=owner/name` taken out of a chat command; the rest sanitized again (the cut can leave a leading hyphen). */
export function takeRepoOption(text: string): RepoOption {
  const named = new Set<string>();
  for (const m of text.matchAll(REPO_TOKEN)) named.add(m[2]!.toLowerCase());
  if (named.size === 0) return { kind: 'option', repo: null, text };
  if (named.size > 1) return { kind: 'bad', reason: 'name one repository with repo=owner/name, not several' };
  const [repo] = [...named] as [string];
  if (!isRepoName(repo)) return { kind: 'bad', reason: `repo=${repo.slice(0, 120)} is not an owner/name` };
  return { kind: 'option', repo, text: sanitizeBrief(text.replace(REPO_TOKEN, ' '), DEFAULT_BRIEF_BYTES) };
}

/**
 * `--repo DIR`: one checkout, the default for every source, named as its push target, else `local/<folder>` (which
 * takes no GitHub event). `checked` false: the checkout is never used (SVC_TRIGGER_EXECUTOR=kubernetes, whose pods
 * clone SVC_K8S_REPO_URL or copy the PVC), so it need not be a git work tree.
 */
export function shorthandRepos(dir: string, source: string, checked = true): RepoRouter {
  // No origin svc would push to: no GitHub name.
  const name = orNull(() => pinPushTarget(dir).repo);
  const folder = basename(dir).replace(/[^A-Za-z0-9._-]/g, '-').replace(/^[.-]+/, '') || 'repo';
  const entry: ServedRepo = {
    name: name ?? `local/${folder}`,
    checkout: dir,
    clone: null,
    keys: Object.fromEntries(ROUTING_KINDS.map((k) => [k, isChatKind(k) ? [EVERY_CHANNEL] : []])) as ServedRepo['keys'],
    isDefault: true,
    line: 0,
  };
  // The repositories file's own check: a server whose one checkout is missing would queue jobs that all fail.
  const problem = checked ? checkoutProblems([entry], [])[0] : undefined;
  if (problem) {
    throw new BadSettingError(`Cannot serve ${source}: ${problem.reason}. Serve a git checkout with --repo DIR, or `
      + 'repositories with --repos FILE (svc repos add OWNER/NAME checkout=DIR writes the default one)');
  }
  const router = createRepoRouter([entry], source);
  if (name) return router;
  return {
    ...router,
    webhook: () => ({
      kind: 'unserved', reason: 'the served checkout has no GitHub origin; name it in a repositories file',
    }),
  };
}

/**
 * Served checkouts no pull request can come from: their git config names no single origin svc would push to (every
 * job of a route that opens one, `prRoutes`, whose `svc start` has `--pr`, refuses to start there), or the origin is
 * on another host than GitHub's (with a token such a job is refused as it starts: checkPrPossible). The server says
 * so once at start rather than only in each failed job. A `clone=` entry's checkout is made from its origin. A path
 * origin (a mirror) and an ssh one (its host may be an ssh alias of GitHub's) are left alone.
 */
export function noPushTargetWarnings(
  entries: readonly ServedRepo[], prRoutes: readonly string[], env: NodeJS.ProcessEnv,
): string[] {
  if (prRoutes.length === 0) return [];
  const routes = prRoutes.length === 1 ? prRoutes[0]! : `${prRoutes.slice(0, -1).join(', ')} and ${prRoutes.at(-1)!}`;
  const github = orNull(() => githubWebHost(env).hostname.toLowerCase());
  const warnings: string[] = [];
  for (const entry of entries) {
    if (entry.checkout === null) continue;
    const cannot = `Served checkout ${entry.checkout} (${entry.name}) cannot open a pull request, so every job from `
      + routes;
    let host: string | null;
    try {
      host = httpRemoteHost(pinPushTarget(entry.checkout).url);
    } catch (err) {
      warnings.push(`${cannot} fails as it starts (each runs svc start --pr): ${errorMessage(err)}`);
      continue;
    }
    if (host !== null && github !== null && host !== github) {
      warnings.push(`${cannot} fails (each runs svc start --pr): its origin is on ${host}, and svc opens pull `
        + `requests only on ${github} (GitHub, or the host of GITHUB_API_URL)`);
    }
  }
  return warnings;
}

/** What the parser cannot see: a checkout that is missing or not a git work tree. */
export function checkoutProblems(entries: readonly ServedRepo[], lines: readonly string[]): ReposProblem[] {
  const problems: ReposProblem[] = [];
  // Each folder by its real path: two entries reaching one checkout through a link would share it.
  const reached = new Map<string, ServedRepo>();
  for (const entry of entries) {
    const { checkout } = entry;
    if (checkout === null) continue;
    const text = lines[entry.line - 1]?.trim() ?? entry.name;
    const real = realOrNull(checkout);
    const holder = real === null ? undefined : reached.get(real);
    if (holder) {
      const reason = `checkout ${checkout} is the folder of line ${holder.line}`;
      problems.push({ line: entry.line, text, reason });
      continue;
    }
    if (real !== null) reached.set(real, entry);
    if (pathKind(checkout, true) !== 'dir') {
      problems.push({ line: entry.line, text, reason: `checkout ${checkout} is not a directory` });
    } else if (!existsSync(join(checkout, '.git'))) {
      const top = repoRoot(checkout);
      const reason = top === null ? 'is not a git work tree' : `is not the top of a git work tree (its top is ${top})`;
      problems.push({ line: entry.line, text, reason: `checkout ${checkout} ${reason}` });
    }
  }
  return problems;
}

/** The server's routing table, or ReposFileError (the server does not start). */
export function loadServedRepos(file: string): RepoRouter {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'unreadable';
    const next = code === 'ENOENT' ? `: write it with "svc repos add --file ${file} OWNER/NAME checkout=DIR"` : '';
    throw new ReposFileError(file, [{ line: 0, text: '', reason: `cannot read the file (${code})${next}` }]);
  }
  const entries = parseServedRepos(text, file);
  const problems = checkoutProblems(entries, text.split(/\r?\n/));
  if (problems.length) throw new ReposFileError(file, problems);
  return createRepoRouter(entries, file);
}

// Read again when one stat() at each use shows the file changed (docs/trigger.md "Changes need no restart"); a file
// that became invalid, unreadable or missing keeps the table in use.
interface LiveHooks {
  log: Logger;
  onChange?: (router: RepoRouter) => void;
}

function fingerprint(file: string): string {
  try {
    const st = statSync(file);
    return `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
  } catch (err) {
    return `missing:${(err as NodeJS.ErrnoException).code ?? 'unreadable'}`;
  }
}

/**
 * Loads `file` now (ReposFileError is the start-up check) and again whenever it changes; `check`: extra rules every
 * table must pass (the Kubernetes executor's), throwing to refuse it.
 */
export function liveServedRepos(file: string, check?: (router: RepoRouter) => void): RepoRouter {
  let seen = fingerprint(file);
  let current = loadServedRepos(file);
  check?.(current);
  let hooks: LiveHooks | undefined;

  function fresh(): RepoRouter {
    const now = fingerprint(file);
    if (now === seen) return current;
    seen = now;
    try {
      const next = loadServedRepos(file);
      check?.(next);
      current = next;
      hooks?.log.info('served repositories reloaded', { repos_from: file, repos: next.entries.map((e) => e.name) });
      hooks?.onChange?.(next);
    } catch (err) {
      hooks?.log.error('served repositories file changed but is not used; the previous table stays', {
        repos_from: file, error: errorMessage(err),
      });
    }
    return current;
  }

  return {
    get entries() {
      return fresh().entries;
    },
    source: file,
    byName: (name) => fresh().byName(name),
    webhook: (fullName) => fresh().webhook(fullName),
    route: (kind, key, stranger) => fresh().route(kind, key, stranger),
    chat: (kind, channel, option, stranger) => fresh().chat(kind, channel, option, stranger),
    attach(h) {
      hooks = h;
    },
  };
}
