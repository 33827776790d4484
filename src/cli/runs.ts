// `svc runs`: lists and steers runs through the typed client; `logs` reads a run of this project from its folder.
import { hash } from 'node:crypto';
import { parseFlags, type CliIo } from './io.ts';
import { BadInputError, UsageError, FailedError, NotFoundError } from '../errors.ts';
import { createControlClient, ControlApiError, type ControlClient } from '../client/client.ts';
import { controlFailed, controlToken, discoverControlUrl } from '../engine/control-url.ts';
import type { Run, RunFilter, RunRef } from '../client/types.ts';
import { FAILURE_CLASSES, RUN_STATUSES, VERDICTS, type Verdict } from '../run-json.ts';
import { formatRunDetails, formatRunTable, KEY_WIDTH, networkLine, runLabel } from './runs-format.ts';
import { sendPendingRuns } from './ship.ts';
import { safeJson } from '../safe-json.ts';
import { oneLine, shownValue } from '../one-line.ts';
import { obj, objOrNull, oneOf, str, tryParseJson } from '../untrusted.ts';
import { isValidSegment } from '../engine/ids.ts';
import { timeMs } from '../iso-time.ts';
import { SETTINGS } from '../settings-registry.ts';
import { findLocalRun, printLocalLogs, printControlLogs, waitForRun } from './run-logs.ts';

export const HELP = `Usage:
  svc runs [list] [--verdict V] [--status S] [--failure F] [--repo R] [--group ID] [--since T]
                  [--until T] [--limit N] [--cursor C] [--json]
  svc runs show <source>/<run> [--json]
  svc runs stop|resume|retry|verify <source>/<run> [--json]
  svc runs pr <source>/<run> [--json]   open the PR of a --pr run whose verified work could not be opened then
  svc runs answer <source>/<run> <answer text…> [--json]
  svc runs logs <source>/<run> [-f|--follow]

A run may be given as <run> alone; its source is then SVC_SOURCE (default "local").
--verdict   verified | verified_with_gaps | not_verified | none (no verdict yet)
--status    queued | running | blocked | stopping | succeeded | failed | stopped
--failure   infra | config | agent | checks | policy | budget | limit | stopped (why a run did not succeed)
--since, --until   ISO-8601 time or unix ms
--json      print the API's JSON instead of a table
logs        the agent's output (its stdout and stderr lines; svc's own notes start with "[svc]"), from
            the run's folder when this project holds the run, else from the Control Plane; -f keeps
            printing until the run ends. The full provider output is the run's provider.log artifact.
--url URL   Control Plane address (default: SVC_CONTROL_URL, ~/.svc/control/server.json, then
            http://127.0.0.1:\${SVC_CONTROL_PORT:-47821}). Token: SVC_CONTROL_TOKEN_FILE,
            ~/.svc/control/token (a loopback address only), or SVC_CONTROL_TOKEN.
`;

