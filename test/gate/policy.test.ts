// The gate's policy and host parsing: patterns are normalised like destinations, bad ones are refused by name,
// deny wins, wildcards cover subdomains only. Pure: nothing resolves or connects.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  GatePolicyError, matchesHost, parseGatePolicy, parseHostPattern, repositoryAllow,
} from '../../src/gate/policy.ts';
import { BadHostError, parseAuthority } from '../../src/gate/address.ts';

describe('parseHostPattern', () => {
  it('reads names, wildcards, ports and addresses in their normal spelling', () => {
    assert.deepEqual(parseHostPattern('API.Anthropic.COM.'),
      { text: 'API.Anthropic.COM.', kind: 'exact', host: 'api.anthropic.com', port: null });
    assert.deepEqual(parseHostPattern('*.googleapis.com:443'),
      { text: '*.googleapis.com:443', kind: 'subdomains', host: 'googleapis.com', port: 443 });
    assert.deepEqual(parseHostPattern('127.0.0.2:8080'),
      { text: '127.0.0.2:8080', kind: 'address', host: '127.0.0.2', port: 8080 });
    assert.deepEqual(parseHostPattern('[::1]:8080'), { text: '[::1]:8080', kind: 'address', host: '::1', port: 8080 });
    assert.deepEqual(parseHostPattern('::1'), { text: '::1', kind: 'address', host: '::1', port: null });
    assert.deepEqual(parseHostPattern('*'), { text: '*', kind: 'any', host: '', port: null });
    assert.equal(parseHostPattern('bücher.example').host, 'xn--bcher-kva.example');
  });

  const BAD = ['', 'https://example.com', 'example.com/path', 'user@example.com', 'exa mple.com', 'foo.*.com',
    '*example.com', 'example.*', '*.127.0.0.1', 'example.com:0', 'example.com:65536', 'example.com:80x',
    '[example.com]:80', '[::1', 'example..com', '.example.com', 'fe80::1%eth0'];
  for (const pattern of BAD) {
    it(`refuses ${JSON.stringify(pattern)} with a GatePolicyError naming it`, () => {
      assert.throws(() => parseHostPattern(pattern),
        (err: unknown) => err instanceof GatePolicyError && err.pattern === pattern);
    });
  }
});

describe('parseGatePolicy', () => {
  it('reads both lists, missing lists as empty', () => {
    const policy = parseGatePolicy({ allow: ['api.openai.com'] });
    assert.equal(policy.allow.length, 1);
    assert.deepEqual(policy.deny, []);
  });

  it('refuses a list that is not a list of strings', () => {
    assert.throws(() => parseGatePolicy({ allow: 'api.openai.com' }), GatePolicyError);
    assert.throws(() => parseGatePolicy({ deny: [42] }), GatePolicyError);
  });
});

describe('repositoryAllow', () => {
  it('drops every entry naming a refused address, in any spelling, and keeps names and public addresses', () => {
    const refused = ['127.0.0.1:47821', '169.254.169.254:80', '[::1]:8080', '[::ffff:127.0.0.1]:80', '0x7f.1:80',
      '[64:ff9b::a9fe:a9fe]:80', '10.0.0.1', '[fd00:ec2::254]:80'];
    const kept = ['api.example.com', 'localhost:8080', '*', '93.184.216.34:443'];
    const { kept: left, dropped } = repositoryAllow([...refused, ...kept]);
    assert.deepEqual(left, kept, 'a name goes on: the gate refuses what it resolves to');
    assert.equal(dropped.length, refused.length);
    assert.equal(dropped[0], '"127.0.0.1:47821" (loopback 127.0.0.0/8)');
  });
});

describe('matchesHost', () => {
  it('lets a wildcard cover subdomains but not the name itself', () => {
    const p = parseHostPattern('*.example.com');
    assert.equal(matchesHost(p, 'api.example.com', 443), true);
    assert.equal(matchesHost(p, 'a.b.example.com', 443), true);
    assert.equal(matchesHost(p, 'example.com', 443), false);
    assert.equal(matchesHost(p, 'badexample.com', 443), false);
    assert.equal(matchesHost(parseHostPattern('*'), 'any.test', 1), true, '"*" covers every name');
    assert.equal(matchesHost(parseHostPattern('*:443'), 'any.test', 80), false);
  });

  it('holds a pattern with a port to that port', () => {
    const p = parseHostPattern('example.com:443');
    assert.equal(matchesHost(p, 'example.com', 443), true);
    assert.equal(matchesHost(p, 'example.com', 80), false);
  });

  it('matches an address pattern in any spelling of the address', () => {
    const p = parseHostPattern('127.0.0.2:8080');
    assert.equal(matchesHost(p, '::ffff:127.0.0.2', 8080), true);
    assert.equal(matchesHost(p, '127.0.0.3', 8080), false);
  });
});

describe('parseAuthority', () => {
  it('normalises case, trailing dot, IDNA and every IPv4 spelling', () => {
    const name = (host: string, port: number) => ({ host, port, literal: false });
    const ip = (host: string, port: number) => ({ host, port, literal: true });
    assert.deepEqual(parseAuthority('API.OpenAI.com.:443', null), name('api.openai.com', 443));
    assert.deepEqual(parseAuthority('bücher.example:443', null), name('xn--bcher-kva.example', 443));
    assert.deepEqual(parseAuthority('0x7f.1:80', null), { host: '127.0.0.1', port: 80, literal: true });
    assert.deepEqual(parseAuthority('2130706433:80', null), { host: '127.0.0.1', port: 80, literal: true });
    assert.deepEqual(parseAuthority('0251.0376.0251.0376:80', null), ip('169.254.169.254', 80));
    assert.deepEqual(parseAuthority('[::FFFF:A9FE:A9FE]:80', null), ip('169.254.169.254', 80));
    assert.deepEqual(parseAuthority('example.com', 80), { host: 'example.com', port: 80, literal: false });
  });

  const ODD = ['user@example.com:443', ':443', 'example.com:', 'example.com:0', 'example.com:99999', 'example.com',
    '::1:443', '[fe80::1%25eth0]:443', 'a/b:443', 'exa mple.com:443', '*.example.com:443', '.:443',
    `${'a'.repeat(301)}:1`, 'exa<mple.com:443', 'exa|mple.com:443'];
  for (const raw of ODD) {
    it(`refuses the authority ${JSON.stringify(raw.slice(0, 40))}`, () => {
      assert.throws(() => parseAuthority(raw, null), BadHostError);
    });
  }
});
