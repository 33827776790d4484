// The served repositories file as the server sees it while running: read again when it changed, so `svc repos add`
// and `svc repos remove` take effect without a restart. Changed means its inode, size, mtime or ctime differ from the
// copy in use, checked with one stat() each time the table is consulted (a delivery being routed, a job launched, GET
// /status): no timer, no watcher, and the first delivery after a write already sees it. A file that became invalid,
// unreadable or missing keeps the table in use; that is logged once per change, never half applied.
// Must not: serve a table the parser or the checkout check refused.
import { statSync } from 'node:fs';
import type { Logger } from '../log.ts';
import { loadServedRepos, type RepoRouter } from './served-repos.ts';
import { errorMessage } from '../errors.ts';

export interface LiveHooks {
  log: Logger;
  /** Extra start-up rules a new table must also pass (the Kubernetes executor's); throws to refuse it. */
  check?: (router: RepoRouter) => void;
  /** A new table is in use (the Control Plane is told the new names). */
  onChange?: (router: RepoRouter) => void;
}

export interface LiveRepoRouter extends RepoRouter {
  /** Wires logging and the rules above once the server has them (settings are resolved before its logger exists). */
  attach(hooks: LiveHooks): void;
}

function fingerprint(file: string): string {
  try {
    const st = statSync(file);
    return `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
  } catch (err) {
    return `missing:${(err as NodeJS.ErrnoException).code ?? 'unreadable'}`;
  }
}

/** Loads `file` now (throwing ReposFileError as the start-up check) and again whenever it changes. */
export function liveServedRepos(file: string): LiveRepoRouter {
  let seen = fingerprint(file);
  let current = loadServedRepos(file);
  let hooks: LiveHooks | undefined;

  function fresh(): RepoRouter {
    const now = fingerprint(file);
    if (now === seen) return current;
    seen = now;
    try {
      const next = loadServedRepos(file);
      hooks?.check?.(next);
      current = next;
      hooks?.log.info('served repositories reloaded', { repos_from: file, repos: next.entries.map((e) => e.name) });
      hooks?.onChange?.(next);
    } catch (err) {
      const error = errorMessage(err);
      hooks?.log.error('served repositories file changed but is not used; the previous table stays', {
        repos_from: file, error,
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
    route: (kind, key) => fresh().route(kind, key),
    chat: (kind, channel, option) => fresh().chat(kind, channel, option),
    attach(h) {
      hooks = h;
    },
  };
}
