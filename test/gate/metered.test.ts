// Metered cost at the gate: the usage each model API family returns (JSON and streamed), read from the bytes as they
// pass, priced by the table, recorded per call; a body the gate cannot read is forwarded untouched as "usage unknown";
// a budget the meter says is reached refuses the next model call. The model APIs are loopback stand-ins.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, request, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { connect as tcpConnect } from 'node:net';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import {
  brotliCompressSync, constants, createZstdCompress, deflateSync, gzipSync, zstdCompressSync,
} from 'node:zlib';
import { buffer } from 'node:stream/consumers';
import { startGate, type Gate } from '../../src/gate/gate.ts';
import { parseGatePolicy } from '../../src/gate/policy.ts';
import { generationEndpoint, modelPath, modelRoute } from '../../src/gate/model-apis.ts';
import { callCost, highestPrice, loadPriceTable, priceOf, PRICES } from '../../src/gate/prices.ts';
import { requestMeter } from '../../src/gate/request-meter.ts';
import { OUTPUT_BOUND, unansweredCall, usageMeter, type Asked } from '../../src/gate/usage.ts';
import { budgetHeld, countCall, reachedBudget, refusalText, type RunCount } from '../../src/gate/budgets.ts';
import type { EgressRecord } from '../../src/gate/evidence.ts';
import { gateRequest, recordingConnect, tableResolver, tempDir } from './helpers.ts';
import { makeCert as makeCertFor } from '../trigger/standins.ts';

/** What the stand-in answers next: a content type and the body's pieces, each written as its own chunk. */
interface Answer {
  type: string;
  pieces: Array<string | Buffer>;
  encoding?: string;
}

