// A pod's receipt network section, from the shared gate itself. The agent's pod reaches out only through
// `svc gate serve` (a NetworkPolicy, scripts/k8s/gate.yaml), which records every connection under the job's
// credential. Once the run container has ended — with it every process the agent started — the signer asks the gate
// for that run's records (SVC_GATE_EVIDENCE_URL, `/_job/<credential>/_egress`) and summarises them as a local run's
// receipt does: it establishes the section itself, the run container's files have no say in it.
import { request } from 'node:http';
import { summarizeEgress, readEgressRecord, type EgressRecord } from '../gate/evidence.ts';
import { obj, str } from '../untrusted.ts';
import { UnavailableError, errorMessage } from '../errors.ts';
import type { ReceiptNetwork } from '../engine/receipt.ts';

/** At most this many hosts and denials are listed (the receipt of a local run lists as many). */
const ROWS = 50;
const TIMEOUT_MS = 10_000;
const MAX_BYTES = 16 * 1024 * 1024;

function getJson(url: string): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'GET', agent: false, timeout: TIMEOUT_MS }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_BYTES) req.destroy(new UnavailableError('the gate answered too much'));
        else chunks.push(c);
      });
      res.on('end', () => {
        if (res.statusCode !== 200) return reject(new UnavailableError(`the gate answered ${res.statusCode}`));
        try {
          resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        } catch {
          reject(new UnavailableError('the gate answered something that is not JSON'));
        }
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new UnavailableError('the gate did not answer')));
    req.on('error', reject);
    req.end();
  });
}

const arr = (value: unknown): unknown[] => (Array.isArray(value) ? value : []);
const strings = (value: unknown): string[] => arr(value).map(str).filter((s): s is string => s !== null);

/**
 * The network section for `run`, or null when the pod has no gate (no SVC_GATE_EVIDENCE_URL). A gate that cannot
 * be read gives `confined: false` and the reason: the signer vouches only for what the gate told it.
 */
export async function podGateNetwork(
  env: NodeJS.ProcessEnv, run: string,
): Promise<{ network: ReceiptNetwork; records: EgressRecord[]; problem: string | null } | null> {
  const url = env.SVC_GATE_EVIDENCE_URL;
  if (!url) return null;
  const none: ReceiptNetwork = {
    confined: false, allow: [], deny: [], connections: 0, denied: 0, hosts: [], denials: [],
  };
  let answer: Record<string, unknown>;
  try {
    answer = obj(await getJson(url));
  } catch (err) {
    return { network: none, records: [], problem: errorMessage(err) };
  }
  if (answer.run !== run) return { network: none, records: [], problem: 'the gate answered for another run' };
  const records = arr(answer.records).map(readEgressRecord);
  const summary = summarizeEgress(records);
  const policy = obj(answer.policy);
  const count = (value: unknown, fallback: number) => (typeof value === 'number' ? value : fallback);
  return {
    network: {
      confined: true,
      allow: strings(policy.allow),
      deny: strings(policy.deny),
      connections: count(answer.connections, summary.connections),
      denied: count(answer.denied, summary.denied),
      hosts: summary.hosts.filter((h) => h.allowed > 0).slice(0, ROWS).map((h) => ({
        host: h.host, port: h.port, connections: h.allowed, bytes_up: h.bytesUp, bytes_down: h.bytesDown,
      })),
      denials: summary.denials.slice(0, ROWS),
    },
    records,
    problem: null,
  };
}
