// Owner checks for pids read back from a run folder: is this live process our worker (or its provider/check) for that
// run?
// state.json is writable by whoever can write the project, so a recorded pid alone never justifies a signal.
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { procList } from '../spawn/tree.ts';

function real(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

// The CLI of this install, whether it runs from the sources (src/cli.ts) or the build (dist/cli.js).
const CLI_PATHS = new Set(
  ['../cli.ts', '../cli.js', '../../src/cli.ts', '../../dist/cli.js']
    .map((rel) => real(fileURLToPath(new URL(rel, import.meta.url)))),
);

/** The worker argv is `node <cli> worker <mode> --run-id <run> --repo <repo>` (engine/launch.ts spawnWorker). */
export function isWorkerOf(run: string): (pid: number) => boolean {
  return (pid) => {
    const argv = procList(pid, 'cmdline');
    if (!argv) return false;
    const cli = argv.findIndex((a) => /cli\.[jt]s$/.test(a) && CLI_PATHS.has(real(a)));
    const at = argv.indexOf('--run-id');
    return cli !== -1 && argv[cli + 1] === 'worker' && at !== -1 && argv[at + 1] === run;
  };
}

/** Providers and checks are started with SVC_RUN_ID=<run> in their environment (provider-phase.ts, finish-phase.ts). */
export function isChildOf(run: string): (pid: number) => boolean {
  return (pid) => procList(pid, 'environ')?.includes(`SVC_RUN_ID=${run}`) ?? false;
}
