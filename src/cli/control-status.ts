// Placeholder for `svc control status` until the typed client lands (foundation issue).
import type { CliIo } from './io.ts';
import { CliError } from './usage-error.ts';

export async function controlStatus(_io: CliIo, _json: boolean): Promise<number> {
  throw new CliError('"svc control status" is not implemented yet');
}
