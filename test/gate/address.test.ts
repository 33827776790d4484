// The address rules as data: every special-purpose range in every spelling, and public addresses left alone.
// Pure functions: nothing here opens a connection.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { canonicalAddress, refusedRange } from '../../src/gate/address.ts';

const REFUSED: Array<[string, RegExp]> = [
  ['127.0.0.1', /loopback/],
  ['127.255.255.254', /loopback/],
  ['10.1.2.3', /private 10/],
  ['172.16.0.1', /private 172/],
  ['172.31.255.255', /private 172/],
  ['192.168.0.10', /private 192\.168/],
  ['169.254.169.254', /link-local \(metadata\)/],
  ['100.64.0.1', /CGNAT/],
  ['100.127.255.255', /CGNAT/],
  ['0.0.0.0', /this network/],
  ['0.1.2.3', /this network/],
  ['224.0.0.1', /multicast/],
  ['239.255.255.250', /multicast/],
  ['255.255.255.255', /broadcast/],
  ['240.0.0.1', /reserved/],
  ['192.0.0.192', /IETF/],
  ['198.18.0.1', /benchmarking/],
  ['::', /unspecified/],
  ['::1', /loopback ::1/],
  ['0:0:0:0:0:0:0:1', /loopback ::1/],
  ['fc00::1', /unique local/],
  ['fd00:ec2::254', /unique local/],
  ['fe80::1', /link-local fe80/],
  ['febf::1', /link-local fe80/],
  ['fec0::1', /site-local/],
  ['ff02::1', /multicast ff00/],
  ['::ffff:127.0.0.1', /IPv4-mapped loopback/],
  ['::ffff:7f00:1', /IPv4-mapped loopback/],
  ['::ffff:169.254.169.254', /IPv4-mapped link-local/],
  ['::ffff:a9fe:a9fe', /IPv4-mapped link-local/],
  ['::ffff:10.0.0.1', /IPv4-mapped private/],
  ['::ffff:100.64.0.1', /IPv4-mapped CGNAT/],
  ['64:ff9b::a9fe:a9fe', /NAT64 link-local/],
  ['2002:a9fe:a9fe::1', /6to4 link-local/],
  ['2002:7f00:1::', /6to4 loopback/],
  ['::127.0.0.1', /IPv4-compatible/],
  ['2001:db8::1', /documentation/],
  ['2001:0:4136:e378::1', /Teredo/],
  ['fe80::1%eth0', /link-local fe80/],
  ['example.com', /not an IP address/],
];

const PUBLIC = ['93.184.216.34', '8.8.8.8', '172.32.0.1', '100.128.0.1', '169.255.0.1', '2606:4700::1111',
  '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1', '1.1.1.1', '223.255.255.255'];

describe('refusedRange', () => {
  for (const [address, label] of REFUSED) {
    it(`refuses ${address} as ${label.source}`, () => {
      assert.match(refusedRange(address) ?? 'public', label);
    });
  }
  for (const address of PUBLIC) {
    it(`leaves the public address ${address} alone`, () => {
      assert.equal(refusedRange(address), null);
    });
  }
});

describe('canonicalAddress', () => {
  it('spells IPv4-mapped IPv6 as its IPv4 and IPv6 in its short form', () => {
    assert.equal(canonicalAddress('::ffff:127.0.0.2'), '127.0.0.2');
    assert.equal(canonicalAddress('::ffff:7f00:2'), '127.0.0.2');
    assert.equal(canonicalAddress('0:0:0:0:0:0:0:1'), '::1');
    assert.equal(canonicalAddress('FD00:0EC2:0::0254'), 'fd00:ec2::254');
    assert.equal(canonicalAddress('127.0.0.2'), '127.0.0.2');
  });

  it('gives null for names and zone ids', () => {
    assert.equal(canonicalAddress('localhost'), null);
    assert.equal(canonicalAddress('fe80::1%eth0'), null);
  });
});
