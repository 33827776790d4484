// What `svc control serve` and `svc trigger serve` say when their port is taken: who holds it, and what to do next.
import { serverRecordFile, readServerRecordFile, isPidAlive } from '../client/server-record.ts';
import { isHealthy } from './dashboard.ts';
import { UnavailableError } from '../errors.ts';

/** Runs `serve`; when its port is taken (EADDRINUSE), fails saying who holds it and what to do next. */
export async function serveOnFreePort(
  server: 'control' | 'trigger', at: { host: string; port: number }, env: NodeJS.ProcessEnv,
  serve: () => Promise<number>,
): Promise<number> {
  try {
    return await serve();
  } catch (err) {
    if ((err as NodeJS.ErrnoException | null)?.code !== 'EADDRINUSE') throw err;
    throw new UnavailableError(await busyPortMessage(server, at.host, at.port, env));
  }
}

/** The port of a URL (its scheme's default when none is written), or null when it does not parse. */
function portOf(url: string): number | null {
  try {
    const u = new URL(url);
    return Number(u.port || (u.protocol === 'https:' ? 443 : 80));
  } catch {
    return null;
  }
}

/** Who holds the port: the Control Plane server.json names, else a server answering /health, else a program. */
async function busyPortMessage(
  server: 'control' | 'trigger', host: string, port: number, env: NodeJS.ProcessEnv,
): Promise<string> {
  const url = `http://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
  const taken = `Port ${port} on ${host} is already in use`;
  const wayOut = `or run this one on a free port: svc ${server} serve --port 0`;
  if (server === 'control') {
    const record = readServerRecordFile(serverRecordFile(env));
    if (record && isPidAlive(record.pid) && portOf(record.url) === port) {
      return `${taken}: a Control Plane already runs there (pid ${record.pid}, ${record.url}). Use it ` +
        `(svc control status, svc dashboard), stop it (kill ${record.pid}), ${wayOut}`;
    }
  }
  if (await isHealthy(url, 1_000)) {
    return `${taken}: a server answers ${url}/health (another svc ${server} serve?). Use it, stop it, ${wayOut}`;
  }
  return `${taken} by another program. Stop it, ${wayOut}`;
}
