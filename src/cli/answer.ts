// `svc answer`: a run of this project gets the answer file it waits for, any other one goes through the Control Plane;
// a run neither knows is an error (exit 1), never a stray file that nothing will read.
import { resolve } from 'node:path';
import { parseFlags, type CliIo } from './io.ts';
import { UsageError, ConflictError, NotFoundError } from '../errors.ts';
import {
  answerDirOf, writeAnswer, isOriginName, MAX_ANSWER_BYTES, ORIGIN_REFUSAL_LINE, type OriginRefusal,
} from '../engine/answers.ts';
import { ControlApiError } from '../client/client.ts';
import { findLocalRun } from './run-logs.ts';
import { oneLine } from '../one-line.ts';
import { controlClientOf, notFoundAnywhere, parseRunRef } from './runs.ts';

export const HELP = `Usage: svc answer [<source>/]<run> <text> [--repo DIR] [--origin WHO]

Answers a blocked run. The run is named as "svc runs" takes it: <source>/<run>, or <run>
alone (in the project: its run of that id; on the Control Plane: $SVC_SOURCE/<run>, default
"local"). When the run is in DIR's .svc/runs/ (default: the current
project), writes $SVC_CONTROL_ANSWER_DIR/<source>/<run>.json (default
~/.svc/control/answers), which the run picks up and continues with. Otherwise the
answer goes through the Control Plane (SVC_CONTROL_URL, SVC_CONTROL_TOKEN).

--origin WHO  the answer was given where the job was asked (the trigger server relays
              it so: WHO is e.g. webhook:octocat); it is recorded as origin:WHO and
              cannot raise the operator's daily budget caps. Without it the answer is
              the operator's ("cli", or through the Control Plane its token's). With it,
              a failure also prints one line on stdout, "origin-refusal: <why>" (why:
              not_blocked, unknown_run, unreachable or failed).

Exits 1 when the run is not blocked, or when neither the project nor the Control
Plane knows it.
`;

function notBlocked(source: string, run: string, status: string): ConflictError {
  return new ConflictError(`Run ${source}/${run} is ${status}, not blocked: nothing to answer`);
}

async function answerThroughControl(
  io: CliIo, source: string, run: string, text: string, origin: string | undefined,
): Promise<number> {
  const control = controlClientOf(io.env);
  const { url, client } = control;
  try {
    const found = await client.getRun({ source, run });
    if (found.status !== 'blocked') throw notBlocked(source, run, oneLine(String(found.status)));
    await client.answer({ source, run }, text, origin);
  } catch (err) {
    throw notFoundAnywhere(err, { source, run }, control, ' (use --repo DIR)');
  }
  io.stdout(`Answered ${source}/${run} through the Control Plane at ${url}\n`);
  return 0;
}

export default async function answer(io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(io.argv, { repo: { type: 'string' }, origin: { type: 'string' } });
  const [given, ...words] = positionals;
  const { source, run } = parseRunRef(given, io.env);
  const bare = given !== undefined && !given.includes('/');
  const text = words.join(' ').trim();
  if (!text) throw new UsageError('Give the answer text after the run');
  if (Buffer.byteLength(text) > MAX_ANSWER_BYTES) {
    throw new UsageError(`The answer is longer than ${MAX_ANSWER_BYTES} bytes`);
  }
  const origin = values.origin;
  if (origin !== undefined && !isOriginName(origin)) {
    throw new UsageError('--origin must be 1 to 200 characters without control characters');
  }
  const dir = resolve(typeof values.repo === 'string' ? values.repo : process.cwd());
  try {
    const state = findLocalRun(dir, bare ? null : source, run)?.state;
    if (!state) return await answerThroughControl(io, source, run, text, origin);
    if (state.status !== 'blocked') throw notBlocked(state.source, run, state.status);
    const by = origin === undefined ? 'cli' : `origin:${origin}`;
    const path = writeAnswer(answerDirOf(io.env), state.source, run, text, by);
    io.stdout(`Answer written to ${path}\n`);
    return 0;
  } catch (err) {
    // For the trigger server, which tells the origin only a fixed text for it (the message stays on stderr).
    if (origin !== undefined) io.stdout(`${ORIGIN_REFUSAL_LINE}${originRefusalOf(err)}\n`);
    throw err;
  }
}

/** What an origin is told (ORIGIN_REFUSALS) of the error an answer ended with. */
function originRefusalOf(err: unknown): OriginRefusal {
  if (err instanceof ConflictError) return 'not_blocked';
  if (!(err instanceof NotFoundError)) return 'failed';
  return err.cause instanceof ControlApiError && err.cause.code === 'unreachable' ? 'unreachable' : 'unknown_run';
}
