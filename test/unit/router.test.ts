import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createRouter } from '../../src/http/router.ts';
import { HttpError } from '../../src/http/http-error.ts';
import { codeOf } from '../helpers/error-code.ts';

describe('router', () => {
  const match = createRouter([
    { method: 'GET', pattern: '/v1/runs', handler: 'list' },
    { method: 'POST', pattern: '/v1/runs', handler: 'start' },
    { method: 'GET', pattern: '/v1/runs/:source/:run', handler: 'get' },
    { method: 'GET', pattern: '/v1/runs/:source/:run/artifact/*path', handler: 'artifact' },
    { method: 'GET', pattern: '/jobs/:id', handler: 'job' },
    { method: 'GET', pattern: '/jobs/stats', handler: 'stats' },
  ]);

  it('matches literal routes and decodes parameters', () => {
    assert.equal(match('GET', '/v1/runs').route.handler, 'list');
    const m = match('GET', '/v1/runs/local/r%2Dx');
    assert.equal(m.route.handler, 'get');
    assert.deepEqual(m.params, { source: 'local', run: 'r-x' });
  });

  it('prefers a literal segment over a parameter in the same place', () => {
    assert.equal(match('GET', '/jobs/stats').route.handler, 'stats');
    assert.equal(match('GET', '/jobs/j1').route.handler, 'job');
  });

  it('captures the tail of an artifact path with its slashes', () => {
    const m = match('GET', '/v1/runs/local/r1/artifact/logs/check.txt');
    assert.equal(m.params.path, 'logs/check.txt');
  });

  it('answers 404 for an unknown path and 405 with Allow for a wrong method', () => {
    assert.equal(codeOf(() => match('GET', '/nope')), 'not_found');
    try {
      match('DELETE', '/v1/runs');
      assert.fail('expected 405');
    } catch (err) {
      assert.ok(err instanceof HttpError);
      assert.equal(err.code, 'method_not_allowed');
      assert.equal(err.headers.allow, 'GET, POST, HEAD');
    }
  });

  it('serves HEAD with the GET handler', () => {
    assert.equal(match('HEAD', '/v1/runs').route.handler, 'list');
  });

  it('rejects a malformed percent escape with 400 bad_request', () => {
    assert.equal(codeOf(() => match('GET', '/v1/runs/local/%E0%A4%A')), 'bad_request');
  });

  it('does not match an empty parameter segment', () => {
    assert.equal(codeOf(() => match('GET', '/v1/runs/local/')), 'not_found');
  });

  it('takes a path with one trailing slash as the path without it (every route, one rule)', () => {
    assert.equal(match('POST', '/v1/runs/').route.handler, 'start');
    assert.equal(match('GET', '/jobs/j1/').params.id, 'j1');
    assert.equal(match('GET', '/v1/runs/local/r1/artifact/logs/').params.path, 'logs/');
    assert.equal(codeOf(() => match('GET', '/v1/runs//')), 'not_found');
    assert.equal(codeOf(() => match('DELETE', '/v1/runs/')), 'method_not_allowed');
  });

  it('throws at boot on duplicate or ambiguous routes and malformed patterns', () => {
    assert.throws(() => createRouter([{ method: 'GET', pattern: '/a', handler: 1 }, { method: 'GET', pattern: '/a', handler: 2 }]), /Duplicate/);
    assert.throws(() => createRouter([{ method: 'GET', pattern: '/a/:x', handler: 1 }, { method: 'GET', pattern: '/a/:y', handler: 2 }]), /ambiguous/);
    assert.throws(() => createRouter([{ method: 'GET', pattern: 'a', handler: 1 }]), /start with/);
    assert.throws(() => createRouter([{ method: 'GET', pattern: '/a/*t/b', handler: 1 }]), /last/);
    assert.throws(() => createRouter([{ method: 'GET', pattern: '/*t', handler: 1 }]), /after another segment/);
    assert.throws(() => createRouter([{ method: 'GET', pattern: '/', handler: 1 }]), /Malformed segment/);
    assert.throws(() => createRouter([{ method: 'GET', pattern: '/a/:1x', handler: 1 }]), /Malformed/);
  });
});
