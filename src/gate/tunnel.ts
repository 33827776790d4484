// CONNECT host:port, the TLS route out (docs/gate.md "Modes"): decided and connected first, then bytes are copied only
// once the client's ClientHello (never decrypted) names the host decided, since a shared address serves many names.
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { BadHostError, formatDestination, normaliseHost, parseAuthority, type Destination } from './address.ts';
import { decide } from './policy.ts';
import { routeAt, routeAtAddress, type ModelRoute } from './model-apis.ts';
import { refuseRaw, type Asker, type GateContext } from './context.ts';
import { UNRECOGNIZED_NAME_ALERT } from './client-hello.ts';
import { HelloWatch } from './hello-retry.ts';
import { arrivingRecord, type EgressRecord } from './evidence.ts';

/** Why a hello's server name does not admit the tunnel to `dest`, or null when it does. */
function serverNameMismatch(dest: Destination, serverName: string | null): string | null {
  // RFC 6066 puts no IP literal in server_name; without a name, the server answers with its default site.
  if (serverName === null) return dest.literal ? null : `the TLS ClientHello names no server (CONNECT ${dest.host})`;
  let named: string;
  try {
    named = normaliseHost(serverName).host;
  } catch {
    return `the TLS server name "${serverName.slice(0, 100)}" is not a host name`;
  }
  if (named === dest.host) return null;
  return `the TLS server name "${serverName.slice(0, 100)}" is not the CONNECT host ${dest.host}`;
}

export async function handleConnect(
  ctx: GateContext, asker: Asker, req: IncomingMessage, client: Duplex, head: Buffer,
): Promise<void> {
  const base = arrivingRecord('connect', asker, { host: (req.url ?? '').slice(0, 300) });
  const deny = (status: number, reason: string, extra: Partial<EgressRecord> = {}): void => {
    refuseRaw(client, status, reason);
    ctx.record({ ...base, ...extra, reason, status }, asker);
  };

  let dest: Destination;
  try {
    dest = parseAuthority(req.url ?? '', null);
  } catch (err) {
    if (err instanceof BadHostError) return deny(400, err.message);
    throw err;
  }
  base.host = dest.host;
  base.port = dest.port;
  const heldDeny = (route: ModelRoute, address: string | null): void => deny(403, `${formatDestination(dest.host,
    dest.port)} is the ${route.name} model API, whose key the gate holds: a tunnel's calls there could not be metered `
    + `(use /_model/${route.name}/)`, { address });
  const named = routeAt(ctx.models, dest);
  if (named) return heldDeny(named, null);
  const decision = await decide(dest, asker.policy, ctx.resolve);
  if (!decision.allowed) return deny(403, decision.reason, { rule: decision.rule, address: decision.address });
  // By address only for an address literal: a name is refused by name above, and another name sharing a held API's
  // address is most often a CDN's other site (registry.npmjs.org and openrouter.ai share Cloudflare's addresses).
  const reached = dest.literal ? await routeAtAddress(ctx.models, decision.address, dest.port, ctx.resolve) : null;
  if (reached) return heldDeny(reached, decision.address);
  const verdict: Partial<EgressRecord> = { decision: 'allowed', rule: decision.rule, address: decision.address };
  const reason = 'client went away before the connection opened';
  if (client.destroyed) return ctx.record({ ...base, ...verdict, reason }, asker);

  const upstream = ctx.connect(decision.address, dest.port);
  let opened = false;
  let checked = false;
  let recorded = false;
  let helloTimer: NodeJS.Timeout | undefined;
  // Before the tunnel opened, the client is owed its refusal (ended by refuseRaw, not cut off).
  const finish = (reason: string | null, status: number | null): void => {
    if (recorded) return;
    recorded = true;
    clearTimeout(helloTimer);
    if (opened && !client.writableEnded) client.destroy();
    upstream.destroy();
    const bytes = { bytesUp: upstream.bytesWritten, bytesDown: upstream.bytesRead };
    ctx.record({ ...base, ...verdict, reason, status, ...bytes }, asker);
  };
  // The hello decides the tunnel: refused, the client gets a TLS alert and the destination got no byte.
  const refuseHello = (reason: string, alert: boolean): void => {
    verdict.decision = 'denied';
    client.end(alert ? UNRECOGNIZED_NAME_ALERT : undefined, () => client.destroy());
    finish(reason, null);
  };
  // One reader of the client's bytes until the server's ServerHello: every ClientHello must name the CONNECT host
  // (hello-retry.ts). The server is read only once the first passed, so no server byte can end the reading before.
  const watch = new HelloWatch((serverName, first) => {
    if (first) base.sni = serverName;
    return serverNameMismatch(dest, serverName);
  });
  // When the watch is over (the server's ServerHello, or the client's end of sending), what it held goes on and the
  // tunnel is copied unread; the pipe passes the client's end of sending (half-closed) on to the server.
  const copyUnread = (held: Buffer): void => {
    upstream.off('data', onServer);
    client.off('data', onClient);
    client.off('end', onEnd);
    if (held.length > 0) upstream.write(held);
    client.pipe(upstream);
  };
  const onEnd = (): void => copyUnread(watch.end());
  const onServer = (chunk: Buffer): void => {
    const held = watch.fromServer(chunk);
    if (held !== null) copyUnread(held);
  };
  const onClient = (chunk: Buffer): void => {
    const reading = watch.fromClient(chunk);
    if ('refused' in reading) {
      client.off('data', onClient);
      return refuseHello(reading.refused, reading.alert);
    }
    if (reading.checked && !checked) {
      checked = true;
      clearTimeout(helloTimer);
      // Before the pipe's own listener: the watch reads each server chunk before the client can answer it.
      upstream.on('data', onServer);
      upstream.pipe(client);
      client.once('end', onEnd);
    }
    if (reading.forward.length > 0 && !upstream.write(reading.forward)) {
      client.pause();
      upstream.once('drain', () => client.resume());
    }
  };
  upstream.setTimeout(ctx.limits.connectTimeoutMs);
  upstream.once('connect', () => {
    opened = true;
    // What it carries the gate cannot read: the run's metered cost may miss a model call in it (budgets.ts runSpent).
    ctx.runs.addTunnel(asker.who);
    ctx.meter?.tunnel?.();
    upstream.setTimeout(ctx.limits.idleMs);
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    helloTimer = setTimeout(() => refuseHello('no TLS ClientHello in time', false), ctx.limits.connectTimeoutMs);
    client.on('data', onClient);
    onClient(head);
  });
  // The upstream's end: before the tunnel opened, a refusal the client is owed (status, why); after, the tunnel's.
  const upstreamEnded = (status: number, refusal: string, before: string, after: string | null): void => {
    if (!opened && !recorded) refuseRaw(client, status, refusal);
    finish(opened ? after : before, opened ? 200 : status);
  };
  const where = `${dest.host}:${dest.port}`;
  upstream.on('timeout', () => upstreamEnded(504, `${where} did not answer`, 'connect timeout', 'idle timeout'));
  upstream.on('error', ({ code = 'error' }: NodeJS.ErrnoException) =>
    upstreamEnded(502, `cannot reach ${where} (${code})`, `connect failed: ${code}`, null));
  upstream.on('close', () => upstreamEnded(502, `cannot reach ${where}`, 'connection closed', null));
  client.on('close', () => {
    if (!opened) finish('client went away', null);
    else finish(checked ? null : 'client closed before its TLS ClientHello', 200);
  });
}
