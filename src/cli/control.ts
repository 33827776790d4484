// `svc control serve|status`: run the Control Plane, or ask a running one whether it is up and how many runs it holds.
import { parseFlags, subcommand, type CliIo } from './io.ts';
import { existsSync, realpathSync, statSync } from 'node:fs';
import { join, resolve, sep } from 'node:path';
import { BadInputError, FailedError, UnavailableError, errorMessage } from '../errors.ts';
import { ControlApiError } from '../client/client.ts';
import { controlClientOf } from './runs.ts';
import { controlFailed } from '../engine/control-url.ts';
import { safeJson } from '../safe-json.ts';
import { oneLine } from '../one-line.ts';
import { list, obj } from '../untrusted.ts';

// test/unit/settings-registry.test.ts checks that serve's list names every variable serve reads.
export const HELP = `Usage:
  svc control serve [--host HOST] [--port PORT] [--db PATH]
  svc control status [--json]
  svc control import [DIR] [--json]

serve   Start the Control Plane (default 127.0.0.1:${47821}, DB ~/.svc/control/control.db).
        --port 0 binds a free port; the URL printed on stdout is the real one.
status  Report whether the Control Plane is reachable and how many runs it holds (exit 1 when unreachable).
import  Register the project DIR (default: the git work tree of the current directory) with the Control Plane on
        this machine, so it may start, resume, retry and verify runs there, and read the runs in DIR/.svc/runs
        (POST /v1/import). A run folder (DIR/.svc/runs/<run>), DIR/.svc/runs or DIR/.svc imports DIR. Exit 2
        when DIR is not a folder, or neither a git repository nor a folder with .svc/runs.

Environment of serve (the README's settings tables say what each does):
  SVC_CONTROL_HOST, SVC_CONTROL_PORT, SVC_CONTROL_DB, SVC_SOURCE, SVC_CONTROL_ANSWER_DIR
  SVC_CONTROL_TOKEN or SVC_CONTROL_TOKEN_FILE, SVC_CONTROL_RUNNER_TOKENS_FILE, SVC_CONTROL_ALLOW_INSECURE_BIND
  SVC_CONTROL_MAX_CONNECTIONS, SVC_CONTROL_MAX_CONNECTIONS_PER_PEER, SVC_CONTROL_MAX_STREAMS,
  SVC_CONTROL_MAX_STREAMS_PER_RUN, SVC_CONTROL_AUDIT_RETENTION_DAYS, SVC_ACCESS_LOG
  GITHUB_API_URL, and GITHUB_TOKEN or GH_TOKEN (the merge queue); the runs it starts read the run engine's too
Environment of status and import: SVC_CONTROL_URL (else ~/.svc/control/server.json, else SVC_CONTROL_PORT),
  SVC_CONTROL_TOKEN or SVC_CONTROL_TOKEN_FILE
`;

export default async function control(io: CliIo): Promise<number> {
  const parsed = subcommand(io, HELP, 'control', ['serve', 'status', 'import']);
  if (typeof parsed === 'number') return parsed;
  const { sub, rest } = parsed;
  if (sub === 'serve') {
    const flags = { host: { type: 'string' }, port: { type: 'string' }, db: { type: 'string' } } as const;
    const { values } = parseFlags(rest, flags, 0);
    const { resolveControlSettings } = await import('../control/settings.ts');
    const { serveControlForever } = await import('../control/main.ts');
    const settings = resolveControlSettings(io.env, values);
    const { serveOnFreePort } = await import('./dashboard.ts');
    return serveOnFreePort('control', settings, io.env, () => serveControlForever(settings, io.env, io.stdout));
  }
  if (sub === 'import') return controlImport(io, rest);
  return controlStatus(io, Boolean(parseFlags(rest, { json: { type: 'boolean' } }, 0).values.json));
}

