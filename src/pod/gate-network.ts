// A pod's receipt network section from the shared gate itself (docs/gate.md "svc gate serve"), asked for once the run
// container has ended: the run container's files have no say in it.
import { readEgressRecord, type EgressDenial, type EgressHost, type EgressRecord } from '../gate/evidence.ts';
import { countOrNull, figure, list, obj, str, tryParseJson } from '../untrusted.ts';
import { UnavailableError, errorMessage } from '../errors.ts';
import { confinedNetwork, UNCONFINED, type ReceiptNetwork } from '../engine/receipt.ts';
import { readMetered, type MeteredCost } from '../run-json.ts';
const TIMEOUT_MS = 10_000;
const MAX_BYTES = 16 * 1024 * 1024;

/** The gate's answer: a 200 or a 404 (which carries why), and its JSON body. */
function getJson(url: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    // node:http as CommonJS, taken when asked: see test/unit/http-imports.test.ts.
    const { get } = process.getBuiltinModule('node:http');
    const req = get(url, { agent: false, timeout: TIMEOUT_MS }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_BYTES) req.destroy(new UnavailableError('the gate answered too much'));
        else chunks.push(c);
      });
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        if (status !== 200 && status !== 404) return reject(new UnavailableError(`the gate answered ${status}`));
        const body = tryParseJson(Buffer.concat(chunks).toString('utf8'));
        if (body !== undefined) return resolve({ status, body });
        reject(new UnavailableError(`the gate answered ${status} with something that is not JSON`));
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new UnavailableError('the gate did not answer')));
    req.on('error', reject);
  });
}

const strings = (value: unknown): string[] => list(value).map(str).filter((s): s is string => s !== null);
const count = (value: unknown): number => countOrNull(value) ?? 0;

function readHost(value: unknown): EgressHost {
  const o = obj(value);
  return {
    host: str(o.host) ?? '', port: count(o.port), allowed: count(o.allowed), denied: count(o.denied),
    bytesUp: count(o.bytesUp), bytesDown: count(o.bytesDown),
  };
}

function readDenial(value: unknown): EgressDenial {
  const o = obj(value);
  return { host: str(o.host) ?? '', port: count(o.port), reason: str(o.reason) ?? 'denied', count: count(o.count) };
}

function timeOf(value: unknown): number | null {
  const text = str(value);
  const ms = text === null ? NaN : Date.parse(text);
  return Number.isFinite(ms) ? ms : null;
}

export interface PodGateNetwork {
  network: ReceiptNetwork;
  records: EgressRecord[];
  /** Why the section is not confined; null when it is. */
  problem: string | null;
  /** Where the gate could not account for the run's network in full. */
  gaps: string[];
  metered: MeteredCost | null;
  /** The run's max_usd the gate held it to; null when none. */
  maxUsd: number | null;
}

/** The network section for `run` (null: the pod has no gate); a gate that may have missed part of the run since
 * `startedAt` (the seal's time) gives `confined: false`, the reason and a gap. */
export async function podGateNetwork(
  env: NodeJS.ProcessEnv, run: string, startedAt: string,
): Promise<PodGateNetwork | null> {
  const url = env.SVC_GATE_EVIDENCE_URL;
  if (!url) return null;
  const unconfined = (problem: string): PodGateNetwork => ({
    network: UNCONFINED, records: [], problem, gaps: [`the network is not accounted for: ${problem}`], metered: null,
    maxUsd: null,
  });
  const got = await getJson(url).catch((err: unknown) => errorMessage(err));
  if (typeof got === 'string') return unconfined(`the gate's records could not be read: ${got}`);
  const answer = obj(got.body);
  if (answer.run !== run) return unconfined('the gate answered for another run');
  const since = timeOf(answer.since);
  const started = timeOf(startedAt);
  if (since === null) return unconfined('the gate did not say since when it has kept records');
  if (started === null) return unconfined('the run\'s start is unknown, so the gate may have missed part of it');
  if (since > started) {
    return unconfined(`the gate has kept records since ${str(answer.since)}, after the run started ` +
      `(${startedAt}): it restarted during the run`);
  }
  if (got.status === 404 && answer.evicted === true) {
    return unconfined(`the gate let the run's records go (it has kept records since ${str(answer.since)})`);
  }
  // A 404 from a gate that ran since before the run started and let nothing of it go: the run made no connection.
  const gaps: string[] = [];
  if (answer.overflow === true) {
    gaps.push('the network is not fully accounted for: the run reached more distinct destinations or refusals ' +
      'than the gate counts one by one; the totals are exact, the hosts and denials listed are not all of them');
  }
  const policy = obj(answer.policy);
  const network = confinedNetwork({ allow: strings(policy.allow), deny: strings(policy.deny) }, {
    connections: count(answer.connections), denied: count(answer.denied),
    hosts: list(answer.hosts).map(readHost), denials: list(answer.denials).map(readDenial),
  });
  return {
    network, records: list(answer.records).map(readEgressRecord), problem: null, gaps,
    metered: readMetered(answer.metered), maxUsd: figure(answer.max_usd),
  };
}
