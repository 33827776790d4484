// `svc runs logs` and `svc start --follow` read a run's events.jsonl from its folder. A run folder can come from a
// checkout someone else made: a link there must not be followed to another file, nor a FIFO block the reader.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEventTail } from '../../src/cli/run-logs.ts';

const EVENT = JSON.stringify({ kind: 'log', data: { stream: 'stdout', text: 'from elsewhere' } }) + '\n';

describe("a run folder's events.jsonl read for its output", () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'svc-event-tail-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('reads the events of a plain file', () => {
    const run = join(dir, 'plain');
    execFileSync('mkdir', ['-p', run]);
    writeFileSync(join(run, 'events.jsonl'), EVENT);
    assert.deepEqual(createEventTail(run)().map((e) => e.kind), ['log']);
  });

  it('does not follow a link at events.jsonl to another file', () => {
    const run = join(dir, 'linked');
    execFileSync('mkdir', ['-p', run]);
    writeFileSync(join(dir, 'elsewhere.jsonl'), EVENT);
    symlinkSync(join(dir, 'elsewhere.jsonl'), join(run, 'events.jsonl'));
    assert.deepEqual(createEventTail(run)(), []);
  });

  it('is not blocked by a FIFO at events.jsonl', () => {
    const run = join(dir, 'fifo');
    execFileSync('mkdir', ['-p', run]);
    execFileSync('mkfifo', [join(run, 'events.jsonl')]);
    assert.deepEqual(createEventTail(run)(), []);
  });
});