/** POST /v1/import of DIR, made absolute here (the route takes only an absolute path). */
async function controlImport(io: CliIo, args: string[]): Promise<number> {
  const { values, positionals } = parseFlags(args, { json: { type: 'boolean' } }, 1);
  const given = positionals[0];
  // By default the work tree the current directory is in, whose .svc/runs svc start writes.
  const named = given === undefined ? (await import('../engine/git.ts')).repoRoot(process.cwd()) ?? process.cwd()
    : resolve(given);
  if (given === '' || !statSync(named, { throwIfNoEntry: false })?.isDirectory()) {
    throw new BadInputError(`Not imported: "${given}" is not a directory; give the project's folder`);
  }
  const dir = projectHolding(named);
  const found = controlClientOf(io.env);
  const { url, client, hasToken } = found;
  let result: Record<string, unknown>;
  try {
    result = await client.import(dir);
  } catch (err) {
    // A 400 refuses the one thing sent, the folder the person named (not a git repository, no runs): theirs to fix.
    if (err instanceof ControlApiError && err.status === 400) {
      throw new BadInputError(`Not imported: ${reason(err, found, hasToken)}`, { cause: err });
    }
    if (err instanceof ControlApiError && err.status >= 400 && err.status !== 401) {
      throw new FailedError(`Not imported: ${reason(err, found, hasToken)}`, { cause: err });
    }
    throw new UnavailableError(reason(err, found, hasToken), { cause: err });
  }
  if (values.json) {
    io.stdout(`${safeJson(result)}\n`);
    return 0;
  }
  // Events the runs shipped as they ran are there already: "0 events" alone read as if the import lost them.
  const there = Number(result.duplicates) > 0 ? ` (and ${Number(result.duplicates)} it already had)` : '';
  const counts = `${count(result.runs, 'run')}, ${count(result.events, 'event')}${there}, `
    + count(result.artifacts, 'artifact');
  const of = dir === named ? '' : ` (the project of ${named})`;
  io.stdout(`Imported ${dir}${of} into the Control Plane at ${url}: ${counts}; runs may now be started there\n`);
  for (const entry of list(result.skipped)) {
    io.stdout(`  skipped ${oneLine(String(obj(entry).entry))}: ${oneLine(String(obj(entry).reason))}\n`);
  }
  return 0;
}

/**
 * The project whose runs a folder holds: DIR itself, or for its `.svc`, `.svc/runs` or a run folder in it, the folder
 * above `.svc`. A run folder is what a user has at hand after a run (svc start prints its path), and the Control
 * Plane imports only whole projects, so the folder it lives in is what they mean.
 */
function projectHolding(dir: string): string {
  // Where it really is: a link to a run folder (a "latest run" link) names no `.svc` of its own.
  const real = realpathSync(dir);
  // A work tree's root is a project whatever its name: one called `.svc` is not its parent's engine folder.
  if (existsSync(join(real, '.git'))) return dir;
  const parts = real.split(sep);
  const at = parts.lastIndexOf('.svc');
  if (at <= 0 || (at + 1 < parts.length && parts[at + 1] !== 'runs')) return dir;
  return parts.slice(0, at).join(sep) || sep;
}

/** "1 run", "2 runs": a count as the Control Plane answered it, with its noun. */
function count(n: unknown, noun: string): string {
  return `${Number(n)} ${noun}${Number(n) === 1 ? '' : 's'}`;
}

function reason(err: unknown, found: { url: string; via: string }, hasToken: boolean): string {
  if (err instanceof ControlApiError) return controlFailed(err, found, hasToken);
  return `the Control Plane at ${found.url} gave an unexpected answer (${errorMessage(err)})`;
}

async function controlStatus(io: CliIo, json: boolean): Promise<number> {
  const found = controlClientOf(io.env);
  const { url, via, client, hasToken } = found;
  let runs: number;
  try {
    await client.health();
    const stats = await client.stats();
    runs = Number(stats.runs);
    if (!Number.isSafeInteger(runs)) throw new UnavailableError('/v1/stats has no run count');
  } catch (err) {
    const message = reason(err, found, hasToken);
    if (json) {
      io.stdout(`${safeJson({ reachable: false, url, via, error: message })}\n`);
      return 1;
    }
    throw new UnavailableError(message, { cause: err });
  }
  if (json) io.stdout(`${safeJson({ reachable: true, url, via, runs })}\n`);
  else io.stdout(`reachable ${url} — ${count(runs, 'run')}\n`);
  return 0;
}
