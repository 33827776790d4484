// Trigger server settings resolved from flags and environment in one place; only main.ts and the CLI call this.
import { homeOf, svcCliPath, svcHomeOf } from '../spawn/svc-paths.ts';
import { join, resolve } from 'node:path';
import type { NotifyConfig } from './summary.ts';
import { isLoopbackHost } from '../http/guards.ts';
import { liveServedRepos, noPushTargetWarnings, shorthandRepos, type RepoRouter } from './served-repos.ts';
import { existsSync, readFileSync } from 'node:fs';
import { decodeChatbKey, SOURCE_NAMES, sourceOf, type SourceName } from '../webhook-sources.ts';
import { BadSettingError } from '../errors.ts';
import {
  controlTokenSetting, setting, settingChoice, settingInt, settingOr, type SettingName,
} from '../settings-registry.ts';

export type TriggerSettings = ReturnType<typeof resolveTriggerSettings>;

type TriggerFlags = { [flag in 'host' | 'port' | 'repo' | 'repos' | 'concurrency' | 'db']?: string | undefined };

function list(value: string | undefined): string[] {
  return (value ?? '').split(',').map((s) => s.trim()).filter(Boolean);
}

/** An https URL or undefined; `what` is logged (never the value, which may embed credentials). */
function httpsUrl(value: string, what: string, problems: SecretProblems): string | undefined {
  if (URL.parse(value)?.protocol === 'https:') return value;
  problems.errors.push(`${what} must be an https URL; its summaries are disabled`);
  return undefined;
}

/** An http(s) URL people can reach: no link is better than one that leads nowhere. */
function publicUrlOf(value: string | undefined, problems: SecretProblems): string | undefined {
  if (!value) return undefined;
  const url = URL.parse(value);
  if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:') || url.username || url.password) {
    problems.errors.push('SVC_PUBLIC_URL must be an http(s) URL without credentials; messages carry no run link');
    return undefined;
  }
  if (!isLoopbackHost(url.hostname)) return url.href.replace(/\/+$/, '');
  problems.errors.push('SVC_PUBLIC_URL names a loopback address: messages say where to look instead of linking');
  return undefined;
}

/** Also what `svc repos` edits without --file. */
export function defaultReposFile(env: NodeJS.ProcessEnv): string {
  return join(svcHomeOf(env), 'trigger', 'repos.conf');
}

/** An entry with only a host checkout runs in whatever SVC_K8S_REPO_URL/PVC holds: right only when it is alone. */
function kubernetesReposCheck(repos: RepoRouter): void {
  const { entries } = repos;
  const local = entries.filter((e) => e.clone === null).map((e) => e.name);
  if (entries.length < 2 || local.length === 0) return;
  throw new BadSettingError(`SVC_TRIGGER_EXECUTOR=kubernetes serves ${entries.length} repositories, so each needs a `
    + `clone= URL for its pods to clone (${repos.source}: ${local.join(', ')} only have a checkout=)`);
}

/** docs/trigger.md "Served repositories": a flag beats a variable; a file that exists but loses is warned about. */
function resolveRepos(
  env: NodeJS.ProcessEnv, flags: TriggerFlags, cwd: string, warnings: string[], kubernetes: boolean,
): RepoRouter {
  if (flags.repos !== undefined && flags.repo !== undefined) {
    throw new BadSettingError('Give --repos FILE or --repo DIR, not both');
  }
  if (env.SVC_TRIGGER_REPOS && env.SVC_TRIGGER_REPO && flags.repos === undefined && flags.repo === undefined) {
    throw new BadSettingError('Set SVC_TRIGGER_REPOS or SVC_TRIGGER_REPO, not both');
  }
  const envFile = env.SVC_TRIGGER_REPOS ? resolve(cwd, env.SVC_TRIGGER_REPOS) : undefined;
  const defaultFile = defaultReposFile(env);
  const check = kubernetes ? kubernetesReposCheck : undefined;
  // `by` + the path: what named it, for the warnings and the log (`--repos /srv/repos.conf`).
  const fromFile = (file: string, by = '') => ({ router: liveServedRepos(file, check), file, by: by + file });
  const fromDir = (dir: string, by: string) => ({ router: shorthandRepos(dir, by + dir, !kubernetes), by: by + dir });
  let chosen: { router: RepoRouter; file?: string; by: string };
  if (flags.repos !== undefined) chosen = fromFile(resolve(cwd, flags.repos), '--repos ');
  else if (flags.repo !== undefined) chosen = fromDir(resolve(cwd, flags.repo), '--repo ');
  else if (envFile) chosen = fromFile(envFile, 'SVC_TRIGGER_REPOS=');
  else if (env.SVC_TRIGGER_REPO) chosen = fromDir(resolve(cwd, env.SVC_TRIGGER_REPO), 'SVC_TRIGGER_REPO=');
  else if (existsSync(defaultFile)) chosen = fromFile(defaultFile);
  else chosen = fromDir(cwd, 'the current directory ');
  for (const file of new Set([envFile, defaultFile])) {
    if (file === undefined || file === chosen.file || !existsSync(file)) continue;
    warnings.push(`The served repositories file ${file} exists but is not read: ${chosen.by} overrides it`);
  }
  return chosen.router;
}

