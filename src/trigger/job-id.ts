// Time-sortable random job ids: `j` + 10 base32 chars of unix ms + 16 random base32 chars (26 in all, like run ids).
import { randomFillSync } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

// One getrandom call per 256 ids instead of one per id: ids are minted on the delivery hot path.
const pool = Buffer.alloc(16 * 256);
let poolOffset = pool.length;

function random16(): Buffer {
  if (poolOffset >= pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  poolOffset += 16;
  return pool.subarray(poolOffset - 16, poolOffset);
}

export function newJobId(now: number = Date.now()): string {
  let time = '';
  let t = Math.max(0, Math.floor(now));
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32]! + time;
    t = Math.floor(t / 32);
  }
  const bytes = random16();
  let rand = '';
  for (let i = 0; i < 16; i++) rand += ALPHABET[bytes[i]! % 32]!;
  return `j${time}${rand}`;
}

export const JOB_ID = /^j[0-9a-z]{26}$/;
