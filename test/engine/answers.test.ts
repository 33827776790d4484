import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeAnswer, takeAnswer } from '../../src/engine/answers.ts';

describe('answer files', () => {
  const root = mkdtempSync(join(tmpdir(), 'svc-'));
  const env = { SVC_CONTROL_ANSWER_DIR: join(root, 'answers') };
  const runDir = join(root, 'run');
  after(() => rmSync(root, { recursive: true, force: true }));

  it('takes each answer written once, keeping it in the run folder', () => {
    assert.equal(takeAnswer(env, 'local', 'r1', runDir), null, 'nothing written yet');
    const path = writeAnswer(env, 'local', 'r1', 'postgres');
    assert.equal(takeAnswer(env, 'local', 'r1', runDir), 'postgres');
    assert.equal(existsSync(path), false);
    assert.equal(takeAnswer(env, 'local', 'r1', runDir), null, 'used once');
    writeAnswer(env, 'local', 'r1', 'postgres');
    assert.equal(takeAnswer(env, 'local', 'r1', runDir), 'postgres', 'the same words again are a new answer');
    assert.equal(readdirSync(join(runDir, 'answers')).length, 2);
  });
});
