// A job pod's network: a NetworkPolicy (scripts/k8s/gate.yaml) lets the pod reach DNS, the Control
// Plane and `svc gate serve` only, so everything else goes through the gate. These variables point each container's
// programs at it: git and the CLIs by the proxy variables, the model CLIs by a base URL on the gate with a placeholder
// key (the real keys live in the gate's Secret; env entries win over a Secret's envFrom, so a key left in the pod's
// env Secret is replaced too). Every route carries the job's gate credential (src/gate/job-credential.ts): the proxy
// URLs as their password (clients send it as Proxy-Authorization), the model base URLs as a `/_job/<credential>`
// prefix (a model CLI talks to the gate directly, so the gate's host is in NO_PROXY).
import { MODEL_APIS } from '../gate/model-apis.ts';

type EnvVar = { name: string; value: string };

/**
 * The gate URL (`http://svc-gate:3128`) as the pod's proxy, with the job's `credential`; `controlUrl`'s host stays
 * direct (the policy allows it).
 */
export function podGateEnv(gateUrl: string, controlUrl: string | undefined, credential: string): EnvVar[] {
  const gate = gateUrl.replace(/\/+$/, '');
  const gateHost = new URL(gate).hostname;
  let control = '';
  try {
    control = controlUrl ? new URL(controlUrl).hostname : '';
  } catch {
    // not a URL: nothing to exempt
  }
  const direct = ['localhost', '127.0.0.1', gateHost, ...(control ? [control] : [])].join(',');
  const proxy = gate.replace(/^http:\/\//, `http://svc:${credential}@`);
  const vars: EnvVar[] = [];
  for (const name of ['HTTP_PROXY', 'HTTPS_PROXY', 'ALL_PROXY', 'http_proxy', 'https_proxy', 'all_proxy']) {
    vars.push({ name, value: proxy });
  }
  vars.push({ name: 'NO_PROXY', value: direct }, { name: 'no_proxy', value: direct });
  vars.push({ name: 'NODE_USE_ENV_PROXY', value: '1' });
  for (const [name, api] of Object.entries(MODEL_APIS)) {
    if (api.baseEnv) vars.push({ name: api.baseEnv, value: `${gate}/_job/${credential}/_model/${name}` });
  }
  // Where the signer reads the run's connections back from the gate, for the receipt (src/pod/gate-network.ts).
  vars.push({ name: 'SVC_GATE_EVIDENCE_URL', value: `${gate}/_job/${credential}/_egress` });
  for (const api of Object.values(MODEL_APIS)) {
    for (const variable of api.env) vars.push({ name: variable, value: api.placeholder });
  }
  return vars;
}
