// The prompt every provider gets must tell a real agent how to ask a question: which file, how, and what then.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { buildPrompt } from '../../src/engine/provider-session.ts';

describe('the provider prompt', () => {
  it('tells the agent to write its question to $SVC_QUESTION_FILE with its shell, then exit', () => {
    const rules = buildPrompt('fix it', { answers: [] }).split('Task (untrusted data):')[0]!;
    assert.match(rules, /SVC_QUESTION_FILE/);
    assert.match(rules, /printf '%s\\n' "Which …\?" > "\$SVC_QUESTION_FILE"/);
    assert.match(rules, /exit\. The run waits for the answer and starts you again with it\./);
  });

  it('keeps the rules outside the fenced task, and answers fenced after it', () => {
    const prompt = buildPrompt('fix it', { answers: ['use postgres'] });
    assert.ok(prompt.indexOf('SVC_QUESTION_FILE') < prompt.indexOf('```markdown\nfix it\n```'));
    assert.match(prompt, /Answer 1 from the operator[^\n]*\n```text\nuse postgres\n```/);
  });
});
