// A scripted Anthropic Messages API on 127.0.0.1 (`POST /v1/messages`, streamed as server-sent events), as the
// claude CLI speaks it with ANTHROPIC_BASE_URL set. Each turn follows the script with claude's own tools (Read, Edit,
// Bash) as `tool_use` blocks; the usage of every turn goes out in message_start (input) and message_delta (output).
import { isAbsolute, join } from 'node:path';
import { messagesOf, usageOfTurn, type Script, type Step } from './model-script.ts';
import { createUsageCounter, sseEvent, startScriptedHttp, type ScriptedServer } from './scripted-http.ts';

interface Block {
  type?: string;
  text?: unknown;
  content?: unknown;
}

function blocksOf(content: unknown): Block[] {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  return Array.isArray(content) ? (content as Block[]) : [];
}

function textOf(blocks: Block[]): string {
  return blocks.map((b) => (typeof b.text === 'string' ? b.text : '')).join('\n');
}

/** The folder claude announces in its environment context ("Primary working directory: /path"). */
function workdirOf(text: string): string {
  return /Primary working directory:\s*(\S+)/.exec(text)?.[1] ?? process.cwd();
}

type ToolUse = { name: string; input: Record<string, unknown> };

/** claude's own tools: Read, Edit and Bash, with the parameter names 2.1 declares. */
function toolUse(step: Exclude<Step, { text: string }>, cwd: string): ToolUse {
  const abs = (p: string) => (isAbsolute(p) ? p : join(cwd, p));
  if (step.tool === 'read') return { name: 'Read', input: { file_path: abs(step.path) } };
  if (step.tool === 'edit') {
    return { name: 'Edit', input: { file_path: abs(step.path), old_string: step.old, new_string: step.new } };
  }
  return { name: 'Bash', input: { command: step.command, description: 'Scripted command', timeout: 600_000 } };
}

export async function startAnthropicMessagesServer(initial: Script): Promise<ScriptedServer> {
  const counter = createUsageCounter(usageOfTurn);
  let calls = 0;
  return startScriptedHttp(initial, counter.usage, (req, res, script) => {
    if (req.method !== 'POST' || req.path.split('?')[0] !== '/v1/messages') {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: 'not scripted' } }));
      return;
    }
    const blocks = messagesOf(req.body).flatMap((m) => blocksOf(m.content));
    const system = textOf(blocksOf((req.body as { system?: unknown })?.system));
    const allText = `${system}\n${textOf(blocks)}`;
    const done = blocks.filter((b) => b.type === 'tool_result').length;
    const steps = script(allText);
    const step = steps[Math.min(done, steps.length - 1)]!;
    const u = counter.next();
    const id = ++calls;
    const model = String((req.body as { model?: unknown })?.model ?? 'scripted');
    const message = {
      id: `msg_scripted_${id}`, type: 'message', role: 'assistant', model, content: [],
      stop_reason: null, stop_sequence: null,
      usage: { input_tokens: u.input, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    };
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    sseEvent(res, 'message_start', { message });
    if ('text' in step) {
      sseEvent(res, 'content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
      sseEvent(res, 'content_block_delta', { index: 0, delta: { type: 'text_delta', text: step.text } });
    } else {
      const call = toolUse(step, workdirOf(allText));
      const block = { type: 'tool_use', id: `toolu_scripted_${id}`, name: call.name, input: {} };
      sseEvent(res, 'content_block_start', { index: 0, content_block: block });
      const delta = { type: 'input_json_delta', partial_json: JSON.stringify(call.input) };
      sseEvent(res, 'content_block_delta', { index: 0, delta });
    }
    sseEvent(res, 'content_block_stop', { index: 0 });
    const delta = { stop_reason: 'text' in step ? 'end_turn' : 'tool_use', stop_sequence: null };
    sseEvent(res, 'message_delta', { delta, usage: { output_tokens: u.output } });
    sseEvent(res, 'message_stop', {});
    res.end();
  });
}
