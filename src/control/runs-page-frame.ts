// What goes around the joined Run JSON texts of a runs-list page, so the page is byte for byte
// JSON.stringify({ items, next_cursor }).
import type { RunKey } from '../db/run-types.ts';
import { encodeRunCursor } from './run-cursor.ts';

export function pageFrame(next: RunKey | null): { open: string; close: string } {
  return { open: '{"items":[', close: `],"next_cursor":${next ? JSON.stringify(encodeRunCursor(next)) : 'null'}}` };
}
