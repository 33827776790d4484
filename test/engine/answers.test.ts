import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeAnswer, takeAnswer, answerAlreadyTaken } from '../../src/engine/answers.ts';

describe('answer files', () => {
  const root = mkdtempSync(join(tmpdir(), 'svc-'));
  const env = { SVC_CONTROL_ANSWER_DIR: join(root, 'answers') };
  const runDir = join(root, 'run');
  after(() => rmSync(root, { recursive: true, force: true }));

  it('uses an answer delivered twice with one answer_id only once', () => {
    writeAnswer(env, 'local', 'r1', 'postgres', 'a-1');
    assert.equal(takeAnswer(env, 'local', 'r1', runDir), 'postgres');
    assert.equal(answerAlreadyTaken(runDir, 'a-1'), true);
    writeAnswer(env, 'local', 'r1', 'postgres', 'a-1');
    assert.equal(takeAnswer(env, 'local', 'r1', runDir), null, 'the second copy is dropped');
    writeAnswer(env, 'local', 'r1', 'mysql', 'a-2');
    assert.equal(takeAnswer(env, 'local', 'r1', runDir), 'mysql');
  });

  it('takes answers without an id every time they are written', () => {
    writeAnswer(env, 'local', 'r2', 'yes');
    assert.equal(takeAnswer(env, 'local', 'r2', join(root, 'run2')), 'yes');
    writeAnswer(env, 'local', 'r2', 'yes');
    assert.equal(takeAnswer(env, 'local', 'r2', join(root, 'run2')), 'yes');
  });
});
