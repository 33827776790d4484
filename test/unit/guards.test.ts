import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { IncomingMessage } from 'node:http';
import {
  checkBearer,
  checkFetchSite,
  checkHost,
  checkJsonContentType,
  checkLoopbackOnly,
  checkOrigin,
  hostnameOf,
  isLoopbackAddress,
  isLoopbackHost,
  requestUrl,
  safeEqual,
} from '../../src/http/guards.ts';
import { HttpError } from '../../src/http/http-error.ts';
import { codeOf } from '../helpers/error-code.ts';

function req(headers: Record<string, string>, method = 'GET', remoteAddress = '127.0.0.1'): IncomingMessage {
  return { headers, method, socket: { remoteAddress } } as unknown as IncomingMessage;
}

describe('guards', () => {
  describe('isLoopbackAddress', () => {
    it('accepts IPv4 loopback, IPv6 loopback and IPv4-mapped loopback', () => {
      for (const a of ['127.0.0.1', '127.8.9.10', '::1', '::ffff:127.0.0.1', 'localhost']) assert.equal(isLoopbackAddress(a), true, a);
    });
    it('rejects other addresses and nothing at all', () => {
      for (const a of ['10.0.0.1', '0.0.0.0', '::', '::ffff:10.0.0.1', '127.0.0.1.evil.com', '', undefined]) {
        assert.equal(isLoopbackAddress(a), false, String(a));
      }
    });
  });

  describe('isLoopbackHost', () => {
    it('treats 127.0.0.1, localhost and [::1] as loopback and 0.0.0.0 as not', () => {
      assert.equal(isLoopbackHost('127.0.0.1'), true);
      assert.equal(isLoopbackHost('localhost'), true);
      assert.equal(isLoopbackHost('[::1]'), true);
      assert.equal(isLoopbackHost('::1'), true);
      assert.equal(isLoopbackHost('0.0.0.0'), false);
      assert.equal(isLoopbackHost('::'), false);
      assert.equal(isLoopbackHost('192.168.1.4'), false);
    });
  });

  describe('checkHost', () => {
    it('splits the port off host names and keeps IPv6 brackets', () => {
      assert.equal(hostnameOf('LocalHost:47821'), 'localhost');
      assert.equal(hostnameOf('[::1]:8080'), '[::1]');
      assert.equal(hostnameOf('127.0.0.1'), '127.0.0.1');
    });
    it('accepts loopback names with any port on a loopback-bound server', () => {
      for (const host of ['localhost', 'localhost:1', '127.0.0.1:47821', '[::1]:9']) assert.equal(codeOf(() => checkHost(req({ host }), true)), null, host);
    });
    it('answers forbidden_host to a rebound or missing Host on a loopback-bound server', () => {
      for (const host of ['evil.example', 'evil.example:47821', 'localhost.evil.example', '127.0.0.2', 'localhost.']) {
        assert.equal(codeOf(() => checkHost(req({ host }), true)), 'forbidden_host', host);
      }
      assert.equal(codeOf(() => checkHost(req({}), true)), 'forbidden_host');
    });
    it('lets any well-formed Host through on a non-loopback server, where the token is the guard', () => {
      assert.equal(codeOf(() => checkHost(req({ host: 'svc.example.com' }), false)), null);
      assert.equal(codeOf(() => checkHost(req({ host: '[2001:db8::1]:443' }), false)), null);
    });
    it('answers bad_request to a Host that is not one host and port, on any server', () => {
      for (const host of ['localhost:1, evil.example', '[::1]evil', '[::1]:1x', 'localhost:1:2', 'a b', 'user@localhost', 'localhost:123456', '%6cocalhost']) {
        for (const loopback of [true, false]) assert.equal(codeOf(() => checkHost(req({ host }), loopback)), 'bad_request', `${host} ${loopback}`);
      }
    });
    it('answers bad_request to a request with two Host lines, even when the first one is right', () => {
      const twice = { headers: { host: 'localhost:1' }, rawHeaders: ['Host', 'localhost:1', 'host', 'evil.example'] } as unknown as IncomingMessage;
      assert.equal(codeOf(() => checkHost(twice, true)), 'bad_request');
      assert.equal(codeOf(() => checkHost(twice, false)), 'bad_request');
    });
  });

  describe('safeEqual', () => {
    it('is true only for identical strings, whatever their lengths', () => {
      assert.equal(safeEqual('s3cret', 's3cret'), true);
      assert.equal(safeEqual('s3cret', 's3cres'), false);
      assert.equal(safeEqual('s3cret', 's3cret-longer'), false);
      assert.equal(safeEqual('', ''), true);
      assert.equal(safeEqual('', 'x'), false);
    });
  });

  describe('checkBearer', () => {
    it('does nothing when the server has no token', () => {
      assert.equal(codeOf(() => checkBearer(req({}), undefined)), null);
    });
    it('accepts the right token, case-insensitive scheme', () => {
      assert.equal(codeOf(() => checkBearer(req({ authorization: 'Bearer tok-1' }), 'tok-1')), null);
      assert.equal(codeOf(() => checkBearer(req({ authorization: 'bearer tok-1' }), 'tok-1')), null);
    });
    it('answers unauthorized with WWW-Authenticate: Bearer to a missing, wrong or malformed token', () => {
      for (const authorization of [undefined, '', 'Bearer', 'Bearer tok-2', 'Bearer tok-1x', 'Basic dG9rLTE=', 'Bearer tok-1 extra', 'tok-1']) {
        const headers: Record<string, string> = authorization === undefined ? {} : { authorization };
        try {
          checkBearer(req(headers), 'tok-1');
          assert.fail(`accepted ${authorization}`);
        } catch (err) {
          assert.ok(err instanceof HttpError);
          assert.equal(err.code, 'unauthorized');
          assert.equal(err.status, 401);
          assert.equal(err.headers['www-authenticate'], 'Bearer');
          assert.doesNotMatch(err.message, /tok-1/);
        }
      }
    });
  });

  describe('checkLoopbackOnly', () => {
    it('passes a loopback peer on a loopback-bound server', () => {
      assert.equal(codeOf(() => checkLoopbackOnly(req({}, 'POST', '127.0.0.1'), true)), null);
      assert.equal(codeOf(() => checkLoopbackOnly(req({}, 'POST', '::ffff:127.0.0.1'), true)), null);
    });
    it('refuses a loopback peer when the server is bound to a non-loopback address', () => {
      assert.equal(codeOf(() => checkLoopbackOnly(req({}, 'POST', '127.0.0.1'), false)), 'loopback_only');
    });
    it('refuses a remote peer even on a loopback-bound server', () => {
      assert.equal(codeOf(() => checkLoopbackOnly(req({}, 'POST', '10.1.2.3'), true)), 'loopback_only');
    });
  });

  describe('checkFetchSite', () => {
    it('refuses what a browser marks as from another site or origin, and any no-cors request', () => {
      const refused: Array<Record<string, string>> = [
        { 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'same-site' },
        { 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'no-cors' }, { 'sec-fetch-mode': 'no-cors' },
        { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate' },
      ];
      for (const headers of refused) assert.equal(codeOf(() => checkFetchSite(req(headers))), 'forbidden_origin', JSON.stringify(headers));
    });
    it('lets the UI itself, a typed address and clients without Fetch Metadata through', () => {
      const passed: Array<Record<string, string>> = [
        {}, { 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'cors' }, { 'sec-fetch-site': 'none', 'sec-fetch-mode': 'navigate' },
        { 'sec-fetch-mode': 'cors' }, { 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'navigate' },
      ];
      for (const headers of passed) assert.doesNotThrow(() => checkFetchSite(req(headers)), JSON.stringify(headers));
    });
  });

  describe('checkOrigin', () => {
    const own = new Set(['http://127.0.0.1:47821']);
    it('ignores safe methods and requests without an Origin', () => {
      assert.equal(codeOf(() => checkOrigin(req({ origin: 'https://evil.example' }, 'GET'), own)), null);
      assert.equal(codeOf(() => checkOrigin(req({}, 'POST'), own)), null);
    });
    it('accepts the server origin and the origin matching the Host header', () => {
      assert.equal(codeOf(() => checkOrigin(req({ origin: 'http://127.0.0.1:47821' }, 'POST'), own)), null);
      assert.equal(codeOf(() => checkOrigin(req({ origin: 'http://localhost:5000', host: 'localhost:5000' }, 'DELETE'), own)), null);
    });
    it('answers forbidden_origin to a foreign or opaque origin on every mutating method', () => {
      for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
        assert.equal(codeOf(() => checkOrigin(req({ origin: 'https://evil.example', host: '127.0.0.1:47821' }, method), own)), 'forbidden_origin');
      }
      assert.equal(codeOf(() => checkOrigin(req({ origin: 'null', host: '127.0.0.1:47821' }, 'POST'), own)), 'forbidden_origin');
      assert.equal(codeOf(() => checkOrigin(req({ origin: 'http://127.0.0.1:47822', host: '127.0.0.1:47821' }, 'POST'), own)), 'forbidden_origin');
    });
  });

  describe('checkJsonContentType', () => {
    it('accepts application/json with or without parameters, any case', () => {
      for (const t of ['application/json', 'application/json; charset=utf-8', 'Application/JSON;charset=UTF-8']) {
        assert.equal(codeOf(() => checkJsonContentType(req({ 'content-type': t }, 'POST'))), null, t);
      }
    });
    it('answers unsupported_media_type to anything else', () => {
      for (const t of [undefined, '', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonx', 'text/json']) {
        const headers: Record<string, string> = t === undefined ? {} : { 'content-type': t };
        assert.equal(codeOf(() => checkJsonContentType(req(headers, 'POST'))), 'unsupported_media_type', String(t));
      }
    });
  });

  describe('requestUrl', () => {
    it('keeps the path as sent, including a leading double slash', () => {
      assert.equal(requestUrl('/v1/runs?limit=5').pathname, '/v1/runs');
      assert.equal(requestUrl('/v1/runs?limit=5').searchParams.get('limit'), '5');
      assert.equal(requestUrl('//evil.example/v1/runs').pathname, '//evil.example/v1/runs');
    });
    it('answers bad_request to dot segments, literal or encoded, and to raw backslashes', () => {
      for (const t of ['/v1/runs/a/b/artifact/../x', '/a/./b', '/a/%2e%2E/b', '/a/.%2e', '/a/%2e', '/..', '/a\\b', '/a/..?x=1']) {
        assert.equal(codeOf(() => requestUrl(t)), 'bad_request', t);
      }
    });
    it('leaves dots inside names and in the query alone', () => {
      assert.equal(requestUrl('/v1/runs/local/r1/artifact/logs/check.v2.txt').pathname, '/v1/runs/local/r1/artifact/logs/check.v2.txt');
      assert.equal(requestUrl('/a/...').pathname, '/a/...');
      assert.equal(requestUrl('/v1/stats?repo=../x').searchParams.get('repo'), '../x');
    });
    it('answers bad_request to an absolute-form target that is no URL', () => {
      assert.equal(codeOf(() => requestUrl('http://[not-an-address]/v1/runs')), 'bad_request');
    });
  });
});
