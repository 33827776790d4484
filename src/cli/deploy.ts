// `svc deploy record|last`: deploy records under .svc/deploys/, read into error-tracker briefs; svc never deploys.
import { parseFlags, usageOf, type CliIo } from './io.ts';
import { UsageError, NotFoundError, FailedError, errorMessage } from '../errors.ts';
import { recordDeploy, latestDeployLine } from '../engine/deploys.ts';
import { resolveRepo } from '../engine/launch.ts';

export const HELP = `Usage: svc deploy record --sha SHA --health STATUS [--finished-at ISO] [--repo DIR]
       svc deploy last [--repo DIR]

record  writes .svc/deploys/<time>-<sha>.json with {sha, finished_at, health}; <time> is finished_at in UTC ISO-8601
        form, so the names sort by time
last    prints the newest of the last 100 records by name as "last deploy <sha7> <finished_at> health=<status>"
`;

/** Not being in a git repository is the machine's state, not a mistake in the command line: exit 1, not 2. */
function repoOrExit1(dir: string): string {
  try {
    return resolveRepo(dir);
  } catch (err) {
    throw new FailedError(errorMessage(err), { cause: err });
  }
}

export default async function deploy(io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(io.argv, {
    sha: { type: 'string' },
    health: { type: 'string' },
    'finished-at': { type: 'string' },
    repo: { type: 'string' },
  });
  const [sub, ...extra] = positionals;
  const { sha, health, 'finished-at': finishedAt } = values;
  if ((sub !== 'last' && sub !== 'record') || extra.length) {
    throw new UsageError(usageOf(HELP));
  }
  if (sub === 'record' && (!sha || !health)) throw new UsageError('record needs --sha and --health');
  const repo = repoOrExit1(values.repo ?? process.cwd());
  if (sub === 'last') {
    const line = await latestDeployLine(repo);
    if (!line) {
      throw new NotFoundError('No deploy records in .svc/deploys: ' +
        'svc deploy record --sha SHA --health STATUS writes one');
    }
    io.stdout(`${line}\n`);
    return 0;
  }
  // A malformed sha or time is recordDeploy's BadInputError (exit 2); a failed write is the machine's state (exit 1).
  const record = { sha: sha!, health: health!, ...(finishedAt ? { finished_at: finishedAt } : {}) };
  io.stdout(`${recordDeploy(repo, record)}\n`);
  return 0;
}
