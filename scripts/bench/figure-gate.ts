// The egress gate's cost: what it adds to a model request's first byte, and how fast a CONNECT tunnel streams. The
// path is the sandbox's: client → the port a sandbox hands out (loopback TCP), accepted by the gate (own process) →
// upstream. Upstreams are loopback servers in this process; the gate's policy names only their exact addresses.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import {
  createServer as createTcpServer, connect as tcpConnect, type AddressInfo, type Server as TcpServer,
} from 'node:net';
import { createServer as createHttpsServer, request as httpsRequest } from 'node:https';
import { request as httpRequest } from 'node:http';
import { startServer } from './processes.ts';
import { median } from './stats.ts';
import type { BenchContext } from './context.ts';
import type { Row } from './report.ts';

const GATE = fileURLToPath(new URL('./gate-server.ts', import.meta.url));
const ADDED_BAR_MS = 5;
const THROUGHPUT_BAR = 50;

function listen(server: TcpServer): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

/** Milliseconds from sending a request to its first body byte; a new connection each time, as a CLI's first call. */
function firstByte(send: () => ReturnType<typeof httpRequest>): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = send();
    req.on('response', (res) => {
      res.once('data', () => resolve(performance.now() - t0));
      res.resume();
    });
    req.on('error', reject);
    req.end('{"model":"bench"}');
  });
}

/**
 * The smallest TLS ClientHello (no extensions, so no server name: right for a tunnel to an IP literal). The gate
 * reads a tunnel's hello before it copies a byte; the blaster ignores it.
 */
const HELLO = Buffer.from([
  22, 3, 1, 0, 45, 1, 0, 0, 41, 3, 3, ...new Array<number>(32).fill(0), 0, 0, 2, 0x13, 0x01, 1, 0,
]);

/** MB/s received through a CONNECT tunnel (or directly, when `proxyPort` is null) from the blaster. */
function tunnelThroughput(proxyPort: number | null, blasterPort: number, bytes: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = tcpConnect(proxyPort ?? blasterPort, '127.0.0.1');
    let received = 0;
    let t0 = 0;
    let open = proxyPort === null;
    if (open) t0 = performance.now();
    socket.on('connect', () => {
      if (proxyPort !== null) socket.write(`CONNECT 127.0.0.1:${blasterPort} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n`);
    });
    socket.on('data', (chunk: Buffer) => {
      if (!open) {
        // The 200 line is small and arrives alone: the blaster's bytes wait in the gate until the hello is read.
        open = true;
        t0 = performance.now();
        socket.write(HELLO);
        return;
      }
      received += chunk.length;
      if (received >= bytes) {
        const seconds = (performance.now() - t0) / 1000;
        socket.destroy();
        resolve(received / 1e6 / seconds);
      }
    });
    socket.on('error', reject);
  });
}

export async function measureGate(ctx: BenchContext): Promise<Row[]> {
  const root = join(ctx.tmp, 'gate');
  execFileSync('mkdir', ['-p', root]);
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-subj', '/CN=127.0.0.1',
    '-addext', 'subjectAltName=IP:127.0.0.1', '-days', '1', '-keyout', join(root, 'key.pem'),
    '-out', join(root, 'cert.pem'),
  ], { stdio: 'ignore' });
  const cert = readFileSync(join(root, 'cert.pem'));
  const model = createHttpsServer({ key: readFileSync(join(root, 'key.pem')), cert }, (req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    // A Messages stream's first event, with the usage the gate meters (metering is on, as in every run's gate).
    res.end('event: message_start\ndata: {"type":"message_start","message":{"model":"claude-sonnet-4-5",' +
      '"usage":{"input_tokens":1000,"output_tokens":1}}}\n\n');
  });
  const bytes = (ctx.options.quick ? 128 : 512) * 1024 * 1024;
  const block = Buffer.alloc(256 * 1024, 120);
  const blaster = createTcpServer((socket) => {
    socket.on('error', () => {});
    const pump = (): void => {
      while (!socket.destroyed && socket.write(block));
    };
    socket.on('drain', pump);
    pump();
  });
  const modelPort = await listen(model as unknown as TcpServer);
  const blasterPort = await listen(blaster);
  const gateArgs = [GATE, String(modelPort), String(blasterPort), join(root, 'cert.pem')];
  const gate = await startServer(gateArgs, ctx.env);
  try {
    const port = Number(new URL(gate.url).port);
    const post = { host: '127.0.0.1', method: 'POST', agent: false } as const;
    const direct = () => httpsRequest({ ...post, port: modelPort, path: '/v1/messages', ca: cert });
    const viaGate = () => httpRequest({ ...post, port, path: '/_model/anthropic/v1/messages' });
    const times = ctx.options.quick ? 30 : 100;
    for (let i = 0; i < 5; i++) {
      await firstByte(direct);
      await firstByte(viaGate);
    }
    const bare: number[] = [];
    const gated: number[] = [];
    for (let i = 0; i < times; i++) {
      bare.push(await firstByte(direct));
      gated.push(await firstByte(viaGate));
    }
    const added = median(gated) - median(bare);
    await tunnelThroughput(port, blasterPort, 16 * 1024 * 1024);
    const rates: number[] = [];
    for (let i = 0; i < (ctx.options.quick ? 1 : 3); i++) rates.push(await tunnelThroughput(port, blasterPort, bytes));
    const directRate = await tunnelThroughput(null, blasterPort, bytes);
    const rate = median(rates);
    const rateText = rates.map((r) => r.toFixed(0)).join(', ');
    ctx.log(`gate: first byte direct ${median(bare).toFixed(2)} ms, via gate ${median(gated).toFixed(2)} ms`);
    ctx.log(`gate: tunnel ${rateText} MB/s, direct ${directRate.toFixed(0)} MB/s`);
    return [
      {
        figure: 'model request first byte, direct TLS', value: median(bare), unit: 'ms', bar: 'info', pass: null,
        note: `median of ${times}, new connection each`,
      },
      {
        figure: 'model request first byte, via gate', value: median(gated), unit: 'ms', bar: 'info',
        pass: null, note: `median of ${times}, plain HTTP in, TLS out`,
      },
      {
        figure: 'egress gate: added time to first byte', value: added, unit: 'ms', bar: `≤ ${ADDED_BAR_MS} ms`,
        pass: Number.isFinite(added) && added <= ADDED_BAR_MS, note: 'difference of the medians above',
      },
      {
        figure: 'egress gate: CONNECT tunnel throughput', value: rate, unit: 'MB/s', bar: `≥ ${THROUGHPUT_BAR} MB/s`,
        pass: rate >= THROUGHPUT_BAR,
        note: `${bytes / 1048576} MiB through the gate; direct ${directRate.toFixed(0)} MB/s`,
      },
    ];
  } finally {
    await gate.stop();
    model.closeAllConnections();
    model.close();
    blaster.close();
  }
}
