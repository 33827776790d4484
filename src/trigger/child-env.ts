// The environment a `svc start` child gets (SVC_ORIGIN is set per job by the executor): an allowlist, so no webhook secret, API key or token can reach it (DESIGN §5).

// SVC_CONTROL_ANSWER_DIR is a folder, not a secret: a run waits there for the answer the Control Plane writes.
const ALLOWED = new Set(['PATH', 'HOME', 'USER', 'LANG', 'TZ', 'TERM', 'TMPDIR', 'SVC_SOURCE', 'SVC_CONTROL_URL', 'SVC_CONTROL_ANSWER_DIR', 'SVC_ORIGIN']);

export function isAllowedChildVar(name: string): boolean {
  return ALLOWED.has(name) || name.startsWith('LC_');
}

export function buildChildEnv(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    if (value !== undefined && isAllowedChildVar(name)) out[name] = value;
  }
  return out;
}