const FLAGS = {
  json: { type: 'boolean' },
  follow: { type: 'boolean', short: 'f' },
  url: { type: 'string' },
  verdict: { type: 'string' },
  status: { type: 'string' },
  failure: { type: 'string' },
  repo: { type: 'string' },
  group: { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
} as const;

const ACTIONS = ['stop', 'resume', 'retry', 'verify', 'pr'] as const;

/** The Control Plane a command talks to: `url`, else the one found as DESIGN §4 says; the token as the shipper's. */
export function controlClientOf(env: NodeJS.ProcessEnv, url?: string) {
  // The rule SVC_CONTROL_URL is held to: a malformed address is the person's to fix (exit 2), not an unreachable one.
  const [shape, said] = SETTINGS.SVC_CONTROL_URL.pattern;
  if (url !== undefined && !shape.test(url)) throw new UsageError(`--url must be ${said} (got "${shownValue(url)}")`);
  const found = url ? { url: url.trim(), via: '--url' as const } : discoverControlUrl(env);
  const { token } = controlToken(env, found);
  const client = createControlClient({ url: found.url, token, timeoutMs: 10_000 });
  return { ...found, client, hasToken: token !== undefined };
}

/**
 * A Control Plane error answer as the error a command exits with: a 400 refuses what the person typed (a cursor, a
 * filter, an answer), theirs to fix (exit 2, as `svc control import` says it); any other answer fails it (exit 1).
 */
function controlFailure(err: unknown, found: { url: string; via: string }, hasToken: boolean): unknown {
  if (!(err instanceof ControlApiError)) return err;
  const Failure = err.status === 400 ? BadInputError : FailedError;
  return new Failure(controlFailed(err, found, hasToken), { cause: err });
}

/** A run this project does not hold, asked of the Control Plane: not found when it does not know it either. */
export function notFoundAnywhere(
  err: unknown, ref: RunRef, found: { url: string; via: string; hasToken: boolean }, hint = '',
): unknown {
  if (!(err instanceof ControlApiError) || (err.code !== 'not_found' && err.code !== 'unreachable')) {
    return controlFailure(err, found, found.hasToken);
  }
  const there = err.code === 'not_found' ? `the Control Plane at ${found.url} does not know it`
    : controlFailed(err, found, found.hasToken);
  const run = `${ref.source}/${ref.run}`;
  const message = `No run ${run}: it is not in this project's .svc/runs/${hint}, and ${there}`;
  return new NotFoundError(message, { cause: err });
}

export function parseRunRef(text: string | undefined, env: NodeJS.ProcessEnv): RunRef {
  if (!text) throw new UsageError('Missing run: give <source>/<run>');
  const parts = text.split('/');
  const [source, run] = parts.length === 1 ? [env.SVC_SOURCE || 'local', parts[0]] : parts;
  if (parts.length > 2 || !isValidSegment(source) || !isValidSegment(run)) {
    throw new UsageError(`Invalid run "${text}": expected <source>/<run>`);
  }
  return { source, run };
}

type FlagValues = ReturnType<typeof parseFlags<typeof FLAGS>>['values'];

/** Flags that only `list` takes. */
const LIST_FLAGS = ['verdict', 'status', 'failure', 'repo', 'group', 'since', 'until', 'limit', 'cursor'] as const;

/** The filter the flags give; a flag not given stays undefined, which the client leaves out of the query. */
function listFilter(values: FlagValues): RunFilter {
  const choice = <T extends string>(flag: 'verdict' | 'status' | 'failure', allowed: readonly T[]): T | undefined => {
    const value = values[flag];
    if (value === undefined || oneOf(value, allowed) !== null) return value as T | undefined;
    throw new UsageError(`Invalid --${flag} "${value}" (expected ${allowed.join(', ')})`);
  };
  const { limit } = values;
  if (limit !== undefined && !/^[1-9]\d*$/.test(limit)) {
    throw new UsageError(`Invalid --limit "${limit}" (expected a positive integer)`);
  }
  for (const flag of ['since', 'until'] as const) {
    const value = values[flag];
    if (value !== undefined && timeMs(value) === null) {
      throw new UsageError(`Invalid --${flag} "${value}" (expected an ISO-8601 time or unix ms)`);
    }
  }
  return {
    verdict: choice<Verdict | 'none'>('verdict', [...VERDICTS, 'none']),
    status: choice('status', RUN_STATUSES),
    failure: choice('failure', FAILURE_CLASSES),
    limit: limit === undefined ? undefined : Number(limit),
    repo: values.repo, group_id: values.group, since: values.since, until: values.until, cursor: values.cursor,
  };
}

type FoundClient = ReturnType<typeof controlClientOf>;

/** `sendPending` runs once the command line is found good, before the first request: a usage error sends nothing. */
async function dispatch(
  io: CliIo, found: FoundClient, sub: string, positionals: string[], values: FlagValues,
  sendPending: () => Promise<void>,
): Promise<number> {
  const { client } = found;
  const json = values.json === true;
  const print = (value: unknown, text = '') => io.stdout(json ? `${safeJson(value, 2)}\n` : text);
  if (sub === 'list') {
    if (positionals.length) throw new UsageError(`Unexpected argument "${positionals[0]}"`);
    const filter = listFilter(values);
    await sendPending();
    const page = await client.listRuns(filter);
    print(page, formatRunTable(page.items));
    const more = page.next_cursor ? oneLine(String(page.next_cursor)) : '';
    if (!json && more) io.stderr(`More runs: svc runs list --cursor ${more}\n`);
    return 0;
  }
  // An unknown word is named as one before a run is looked for, not taken for a subcommand whose run is missing.
  const action = oneOf(sub, ACTIONS);
  if (action === null && oneOf(sub, ['show', 'answer', 'logs'] as const) === null) {
    const expected = 'list, show, stop, resume, retry, verify, pr, answer or logs';
    throw new UsageError(`Unknown subcommand "runs ${sub}" (expected ${expected})`);
  }
  const listOnly = LIST_FLAGS.find((k) => values[k] !== undefined);
  if (listOnly) throw new UsageError(`--${listOnly} only applies to "svc runs list"`);
  const ref = parseRunRef(positionals[0], io.env);
  if (values.follow !== undefined && sub !== 'logs') throw new UsageError('--follow only applies to "svc runs logs"');
  if (sub !== 'answer' && positionals.length > 1) throw new UsageError(`Unexpected argument "${positionals[1]}"`);
  if (sub === 'logs' && json) throw new UsageError('--json does not apply to "svc runs logs"');
  const answer = positionals.slice(1).join(' ').trim();
  if (sub === 'answer' && !answer) {
    throw new UsageError('Missing answer text: svc runs answer <source>/<run> <answer text…>');
  }
  await sendPending();
  if (sub === 'logs') {
    const follow = values.follow === true;
    const local = findLocalRun(process.cwd(), positionals[0]!.includes('/') ? ref.source : null, ref.run);
    let printed = 0;
    const out = (line: string) => {
      printed++;
      io.stdout(line);
    };
    if (local) await printLocalLogs(local.dir, out, { follow });
    else {
      try {
        if (follow) await waitForRun(client, ref, io.stderr);
        await printControlLogs(client, ref, out, follow);
      } catch (err) {
        throw notFoundAnywhere(err, ref, found);
      }
    }
    // Silence would read as a hang or a wrong id: say that the run is known and simply has nothing to show (it may
    // have events, a cost say, that are no output). A bare id found here is named by the source its folder holds.
    if (printed === 0) io.stderr(`${local?.state.source ?? ref.source}/${ref.run} has no output to show\n`);
    return 0;
  }
  if (sub === 'show') {
    const run = await client.getRun(ref);
    if (json) print(run);
    else io.stdout(formatRunDetails(run) + (await networkOf(client, ref, run)));
    return 0;
  }
  if (sub === 'answer') {
    print(await client.answer(ref, answer), `Answered ${ref.source}/${ref.run}\n`);
    return 0;
  }
  const run = await client[action!](ref);
  if (json) print(run);
  else if (sub === 'retry' && run?.run) io.stdout(`Retrying ${ref.source}/${ref.run} as ${runLabel(run)}\n`);
  else if (sub === 'pr') io.stdout(`Pull request requested for ${ref.source}/${ref.run}\n`);
  else io.stdout(`${sub[0]!.toUpperCase()}${sub.slice(1)} requested for ${ref.source}/${ref.run}\n`);
  return 0;
}

export default async function runs(io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(io.argv, FLAGS);
  const [first, ...rest] = positionals;
  const sub = first === undefined || first === 'list' ? 'list' : first;
  const found = controlClientOf(io.env, values.url);
  const sendPending = () => (values.url === undefined ? sendPendingRuns(io, process.cwd()) : Promise.resolve());
  try {
    return await dispatch(io, found, sub, rest, values, sendPending);
  } catch (err) {
    throw controlFailure(err, found, found.hasToken);
  }
}

/** The receipt's network line for `svc runs show`, padded like the other fields; '' when there is none, or when the
 * Control Plane did not verify its signature (`receipt_check`: whoever shipped the run wrote the file), or the bytes
 * fetched are not the ones it checked (`receipt_check.sha256`: the file may be replaced between the two requests). */
async function networkOf(client: ControlClient, ref: RunRef, run: Run): Promise<string> {
  const check = obj(run.receipt_check);
  if (objOrNull(check.signed_by) === null) return '';
  const receipt = await client.artifact(ref, 'receipt.json').catch(() => null);
  if (!receipt || hash('sha256', receipt.body, 'hex') !== str(check.sha256)) return '';
  const line = networkLine(tryParseJson(new TextDecoder().decode(receipt.body)));
  return line === null ? '' : `${'network'.padEnd(KEY_WIDTH)}${line}\n`;
}
