// `svc worker MODE --run-id RUN --repo REPO`, not listed in the help: the process a run's launcher (`svc start`) starts
// detached, in a process group of its own, to do the run by the plan the launcher wrote (src/engine/worker.ts).
import { parseFlags, type CliIo } from './io.ts';
import { UsageError } from '../errors.ts';
import { executeRun } from '../engine/worker.ts';
import { runDir } from '../engine/paths.ts';
import { isValidSegment } from '../engine/ids.ts';
import type { WorkerMode } from '../engine/run-state.ts';

export default async function worker(io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(io.argv, { 'run-id': { type: 'string' }, repo: { type: 'string' } });
  const mode = positionals[0] as WorkerMode;
  if (!['start', 'resume', 'verify'].includes(mode)) throw new UsageError(`Unknown worker mode "${mode}"`);
  const run = values['run-id'];
  if (!isValidSegment(run) || !values.repo) throw new UsageError('svc worker needs --run-id RUN and --repo DIR');
  return executeRun(runDir(values.repo, run), io.env, mode, io.stderr);
}
