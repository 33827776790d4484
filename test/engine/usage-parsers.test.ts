import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync, chmodSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { addUsage, createOutputReader, resolveProvider, BUILTIN_PROVIDERS, type Usage } from '../../src/engine/providers.ts';

const NONE: Usage = { cost_usd: null, tokens_in: null, tokens_out: null };

/** Feeds lines to a fresh parser of that kind and sums what it reports, as the provider phase does. */
function total(kind: string, lines: string[]): Usage {
  const output = createOutputReader(kind);
  let sum = NONE;
  for (const line of lines) {
    const inc = output.line('stdout', line).usage;
    if (inc) sum = addUsage(sum, inc);
  }
  return sum;
}

describe('provider usage parsers', () => {
  it('reads claude\'s result object: total_cost_usd, input tokens with cache tokens, output tokens', () => {
    const result = JSON.stringify({
      type: 'result', subtype: 'success', is_error: false, duration_ms: 12000, num_turns: 3, result: 'Done.', session_id: 's1', total_cost_usd: 0.0421,
      usage: { input_tokens: 12, cache_creation_input_tokens: 1000, cache_read_input_tokens: 2000, output_tokens: 345 },
    });
    assert.deepEqual(total('claude', ['Working…', result]), { cost_usd: 0.0421, tokens_in: 3012, tokens_out: 345 });
  });

  it('leaves claude figures null when the result does not report them', () => {
    assert.deepEqual(total('claude', [JSON.stringify({ type: 'result', subtype: 'success', result: 'ok' })]), NONE);
    assert.deepEqual(total('claude', [JSON.stringify({ type: 'assistant', usage: { input_tokens: 9, output_tokens: 9 } })]), NONE);
  });

  it('sums codex turn.completed usage and never invents a cost', () => {
    const lines = [
      JSON.stringify({ type: 'thread.started', thread_id: 't1' }),
      JSON.stringify({ type: 'item.completed', item: { id: 'i0', type: 'agent_message', text: 'ok' } }),
      JSON.stringify({ type: 'turn.completed', usage: { input_tokens: 24763, cached_input_tokens: 24448, output_tokens: 122 } }),
      JSON.stringify({ type: 'turn.completed', usage: { input_tokens: 1000, output_tokens: 8 } }),
    ];
    assert.deepEqual(total('codex', lines), { cost_usd: null, tokens_in: 25763, tokens_out: 130 });
    assert.deepEqual(total('codex', [JSON.stringify({ type: 'turn.completed' })]), NONE);
  });

  it('reads gemini stats per model, and flat stats; no cost', () => {
    const perModel = { response: 'ok', stats: { models: { 'gemini-2.5-pro': { api: { totalRequests: 2 }, tokens: { prompt: 24939, candidates: 20, total: 25113, cached: 21263, thoughts: 154, tool: 0 } } } } };
    assert.deepEqual(total('gemini', [JSON.stringify(perModel)]), { cost_usd: null, tokens_in: 24939, tokens_out: 20 });
    assert.deepEqual(total('gemini', [JSON.stringify({ stats: { inputTokens: 50, outputTokens: 7 } })]), { cost_usd: null, tokens_in: 50, tokens_out: 7 });
  });

  it('reads a result pretty-printed over many lines (gemini and claude print one JSON document)', () => {
    const perModel = { response: 'ok', stats: { models: { 'gemini-2.5-pro': { tokens: { prompt: 10, candidates: 3 } } } } };
    assert.deepEqual(total('gemini', JSON.stringify(perModel, null, 2).split('\n')), { cost_usd: null, tokens_in: 10, tokens_out: 3 });
    const result = { type: 'result', total_cost_usd: 0.5, usage: { input_tokens: 4, output_tokens: 2 } };
    assert.deepEqual(total('claude', ['log line', ...JSON.stringify(result, null, 2).split('\n')]), { cost_usd: 0.5, tokens_in: 4, tokens_out: 2 });
  });

  it('leaves gemini tokens null when its stats carry no token counts', () => {
    assert.deepEqual(total('gemini', [JSON.stringify({ response: 'ok', stats: { models: { 'gemini-2.5-pro': { api: { totalRequests: 1 } } }, tools: {} } })]), NONE);
    assert.deepEqual(total('gemini', [JSON.stringify({ response: 'ok', stats: {} })]), NONE);
  });

  it('reads aider "Tokens: … Cost: $X message" lines, with k suffixes, and ignores the session total', () => {
    const lines = ['Applied edit to a.txt', 'Tokens: 1.2k sent, 300 received. Cost: $0.01 message, $0.05 session.', 'Tokens: 800 sent, 1k received. Cost: $0.002 message, $0.052 session.'];
    const sum = total('aider', lines);
    assert.equal(sum.tokens_in, 2000);
    assert.equal(sum.tokens_out, 1300);
    assert.ok(Math.abs(sum.cost_usd! - 0.012) < 1e-9, String(sum.cost_usd));
    assert.deepEqual(total('aider', ['Applied edit to a.txt', 'Commit skipped']), NONE);
  });

  it('reads aider lines that carry prompt-cache figures between sent and received', () => {
    const sum = total('aider', ['Tokens: 2.4k sent, 1.1k cache write, 383 received. Cost: $0.0085 message, $0.02 session.']);
    assert.deepEqual(sum, { cost_usd: 0.0085, tokens_in: 2400, tokens_out: 383 });
  });

  it('reads the stream-json output of claude 2.1.330: only the final result counts, not the usage on each message', () => {
    const fixture = new URL('./fixtures/claude-2.1.330-stream-json.jsonl', import.meta.url);
    const sum = total('claude', readFileSync(fixture, 'utf8').split('\n'));
    assert.deepEqual(sum, { cost_usd: 0.004110000000000001, tokens_in: 780, tokens_out: 118 });
  });

  it('reads the exec --json output of codex 0.169.0: tokens from turn.completed, no cost', () => {
    const fixture = new URL('./fixtures/codex-0.169.0-exec.jsonl', import.meta.url);
    const sum = total('codex', readFileSync(fixture, 'utf8').split('\n'));
    assert.deepEqual(sum, { cost_usd: null, tokens_in: 460, tokens_out: 86 });
  });

  it('reads a recorded aider --no-pretty transcript: one-line and two-line reports, quoted reports ignored', () => {
    const fixture = new URL('./fixtures/aider-no-pretty.txt', import.meta.url);
    const sum = total('aider', readFileSync(fixture, 'utf8').split('\n'));
    assert.equal(sum.tokens_in, 2500 + 2700);
    assert.equal(sum.tokens_out, 61 + 24);
    assert.ok(Math.abs(sum.cost_usd! - (0.0081 + 0.0028)) < 1e-12, String(sum.cost_usd));
  });

  it('reads aider tokens for a model it has no price for, leaving the cost unknown', () => {
    const lines = ['Tokens: 12k sent, 1.1k received.', 'Applied edit to a.txt'];
    assert.deepEqual(total('aider', lines), { cost_usd: null, tokens_in: 12000, tokens_out: 1100 });
  });

  it('reads opencode step events with cost and tokens, and leaves other events alone', () => {
    const lines = [
      JSON.stringify({ type: 'step_start', part: { type: 'step-start' } }),
      JSON.stringify({ type: 'text', part: { type: 'text', text: 'editing' } }),
      JSON.stringify({ type: 'step_finish', part: { type: 'step-finish', cost: 0.003, tokens: { input: 1500, output: 90, reasoning: 0, cache: { read: 0, write: 0 } } } }),
      JSON.stringify({ type: 'step_finish', part: { type: 'step-finish', cost: 0.001, tokens: { input: 500, output: 10 } } }),
    ];
    const sum = total('opencode', lines);
    assert.equal(sum.tokens_in, 2000);
    assert.equal(sum.tokens_out, 100);
    assert.ok(Math.abs(sum.cost_usd! - 0.004) < 1e-9, String(sum.cost_usd));
    assert.deepEqual(total('opencode', [lines[0]!, lines[1]!]), NONE);
  });

  it('reads a step_finish line as opencode 1.18.33 prints it, counting prompt-cache tokens as input', () => {
    // Recorded from `opencode run --format json` against the scripted chat-completions server (ids shortened).
    const recorded = '{"type":"step_finish","timestamp":1795507176939,"sessionID":"ses_1","part":{"id":"prt_1","reason":"tool-calls",'
      + '"messageID":"msg_1","sessionID":"ses_1","type":"step-finish","tokens":{"total":131,"input":110,"output":21,"reasoning":0,'
      + '"cache":{"write":0,"read":0}},"cost":0.000152}}';
    assert.deepEqual(total('opencode', [recorded]), { cost_usd: 0.000152, tokens_in: 110, tokens_out: 21 });
    const cached = JSON.stringify({ type: 'step_finish', part: { cost: 0.01, tokens: { input: 10, output: 5, cache: { read: 300, write: 40 } } } });
    assert.deepEqual(total('opencode', [cached]), { cost_usd: 0.01, tokens_in: 350, tokens_out: 5 });
  });

  it('reads svc.cost lines from command providers and keeps an unreported figure null', () => {
    assert.deepEqual(total('command', ['{"type":"svc.cost","usd":0.25,"tokens_in":100,"tokens_out":20}']), { cost_usd: 0.25, tokens_in: 100, tokens_out: 20 });
    assert.deepEqual(total('command', ['{"type":"svc.cost","usd":0.5}']), { cost_usd: 0.5, tokens_in: null, tokens_out: null });
    assert.deepEqual(total('command', ['plain text', '{"type":"svc.cost","usd":-1,"tokens_in":"many"}']), NONE);
  });

  it('keeps a built-in CLI\'s token count that is no whole number unknown, and the rest of its report', () => {
    const claude = { type: 'result', total_cost_usd: 0.25, usage: { input_tokens: 1.5, output_tokens: 3 } };
    assert.deepEqual(total('claude', [JSON.stringify(claude)]), { cost_usd: 0.25, tokens_in: null, tokens_out: 3 });
    const cached = { type: 'result', usage: { input_tokens: 2, cache_read_input_tokens: 0.5, output_tokens: 1.5 } };
    assert.deepEqual(total('claude', [JSON.stringify(cached)]), { cost_usd: null, tokens_in: 2, tokens_out: null });
    const codex = { type: 'turn.completed', usage: { input_tokens: 7, output_tokens: 2.5 } };
    assert.deepEqual(total('codex', [JSON.stringify(codex)]), { cost_usd: null, tokens_in: 7, tokens_out: null });
    const gemini = { stats: { models: { m: { tokens: { prompt: 4.5, candidates: 6 } } } } };
    assert.deepEqual(total('gemini', [JSON.stringify(gemini)]), { cost_usd: null, tokens_in: null, tokens_out: 6 });
    const tokens = { input: 5, output: 0.5, cache: { read: 1 } };
    const opencode = { type: 'step_finish', part: { cost: 0.1, tokens } };
    assert.deepEqual(total('opencode', [JSON.stringify(opencode)]), { cost_usd: 0.1, tokens_in: 6, tokens_out: null });
    const aider = total('aider', ['Tokens: 1.5 sent, 2k received.']);
    assert.deepEqual(aider, { cost_usd: null, tokens_in: null, tokens_out: 2000 });
  });

  it('keeps a token count of a svc.cost line that is no whole number unknown, as the Run JSON counts tokens', () => {
    const line = '{"type":"svc.cost","usd":0.5,"tokens_in":1.5,"tokens_out":1e300}';
    assert.deepEqual(total('command', [line]), { cost_usd: 0.5, tokens_in: null, tokens_out: null });
  });
});

