// The body of POST /v1/start, read and checked (DESIGN §3); nothing is recorded or started here.
import { existsSync, statSync } from 'node:fs';
import { isAbsolute, dirname, resolve } from 'node:path';
import { HttpError } from '../http/http-error.ts';
import { checkBodyKeys, requireJsonObject } from '../http/body.ts';
import { isIssueUrl } from '../engine/spec.ts';
import type { ControlDeps } from './deps.ts';
import { isRegisteredProject, unregisteredMessage } from './projects.ts';
import { realOrNull } from '../spawn/tree.ts';

const INPUTS = ['brief', 'spec_path', 'issue_url'] as const;
const START_KEYS = new Set([...INPUTS, 'repo', 'provider', 'pr', 'request_id']);
const MAX_INPUT_CHARS = 64 * 1024;

export function bad(message: string): never {
  throw new HttpError('invalid_param', message);
}

/** `repo` is a registered project's folder or inside it (real paths). */
function checkRegistered(deps: ControlDeps, repo: string): void {
  const real = realOrNull(repo);
  for (let dir = real; dir !== null; dir = dirname(dir) === dir ? null : dirname(dir)) {
    if (isRegisteredProject(deps, dir)) return;
  }
  bad(unregisteredMessage(repo));
}

/** Checked before git so much as reads the folder: an unregistered one gets nothing run in it. */
function registeredRoot(deps: ControlDeps, repo: unknown): string {
  if (typeof repo !== 'string' || !isAbsolute(repo) || repo.includes('\0')) bad('"repo" must be an absolute path');
  checkRegistered(deps, repo);
  const root = deps.repos.rootOf(repo) ?? bad('"repo" is not a git repository');
  // The repository itself, not only a folder above it: a repository nested inside a registered one is not registered.
  if (!isRegisteredProject(deps, root)) bad(unregisteredMessage(root));
  return root;
}

function checkInput(kind: (typeof INPUTS)[number], value: string, root: string): string {
  if (kind === 'spec_path') {
    const path = resolve(root, value);
    if (!/\.(md|json)$/i.test(path) || !existsSync(path) || !statSync(path).isFile()) {
      bad('"spec_path" must name an existing .md spec or .json export');
    }
    return path;
  }
  if (kind === 'issue_url' && !isIssueUrl(value)) {
    bad('"issue_url" must be an error-tracker issue URL (…/issues/<id>)');
  }
  return value.trim();
}

export function parseStart(deps: ControlDeps, body: unknown) {
  const b = requireJsonObject(body);
  checkBodyKeys(b, START_KEYS);
  const given = INPUTS.filter((k) => b[k] !== undefined);
  if (given.length !== 1) bad('Give exactly one of "brief", "spec_path" or "issue_url"');
  const kind = given[0]!;
  const value = b[kind];
  if (typeof value !== 'string' || value.trim() === '' || value.length > MAX_INPUT_CHARS) {
    bad(`"${kind}" must be a non-empty string`);
  }
  const root = registeredRoot(deps, b.repo);
  const input = { kind, value: checkInput(kind, value, root) };
  const { provider, pr, request_id: requestId } = b;
  if (provider !== undefined && (typeof provider !== 'string' || !/^[a-z0-9][a-z0-9_-]{0,31}$/.test(provider))) {
    bad('"provider" must be a provider name');
  }
  if (pr !== undefined && typeof pr !== 'boolean') bad('"pr" must be true or false');
  if (requestId !== undefined && (typeof requestId !== 'string' || !/^[A-Za-z0-9._:-]{1,128}$/.test(requestId))) {
    bad('"request_id" must be 1-128 letters, digits, ".", "_", ":" or "-"');
  }
  return { input, repo: root, provider: (provider as string | undefined) ?? null, pr: pr === true,
    requestId: (requestId as string | undefined) ?? null };
}
