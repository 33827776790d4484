// `svc receipt verify <file>`: checks an Evidence Receipt's integrity and signature and says exactly what is wrong.
import { parseFlags, readGivenFile, usageOf, type CliIo } from './io.ts';
import { BadInputError, UsageError } from '../errors.ts';
import { verifyReceipt, keyRingOf, receiptFromMarkdown } from '../engine/receipt.ts';
import { knownKeys } from '../keys.ts';
import { svcHomeOf } from '../spawn/svc-paths.ts';
import { tryParseJson } from '../untrusted.ts';

export const HELP = `Usage: svc receipt verify <file> [--key PUBLIC_KEY.pem]...

Checks an Evidence Receipt (receipt.json, or a PR body holding one): the integrity digest over its
canonical JSON, then the Ed25519 signature by the key its "kid" names. Known keys: this machine's
~/.svc/keys/receipt-ed25519.pub.pem, its earlier keys in ~/.svc/keys/retired/ (svc keys rotate), the runner
keys in ~/.svc/keys/trusted/, and any --key files (e.g. saved from GET /v1/keys).
Exit 0 when valid; 1 naming the problem: integrity mismatch, unknown key, bad signature. Exit 2 when a file
cannot be read, or holds no receipt.
`;

export default async function receipt(io: CliIo): Promise<number> {
  const { values, positionals } = parseFlags(io.argv, { key: { type: 'string', multiple: true } });
  const [sub, file, ...rest] = positionals;
  if (sub !== 'verify' || !file || rest.length) throw new UsageError(usageOf(HELP));
  const text = readGivenFile(file, 'give the receipt.json of a run (.svc/runs/<run>/artifacts/) or a saved PR body');
  const value = tryParseJson(text) ?? receiptFromMarkdown(text);
  if (value === null) throw new BadInputError(`"${file}" is neither receipt JSON nor a PR body with a receipt`);
  const ring = keyRingOf((values.key ?? []).map((keyFile) => readGivenFile(keyFile, 'give a public key PEM file')));
  for (const known of knownKeys(svcHomeOf(io.env), false)) ring.set(known.kid, known.publicKey);
  const result = verifyReceipt(value, ring);
  if (!result.ok) {
    io.stderr(`${result.message}\n`);
    return 1;
  }
  io.stdout(`${result.message}\n`);
  return 0;
}
