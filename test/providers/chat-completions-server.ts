// A scripted OpenAI-compatible chat completions API on 127.0.0.1 (`POST /v1/chat/completions`, streaming or not), as
// opencode's custom providers speak it. Requests that declare tools are the agent's turns and follow the script with
// the CLI's own tools (read, edit, bash); requests without tools (e.g. a session title) get a short plain answer.
import { isAbsolute, join } from 'node:path';
import { messagesOf, usageOfTurn, type Script, type Step, type UsageTotals } from './model-script.ts';
import { createUsageCounter, startScriptedHttp, type ScriptedServer } from './scripted-http.ts';

export interface ChatServer extends ScriptedServer {
  /** Usage reported on the agent's turns only (requests that declared tools). */
  agentUsage: UsageTotals;
}


function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  const texts = content.map((p) => (p as { text?: unknown })?.text);
  return texts.map((t) => (typeof t === 'string' ? t : '')).join('\n');
}

function declaredTools(body: unknown): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const tools = (body as { tools?: unknown })?.tools;
  for (const t of Array.isArray(tools) ? tools : []) {
    const f = (t as { function?: { name?: string; parameters?: { properties?: object } } }).function;
    if (f?.name) out.set(f.name, Object.keys(f.parameters?.properties ?? {}));
  }
  return out;
}

function pick(params: string[] | undefined, names: string[]): string {
  return names.find((n) => params?.includes(n)) ?? names[0]!;
}

/** The working directory opencode names in its system prompt ("Working directory: /path"). */
function workdirOf(text: string): string {
  return /Working directory:\s*(\S+)/.exec(text)?.[1] ?? process.cwd();
}

type ToolCall = { name: string; args: Record<string, unknown> };

/** opencode's own tools: read, edit and bash, with the parameter names it declares. */
function toolCall(step: Exclude<Step, { text: string }>, tools: Map<string, string[]>, cwd: string): ToolCall {
  const abs = (p: string) => (isAbsolute(p) ? p : join(cwd, p));
  if (step.tool === 'read') {
    return { name: 'read', args: { [pick(tools.get('read'), ['filePath', 'file_path', 'path'])]: abs(step.path) } };
  }
  if (step.tool === 'edit') {
    const p = tools.get('edit');
    const args = {
      [pick(p, ['filePath', 'file_path'])]: abs(step.path),
      [pick(p, ['oldString', 'old_string'])]: step.old,
      [pick(p, ['newString', 'new_string'])]: step.new,
    };
    return { name: 'edit', args };
  }
  const args: Record<string, unknown> = { command: step.command };
  if (tools.get('bash')?.includes('description')) args.description = 'Scripted command';
  return { name: 'bash', args };
}

export async function startChatCompletionsServer(initial: Script): Promise<ChatServer> {
  const counter = createUsageCounter(usageOfTurn);
  const agentUsage: UsageTotals = { input: 0, output: 0 };
  let calls = 0;
  function report(agent: boolean) {
    const u = counter.next();
    if (agent) {
      agentUsage.input += u.input;
      agentUsage.output += u.output;
    }
    return { prompt_tokens: u.input, completion_tokens: u.output, total_tokens: u.input + u.output };
  }
  const server = await startScriptedHttp(initial, counter.usage, (req, res, script) => {
    const body = req.body;
    if (req.method !== 'POST' || !req.path.endsWith('/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'not scripted' } }));
      return;
    }
    const messages = messagesOf(body);
    const tools = declaredTools(body);
    const agent = tools.size > 0;
    const allText = messages.map((m) => textOf(m.content)).join('\n');
    let content: string | null = null;
    let call: ToolCall | null = null;
    if (!agent) {
      content = 'Scripted session';
    } else {
      const steps = script(allText);
      const done = messages.filter((m) => m.role === 'tool').length;
      const step = steps[Math.min(done, steps.length - 1)]!;
      if ('text' in step) content = step.text;
      else call = toolCall(step, tools, workdirOf(allText));
    }
    const u = report(agent);
    const id = `chatcmpl-${++calls}`;
    const model = String((body as { model?: unknown })?.model ?? 'scripted');
    const base = { id, created: Math.floor(Date.now() / 1000), model };
    const fn = call ? { name: call.name, arguments: JSON.stringify(call.args) } : null;
    const toolCalls = fn ? [{ index: 0, id: `call_${calls}`, type: 'function', function: fn }] : undefined;
    const finish = call ? 'tool_calls' : 'stop';
    if ((body as { stream?: unknown })?.stream !== true) {
      const withCalls = toolCalls ? { tool_calls: toolCalls.map(({ index: _i, ...t }) => t) } : {};
      const choice = { index: 0, message: { role: 'assistant', content, ...withCalls }, finish_reason: finish };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ...base, object: 'chat.completion', choices: [choice], usage: u }));
      return;
    }
    const chunk = (choices: unknown[], extra: object = {}) =>
      `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices, ...extra })}\n\n`;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(chunk([{ index: 0, delta: { role: 'assistant', content: content ?? '' }, finish_reason: null }]));
    if (toolCalls) res.write(chunk([{ index: 0, delta: { tool_calls: toolCalls }, finish_reason: null }]));
    res.write(chunk([{ index: 0, delta: {}, finish_reason: finish }]));
    res.write(chunk([], { usage: u }));
    res.end('data: [DONE]\n\n');
  });
  return { ...server, agentUsage };
}
