// The Control Plane token for the shipper: from a file (not inherited by providers), else SVC_CONTROL_TOKEN (stripped
// from providers).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { svcHomeOf } from '../spawn/svc-paths.ts';

export function readControlToken(env: NodeJS.ProcessEnv): string | undefined {
  const files = [env.SVC_CONTROL_TOKEN_FILE, join(svcHomeOf(env), 'control', 'token')].filter((f): f is string => !!f);
  for (const file of files) {
    try {
      const token = readFileSync(file, 'utf8').trim();
      if (token) return token;
    } catch {
      // Missing file: try the next source.
    }
  }
  return env.SVC_CONTROL_TOKEN || undefined;
}
