// The worker's handle on one run: state rewrites, events, artifacts, stop requests and shipping, in one place.
import { join, dirname, basename } from 'node:path';
import { createHash } from 'node:crypto';
import { openEventLog, readState, writeState, type RunState } from './run-state.ts';
import type { RunStatus } from '../run-json.ts';
import { artifactsDir } from './paths.ts';
import { terminateGroup, type ProcIdentity } from './proc-group.ts';
import { createShipper, type ControlItem } from './shipper.ts';
import { createShipLoop } from './ship-loop.ts';
import { takeAnswer, answerOf, type Answer } from './answers.ts';
import { plainSubdir, writeNoFollow } from './safe-fs.ts';

export const STOP_GRACE_MS = 5_000;

export type RunContext = ReturnType<typeof openRunContext>;

export function openRunContext(
  dir: string, env: NodeJS.ProcessEnv, opts: { ship: boolean; say?: (t: string) => void },
) {
  const state = readState(dir);
  let stopping = false;
  let stoppedBy = '';
  // Only a child this process started: state.child may still be what state.json said (untrusted) at start.
  let child: ProcIdentity | null = null;

  // Requests the Control Plane could not deliver on disk come in this run's own ingest responses.
  const answers: Answer[] = [];
  function onControl(item: ControlItem): void {
    if (item.run !== state.run) return;
    if (item.action === 'stop') ctx.requestStop('a stop request through the Control Plane');
    if (item.action === 'answer' && typeof item.answer === 'string') answers.push(answerOf(item.answer, item.by));
  }

  // A linked file or folder the shipper left out is said once, in the run's log and to whoever watches the worker.
  function onSkip(entry: string, reason: string): void {
    const text = `not shipped: ${entry} ${reason}`;
    ctx.say(text);
    try {
      ctx.event('log', { stream: 'svc', text });
    } catch {
      // events.jsonl itself may be what was refused; the line above still reached worker.log.
    }
  }

  const shipping = opts.ship
    ? createShipLoop(createShipper(dir, env, onControl, onSkip), dir, (text) => ctx.say(text))
    : null;
  const markDirty = () => shipping?.changed();
  const log = openEventLog(dir, markDirty);

  const ctx = {
    dir,
    state,
    env,
    update(fields: Partial<RunState>): void {
      Object.assign(state, fields, { updated_at: new Date().toISOString() });
      writeState(dir, state);
      markDirty();
    },
    setStatus(to: RunStatus, fields: Partial<RunState> = {}): void {
      const from = state.status;
      ctx.update({ ...fields, status: to });
      if (from !== to) {
        ctx.event('run.status', { from, to });
        ctx.say(`status ${to}${fields.error ? `: ${fields.error}` : ''}`);
      }
    },
    event(kind: string, data: Record<string, unknown> = {}): void {
      log.append(kind, data);
    },
    saveArtifact(path: string, content: string | Buffer): void {
      // Every folder level and the file itself are checked: no symbolic link planted under artifacts/ is followed.
      plainSubdir(dir, 'artifacts');
      writeNoFollow(join(plainSubdir(artifactsDir(dir), dirname(path)), basename(path)), content);
      const bytes = Buffer.isBuffer(content) ? content : Buffer.from(content);
      ctx.event('artifact', { path, size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') });
    },
    /** The provider or check now running (its own process group), so a stop can reach it. */
    setChild(identity: ProcIdentity | null): void {
      child = identity;
      ctx.update({ child: identity });
    },
    requestStop(reason: string): void {
      if (stopping) return;
      stopping = true;
      stoppedBy = reason;
      ctx.say(`stopping: ${reason}`);
      if (child) void terminateGroup(child, STOP_GRACE_MS);
    },
    stopRequested: (): boolean => stopping,
    /** Who asked for the stop, as requestStop was told ('' before any). */
    stoppedBy: (): string => stoppedBy,
    /** The answer waiting for the blocked run, by whichever one channel it came (docs/architecture.md, "Channels"). */
    takeAnswer: (): Answer | null => answers.shift() ?? takeAnswer(env, state.source, state.run, dir),
    /** Progress lines for whoever watches the worker (terminal or worker.log). */
    say(text: string): void {
      opts.say?.(`[svc ${state.run}] ${text}\n`);
    },
    /** A line of svc's own in the run's log (with any further fields), also said to whoever watches the worker. */
    note(text: string, fields: Record<string, unknown> = {}): void {
      ctx.event('log', { stream: 'svc', text, ...fields });
      ctx.say(text);
    },
    async close(): Promise<void> {
      await shipping?.close();
    },
  };
  return ctx;
}
