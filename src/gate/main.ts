// `svc gate serve` (docs/gate.md): the egress gate as a server of its own, the only route out of Kubernetes job pods.
// Every client presents its job's credential and gets its repository's policy.
import { join } from 'node:path';
import { startGate } from './gate.ts';
import { GatePolicyError, parseGatePolicy, readGateFile, type GatePolicy } from './policy.ts';
import { readGateSecret } from './job-credential.ts';
import { modelRoutesFromEnv, routeOrigins, type ModelRoute } from './model-apis.ts';
import { createLogger, type Logger } from '../log.ts';
import { isJsonObject } from '../json-value.ts';
import { exitCodeAfterSignal, urlAuthority } from '../http/http-server.ts';
import { createGateMetrics, readMetricsToken } from './metrics.ts';
import { setting, settingChoice, settingInt, settingOr, settingUsd } from '../settings-registry.ts';
import { BadSettingError, errorMessage } from '../errors.ts';
import { loadPriceTable } from './prices.ts';
import { budgetHeld, DayLedger, holdCall, refusalText, RunSpend } from './budgets.ts';
import type { Asker, GateMeter } from './context.ts';
import type { EgressRecord } from './evidence.ts';
import { Tracer, traceSettings } from '../trace.ts';

/** The default policy, and one per served repository keyed by its name in lower case. */
interface GatePolicies {
  fallback: GatePolicy;
  repos: ReadonlyMap<string, GatePolicy>;
}

/** A job's repository's policy, else the default; owner/name compared without regard to case, as GitHub does. */
export function repoPolicy(policies: GatePolicies, repo: string): GatePolicy {
  return policies.repos.get(repo.toLowerCase()) ?? policies.fallback;
}

export function loadGatePolicy(path: string | null, routes: readonly ModelRoute[] = []): GatePolicies {
  // Each model API's upstream exactly (its host at its port), as a run's gate allows it.
  const models = routeOrigins(routes);
  const parse = (value: { allow?: unknown; deny?: unknown }): GatePolicy => {
    const policy = parseGatePolicy(value);
    return { allow: [...policy.allow, ...models], deny: policy.deny };
  };
  if (path === null) return { fallback: parse({}), repos: new Map() };
  const value = readGateFile(path);
  if (!isJsonObject(value)) {
    throw new GatePolicyError(path, 'must be {"allow": [...], "deny": [...], "repos": {...}}', 'file');
  }
  const repos = new Map<string, GatePolicy>();
  if (value.repos !== undefined) {
    if (!isJsonObject(value.repos)) {
      throw new GatePolicyError('repos', 'must be an object of repository name → {"allow", "deny"}');
    }
    for (const [name, entry] of Object.entries(value.repos)) {
      if (!isJsonObject(entry)) throw new GatePolicyError(`repos.${name}`, 'must be {"allow": [...], "deny": [...]}');
      const key = name.toLowerCase();
      if (repos.has(key)) {
        throw new GatePolicyError(`repos.${name}`, 'names a repository already listed (in another case)');
      }
      repos.set(key, parse(entry));
    }
  }
  return { fallback: parse(value), repos };
}

/** Where the gate listens, resolved once: svc gate serve checks that port is free, then serves on it. */
export function gateAddress(flags: { host?: string; port?: string }, env: NodeJS.ProcessEnv) {
  const host = flags.host ?? settingOr(env, 'SVC_GATE_HOST');
  return { host, port: settingInt(env, 'SVC_GATE_PORT', { flag: flags.port }) };
}

/** Serves at `where` (gateAddress) until SIGINT/SIGTERM, each connection a JSON line on stdout; a flag wins over
 * its variable. */
