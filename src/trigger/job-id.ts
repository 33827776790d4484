// Time-sortable random job ids: `j` + 10 base32 chars of unix ms + 16 random base32 chars (26 in all, like run ids).
import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

export function newJobId(now: number = Date.now()): string {
  let time = '';
  let t = Math.max(0, Math.floor(now));
  for (let i = 0; i < 10; i++) {
    time = ALPHABET[t % 32]! + time;
    t = Math.floor(t / 32);
  }
  const bytes = randomBytes(16);
  let rand = '';
  for (const b of bytes) rand += ALPHABET[b % 32]!;
  return `j${time}${rand}`;
}

export const JOB_ID = /^j[0-9a-z]{26}$/;
