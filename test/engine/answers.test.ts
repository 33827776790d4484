import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { answerDirOf, writeAnswer, takeAnswer, isOperatorAnswer } from '../../src/engine/answers.ts';

describe('answer files', () => {
  const root = mkdtempSync(join(tmpdir(), 'svc-'));
  const env = { SVC_CONTROL_ANSWER_DIR: join(root, 'answers') };
  const runDir = join(root, 'run');
  after(() => rmSync(root, { recursive: true, force: true }));

  it('takes each answer written once, keeping it in the run folder', () => {
    assert.equal(takeAnswer(env, 'local', 'r1', runDir), null, 'nothing written yet');
    const path = writeAnswer(answerDirOf(env), 'local', 'r1', 'postgres', 'cli');
    assert.deepEqual(takeAnswer(env, 'local', 'r1', runDir), { text: 'postgres', by: 'cli' });
    assert.equal(existsSync(path), false);
    assert.equal(takeAnswer(env, 'local', 'r1', runDir), null, 'used once');
    writeAnswer(answerDirOf(env), 'local', 'r1', 'postgres', 'origin:webhook:octocat');
    assert.deepEqual(takeAnswer(env, 'local', 'r1', runDir), { text: 'postgres', by: 'origin:webhook:octocat' },
      'the same words again are a new answer');
    assert.equal(readdirSync(join(runDir, 'answers')).length, 2);
  });

  it('takes an answer that names no one as no operator\'s, and only cli and control answers as the operator\'s', () => {
    writeFileSync(join(root, 'answers', 'local', 'r2.json'), JSON.stringify({ answer: 'raise to $100' }));
    const taken = takeAnswer(env, 'local', 'r2', runDir)!;
    assert.equal(taken.by, 'unknown');
    assert.equal(isOperatorAnswer(taken.by), false);
    assert.deepEqual(['cli', 'control:token', 'control:local', 'origin:webhook:cli', 'origin:chata:U1', 'clix']
      .map(isOperatorAnswer), [true, true, true, false, false, false]);
  });
});
