// svc's git in a process group of its own, for a git that talks to a remote while a run's command may be stopped or
// signalled (a push): the group is reported as the run's child, so a stop or an end signal ends it and everything it
// started (a remote helper holding the connection, a local remote's receive-pack) as one. Must not: start git any
// other way than git.ts does (argv, environment, time limit, errors).
import { once } from 'node:events';
import { startChild } from '../spawn/start.ts';
import { gitArgv, gitBaseEnv, gitExtraEnv, gitError, gitTimeoutMs } from './git.ts';
import { terminateGroup } from './proc-group.ts';
import { identityOf, type ProcIdentity } from '../proc-stat.ts';

/** Who hears of the group: the run it works for (its SVC_RUN_ID, which run-context.ts isChildOf checks before a stop
 * signals it) and where it is recorded while it runs, null once it has ended (run-context.ts setChild). */
export interface GroupWatch {
  run: string;
  running(id: ProcIdentity | null): void;
}

/** How long git has after a SIGTERM at its time limit (it removes its lock files) before its group gets SIGKILL. */
const END_GRACE_MS = 2_000;
const OUTPUT_CAP = 1024 * 1024;

/** git `args` in `cwd`, its group reported to `watch` (if any) while it runs; its stdout, or git.ts gitError's
 * error. */
export async function gitInGroup(
  cwd: string, args: string[], extra: Record<string, string>, watch: GroupWatch | null,
): Promise<string> {
  // SVC_RUN_ID: what a stop from outside checks before it signals the group it finds recorded (isChildOf).
  const run: Record<string, string> = watch ? { SVC_RUN_ID: watch.run } : {};
  const child = startChild(gitArgv(args), {
    kind: 'tool', base: gitBaseEnv(process.env), extra: { ...gitExtraEnv(extra), ...run }, cwd, detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const out = { stdout: '', stderr: '' };
  for (const name of ['stdout', 'stderr'] as const) {
    child[name]!.setEncoding('utf8').on('data', (chunk: string) => {
      if (out[name].length < OUTPUT_CAP) out[name] += chunk;
    });
  }
  const closed = once(child, 'close') as Promise<[number | null, NodeJS.Signals | null]>;
  // No pid: the spawn failed, and `closed` rejects with its error.
  const id = child.pid ? identityOf(child.pid) : null;
  let timedOut = false;
  const timer = id && setTimeout(() => {
    timedOut = true;
    void terminateGroup(id, END_GRACE_MS);
  }, gitTimeoutMs(args));
  if (id) watch?.running(id);
  try {
    const [code] = await closed;
    if (code === 0) return out.stdout;
    throw gitError(cwd, args, { code: timedOut ? 'ETIMEDOUT' : code, stderr: out.stderr });
  } finally {
    if (timer) clearTimeout(timer);
    if (id) watch?.running(null);
  }
}
