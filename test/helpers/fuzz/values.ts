// Hostile values and body mutations for the fuzz suites: wrong types at every field of a real body, keys that
// shadow Object.prototype, deep nesting, huge strings, invalid UTF-8 and broken JSON.
import type { Rng } from './rng.ts';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Keys that name Object.prototype members: a reader that calls a method on untrusted input trips on these. */
export const PROTO_KEYS = ['toString', '__proto__', 'constructor', 'valueOf', 'hasOwnProperty', 'toJSON', 'then'];

function poisonObject(rng: Rng): string {
  const key = rng.pick(PROTO_KEYS);
  const value = rng.pick(['1', 'null', '{}', '"x"', '[]', '{"toString":1}']);
  return `{"${key}":${value}}`;
}

/** JSON text of a value of a random, usually wrong, type. Raw text, so `__proto__` stays an own key. */
export function hostileJson(rng: Rng): string {
  switch (rng.int(16)) {
    case 0: return 'null';
    case 1: return rng.pick(['true', 'false']);
    case 2: return rng.pick(['0', '-1', '1e308', '-0', '1.5', '9007199254740993', '-9007199254740993', '1e-400']);
    case 3: return JSON.stringify(rng.pick(['', ' ', '-', '--help', '..', '../../etc/passwd', '/', '\u0000', '\u2028', 'x'.repeat(300)]));
    case 4: return '[]';
    case 5: return '{}';
    case 6: return poisonObject(rng);
    case 7: return `[${poisonObject(rng)}]`;
    case 8: return nested(rng, 1 + rng.int(60));
    case 9: return JSON.stringify('\ud83d'.repeat(1 + rng.int(8))); // lone surrogates
    case 10: return `"${'\\ud800'.repeat(1 + rng.int(4))}"`;
    case 11: return JSON.stringify('é'.repeat(1 + rng.int(2000)));
    case 12: return JSON.stringify('a'.repeat(rng.pick([1024, 65_536, 70_000, 200_000])));
    case 13: return JSON.stringify(rng.pick(['2026-13-45T99:99:99Z', 'NaN', 'Infinity', '1e3', '0x10', 'javascript:alert(1)']));
    case 14: return `{"${rng.pick(PROTO_KEYS)}":${nested(rng, 1 + rng.int(20))}}`;
    default: return rng.pick(['[null]', '[1,"a",{}]', '{"":""}', '{"a":{"b":{"c":{}}}}']);
  }
}

/** `depth` levels of arrays/objects around a scalar. */
export function nested(rng: Rng, depth: number): string {
  const open = rng.chance(0.5) ? '[' : '{"a":';
  const close = open === '[' ? ']' : '}';
  return `${open.repeat(depth)}1${close.repeat(depth)}`;
}

/** Every path to a value inside a JSON value (the root is []). */
function paths(value: Json, at: Array<string | number> = [], out: Array<Array<string | number>> = []): Array<Array<string | number>> {
  out.push(at);
  if (Array.isArray(value)) value.forEach((v, i) => paths(v, [...at, i], out));
  else if (value !== null && typeof value === 'object') for (const [k, v] of Object.entries(value)) paths(v, [...at, k], out);
  return out;
}

const HOLE = '"__FUZZ_HOLE__"';

function setAt(value: Json, path: ReadonlyArray<string | number>, replacement: Json): Json {
  if (path.length === 0) return replacement;
  const [head, ...rest] = path;
  if (Array.isArray(value)) return value.map((v, i) => (i === head ? setAt(v, rest, replacement) : v));
  const copy: { [key: string]: Json } = { ...(value as { [key: string]: Json }) };
  copy[head as string] = setAt(copy[head as string] ?? null, rest, replacement);
  return copy;
}

/** Replaces one field (any depth) of a real body with a hostile value; returns JSON text. */
export function mutateField(rng: Rng, body: Json): string {
  const all = paths(body);
  const path = all.length > 1 && rng.chance(0.9) ? all[1 + rng.int(all.length - 1)]! : [];
  return JSON.stringify(setAt(body, path, '__FUZZ_HOLE__')).replace(HOLE, () => hostileJson(rng));
}

/** Adds a key that shadows a prototype member next to a random field (or at the root). */
export function addProtoKey(rng: Rng, body: Json): string {
  const text = JSON.stringify(body);
  const objects = [...text.matchAll(/\{(?=")/g)].map((m) => m.index);
  if (objects.length === 0) return text;
  const at = rng.pick(objects) + 1;
  return `${text.slice(0, at)}"${rng.pick(PROTO_KEYS)}":${hostileJson(rng)},${text.slice(at)}`;
}

/** Broken JSON text derived from a real body: truncated, trailing garbage, comments, NaN, duplicate keys. */
export function brokenJson(rng: Rng, body: Json): string {
  const text = JSON.stringify(body);
  switch (rng.int(8)) {
    case 0: return text.slice(0, rng.int(text.length));
    case 1: return `${text}${rng.pick(['}', ',', ' x', '\u0000', '//c', '{}'])}`;
    case 2: return text.replace(/:(\s*)"/, ':NaN,"');
    case 3: return `/* c */${text}`;
    case 4: return text.replace(/"/, "'");
    case 5: return rng.pick(['', ' ', '\ufeff{}', 'nul', '[', '{', '"', '{"a":1,}', '{"a" 1}']);
    case 6: return text.length > 2 ? `{${text.slice(1, -1)},${text.slice(1, -1)}}` : text;
    default: return `${'['.repeat(rng.pick([65, 100, 1000, 10_000]))}${']'.repeat(rng.int(3))}`;
  }
}

/** Bytes with invalid UTF-8 spliced into the JSON text's first string (or anywhere). */
export function invalidUtf8(rng: Rng, text: string): Buffer {
  const bytes = Buffer.from(text);
  const bad = Buffer.from(rng.pick([[0xff], [0xc3], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xc0, 0xaf], [0xfe, 0xfe]]));
  const quote = bytes.indexOf(0x22, rng.int(Math.max(1, bytes.length)));
  const at = quote >= 0 ? quote + 1 : rng.int(bytes.length + 1);
  return Buffer.concat([bytes.subarray(0, at), bad, bytes.subarray(at)]);
}

/** A JSON value nested `depth` deep at a random field of the body: the recursion probes. */
export function deepAtField(rng: Rng, body: Json, depth: number): string {
  const all = paths(body);
  const path = all.length > 1 ? all[1 + rng.int(all.length - 1)]! : [];
  return JSON.stringify(setAt(body, path, '__FUZZ_HOLE__')).replace(HOLE, () => nested(rng, depth));
}

/** One generated body derived from a real one: the mix every route gets. */
export function fuzzBody(rng: Rng, body: Json): Buffer {
  const roll = rng.int(100);
  if (roll < 40) return Buffer.from(mutateField(rng, body));
  if (roll < 55) return Buffer.from(addProtoKey(rng, body));
  if (roll < 67) return Buffer.from(brokenJson(rng, body));
  if (roll < 77) return invalidUtf8(rng, JSON.stringify(body));
  if (roll < 87) return Buffer.from(deepAtField(rng, body, rng.pick([30, 63, 64, 65, 200, 10_000])));
  if (roll < 92) return Buffer.from(hostileJson(rng));
  return Buffer.from(JSON.stringify(body));
}

export type { Json };