export async function serveGateForever(
  flags: { policy?: string; 'per-job'?: string }, where: { host: string; port: number }, env: NodeJS.ProcessEnv,
  say: (text: string) => void,
): Promise<number> {
  const secretFile = setting(env, 'SVC_GATE_SECRET_FILE');
  if (!secretFile) {
    throw new BadSettingError('SVC_GATE_SECRET_FILE is required: the secret job credentials are checked with. Make '
      + 'one (openssl rand -hex 32 > FILE, mode 0600) and give the trigger server the same file');
  }
  const { host, port } = where;
  const maxPerJob = settingInt(env, 'SVC_GATE_MAX_PER_JOB', { flag: flags['per-job'] });
  const metricsFile = setting(env, 'SVC_GATE_METRICS_TOKEN_FILE');
  const accessLog = settingChoice(env, 'SVC_ACCESS_LOG') === '1';
  const log = createLogger('gate');
  const routes = modelRoutesFromEnv(env);
  const served = loadGatePolicy(flags.policy ?? setting(env, 'SVC_GATE_POLICY_FILE') ?? null, routes);
  const secret = readGateSecret(secretFile);
  const metricsToken = metricsFile ? readMetricsToken(metricsFile, secret) : null;
  const { meter, count } = sharedMeter(env, log);
  const tracer = new Tracer(traceSettings(env, 'svc-gate'));
  // The gate cannot know which names the trigger serves: it says which it has, for the operator to compare.
  log.info('gate repository policies', { repos: [...served.repos.keys()] });
  const gate = await startGate({
    policy: served.fallback,
    tcpPort: port,
    tcpHost: host,
    models: routes,
    clients: { secret, maxPerClient: maxPerJob, policyFor: (who) => repoPolicy(served, who.repo) },
    // A pod has one address: what it holds, named or not yet named by a credential, is at most one job's share.
    limits: { maxConnectionsPerPeer: maxPerJob },
    onRecord: (record) => {
      // The line first: a state folder that cannot be written must not cost the record.
      process.stdout.write(`${JSON.stringify({ egress: record })}\n`);
      count(record);
    },
    meter,
    trace: { tracer, parent: null },
    log,
    metrics: createGateMetrics(metricsToken, accessLog ? log : null),
  });
  // A shared gate serves from its start: an install it cannot load fails here, not at a pod's first call.
  await gate.load();
  say(`svc gate listening on http://${urlAuthority(host, gate.port ?? port)}` +
    ` (model APIs: ${routes.map((r) => r.name).join(', ') || 'none'})\n`);
  return exitCodeAfterSignal(log, 'gate stopping', () => gate.close().then(() => tracer.flush()));
}

/** The shared gate's metering (docs/gate.md "Budgets"): daily caps, each run held to its credential's max_usd; a
 * budgeted or capped run's unpriced call, or call counted at bounds in doubt, refuses its next (fail closed).
 * Kept in SVC_GATE_STATE_DIR when set, else in memory. */
export function sharedMeter(
  env: NodeJS.ProcessEnv, log: Logger = createLogger('gate'),
): { meter: GateMeter; count(record: EgressRecord): void } {
  const state = setting(env, 'SVC_GATE_STATE_DIR') ?? null;
  const ledger = new DayLedger(state === null ? null : join(state, 'metered'));
  const spend = new RunSpend(state === null ? null : join(state, 'run-spend.json'));
  const caps = {
    repoDay: settingUsd(env, 'SVC_BUDGET_REPO_DAY_USD'), serverDay: settingUsd(env, 'SVC_BUDGET_SERVER_DAY_USD'),
  };
  // A run with a budget is followed, and so is one held to a day cap: a call it could not count for certain leaves
  // the cap unkept.
  const followed = (who: Asker['who']) => {
    if (!who || (who.maxUsd === undefined && caps.repoDay === null && caps.serverDay === null)) return null;
    const run = spend.of(who.run, who.expiresAt ?? 0);
    run.budgeted ||= who.maxUsd !== undefined;
    return run;
  };
  return {
    meter: {
      prices: loadPriceTable(setting(env, 'SVC_PRICES_FILE')),
      refusal: (asker) => {
        const repo = asker.who?.repo ?? '';
        const run = followed(asker.who) ?? { usd: 0, uncounted: null, doubt: null, inFlight: 0 };
        const held = budgetHeld(run, { ...caps, run: asker.who?.maxUsd ?? null }, ledger.spent(repo));
        return held && refusalText(held, repo, false);
      },
      // Every run followed, a capped one too: N calls started at once all pass before the first is counted, and each
      // may count up to its bounds toward the day's cap, which other repositories share.
      hold: (asker) => {
        const run = followed(asker.who);
        return run ? holdCall(run, asker.who?.maxUsd !== undefined) : () => {};
      },
    },
    // Each counts in memory first, then writes SVC_GATE_STATE_DIR: a folder that cannot be written is logged, and the
    // caps go on counting (until a restart, which then starts from what was written).
    count: (record) => {
      try {
        spend.add(record);
      } catch (err) {
        log.error('cannot write the runs\' spending to SVC_GATE_STATE_DIR', { error: errorMessage(err) });
      }
      if (!record.metered?.usd) return;
      try {
        ledger.add(record.repo ?? '', record.metered.usd);
      } catch (err) {
        log.error('cannot write the day\'s spending to SVC_GATE_STATE_DIR', { error: errorMessage(err) });
      }
    },
  };
}
