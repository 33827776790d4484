// What `svc control serve` and `svc trigger serve` say when their port is taken: who holds it, and what to do next.
import { serverRecordFile, readServerRecordFile, isPidAlive } from '../client/server-record.ts';
import { isHealthy } from './dashboard.ts';
import { UnavailableError } from '../errors.ts';

/** Runs `serve`; a taken port (EADDRINUSE) names its holder: the recorded Control Plane, a server or a program. */
export async function serveOnFreePort(
  server: 'control' | 'trigger', { host, port }: { host: string; port: number }, env: NodeJS.ProcessEnv,
  serve: () => Promise<number>,
): Promise<number> {
  try {
    return await serve();
  } catch (err) {
    if ((err as NodeJS.ErrnoException | null)?.code !== 'EADDRINUSE') throw err;
  }
  const url = `http://${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${port}`;
  const taken = `Port ${port} on ${host} is already in use`;
  const wayOut = `or run this one on a free port: svc ${server} serve --port 0`;
  const record = server === 'control' ? readServerRecordFile(serverRecordFile(env)) : null;
  const recorded = record && isPidAlive(record.pid) ? URL.parse(record.url) : null;
  if (record && recorded && Number(recorded.port || (recorded.protocol === 'https:' ? 443 : 80)) === port) {
    throw new UnavailableError(`${taken}: a Control Plane already runs there (pid ${record.pid}, ${record.url}). ` +
      `Use it (svc control status, svc dashboard), stop it (kill ${record.pid}), ${wayOut}`);
  }
  if (await isHealthy(url, 1_000)) {
    throw new UnavailableError(`${taken}: a server answers ${url}/health (another svc ${server} serve?). ` +
      `Use it, stop it, ${wayOut}`);
  }
  throw new UnavailableError(`${taken} by another program. Stop it, ${wayOut}`);
}
