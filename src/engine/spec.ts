// Turns a classified input into the task spec (Markdown) and the run's one-line brief.
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { BadInputError, errorMessage } from '../errors.ts';
import type { ClassifiedInput } from './classify.ts';
import { normalizeExport, summarize, renderErrtrackSpec } from './errtrack-spec.ts';
import { fetchIssueExport } from './errtrack-fetch.ts';
import { trackeraSpec } from './trackera-input.ts';
import { oneLine } from './text.ts';

export interface Task {
  spec: string;
  brief: string;
  origin: string;
}

function defaultOrigin(input: ClassifiedInput, env: NodeJS.ProcessEnv): string {
  if (env.SVC_ORIGIN && /^[a-z][a-z0-9_-]{0,31}$/.test(env.SVC_ORIGIN)) return env.SVC_ORIGIN;
  if (input.kind === 'errtrack-file' || input.kind === 'issue-url') return 'errtrack';
  if (input.kind === 'trackera') return 'trackera';
  return 'cli';
}

function briefSpec(brief: string): string {
  return [
    '# Task', '', brief, '',
    '## Acceptance criteria', '', '- The change does what the task asks.', '- Existing tests pass.', '',
  ].join('\n');
}

function errtrackTask(raw: unknown): { spec: string; brief: string } {
  const summary = summarize(normalizeExport(raw));
  return { spec: renderErrtrackSpec(summary), brief: oneLine(`Fix ${summary.title}`, 1500) };
}

export async function buildTask(input: ClassifiedInput, repo: string, env: NodeJS.ProcessEnv): Promise<Task> {
  const origin = defaultOrigin(input, env);
  switch (input.kind) {
    case 'brief': {
      const brief = oneLine(input.value, 1500);
      return { spec: briefSpec(brief), brief, origin };
    }
    case 'spec-file': {
      const spec = readFileSync(input.value, 'utf8');
      const heading = /^#+\s+(.+)$/m.exec(spec)?.[1];
      return { spec, brief: oneLine(heading ?? basename(input.value), 1500), origin };
    }
    case 'errtrack-file': {
      let raw: unknown;
      try {
        raw = JSON.parse(readFileSync(input.value, 'utf8'));
      } catch (err) {
        throw new BadInputError(`"${basename(input.value)}" is not valid JSON`, { cause: err });
      }
      try {
        return { ...errtrackTask(raw), origin };
      } catch (err) {
        throw new BadInputError(`${basename(input.value)}: ${errorMessage(err)}`, { cause: err });
      }
    }
    case 'issue-url': {
      const exp = await fetchIssueExport(input.value, env);
      return { ...errtrackTask(exp), origin };
    }
    case 'trackera':
      return { ...(await trackeraSpec(repo, input.value, env)), origin };
  }
}
