// Placeholder until its issue lands: says so plainly instead of pretending.
import type { CliIo } from './io.ts';
import { CliError } from './usage-error.ts';

export default async function receipt(_io: CliIo): Promise<number> {
  throw new CliError('"svc receipt" is not implemented yet');
}
