// `svc repos list|add|remove`: edits the trigger server's served repositories file (docs/trigger.md). Every change
// is checked as the server would check the whole file, and written atomically; nothing invalid is ever written.
import { mkdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseFlags, subcommand, type CliIo } from './io.ts';
import { UsageError, NotFoundError, FailedError, RefusedError, errorMessage } from '../errors.ts';
import { defaultReposFile } from '../trigger/settings.ts';
import {
  formatServedRepo, parseServedRepos, removeServedRepo, ReposFileError,
} from '../trigger/served-repos-file.ts';
import { checkoutProblems } from '../trigger/served-repos.ts';
import { ROUTING_KINDS, sourceOf } from '../webhook-sources.ts';
import { writeFileAtomic } from '../atomic-write.ts';
import { orNull } from '../spawn/tree.ts';

/** `svc repos add`'s arguments, one routing key per source that has them, wrapped under the command. */
function addUsage(): string {
  const words = ['(checkout=DIR | clone=URL)', ...ROUTING_KINDS.map((k) => `[${k}=${sourceOf(k).keyName},…]`),
    '[default]', '[--file FILE]'];
  const lines = ['       svc repos add OWNER/NAME'];
  for (const word of words) {
    if (lines.at(-1)!.length + word.length + 1 > 110) lines.push(' '.repeat(20));
    lines[lines.length - 1] += ` ${word}`;
  }
  return lines.join('\n');
}

export const HELP = `Usage: svc repos list [--file FILE]
${addUsage()}
       svc repos remove OWNER/NAME [--file FILE]

Edits the repositories the trigger server serves, one line each. FILE: --file, else SVC_TRIGGER_REPOS,
else ~/.svc/trigger/repos.conf. Under systemd the service's file is /var/lib/svc/trigger/repos.conf (the unit
sets SVC_TRIGGER_REPOS to it): pass it with --file. A bad entry is refused with its line and the reason, and
so is removing the last one (a file that serves none stops the server: delete the file instead). A
running server that serves FILE uses the change from its next delivery: no restart. Run as root, the file
keeps the owner of the file it replaces (or of its folder), so the service can still read it.
See docs/trigger.md "Served repositories".
`;

function readText(file: string): string | null {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new FailedError(`Cannot read ${file}: ${errorMessage(err)}`);
  }
}

function writeAtomically(file: string, text: string): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  // The folder may be the service user's: the file is given to the owner of the file it replaces (or of its folder).
  const st = orNull(() => statSync(file)) ?? orNull(() => statSync(dirname(file)));
  const data = text.endsWith('\n') || text === '' ? text : `${text}\n`;
  writeFileAtomic(file, data, 0o600, { owner: st ? { uid: st.uid, gid: st.gid } : undefined });
}

const LIVE = 'A trigger server serving this file uses it from its next delivery; no restart is needed.';

/** The file's entries; an existing file that is already invalid is reported whole (exit 1): fix it first. */
function entriesOf(file: string, text: string) {
  try {
    return parseServedRepos(text, file);
  } catch (err) {
    if (err instanceof ReposFileError) throw new FailedError(err.message, { cause: err });
    throw err;
  }
}

function list(io: CliIo, file: string): number {
  const text = readText(file);
  if (text === null) {
    // A fresh machine has none yet: that is a state to describe (exit 0), not a failure.
    io.stderr(`No repositories file at ${file}: the trigger server serves --repo DIR (or its current directory); ` +
      'svc repos add OWNER/NAME checkout=DIR writes one\n');
    return 0;
  }
  for (const entry of entriesOf(file, text)) io.stdout(`${formatServedRepo(entry)}\n`);
  return 0;
}

/** The new entry is checked together with every line already there: names, checkouts and keys stay unique. */
function add(io: CliIo, file: string, tokens: string[]): number {
  if (tokens.length < 2) throw new UsageError('Missing repository: give OWNER/NAME and checkout=DIR or clone=URL');
  // A relative checkout is relative to where the command runs, written down absolute.
  const line = tokens.map((t) => (t.startsWith('checkout=') ? `checkout=${resolve(t.slice(9))}` : t)).join(' ');
  const before = readText(file) ?? '';
  const after = `${before}${before === '' || before.endsWith('\n') ? '' : '\n'}${line}\n`;
  // A refused entry is a ReposFileError, a BadSettingError: exit 2, as a usage mistake. Its line is not in the file.
  const lines = after.split(/\r?\n/);
  const addedLine = lines.length - 1;
  const entries = parseServedRepos(after, file, addedLine);
  const added = entries.at(-1)!;
  // All entries, as the server checks them (a folder reached through a link is another line's), but the lines
  // already in the file are not this command's to refuse.
  const problems = checkoutProblems(entries, lines).filter((problem) => problem.line === addedLine);
  if (problems.length) throw new ReposFileError(file, problems, addedLine);
  writeAtomically(file, after);
  io.stdout(`Added ${formatServedRepo(added)} to ${file}\n${LIVE}\n`);
  return 0;
}

function remove(io: CliIo, file: string, name: string | undefined): number {
  if (!name) throw new UsageError('Missing repository: give OWNER/NAME');
  const text = readText(file);
  if (text === null) throw new NotFoundError(`No repositories file at ${file}`);
  const entries = entriesOf(file, text);
  const result = removeServedRepo(text, name, file);
  if (!result.removed) throw new NotFoundError(`"${name}" is not in ${file}`);
  // A file that serves no repository is invalid: the server refuses to start on it and `svc repos` to read it.
  if (entries.every((entry) => entry.name.toLowerCase() === name.toLowerCase())) {
    throw new RefusedError(`Not removed: ${name} is the only repository ${file} serves, and a trigger server `
      + `refuses a file that serves none; delete the file instead (rm ${file}) to serve one checkout with --repo DIR`);
  }
  writeAtomically(file, result.text);
  io.stdout(`Removed ${name} from ${file}\n${LIVE}\n`);
  return 0;
}

export default async function repos(io: CliIo): Promise<number> {
  const picked = subcommand(io, HELP, 'repos', ['list', 'add', 'remove']);
  if (typeof picked === 'number') return picked;
  const { sub } = picked;
  const most = { list: 0, add: Infinity, remove: 1 }[sub];
  const { values, positionals: rest } = parseFlags(picked.rest, { file: { type: 'string' } }, most);
  const file = resolve(values.file ?? (io.env.SVC_TRIGGER_REPOS || defaultReposFile(io.env)));
  if (sub === 'list') return list(io, file);
  return sub === 'add' ? add(io, file, rest) : remove(io, file, rest[0]);
}
