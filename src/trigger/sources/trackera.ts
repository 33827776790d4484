// trackera: only issue events start jobs, as `svc start trackera:<identifier>`; the verified payload is kept for the
// run
// by ../trackera-snapshot.ts.
import { obj, str, describe } from '../../untrusted.ts';

import { TRACKERA_IDENTIFIER as IDENTIFIER } from '../trackera-snapshot.ts';

/** `teamKey` routes the issue to a served repository (trackera=… in the repositories file). */
export type TrackeraInput =
  | { kind: 'issue'; identifier: string; issueId: string; teamKey: string | null }
  | { kind: 'skip'; reason: string };

/** `data.identifier`, else team key + number, else the `/issue/<ID>/` segment of the URL. */
export function trackeraIdentifier(body: Record<string, unknown>): string | null {
  const data = obj(body.data);
  const team = obj(data.team);
  const fromUrl = /\/issue\/([A-Za-z0-9_-]+)(?:[/#?]|$)/.exec(str(body.url) ?? '')?.[1] ?? null;
  const fromTeam = str(team.key) && typeof data.number === 'number' ? `${team.key as string}-${data.number}` : null;
  const candidate = str(data.identifier) ?? fromTeam ?? fromUrl;
  return candidate && IDENTIFIER.test(candidate) ? candidate : null;
}

export function readTrackera(body: Record<string, unknown>): TrackeraInput {
  if (body.type !== 'Issue') return { kind: 'skip', reason: `${describe(body.type)} events do not start jobs` };
  if (body.action !== 'create' && body.action !== 'update') {
    return { kind: 'skip', reason: `issue action "${describe(body.action)}" does not start a job` };
  }
  const identifier = trackeraIdentifier(body);
  const data = obj(body.data);
  const issueId = str(data.id);
  if (!identifier || !issueId) return { kind: 'skip', reason: 'issue event without an identifier' };
  // The team's key, else the identifier's prefix (ENG-123 is team ENG's issue 123).
  const teamKey = str(obj(data.team).key) ?? /^([A-Za-z0-9_]+)-\d+$/.exec(identifier)?.[1] ?? null;
  return { kind: 'issue', identifier, issueId, teamKey };
}
