// Input classification for `svc start` (DESIGN §6): export file, issue URL, spec file, trackera reference, or brief.
import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { CliError } from '../cli/usage-error.ts';
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

export function classifyInput(input: string, opts: { forceBrief: boolean; cwd: string }): ClassifiedInput {
  const text = input.trim();
  if (text === '') throw new CliError('Nothing to do: give a brief, a spec file, an issue export or an issue URL', 2);
  if (opts.forceBrief) return { kind: 'brief', value: text };
  const tracker = TRACKERA.exec(text);
  if (tracker) return { kind: 'trackera', value: tracker[1]! };
  if (isIssueUrl(text)) return { kind: 'issue-url', value: text };
  if (!/\s/.test(text) && /\.(json|md)$/i.test(text)) {
    const path = resolve(opts.cwd, text);
    if (!existsSync(path) || !statSync(path).isFile()) {
      throw new CliError(`File not found: "${text}" (use --brief to send it as text)`, 2);
    }
    return { kind: text.toLowerCase().endsWith('.json') ? 'errtrack-file' : 'spec-file', value: path };
  }
  return { kind: 'brief', value: text };
}
