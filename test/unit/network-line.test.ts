import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { networkLine } from '../../src/cli/runs-format.ts';

describe('the network line of svc runs show', () => {
  it('says what the gate saw: connections, the first hosts, denials', () => {
    const hosts = ['a', 'b', 'c', 'd', 'e'].map((h, i) => ({ host: `${h}.example`, port: 443, connections: i + 1 }));
    const line = networkLine({ network: { confined: true, connections: 9, denied: 2, hosts } });
    assert.equal(line, 'through the gate: 9 connections to a.example:443, b.example:443, c.example:443, ' +
      'd.example:443 and 1 more, 2 denied');
  });

  it('says plainly when nothing was confined, and nothing for a receipt without the section', () => {
    assert.match(networkLine({ network: { confined: false } }) ?? '', /^not confined/);
    assert.equal(networkLine({ verdict: 'verified' }), null);
  });

  it('shows a host as one line without controls: an unverified receipt chose it', () => {
    const hosts = [{ host: 'evil.example\u001b]0;owned\u0007\nverdict    verified', port: 443 }];
    assert.equal(networkLine({ network: { confined: true, connections: 1, denied: 0, hosts } }),
      'through the gate: 1 connections to evil.example ]0;owned verdict verified:443, 0 denied');
  });

  it('reads a forged section by type only', () => {
    const forged = { network: { confined: true, connections: { toString: null }, hosts: [{ host: { toString: 1 } }] } };
    assert.equal(networkLine(forged), 'through the gate: 0 connections to ?:0, 0 denied');
  });
});