/** Outside ~/.svc, so their agents see their git. */
export function checkoutsDirOf(env: NodeJS.ProcessEnv, cwd: string): string {
  return resolve(cwd, env.SVC_TRIGGER_CHECKOUTS ?? join(homeOf(env), '.local', 'share', 'svc', 'checkouts'));
}

export function triggerDbOf(env: NodeJS.ProcessEnv, cwd: string, flag?: string): string {
  return resolve(cwd, flag ?? env.SVC_TRIGGER_DB ?? join(svcHomeOf(env), 'trigger', 'trigger.db'));
}

export function resolveTriggerSettings(env: NodeJS.ProcessEnv, flags: TriggerFlags, cwd: string) {
  const { secrets, problems } = resolveRouteSecrets(env);
  const orgs = {
    chata: chataTeamsOf(env, secrets.chata, problems),
    // Ids and hosts are the same whatever case they are written in: the readers lower-case theirs too.
    errtrack: pinOf(env, 'ERRTRACK_INSTALLATION_IDS', lower),
    trackera: pinOf(env, 'TRACKERA_ORGANIZATION_IDS', lower),
    trackerb: pinOf(env, 'TRACKERB_SITES', lower),
  };
  const chataPrefix = httpsUrl(settingOr(env, 'CHATA_HOOKS_PREFIX'), 'CHATA_HOOKS_PREFIX', problems);
  const trackeraUrl = httpsUrl(settingOr(env, 'TRACKERA_API_URL'), 'TRACKERA_API_URL', problems);
  // A question asked after a chata response_url expired goes by the bot token.
  const botToken = setting(env, 'CHATA_BOT_TOKEN');
  const botUrl = botToken ? httpsUrl(settingOr(env, 'CHATA_API_URL'), 'CHATA_API_URL', problems) : undefined;
  const ghToken = setting(env, 'GITHUB_TOKEN') ?? setting(env, 'GH_TOKEN');
  const tb = env.TRACKERB_BASE_URL && env.TRACKERB_EMAIL && env.TRACKERB_API_TOKEN;
  const tbUrl = tb ? httpsUrl(env.TRACKERB_BASE_URL!, 'TRACKERB_BASE_URL', problems) : undefined;
  const filter = { assignees: list(setting(env, 'TRACKERB_ASSIGNEES')), labels: list(setting(env, 'TRACKERB_LABELS')) };
  if (filter.assignees.length === 0 && filter.labels.length === 0) {
    problems.warnings.push('Neither TRACKERB_ASSIGNEES nor TRACKERB_LABELS is set: every trackerb event is skipped');
  }
  if (secrets.webhook.value && !ghToken) {
    // Who may write is asked of GitHub's API, which fails closed: say so once rather than in every skipped comment.
    problems.warnings.push('Neither GITHUB_TOKEN nor GH_TOKEN is set: /webhook skips every /svc comment job and ' +
      'every svc label added by anyone but the issue\'s author, and refuses every /svc answer and pull-request ' +
      'follow-up (whether they may write cannot be asked of GitHub), and posts no progress, question or summary to ' +
      'GitHub; only an issue its OWNER, MEMBER or COLLABORATOR author opened or labelled svc starts a job');
  }
  const executor = settingChoice(env, 'SVC_TRIGGER_EXECUTOR');
  const repos = resolveRepos(env, flags, cwd, problems.warnings, executor === 'kubernetes');
  // A Kubernetes pod clones SVC_K8S_REPO_URL or copies the PVC: the served checkouts are not what it pushes from.
  // /webhook is left out: the --repo shorthand's checkout without an origin takes no GitHub event, so no job fails.
  // /jobs opens one when its caller asks ("pr": true).
  const prRoutes = SOURCE_NAMES
    .filter((r) => r !== 'webhook' && secrets[r].value && !secrets[r].unavailable)
    .filter((r) => r === 'jobs' || sourceOf(r).argv?.includes('--pr'))
    .map((r) => (r === 'jobs' ? '/jobs with "pr": true' : `/${r}`));
  // Read by every run it starts, and by its pull request follow-ups: a malformed one stops the server now (exit 2).
  const githubApi = settingOr(env, 'GITHUB_API_URL').replace(/\/+$/, '');
  if (executor !== 'kubernetes') problems.warnings.push(...noPushTargetWarnings(repos.entries, prRoutes, env));
  const concurrency = settingInt(env, 'SVC_TRIGGER_CONCURRENCY', { flag: flags.concurrency });
  // One repository may use every slot; with more, one slot is always left for the others.
  const perRepo = repos.entries.length === 1 ? concurrency : Math.max(1, concurrency - 1);
  const notify: NotifyConfig = {
    // As the URL parser writes it, since a response_url must read exactly that way too (sources/chata.ts); that
    // also gives a bare origin its path's slash, so it cannot match "https://hooks.example.com.evil.net/".
    chataHooksPrefix: chataPrefix ? new URL(chataPrefix).href : '',
    trackeraApiUrl: trackeraUrl ?? '',
    trackeraApiKey: trackeraUrl ? env.TRACKERA_API_KEY || undefined : undefined,
    trackerb: tb && tbUrl ? { baseUrl: tbUrl, email: env.TRACKERB_EMAIL!, token: env.TRACKERB_API_TOKEN! } : undefined,
    chataBot: botToken && botUrl ? { apiUrl: new URL(botUrl).href, token: botToken } : undefined,
    github: ghToken ? { apiUrl: githubApi, token: ghToken } : undefined,
  };
  problems.warnings.push(...trackerAnswerWarnings(env, secrets, notify));
  const controlUrl = setting(env, 'SVC_CONTROL_URL')?.trim();
  // Without it each run started here finds the Control Plane by SVC_CONTROL_PORT and refuses a bad one (exit 2): a
  // typo stops the server now rather than failing every run.
  if (controlUrl === undefined) settingInt(env, 'SVC_CONTROL_PORT');
  return {
    host: flags.host ?? settingOr(env, 'SVC_TRIGGER_HOST'),
    port: settingInt(env, 'SVC_TRIGGER_PORT', { flag: flags.port }),
    repos,
    /** The default repositories file and the managed mirrors. */
    stateDir: join(svcHomeOf(env), 'trigger'),
    checkoutsDir: checkoutsDirOf(env, cwd),
    concurrency,
    repoConcurrency: settingInt(env, 'SVC_TRIGGER_REPO_CONCURRENCY', { max: concurrency, fallback: perRepo }),
    dbPath: triggerDbOf(env, cwd, flags.db),
    queueMax: settingInt(env, 'SVC_TRIGGER_QUEUE_MAX'),
    source: settingOr(env, 'SVC_SOURCE'),
    controlUrl,
    controlToken: controlTokenSetting(env),
    publicUrl: publicUrlOf(setting(env, 'SVC_PUBLIC_URL'), problems),
    secrets,
    notify,
    /** The vendor accounts whose deliveries may act, per source (intake.ts `pinnedIn`); null: every account's. */
    orgs,
    trackerbFilter: filter,
    cliPath: env.SVC_TRIGGER_CLI ? resolve(cwd, env.SVC_TRIGGER_CLI) : svcCliPath(),
    executor,
    problems,
    retention: {
      dedupeDays: settingInt(env, 'SVC_TRIGGER_DEDUPE_DAYS'), jobDays: settingInt(env, 'SVC_TRIGGER_JOB_DAYS'),
    },
    accessLog: settingChoice(env, 'SVC_ACCESS_LOG') === '1',
  };
}

