// A scripted Anthropic Messages API on 127.0.0.1 (`POST /v1/messages`, streamed as server-sent events), as the
// claude CLI speaks it with ANTHROPIC_BASE_URL set. Each turn follows the script with claude's own tools (Read, Edit,
// Bash) as `tool_use` blocks; the usage of every turn goes out in message_start (input) and message_delta (output).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { isAbsolute, join } from 'node:path';
import { usageOfTurn, type RecordedRequest, type Script, type Step, type UsageTotals } from './model-script.ts';
import type { ScriptedServer } from './gemini-model-server.ts';

interface Block {
  type?: string;
  text?: unknown;
  content?: unknown;
}
interface Message {
  role?: string;
  content?: unknown;
}

function messagesOf(body: unknown): Message[] {
  const m = (body as { messages?: unknown })?.messages;
  return Array.isArray(m) ? (m as Message[]) : [];
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

function sse(res: ServerResponse, type: string, data: object): void {
  res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
}

export async function startAnthropicMessagesServer(initial: Script): Promise<ScriptedServer> {
  let script = initial;
  const requests: RecordedRequest[] = [];
  const usage: UsageTotals = { input: 0, output: 0 };
  let turn = 0;
  let calls = 0;
  function handle(req: IncomingMessage, res: ServerResponse, text: string) {
    let body: unknown = null;
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
    requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body, text });
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'POST' || path !== '/v1/messages') {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ type: 'error', error: { type: 'not_found_error', message: 'not scripted' } }));
      return;
    }
    const messages = messagesOf(body);
    const blocks = messages.flatMap((m) => blocksOf(m.content));
    const system = textOf(blocksOf((body as { system?: unknown })?.system));
    const allText = `${system}\n${textOf(blocks)}`;
    const done = blocks.filter((b) => b.type === 'tool_result').length;
    const steps = script(allText);
    const step = steps[Math.min(done, steps.length - 1)]!;
    const u = usageOfTurn(turn++);
    usage.input += u.input;
    usage.output += u.output;
    const id = ++calls;
    const model = String((body as { model?: unknown })?.model ?? 'scripted');
    const message = {
      id: `msg_scripted_${id}`, type: 'message', role: 'assistant', model, content: [],
      stop_reason: null, stop_sequence: null,
      usage: { input_tokens: u.input, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
    };
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    sse(res, 'message_start', { message });
    if ('text' in step) {
      sse(res, 'content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
      sse(res, 'content_block_delta', { index: 0, delta: { type: 'text_delta', text: step.text } });
    } else {
      const call = toolUse(step, workdirOf(allText));
      const block = { type: 'tool_use', id: `toolu_scripted_${id}`, name: call.name, input: {} };
      sse(res, 'content_block_start', { index: 0, content_block: block });
      const delta = { type: 'input_json_delta', partial_json: JSON.stringify(call.input) };
      sse(res, 'content_block_delta', { index: 0, delta });
    }
    sse(res, 'content_block_stop', { index: 0 });
    const stop = 'text' in step ? 'end_turn' : 'tool_use';
    const delta = { stop_reason: stop, stop_sequence: null };
    sse(res, 'message_delta', { delta, usage: { output_tokens: u.output } });
    sse(res, 'message_stop', {});
    res.end();
  }
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(req, res, Buffer.concat(chunks).toString('utf8')));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    usage,
    setScript(s) {
      script = s;
    },
    close: () => new Promise((r) => {
      server.closeAllConnections();
      server.close(() => r());
    }),
  };
}
