// Placeholder until its issue lands: says so plainly instead of pretending.
import type { CliIo } from './io.ts';
import { CliError } from './usage-error.ts';

export default async function trigger(_io: CliIo): Promise<number> {
  throw new CliError('"svc trigger" is not implemented yet');
}