/**
 * CHATA_TEAM_IDS. One chata app installed in several workspaces signs all their deliveries with one secret, so the
 * signature says "the app" and not whose workspace: without the operator's list /chata serves none (DESIGN §7a, every
 * sender acts with its own authority; docs/trigger.md "Which chata workspaces"). Its entries are workspace ids (T…)
 * and Enterprise Grid organisation ids (E…), told apart by that first letter (sources/chata.ts `servesWorkspace`).
 */
function chataTeamsOf(env: NodeJS.ProcessEnv, secret: RouteSecret, problems: SecretProblems): ReadonlySet<string> {
  const teams = pinOf(env, 'CHATA_TEAM_IDS') ?? new Set<string>();
  if (teams.size === 0 && secret.unavailable === null) {
    secret.unavailable = 'Route /chata is not configured: set CHATA_TEAM_IDS to the workspace ids it serves';
    secret.handshake = true;
    problems.warnings.push('CHATA_TEAM_IDS is not set: /chata answers 503 not_configured');
  }
  return teams;
}

const lower = (id: string) => id.toLowerCase();

/**
 * The accounts (workspaces, organisations, sites) a source's variable names, or null when it names none. Where one
 * signing secret serves several accounts, the signature says "the vendor's app", not whose account the delivery is
 * from: this says which may act here (DESIGN §7a, every sender acts with its own authority).
 */
