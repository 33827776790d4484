// `svc keys list|rotate`: the receipt signing keys of this machine's ~/.svc (src/keys.ts).
import { parseFlags, subcommand, type CliIo } from './io.ts';
import { knownKeys, rotateSigningKey, keysDir, hasSigningKey } from '../keys.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { safeJson } from '../safe-json.ts';

export const HELP = `Usage:
  svc keys list [--json]
  svc keys rotate [--revoke] [--json]

The Ed25519 keys of ~/.svc/keys/ that sign and verify Evidence Receipts.

list     every key the merge queue and "svc receipt verify" accept: this machine's own
         (origin local), its earlier ones (retired), and registered runner keys (runner,
         ~/.svc/keys/trusted/<name>.pem)
rotate   makes a new signing key for the receipts signed from now on. The old public key is
         kept in ~/.svc/keys/retired/<kid>.pub.pem, so receipts it signed still verify and
         the merge queue still accepts them; the old private key is deleted. Takes effect at
         once, no restart (the key is read on each use).
  --revoke   do not keep the old public key: receipts it signed stop verifying (a leaked key)

Run it as the user whose ~/.svc the Control Plane and the runs use (HOME=/var/lib/svc under systemd).
`;

function list(io: CliIo, argv: string[]): number {
  const { values } = parseFlags(argv, { json: { type: 'boolean' } }, 0);
  const home = svcHomeOf(io.env);
  const keys = knownKeys(home, false).map(({ kid, name, origin }) => ({ kid, name, origin }));
  if (values.json) {
    io.stdout(`${safeJson({ keys }, 2)}\n`);
    return 0;
  }
  if (!hasSigningKey(home)) io.stderr('No signing key here yet: the first receipt (or svc keys rotate) makes it\n');
  io.stdout(`${'KID'.padEnd(18)}${'ORIGIN'.padEnd(9)}NAME\n`);
  for (const k of keys) io.stdout(`${k.kid.padEnd(18)}${k.origin.padEnd(9)}${k.name}\n`);
  return 0;
}

function rotate(io: CliIo, argv: string[]): number {
  const { values } = parseFlags(argv, { revoke: { type: 'boolean' }, json: { type: 'boolean' } }, 0);
  const home = svcHomeOf(io.env);
  const done = rotateSigningKey(home, { revoke: values.revoke === true });
  if (values.json) {
    io.stdout(`${safeJson(done, 2)}\n`);
    return 0;
  }
  io.stdout(`New receipt signing key ${done.new} in ${keysDir(home)}\n`);
  if (done.old === null) io.stdout('There was no key before: nothing to retire\n');
  else if (done.kept) {
    io.stdout(`Retired ${done.old}: receipts it signed still verify (keys/retired/${done.old}.pub.pem)\n`);
  }
  else io.stdout(`Revoked ${done.old}: receipts it signed no longer verify here\n`);
  return 0;
}

export default async function keys(io: CliIo): Promise<number> {
  const picked = subcommand(io, HELP, 'keys', ['list', 'rotate']);
  if (typeof picked === 'number') return picked;
  return picked.sub === 'list' ? list(io, picked.rest) : rotate(io, picked.rest);
}
