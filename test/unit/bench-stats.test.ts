import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHistogram, formatNumber, median, meetsBar, percentile, ratio, summarize } from '../../scripts/bench/stats.ts';
import { encodeRequest, parseResponse } from '../../scripts/bench/raw-client.ts';
import { benchEnv } from '../../scripts/bench/context.ts';

describe('bench stats', () => {
  it('takes nearest-rank percentiles of a sorted array', () => {
    const values = Float64Array.from({ length: 100 }, (_, i) => i + 1);
    assert.equal(percentile(values, 50), 50);
    assert.equal(percentile(values, 99), 99);
    assert.equal(percentile(values, 100), 100);
    assert.equal(percentile(values, 0), 1);
    assert.equal(percentile([7], 99), 7);
    assert.ok(Number.isNaN(percentile([], 50)));
  });

  it('summarises unsorted latencies numerically, not as strings', () => {
    const s = summarize([10, 9, 100, 1, 2]);
    assert.equal(s.count, 5);
    assert.equal(s.p50, 9);
    assert.equal(s.p99, 100);
    assert.equal(s.max, 100);
    assert.equal(s.mean, 24.4);
  });

  it('takes the median of finite values only', () => {
    assert.equal(median([3, 1, 2]), 2);
    assert.equal(median([5, Number.NaN, 1, 3]), 3);
  });

  it('gives NaN for a ratio against a missing or zero ceiling', () => {
    assert.equal(ratio(30, 100), 0.3);
    assert.ok(Number.isNaN(ratio(30, 0)));
    assert.ok(Number.isNaN(ratio(Number.NaN, 100)));
  });

  it('checks minimum bars inclusively and maximum bars strictly', () => {
    assert.equal(meetsBar(0.85, { kind: 'min', value: 0.85 }), true);
    assert.equal(meetsBar(0.84, { kind: 'min', value: 0.85 }), false);
    assert.equal(meetsBar(19.9, { kind: 'max', value: 20 }), true);
    assert.equal(meetsBar(20, { kind: 'max', value: 20 }), false);
    assert.equal(meetsBar(Number.NaN, { kind: 'max', value: 20 }), false);
  });

  it('reports histogram percentiles at bucket upper edges, never below the sample', () => {
    const h = createHistogram(1, 100);
    for (let i = 0; i < 99; i++) h.add(2.5);
    h.add(50.2);
    assert.equal(h.count, 100);
    assert.equal(h.percentile(50), 3);
    assert.equal(h.percentile(99), 3);
    assert.equal(h.percentile(100), 51);
    assert.equal(h.max(), 50.2);
  });

  it('clamps histogram values beyond the range into the last bucket', () => {
    const h = createHistogram(1, 10);
    h.add(5_000);
    assert.equal(h.percentile(99), 11);
    assert.equal(h.max(), 5_000);
  });

  it('merges histograms from several subscriber processes into the same percentiles as one histogram', () => {
    const whole = createHistogram(0.5, 100);
    const parts = [createHistogram(0.5, 100), createHistogram(0.5, 100), createHistogram(0.5, 100)];
    for (let i = 0; i < 3000; i++) {
      const v = (i * 7919) % 997 / 10;
      whole.add(v);
      parts[i % 3]!.add(v);
    }
    const merged = createHistogram(0.5, 100);
    for (const p of parts) merged.merge(JSON.parse(JSON.stringify(p.export())));
    assert.equal(merged.count, whole.count);
    for (const p of [1, 50, 90, 99, 99.9, 100]) assert.equal(merged.percentile(p), whole.percentile(p));
    assert.equal(merged.max(), whole.max());
  });

  it('formats numbers for the table with thousands separators and n/a', () => {
    assert.equal(formatNumber(123456.7, 'req/s'), '123,457 req/s');
    assert.equal(formatNumber(0.3049), '0.305');
    assert.equal(formatNumber(Number.NaN), 'n/a');
  });
});

describe('bench raw client framing', () => {
  it('encodes a request with host and content-length', () => {
    const bytes = encodeRequest('127.0.0.1:1', { method: 'POST', path: '/x', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(bytes.toString(), 'POST /x HTTP/1.1\r\nhost: 127.0.0.1:1\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}');
  });

  it('waits for the whole content-length body before returning a response', () => {
    const full = Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 404');
    assert.equal(parseResponse(full.subarray(0, 40)), null);
    const parsed = parseResponse(full);
    assert.equal(parsed?.response.status, 200);
    assert.equal(parsed?.response.body.toString(), 'hello');
    assert.equal(full.subarray(parsed?.used).toString(), 'HTTP/1.1 404');
  });

  it('reassembles a chunked body', () => {
    const raw = Buffer.from('HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n');
    assert.equal(parseResponse(raw.subarray(0, raw.length - 2)), null);
    const parsed = parseResponse(raw);
    assert.equal(parsed?.response.status, 202);
    assert.equal(parsed?.response.body.toString(), 'abcde');
    assert.equal(parsed?.used, raw.length);
  });

  it('hands the servers no credential or exporter svc would call a public address with', () => {
    const env = benchEnv('/tmp/bench-home', {
      PATH: '/usr/bin', GITHUB_TOKEN: 'ghp_x', GH_TOKEN: 'gho_y', TRACKERA_API_KEY: 'k', CHATA_BOT_TOKEN: 'xoxb',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otel.example', SVC_CONTROL_URL: 'http://127.0.0.1:1',
    });
    assert.deepEqual(env, { PATH: '/usr/bin', HOME: '/tmp/bench-home' });
  });
});
