import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseTarget, requestUrl } from '../../src/http/guards.ts';
import { codeOf } from '../helpers/error-code.ts';

// Every character from 0x00 to 0xFF once in the path and once in the query, plus hand-picked odd targets.
const EVERY_CHAR = Array.from({ length: 256 }, (_, c) => String.fromCharCode(c)).flatMap((c) => [`/a${c}b`, `/a?x=${c}&y=1`, `/a?${c}`]);
// Random targets over the characters that matter to either parser (deterministic LCG, so a failure reproduces).
const ALPHABET = ['a', 'Z', '0', '/', '?', '#', '%', '%2', '%41', '%zz', '%C3%A9', '+', '=', '&', ' ', '\t', '.', '..', '\u00e9', '\u{1F600}', '\ud800', '^', '|', '[', "'", '"'];
let seed = 12345;
const FUZZ = Array.from({ length: 3000 }, () => {
  let t = '/';
  const n = 1 + (seed % 12);
  for (let i = 0; i < n; i++) {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    t += ALPHABET[seed % ALPHABET.length];
  }
  return t;
});
const TARGETS = [...EVERY_CHAR, ...FUZZ,
  '/', '/health', '/v1/runs', '/v1/runs?limit=50', '/v1/runs?', '/v1/runs?limit=5&limit=6', '/v1/runs?repo=acme%2Fapi&verdict=verified',
  '/v1/runs?repo=a+b', '/v1/runs?repo=a%20b&x', '/v1/runs?repo=%zz', '/v1/runs?repo=%C3', '/v1/runs?repo=caf%C3%A9', '/v1/runs?repo=café',
  "/v1/runs?repo='q'&b=\"x\"&c=<d>", '/v1/runs?a=1#frag', '/v1/runs#frag', '/v1/runs?a=b?c', '/v1/runs?=x&y=', '//evil.example/v1/runs',
  '/v1/runs/local/r1/artifact/logs/check.v2.txt', '/a/...', '/v1/stats?repo=../x', '/a%2Fb', '/a%41', '/A/B_C-D~E', "/a!$&'()*+,;=:@b",
  '/a[b]c^d|e', '/a{b}', '/a`b', '/a"b', '/a<b>', '/caf\u00e9', '/a\u0001b', '/a%', '/x?%', '*', 'http://127.0.0.1/health?a=1', '/a b',
];

describe('parseTarget', () => {
  it('gives the same pathname, query and URL as requestUrl for plain and odd targets alike', () => {
    for (const target of TARGETS) {
      const expected = codeOf(() => requestUrl(target)) ?? requestUrl(target);
      const got = codeOf(() => parseTarget(target)) ?? parseTarget(target);
      if (typeof expected === 'string' || typeof got === 'string') {
        assert.equal(got, expected, target);
        continue;
      }
      assert.equal(got.pathname, expected.pathname, target);
      assert.deepEqual([...got.query()], [...expected.searchParams], target);
      assert.equal(got.url().href, expected.href, target);
    }
  });

  it('refuses dot segments and backslashes exactly like requestUrl', () => {
    for (const t of ['/v1/runs/a/b/artifact/../x', '/a/./b', '/a/%2e%2E/b', '/a/.%2e', '/a/%2e', '/..', '/a\\b', '/a/..?x=1']) {
      assert.equal(codeOf(() => parseTarget(t)), 'bad_request', t);
    }
  });

  it('builds the query and URL once, on first use', () => {
    const target = parseTarget('/v1/runs?limit=5');
    assert.equal(target.query(), target.query());
    assert.equal(target.url(), target.url());
    assert.equal(target.query().get('limit'), '5');
  });
});
