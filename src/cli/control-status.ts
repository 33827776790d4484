// `svc control status`: finds the Control Plane (SVC_CONTROL_URL, live server.json, default port) and reports whether
// it answers and how many runs it holds. Exit 0 when reachable, 1 when not (or when the token is missing or wrong).
import type { CliIo } from './io.ts';
import { UnavailableError, errorMessage } from '../errors.ts';
import { discoverControlUrl, type Discovered } from '../client/discover.ts';
import { createControlClient, ControlApiError } from '../client/client.ts';
import { safeJson } from '../safe-json.ts';

/** The next step when nothing answers, by how the address was found. */
function startHint(via: Discovered['via']): string {
  if (via === 'SVC_CONTROL_URL') {
    return 'start the server SVC_CONTROL_URL names, or unset SVC_CONTROL_URL to use a local one';
  }
  const stale = via === 'server.json' ? 'the server recorded in ~/.svc/control/server.json does not answer; ' : '';
  return `${stale}start one with "svc control serve" (in this terminal) or "svc dashboard" (in the background)`;
}

function reason(err: unknown, url: string, via: Discovered['via'], hasToken: boolean): string {
  if (err instanceof ControlApiError) {
    if (err.status === 401) {
      return hasToken
        ? `The Control Plane at ${url} refused SVC_CONTROL_TOKEN: the token is wrong`
        : `The Control Plane at ${url} needs a token: set SVC_CONTROL_TOKEN`;
    }
    if (err.status === 0) return `The Control Plane is not reachable at ${url}: ${startHint(via)}`;
    return `The Control Plane at ${url} answered ${err.status} ${err.code}: ${err.message}`;
  }
  return `The Control Plane at ${url} gave an unexpected answer (${errorMessage(err)})`;
}

export async function controlStatus(io: CliIo, json: boolean): Promise<number> {
  const { url, via } = discoverControlUrl(io.env);
  const token = io.env.SVC_CONTROL_TOKEN || undefined;
  const client = createControlClient({ url, token, timeoutMs: 10_000 });
  let runs: number;
  try {
    await client.health();
    const stats = await client.stats();
    runs = Number(stats.runs);
    if (!Number.isSafeInteger(runs)) throw new UnavailableError('/v1/stats has no run count');
  } catch (err) {
    const message = reason(err, url, via, token !== undefined);
    if (json) {
      io.stdout(`${safeJson({ reachable: false, url, via, error: message })}\n`);
      return 1;
    }
    throw new UnavailableError(message, { cause: err });
  }
  if (json) io.stdout(`${safeJson({ reachable: true, url, via, runs })}\n`);
  else io.stdout(`reachable ${url} — ${runs} run${runs === 1 ? '' : 's'}\n`);
  return 0;
}
