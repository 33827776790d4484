// Where svc keeps its own things and where its CLI is: one home for both, so every process svc
// starts, and every sandbox that must not show them, agrees on the paths.
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** svc's home, `~/.svc`: keys, tokens, databases, answers, handoff files. Never mounted into a sandbox. */
export function svcHomeOf(env: NodeJS.ProcessEnv): string {
  return join(env.HOME || homedir(), '.svc');
}

/** The CLI of this install: dist/cli.js when built, src/cli.ts when run from the sources. */
export function svcCliPath(): string {
  return fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? '../cli.ts' : '../cli.js', import.meta.url));
}
