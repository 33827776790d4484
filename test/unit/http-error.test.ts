import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { HttpError, errorBody, errorStatus, invalidField } from '../../src/http/http-error.ts';

// DESIGN §4's status table, written out again so a change to either side is noticed; 408/414/431 are the
// codes for requests Node's parser refuses before routing (src/http/http-server.ts); proxied_request is the
// refusal of a loopback-only route relayed by a proxy (src/http/guards.ts); forbidden_source is a runner token's
// batch for another source (src/control/settings.ts); forbidden_run a batch writing a run bound to another runner's key
// (src/control/ingest-apply.ts).
const DESIGN_TABLE: Record<number, string[]> = {
  400: ['bad_request', 'invalid_json', 'invalid_param'],
  401: ['unauthorized', 'invalid_signature'],
  403: ['loopback_only', 'forbidden_host', 'forbidden_origin', 'proxied_request', 'forbidden_source',
    'forbidden_run'],
  404: ['not_found'],
  405: ['method_not_allowed'],
  408: ['request_timeout'],
  409: ['invalid_transition', 'conflict'],
  413: ['payload_too_large'],
  414: ['uri_too_long'],
  415: ['unsupported_media_type'],
  429: ['too_many_requests'],
  431: ['header_too_large'],
  500: ['internal_error'],
  503: ['not_configured', 'unavailable'],
};

describe('http-error', () => {
  it('maps every code of the design table to its status and knows no other code', () => {
    const expected = Object.entries(DESIGN_TABLE).flatMap(([status, codes]) => codes.map((c) => [c, Number(status)] as const));
    assert.deepEqual(Object.entries(errorStatus).sort(), expected.map(([c, s]) => [c, s]).sort());
  });

  it('takes its status from the code so the two cannot disagree', () => {
    const err = new HttpError('conflict', 'Config changed');
    assert.equal(err.status, 409);
    assert.equal(err.code, 'conflict');
    assert.equal(err.message, 'Config changed');
    assert.deepEqual(err.headers, {});
    assert.ok(err instanceof Error);
  });

  it('carries extra headers such as Allow and WWW-Authenticate', () => {
    assert.deepEqual(new HttpError('method_not_allowed', 'no', { allow: 'GET, HEAD' }).headers, { allow: 'GET, HEAD' });
  });

  it('renders exactly {"error":{"code","message"}}', () => {
    assert.equal(JSON.stringify(errorBody('not_found', 'No run "local/r1"')), '{"error":{"code":"not_found","message":"No run \\"local/r1\\""}}');
  });

  it('names the field an invalid_param is about, and only then', () => {
    const err = invalidField('retention_days', 'Setting "retention_days" must be an integer (got string)');
    assert.equal(err.status, 400);
    assert.equal(err.headers['svc-error-field'], 'retention_days');
    assert.deepEqual(errorBody(err.code, err.message).error, {
      code: 'invalid_param', message: err.message,
    });
    assert.deepEqual(new HttpError('invalid_param', 'x').headers, {});
  });
});
