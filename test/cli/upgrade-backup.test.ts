// The operator procedures of docs/deploy.md "Operating svc", done as an operator would with the real `svc control
// serve`: an older database migrates itself at start, one from a newer svc is refused and left as it was, a failing
// migration changes nothing, and the documented online backup restores to a working Control Plane.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { openDatabase } from '../../src/db/open.ts';
import { controlMigrations } from '../../src/db/control-migrations.ts';
import { migrate, userVersion } from '../../src/db/open.ts';
import { runChild } from '../helpers/run-child.ts';
import { serve, stop, type Served } from '../helpers/serve-cli.ts';

const CLI = join(import.meta.dirname, '../../dist/cli.js');

describe('upgrading and backing up the Control Plane database', () => {
  let dir: string;
  let home: string;
  const env = () => ({ PATH: process.env.PATH ?? '', HOME: home });
  const servers: Served[] = [];

  async function start(db: string): Promise<Served> {
    const s = await serve(['control', 'serve', '--port', '0', '--db', db], env());
    servers.push(s);
    return s;
  }

  async function runsOf(url: string): Promise<string[]> {
    const body = (await (await fetch(`${url}/v1/runs`)).json()) as { items: Array<{ run: string }> };
    return body.items.map((r) => r.run);
  }

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-upgrade-'));
    home = join(dir, 'home');
    mkdirSync(home);
  });
  after(async () => {
    for (const s of servers) await stop(s);
    rmSync(dir, { recursive: true, force: true });
  });

  it('migrates a database an older svc wrote when it starts, keeping its runs', async () => {
    const path = join(dir, 'old.db');
    const old = openDatabase(path, controlMigrations.slice(0, 1));
    old.prepare("INSERT INTO runs (source, run, group_id, status, started_at, updated_at) VALUES ('local', 'rold', 'rold', 'succeeded', 1, 1)").run();
    old.close();
    const s = await start(path);
    assert.deepEqual(await runsOf(s.url), ['rold']);
    await stop(s);
    const db = new DatabaseSync(path);
    assert.equal(userVersion(db), controlMigrations.length);
    db.close();
  });

  it('refuses to start on a database a newer svc wrote, with exit 1, and leaves it as it was', async () => {
    const path = join(dir, 'newer.db');
    openDatabase(path, controlMigrations).close();
    const raw = new DatabaseSync(path);
    raw.exec(`PRAGMA user_version = ${controlMigrations.length + 1}`);
    raw.close();
    const r = await runChild(process.execPath, [CLI, 'control', 'serve', '--port', '0', '--db', path], { env: env() });
    assert.equal(r.code, 1);
    assert.match(r.stderr, new RegExp(`Database schema version ${controlMigrations.length + 1} is newer than this svc understands \\(${controlMigrations.length}\\); upgrade svc`));
    const after = new DatabaseSync(path);
    assert.equal(userVersion(after), controlMigrations.length + 1);
    after.close();
  });

  it('rolls back every pending migration when one of them fails', () => {
    const db = new DatabaseSync(join(dir, 'failing.db'));
    assert.throws(() => migrate(db, ['CREATE TABLE first_step (id INTEGER)', 'CREATE TABLE broken (']));
    assert.equal(userVersion(db), 0);
    assert.equal(db.prepare("SELECT count(*) AS n FROM sqlite_schema WHERE name = 'first_step'").get()!.n, 0);
    db.close();
  });

  it('restores the documented online backup (VACUUM INTO) after deleting the old -wal and -shm', async () => {
    const path = join(dir, 'live', 'control.db');
    mkdirSync(join(dir, 'live'));
    const s = await start(path);
    const now = new Date().toISOString();
    const ingest = await fetch(`${s.url}/v1/ingest`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ source: 'local', runs: [{ run: 'rkept', status: 'succeeded', started_at: now, updated_at: now }] }),
    });
    assert.equal(ingest.status, 200, await ingest.text());
    // While it serves, as docs/deploy.md shows it (node instead of the sqlite3 tool).
    const backup = join(dir, 'backup.db');
    const copy = await runChild(process.execPath, ['-e', `new (require('node:sqlite').DatabaseSync)(process.argv[1]).exec("VACUUM INTO '" + process.argv[2] + "'")`, path, backup], { env: env() });
    assert.equal(copy.code, 0, copy.stderr);
    const later = await fetch(`${s.url}/v1/ingest`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ source: 'local', runs: [{ run: 'rafter', status: 'failed', started_at: now, updated_at: now }] }),
    });
    assert.equal(later.status, 200);
    await stop(s);
    // Restore: move the file aside, delete any -wal and -shm, put the backup in its place.
    renameSync(path, `${path}.broken`);
    for (const extra of ['-wal', '-shm']) rmSync(`${path}${extra}`, { force: true });
    renameSync(backup, path);
    assert.equal(existsSync(`${path}-wal`), false);
    const again = await start(path);
    assert.deepEqual(await runsOf(again.url), ['rkept'], 'the run from before the backup, and not the later one');
  });
});
