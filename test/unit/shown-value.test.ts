// shownValue (src/one-line.ts): the one way an error or a log line shows a value it refuses, a payload's key or a git
// remote, without the credential a URL may carry.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { shownValue } from '../../src/one-line.ts';

describe('shownValue', () => {
  it('leaves out all before the last @ or %40 of a user info, keeping only the scheme', () => {
    assert.equal(shownValue('https://x-access-token:tok@github.com/o/r.git'), 'https://…@github.com/o/r.git');
    assert.equal(shownValue('u:p@ss@host:1'), '…@host:1');
    assert.equal(shownValue('https://u%3Atok%40h/x'), 'https://…%40h/x');
    assert.equal(shownValue('https://u%253Atok%2540h/x'), 'https://…%2540h/x');
    assert.equal(shownValue('ssh://git@127.0.0.1/acme/api.git'), 'ssh://…@127.0.0.1/acme/api.git');
  });

  it('cuts a URL\'s query, fragment and parameters, written or percent-encoded, where a token may travel', () => {
    assert.equal(shownValue('https://h/x?private_token=abc'), 'https://h/x…');
    assert.equal(shownValue('https://h/x#access_token=abc'), 'https://h/x…');
    assert.equal(shownValue('https://h/r.git;token=abc'), 'https://h/r.git…');
    assert.equal(shownValue('https://h/x%3Ftoken%3Dabc'), 'https://h/x…');
  });

  it('keeps what is no URL as it is: a chat channel\'s # is no fragment', () => {
    assert.equal(shownValue('#general'), '#general');
    assert.equal(shownValue('acme/api'), 'acme/api');
  });

  it('turns each character outside printable ASCII into ? so no line break or terminal control reaches a log', () => {
    assert.equal(shownValue('a\nb\u001b[2Jc\u202ed'), 'a?b?[2Jc?d');
  });

  it('shows a name (a Teams channel) whole, its @ included, with no control character', () => {
    assert.equal(shownValue('19:253b@thread.skype\n', 'name'), '19:253b@thread.skype?');
  });

  it('shows at most 120 characters', () => {
    assert.equal(shownValue('x'.repeat(500)).length, 120);
  });
});
