import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import type { IncomingMessage } from 'node:http';
import { checkBodyKeys, readBody, parseJson, parseJsonObject, MiB } from '../../src/http/body.ts';
import { HttpError } from '../../src/http/http-error.ts';
import { jsonDepth, MAX_JSON_DEPTH } from '../../src/json-value.ts';

function fakeReq(headers: Record<string, string> = {}): PassThrough & { headers: Record<string, string> } {
  return Object.assign(new PassThrough(), { headers });
}

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (err instanceof HttpError) return err.code;
    throw err;
  }
  assert.fail('expected a rejection');
}

describe('body', () => {
  it('reads a body that arrives in chunks, byte for byte', async () => {
    const req = fakeReq();
    const p = readBody(req as unknown as IncomingMessage, { limit: 100 });
    req.write(Buffer.from('{"a":'));
    req.write(Buffer.from([0xe2, 0x82]));
    req.end(Buffer.from([0xac, 0x7d]));
    assert.deepEqual(await p, Buffer.from('{"a":€}'));
  });

  it('reads an empty body as zero bytes', async () => {
    const req = fakeReq();
    const p = readBody(req as unknown as IncomingMessage, { limit: 100 });
    req.end();
    assert.equal((await p).length, 0);
  });

  it('rejects a declared Content-Length over the limit before reading anything', async () => {
    const req = fakeReq({ 'content-length': String(MiB + 1) });
    assert.equal(await codeOf(readBody(req as unknown as IncomingMessage, { limit: MiB })), 'payload_too_large');
  });

  it('accepts a body of exactly the limit', async () => {
    const req = fakeReq({ 'content-length': '10' });
    const p = readBody(req as unknown as IncomingMessage, { limit: 10 });
    req.end(Buffer.alloc(10, 0x61));
    assert.equal((await p).length, 10);
  });

  it('counts bytes as they arrive so a chunked body without a length still stops at the limit', async () => {
    const req = fakeReq({ 'transfer-encoding': 'chunked' });
    const p = readBody(req as unknown as IncomingMessage, { limit: 1000 });
    for (let i = 0; i < 5; i++) req.write(Buffer.alloc(300));
    assert.equal(await codeOf(p), 'payload_too_large');
    req.end();
  });

  it('does not trust a Content-Length that understates the body', async () => {
    const req = fakeReq({ 'content-length': '5' });
    const p = readBody(req as unknown as IncomingMessage, { limit: 8 });
    req.end(Buffer.alloc(20));
    assert.equal(await codeOf(p), 'payload_too_large');
  });

  it('gives up on a body that trickles in too slowly', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const req = fakeReq();
    const p = readBody(req as unknown as IncomingMessage, { limit: 100, timeoutMs: 1000 });
    req.write('{');
    t.mock.timers.tick(1001);
    assert.equal(await codeOf(p), 'bad_request');
  });

  it('turns a stream error into bad_request', async () => {
    const req = fakeReq();
    const p = readBody(req as unknown as IncomingMessage, { limit: 100 });
    req.destroy(new Error('socket hang up'));
    assert.equal(await codeOf(p), 'bad_request');
  });

  it('parses JSON and answers invalid_json to empty or malformed bytes', () => {
    assert.deepEqual(parseJson(Buffer.from('{"a":[1,2]}')), { a: [1, 2] });
    assert.equal(parseJson(Buffer.from('null')), null);
    for (const bad of ['', '{', '{"a":1,}', "{'a':1}", 'undefined', '\u0000']) {
      assert.throws(() => parseJson(Buffer.from(bad)), (err: unknown) => err instanceof HttpError && err.code === 'invalid_json', JSON.stringify(bad));
    }
  });

  it('never echoes the malformed input in its message', () => {
    try {
      parseJson(Buffer.from('{"token":"s3cret"'));
      assert.fail('accepted malformed JSON');
    } catch (err) {
      assert.ok(err instanceof HttpError);
      assert.doesNotMatch(err.message, /s3cret/);
    }
  });

  it('insists on an object at the top level for route bodies', () => {
    assert.deepEqual(parseJsonObject(Buffer.from('{"x":1}')), { x: 1 });
    for (const bad of ['[]', '1', '"s"', 'null', 'true']) {
      assert.throws(() => parseJsonObject(Buffer.from(bad)), (err: unknown) => err instanceof HttpError && err.code === 'bad_request', bad);
    }
  });

  it('refuses an unknown field by its name, echoing at most 64 characters of it', () => {
    const refusal = (message: string) => (err: unknown) =>
      err instanceof HttpError && err.code === 'invalid_param' && err.message === message;
    assert.throws(() => checkBodyKeys({ brief: 'b', typo: 1 }, ['brief'], 'in a start'),
      refusal('Unknown field "typo" in a start'));
    assert.throws(() => checkBodyKeys({ ['k'.repeat(100_000)]: 1 }, new Set(['brief'])),
      refusal(`Unknown field "${'k'.repeat(64)}…"`));
  });
});

