// Who may use a shared gate, and how much of it. With `clients` set (svc gate serve with SVC_GATE_SECRET_FILE), every
// request and CONNECT must carry a valid job credential (job-credential.ts) — as Proxy-Authorization, or for model
// API requests as a `/_job/<credential>` prefix — or it is refused 407. A client connection belongs to the first job
// that used it; each job may hold at most `maxPerClient` connections (over that: 429), so one job cannot take the
// connection limit from the others. A run's own gate has no `clients`: its one client is its sandbox.
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { GatePolicy } from './policy.ts';
import { credentialFromProxyAuthorization, verifyJobCredential, type JobIdentity } from './job-credential.ts';

export interface GateClients {
  secret: Buffer;
  /** The policy a job's connections are decided by (its repository's). */
  policyFor(who: JobIdentity): GatePolicy;
  /** Client connections one job may hold open at once. */
  maxPerClient: number;
}

/** Who a request is from: the policy it gets and the job it is recorded for (null on a run's own gate). */
export interface Asker {
  policy: GatePolicy;
  who: JobIdentity | null;
}

export type Admission =
  | { admitted: true; asker: Asker; url: string }
  | { admitted: false; status: 407 | 429; reason: string; who: JobIdentity | null; url: string };

/** The `Proxy-Authenticate` challenge a 407 carries. */
export const CHALLENGE = 'Basic realm="svc gate"';

// `/_job/<credential>` before a model API path, or before `/_egress` (the run's own records, for its pod's signer).
const JOB_PREFIX = /^\/_job\/([A-Za-z0-9._-]{1,2048})(\/_model\/.*|\/_egress)$/;

export class ClientBook {
  private readonly owner = new WeakMap<Socket, string>();
  private readonly open = new Map<string, number>();
  private readonly clients: GateClients | null;
  private readonly policy: GatePolicy;

  constructor(clients: GateClients | null, policy: GatePolicy) {
    this.clients = clients;
    this.policy = policy;
  }

  admit(req: IncomingMessage): Admission {
    const url = req.url ?? '';
    if (!this.clients) return { admitted: true, asker: { policy: this.policy, who: null }, url };
    const inPath = JOB_PREFIX.exec(url);
    const credential = inPath?.[1] ?? credentialFromProxyAuthorization(req.headers['proxy-authorization']);
    const target = inPath?.[2] ?? url;
    const who = credential === null ? null : verifyJobCredential(this.clients.secret, credential);
    if (!who) {
      const reason = credential === null ? 'a job credential is required' : 'the job credential is not valid';
      return { admitted: false, status: 407, reason, who: null, url: target };
    }
    const key = keyOf(who);
    const socket = req.socket;
    const bound = this.owner.get(socket);
    if (bound !== undefined && bound !== key) {
      return { admitted: false, status: 407, reason: 'this connection belongs to another job', who, url: target };
    }
    if (bound === undefined) {
      const count = this.open.get(key) ?? 0;
      if (count >= this.clients.maxPerClient) {
        const reason = `this job already holds ${count} connections (its share of the gate)`;
        return { admitted: false, status: 429, reason, who, url: target };
      }
      this.owner.set(socket, key);
      countWhileOpen(this.open, key, socket);
    }
    return { admitted: true, asker: { policy: this.clients.policyFor(who), who }, url: target };
  }
}

/** Counts `socket` under `key` until it closes; a key back at zero is removed. */
export function countWhileOpen(open: Map<string, number>, key: string, socket: Socket): void {
  open.set(key, (open.get(key) ?? 0) + 1);
  socket.once('close', () => {
    const left = (open.get(key) ?? 1) - 1;
    if (left <= 0) open.delete(key);
    else open.set(key, left);
  });
}

function keyOf(who: JobIdentity): string {
  return `${who.job}\u0000${who.run}`;
}
