// A source added to src/webhook-sources.ts after the queue-shares migration gets its queued count without a migration
// of its own: the server gives every origin of the source table a queued_by_origin row at start.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { openDatabase } from '../../src/db/open.ts';
import { triggerMigrations } from '../../src/db/trigger-migrations.ts';
import { createTriggerStores } from '../../src/db/trigger-stores.ts';
import { SOURCE_NAMES } from '../../src/webhook-sources.ts';
import { insertJob, tempDir } from './helpers.ts';

function job(id: string, origin: string) {
  return { id, origin, repo: 'acme/api', brief: 'b', args: ['start'], created_at: 1 };
}

describe('queued counts per origin', () => {
  it('counts an origin no migration seeded from its first queued job on, once the server names it', () => {
    const dir = tempDir('svc-origins-');
    const db = openDatabase(join(dir, 'trigger.db'), triggerMigrations);
    try {
      const stores = createTriggerStores(db);
      insertJob(stores, job('j1', 'newsource'));
      assert.equal(stores.jobs.queuedByOrigin().get('newsource'), undefined, 'no row: the migration never knew it');
      stores.jobs.countOrigins(['newsource']);
      assert.equal(stores.jobs.queuedByOrigin().get('newsource'), 1, 'the row counts the job already queued');
      insertJob(stores, job('j2', 'newsource'));
      stores.jobs.countOrigins(['newsource']);
      assert.equal(stores.jobs.queuedByOrigin().get('newsource'), 2, 'kept by the triggers, not counted twice');
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('leaves the rows of the seeded origins as they are', () => {
    const dir = tempDir('svc-origins-');
    const db = openDatabase(join(dir, 'trigger.db'), triggerMigrations);
    try {
      const stores = createTriggerStores(db);
      insertJob(stores, job('j1', 'trackerb'));
      stores.jobs.countOrigins(SOURCE_NAMES);
      assert.deepEqual([...stores.jobs.queuedByOrigin()], [['trackerb', 1]]);
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
