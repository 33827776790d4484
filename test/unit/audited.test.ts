import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { audited } from '../../src/control/audited.ts';
import { ConflictError, FailedError } from '../../src/errors.ts';
import { HttpError } from '../../src/http/http-error.ts';
import { silentLogger } from '../../src/log.ts';
import type { AuditInput } from '../../src/db/audit-store.ts';
import type { Ctx } from '../../src/http/pipeline.ts';
import type { ControlDeps } from '../../src/control/deps.ts';

function ctxFor(rows: AuditInput[]): Ctx<ControlDeps> {
  const deps = { settings: { token: null }, stores: { audit: { append: (row: AuditInput) => rows.push(row) } }, log: silentLogger };
  return {
    req: { headers: {} }, params: { source: 'local', run: 'r1' }, query: new URLSearchParams(), body: undefined,
    peer: '127.0.0.1', requestId: 'req-1', runner: undefined, deps,
  } as unknown as Ctx<ControlDeps>;
}

describe('audited', () => {
  it('records a thrown refusal by the code and status the pipeline answers it with, a typed svc error too', async () => {
    const cases: Array<[Error, string, number]> = [
      [new HttpError('invalid_transition', 'no'), 'invalid_transition', 409],
      [new ConflictError('taken'), 'conflict', 409],
      [new FailedError('broke'), 'internal_error', 500],
      // node:sqlite's error when another process holds the write lock past the busy timeout: the pipeline's 503.
      [Object.assign(new Error('database is locked'), { code: 'ERR_SQLITE_ERROR', errcode: 5 }), 'unavailable', 503],
      // A full disk, SQLite's or a file's: the pipeline's 503 too (before, audited as a 500 crash it never answered).
      [Object.assign(new Error('database or disk is full'), { code: 'ERR_SQLITE_ERROR', errcode: 13 }), 'unavailable', 503],
      [Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' }), 'unavailable', 503],
      // A failed disk write (SQLITE_IOERR_WRITE) is tried later as a full disk is (before, a 500).
      [Object.assign(new Error('disk I/O error'), { code: 'ERR_SQLITE_ERROR', errcode: 778 }), 'unavailable', 503],
    ];
    for (const [thrown, outcome, status] of cases) {
      const rows: AuditInput[] = [];
      const handler = audited('run.stop', () => {
        throw thrown;
      });
      await assert.rejects(async () => handler(ctxFor(rows)), thrown);
      assert.deepEqual([rows[0]!.outcome, rows[0]!.detail!.status, rows[0]!.target], [outcome, status, 'local/r1']);
    }
  });
});
