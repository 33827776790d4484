// Placeholder until its issue lands: says so plainly instead of pretending.
import type { CliIo } from './io.ts';
import { CliError } from './usage-error.ts';

export default async function runs(_io: CliIo): Promise<number> {
  throw new CliError('"svc runs" is not implemented yet');
}
