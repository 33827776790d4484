// A loopback model API that streams every answer as the Messages API does, with its usage split over two events
// (message_start, message_delta): 1,000 output tokens a call, so a price table makes each call cost a known amount.
// On `…/v1/cut/messages` it closes the connection after message_start, as an API cut mid-stream does.
import { createServer, type Server } from 'node:http';

export interface MeteredModel {
  server: Server;
  /** Model calls answered so far. */
  calls(): number;
}

export async function startMeteredModel(): Promise<MeteredModel> {
  let calls = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      calls += 1;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`event: message_start\ndata: {"type":"message_start","message":{"model":"scripted-model",` +
        '"usage":{"input_tokens":0,"output_tokens":1}}}\n\n');
      if (req.url?.endsWith('/v1/cut/messages')) return void setImmediate(() => res.socket?.destroy());
      res.end('event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":1000}}\n\n');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, calls: () => calls };
}
