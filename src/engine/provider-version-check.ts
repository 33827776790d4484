// Warns when a run's built-in provider CLI is a version outside the range the conformance suite tested: its flags or
// output format may have changed, which is the first thing to suspect when such a run misbehaves.
import type { ResolvedProvider } from './providers.ts';
import { createVersionProbe } from './cli-version.ts';
import { TESTED_CLIS, untestedWarning } from './tested-clis.ts';

/** The warning for `provider`, or null (a tested version, an unknown one, a command provider, aider). */
export async function untestedProviderWarning(
  provider: ResolvedProvider, env: NodeJS.ProcessEnv,
): Promise<string | null> {
  if (provider.kind !== provider.name || !TESTED_CLIS[provider.name]) return null;
  const version = await createVersionProbe(env)(provider.argv[0]!, provider.name);
  return untestedWarning(provider.name, version);
}
