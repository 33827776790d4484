// `svc ship`: re-sends every local run (state, events not yet accepted, artifacts) to the Control Plane.
import { readdirSync, existsSync, lstatSync } from 'node:fs';
import type { CliIo } from './io.ts';
import { parseFlags, wantsHelp } from './io.ts';
import { FailedError } from '../errors.ts';
import { resolveRepo } from '../engine/launch.ts';
import { runsDir, runDir } from '../engine/paths.ts';
import { createShipper } from '../engine/shipper.ts';
import { rmSync } from 'node:fs';
import { join } from 'node:path';

const HELP = `Usage: svc ship [--repo DIR] [--all]

Sends the runs under <repo>/.svc/runs to the Control Plane (SVC_CONTROL_URL, else server.json, else
127.0.0.1:$SVC_CONTROL_PORT). Each run resumes from its ship.json offset; --all re-sends everything.
Token: SVC_CONTROL_TOKEN_FILE, ~/.svc/control/token, or SVC_CONTROL_TOKEN.
`;

export default async function ship(io: CliIo): Promise<number> {
  if (wantsHelp(io.argv)) {
    io.stdout(HELP);
    return 0;
  }
  const { values } = parseFlags(io.argv, { repo: { type: 'string' }, all: { type: 'boolean' } }, false);
  const repo = resolveRepo(values.repo ?? process.cwd());
  const dir = runsDir(repo);
  const runs = existsSync(dir) ? readdirSync(dir).sort() : [];
  let failed = 0;
  let url = '';
  for (const run of runs) {
    const rd = runDir(repo, run);
    const skipped = (entry: string, reason: string): void => {
      io.stderr(`svc ship: ${run}: ${entry} ${reason}; not shipped\n`);
    };
    // --all forgets the offsets; never through a linked run folder (the shipper refuses one and says so).
    const plain = lstatSync(rd, { throwIfNoEntry: false })?.isDirectory() ?? false;
    if (values.all && plain) rmSync(join(rd, 'ship.json'), { force: true });
    const shipper = createShipper(rd, io.env, undefined, skipped);
    url = shipper.url;
    if (!(await shipper.flush())) failed++;
  }
  if (failed > 0) throw new FailedError(`${failed} of ${runs.length} runs could not be sent to ${url}`);
  io.stdout(`Shipped ${runs.length} run${runs.length === 1 ? '' : 's'}${url ? ` to ${url}` : ''}\n`);
  return 0;
}
