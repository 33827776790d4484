// Calls their vendors price apart from the standard rows (docs/gate.md "Priced"): a service tier other than the
// standard one, Anthropic's server tools, a prompt past 200k tokens. Each is priced only by a row of its own,
// `<model>@<what>`, and is unpriced (fail closed) without one; before, each was priced as a standard call.
import { describe, it, after } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadPriceTable, PRICES, type PriceTable } from '../../src/gate/prices.ts';
import { usageMeter } from '../../src/gate/usage.ts';
import type { MeteredCall } from '../../src/gate/evidence.ts';
import { tempDir } from './helpers.ts';

const JSON_TYPE = { 'content-type': 'application/json' };

/** What the gate records for one response body of `route`'s API. */
function meterBody(route: string, path: string, body: unknown, prices: PriceTable = PRICES): MeteredCall {
  const meter = usageMeter(route, path, JSON_TYPE, prices);
  meter.push(Buffer.from(JSON.stringify(body)));
  return meter.end();
}

const chat = (tier: string | undefined) => meterBody('openai', '/v1/chat/completions', {
  model: 'gpt-5', ...(tier ? { service_tier: tier } : {}), usage: { prompt_tokens: 1_000_000, completion_tokens: 0 },
});
const messages = (model: string, usage: Record<string, unknown>) =>
  meterBody('anthropic', '/v1/messages', { model, usage: { output_tokens: 0, ...usage } });

describe('calls priced apart from the standard rows', () => {
  const tmp = tempDir();
  after(() => tmp.remove());

  it('prices an OpenAI call at the default tier by its row, and one at priority or flex as unpriced', () => {
    assert.equal(chat(undefined).usd, 1.25);
    assert.equal(chat('default').usd, 1.25);
    assert.deepEqual([chat('priority').model, chat('priority').usd], ['gpt-5@priority', null]);
    assert.deepEqual([chat('flex').model, chat('flex').usd], ['gpt-5@flex', null]);
  });

  it('reads the tier of a responses stream from its response.completed event', () => {
    const meter = usageMeter('openai', '/v1/responses', { 'content-type': 'text/event-stream' }, PRICES);
    const done = { type: 'response.completed', response: { model: 'gpt-5', service_tier: 'priority',
      usage: { input_tokens: 1000, output_tokens: 10 } } };
    meter.push(Buffer.from(`event: response.completed\ndata: ${JSON.stringify(done)}\n\n`));
    const read = meter.end();
    assert.deepEqual([read.model, read.usd, read.unknown], ['gpt-5@priority', null, null]);
  });

  it("prices an Anthropic call at the standard tier, and one at priority as unpriced", () => {
    assert.equal(messages('claude-sonnet-4-5', { input_tokens: 100_000, service_tier: 'standard' }).usd, 0.3);
    const priority = messages('claude-sonnet-4-5', { input_tokens: 1000, service_tier: 'priority' });
    assert.deepEqual([priority.model, priority.usd], ['claude-sonnet-4-5@priority', null]);
  });

  it('prices an Anthropic call that used server tools as unpriced, one that counted none as standard', () => {
    const none = { web_search_requests: 0, web_fetch_requests: 0 };
    assert.equal(messages('claude-sonnet-4-5', { input_tokens: 100_000, server_tool_use: none }).usd, 0.3);
    const searched = messages('claude-sonnet-4-5',
      { input_tokens: 1000, server_tool_use: { web_search_requests: 500 } });
    assert.deepEqual([searched.model, searched.usd], ['claude-sonnet-4-5@server-tools', null]);
  });

  it('prices a prompt past 200k tokens by its long-context row, cached input counted, and none as unpriced', () => {
    const long = messages('claude-sonnet-4-5-20250929', { input_tokens: 1000, cache_read_input_tokens: 899_000 });
    assert.equal(long.model, 'claude-sonnet-4-5-20250929@long-context');
    assert.equal(long.usd, (1000 * 6 + 899_000 * 0.6) / 1e6);
    assert.equal(messages('claude-opus-4-5', { input_tokens: 200_001 }).usd, null, 'a model with no such row');
    assert.equal(messages('claude-sonnet-4-5', { input_tokens: 200_000 }).usd, 0.6, '200k is still standard');
    const gemini = meterBody('gemini', '/v1beta/models/gemini-2.5-pro:generateContent',
      { usageMetadata: { promptTokenCount: 300_000, candidatesTokenCount: 0 } });
    assert.deepEqual([gemini.model, gemini.usd], ['gemini-2.5-pro@long-context', 0.75]);
    const openai = meterBody('openai', '/v1/chat/completions',
      { model: 'gpt-5', usage: { prompt_tokens: 300_000, completion_tokens: 0 } });
    assert.deepEqual([openai.model, openai.usd], ['gpt-5', 0.375], "OpenAI's rows have no long-context tier");
  });

  it("prices a tier by the operator's row for it", () => {
    const file = join(tmp.path, 'prices.json');
    const models = { 'gpt-5@priority': { input: 2.5, output: 20 } };
    writeFileSync(file, JSON.stringify({ date: '2026-12-01', models }));
    const priority = meterBody('openai', '/v1/chat/completions', { model: 'gpt-5-2025-08-07', service_tier: 'priority',
      usage: { prompt_tokens: 1_000_000, completion_tokens: 0 } }, loadPriceTable(file));
    assert.deepEqual([priority.model, priority.usd], ['gpt-5-2025-08-07@priority', 2.5]);
  });
});
