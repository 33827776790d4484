// A run's egress gate (DESIGN §7a, docs/gate.md): the agents' only route out, every connection kept as evidence.
import { join } from 'node:path';
import { hash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { RunContext } from './run-context.ts';
import type { Policy } from './policy.ts';
import { startGate } from '../gate/gate.ts';
import { parseGatePolicy, parseHostPattern, repositoryAllow, type GatePolicy } from '../gate/policy.ts';
import { OPERATOR_FILES } from './config.ts';
import {
  AIDER_KEY_LIST, aiderKeyList, MODEL_APIS, modelRoutesFromEnv, routeOrigins, type ModelRoute,
} from '../gate/model-apis.ts';
import { readEgressRecord, summarizeEgress, type EgressRecord, type EgressSummary } from '../gate/evidence.ts';
import { sandboxGate, MODEL_BASE, PROXY_URL } from '../spawn/sandbox-command.ts';
import { setting, settingUsd } from '../settings-registry.ts';
import { loadPriceTable } from '../gate/prices.ts';
import {
  budgetHeld, countCall, DayLedger, holdCall, refusalText, runSpent, type Reached, type RunCount,
} from '../gate/budgets.ts';
import { addMetered, addTunnel, NOTHING_METERED } from '../gate/run-records.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import type { RunState } from './run-state.ts';
import { readMetered, type MeteredCost } from '../run-json.ts';
import { traceRoot } from '../trace.ts';
import { refusedRange } from '../gate/address.ts';
import { openPlainDirIn, openRunFolder, readPlainIn, skipReason, withDir } from './plain-tree.ts';
import { countOrNull, objOrNull, tryParseJson } from '../untrusted.ts';

/** Connections kept for egress.jsonl and the receipt's hosts (~6 MB at most), and those also sent as run events. */
const RECORDS_KEPT = 20_000;
const EVENTS_KEPT = 500;
/** An egress.jsonl larger than this is not one svc left: each record's fields are bounded (run-records.ts
 * boundedRecord), well under 4 KiB of JSON. */
const EARLIER_BYTES = RECORDS_KEPT * 4096;

export type RunGate = Awaited<ReturnType<typeof openRunGate>>;

/** Metering for a run's gate (docs/gate.md "Metered cost", "Budgets"): the run's cost, the day ledger, and the budget
 * rule `svc gate serve` applies too (budgetHeld, holdCall), on the run's budgets as its answers raised them. */
function runMeter(ctx: RunContext, log: (text: string) => void, resumed: boolean) {
  const prices = loadPriceTable(setting(ctx.env, 'SVC_PRICES_FILE'));
  const ledger = new DayLedger(join(svcHomeOf(ctx.env), 'metered'));
  const caps = { repoDay: settingUsd(ctx.env, 'SVC_BUDGET_REPO_DAY_USD'),
    serverDay: settingUsd(ctx.env, 'SVC_BUDGET_SERVER_DAY_USD') };
  // A resumed run opens a new gate: its metered totals go on from what state.json has, when svc wrote it.
  const given = ctx.state.metered ?? null;
  let totals: MeteredCost | null = readMetered(given);
  if (!isDeepStrictEqual(totals, given)) {
    log('state.json\'s metered cost is not one svc writes: the gate meters the run from nothing');
    totals = null;
  }
  // Nothing of the earlier sessions' gates known (none, an older one, or state.json not svc's): what they missed in a
  // tunnel is unknown too, so the totals count no tunnels and runSpent takes the larger report. A new run's count all.
  if (totals === null && resumed) {
    const { tunnels: _unknown, ...uncounted } = NOTHING_METERED;
    totals = uncounted;
  }
  // What the rule knows of the run; its usd is what the run spent (runSpent).
  const run: RunCount = { usd: 0, uncounted: null, doubt: null, inFlight: 0 };
  const raised = (cap: number | null, answer: number | undefined): number | null =>
    cap === null ? null : Math.max(cap, answer ?? 0);
  const limits = () => {
    const up = ctx.state.budget_caps ?? {};
    return { run: ctx.state.budget_usd, repoDay: raised(caps.repoDay, up.repo_day),
      serverDay: raised(caps.serverDay, up.server_day) };
  };
  const reached = (): Reached | null =>
    budgetHeld({ ...run, usd: runSpent(ctx.state) }, limits(), ledger.spent(ctx.state.repo));
  return {
    reached,
    // An answer that raised the budget the run was held to goes on past the calls it could not count so far: the
    // run's next such call asks again.
    accept(): void {
      run.uncounted = null;
      run.doubt = null;
    },
    gate: {
      prices,
      refusal: () => {
        const r = reached();
        return r && refusalText(r, ctx.state.repo);
      },
      hold: () => {
        const held = limits();
        if (held.run === null && held.repoDay === null && held.serverDay === null) return () => {};
        return holdCall(run, held.run !== null);
      },
      tunnel: () => {
        totals = addTunnel(totals);
        ctx.updateCost({ metered: totals });
      },
    },
    count(record: EgressRecord): void {
      const m = record.metered;
      if (!m) return;
      totals = addMetered(totals, m);
      countCall(run, m);
      ctx.updateCost({ metered: totals });
      // Counted in memory before it is appended: a ledger folder that cannot be written throws after.
      if (m.usd !== null) ledger.add(ctx.state.repo, m.usd);
    },
  };
}

/** The project's patterns less any naming a refused address, the operator's, and each model API's own origin,
 * exactly (an address only with its port): only the operator's settings open a refused address (DESIGN §7a). */
function gatePolicy(network: Policy['network'], operatorAllow: readonly string[], routes: ModelRoute[]) {
  const repository = repositoryAllow(network.allow);
  const allow = [...repository.kept, ...operatorAllow.filter((entry) => !repository.kept.includes(entry))];
  const base = parseGatePolicy({ allow, deny: network.deny });
  const policy: GatePolicy = { allow: [...base.allow, ...routeOrigins(routes)], deny: base.deny };
  const inert = inertGrants(operatorAllow);
  return { policy, network: { allow, deny: network.deny }, dropped: repository.dropped, inert };
}

/** The operator's entries naming a refused address without its port: they open nothing (only an exact address and
 * port does), so the run's log says so rather than leaving the operator to wonder. */
function inertGrants(operatorAllow: readonly string[]): string[] {
  return operatorAllow.filter((text) => {
    const pattern = parseHostPattern(text);
    return pattern.kind === 'address' && pattern.port === null && refusedRange(pattern.host) !== null;
  });
}

/** The agent's side: every proxy variable names the bridge; each model CLI gets the bridge and a placeholder. */
function agentEnv(routes: ModelRoute[], env: NodeJS.ProcessEnv): Record<string, string> {
  const vars: Record<string, string> = {
    HTTP_PROXY: PROXY_URL, HTTPS_PROXY: PROXY_URL, ALL_PROXY: PROXY_URL,
    http_proxy: PROXY_URL, https_proxy: PROXY_URL, all_proxy: PROXY_URL,
    NO_PROXY: 'localhost', no_proxy: 'localhost',
    // Node's own http, https and fetch honour the proxy variables only when asked to.
    NODE_USE_ENV_PROXY: '1',
  };
  // No real key stays in the agent's environment, whichever way svc was given it.
  for (const api of Object.values(MODEL_APIS)) {
    for (const variable of api.env) if (env[variable] !== undefined) vars[variable] = api.placeholder;
  }
  for (const route of routes) {
    const api = MODEL_APIS[route.name];
    if (api) for (const variable of api.env) vars[variable] = api.placeholder;
    if (api?.baseEnv) vars[api.baseEnv] = `${MODEL_BASE}/${route.name}`;
  }
  const aider = aiderListForAgent(routes, env);
  if (aider.held.length > 0) vars[AIDER_KEY_LIST] = JSON.stringify(aider.held);
  return vars;
}

/** aider's key list as the agent gets it: each entry whose key the gate holds, with its API's placeholder (as JSON,
 * which aider reads as a list); the others left out, and named for the run's log once any entry is held (with none,
 * the variable is left out whole, and named so). */
function aiderListForAgent(routes: ModelRoute[], env: NodeJS.ProcessEnv): { held: string[]; left: string[] } {
  const held: string[] = [];
  const left: string[] = [];
  for (const { provider, api } of aiderKeyList(env) ?? []) {
    const route = routes.find((r) => r.name === api);
    if (route) held.push(`${provider}=${MODEL_APIS[route.name]!.placeholder}`);
    else left.push(`${AIDER_KEY_LIST}'s ${JSON.stringify(provider.slice(0, 40))} entry`);
  }
  return { held, left: held.length > 0 ? left : [] };
}

const sha256 = (bytes: Buffer): string => hash('sha256', bytes, 'hex');

/** The egress.jsonl the run's earlier sessions left, read without following a link; else why it cannot be. */
function readEarlierLog(dir: string): Buffer | string {
  const run = openRunFolder(dir);
  if ('failed' in run) return `${run.failed} ${skipReason(run.kind)}`;
  return withDir(run, (folder) => {
    const artifacts = openPlainDirIn(folder, 'artifacts');
    if (typeof artifacts === 'string') return `artifacts ${skipReason(artifacts)}`;
    return withDir(artifacts, (opened) => {
      const bytes = readPlainIn(opened, 'egress.jsonl', EARLIER_BYTES);
      return typeof bytes === 'string' ? skipReason(bytes, EARLIER_BYTES) : bytes;
    });
  });
}

type EgressState = NonNullable<RunState['egress']>;

const isSha256 = (value: unknown): value is string => typeof value === 'string' && /^[0-9a-f]{64}$/.test(value);

/** svc's record in state.json when it holds what svc writes (counts, sha256s' hex), else null. */
function readEgressState(value: unknown): EgressState | null {
  const record = objOrNull(value);
  const connections = countOrNull(record?.connections);
  const denied = countOrNull(record?.denied);
  const previous = record?.previous ?? null;
  if (connections === null || denied === null || denied > connections || !isSha256(record?.sha256)) return null;
  if (previous !== null && !isSha256(previous)) return null;
  return { connections, denied, sha256: record.sha256, previous };
}

/**
 * What the run's earlier sessions' gates saw, so a resume's or a verify's gate goes on from it: the totals from svc's
 * own record in state.json (a sandboxed agent never sees the run folder), and the records of egress.jsonl only while
 * it is the file whose sha256 svc recorded, or the one before it (svc stopped between writing its record and the
 * file). The check finds an egress.jsonl edited alone, not one whose record in state.json was rewritten with it.
 * Records left out (the file not as svc left it, svc's record missing or unreadable while a file is there, the lines
 * of a session svc stopped before writing) are a gap in the receipt, and the log says so.
 */
function earlierEgress(ctx: RunContext, log: (text: string) => void) {
  const given = ctx.state.egress ?? null;
  const record = readEgressState(given);
  const read = readEarlierLog(ctx.dir);
  if (record === null) {
    const none = { bytes: Buffer.alloc(0), sha256: null, records: [], connections: 0, denied: 0, gaps: [] };
    // A run made before svc kept the record, with nothing the earlier sessions left, has nothing to go on from.
    if (given === null && (typeof read === 'string' || read.length === 0)) return none;
    const why = given === null ? 'svc has no record of the egress.jsonl they left' : 'state.json\'s egress record ' +
      'is not one svc writes';
    return { ...none, gaps: [leftOut(log, why, 'the receipt\'s totals count only this session\'s')] };
  }
  const sha = typeof read === 'string' ? null : sha256(read);
  const before = sha !== null && sha === record.previous;
  const problem = typeof read === 'string' ? read : sha === record.sha256 || before ? null : 'changed since';
  const bytes = typeof read === 'string' || problem !== null ? Buffer.alloc(0) : read;
  const totals = 'the receipt\'s totals are svc\'s own record';
  const gaps = problem !== null ? [leftOut(log, `egress.jsonl is not as svc left it (${problem})`, totals)]
    // The file from before the last session's close: svc stopped between writing its record and the file.
    : before ? [leftOut(log, 'svc stopped before writing the last session\'s lines', totals, 'that session')] : [];
  const lines = bytes.toString('utf8').split('\n').filter((line) => line !== '');
  return { bytes, sha256: problem === null ? sha : null,
    records: lines.map((line) => readEgressRecord(tryParseJson(line))),
    connections: record.connections, denied: record.denied, gaps };
}

/** Logs why the records of `whose` are left out, and gives the receipt's gap. */
function leftOut(
  log: (text: string) => void, why: string, totals: string, whose = 'the run\'s earlier sessions',
): string {
  log(`${why}: the records of ${whose} are left out of egress.jsonl and of the receipt's hosts and denials; ${totals}`);
  return `the earlier sessions' egress records were left out: ${why}`;
}

/** Starts the run's gate, which serves each sandbox's port as its spawn hands it out (sandbox-command.ts).
 * `operatorAllow`: the operator's network.allow (operator.json), kept in the run's plan. `resumed`: the run had
 * sessions before this one (a resume, a verify). */
export async function openRunGate(
  ctx: RunContext, policy: Policy, operatorAllow: readonly string[], resumed: boolean,
) {
  const routes = modelRoutesFromEnv(ctx.env);
  const log = (text: string): void => ctx.event('log', { stream: 'svc', text });
  // First: a bad price file fails the run before anything is made (a gate started and then left open by a throw
  // would keep the worker alive after its run ended).
  const meter = runMeter(ctx, log, resumed);
  const allowed = gatePolicy(policy.network, operatorAllow, routes);
  for (const entry of allowed.dropped) {
    log(`Refused .svc/policy.json network.allow ${entry}: a repository cannot open an address the gate ` +
      `refuses (only the operator can, with network.allow in ${OPERATOR_FILES}); the run goes on without it`);
  }
  for (const entry of allowed.inert) {
    log(`The operator's network.allow "${entry}" (${OPERATOR_FILES}) opens nothing: an address the gate ` +
      `refuses opens only with its port ("${entry}:PORT"); a name never opens one, whatever it resolves to`);
  }
  // A resumed or verified run's gate goes on from its earlier sessions' (docs/engine.md "The agent sandbox").
  const earlier = earlierEgress(ctx, log);
  const records: EgressRecord[] = earlier.records;
  const carried = records.length;
  let total = earlier.connections;
  let denied = earlier.denied;
  if (total >= EVENTS_KEPT) {
    log(`the run's earlier sessions made ${total} connections: this session's are not sent as events (the first ` +
      `${EVENTS_KEPT} of a run are), only written to egress.jsonl`);
  }
  let closing: Promise<void> | undefined;
  const gate = await startGate({
    meter: meter.gate,
    trace: traceRoot() ?? undefined,
    policy: allowed.policy,
    models: routes,
    onRecord: (record) => {
      // A hostile agent can open connections without end: what is kept stays bounded, the totals exact.
      total += 1;
      if (record.decision === 'denied') denied += 1;
      meter.count(record);
      if (records.length < RECORDS_KEPT) records.push(record);
      if (total <= EVENTS_KEPT) ctx.event('egress', { ...record });
      if (total === EVENTS_KEPT + 1 && earlier.connections < EVENTS_KEPT) {
        log(`more than ${EVENTS_KEPT} connections: further ones only in egress.jsonl`);
      }
    },
  });
  return {
    // What a sandbox plan brings the gate in by: its port, made in each sandbox, served here.
    sandbox: sandboxGate(gate.serve),
    // Added to every sandboxed child's environment: proxies, model base URLs and placeholder keys.
    env: agentEnv(routes, ctx.env),
    // Parts of a CLI's credential that the gate cannot hold, left out of env, for the run's log.
    withheld: aiderListForAgent(routes, ctx.env).left,
    // What the gate allowed (the receipt's network section), not what the repository asked for.
    policy: allowed.network,
    // With the gaps where the earlier sessions' records were left out (the receipt's verdict says so).
    summary: (): EgressSummary & { gaps: string[] } =>
      ({ ...summarizeEgress(records), connections: total, denied, gaps: earlier.gaps }),
    // The budget the run's metered spending has reached (the gate refuses model calls meanwhile), or null.
    budgetReached: meter.reached,
    // After an answer raised the budget: the calls the gate could not count so far no longer hold the run.
    acceptUncounted: meter.accept,
    // What serves the agent's connections, loaded after its spawn (worker.ts); a failed load closes the gate.
    load: gate.load,
    // Closed once: by the finish, so egress.jsonl is on disk before the run's status is final, else by the worker.
    close: (): Promise<void> => closing ??= (async () => {
      await gate.close();
      if (records.length >= RECORDS_KEPT && total > records.length) {
        log(`egress.jsonl keeps the first ${RECORDS_KEPT} of ${total} connections`);
      }
      // The earlier sessions' lines as they were, then this session's; svc's record vouches for the whole file. The
      // record first, naming the file before too: a worker stopped between the two leaves a file svc still knows.
      const lines = records.slice(carried).map((r) => `${JSON.stringify(r)}\n`).join('');
      const file = Buffer.concat([earlier.bytes, Buffer.from(lines)]);
      ctx.update({ egress: { connections: total, denied, sha256: sha256(file), previous: earlier.sha256 } });
      ctx.saveArtifact('egress.jsonl', file);
    })(),
  };
}