const sse = (events: Array<[string, unknown]>): string =>
  events.map(([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`).join('');

/** Splits text into pieces of `size` bytes: usage split across chunk boundaries at every offset. */
const bytesOf = (text: string, size: number): Buffer[] => {
  const b = Buffer.from(text);
  const out: Buffer[] = [];
  for (let i = 0; i < b.length; i += size) out.push(b.subarray(i, i + size));
  return out;
};

// The endpoints (model-apis.ts modelPath) the request reader is picked by.
const ENDPOINT_anthropic = '/v1/messages';
const ENDPOINT_openai = '/v1/chat/completions';
const ENDPOINT_gemini = '/v1beta/models/gemini-2.5-pro:streamGenerateContent';

const ANTHROPIC_JSON = JSON.stringify({
  id: 'msg_1', type: 'message', model: 'claude-sonnet-4-5-20250929',
  content: [{ type: 'text', text: 'the "usage": {"input_tokens": 999999} inside text is only text' },
    { type: 'tool_use', name: 'x', input: { usage: { input_tokens: 5_000_000 } } }],
  usage: { input_tokens: 1000, output_tokens: 2000, cache_creation_input_tokens: 100, cache_read_input_tokens: 4000 },
});
// 1000×3 + 2000×15 + 100×3.75 + 4000×0.3 per million
const ANTHROPIC_USD = (1000 * 3 + 2000 * 15 + 100 * 3.75 + 4000 * 0.3) / 1e6;

const ANTHROPIC_SSE = sse([
  ['message_start', { type: 'message_start', message: { model: 'claude-haiku-4-5', usage: {
    input_tokens: 10_000, output_tokens: 1, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 } } }],
  ['content_block_delta', { type: 'content_block_delta', delta: { type: 'text_delta', text: 'usage' } }],
  ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 3000 } }],
  ['message_stop', { type: 'message_stop' }],
]);
const ANTHROPIC_SSE_USD = (10_000 * 1 + 3000 * 5) / 1e6;

const CHAT_SSE = [
  `data: ${JSON.stringify({ model: 'gpt-4.1-mini', choices: [{ delta: { content: 'hi' } }], usage: null })}\r\n\r\n`,
  `data: ${JSON.stringify({ model: 'gpt-4.1-mini', choices: [], usage: { prompt_tokens: 5000, completion_tokens: 700,
    prompt_tokens_details: { cached_tokens: 1000 } } })}\r\n\r\n`,
  'data: [DONE]\r\n\r\n',
].join('');
const CHAT_USD = (4000 * 0.4 + 1000 * 0.1 + 700 * 1.6) / 1e6;

const RESPONSES_SSE = sse([
  ['response.created', { type: 'response.created', response: { model: 'gpt-5-codex', usage: null } }],
  ['response.output_text.delta', { type: 'response.output_text.delta', delta: '{"usage":1}' }],
  ['response.completed', { type: 'response.completed', response: { model: 'gpt-5-codex', output: [{ content: [
    { text: 'x'.repeat(50_000) }] }], usage: { input_tokens: 20_000, output_tokens: 1000,
    input_tokens_details: { cached_tokens: 16_000 }, output_tokens_details: { reasoning_tokens: 400 } } } }],
]);
const RESPONSES_USD = (4000 * 1.25 + 16_000 * 0.125 + 1000 * 10) / 1e6;

const GEMINI_JSON = JSON.stringify({
  candidates: [{ content: { parts: [{ text: 'ok' }] } }], modelVersion: 'gemini-2.5-flash',
  usageMetadata: { promptTokenCount: 3000, candidatesTokenCount: 200, thoughtsTokenCount: 300,
    cachedContentTokenCount: 1000 },
});
const GEMINI_USD = (2000 * 0.3 + 1000 * 0.03 + 500 * 2.5) / 1e6;
const GEMINI_SSE = [1, 2].map((n) => `data: ${JSON.stringify({ candidates: [{ content: { parts: [{ text: `${n}` }] } }],
  usageMetadata: { promptTokenCount: 3000, candidatesTokenCount: 100 * n } })}\r\n\r\n`).join('');

/** A request the reader stopped at: what it asked unknown (one answer of OUTPUT_BOUND at the table's top), and why. */
function assertNotRead(got: Asked, why: string, message?: string): void {
  const { doubt, ...rest } = got;
  assert.deepEqual({ ...rest, bytes: 0 }, { model: null, maxOutput: null, choices: 1, bytes: 0, unread: true },
    message);
  assert.equal(doubt, `its request was not read: ${why}`, message);
}
const ESCAPED = 'a key or value it cannot read for certain (an escaped key, a second generationConfig, a value past ' +
  '16 KB, nesting past 64 levels)';
const NOT_WHOLE = 'a maximum or count of answers that is no whole number';

describe('metered cost at the gate', () => {
  const tmp = tempDir();
  const records: EgressRecord[] = [];
  let upstream: Server;
  let port: number;
  let next: Answer = { type: 'application/json', pieces: ['{}'] };
  const seenEncodings: Array<string | undefined> = [];
  let seenHeaders: IncomingHttpHeaders = {};
  let gate: Gate;
  let refusal: () => string | null = () => null;
  let upstreamCalls = 0;
  /** Requests whose body the stand-in read whole: only those could an API run. */
  let upstreamBodies = 0;

  before(async () => {
    upstream = createServer((req, res: ServerResponse) => {
      seenEncodings.push(req.headers['accept-encoding']);
      seenHeaders = req.headers;
      upstreamCalls += 1;
      req.resume();
      req.on('end', async () => {
        upstreamBodies += 1;
        const headers: Record<string, string> = { 'content-type': next.type };
        if (next.encoding) headers['content-encoding'] = next.encoding;
        res.writeHead(200, headers);
        for (const piece of next.pieces) {
          res.write(piece);
          await new Promise((r) => setImmediate(r));
        }
        res.end();
      });
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    port = (upstream.address() as AddressInfo).port;
    const base = `http://127.0.0.1:${port}`;
    gate = await startGate({
      policy: parseGatePolicy({ allow: [`127.0.0.1:${port}`] }),
      models: [
        modelRoute('anthropic', base, 'x-api-key', 'k'), modelRoute('openai', `${base}/v1`, 'authorization', 'Bearer k'),
        modelRoute('gemini', base, 'x-goog-api-key', 'k'),
      ],
      connect: recordingConnect().connect, tcpPort: 0, onRecord: (r) => records.push(r),
      meter: { prices: PRICES, refusal: () => refusal() },
    });
  });

  after(async () => {
    await gate.close();
    upstream.closeAllConnections();
    await new Promise((r) => upstream.close(r));
    tmp.remove();
  });

  /** One call through the gate answered with `answer`; the client's body and the call's metered record. */
  async function call(
    path: string, answer: Answer, method = 'POST', body = '{"model":"claude-opus-4-1"}', headers = {},
  ): Promise<{ body: string; status: number; rec: EgressRecord }> {
    next = answer;
    const before = records.length;
    const reply = await gateRequest({ port: gate.port ?? 0 }, path, {
      method, body, headers: { 'accept-encoding': 'gzip, br', ...headers },
    });
    for (let i = 0; records.length === before && i < 1000; i++) await new Promise((r) => setImmediate(r));
    return { body: reply.body, status: reply.status, rec: records.at(-1)! };
  }

  const close = (a: number | null | undefined, b: number): void => assert.ok(a !== null && a !== undefined &&
    Math.abs(a - b) < 1e-12, `${a} ≈ ${b}`);

  it('reads Anthropic usage, JSON and streamed, at every chunk boundary, and prices it by the model it names', async () => {
    for (const size of [1, 7, 64, 100_000]) {
      const json = await call('/_model/anthropic/v1/messages', { type: 'application/json', pieces: bytesOf(ANTHROPIC_JSON, size) });
      assert.equal(json.body, ANTHROPIC_JSON, 'the body reaches the client byte for byte');
      assert.deepEqual({ ...json.rec.metered, usd: null }, { model: 'claude-sonnet-4-5-20250929', tokens_in: 1000,
        tokens_out: 2000, cache_read: 4000, cache_write: 100, usd: null, unknown: null });
      close(json.rec.metered?.usd, ANTHROPIC_USD);
      const stream = await call('/_model/anthropic/v1/messages', {
        type: 'text/event-stream; charset=utf-8', pieces: bytesOf(ANTHROPIC_SSE, size) });
      assert.equal(stream.body, ANTHROPIC_SSE);
      assert.equal(stream.rec.metered?.tokens_out, 3000, 'message_delta carries the running output count');
      close(stream.rec.metered?.usd, ANTHROPIC_SSE_USD);
    }
    assert.ok(seenEncodings.every((e) => e === 'identity'), 'the gate asks for what it can read');
  });

  it('reads OpenAI chat completions and responses usage from their final stream events', async () => {
    for (const size of [3, 4096]) {
      const chat = await call('/_model/openai/chat/completions', { type: 'text/event-stream', pieces: bytesOf(CHAT_SSE, size) });
      assert.equal(chat.rec.metered?.tokens_in, 4000, 'cached input is priced apart');
      assert.equal(chat.rec.metered?.cache_read, 1000);
      close(chat.rec.metered?.usd, CHAT_USD);
      const responses = await call('/_model/openai/responses', { type: 'text/event-stream', pieces: bytesOf(RESPONSES_SSE, size) });
      assert.equal(responses.rec.metered?.model, 'gpt-5-codex');
      close(responses.rec.metered?.usd, RESPONSES_USD);
    }
    const plain = await call('/_model/openai/chat/completions', { type: 'application/json', pieces: [JSON.stringify({
      model: 'gpt-4.1-mini', usage: { prompt_tokens: 5000, completion_tokens: 700, prompt_tokens_details: { cached_tokens: 1000 } },
    })] });
    close(plain.rec.metered?.usd, CHAT_USD);
  });

  it('reads Gemini usageMetadata, JSON and streamed (the last chunk\'s counts), the model from the path', async () => {
    const json = await call('/_model/gemini/v1beta/models/gemini-2.5-flash:generateContent', {
      type: 'application/json', pieces: bytesOf(GEMINI_JSON, 5) });
    close(json.rec.metered?.usd, GEMINI_USD);
    const stream = await call('/_model/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse', {
      type: 'text/event-stream', pieces: bytesOf(GEMINI_SSE, 9) });
    assert.deepEqual([stream.rec.metered?.model, stream.rec.metered?.tokens_out], ['gemini-2.5-pro', 200]);
    close(stream.rec.metered?.usd, (3000 * 1.25 + 200 * 10) / 1e6);
  });

  it('records an unknown model as unpriced, never as $0', async () => {
    const r = await call('/_model/anthropic/v1/messages', { type: 'application/json', pieces: [JSON.stringify({
      model: 'claude-next-9', usage: { input_tokens: 5, output_tokens: 5 } })] });
    assert.equal(r.rec.metered?.usd, null);
    assert.equal(r.rec.metered?.tokens_in, 5);
    assert.equal(r.rec.metered?.unknown, null);
  });

  it('forwards a hostile or unreadable response untouched and records its usage as unknown, at its bounds', async () => {
    const hostile: Array<[string, Answer]> = [
      ['a string count', { type: 'application/json', pieces: ['{"model":"claude-haiku-4-5","usage":{"input_tokens":"9"}}'] }],
      ['a huge count', { type: 'application/json', pieces: [`{"model":"claude-haiku-4-5","usage":{"output_tokens":${'9'.repeat(400)}}}`] }],
      ['a negative count', { type: 'application/json', pieces: ['{"model":"claude-haiku-4-5","usage":{"output_tokens":-5}}'] }],
      ['usage not an object', { type: 'application/json', pieces: ['{"model":"claude-haiku-4-5","usage":[1,2]}'] }],
      ['no usage', { type: 'application/json', pieces: ['{"model":"claude-haiku-4-5"}'] }],
      ['cut short', { type: 'application/json', pieces: ['{"model":"claude-haiku-4-5","usage":{"input_tokens":5'] }],
      ['gzip', { type: 'application/json', encoding: 'gzip', pieces: [Buffer.from([0x1f, 0x8b, 8, 0, 0, 0])] }],
      ['html', { type: 'text/html', pieces: ['<p>usage</p>'] }],
      ['a usage object past the cap', { type: 'application/json', pieces: [
        `{"model":"claude-haiku-4-5","usage":{"input_tokens":1,"pad":"${'x'.repeat(40_000)}"}}`] }],
      ['nesting 100k deep', { type: 'application/json', pieces: ['{"usage":', '['.repeat(100_000), ']'.repeat(100_000), '}'] }],
    ];
    for (const [what, answer] of hostile) {
      const r = await call('/_model/anthropic/v1/messages', answer);
      assert.equal(r.status, 200, what);
      const sent = Buffer.concat(answer.pieces.map((p) => Buffer.from(p)));
      if (!answer.encoding) assert.equal(r.body, sent.toString('utf8'), `${what}: forwarded untouched`);
      assert.match(r.rec.metered?.unknown ?? '', /./, `${what}: usage unknown`);
      // The request (27 bytes) set no max_tokens: its input at its bytes, its output at OUTPUT_BOUND, priced by the
      // model the response named, else the one the request did (claude-opus-4-1).
      const named = r.rec.metered?.model === 'claude-haiku-4-5';
      assert.equal(r.rec.metered?.model, named ? 'claude-haiku-4-5' : 'claude-opus-4-1', what);
      assert.deepEqual([r.rec.metered?.tokens_in, r.rec.metered?.tokens_out], [27, OUTPUT_BOUND], what);
      close(r.rec.metered?.usd, named ? (27 * 1 + OUTPUT_BOUND * 5) / 1e6 : (27 * 15 + OUTPUT_BOUND * 75) / 1e6);
    }
  });

  it('refuses a model call with a plain 429 while the meter says a budget is reached, and records the refusal', async () => {
    refusal = () => 'the run\'s budget of $0.25 is reached (metered $0.40)';
    const reply = await gateRequest({ port: gate.port ?? 0 }, '/_model/anthropic/v1/messages', {
      method: 'POST', body: '{}' });
    refusal = () => null;
    assert.equal(reply.status, 429);
    assert.match(reply.body, /^svc gate: the run's budget of \$0\.25 is reached/);
    assert.equal(records.at(-1)?.decision, 'denied');
    assert.equal(records.at(-1)?.status, 429);
  });

  it('lets the call that crosses the budget mid-stream finish, and refuses the next before it reaches the API',
    async () => {
      const from = records.length;
      const spent = (): number => records.slice(from).reduce((sum, r) => sum + (r.metered?.usd ?? 0), 0);
      refusal = () => (spent() >= 0.02 ? 'the run\'s budget of $0.02 is reached' : null);
      const crossing = await call('/_model/anthropic/v1/messages', {
        type: 'text/event-stream', pieces: bytesOf(ANTHROPIC_SSE, 16) });
      assert.equal(crossing.status, 200);
      assert.equal(crossing.body, ANTHROPIC_SSE, 'the crossing call streams to its end');
      close(spent(), ANTHROPIC_SSE_USD);
      const calledBefore = upstreamCalls;
      const next = await call('/_model/anthropic/v1/messages', { type: 'application/json', pieces: [ANTHROPIC_JSON] });
      refusal = () => null;
      assert.equal(next.status, 429);
      assert.match(next.body, /budget of \$0\.02 is reached/);
      assert.equal(upstreamCalls, calledBefore, 'the refused call never reached the model API');
    });

  it('lays the operator\'s price file over the table, and refuses a bad one naming it', () => {
    const file = `${tmp.path}/prices.json`;
    writeFileSync(file, JSON.stringify({ date: '2026-12-01', models: { 'Scripted-Model': { input: 100, output: 200 } } }));
    const table = loadPriceTable(file);
    assert.equal(table.date, '2026-12-01');
    assert.deepEqual(table.models['scripted-model'], { input: 100, output: 200 });
    assert.ok(table.models['claude-sonnet-4-5'], 'the built-in rows stay');
    // A row replaces the built-in row whole; a long-context tier is kept when the file gives it.
    writeFileSync(file, JSON.stringify({ date: '2026-12-01', models: { 'gemini-2.5-pro': { input: 1, output: 8,
      long: { above: 200_000, input: 2, output: 12 } } } }));
    assert.deepEqual(loadPriceTable(file).models['gemini-2.5-pro'],
      { input: 1, output: 8, long: { above: 200_000, input: 2, output: 12 } });
    writeFileSync(file, JSON.stringify({ date: '2026-12-01', models: { x: { input: 1, output: 2, long: { input: 2,
      output: 4 } } } }));
    assert.throws(() => loadPriceTable(file), /x\.long\.above": must be a number of prompt tokens/);
    writeFileSync(file, JSON.stringify({ date: '2026-12-01', models: { x: { input: '1', output: 2 } } }));
    assert.throws(() => loadPriceTable(file), /x\.input/);
    for (const [text, why] of [['{"date":', /prices\.json is not JSON/],
      ['{"models": {}}', /prices\.json must be \{"date"/],
      ['{"date": "2026-12-01", "models": {"x": 1}}', /x": must be \{"input"/]] as const) {
      writeFileSync(file, text);
      assert.throws(() => loadPriceTable(file), (err: Error) => err.name === 'GatePolicyError' && why.test(err.message));
    }
  });

  it('names the server\'s daily cap when that is the budget reached', () => {
    const reached = reachedBudget({ run: 0, repoDay: 1, serverDay: 5 }, { run: null, repoDay: 2, serverDay: 5 });
    assert.deepEqual(reached, { kind: 'server-day', limit: 5, spent: 5 });
    // No amount: the day's spending is every repository's, not the run's to read.
    assert.equal(refusalText(reached!, 'acme/web', false), 'this server\'s daily budget of $5.00 is reached: model ' +
      'calls are refused until the operator raises it');
  });

  it('counts an Anthropic stream closed before its message_delta at its input and the request\'s max_tokens', () => {
    const cut = ANTHROPIC_SSE.slice(0, ANTHROPIC_SSE.indexOf('event: message_delta'));
    const meter = usageMeter('anthropic', '/v1/messages', { 'content-type': 'text/event-stream' }, PRICES);
    meter.push(Buffer.from(cut));
    const asked = requestMeter('anthropic', ENDPOINT_anthropic, {});
    // A key given twice: the larger counts; one inside a message is no request's maximum.
    asked.push(Buffer.from('{"model":"claude-opus-4-1","max_tokens":500,"messages":[{"max_tokens":9000}],' +
      '"max_tokens":20}'));
    const read = meter.end(asked.read(), false);
    assert.deepEqual({ ...read, usd: null }, { model: 'claude-haiku-4-5', tokens_in: 10_000, tokens_out: 500,
      cache_read: 0, cache_write: 0, usd: null, unknown: 'the response ended before its final usage' });
    close(read.usd, (10_000 * 1 + 500 * 5) / 1e6);
  });

  it('reads the request\'s model and output maximum at every chunk boundary, never from inside a string', () => {
    const body = JSON.stringify({ model: 'gpt-5', messages: [{ role: 'user', content: 'a "max_tokens": 999999 \\ ' +
      '{"max_output_tokens": 5} \\"' }], 'max_output_tokens': 700, stream: true });
    for (const size of [1, 2, 3, 7, 4096]) {
      const asked = requestMeter('openai', ENDPOINT_openai, {});
      for (const piece of bytesOf(body, size)) asked.push(piece);
      assert.deepEqual(asked.read(), { model: 'gpt-5', maxOutput: 700, choices: 1, bytes: Buffer.byteLength(body) }, `${size}`);
    }
  });

  it('stops reading a request past 64 values or 4 MiB, and counts what a later value could change as unknown', () => {
    const repeated = requestMeter('anthropic', ENDPOINT_anthropic, {});
    repeated.push(Buffer.from(`{${'"max_tokens":1,'.repeat(65)}"model":"claude-haiku-4-5"}`));
    assertNotRead(repeated.read(), 'more than 64 values of the keys the gate reads');
    const long = requestMeter('anthropic', ENDPOINT_anthropic, {});
    long.push(Buffer.from('{"model":"claude-haiku-4-5","max_tokens":10,"messages":"'));
    for (let i = 0; i < 33; i++) long.push(Buffer.alloc(1024 * 1024, 0x61));
    long.push(Buffer.from('","max_tokens":1}'));
    assertNotRead(long.read(), 'a body past 32 MiB');
    const short = requestMeter('anthropic', ENDPOINT_anthropic, {});
    short.push(Buffer.from(`{${'"max_tokens":1,'.repeat(63)}"model":"claude-haiku-4-5"}`));
    assert.deepEqual({ ...short.read(), bytes: 0 }, { model: 'claude-haiku-4-5', maxOutput: 1, choices: 1, bytes: 0 });
  });

  it('counts a call naming no model at the table\'s highest prices, and a cut Gemini stream\'s output at its bound',
    () => {
      const nameless = usageMeter('openai', '/v1/responses', { 'content-type': 'text/event-stream' }, PRICES);
      const top = highestPrice(PRICES);
      const guessed = nameless.end({ model: null, maxOutput: 100, choices: 1, bytes: 1000 }, false);
      close(guessed.usd, (1000 * top.input + 100 * top.output) / 1e6);
      const gemini = usageMeter('gemini', '/v1beta/models/gemini-2.5-pro:streamGenerateContent', {
        'content-type': 'text/event-stream' }, PRICES);
      gemini.push(Buffer.from(GEMINI_SSE));
      const cut = gemini.end({ model: null, maxOutput: null, choices: 1, bytes: 10 }, false);
      assert.deepEqual([cut.tokens_in, cut.tokens_out, cut.unknown], [3000, OUTPUT_BOUND,
        'the response ended before its final usage']);
    });

  it('counts a call naming no model at the whole table\'s highest prices on the vendor\'s own API too (it serves ' +
    'models the table lacks: gpt-5-pro, o1-pro)', async () => {
    const dir = tempDir();
    const cert = makeCertFor(dir.path, 'api.openai.com', ['DNS:api.openai.com']);
    const api = createHttpsServer({ key: cert.key, cert: cert.cert }, (req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"output":[]}'));
    });
    await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
    const apiPort = (api.address() as AddressInfo).port;
    const seen: EgressRecord[] = [];
    // The route at OpenAI's own base, its name resolved and its connection led to the loopback stand-in.
    const own = await startGate({
      policy: parseGatePolicy({ allow: ['api.openai.com', '127.0.0.1:443'] }),
      models: [modelRoute('openai', 'https://api.openai.com/v1', 'authorization', 'Bearer k')],
      resolve: tableResolver({ 'api.openai.com': ['127.0.0.1'] }).resolve,
      connect: () => tcpConnect(apiPort, '127.0.0.1'), ca: cert.cert, tcpPort: 0,
      onRecord: (r) => seen.push(r), meter: { prices: PRICES, refusal: () => null },
    });
    try {
      const body = '{"input":"hi","max_output_tokens":100}';
      const reply = await gateRequest({ port: own.port ?? 0 }, '/_model/openai/responses',
        { method: 'POST', body });
      assert.equal(reply.status, 200);
      for (let i = 0; seen.length === 0 && i < 1000; i++) await new Promise((r) => setImmediate(r));
      const top = highestPrice(PRICES);
      assert.deepEqual([seen[0]?.metered?.model, seen[0]?.metered?.tokens_out], [null, OUTPUT_BOUND]);
      close(seen[0]?.metered?.usd, (body.length * top.input + OUTPUT_BOUND * top.output) / 1e6);
    } finally {
      await own.close();
      api.closeAllConnections();
      await new Promise((r) => api.close(r));
      dir.remove();
    }
  });

  it('counts each answer a request asks for (n, candidateCount) at the bound, and a whole response with no usage at ' +
    'OUTPUT_BOUND whatever maximum the agent wrote', async () => {
    const chat = `data: ${JSON.stringify({ model: 'gpt-4o-mini', choices: [{ delta: { content: 'hi' } }] })}\n\n` +
      'data: [DONE]\n\n';
    const ask = '{"model":"gpt-4o-mini","n":128,"max_completion_tokens":100,"stream":true}';
    const answer = { type: 'text/event-stream', pieces: [chat] };
    const whole = await call('/_model/openai/chat/completions', answer, 'POST', ask);
    assert.deepEqual([whole.rec.metered?.tokens_out, whole.rec.metered?.unknown],
      [OUTPUT_BOUND * 128, 'the response carried no usage']);
    // Cut before its usage: the API stopped each of the 128 answers at the request's maximum.
    const openai = requestMeter('openai', ENDPOINT_openai, {});
    openai.push(Buffer.from(ask));
    const meter = usageMeter('openai', '/v1/chat/completions', { 'content-type': 'text/event-stream' }, PRICES);
    meter.push(Buffer.from(chat.slice(0, 40)));
    assert.equal(meter.end(openai.read(), false).tokens_out, 12_800);
    const gemini = requestMeter('gemini', ENDPOINT_gemini, {});
    gemini.push(Buffer.from('{"contents":[],"generationConfig":{"candidateCount":4,"maxOutputTokens":50}}'));
    assert.deepEqual({ ...gemini.read(), bytes: 0 }, { model: null, maxOutput: 50, choices: 4, bytes: 0 });
    const cut = usageMeter('gemini', '/v1beta/models/gemini-2.5-pro:streamGenerateContent', {
      'content-type': 'text/event-stream' }, PRICES);
    cut.push(Buffer.from(GEMINI_SSE));
    assert.equal(cut.end(gemini.read(), false).tokens_out, 200);
    // A choice count that is no whole number: a request not read, counted at one answer of OUTPUT_BOUND (not the
    // family's most, which let one cheap call fill the server's day cap).
    for (const [route, body] of [['openai', '{"n":2.5,"max_tokens":10}'],
      ['gemini', '{"generationConfig":{"candidateCount":"8","maxOutputTokens":10}}']] as const) {
      const asked = requestMeter(route, route === 'gemini' ? ENDPOINT_gemini : ENDPOINT_openai, {});
      asked.push(Buffer.from(body));
      assertNotRead(asked.read(), NOT_WHOLE, body);
    }
  });

  it('reads a maximum or count of answers given as null as the APIs do, absent: no doubt, no maximum, one answer',
    () => {
    const read = (route: 'openai' | 'gemini' | 'anthropic', endpoint: string, body: string) => {
      const asked = requestMeter(route, endpoint, {});
      asked.push(Buffer.from(body));
      return { ...asked.read(), bytes: 0 };
    };
    const none = { maxOutput: null, choices: 1, bytes: 0 };
    assert.deepEqual(read('openai', '/v1/responses', '{"model":"gpt-5","max_output_tokens":null,"n":null}'),
      { model: 'gpt-5', ...none });
    assert.deepEqual(read('gemini', ENDPOINT_gemini, '{"generationConfig":{"candidateCount":null,' +
      '"maxOutputTokens":null}}'), { model: null, ...none });
    // A maximum given twice, once as null: the API may read the null, so no maximum bounds the call.
    assert.deepEqual(read('anthropic', ENDPOINT_anthropic, '{"model":"claude-haiku-4-5","max_tokens":100,' +
      '"max_tokens":null}'), { model: 'claude-haiku-4-5', ...none });
    assert.deepEqual(read('openai', ENDPOINT_openai, '{"model":"gpt-4o","n":3,"n":null,"max_tokens":9}'),
      { model: 'gpt-4o', maxOutput: 9, choices: 3, bytes: 0 });
  });

  it('stops reading a request at an escaped key, a maximum that is no whole number, or nesting it cannot follow; and ' +
    'reads a key past any nesting it skips', () => {
    const read = (route: string, body: string) => {
      const asked = requestMeter(route, route === 'gemini' ? ENDPOINT_gemini : ENDPOINT_openai, {});
      for (const piece of bytesOf(body, 5)) asked.push(piece);
      return { ...asked.read(), bytes: 0 };
    };
    for (const [body, why] of [
      ['{"model":"claude-haiku-4-5","max_tokens":100,"max_tok\\u0065ns":50000}', ESCAPED],
      ['{"model":"claude-haiku-4-5","max_tokens":100,"max_tokens":"50000"}', NOT_WHOLE],
      ['{"model":"claude-haiku-4-5","max_tokens":100,"model":"claude-opus-4-1"}', 'a model named twice or not by name'],
      [`{"model":"claude-haiku-4-5","max_tokens":100,"max_tokens":${'9'.repeat(20_000)}}`, ESCAPED],
      [`${'['.repeat(70)}{"model":"claude-haiku-4-5","max_tokens":100}${']'.repeat(70)}`,
        'a body that is no JSON object'],
    ]) assertNotRead(read('anthropic', body!), why!, body!.slice(0, 80));
    for (const body of ['{"generationConfig":{"maxOutputTokens":10,"maxOutput\\u0054okens":9000}}',
      '{"generationConfig":{"maxOutputTokens":10},"generationConfig":{"temperature":1}}',
      '{"generationConfig":{"maxOutputTokens":10},"generationConfig":null}']) {
      assertNotRead(read('gemini', body), ESCAPED, body);
    }
    // Nesting in a message is skipped whole, however deep: the maximum after it is read.
    const deep = `{"model":"claude-haiku-4-5","max_tokens":100,"messages":${'['.repeat(100)}${']'.repeat(100)},` +
      '"max_tokens":50000}';
    assert.deepEqual(read('anthropic', deep), { model: 'claude-haiku-4-5', maxOutput: 50_000, choices: 1, bytes: 0 });
    // Escapes in values (a message's text) are no reason to stop.
    const text = JSON.stringify({ model: 'claude-haiku-4-5',
      messages: [{ content: 'a\\"b\\u0065\n"' }, { content: 'ends in backslashes \\\\' }, '\\"'], max_tokens: 9 });
    for (let size = 1; size <= 9; size++) {
      const asked = requestMeter('anthropic', ENDPOINT_anthropic, {});
      for (const piece of bytesOf(text, size)) asked.push(piece);
      const got = { ...asked.read(), bytes: 0 };
      assert.deepEqual(got, { model: 'claude-haiku-4-5', maxOutput: 9, choices: 1, bytes: 0 }, `${size}`);
    }
  });

  it('counts a call that generates nothing and carries no usage (a stored completions list) as unknown at $0',
    async () => {
    for (const path of ['/_model/openai/chat/completions?limit=1', '/_model/openai/responses/resp_1']) {
      const listed = await call(path, { type: 'application/json', pieces: ['{"object":"list","data":[]}'] }, 'GET', '');
      assert.equal(listed.status, 200, listed.body);
      assert.deepEqual(listed.rec.metered, { model: null, tokens_in: 0, tokens_out: 0, cache_read: 0, cache_write: 0,
        usd: 0, unknown: 'the response carried no usage' }, path);
    }
    // A generation is one as the API reads its path: escapes, a trailing slash, `;…` and empty segments included.
    const generation = (method: string, base: string, rest: string): boolean => {
      const resolved = modelPath(base, rest);
      return 'endpoint' in resolved && generationEndpoint(method, resolved.endpoint);
    };
    for (const [base, rest] of [['/v1', '/chat/completions'], ['/v1', '/chat/%63ompletions/'], ['/v1', '/responses;x'],
      ['/', '/v1//messages'], ['/', '/v1beta/models/g:streamGenerateContent'], ['/v1', '/completions']]) {
      assert.ok(generation('POST', base!, rest!), rest);
    }
    for (const [method, rest] of [['GET', '/chat/completions'], ['POST', '/embeddings'],
      ['POST', '/responses/r1/cancel'], ['POST', '/moderations']]) {
      assert.ok(!generation(method!, '/v1', rest!), `${method} ${rest}`);
    }
  });

  it('reads an OpenAI-compatible endpoint of Anthropic or Gemini with the OpenAI reader, and a usage holding none of ' +
    'its reader\'s counts as unknown at its bounds, never $0', async () => {
    const chat = (model: string) => ({ type: 'application/json', pieces: [JSON.stringify({ model,
      choices: [{ message: { content: 'hi' } }], usage: { prompt_tokens: 1000, completion_tokens: 200 } })] });
    for (const [path, model] of [['/_model/anthropic/v1/chat/completions', 'claude-haiku-4-5'],
      ['/_model/gemini/v1beta/openai/chat/completions', 'gemini-2.5-flash']] as const) {
      const { rec } = await call(path, chat(model), 'POST', `{"model":"${model}","max_tokens":10}`);
      const { usd, ...read } = rec.metered!;
      assert.deepEqual(read, { model, tokens_in: 1000, tokens_out: 200, cache_read: 0, cache_write: 0, unknown: null },
        path);
      close(usd, priceOf(PRICES, model)!.input * 1000 / 1e6 + priceOf(PRICES, model)!.output * 200 / 1e6);
    }
    // Anthropic's own endpoint answering another shape's usage: none of its counts, so not a final $0.
    const { rec } = await call('/_model/anthropic/v1/messages', chat('claude-haiku-4-5'), 'POST',
      '{"model":"claude-haiku-4-5","max_tokens":10}');
    assert.deepEqual([rec.metered?.tokens_out, rec.metered?.unknown], [OUTPUT_BOUND, 'the response carried no usage']);
    const nulls = { type: 'application/json', pieces: ['{"model":"claude-haiku-4-5","usage":{"input_tokens":null,' +
      '"output_tokens":null}}'] };
    const nulled = await call('/_model/anthropic/v1/messages', nulls, 'POST', '{"model":"claude-haiku-4-5"}');
    assert.deepEqual([nulled.rec.metered?.tokens_out, nulled.rec.metered?.unknown],
      [OUTPUT_BOUND, 'the response carried no usage']);
  });

  it('prices a Gemini call by the model of its path as the API reads it, never one its query names', async () => {
    const answer = { type: 'application/json', pieces: [JSON.stringify({ candidates: [],
      usageMetadata: { promptTokenCount: 1000, candidatesTokenCount: 100 } })] };
    for (const path of ['/v1beta/models/gemini-2.5-%70ro:generateContent?x=/models/gemini-2.5-flash-lite:',
      '/v1beta/models/gemini-2.5-pro:generateContent?x=/models/gemini-2.5-flash-lite:']) {
      const { rec } = await call(`/_model/gemini${path}`, answer, 'POST', '{"contents":[]}');
      assert.equal(rec.metered?.model, 'gemini-2.5-pro', path);
    }
  });

  it('meters a generation whose raw path ends like a free call, and leaves free calls free, as the API reads the path',
    async () => {
    const answer = { type: 'application/json', pieces: ['{"candidates":[]}'] };
    // The API may drop ";…" from a segment or not: a segment with both ";" and ":" names two methods, and is refused.
    const calls = upstreamCalls;
    for (const method of [':generateContent;:countTokens', ':countTokens;:streamGenerateContent',
      ':countTokens;x:generateContent', '%3AcountTokens;x%3AgenerateContent']) {
      const refused = await call(`/_model/gemini/v1beta/models/gemini-2.5-pro${method}`, answer, 'POST', '{}');
      assert.equal(refused.status, 403, method);
      assert.match(refused.body, /holds both ";" and ":"/, method);
    }
    assert.equal(upstreamCalls, calls, 'none reached the API');
    // Free only when the raw path and the path as the API reads it both say so: an escaped ":" is metered.
    const escaped = await call('/_model/gemini/v1beta/models/gemini-2.5-pro%3AcountTokens', answer, 'POST', '{}');
    assert.deepEqual([escaped.rec.metered?.usd, escaped.rec.metered?.unknown], [0, 'the response carried no usage']);
    const counted = { type: 'application/json', pieces: ['{"totalTokens":12}'] };
    for (const path of ['/_model/gemini/v1beta/models/gemini-2.5-pro:countTokens',
      '/_model/anthropic/v1/messages/count_tokens?beta=true', '/_model/anthropic/v1/messages//count_tokens']) {
      const free = await call(path, counted, 'POST', '{"contents":[]}');
      assert.equal(free.rec.metered, undefined, path);
    }
  });

  it('counts any method but GET or HEAD on a generation endpoint as a generation, and drops method overrides',
    async () => {
    const override = { 'x-http-method-override': 'POST', 'x-method-override': 'POST', 'x-http-method': 'POST' };
    const answer = { type: 'application/json', pieces: ['{"candidates":[]}'] };
    const { rec } = await call('/_model/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent', answer, 'PUT',
      '{"contents":[]}', override);
    assert.deepEqual([rec.metered?.model, rec.metered?.tokens_out, rec.metered?.unknown],
      ['gemini-2.5-pro', OUTPUT_BOUND, 'the response carried no usage']);
    for (const name of Object.keys(override)) assert.equal(seenHeaders[name], undefined, name);
    assert.ok(generationEndpoint('PATCH', '/v1/messages'));
    // Codex compacts its history through /responses/compact: a generation, so a cut one counts at its bounds.
    const compact = await call('/_model/openai/responses/compact', { type: 'application/json', pieces: ['{}'] },
      'POST', '{"model":"gpt-5-codex","input":[]}');
    assert.deepEqual([compact.rec.metered?.model, compact.rec.metered?.tokens_out], ['gpt-5-codex', OUTPUT_BOUND]);
    assert.ok(!generationEndpoint('HEAD', '/v1/messages'));
  });

  it('doubts the bound of a Responses call that continues input the API keeps, and still reads its model and maximum',
    () => {
    const kept = (body: string) => {
      const asked = requestMeter('openai', '/v1/responses', {});
      asked.push(Buffer.from(body));
      return { ...asked.read(), bytes: 0 };
    };
    assert.deepEqual(kept('{"model":"gpt-5","max_output_tokens":100,"previous_response_id":"resp_1","input":[]}'),
      { model: 'gpt-5', maxOutput: 100, choices: 1, bytes: 0,
        doubt: 'its request continues input the API keeps (previous_response_id)' });
    assert.equal(kept('{"model":"gpt-5","conversation":{"id":"conv_1"}}').doubt,
      'its request continues input the API keeps (conversation)');
    // A stored prompt holds input, and its model, that the request's bytes do not; to /completions it is the text.
    assert.equal(kept('{"prompt":{"id":"pmpt_1"},"input":"hi"}').doubt,
      'its request continues input the API keeps (prompt)');
    // An input item referring to one the API keeps, among a whole history's items (more than the 64 values read).
    const history = Array.from({ length: 100 }, () => ({ type: 'message', role: 'user', content: 'x' }));
    assert.equal(kept(JSON.stringify({ model: 'gpt-5', input: [...history, { type: 'item_reference', id: 'msg_1' }] }))
      .doubt, 'its request continues input the API keeps (item_reference)');
    assert.deepEqual(kept(JSON.stringify({ model: 'gpt-5', max_output_tokens: 7, input: history })),
      { model: 'gpt-5', maxOutput: 7, choices: 1, bytes: 0 });
    // A body of endless items is read no further than 20,000 of them (each costs the gate's one event loop).
    const items = (n: number) =>
      JSON.stringify({ model: 'gpt-5', input: Array.from({ length: n }, () => ({ type: 'x' })) });
    assert.equal(kept(items(20_000)).doubt, undefined);
    assert.equal(kept(items(20_001)).doubt, 'its request was not read: more than 20,000 input items');
    const legacy = requestMeter('openai', '/v1/completions', {});
    legacy.push(Buffer.from('{"model":"gpt-4o","prompt":"hi"}'));
    assert.equal(legacy.read().doubt, undefined);
    assert.deepEqual(kept('{"model":"gpt-5","previous_response_id":null,"store":false}'),
      { model: 'gpt-5', maxOutput: null, choices: 1, bytes: 0 });
    const meter = usageMeter('openai', '/v1/responses', { 'content-type': 'text/event-stream' }, PRICES);
    const cut = meter.end(kept('{"model":"gpt-5","previous_response_id":"resp_1"}'), false);
    assert.deepEqual([cut.model, cut.tokens_out, cut.doubt],
      ['gpt-5', OUTPUT_BOUND, 'its request continues input the API keeps (previous_response_id)']);
  });

  it('stops reading a request body it cannot walk: encoded, or not starting with "{" past whitespace', () => {
    const body = '{"model":"claude-haiku-4-5","max_tokens":10}';
    const read = (bytes: Buffer, headers: Record<string, string> = {}) => {
      const asked = requestMeter('anthropic', ENDPOINT_anthropic, headers);
      for (let i = 0; i < bytes.length; i += 3) asked.push(bytes.subarray(i, i + 3));
      return { ...asked.read(), bytes: 0 };
    };
    for (const [name, bytes] of [['BOM', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(body)])],
      ['UTF-16LE', Buffer.from(body, 'utf16le')], ['UTF-16BE', Buffer.from(body, 'utf16le').swap16()],
      ['form', Buffer.from('model=claude-haiku-4-5&max_tokens=10')]] as const) {
      assertNotRead(read(bytes), name === 'UTF-16LE' ? ESCAPED : 'a body that is no JSON object', name);
    }
    assertNotRead(read(Buffer.from(body), { 'content-encoding': 'gzip, br' }), 'the request body is gzip, br-encoded');
    const whole = { model: 'claude-haiku-4-5', maxOutput: 10, choices: 1, bytes: 0 };
    assert.deepEqual(read(Buffer.from(`  \r\n\t${body}`), { 'content-encoding': 'Identity' }), whole);
  });

  it('reads a compressed request body as it is decompressed (gzip, deflate, br, zstd), within the 32 MiB read',
    async () => {
      const body = '{"model":"claude-haiku-4-5","max_tokens":10}';
      const read = async (bytes: Buffer, encoding: string, step = 3) => {
        const asked = requestMeter('anthropic', ENDPOINT_anthropic, { 'content-encoding': encoding });
        for (let i = 0; i < bytes.length; i += step) {
          await new Promise<void>((resolve) => asked.push(bytes.subarray(i, i + step), resolve));
        }
        await new Promise<void>((resolve) => asked.end(resolve));
        return asked.read();
      };
      const compressed: Array<[string, Buffer]> = [['gzip', gzipSync(body)], ['x-gzip', gzipSync(body)],
        ['deflate', deflateSync(body)], ['br', brotliCompressSync(body)], ['ZSTD', zstdCompressSync(body)]];
      for (const [encoding, bytes] of compressed) {
        assert.deepEqual(await read(bytes, encoding), { model: 'claude-haiku-4-5', maxOutput: 10, choices: 1,
          bytes: body.length }, encoding);
      }
      assertNotRead(await read(Buffer.from('not zstd at all'), 'zstd'), 'a body that is not valid zstd');
      // 40 MiB of whitespace in 40 KB: read up to the 32 MiB an honest body may have, decompressed no further.
      const bomb = zstdCompressSync(Buffer.concat([Buffer.from('{"model":"claude-haiku-4-5",'),
        Buffer.alloc(40 * 1024 * 1024, 0x20), Buffer.from('"max_tokens":10}')]));
      const past = await read(bomb, 'zstd');
      assertNotRead(past, 'a body past 32 MiB');
      assert.ok(past.bytes < 40 * 1024 * 1024, `${past.bytes} bytes decompressed`);
      // A frame naming a 128 MiB window (streamed: no content size to shrink it to) would cost the gate ~30 MiB to
      // decode: past RFC 9659's 8 MiB, not read.
      const window27 = await buffer(createZstdCompress({ params: { [constants.ZSTD_c_windowLog]: 27 } }).end(body));
      assertNotRead(await read(window27, 'zstd'), 'a body that is not valid zstd');
      const window23 = await buffer(createZstdCompress({ params: { [constants.ZSTD_c_windowLog]: 23 } }).end(body));
      assert.equal((await read(window23, 'zstd')).maxOutput, 10);
      // A second stream after the first goes upstream, but the decoder stops at the first's end: its bytes are not
      // read, whether they come in the chunk that ends the first (whole, or 3 bytes at a time) or in the next.
      const priority = '{"service_tier":"priority"}';
      for (const [encoding, compress] of [['deflate', deflateSync], ['br', brotliCompressSync]] as const) {
        const stacked = Buffer.concat([compress(body), compress(priority)]);
        for (const step of [3, stacked.length, compress(body).length]) {
          assertNotRead(await read(stacked, encoding, step), 'bytes past the end of the compressed body',
            `${encoding}, ${step} bytes at a time`);
        }
      }
      assertNotRead(await read(Buffer.concat([zstdCompressSync(body), Buffer.from(priority)]), 'zstd'),
        'bytes past the end of the compressed body');
    });

  it('reads a zstd request through the gate: priced without doubt, refused before the API gets one asking the ' +
    'priority tier', async () => {
    const send = (path: string, body: string) => new Promise<{ status: number; rec: EgressRecord }>((resolve, fail) => {
      next = { type: 'application/json', pieces: [ANTHROPIC_JSON] };
      const before = records.length;
      const req = request({ host: '127.0.0.1', port: gate.port ?? 0, method: 'POST', path, agent: false,
        headers: { 'content-type': 'application/json', 'content-encoding': 'zstd' } });
      req.on('response', (res) => {
        res.resume();
        res.on('end', async () => {
          for (let i = 0; records.length === before && i < 1000; i++) await new Promise((r) => setImmediate(r));
          resolve({ status: res.statusCode ?? 0, rec: records.at(-1)! });
        });
      });
      req.on('error', fail);
      req.end(zstdCompressSync(body));
    });
    const read = await send('/_model/anthropic/v1/messages', '{"model":"claude-haiku-4-5","max_tokens":10}');
    assert.equal(read.status, 200);
    close(read.rec.metered?.usd, ANTHROPIC_USD);
    assert.equal(read.rec.metered?.doubt, undefined);
    const bodies = upstreamBodies;
    const priority = await send('/_model/openai/chat/completions', '{"model":"gpt-5","service_tier":"priority"}');
    assert.deepEqual([priority.status, priority.rec.decision], [403, 'denied']);
    assert.equal(upstreamBodies, bodies, 'the API never got the whole request');
  });

  it('counts a call whose request the reader stopped at in doubt even when its usage came whole', async () => {
    const answer = { type: 'application/json', pieces: [ANTHROPIC_JSON] };
    const escaped = await call('/_model/anthropic/v1/messages', answer, 'POST',
      '{"model":"claude-haiku-4-5","m\\u0061x_tokens":10}');
    assert.equal(escaped.status, 200);
    close(escaped.rec.metered?.usd, ANTHROPIC_USD);
    assert.equal(escaped.rec.metered?.doubt, `its request was not read: ${ESCAPED}`);
    const plain = await call('/_model/anthropic/v1/messages', answer, 'POST', '{"model":"claude-haiku-4-5"}');
    assert.equal(plain.rec.metered?.doubt, undefined);
  });

  it('stops at the first backslash of a key, before the key ends, and still reads values full of escapes', () => {
    // A key of escaped quotes running across chunks, never closed: the reader stops at its first backslash.
    const asked = requestMeter('anthropic', ENDPOINT_anthropic, {});
    asked.push(Buffer.from('{"model":"claude-haiku-4-5","max_tokens":10,"'));
    for (let i = 0; i < 4; i++) asked.push(Buffer.from('\\"'.repeat(1000)));
    assertNotRead(asked.read(), ESCAPED);
    const value = requestMeter('anthropic', ENDPOINT_anthropic, {});
    const text = `{"model":"claude-haiku-4-5","messages":"${'\\"'.repeat(3000)}","max_tokens":10}`;
    for (const piece of bytesOf(text, 1000)) value.push(piece);
    assert.deepEqual({ ...value.read(), bytes: 0 }, { model: 'claude-haiku-4-5', maxOutput: 10, choices: 1, bytes: 0 });
  });

  it('reads Gemini\'s snake_case fields as its camelCase ones, a second generation_config as a second one', () => {
    const read = (body: string) => {
      const asked = requestMeter('gemini', ENDPOINT_gemini, {});
      asked.push(Buffer.from(body));
      return { ...asked.read(), bytes: 0 };
    };
    assert.deepEqual(read('{"generation_config":{"max_output_tokens":65536,"candidate_count":8}}'),
      { model: null, maxOutput: 65_536, choices: 8, bytes: 0 });
    assert.deepEqual(read('{"generationConfig":{"maxOutputTokens":1,"candidate_count":8,"max_output_tokens":900}}'),
      { model: null, maxOutput: 900, choices: 8, bytes: 0 });
    assertNotRead(read('{"generationConfig":{"maxOutputTokens":1},"generation_config":{"max_output_tokens":9}}'),
      ESCAPED);
  });

  it('refuses a request asking what the meter cannot price (the priority tier, chat search) before the API gets it ' +
    'whole, and lets a server-side tool only offered through (Codex offers web search on every call)', async () => {
    const answer = { type: 'application/json', pieces: [ANTHROPIC_JSON] };
    const refused: Array<[string, unknown, string]> = [
      ['/_model/openai/chat/completions', { model: 'gpt-5', service_tier: 'priority' }, 'the "priority" service tier'],
      ['/_model/openai/chat/completions', { model: 'gpt-4o-search-preview', web_search_options: {} },
        '"web_search_options"'],
    ];
    for (const [path, body, what] of refused) {
      const bodies = upstreamBodies;
      const got = await call(path, answer, 'POST', JSON.stringify(body));
      assert.equal(got.status, 403, path);
      assert.equal(got.body, `svc gate: the request asks for ${what}, which the gate cannot meter (it prices tokens ` +
        'only): refused on a metered model route\n');
      assert.deepEqual([got.rec.decision, got.rec.status, got.rec.metered], ['denied', 403, undefined], path);
      assert.equal(upstreamBodies, bodies, `${path}: the API never got the whole request`);
    }
    const codex = { model: 'gpt-5-codex', tools: [{ type: 'function', name: 'shell' },
      { type: 'web_search', external_web_access: false }] };
    for (const [path, body] of [
      ['/_model/anthropic/v1/messages', { model: 'claude-sonnet-4-5', tools: [{ type: 'bash_20250124', name: 'bash' },
        { type: 'web_search_20250305', name: 'web_search', max_uses: 5 }] }],
      ['/_model/openai/responses', codex],
      ['/_model/openai/responses', { tools: [{ type: 'code_interpreter', container: { type: 'auto' } }] }],
      ['/_model/openai/chat/completions', { model: 'gpt-5', service_tier: 'default', web_search_options: null }],
      ['/_model/gemini/v1beta/models/gemini-2.5-pro:generateContent', { tools: [{ google_search: {} }] }],
    ] as const) {
      const got = await call(path, answer, 'POST', JSON.stringify(body));
      assert.equal(got.status, 200, `${path}: ${got.body}`);
      assert.equal(got.rec.decision, 'allowed');
      assert.equal(got.rec.metered?.doubt, undefined, `${path}: offered, not used`);
    }
  });

  it('doubts a call whose response says it used a server-side tool billed per use, JSON and streamed', async () => {
    const usage = { input_tokens: 1000, output_tokens: 100 };
    const json = (family: 'openai' | 'anthropic' | 'gemini', endpoint: string, body: unknown) => {
      const meter = usageMeter(family, endpoint, { 'content-type': 'application/json' }, PRICES);
      meter.push(Buffer.from(JSON.stringify(body)));
      return meter.end({ model: null, maxOutput: 1000, choices: 1, bytes: 10 }, true).doubt;
    };
    const used = (tool: string) => `it used a server-side tool (${tool}), billed per use, which the gate does not price`;
    for (const tool of ['web_search_call', 'file_search_call', 'code_interpreter_call', 'image_generation_call']) {
      assert.equal(json('openai', '/v1/responses', { model: 'gpt-5', output: [{ type: 'reasoning' },
        { type: tool, id: 'x' }, { type: 'message' }], usage }), used(tool));
    }
    assert.equal(json('openai', '/v1/responses', { model: 'gpt-5', output: [{ type: 'function_call' },
      { type: 'message' }], usage }), undefined);
    const stream = usageMeter('openai', '/v1/responses', { 'content-type': 'text/event-stream' }, PRICES);
    stream.push(Buffer.from(sse([
      ['response.output_item.added', { type: 'response.output_item.added', item: { type: 'web_search_call' } }],
      ['response.completed', { type: 'response.completed', response: { model: 'gpt-5', output: [], usage } }]])));
    assert.equal(stream.end(null, true).doubt, used('web_search_call'));
    const anthropic = (name: string) => json('anthropic', '/v1/messages', { model: 'claude-sonnet-4-5',
      content: [{ type: 'text' }, { type: 'tool_use', name: 'web_search_local' }, { type: 'server_tool_use', name }],
      usage });
    assert.equal(anthropic('code_execution'), used('code_execution'));
    assert.equal(anthropic('web_search'), used('web_search'));
    assert.equal(anthropic('bash_code_execution'), used('bash_code_execution'));
    // Free server tools (tokens only), and a client tool of a per-use tool's name: no doubt.
    for (const free of ['web_fetch', 'tool_search_tool_regex', 'tool_search_tool_bm25']) {
      assert.equal(anthropic(free), undefined, free);
    }
    const anthropicStream = usageMeter('anthropic', '/v1/messages', { 'content-type': 'text/event-stream' }, PRICES);
    anthropicStream.push(Buffer.from(sse([
      ['content_block_start', { type: 'content_block_start', index: 1,
        content_block: { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: {} } }],
      ['message_delta', { type: 'message_delta', usage: { output_tokens: 10 } }]])));
    assert.equal(anthropicStream.end(null, true).doubt, used('web_search'));
    const gemini = (groundingMetadata: unknown) => json('gemini', '/v1beta/models/gemini-2.5-pro:generateContent',
      { candidates: [{ content: {}, groundingMetadata }], usageMetadata: { promptTokenCount: 10,
        candidatesTokenCount: 10 } });
    assert.equal(gemini({ webSearchQueries: ['svc'], searchEntryPoint: { renderedContent: 'x'.repeat(40_000) } }),
      used('webSearchQueries'));
    assert.equal(gemini({ webSearchQueries: [] }), undefined);
    // Maps grounding shows its places as chunks, with no widget token unless asked for.
    assert.equal(gemini({ groundingChunks: [{ maps: { uri: 'https://maps.google.com/?cid=1', title: 'Cafe' } }] }),
      used('groundingChunks'));
    assert.equal(gemini({ groundingChunks: [] }), undefined);

    // Through the gate, under a run's budget (the doubt rule): the call that used the tool is counted in doubt, and
    // the run's next call is refused.
    const codex = { model: 'gpt-5-codex', tools: [{ type: 'web_search', external_web_access: false }] };
    const run: RunCount = { usd: 0, uncounted: null, doubt: null, inFlight: 0 };
    let counted = records.length;
    refusal = () => {
      for (const r of records.slice(counted)) if (r.metered) countCall(run, r.metered);
      counted = records.length;
      const held = budgetHeld(run, { run: 1, repoDay: null, serverDay: null }, { repoDay: 0, serverDay: 0 });
      return held ? refusalText(held, 'acme/web', false) : null;
    };
    const searched = await call('/_model/openai/responses', { type: 'application/json', pieces: [JSON.stringify({
      model: 'gpt-5', output: [{ type: 'web_search_call' }], usage })] }, 'POST', JSON.stringify(codex));
    assert.equal(searched.status, 200);
    assert.equal(searched.rec.metered?.doubt, used('web_search_call'));
    const next = await call('/_model/openai/responses', { type: 'application/json', pieces: ['{}'] }, 'POST',
      JSON.stringify(codex));
    refusal = () => null;
    assert.equal(next.status, 429);
    assert.match(next.body, /may have cost more than its bounds \(it used a server-side tool \(web_search_call\)/);
  });

  it('doubts a call offering a per-use server tool whose response was not read whole, and refuses a background ' +
    'Responses call', async () => {
    const offered = (tool: string) => `it offered a per-use server tool (${tool}) and its response was not read whole`;
    const asked = (route: string, endpoint: string, body: unknown) => {
      const meter = requestMeter(route, endpoint, {});
      meter.push(Buffer.from(JSON.stringify(body)));
      return meter;
    };
    const codex = { model: 'gpt-5-codex', tools: [{ type: 'function', name: 'shell' },
      { type: 'web_search', external_web_access: false }] };
    // A stream cut after response.created: the searches may have run unseen.
    const cut = usageMeter('openai', '/v1/responses', { 'content-type': 'text/event-stream' }, PRICES);
    cut.push(Buffer.from(sse([['response.created', { type: 'response.created',
      response: { model: 'gpt-5-codex', output: [], usage: null } }]])));
    assert.equal(cut.end(asked('openai', '/v1/responses', codex).read(), false).doubt, offered('web_search'));
    assert.equal(unansweredCall('/v1/responses', asked('openai', '/v1/responses', codex).read(), PRICES).doubt,
      offered('web_search'));
    assert.equal(unansweredCall('/v1/messages', asked('anthropic', '/v1/messages', { model: 'claude-sonnet-4-5',
      tools: [{ type: 'web_search_20250305', name: 'web_search' }] }).read(), PRICES).doubt,
    offered('web_search_20250305'));
    assert.equal(unansweredCall('/v1beta/models/gemini-2.5-pro:generateContent', asked('gemini',
      '/v1beta/models/gemini-2.5-pro:generateContent', { tools: [{ googleMaps: {} }] }).read(), PRICES).doubt,
    offered('googleMaps'));
    // Free or client tools only: no doubt.
    for (const [route, endpoint, body] of [
      ['openai', '/v1/responses', { model: 'gpt-5', tools: [{ type: 'function', name: 'web_search' }] }],
      ['anthropic', '/v1/messages', { model: 'claude-sonnet-4-5', tools: [{ type: 'web_fetch_20250910',
        name: 'web_fetch' }, { type: 'bash_20250124', name: 'bash' }] }],
    ] as const) {
      const got = asked(route, endpoint, body).read();
      assert.deepEqual([got.offered, got.doubt], [undefined, undefined], route);
      assert.equal(unansweredCall(endpoint, got, PRICES).doubt, undefined, route);
    }
    // Read whole without use (the codex case): clean, and the offer is no reason to refuse.
    const whole = await call('/_model/openai/responses', { type: 'application/json', pieces: [JSON.stringify({
      model: 'gpt-5-codex', output: [{ type: 'message' }], usage: { input_tokens: 10, output_tokens: 5 } })] },
    'POST', JSON.stringify(codex));
    assert.deepEqual([whole.status, whole.rec.metered?.doubt], [200, undefined]);
    // A background response is answered later, read back by another call: refused before the API gets it whole.
    const bodies = upstreamBodies;
    const background = await call('/_model/openai/responses', { type: 'application/json', pieces: [JSON.stringify({
      status: 'queued', output: [], usage: null })] }, 'POST', JSON.stringify({ ...codex, background: true }));
    assert.equal(background.status, 403);
    assert.equal(background.body, 'svc gate: the request asks for a background response, which the gate cannot ' +
      'meter (it prices tokens only): refused on a metered model route\n');
    assert.equal(upstreamBodies, bodies);
    const foreground = await call('/_model/openai/responses', { type: 'application/json', pieces: [JSON.stringify({
      model: 'gpt-5', output: [], usage: { input_tokens: 10, output_tokens: 5 } })] }, 'POST',
    JSON.stringify({ model: 'gpt-5', background: false }));
    assert.equal(foreground.status, 200);
  });

  it('prices a call whose prompt is past a long-context tier (Gemini 2.5 Pro, Claude Sonnet 4.5) whole at its rates',
    () => {
    const gemini = usageMeter('gemini', '/v1beta/models/gemini-2.5-pro:generateContent',
      { 'content-type': 'application/json' }, PRICES);
    const usageMetadata = {
      promptTokenCount: 1_000_000, cachedContentTokenCount: 100_000, candidatesTokenCount: 10_000,
    };
    gemini.push(Buffer.from(JSON.stringify({ modelVersion: 'gemini-2.5-pro', usageMetadata })));
    close(gemini.end(null, true).usd, (900_000 * 2.5 + 100_000 * 0.25 + 10_000 * 15) / 1e6);
    const at = (tokens_in: number, cache_read: number) => callCost(PRICES, { model: 'claude-sonnet-4-5-20250929',
      tokens_in, tokens_out: 1000, cache_read, cache_write: 0 });
    close(at(150_000, 50_000), (150_000 * 3 + 50_000 * 0.3 + 1000 * 15) / 1e6);
    close(at(150_000, 50_001), (150_000 * 6 + 50_001 * 0.6 + 1000 * 22.5) / 1e6);
  });

  it('prices Anthropic\'s hour-long cache writes at twice the input price, five minutes\' at 1.25 times', () => {
    const meter = usageMeter('anthropic', '/v1/messages', { 'content-type': 'application/json' }, PRICES);
    meter.push(Buffer.from(JSON.stringify({ model: 'claude-sonnet-4-5', usage: { input_tokens: 10, output_tokens: 10,
      cache_creation_input_tokens: 300_000, cache_creation: { ephemeral_5m_input_tokens: 100_000,
        ephemeral_1h_input_tokens: 200_000 } } })));
    const call = meter.end(null, true);
    assert.deepEqual([call.cache_write, call.cache_write_1h], [300_000, 200_000]);
    // Past 200k prompt tokens: Sonnet's long-context tier, $6 input, so $7.50 and $12 writes.
    close(call.usd, (10 * 6 + 10 * 22.5 + 100_000 * 7.5 + 200_000 * 12) / 1e6);
    const short = callCost(PRICES, { model: 'claude-haiku-4-5', tokens_in: 0, tokens_out: 0, cache_read: 0,
      cache_write: 3000, cache_write_1h: 1000 });
    close(short, (2000 * 1.25 + 1000 * 2) / 1e6);
  });

  it('doubts an Anthropic call whose usage counts web searches (billed per search, priced by no row)', () => {
    const metered = (searches: number) => {
      const meter = usageMeter('anthropic', '/v1/messages', { 'content-type': 'application/json' }, PRICES);
      meter.push(Buffer.from(JSON.stringify({ model: 'claude-sonnet-4-5', usage: { input_tokens: 10, output_tokens: 10,
        server_tool_use: { web_search_requests: searches, web_fetch_requests: 3 } } })));
      return meter.end({ model: null, maxOutput: 1000, choices: 1, bytes: 10 }, true);
    };
    assert.equal(metered(5000).doubt,
      'its usage counts web searches, billed per search, which the gate does not price');
    assert.equal(metered(0).doubt, undefined, 'web fetches cost only tokens');
  });

  it('doubts an OpenAI call the response says was served at the priority tier (priced at the standard rows)', () => {
    const metered = (body: unknown, endpoint = '/v1/responses') => {
      const meter = usageMeter('openai', endpoint, { 'content-type': 'application/json' }, PRICES);
      meter.push(Buffer.from(JSON.stringify(body)));
      return meter.end({ model: null, maxOutput: 1000, choices: 1, bytes: 10 }, true);
    };
    const usage = { input_tokens: 1_000_000, output_tokens: 100_000 };
    const served = metered({ model: 'gpt-5', service_tier: 'priority', usage });
    assert.equal(served.doubt, 'it was served at the priority tier, which the gate prices at the standard rows');
    close(served.usd, 1.25 + 0.1 * 10);
    const streamed = usageMeter('openai', '/v1/responses', { 'content-type': 'text/event-stream' }, PRICES);
    streamed.push(Buffer.from(sse([['response.completed', { type: 'response.completed',
      response: { model: 'gpt-5', service_tier: 'priority', usage } }]])));
    assert.equal(streamed.end(null, true).doubt, served.doubt);
    for (const tier of ['default', 'flex', null]) {
      assert.equal(metered({ model: 'gpt-5', service_tier: tier, usage }).doubt, undefined, `${tier}`);
    }
  });

  it('prices a dated snapshot by its model\'s row, never a variant (priced apart) by its base model\'s', () => {
    assert.equal(priceOf(PRICES, 'claude-sonnet-4-5-20250929'), PRICES.models['claude-sonnet-4-5']);
    assert.equal(priceOf(PRICES, 'models/gpt-4o-2024-08-06'), PRICES.models['gpt-4o']);
    assert.equal(priceOf(PRICES, 'gpt-5-codex'), PRICES.models['gpt-5-codex'], 'a variant with its own row');
    // A snapshot its vendor prices apart ($5/$15, not gpt-4o's $2.50/$10) is never priced as its model.
    const apart = priceOf(PRICES, 'gpt-4o-2024-05-13');
    assert.deepEqual([apart?.input, apart?.output, apart?.cache_read], [5, 15, undefined]);
    for (const variant of ['gpt-5-pro', 'o3-pro', 'gpt-4o-mini-realtime', 'claude-opus-4-1-fast', 'constructor']) {
      assert.equal(priceOf(PRICES, variant), null, variant);
    }
  });

  it('reads Gemini\'s streamed JSON array (streamGenerateContent without alt=sse): the last element\'s counts', () => {
    const meter = usageMeter('gemini', '/v1beta/models/gemini-2.5-flash:streamGenerateContent', {
      'content-type': 'application/json; charset=UTF-8' }, PRICES);
    const text = `[${[1, 2, 3].map((n) => JSON.stringify({ candidates: [{ content: { parts: [{ text: '{"usageMetadata":1}' }] } }],
      usageMetadata: { promptTokenCount: 1000, candidatesTokenCount: 10 * n } })).join(',\r\n')}]`;
    for (const piece of bytesOf(text, 11)) meter.push(piece);
    const { usd: _usd, ...read } = meter.end({ model: null, maxOutput: null, choices: 1, bytes: 0 }, true);
    assert.deepEqual(read, {
      model: 'gemini-2.5-flash', tokens_in: 1000, tokens_out: 30, cache_read: 0, cache_write: 0, unknown: null,
    });
  });

  it('keeps at most a bounded slice of a body however large (the meter holds no body)', () => {
    const meter = usageMeter('anthropic', '/v1/messages', { 'content-type': 'application/json' }, PRICES);
    meter.push(Buffer.from('{"content":"'));
    const mb = Buffer.alloc(1024 * 1024, 0x61);
    for (let i = 0; i < 64; i++) meter.push(mb);
    meter.push(Buffer.from('","model":"claude-haiku-4-5","usage":{"input_tokens":1000000,"output_tokens":0}}'));
    const read = meter.end({ model: null, maxOutput: null, choices: 1, bytes: 0 }, true);
    assert.equal(read.unknown, null);
    assert.equal(read.tokens_in, 1_000_000);
  });
});
