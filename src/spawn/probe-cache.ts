// The sandbox probe's result, kept for this boot (~13 ms a run otherwise): `~/.svc/sandbox-probe.json`, out of every
// sandbox's sight. It is used only while everything the result depends on is unchanged: the boot, the user, the bwrap
// binary (path, size, modification time) and the user-namespace sysctls. Only a working sandbox is kept: a failure is
// probed again each time, so a fixed host works at once. `svc doctor` always probes afresh.
import { lstatSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { probeSandbox, type SandboxProbe } from './probe.ts';
import { which } from './which.ts';
import { svcHomeOf } from './svc-paths.ts';

// Bumped whenever the trial changes shape, so an old "works" is never reused for a new trial.
const TRIAL_VERSION = 4;

function read(path: string): string {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return '-';
  }
}

function keyFor(bwrap: string): string | null {
  try {
    const binary = statSync(bwrap);
    return [TRIAL_VERSION, read('/proc/sys/kernel/random/boot_id'), process.getuid?.() ?? '-', bwrap, binary.size,
      binary.mtimeMs, read('/proc/sys/user/max_user_namespaces'), read('/proc/sys/kernel/unprivileged_userns_clone'),
    ].join('|');
  } catch {
    return null;
  }
}

function readCache(path: string, key: string): SandboxProbe | null {
  try {
    if (!lstatSync(path).isFile()) return null;
    const cached = JSON.parse(readFileSync(path, 'utf8')) as { key?: unknown; probe?: SandboxProbe };
    return cached.key === key && cached.probe?.ok === true ? cached.probe : null;
  } catch {
    return null;
  }
}

function writeCache(home: string, path: string, key: string, probe: SandboxProbe): void {
  try {
    mkdirSync(home, { recursive: true, mode: 0o700 });
    const temp = `${path}.${process.pid}.tmp`;
    writeFileSync(temp, JSON.stringify({ key, probe }), { mode: 0o600, flag: 'wx' });
    renameSync(temp, path);
  } catch {
    // no writable ~/.svc: the next run probes again
  }
}

/** The probe for this host, from this boot's cache when it still applies. */
export function probeSandboxCached(env: NodeJS.ProcessEnv): SandboxProbe {
  const bwrap = which('bwrap', env.PATH);
  const key = bwrap ? keyFor(bwrap) : null;
  if (!key) return probeSandbox(env);
  const home = svcHomeOf(env);
  const path = join(home, 'sandbox-probe.json');
  const cached = readCache(path, key);
  if (cached) return cached;
  const probe = probeSandbox(env);
  if (probe.ok) writeCache(home, path, key, probe);
  return probe;
}
