// A scripted Gemini API on 127.0.0.1: `generateContent` (the CLI's utility calls, e.g. its model router) and
// `streamGenerateContent?alt=sse` (the agent's turns). Each agent turn follows the script with the CLI's own tools.
import { join } from 'node:path';
import { usageOfTurn, type Script, type Step } from './model-script.ts';
import { createUsageCounter, startScriptedHttp, type ScriptedServer } from './scripted-http.ts';

export type { ScriptedServer } from './scripted-http.ts';

interface Part {
  text?: string;
  functionCall?: unknown;
  functionResponse?: unknown;
}
interface Content {
  role?: string;
  parts?: Part[];
}

function contentsOf(body: unknown): Content[] {
  const c = (body as { contents?: unknown })?.contents;
  return Array.isArray(c) ? (c as Content[]) : [];
}

/** The names of the functions the CLI declared, with their parameter names. */
function declaredTools(body: unknown): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const tools = (body as { tools?: Array<{ functionDeclarations?: unknown[] }> })?.tools ?? [];
  for (const t of tools) {
    for (const d of t.functionDeclarations ?? []) {
      type Schema = { properties?: object };
      const decl = d as { name?: string; parameters?: Schema; parametersJsonSchema?: Schema };
      const props = decl.parameters?.properties ?? decl.parametersJsonSchema?.properties ?? {};
      if (decl.name) out.set(decl.name, Object.keys(props));
    }
  }
  return out;
}

function pick(params: string[] | undefined, names: string[]): string {
  return names.find((n) => params?.includes(n)) ?? names[0]!;
}

/** The gemini CLI's own tools: read_file, replace and run_shell_command, with the parameter names it declares. */
function functionCall(step: Exclude<Step, { text: string }>, tools: Map<string, string[]>, cwd: string): Part {
  if (step.tool === 'read') {
    const param = pick(tools.get('read_file'), ['file_path', 'absolute_path', 'path']);
    return { functionCall: { name: 'read_file', args: { [param]: join(cwd, step.path) } } };
  }
  if (step.tool === 'edit') {
    const p = tools.get('replace');
    const args: Record<string, unknown> = {
      [pick(p, ['file_path', 'absolute_path'])]: join(cwd, step.path),
      old_string: step.old,
      new_string: step.new,
    };
    if (p?.includes('instruction')) args.instruction = 'Apply the scripted fix.';
    return { functionCall: { name: 'replace', args } };
  }
  const args: Record<string, unknown> = { command: step.command };
  if (tools.get('run_shell_command')?.includes('description')) args.description = 'Scripted command';
  return { functionCall: { name: 'run_shell_command', args } };
}

/** The workspace the CLI announced in its session context ("- **Workspace Directories:**\n  - /path"). */
function workspaceOf(text: string): string {
  return /Workspace Directories:\*\*\n\s*-\s*(\S+)/.exec(text)?.[1] ?? process.cwd();
}

export async function startGeminiModelServer(initial: Script): Promise<ScriptedServer> {
  const counter = createUsageCounter(usageOfTurn);
  function report() {
    const u = counter.next();
    return { promptTokenCount: u.input, candidatesTokenCount: u.output, totalTokenCount: u.input + u.output };
  }
  return startScriptedHttp(initial, counter.usage, (req, res, script) => {
    const url = req.path;
    res.setHeader('content-type', 'application/json');
    if (req.method !== 'POST' || !/^\/v1beta\/models\/[^/:]+:(generateContent|streamGenerateContent)/.test(url)) {
      res.writeHead(404).end(JSON.stringify({ error: { code: 404, message: 'not scripted', status: 'NOT_FOUND' } }));
      return;
    }
    if (url.includes(':generateContent')) {
      // Utility calls (the model router) want a JSON answer; a low complexity score keeps routing simple.
      const answer = JSON.stringify({ complexity_reasoning: 'scripted', complexity_score: 10 });
      const candidate = { content: { role: 'model', parts: [{ text: answer }] }, finishReason: 'STOP', index: 0 };
      res.writeHead(200).end(JSON.stringify({ candidates: [candidate], usageMetadata: report() }));
      return;
    }
    const parts = contentsOf(req.body).flatMap((c) => c.parts ?? []);
    const allText = parts.map((p) => (typeof p.text === 'string' ? p.text : '')).join('\n');
    const done = parts.filter((p) => p.functionResponse).length;
    const steps = script(allText);
    const step = steps[Math.min(done, steps.length - 1)]!;
    const tools = declaredTools(req.body);
    const part = 'text' in step ? { text: step.text } : functionCall(step, tools, workspaceOf(allText));
    const candidate = { content: { role: 'model', parts: [part] }, finishReason: 'STOP', index: 0 };
    const chunk = { candidates: [candidate], usageMetadata: report(), modelVersion: 'scripted' };
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(`data: ${JSON.stringify(chunk)}\r\n\r\n`);
  });
}