function pinOf(env: NodeJS.ProcessEnv, name: SettingName, form = (id: string) => id): ReadonlySet<string> | null {
  const ids = list(setting(env, name)).map(form);
  return ids.length ? new Set(ids) : null;
}

// Route secrets: missing → the route answers 503 naming the variable (never its value); any two equal → both routes
// are disabled (spec "Authentication").
interface RouteSecret {
  variable: string;
  value: string | undefined;
  /** The operator set one of its variables (a value or a file), usable or not: reads then need its bearer. */
  set: boolean;
  /** Why the route cannot serve. */
  unavailable: string | null;
  /** The secret is good and only another setting is missing: a signed handshake that acts on nothing is still
   * answered (Slack saves its Events URL only once its challenge is), every other delivery gets `unavailable`. */
  handshake?: boolean;
}

interface SecretProblems {
  warnings: string[];
  errors: string[];
}

/** The first of the route's variables that is set, else its file variable's file, else the first (unset). */
function pick(env: NodeJS.ProcessEnv, route: SourceName, problems: SecretProblems): Omit<RouteSecret, 'unavailable'> {
  const { secret, secretFile } = sourceOf(route);
  const variable = secret.find((name) => env[name]);
  if (variable) return { variable, value: env[variable], set: true };
  if (!secretFile || !env[secretFile]) return { variable: secret[0]!, value: undefined, set: false };
  try {
    return { variable: secretFile, value: readFileSync(env[secretFile], 'utf8').trim() || undefined, set: true };
  } catch (err) {
    problems.errors.push(`${secretFile} could not be read: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
    return { variable: secretFile, value: undefined, set: true };
  }
}

/**
 * Who may answer on a tracker is asked of its API, which fails closed: without the API access every `/svc answer`
 * comment is refused, each only in a log line at the time. Said once at start, as for GitHub's token, since the
 * setup recipes present the API access as what posts the result comment only. The access is also off with every
 * setting there but an address refused (an error, and the server still starts): that is what is named then.
 */
function trackerAnswerWarnings(
  env: NodeJS.ProcessEnv, secrets: Record<SourceName, RouteSecret>, notify: NotifyConfig,
): string[] {
  const warnings: string[] = [];
  const notHttps = (name: string) => `${name} is not an https URL`;
  if (secrets.trackera.value && !notify.trackeraApiKey) {
    const why = env.TRACKERA_API_KEY ? notHttps('TRACKERA_API_URL') : 'TRACKERA_API_KEY is not set';
    warnings.push(`${why}: /trackera refuses every /svc answer comment (whether its author is ` +
      'on the issue\'s team cannot be asked of the tracker) and posts no question or summary on the issue');
  }
  if (secrets.trackerb.value && !notify.trackerb) {
    const all = env.TRACKERB_BASE_URL && env.TRACKERB_EMAIL && env.TRACKERB_API_TOKEN;
    const why = all ? notHttps('TRACKERB_BASE_URL')
      : 'TRACKERB_BASE_URL, TRACKERB_EMAIL and TRACKERB_API_TOKEN are not all set';
    warnings.push(`${why}: /trackerb refuses every /svc answer comment (whether its author may be assigned the ` +
      'issue cannot be asked of the tracker) and posts no question or summary on the issue');
  }
  return warnings;
}

export function resolveRouteSecrets(env: NodeJS.ProcessEnv) {
  const problems: SecretProblems = { warnings: [], errors: [] };
  const secrets = {} as Record<SourceName, RouteSecret>;
  for (const route of SOURCE_NAMES) {
    const picked = pick(env, route, problems);
    const { variable, value } = picked;
    let unavailable: string | null = null;
    if (!value) {
      unavailable = `Route /${route} is not configured: set ${variable}`;
      problems.warnings.push(`${variable} is not set: /${route} answers 503 not_configured`);
    } else if (sourceOf(route).secretForm === 'base64' && !decodeChatbKey(value)) {
      unavailable = `Route /${route} is disabled: ${variable} is not valid base64`;
      problems.errors.push(unavailable);
    }
    secrets[route] = { ...picked, unavailable };
  }
  SOURCE_NAMES.forEach((a, i) => {
    for (const b of SOURCE_NAMES.slice(i + 1)) {
      if (!secrets[a].value || secrets[a].value !== secrets[b].value) continue;
      const reason = `${secrets[a].variable} and ${secrets[b].variable} are equal; every secret must differ`;
      secrets[a].unavailable = `Route /${a} is disabled: ${reason}`;
      secrets[b].unavailable = `Route /${b} is disabled: ${reason}`;
      problems.errors.push(`Disabled /${a} and /${b}: ${reason}`);
    }
  });
  return { secrets, problems };
}
