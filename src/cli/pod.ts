// `svc pod seal|sign`: the two steps of a Kubernetes job pod around the run container (src/trigger/kubernetes-pod.ts).
// Both take every path and the run id from the argv the pod spec fixed, never from a file the agent wrote.
import { parseFlags, subcommand, type CliIo } from './io.ts';
import { UsageError } from '../errors.ts';
import { handedRunKey, isValidSegment } from '../engine/ids.ts';
import { readSealedRunKey, storeRun, writeSeal } from '../pod/seal.ts';
import { signRun } from '../pod/sign.ts';
import { safeJson } from '../safe-json.ts';
import { SIGNER_OUTCOME } from '../trigger/kubernetes-pod.ts';

export const HELP = `Usage: svc pod seal --repo DIR --sealed DIR --handoff FILE [--run-id RUN]
       svc pod sign --run-id RUN --repo DIR --sealed DIR [--pr]

Steps of a Kubernetes job pod (the trigger server's Kubernetes executor writes them into the pod spec):
  seal   before the run: record the repository's HEAD and origin URL in the sealed folder, make the run's key
         there, and write the key handed from it for the run container's svc start to FILE (SVC_SECRETS_HANDOFF);
         with --run-id, store that run on the Control Plane bound to the handed key (SVC_CONTROL_URL; not
         stored after a few tries, the seal fails)
  sign   after the run container ended: check the run's commits against the sealed base, sign its Evidence
         Receipt with the key in $HOME/.svc/keys, open the pull request (--pr) and ship the run (SVC_CONTROL_URL)
`;

export default async function pod(io: CliIo): Promise<number> {
  const picked = subcommand(io, HELP, 'pod', ['seal', 'sign']);
  if (typeof picked === 'number') return picked;
  const { sub: step, rest } = picked;
  const { values } = parseFlags(rest, {
    repo: { type: 'string' }, sealed: { type: 'string' }, 'run-id': { type: 'string' }, pr: { type: 'boolean' },
    handoff: { type: 'string' },
  }, 0);
  if (!values.repo || !values.sealed) throw new UsageError(`svc pod ${step} needs --repo and --sealed`);
  if (step === 'seal') {
    if (!values.handoff) throw new UsageError('svc pod seal needs --handoff');
    const named = values['run-id'];
    if (named !== undefined && !isValidSegment(named)) throw new UsageError('svc pod seal: --run-id is not a run id');
    const seal = writeSeal(values.repo, values.sealed, values.handoff);
    // Refused, left unbound, or not answered by the Control Plane named, fails the seal (the pod does not start its
    // run); with none named, not answered is said and goes on.
    const handed = handedRunKey(readSealedRunKey(values.sealed));
    // A run the seal step stores is new: no stop or answer is waiting for it.
    const unstored = named === undefined ? 'no --run-id' : (await storeRun(io.env, named, seal, { handed })).unstored;
    if (named !== undefined && unstored) io.stderr(`svc pod seal: the run is not stored yet (${unstored})\n`);
    io.stdout(`${safeJson({ sealed: seal.base_sha, origin: seal.origin_url !== null, stored: unstored === null })}\n`);
    return 0;
  }
  const run = values['run-id'];
  if (!isValidSegment(run)) throw new UsageError('svc pod sign needs --run-id');
  const source = io.env.SVC_SOURCE;
  if (!isValidSegment(source)) throw new UsageError('svc pod sign needs SVC_SOURCE');
  const final = await signRun({
    run, source, workspace: values.repo, sealedDir: values.sealed, pr: values.pr === true, env: io.env, say: io.stderr,
  });
  // The trigger's outcome of the job (kubernetes-executor.ts): its cost the signer's, metered where the gate metered.
  // Printed last, and exit 0 whatever the run's status: the run is judged. A signer that exits otherwise judged
  // nothing, whatever its log holds.
  const { status, verdict, pr_url, error, cost_usd } = final;
  io.stdout(`${SIGNER_OUTCOME}${safeJson({ source, run, status, verdict, pr_url, error, cost_usd })}\n`);
  return 0;
}
