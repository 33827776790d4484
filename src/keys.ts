// The Ed25519 key pair that signs Evidence Receipts: made on first use under ~/.svc/keys/ (0600), public part
// shareable. Rotation keeps the public halves of earlier keys (keys/retired/) so the receipts they signed still verify.
import { generateKeyPairSync, createPrivateKey, createPublicKey, hash, type KeyObject } from 'node:crypto';
import { mkdirSync, readFileSync, existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { writeFileAtomic } from './atomic-write.ts';

const PRIVATE_FILE = 'receipt-ed25519.pem';
const PUBLIC_FILE = 'receipt-ed25519.pub.pem';

/** kid = first 16 hex chars of sha256 over the SPKI DER, so it names the key, not the file. */
export function keyIdOf(publicKey: KeyObject): string {
  const der = publicKey.export({ type: 'spki', format: 'der' });
  return hash('sha256', der, 'hex').slice(0, 16);
}

function publicPem(publicKey: KeyObject): string {
  return publicKey.export({ type: 'spki', format: 'pem' }).toString();
}

/** A new pair replaces the files, public half first; a new temporary file ('wx') is never a planted link. */
function writeNewPair(dir: string): KeyObject {
  const pair = generateKeyPairSync('ed25519');
  writeFileAtomic(join(dir, PUBLIC_FILE), publicPem(pair.publicKey), 0o644);
  writeFileAtomic(join(dir, PRIVATE_FILE), pair.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), 0o600);
  return pair.publicKey;
}

export function keysDir(svcHome: string): string {
  return join(svcHome, 'keys');
}

/** Whether this machine has its signing key yet (it is made on first use). */
export function hasSigningKey(svcHome: string): boolean {
  return existsSync(join(keysDir(svcHome), PRIVATE_FILE));
}

export type SigningKey = ReturnType<typeof loadOrCreateSigningKey>;

/** Loads the key pair, generating it on first use; the private key file is mode 0600 in a 0700 folder. */
export function loadOrCreateSigningKey(svcHome: string) {
  const dir = keysDir(svcHome);
  const privatePath = join(dir, PRIVATE_FILE);
  if (!existsSync(privatePath)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    try {
      writeNewPair(dir);
    } catch (err) {
      // Another process made the key first; use theirs.
      if (!existsSync(privatePath)) throw err;
    }
  }
  const privateKey = createPrivateKey(readFileSync(privatePath));
  const publicKey = createPublicKey(privateKey);
  return { kid: keyIdOf(publicKey), privateKey, publicKey };
}

export function publicKeyInfo(key: { publicKey: KeyObject }) {
  const kid = keyIdOf(key.publicKey);
  const { kty, crv, x } = key.publicKey.export({ format: 'jwk' }) as { kty: string; crv: string; x: string };
  const alg = 'EdDSA' as const;
  return { kid, alg, pem: publicPem(key.publicKey), jwk: { kty, crv, x, kid, alg, use: 'sig' } };
}

/** A public key the Control Plane accepts receipts from: its own, one from before a rotation, or a runner's. */
export interface KnownKey {
  kid: string;
  name: string;
  origin: 'local' | 'retired' | 'runner';
  publicKey: KeyObject;
}

/** Each `<name>.pem` here is the public half of one runner's signing key (a private key there is never used). */
export function trustedKeysDir(svcHome: string): string {
  return join(keysDir(svcHome), 'trusted');
}

const RUNNER_KEY_FILE = /^([A-Za-z0-9][A-Za-z0-9._-]{0,63}?)(?:\.pub)?\.pem$/;

/** The Ed25519 public keys in `dir` whose name matches `file` (group 1 goes to `known`), read on each call. */
function publicKeysIn(
  dir: string, file: RegExp, known: (named: string, key: KeyObject) => KnownKey | null,
): KnownKey[] {
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return [];
  }
  const keys: KnownKey[] = [];
  for (const name of names) {
    const named = file.exec(name)?.[1];
    if (!named) continue;
    try {
      const text = readFileSync(join(dir, name), 'utf8');
      if (text.includes('PRIVATE KEY')) continue;
      const publicKey = createPublicKey(text);
      const key = publicKey.asymmetricKeyType === 'ed25519' ? known(named, publicKey) : null;
      if (key) keys.push(key);
    } catch {
      continue;
    }
  }
  return keys;
}

/** This machine's earlier signing keys: `<kid>.pub.pem` files that `svc keys rotate` moved the public halves to. */
const retiredKeysDir = (svcHome: string) => join(keysDir(svcHome), 'retired');

/** A new signing key; the old public half goes to keys/retired/ first (unless `revoke`) so its receipts verify. */
export function rotateSigningKey(
  svcHome: string, opts: { revoke?: boolean } = {},
): { old: string | null; kept: boolean; new: string } {
  const dir = keysDir(svcHome);
  const old = hasSigningKey(svcHome) ? loadOrCreateSigningKey(svcHome) : null;
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (old) {
    const retired = join(retiredKeysDir(svcHome), `${old.kid}.pub.pem`);
    // A revoked key may have been kept by an earlier rotation to this same key: it goes from there too.
    if (opts.revoke) rmSync(retired, { force: true });
    else if (!existsSync(retired)) {
      mkdirSync(retiredKeysDir(svcHome), { recursive: true, mode: 0o700 });
      writeFileAtomic(retired, publicPem(old.publicKey), 0o644);
    }
  }
  const fresh = writeNewPair(dir);
  return { old: old?.kid ?? null, kept: old !== null && !opts.revoke, new: keyIdOf(fresh) };
}

/** Its own key first (made on first use unless `make` is false), its retired ones (only where the file name is the
 * key's kid), then registered runner keys. */
export function knownKeys(svcHome: string, make = true): KnownKey[] {
  const own = make || hasSigningKey(svcHome) ? loadOrCreateSigningKey(svcHome) : null;
  const local: KnownKey[] = own ? [{ kid: own.kid, name: 'local', origin: 'local', publicKey: own.publicKey }] : [];
  const retired = publicKeysIn(retiredKeysDir(svcHome), /^([0-9a-f]{16})\.pub\.pem$/, (kid, publicKey) =>
    (keyIdOf(publicKey) === kid && kid !== own?.kid ? { kid, name: 'local', origin: 'retired', publicKey } : null));
  const seen = new Set([...local, ...retired].map((k) => k.kid));
  const runners = publicKeysIn(trustedKeysDir(svcHome), RUNNER_KEY_FILE,
    (name, publicKey) => ({ kid: keyIdOf(publicKey), name, origin: 'runner', publicKey }));
  return [...local, ...retired, ...runners.filter((k) => !seen.has(k.kid))];
}