describe('built-in provider argv', () => {
  let bin: string;
  const config = { provider: null, providers: {} };

  before(() => {
    bin = mkdtempSync(join(tmpdir(), 'svc-'));
    for (const name of BUILTIN_PROVIDERS) {
      writeFileSync(join(bin, name), '#!/bin/sh\nexit 0\n');
      chmodSync(join(bin, name), 0o755);
    }
  });
  after(() => rmSync(bin, { recursive: true, force: true }));

  const EXPECTED: Record<string, { args: string[]; stdin: boolean }> = {
    claude: {
      args: ['-p', '--output-format', 'stream-json', '--verbose', '--permission-mode', 'acceptEdits', '--allowedTools', 'Bash'],
      stdin: true,
    },
    codex: { args: ['exec', '--json', '--sandbox', 'danger-full-access', '-'], stdin: true },
    gemini: { args: ['--output-format', 'json', '--yolo', '--skip-trust'], stdin: true },
    aider: { args: ['--yes-always', '--no-auto-commits', '--no-pretty', '--no-stream', '--message-file', '{task_file}'], stdin: false },
    opencode: { args: ['run', '--format', 'json', 'Do the task described in the attached file.', '--file', '{task_file}'], stdin: false },
  };

  it('runs each built-in from PATH by absolute path with its documented non-interactive flags', () => {
    for (const name of BUILTIN_PROVIDERS) {
      const p = resolveProvider(name, config, { PATH: bin });
      assert.equal(p.kind, name);
      assert.equal(p.argv[0], join(bin, name));
      assert.deepEqual(p.argv.slice(1), EXPECTED[name]!.args, name);
      assert.equal(p.stdinPrompt, EXPECTED[name]!.stdin, name);
    }
  });

  it('never puts a deploy argument or the prompt in argv: the prompt goes by stdin or the task file', () => {
    for (const name of BUILTIN_PROVIDERS) {
      const p = resolveProvider(name, config, { PATH: bin });
      assert.ok(!p.argv.some((a) => /deploy/i.test(a)), name);
      assert.ok(p.stdinPrompt || p.argv.includes('{task_file}'), `${name} gets the prompt somehow`);
    }
  });

  it('picks the first built-in on PATH when none is named', () => {
    assert.equal(resolveProvider(null, config, { PATH: bin }).name, 'claude');
  });

  it('calls a name that is only an object\'s inherited key (constructor, toString) an unknown provider', () => {
    for (const name of ['constructor', 'toString', 'hasOwnProperty']) {
      assert.throws(() => resolveProvider(name, config, { PATH: bin }), /Unknown provider/, name);
    }
  });
});
