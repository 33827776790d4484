// Where svc keeps its own things (its home, a scratch folder for one call), where its CLI is and where a program is:
// one home for these, so every process svc starts, and every sandbox that must not show them, agrees on the paths.
import { accessSync, constants, lstatSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { delimiter, isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { holderAlive, procStart } from '../proc-stat.ts';
import { orNull } from './tree.ts';

export function homeOf(env: NodeJS.ProcessEnv): string {
  return env.HOME || homedir();
}

/** svc's home, `~/.svc`: keys, tokens, databases, answers, handoff files. Never mounted into a sandbox. */
export function svcHomeOf(env: NodeJS.ProcessEnv): string {
  return join(homeOf(env), '.svc');
}

/** The CLI of this install: dist/cli.js when built, src/cli.ts when run from the sources. */
export function svcCliPath(): string {
  return fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? '../cli.ts' : '../cli.js', import.meta.url));
}

// The scratch folders of calls not yet settled. A process.exit meanwhile (a signal's end of a worker or an --open-pr
// while its push runs: run-context.ts exitNow) runs no `finally`, so the exit itself removes them.
const scratches = new Set<string>();
let removedAtExit = false;

/** A scratch folder's name: `svc-<prefix>-<pid>.<start time, empty without /proc>-<mkdtemp's six>` of its maker. */
const SCRATCH_NAME = /^svc-[a-z-]+-([1-9][0-9]{0,9})\.([0-9]*)-[A-Za-z0-9]{6}$/;

/** Runs `body` with a fresh private folder `svc-<prefix>-…` that is removed afterwards (once a promise settles, or
 * at the process's exit before then). */
export function withScratch<T>(prefix: string, body: (dir: string) => T): T {
  removeOrphans(tmpdir());
  const dir = mkdtempSync(join(tmpdir(), `svc-${prefix}-${process.pid}.${procStart(process.pid) ?? ''}-`));
  scratches.add(dir);
  if (!removedAtExit) {
    removedAtExit = true;
    process.on('exit', () => {
      for (const left of scratches) {
        // An exit is no place to fail: what cannot be removed stays.
        orNull(() => rmSync(left, { recursive: true, force: true }));
      }
    });
  }
  const remove = () => {
    scratches.delete(dir);
    rmSync(dir, { recursive: true, force: true });
  };
  let out: T;
  try {
    out = body(dir);
  } catch (err) {
    remove();
    throw err;
  }
  if (out instanceof Promise) return out.finally(remove) as T;
  remove();
  return out;
}

/**
 * A SIGKILLed process removes nothing, so each call removes the scratch folders of makers that are gone (the pid and
 * start time in the name, judged as the take lock's holder is). A live maker's stays; only svc's own user's folders,
 * never a link (lstat; rmSync removes links inside a folder, never what they point to).
 */
function removeOrphans(temp: string): void {
  for (const name of orNull(() => readdirSync(temp)) ?? []) {
    const maker = SCRATCH_NAME.exec(name);
    if (!maker || holderAlive({ pid: Number(maker[1]), proc_start: maker[2] || null })) continue;
    const st = lstatSync(join(temp, name), { throwIfNoEntry: false });
    // Gone meanwhile, or not removable: it is no call's to fail.
    if (st?.isDirectory() && st.uid === process.getuid?.()) orNull(() => rmSync(join(temp, name), { recursive: true }));
  }
}

/** A program on PATH, found without a shell, so "missing provider" can say exactly where it looked. */
export function which(command: string, pathVar: string | undefined): string | null {
  if (command.includes('/')) {
    return isExecutable(command) ? command : null;
  }
  for (const dir of (pathVar ?? '').split(delimiter)) {
    if (!dir || !isAbsolute(dir)) continue;
    const candidate = join(dir, command);
    if (isExecutable(candidate)) return candidate;
  }
  return null;
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}
