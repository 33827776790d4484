// The HTTP side every scripted model server shares: one listener on 127.0.0.1 (port 0) that reads each body whole,
// records the request (its JSON parsed when it is JSON) and hands it, with the current script, to the handler of the
// server's wire protocol. The script can be swapped between runs.
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RecordedRequest, Script, UsageTotals } from './model-script.ts';

export interface ScriptedServer {
  url: string;
  requests: RecordedRequest[];
  /** Sum of the usage figures this server reported. */
  usage: UsageTotals;
  setScript(script: Script): void;
  close(): Promise<void>;
}

export type ProtocolHandler = (req: RecordedRequest, res: ServerResponse, script: Script) => void;

export async function startScriptedHttp(
  initial: Script, usage: UsageTotals, handle: ProtocolHandler,
): Promise<ScriptedServer> {
  let script = initial;
  const requests: RecordedRequest[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      let body: unknown = null;
      try {
        body = JSON.parse(text);
      } catch {
        body = null;
      }
      const recorded = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body, text };
      requests.push(recorded);
      handle(recorded, res, script);
    });
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

/** One server-sent event whose data carries its own type, as the Anthropic and OpenAI streams do. */
export function sseEvent(res: ServerResponse, type: string, data: object): void {
  res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
}

/** Counts turns and sums the usage each reports; `next()` is the figures for the next turn. */
export function createUsageCounter(turnUsage: (n: number) => { input: number; output: number }) {
  const usage: UsageTotals = { input: 0, output: 0 };
  let turn = 0;
  return {
    usage,
    next() {
      const u = turnUsage(turn++);
      usage.input += u.input;
      usage.output += u.output;
      return u;
    },
  };
}
