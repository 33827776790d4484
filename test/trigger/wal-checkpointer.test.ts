// The WAL checkpointer (src/db/wal-checkpointer.ts), run by both servers: checkpoints leave the event loop for a
// worker thread, fall back to the main connection when the worker cannot run, and never put a non-JSON line into the
// server's stderr log.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openDatabase, type Db } from '../../src/db/open.ts';
import { triggerMigrations } from '../../src/db/trigger-migrations.ts';
import { createWalCheckpointer, BACKSTOP_PAGES } from '../../src/db/wal-checkpointer.ts';
import { createLogger, silentLogger } from '../../src/log.ts';
import { FAKE_SVC, SECRETS, makeRepo, post, tempDir } from './helpers.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { tempTriggerDbs } from './temp-dbs.ts';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
const temp = tempTriggerDbs('svc-wal-');

function autocheckpoint(db: Db): number {
  return (db.prepare('PRAGMA wal_autocheckpoint').get() as { wal_autocheckpoint: number }).wal_autocheckpoint;
}

describe('WAL checkpointer', () => {
  it('copies committed pages into the database file from a worker thread', async () => {
    const { db, path } = temp.open();
    const checkpointer = createWalCheckpointer({ db, path, log: silentLogger, intervalMs: 0 });
    try {
      const before = statSync(path).size;
      const insert = db.prepare("INSERT INTO jobs (id, origin, status, brief, args, created_at) VALUES (?, 'jobs', 'queued', ?, '[]', 0)");
      db.exec('BEGIN IMMEDIATE');
      for (let i = 0; i < 200; i++) insert.run(`j${i}`, 'x'.repeat(1000));
      db.exec('COMMIT');
      // Far below the backstop, so the main connection never checkpoints this itself.
      assert.equal(statSync(path).size, before);
      checkpointer.nudge();
      await waitFor(async () => (statSync(path).size > before + 100_000 ? true : null), 'the checkpoint');
    } finally {
      await checkpointer.close();
    }
  });

  it('falls back to checkpoints on the main connection when the worker cannot open the database', async () => {
    const { db } = temp.open();
    const warnings: string[] = [];
    const log = createLogger('test', (line) => void warnings.push((JSON.parse(line) as { msg: string }).msg));
    const gone = tempDir('svc-gone-');
    const checkpointer = createWalCheckpointer({ db, path: join(gone, 'missing', 'trigger.db'), log, intervalMs: 0 });
    try {
      assert.equal(autocheckpoint(db), BACKSTOP_PAGES);
      checkpointer.nudge();
      await waitFor(() => (warnings.includes('WAL checkpoints back on the main thread') ? true : null), 'the fallback');
      assert.equal(autocheckpoint(db), 1000);
    } finally {
      await checkpointer.close();
    }
  });

  it('does nothing for an in-memory database', async () => {
    const db = openDatabase(':memory:', triggerMigrations);
    temp.dbs.push(db);
    const checkpointer = createWalCheckpointer({ db, path: ':memory:', log: silentLogger });
    checkpointer.nudge();
    await checkpointer.close();
  });

  it('keeps the server stderr to JSON lines while its worker checkpoints', async () => {
    const home = tempDir('svc-home-');
    const repo = makeRepo();
    const env = { PATH: process.env.PATH, HOME: home, ...SECRETS, SVC_TRIGGER_CLI: FAKE_SVC };
    const child = spawn(process.execPath, [CLI, 'trigger', 'serve', '--port', '0', '--repo', repo], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      const url = await waitFor(() => /^(http:\/\/\S+)\n/.exec(out)?.[1], 'the URL');
      const db = join(home, '.svc', 'trigger', 'trigger.db');
      const before = statSync(db).size;
      for (let i = 0; i < 20; i++) await post(`${url}/jobs`, JSON.stringify({ brief: `checkpoint me ${i} ${'x'.repeat(3000)}` }), { authorization: `Bearer ${SECRETS.SVC_API_TOKEN}` });
      await waitFor(() => (statSync(db).size > before ? true : null), 'a checkpoint into the database file');
    } finally {
      child.kill('SIGTERM');
    }
    assert.equal(await exited, 0);
    const lines = err.split('\n').filter(Boolean);
    assert.ok(lines.length > 0);
    for (const line of lines) assert.doesNotThrow(() => JSON.parse(line), `not a JSON log line: ${line}`);
  });
});
