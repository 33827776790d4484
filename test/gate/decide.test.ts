// The gate's decision with a stand-in resolver: names that resolve to metadata, private, CGNAT or IPv6-local
// addresses are refused; only an allow entry naming the exact address and port admits one. Nothing connects.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { decide, parseGatePolicy, systemResolver } from '../../src/gate/policy.ts';
import { parseAuthority } from '../../src/gate/address.ts';
import { tableResolver } from './helpers.ts';

const { resolve, lookups } = tableResolver({
  'metadata.test': ['169.254.169.254'],
  'lan.test': ['10.0.0.5'],
  'cgnat.test': ['100.64.1.1'],
  'ec2v6.test': ['fd00:ec2::254'],
  'mapped.test': ['::ffff:169.254.169.254'],
  'mixed.test': ['93.184.216.34', '192.168.1.1'],
  'public.test': ['93.184.216.34', '2606:4700::1111'],
  'local.test': ['127.0.0.2'],
  'denied-address.test': ['93.184.216.35'],
});

const policy = parseGatePolicy({
  allow: ['*.test', 'api.example.com', '127.0.0.2:8080', '169.254.169.254'],
  deny: ['blocked.test', '93.184.216.35'],
});

const at = (authority: string) => decide(parseAuthority(authority, null), policy, resolve);

describe('decide', () => {
  for (const name of ['metadata.test', 'lan.test', 'cgnat.test', 'ec2v6.test', 'mapped.test', 'mixed.test']) {
    it(`refuses ${name}, which resolves to a non-public address`, async () => {
      const d = await at(`${name}:443`);
      assert.equal(d.allowed, false);
      assert.ok(d.address, 'names the address it refused');
    });
  }

  it('refuses a literal metadata address even when the allow list names it without a port', async () => {
    const d = await at('169.254.169.254:80');
    assert.equal(d.allowed, false);
    assert.match(d.allowed ? '' : d.reason, /link-local/);
  });

  it('admits a loopback address only with the exact address and port named', async () => {
    assert.deepEqual(await at('local.test:8080'), { allowed: true, rule: '127.0.0.2:8080', address: '127.0.0.2' });
    assert.equal((await at('local.test:8081')).allowed, false);
    assert.deepEqual(await at('127.0.0.2:8080'), { allowed: true, rule: '127.0.0.2:8080', address: '127.0.0.2' });
  });

  it('admits a public name and connects to the first address it checked', async () => {
    assert.deepEqual(await at('public.test:443'), { allowed: true, rule: '*.test', address: '93.184.216.34' });
  });

  it('lets deny win over allow, by name and by resolved address', async () => {
    const byName = await at('blocked.test:443');
    assert.deepEqual(byName.allowed ? null : byName.rule, 'blocked.test');
    const byAddress = await at('denied-address.test:443');
    assert.deepEqual(byAddress.allowed ? null : byAddress.rule, '93.184.216.35');
  });

  it('refuses what no allow entry names, without resolving it', async () => {
    const before = lookups.length;
    const d = await at('elsewhere.example:443');
    assert.equal(d.allowed, false);
    assert.match(d.allowed ? '' : d.reason, /not in the allow list/);
    assert.equal(lookups.length, before);
  });

  it('refuses a name that does not resolve', async () => {
    const d = await at('nowhere.test:443');
    assert.equal(d.allowed, false);
    assert.match(d.allowed ? '' : d.reason, /does not resolve/);
    const none = await decide(parseAuthority('public.test:443', null), policy, async () => []);
    assert.deepEqual(none, { allowed: false, rule: null, reason: 'public.test does not resolve', address: null });
  });

  it('resolves with the system resolver when none is injected', async () => {
    assert.ok((await systemResolver('localhost')).length > 0);
  });

  it('refuses everything with an empty allow list', async () => {
    const d = await decide(parseAuthority('public.test:443', null), parseGatePolicy({}), resolve);
    assert.equal(d.allowed, false);
  });
});
