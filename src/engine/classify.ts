// Input classification for `svc start` (DESIGN §6): export file, issue URL, spec file, trackera reference, or brief.
import { existsSync, statSync, realpathSync } from 'node:fs';
import { resolve, relative, isAbsolute } from 'node:path';
import { BadInputError } from '../errors.ts';
import type { InputKind } from './run-state.ts';

export interface ClassifiedInput {
  kind: InputKind;
  /** Absolute path for files, the URL, the tracker id, or the brief text. */
  value: string;
}

const TRACKERA = /^trackera:([A-Za-z0-9][A-Za-z0-9_-]{0,63})$/;
// Error-tracker issue pages: https://<org>.sentry.io/issues/<id>/ or …/organizations/<org>/issues/<id>/.
const ISSUE_URL = /^https?:\/\/[^\s/]+(?:\/[^\s?#]*)?\/issues\/\d+\/?(?:[?#]\S*)?$/;

export function isIssueUrl(text: string): boolean {
  return ISSUE_URL.test(text.trim());
}

/** Runs whose text came from a webhook (chat, tracker, /jobs) rather than a person at the CLI or the Control Plane. */
export function isWebhookOrigin(origin: string | undefined): boolean {
  return origin !== undefined && origin !== '' && origin !== 'cli' && origin !== 'control';
}

/** The file's real path when it is a regular file inside `root` (symbolic links resolved), else null. */
function fileInside(path: string, root: string): string | null {
  try {
    const real = realpathSync(path);
    const rel = relative(realpathSync(root), real);
    if (rel === '' || rel.startsWith('..') || isAbsolute(rel) || !statSync(real).isFile()) return null;
    return real;
  } catch {
    return null;
  }
}

/**
 * `confineTo`: for text that came from a webhook, a `.md`/`.json` name only becomes a file input when it resolves
 * inside that folder (the repo); anything else — outside, missing, a link out — is the brief it literally is, so a chat
 * message cannot point a run at ~/.ssh/config.json or another project's notes.
 */
export function classifyInput(
  input: string,
  opts: { forceBrief: boolean; cwd: string; confineTo?: string | null },
): ClassifiedInput {
  const text = input.trim();
  if (text === '') throw new BadInputError('Nothing to do: give a brief, a spec file, an issue export or an issue URL');
  if (opts.forceBrief) return { kind: 'brief', value: text };
  const tracker = TRACKERA.exec(text);
  if (tracker) return { kind: 'trackera', value: tracker[1]! };
  if (isIssueUrl(text)) return { kind: 'issue-url', value: text };
  if (!/\s/.test(text) && /\.(json|md)$/i.test(text)) {
    const kind = text.toLowerCase().endsWith('.json') ? 'errtrack-file' : 'spec-file';
    if (opts.confineTo) {
      const inside = fileInside(resolve(opts.cwd, text), opts.confineTo);
      return inside ? { kind, value: inside } : { kind: 'brief', value: text };
    }
    const path = resolve(opts.cwd, text);
    if (!existsSync(path) || !statSync(path).isFile()) {
      throw new BadInputError(`File not found: "${text}" (use --brief to send it as text)`);
    }
    return { kind, value: path };
  }
  return { kind: 'brief', value: text };
}
