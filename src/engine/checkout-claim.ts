// One launcher at a time checks that a checkout is free and writes its new run's state there (engine/launch.ts):
// without this two `svc start` at the same moment both found the checkout free and shared it, each signing the
// other's work. The claim is `.svc/runs/.checkout` (no run id starts with a dot), a folder put in place whole by
// rename, which never replaces a folder holding files, with its launcher's identity inside.
import { mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { RefusedError } from '../errors.ts';
import { obj, num, str, tryParseJson, type Obj } from '../untrusted.ts';
import { identityOf, procStart } from './proc-group.ts';
import { isPidAlive } from '../client/server-record.ts';
import { pathIn, type PlainDir } from './plain-tree.ts';
import { plainEngineFolder, withDir } from './safe-fs.ts';

const CLAIM = '.checkout';
/** Another launcher's check and first writes take milliseconds; one holding the claim this long is stuck. */
const WAIT_MS = 30_000;

function inRuns<T>(repo: string, use: (runs: PlainDir) => T): T {
  return withDir(plainEngineFolder(repo, 'runs'), use);
}

/** The claim's inode and whether its launcher still runs (the same pid with the same start time); null: no claim. */
function readClaim(runs: PlainDir): { inode: number; alive: boolean } | null {
  try {
    const inode = statSync(pathIn(runs, CLAIM)).ino;
    let owner: Obj = {};
    try {
      owner = obj(tryParseJson(readFileSync(pathIn(runs, `${CLAIM}/owner`), 'utf8')));
    } catch {
      // no readable owner: judged as a dead launcher's
    }
    const pid = num(owner.pid);
    const valid = Number.isSafeInteger(pid) && pid > 0;
    const started = valid ? procStart(pid) : null;
    // Without /proc (no start times) a live pid is taken as the launcher's.
    const alive = valid && (started === null ? isPidAlive(pid) : started === str(owner.proc_start));
    return statSync(pathIn(runs, CLAIM)).ino === inode ? { inode, alive } : readClaim(runs);
  } catch {
    return null;
  }
}

/**
 * Takes the checkout's claim, waiting while another live launcher holds it; returns its release. A claim whose
 * launcher died is moved aside to `.checkout-dead-<inode>` and kept: a second launcher that judged the same claim
 * dead then fails to move a fresh claim onto that name, as rename never replaces a folder holding files.
 */
export async function claimCheckout(repo: string): Promise<() => void> {
  const mine = `${CLAIM}-${process.pid}-${randomBytes(6).toString('hex')}`;
  inRuns(repo, (runs) => {
    mkdirSync(pathIn(runs, mine));
    writeFileSync(pathIn(runs, `${mine}/owner`), JSON.stringify(identityOf(process.pid)));
  });
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const taken = inRuns(repo, (runs) => {
      try {
        renameSync(pathIn(runs, mine), pathIn(runs, CLAIM));
        return true;
      } catch {
        const held = readClaim(runs);
        if (held && !held.alive) {
          try {
            renameSync(pathIn(runs, CLAIM), pathIn(runs, `${CLAIM}-dead-${held.inode}`));
          } catch {
            // another launcher moved it first
          }
        }
        return false;
      }
    });
    if (taken) break;
    if (Date.now() > deadline) {
      inRuns(repo, (runs) => rmSync(pathIn(runs, mine), { recursive: true, force: true }));
      throw new RefusedError('Another svc start has been claiming this checkout for 30 s; try again ' +
        '(nothing was started)');
    }
    await sleep(20);
  }
  return () => inRuns(repo, (runs) => {
    renameSync(pathIn(runs, CLAIM), pathIn(runs, mine));
    rmSync(pathIn(runs, mine), { recursive: true, force: true });
  });
}
