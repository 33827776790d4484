// `svc trust`: allow the exact bytes of a repository's .svc/config.json and .svc/policy.json to widen the sandbox of
// runs you start at the CLI; runs a server starts never take these settings from a repository
// (src/engine/config.ts).
import { existsSync, readFileSync } from 'node:fs';
import { homeOf } from '../spawn/svc-paths.ts';
import { isAbsolute, join, resolve } from 'node:path';
import { parseFlags, type CliIo } from './io.ts';
import { NotFoundError, UsageError } from '../errors.ts';
import { resolveRepo } from '../engine/launch.ts';
import { addTrust, decideSettings, readEngineConfigFile, readTrust, revokeTrust, trustFile } from '../engine/config.ts';
import { loadPolicyFile, PolicyError, type Policy } from '../engine/policy.ts';
import { hash } from 'node:crypto';

export const HELP = `Usage: svc trust [--repo DIR]
       svc trust --list
       svc trust --revoke [--repo DIR | PATH]

A repository's .svc/config.json may ask for settings that widen the agent's
sandbox: "writable" folders outside the run's working tree, "env" names passed
to the agent, a provider under a built-in's name; its .svc/policy.json may ask
for "sandbox": "none". A run you start at the CLI uses them only once you
trusted that exact file: \`svc trust\` shows what each file asks for and records
its sha256 in ~/.svc/trust.json. Any change to a file needs trusting again.
Runs a server starts never use them (only the operator's ~/.svc/operator.json
or /etc/svc/operator.json can grant the config's, and only the server's own
SVC_SERVER_SANDBOX=none turns the sandbox off).

Options:
  --repo DIR   the repository (default: the current directory)
  --list       the trusted files, and whether each still matches
  --revoke     forget the repository's file (or the trusted PATH)
`;

/**
 * The repository's files a person may trust: its config.json and its policy.json, each when it is there. A policy.json
 * that cannot be read (a link, too large, not valid) is not trusted, and `unread` says why: config.json is still read.
 */
function filesOf(repoDir: string) {
  const repo = resolveRepo(repoDir);
  const file = readEngineConfigFile(repo);
  let policy: { policy: Policy; path: string; sha256: string } | null = null;
  let unread: string | null = null;
  try {
    const loaded = loadPolicyFile(repo);
    if (loaded.sha256 !== null) policy = { ...loaded, sha256: loaded.sha256 };
  } catch (err) {
    if (!(err instanceof PolicyError)) throw err;
    unread = err.message;
  }
  if (!file && !policy && unread === null) {
    throw new NotFoundError(`${repo} has no .svc/config.json or .svc/policy.json: there is nothing to trust`);
  }
  return { repo, file, policy, unread };
}

export default async function trust(io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(io.argv, {
    repo: { type: 'string' }, list: { type: 'boolean' }, revoke: { type: 'boolean' },
  }, 1);
  // Only --revoke takes a PATH: a folder given to trust is not the current one's (--repo DIR names it).
  if (!values.revoke && positionals[0] !== undefined) throw new UsageError(`Unexpected argument "${positionals[0]}"`);
  if (values.list) {
    const records = readTrust(io.env);
    if (!records.length) io.stdout(`No trusted files (${trustFile(io.env)})\n`);
    for (const r of records) {
      const now = existsSync(r.path) ? hash('sha256', readFileSync(r.path), 'hex') : null;
      const state = now === null ? 'missing' : now === r.sha256 ? 'trusted' : 'changed since trusted: not used';
      io.stdout(`${r.path}  ${r.sha256.slice(0, 12)}  ${r.trusted_at}  ${state}\n`);
    }
    return 0;
  }
  if (values.revoke) {
    // By path, without reading the files: one that is broken, a link or gone can still be forgotten.
    const own = () => {
      const repo = resolveRepo(values.repo ?? '.');
      return [join(repo, '.svc', 'config.json'), join(repo, '.svc', 'policy.json')];
    };
    const paths = positionals[0] ? [resolve(positionals[0])] : own();
    const revoked = paths.filter((path) => revokeTrust(io.env, path));
    // Nothing to forget is what --revoke wants anyway: said, not failed, so scripts may revoke without checking first.
    if (!revoked.length) {
      io.stdout(`Nothing to revoke: ${paths.join(' and ')} ${paths.length > 1 ? 'were' : 'was'} not trusted\n`);
    }
    for (const path of revoked) io.stdout(`No longer trusted: ${path}\n`);
    return 0;
  }
  const { repo, file, policy, unread } = filesOf(values.repo ?? process.cwd());
  if (file) {
    const asks = decideSettings(file.config, { env: [], providers: {} }, {
      server: false, trusted: false, home: homeOf(io.env), workdir: repo,
      pathDirs: (io.env.PATH ?? '').split(':').filter(isAbsolute),
    });
    trustOne(io, file.path, file.sha256, asks.widening.map((w) => `${w.setting} ${w.what}`), asks.notes);
  }
  if (policy) {
    trustOne(io, policy.path, policy.sha256, policy.policy.sandbox === 'none' ? ['sandbox "none"'] : [], []);
  }
  if (unread !== null) {
    io.stdout(`Not trusted: ${join(repo, '.svc', 'policy.json')} was not read (${unread}); fix it and trust again.\n`);
  }
  return file || policy ? 0 : 1;
}

/** Records one file and says what it asks for that only a trusted file may. */
function trustOne(io: CliIo, path: string, sha256: string, allowed: string[], refused: string[]): void {
  const record = addTrust(io.env, path, sha256);
  io.stdout(`Trusted ${record.path} (sha256 ${record.sha256.slice(0, 12)}…) for runs you start at the CLI.\n`);
  if (!allowed.length) io.stdout('It asks for nothing beyond what any repository may set.\n');
  for (const what of allowed) io.stdout(`  allowed: ${what}\n`);
  for (const note of refused) io.stdout(`  still refused: ${note}\n`);
}
