// CONNECT host:port (RFC 9110 §9.3.6): the TLS route out. The gate decides first, opens a TCP connection to the
// address it checked, answers 200 and then only copies bytes both ways — it never sees inside the TLS.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { BadHostError, parseAuthority } from './host.ts';
import { decide } from './decide.ts';
import { refuseRaw, type GateContext } from './context.ts';
import type { EgressRecord } from './evidence.ts';

export async function handleConnect(
  ctx: GateContext, req: IncomingMessage, client: Duplex, head: Buffer,
): Promise<void> {
  const started = Date.now();
  const base: EgressRecord = {
    time: new Date(started).toISOString(), kind: 'connect', host: (req.url ?? '').slice(0, 300), port: 0,
    method: null, model: null, decision: 'denied', rule: null, reason: null, address: null, status: null,
    bytesUp: 0, bytesDown: 0, ms: 0,
  };
  client.on('error', () => client.destroy());
  const deny = (status: number, reason: string, extra: Partial<EgressRecord> = {}): void => {
    refuseRaw(client, status, reason);
    ctx.record({ ...base, ...extra, reason, status, ms: Date.now() - started });
  };

  let dest;
  try {
    dest = parseAuthority(req.url ?? '', null);
  } catch (err) {
    if (err instanceof BadHostError) return deny(400, err.message);
    throw err;
  }
  base.host = dest.host;
  base.port = dest.port;
  const decision = await decide(dest, ctx.policy, ctx.resolve);
  if (!decision.allowed) return deny(403, decision.reason, { rule: decision.rule, address: decision.address });
  if (client.destroyed) {
    ctx.record({ ...base, decision: 'allowed', rule: decision.rule, address: decision.address,
      reason: 'client went away before the connection opened', ms: Date.now() - started });
    return;
  }

  const upstream = ctx.connect(decision.address, dest.port);
  const allowed: Partial<EgressRecord> = { decision: 'allowed', rule: decision.rule, address: decision.address };
  let opened = false;
  let recorded = false;
  // Before the tunnel opened, the client is owed its refusal (ended by refuseRaw, not cut off).
  const finish = (reason: string | null, status: number | null): void => {
    if (recorded) return;
    recorded = true;
    if (opened) client.destroy();
    upstream.destroy();
    ctx.record({
      ...base, ...allowed, reason, status, bytesUp: upstream.bytesWritten, bytesDown: upstream.bytesRead,
      ms: Date.now() - started,
    });
  };
  upstream.setTimeout(ctx.limits.connectTimeoutMs);
  upstream.once('connect', () => {
    opened = true;
    upstream.setTimeout(ctx.limits.idleMs);
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) upstream.write(head);
    upstream.pipe(client);
    client.pipe(upstream);
  });
  upstream.on('timeout', () => {
    if (!opened) refuseRaw(client, 504, `${dest.host}:${dest.port} did not answer`);
    finish(opened ? 'idle timeout' : 'connect timeout', opened ? 200 : 504);
  });
  upstream.on('error', (err: NodeJS.ErrnoException) => {
    if (!opened) refuseRaw(client, 502, `cannot reach ${dest.host}:${dest.port} (${err.code ?? 'error'})`);
    finish(opened ? null : `connect failed: ${err.code ?? 'error'}`, opened ? 200 : 502);
  });
  upstream.on('close', () => {
    if (!opened && !recorded) refuseRaw(client, 502, `cannot reach ${dest.host}:${dest.port}`);
    finish(opened ? null : 'connection closed', opened ? 200 : 502);
  });
  client.on('close', () => finish(opened ? null : 'client went away', opened ? 200 : null));
}