describe('JSON nesting limit', () => {
  it('refuses a body nested deeper than the limit with invalid_json before parsing', () => {
    const deep = Buffer.from(`{"data":${'['.repeat(100_000)}${']'.repeat(100_000)}}`);
    assert.throws(() => parseJson(deep), (err: unknown) => err instanceof HttpError && err.code === 'invalid_json');
  });
  it('accepts exactly the limit and ignores brackets inside strings', () => {
    const ok = `${'['.repeat(MAX_JSON_DEPTH)}"[[[[{{\\"[["${']'.repeat(MAX_JSON_DEPTH)}`;
    assert.equal(jsonDepth(Buffer.from(ok)), MAX_JSON_DEPTH);
    assert.ok(Array.isArray(parseJson(Buffer.from(ok))));
    assert.throws(() => parseJson(Buffer.from(`[${ok}]`)), HttpError);
  });
  it('scans a body with more brackets than the limit, and passes one that has them only in strings', () => {
    const inStrings = Buffer.from(JSON.stringify({ a: '[{'.repeat(MAX_JSON_DEPTH), b: [[{}]] }));
    assert.deepEqual(parseJson(inStrings), { a: '[{'.repeat(MAX_JSON_DEPTH), b: [[{}]] });
    const wide = Buffer.from(JSON.stringify(Array.from({ length: 200 }, () => ({ x: [1] }))));
    assert.equal((parseJson(wide) as unknown[]).length, 200);
    const deepObjects = `${'{"a":'.repeat(MAX_JSON_DEPTH)}[1]${'}'.repeat(MAX_JSON_DEPTH)}`;
    assert.throws(() => parseJson(Buffer.from(deepObjects)), HttpError);
  });
  it('counts like a byte-at-a-time string/escape state machine over fuzzed text', () => {
    // The reference: one state flag, a backslash in a string skips one byte, brackets count outside strings only.
    const reference = (bytes: Buffer): number => {
      let depth = 0;
      let deepest = 0;
      let inString = false;
      for (let i = 0; i < bytes.length; i++) {
        const c = String.fromCharCode(bytes[i]!);
        if (inString) {
          if (c === '\\') i++;
          else if (c === '"') inString = false;
        } else if (c === '"') inString = true;
        else if (c === '[' || c === '{') deepest = Math.max(deepest, ++depth);
        else if (c === ']' || c === '}') depth--;
      }
      return deepest;
    };
    const alphabet = Buffer.from('[]{}"\\"\\\\a:, ');
    let seed = 12345;
    const next = (): number => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    for (const fixed of ['"\\\\"[', '"\\"[', '["\\', '"', '[[]"]"[', '{"a":"\\\\\\"}"}']) {
      assert.equal(jsonDepth(Buffer.from(fixed)), reference(Buffer.from(fixed)), fixed);
    }
    for (let t = 0; t < 20_000; t++) {
      const bytes = Buffer.alloc(Math.floor(next() * 48));
      for (let i = 0; i < bytes.length; i++) {
        bytes[i] = next() < 0.05 ? Math.floor(next() * 256) : alphabet[Math.floor(next() * alphabet.length)]!;
      }
      assert.equal(jsonDepth(bytes), reference(bytes), bytes.toString('latin1'));
    }
  });
});
