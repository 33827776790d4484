// A Control Plane launcher killed by a signal (out of memory, a kill) fails its run naming the signal, not "code null".
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createRunController } from '../../src/control/run-controller.ts';
import { createLogger } from '../../src/log.ts';
import { memoryControlStores } from '../helpers/memory-stores.ts';

/** The pid of the process whose command line holds `marker`, once there is one. */
async function pidWith(marker: string): Promise<number> {
  for (;;) {
    for (const name of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
      try {
        if (readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').includes(marker)) return Number(name);
      } catch {
        // gone meanwhile
      }
    }
    await sleep(20);
  }
}

describe('a launcher killed by a signal', () => {
  it('fails its run saying which signal killed it', async () => {
    const home = mkdtempSync(join(tmpdir(), 'svc-launcher-'));
    const { db: controlDb, stores } = memoryControlStores();
    try {
      const run = 'r20261129120000cccccccc';
      stores.runs.upsert('local', { run, status: 'queued', started_at: Date.now(), repo_path: home });
      const controller = createRunController({
        db: controlDb, stores, bus: { publish: () => {} }, settings: { source: 'local', answerDir: home, token: 't' },
        env: { HOME: home }, clock: Date.now, log: createLogger('test', () => {}), url: () => 'http://127.0.0.1:1',
      });
      // A launcher that stays at work (a server of its own, in a HOME of its own) until it is killed.
      const db = join(home, 'launcher.db');
      controller.launch('local', run, ['control', 'serve', '--port', '0', '--db', db], 'fail-run');
      process.kill(await pidWith(db), 'SIGKILL');
      await controller.close();
      const row = stores.runs.get('local', run);
      assert.equal(row?.status, 'failed');
      assert.equal(row?.error, 'svc start was killed by SIGKILL');
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});
