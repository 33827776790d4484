// A scripted OpenAI Responses API on 127.0.0.1 (`POST /v1/responses`, streamed as server-sent events), as codex speaks
// it to a custom model provider with wire_api = "responses". Each turn follows the script with codex's own tools:
// `exec_command` (a function call) reads files and runs commands, `apply_patch` (a freeform custom tool call) edits.
// Usage goes out in the `response.completed` event, which is where codex reads it.
import { isAbsolute, join } from 'node:path';
import { usageOfTurn, type Script, type Step } from './model-script.ts';
import { createUsageCounter, sseEvent, startScriptedHttp, type ScriptedServer } from './scripted-http.ts';

interface Item {
  type?: string;
  role?: string;
  content?: unknown;
}

function inputOf(body: unknown): Item[] {
  const input = (body as { input?: unknown })?.input;
  if (typeof input === 'string') return [{ type: 'message', role: 'user', content: input }];
  return Array.isArray(input) ? (input as Item[]) : [];
}

function textOf(items: Item[]): string {
  const texts: string[] = [];
  for (const item of items) {
    if (typeof item.content === 'string') texts.push(item.content);
    else if (Array.isArray(item.content)) {
      for (const c of item.content) if (typeof c?.text === 'string') texts.push(c.text);
    }
  }
  return texts.join('\n');
}

/** The folder codex names in its environment context (`<cwd>/path</cwd>`). */
function cwdOf(text: string): string {
  return /<cwd>([^<]+)<\/cwd>/.exec(text)?.[1] ?? process.cwd();
}

const shellQuote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** An output item for one step: exec_command for reading and running, apply_patch for editing, else a message. */
function itemFor(step: Step, cwd: string, n: number): Record<string, unknown> {
  const abs = (p: string) => (isAbsolute(p) ? p : join(cwd, p));
  const id = `scripted_${n}`;
  if ('text' in step) {
    return { type: 'message', id: `msg_${id}`, role: 'assistant', status: 'completed',
      content: [{ type: 'output_text', text: step.text, annotations: [] }] };
  }
  if (step.tool === 'edit') {
    const patch = ['*** Begin Patch', `*** Update File: ${abs(step.path)}`, '@@', `-${step.old}`, `+${step.new}`,
      '*** End Patch', ''].join('\n');
    return { type: 'custom_tool_call', id: `ctc_${id}`, call_id: `call_${id}`, name: 'apply_patch', input: patch,
      status: 'completed' };
  }
  const cmd = step.tool === 'read' ? `cat ${shellQuote(abs(step.path))}` : step.command;
  // The longest wait codex allows before it hands back a still-running command, so a long step stays in its call.
  const args = { cmd, workdir: cwd, yield_time_ms: 30_000 };
  return { type: 'function_call', id: `fc_${id}`, call_id: `call_${id}`, name: 'exec_command',
    arguments: JSON.stringify(args), status: 'completed' };
}

export async function startResponsesServer(initial: Script): Promise<ScriptedServer> {
  const counter = createUsageCounter(usageOfTurn);
  let calls = 0;
  return startScriptedHttp(initial, counter.usage, (req, res, script) => {
    if (req.method !== 'POST' || req.path.split('?')[0] !== '/v1/responses') {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'not scripted', type: 'invalid_request_error' } }));
      return;
    }
    const items = inputOf(req.body);
    const allText = textOf(items);
    const done = items.filter((i) => i.type === 'function_call_output' || i.type === 'custom_tool_call_output').length;
    const steps = script(allText);
    const step = steps[Math.min(done, steps.length - 1)]!;
    const u = counter.next();
    const n = ++calls;
    const model = String((req.body as { model?: unknown })?.model ?? 'scripted');
    const response = { id: `resp_scripted_${n}`, object: 'response', model, status: 'in_progress', output: [] };
    const item = itemFor(step, cwdOf(allText), n);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    sseEvent(res, 'response.created', { response });
    sseEvent(res, 'response.output_item.added', { output_index: 0, item });
    if ('text' in step) {
      sseEvent(res, 'response.output_text.delta', { output_index: 0, content_index: 0, delta: step.text });
    }
    sseEvent(res, 'response.output_item.done', { output_index: 0, item });
    const reported = {
      input_tokens: u.input, input_tokens_details: { cached_tokens: 0 },
      output_tokens: u.output, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: u.input + u.output,
    };
    const completed = { ...response, status: 'completed', output: [item], usage: reported };
    sseEvent(res, 'response.completed', { response: completed });
    res.end();
  });
}
